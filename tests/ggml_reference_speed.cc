// Speed of nibble's whole GGUF path (PrepareGgml + Run, from the stored
// block bytes to floats) against ggml's reference dequantization
// (dequantize_row_<type>, as transliterated in tests/ggml_oracle.h and
// compiled with the same flags), both at one thread, for every type the
// oracle decodes. Not a test: a measurement tool.
//
//   ggml_reference_speed [ROWS COLS [REPS]]     (default 4096 4096 7)
//
// Prints one line per type: milliseconds of each and nibble's speed-up per
// output type. ggml's reference writes float32; for float16 / bfloat16 the
// ggml side is that decode followed, block by block while it is in cache,
// by ggml's conversion (F16C's vcvtps2ph; ggml_compute_fp32_to_bf16's
// rounding) — what a loader built on ggml pays for those outputs.
#include <immintrin.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <vector>

#include "bench/group_size_bench.h"
#include "checkpoint/methods/ggml.h"
#include "formats/gguf.h"
#include "tests/ggml_oracle.h"

namespace {

__attribute__((target("avx2,f16c"))) void ToF16(const float* x, uint16_t* y, int n) {
  for (int i = 0; i < n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i),
                     _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

// ggml_compute_fp32_to_bf16.
void ToBF16(const float* x, uint16_t* y, int n) {
  for (int i = 0; i < n; ++i) {
    uint32_t u;
    std::memcpy(&u, x + i, 4);
    y[i] = (u & 0x7fffffffu) > 0x7f800000u
               ? static_cast<uint16_t>((u >> 16) | 64)
               : static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
  }
}

double MedianMs(int reps, const std::function<void()>& fn) {
  return 1e3 * nibble::MedianSeconds(reps, fn);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace nibble;
  using namespace nibble::testing;
  const int64_t rows = argc > 2 ? std::atoll(argv[1]) : 4096;
  const int64_t cols = argc > 2 ? std::atoll(argv[2]) : 4096;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 7;
  if (rows <= 0 || cols <= 0 || cols % 256 != 0 || reps <= 0) {
    std::fprintf(stderr, "usage: ggml_reference_speed [ROWS COLS [REPS]] (COLS %% 256 == 0)\n");
    return 2;
  }
  std::printf("%-8s %8s %8s %8s %8s %8s %8s %7s %7s %7s\n", "type", "ggml f32", "ggml f16",
              "ggml bf16", "f32 ms", "f16 ms", "bf16 ms", "x f32", "x f16", "x bf16");
  int slower = 0;
  for (uint32_t type : kOracleTypes) {
    auto blocks = SyntheticGgmlBlocks(type, rows, cols, 7);
    if (!blocks.ok()) {
      std::fprintf(stderr, "%s\n", blocks.status().message().c_str());
      return 1;
    }
    const int be = OracleBlockElems(type), bb = OracleBlockBytes(type);
    std::vector<float> ref(static_cast<size_t>(rows * cols));
    double ggml[3];
    ggml[0] = MedianMs(reps, [&] {
      for (int64_t b = 0; b < rows * cols / be; ++b) {
        OracleDecodeBlock(type, blocks->data() + b * bb, ref.data() + b * be);
      }
    });
    std::vector<uint16_t> half(static_cast<size_t>(rows * cols));
    for (int i = 1; i < 3; ++i) {
      ggml[i] = MedianMs(reps, [&] {
        float tmp[256];
        for (int64_t b = 0; b < rows * cols / be; ++b) {
          OracleDecodeBlock(type, blocks->data() + b * bb, tmp);
          (i == 1 ? ToF16 : ToBF16)(tmp, half.data() + b * be, be);
        }
      });
    }
    double ms[3];
    const DType dts[3] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
    std::vector<uint8_t> out(static_cast<size_t>(rows * cols * 4));
    for (int i = 0; i < 3; ++i) {
      ms[i] = MedianMs(reps, [&] {
        auto d = PrepareGgml(type, {cols, rows}, blocks->data(), blocks->size(), dts[i], "w");
        if (!d.ok()) std::abort();
        MutableTensorView y{d->output().dtype, d->output().shape, out.data(), out.size()};
        if (!d->Run(y, 1).ok()) std::abort();
      });
    }
    // Same bits as the reference (f32): the timings are of correct work.
    auto d = PrepareGgml(type, {cols, rows}, blocks->data(), blocks->size(), dts[0], "w");
    MutableTensorView y{d->output().dtype, d->output().shape, out.data(), out.size()};
    if (!d->Run(y, 1).ok() || std::memcmp(out.data(), ref.data(), ref.size() * 4) != 0) {
      std::fprintf(stderr, "type %u: nibble != reference\n", type);
      return 1;
    }
    std::printf("%-8s %8.2f %8.2f %8.2f %8.2f %8.2f %8.2f %7.2f %7.2f %7.2f\n",
                GgmlTypeName(type).c_str(), ggml[0], ggml[1], ggml[2], ms[0], ms[1], ms[2],
                ggml[0] / ms[0], ggml[1] / ms[1], ggml[2] / ms[2]);
    for (int i = 0; i < 3; ++i) slower += ms[i] > ggml[i] ? 1 : 0;
  }
  std::printf("%d of %zu nibble timings slower than ggml's (same output type)\n", slower,
              3 * std::size(kOracleTypes));
  return 0;
}
