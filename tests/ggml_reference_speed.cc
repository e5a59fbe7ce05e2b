// Speed of nibble's whole GGUF path (PrepareGgml + Run, from the stored
// block bytes to floats) against ggml's reference dequantization
// (dequantize_row_<type>, as transliterated in tests/ggml_oracle.h and
// compiled with the same flags), both at one thread, for every type the
// oracle decodes. Not a test: a measurement tool.
//
//   ggml_reference_speed [ROWS COLS [REPS]]     (default 4096 4096 7)
//
// Prints one line per type: milliseconds of each and nibble's speed-up. The
// oracle writes float32 only (as ggml's reference does); nibble is timed
// writing float32, float16 and bfloat16.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <functional>
#include <vector>

#include "formats/gguf.h"
#include "op/checkpoint.h"
#include "tests/ggml_oracle.h"

namespace {

double MedianMs(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                    .count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
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
  std::printf("%-8s %10s %10s %10s %10s %9s %9s %9s\n", "type", "ggml ms", "f32 ms", "f16 ms",
              "bf16 ms", "x f32", "x f16", "x bf16");
  int slower = 0;
  for (uint32_t type : kOracleTypes) {
    auto blocks = SyntheticGgmlBlocks(type, rows, cols, 7);
    if (!blocks.ok()) {
      std::fprintf(stderr, "%s\n", blocks.status().message().c_str());
      return 1;
    }
    const int be = OracleBlockElems(type), bb = OracleBlockBytes(type);
    std::vector<float> ref(static_cast<size_t>(rows * cols));
    const double ggml = MedianMs(reps, [&] {
      for (int64_t b = 0; b < rows * cols / be; ++b) {
        OracleDecodeBlock(type, blocks->data() + b * bb, ref.data() + b * be);
      }
    });
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
    std::printf("%-8s %10.2f %10.2f %10.2f %10.2f %9.2f %9.2f %9.2f\n",
                GgmlTypeName(type).c_str(), ggml, ms[0], ms[1],
                ms[2], ggml / ms[0], ggml / ms[1], ggml / ms[2]);
    for (double m : ms) slower += m > ggml ? 1 : 0;
  }
  std::printf("%d of %zu nibble timings slower than ggml's reference (f32)\n", slower,
              3 * std::size(kOracleTypes));
  return 0;
}
