#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "checkpoint/methods/ggml.h"
#include "op/dequantizer.h"
using namespace nibble;
// gq TYPEID ROWS f16|f32|bf16 [reps]: in-cache (ROWS x 4096) dequant, best of reps, G el/s.
int main(int argc, char** argv) {
  const uint32_t type = atoi(argv[1]);
  const int64_t R = atoi(argv[2]), K = 4096;
  const DType out = argv[3][0] == 'b'   ? DType::kBFloat16
                    : argv[3][1] == '3' ? DType::kFloat32
                                        : DType::kFloat16;
  const int reps = argc > 4 ? atoi(argv[4]) : 200;
  auto q = SyntheticGgmlBlocks(type, R, K, 1);
  if (!q.ok()) {
    std::printf("%s\n", q.status().message().c_str());
    return 1;
  }
  auto d = PrepareGgml(type, {K, R}, q->data(), q->size(), out, "x");
  if (!d.ok()) {
    std::printf("%s\n", d.status().message().c_str());
    return 1;
  }
  std::vector<uint8_t> y(R * K * 4 + 64);
  double best = 1e9;
  for (int rep = 0; rep < reps; ++rep) {
    MutableTensorView yv{out, d->output().shape, y.data(), size_t(R * K * 4)};
    auto t1 = std::chrono::steady_clock::now();
    auto st = d->Run(yv, 1);
    auto t2 = std::chrono::steady_clock::now();
    if (!st.ok()) {
      std::printf("%s\n", st.message().c_str());
      return 1;
    }
    best = std::min(best, std::chrono::duration<double>(t2 - t1).count());
  }
  std::printf("type %u %s: %.2f G el/s\n", type, argv[3], R * K / best / 1e9);
}
