// W4A16-style GEMV/GEMM the way a weight-only-quant runtime does it: the
// int4x4 weight W [N, K] stays packed; each thread dequantizes a tile of
// rows into an L2-sized buffer with the tile API and multiplies it with the
// activations X [M, K] (y = X W^T). Compared with dequantizing the whole
// weight first, it never writes (or re-reads) the float weight.
//
//   w4a16_gemv [--shape N,K] [--m M] [--reps R] [--check]
// --check: exit 1 unless the tiled result equals dequantize-then-multiply
// bit for bit (same dot-product order on the same dequantized values).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/synthetic_weights.h"
#include "op/matmul.h"
#include "op/pmx.h"
#include "op/quantize.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// One output: dot(w_row, x) with 8 partial sums (fixed order, so every
// caller computing the same row gets the same bits).
float Dot(const float* w, const float* x, int64_t k) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= k; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += w[i + j] * x[i + j];
  }
  for (; i < k; ++i) acc[i % 8] += w[i] * x[i];
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// y[m][n] = dot(W[n], X[m]) from a dequantized weight.
void GemmRows(const float* w, int64_t rows, int64_t k, const float* x, int64_t m, float* y,
              int64_t n_total, int64_t n0) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < m; ++i) y[i * n_total + n0 + r] = Dot(w + r * k, x + i * k, k);
  }
}

double Seconds(const std::chrono::steady_clock::time_point& t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 4096, k = 4096, m = 1;
  int reps = 10;
  bool check = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--shape" && i + 1 < argc) {
      if (std::sscanf(argv[++i], "%ld,%ld", &n, &k) != 2 || n <= 0 || k <= 0 || n % 4) {
        std::fprintf(stderr, "--shape N,K with N a multiple of 4\n");
        return 2;
      }
    } else if (a == "--m" && i + 1 < argc) {
      m = std::atol(argv[++i]);
    } else if (a == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else if (a == "--check") {
      check = true;
    } else {
      std::fprintf(stderr, "usage: w4a16_gemv [--shape N,K] [--m M] [--reps R] [--check]\n");
      return 2;
    }
  }
  const auto wf = nibble::MakeLlmLikeWeight(n, k, 1);
  nibble::QuantizeConfig cfg;
  cfg.group_size = k % 128 == 0 ? 128 : k;
  auto q = nibble::QuantizePmx(wf.data(), {n, k}, cfg);
  auto d = q.ok() ? nibble::PreparePmx(q->attrs, q->x.view(), q->scale.view(), nullptr)
                  : nibble::StatusOr<nibble::Dequantizer>(q.status());
  if (!d.ok()) {
    std::fprintf(stderr, "%s\n", d.status().message().c_str());
    return 1;
  }
  std::vector<float> x(static_cast<size_t>(m * k));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  std::vector<float> y_tiled(static_cast<size_t>(m * n)), y_full(static_cast<size_t>(m * n));

  // Tile: rows whose float32 copy fits in 256 KiB (L2).
  const int64_t tile_rows = std::max<int64_t>(1, (int64_t{256} << 10) / (k * 4));
  auto tiled = [&] {
#ifdef _OPENMP
#pragma omp parallel
#endif
    {
      std::vector<float> tile(static_cast<size_t>(tile_rows * k));
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
      for (int64_t n0 = 0; n0 < n; n0 += tile_rows) {
        const int64_t rows = std::min(tile_rows, n - n0);
        (void)d->RunTile(n0, n0 + rows, 0, k, tile.data(), k);  // caller's thread, no allocation
        GemmRows(tile.data(), rows, k, x.data(), m, y_tiled.data(), n, n0);
      }
    }
  };
  auto y_w = nibble::Tensor::Allocate(nibble::DType::kFloat32, {n, k});
  auto full = [&] {
    (void)d->Run(y_w->mutable_view(), 0);
    const float* w = y_w->data_as<float>();
#ifdef _OPENMP
#pragma omp parallel for schedule(static)
#endif
    for (int64_t n0 = 0; n0 < n; n0 += tile_rows) {
      GemmRows(w + n0 * k, std::min(tile_rows, n - n0), k, x.data(), m, y_full.data(), n, n0);
    }
  };
  std::vector<float> y_lib(static_cast<size_t>(m * n));
  const nibble::TensorView xv{nibble::DType::kFloat32, {m, k}, x.data(), x.size() * 4};
  const nibble::MutableTensorView yv{
      nibble::DType::kFloat32, {m, n}, y_lib.data(), y_lib.size() * 4};
  auto library = [&] { (void)nibble::MatMul(*d, xv, yv); };
  tiled();
  full();
  library();
  const bool same = std::memcmp(y_tiled.data(), y_full.data(), y_full.size() * 4) == 0;
  if (check) {
    std::printf("tiled == dequantize-then-multiply: %s\n", same ? "yes" : "NO");
    std::printf("%d passed, %d failed\n", same ? 1 : 0, same ? 0 : 1);
    return same ? 0 : 1;
  }
  std::vector<double> tt, tf, tl;
  for (int r = 0; r < reps; ++r) {
    auto t1 = std::chrono::steady_clock::now();
    library();
    tl.push_back(Seconds(t1));
    auto t0 = std::chrono::steady_clock::now();
    tiled();
    tt.push_back(Seconds(t0));
    t0 = std::chrono::steady_clock::now();
    full();
    tf.push_back(Seconds(t0));
  }
  std::sort(tt.begin(), tt.end());
  std::sort(tf.begin(), tf.end());
  std::sort(tl.begin(), tl.end());
  int threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
#endif
  std::printf("W [%ld, %ld] int4x4 G=%ld, X [%ld, %ld], %d threads, tiles of %ld rows (%ld KiB)\n",
              n, k, cfg.group_size, m, k, threads, tile_rows, tile_rows * k * 4 / 1024);
  std::printf("tiled (dequantize tile + multiply):   %8.3f ms (median of %d)\n",
              tt[tt.size() / 2] * 1e3, reps);
  std::printf("dequantize whole weight, then multiply: %8.3f ms\n", tf[tf.size() / 2] * 1e3);
  std::printf("nibble::MatMul (op/matmul.h):           %8.3f ms\n", tl[tl.size() / 2] * 1e3);
  std::printf("speedup %.2fx; results identical: %s\n", tf[tf.size() / 2] / tt[tt.size() / 2],
              same ? "yes" : "no");
  return same ? 0 : 1;
}
