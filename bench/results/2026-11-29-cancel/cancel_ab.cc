// Run(y, t) vs Run(y, t, never-stop callback): interleaved, medians.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "bench/synthetic_weights.h"
#include "op/pmx.h"
#include "op/quantize.h"
using namespace nibble;
int main() {
  const int64_t N = 4096, K = 4096;
  std::vector<float> w = MakeLlmLikeWeight(N, K, 1);
  QuantizeConfig c;
  c.group_size = 128;
  auto q = QuantizePmx(w.data(), Shape{N, K}, c);
  if (!q.ok()) {
    std::printf("%s\n", q.status().message().c_str());
    return 1;
  }
  for (DType out : {DType::kFloat32, DType::kFloat16}) {
    DequantizeOptions o;
    o.output_dtype = out;
    TensorView zs;
    auto d = PreparePmx(q->attrs, q->x.view(), q->scale.view(), q->zero_point_view_or_null(&zs), o);
    if (!d.ok()) {
      std::printf("%s\n", d.status().message().c_str());
      return 1;
    }
    auto y = d->Run(1);
    for (int threads : {1, 2}) {
      std::vector<double> a, b;
      for (int r = 0; r < 41; ++r) {
        for (int v = 0; v < 2; ++v) {
          auto t0 = std::chrono::steady_clock::now();
          Status st = v == 0 ? d->Run(y->mutable_view(), threads)
                             : d->Run(y->mutable_view(), threads, [] { return false; });
          double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          if (!st.ok()) return 2;
          (v == 0 ? a : b).push_back(s);
        }
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      std::printf(
          "%s threads %d: plain %.3f ms, cancellable %.3f ms (medians of 41, interleaved)\n",
          out == DType::kFloat32 ? "f32" : "f16", threads, a[20] * 1e3, b[20] * 1e3);
    }
  }
}
