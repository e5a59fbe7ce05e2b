// Where a GPTQ / AWQ tensor's codes lie, and where a tile starts, against
// speed: one thread, a synthetic 4096 x 4096 layer (G = 128) quantized
// with nibble's own GPTQ / AWQ writers, float16 or float32 output.
//  - tiles: RunTile of 256 KiB of output (whole rows: 32 of float16, 16
//    of float32) starting at each given row, the same tile again and again
//    (the embedding path; rows that are not a multiple of 128 start in the
//    middle of AWQ's 64-byte word lines, of 16 for GPTQ);
//  - whole: Run() of the whole tensor into a 64-byte aligned output (the
//    load path) with the qweight copied to each given byte offset past a
//    64-byte boundary (a runtime's mmap of a safetensors file puts tensors
//    at any 4-byte offset; nibble's own readers align them).
// Each figure is the best of 7 runs, G elements / s. Not a test: a
// measurement tool (the README's speed section quotes it).
//
//   nibble_tile_probe awq|gptq|gptq-act tiles|whole LIST [f32]
//     e.g. nibble_tile_probe awq tiles 0,32,40,4064
//          nibble_tile_probe gptq whole 0,4,16,32
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/synthetic_weights.h"
#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/gptq.h"
#include "testing/quantize_checkpoint.h"

namespace nibble {
namespace {

constexpr int64_t kN = 4096, kK = 4096, kGroup = 128;

// `bytes` of 64-byte aligned storage (a Tensor's); exits if it fails.
Tensor AlignedBytes(int64_t bytes) {
  auto t = Tensor::Allocate(DType::kUInt8, Shape{bytes});
  if (!t.ok()) {
    std::fprintf(stderr, "%s\n", t.status().message().c_str());
    std::exit(1);
  }
  return std::move(*t);
}

std::vector<int64_t> ParseList(const char* s) {
  std::vector<int64_t> v;
  while (*s != '\0') {
    char* end = nullptr;
    v.push_back(std::strtoll(s, &end, 10));
    if (end == s) break;
    s = *end == ',' ? end + 1 : end;
  }
  return v;
}

int Main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s awq|gptq|gptq-act tiles|whole LIST [f32]\n", argv[0]);
    return 2;
  }
  const std::string layout = argv[1], mode = argv[2];
  const std::vector<int64_t> list = ParseList(argv[3]);
  const bool f32 = argc > 4 && std::string(argv[4]) == "f32";
  if ((layout != "awq" && layout != "gptq" && layout != "gptq-act") ||
      (mode != "tiles" && mode != "whole") || list.empty()) {
    std::fprintf(stderr, "bad arguments\n");
    return 2;
  }
  const DType out = f32 ? DType::kFloat32 : DType::kFloat16;
  const int64_t out_bytes = f32 ? 4 : 2;
  const std::vector<float> w = MakeLlmLikeWeight(kN, kK, 1);
  // The tensors, and the qweight's bytes (copied to each offset below).
  Tensor qweight, qzeros, scales, g_idx;
  if (layout == "awq") {
    auto q = QuantizeAwq(w.data(), kN, kK, kGroup);
    if (!q.ok()) return std::fprintf(stderr, "%s\n", q.status().message().c_str()), 1;
    qweight = std::move(q->qweight);
    qzeros = std::move(q->qzeros);
    scales = std::move(q->scales);
  } else {
    std::vector<int32_t> order;
    if (layout == "gptq-act") {  // a fixed scattered channel order
      for (int64_t k = 0; k < kK; ++k)
        order.push_back(static_cast<int32_t>(k * 7919 % (kK / kGroup)));
    }
    auto q = QuantizeGptq(w.data(), kN, kK, kGroup, /*sym=*/false, /*v2=*/false, order);
    if (!q.ok()) return std::fprintf(stderr, "%s\n", q.status().message().c_str()), 1;
    qweight = std::move(q->qweight);
    qzeros = std::move(q->qzeros);
    scales = std::move(q->scales);
    g_idx = std::move(q->g_idx);
  }
  const TensorView qv = qweight.view(), zv = qzeros.view(), gv = g_idx.view();
  Tensor codes = AlignedBytes(static_cast<int64_t>(qv.size_bytes) + 64);
  auto prepare = [&](int64_t offset) {
    TensorView moved = qv;
    std::memcpy(codes.data_as<char>() + offset, qv.data, qv.size_bytes);
    moved.data = codes.data_as<char>() + offset;
    if (layout == "awq") return PrepareAwq(kGroup, moved, &zv, scales.view(), out, "probe");
    GptqOptions o;
    o.group_size = kGroup;
    return PrepareGptq(o, moved, &zv, scales.view(), layout == "gptq-act" ? &gv : nullptr, out,
                       "probe");
  };
  auto best_of = [](const auto& fn) {
    double best = 1e30;
    for (int rep = 0; rep < 7; ++rep) {
      const double t0 = omp_get_wtime();
      fn();
      best = std::min(best, omp_get_wtime() - t0);
    }
    return best;
  };
  std::printf("%s %s %s, one thread, G el/s (best of 7)\n", layout.c_str(), mode.c_str(),
              f32 ? "float32" : "float16");
  if (mode == "tiles") {
    auto d = prepare(0);
    if (!d.ok()) return std::fprintf(stderr, "%s\n", d.status().message().c_str()), 1;
    const int64_t rows = 256 * 1024 / (kK * out_bytes), inner = 100;
    Tensor tile = AlignedBytes(rows * kK * out_bytes);
    for (const int64_t r0 : list) {
      if (r0 < 0 || r0 + rows > d->rows()) {
        std::fprintf(stderr, "row %lld: out of range\n", static_cast<long long>(r0));
        return 2;
      }
      bool ok = true;
      const double s = best_of([&] {
        for (int64_t i = 0; i < inner; ++i)
          ok = d->RunTile(r0, r0 + rows, 0, kK, tile.data(), kK).ok() && ok;
      });
      if (!ok) return std::fprintf(stderr, "RunTile failed\n"), 1;
      std::printf("  tile rows %lld-%lld: %.2f\n", static_cast<long long>(r0),
                  static_cast<long long>(r0 + rows - 1),
                  static_cast<double>(rows * kK * inner) / s * 1e-9);
    }
    return 0;
  }
  Tensor y = AlignedBytes(kN * kK * out_bytes);
  std::memset(y.data(), 0, y.size_bytes());
  for (const int64_t offset : list) {
    if (offset < 0 || offset >= 64 || offset % 4 != 0) {
      std::fprintf(stderr, "offset %lld: a multiple of 4 in 0..60\n",
                   static_cast<long long>(offset));
      return 2;
    }
    auto d = prepare(offset);
    if (!d.ok()) return std::fprintf(stderr, "%s\n", d.status().message().c_str()), 1;
    MutableTensorView yv{out, d->output().shape, y.data(), y.size_bytes()};
    bool ok = true;
    const double s = best_of([&] { ok = d->Run(yv, 1).ok() && ok; });
    if (!ok) return std::fprintf(stderr, "Run failed\n"), 1;
    std::printf("  whole tensor, codes %2lld bytes past a line: %.2f\n",
                static_cast<long long>(offset), static_cast<double>(kN * kK) / s * 1e-9);
  }
  return 0;
}

}  // namespace
}  // namespace nibble

int main(int argc, char** argv) { return nibble::Main(argc, argv); }
