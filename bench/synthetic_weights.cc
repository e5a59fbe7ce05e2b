#include "bench/synthetic_weights.h"

#include <cmath>
#include <limits>

namespace nibble {

namespace {
// splitmix64: tiny, high-quality, and identical everywhere.
struct Rng {
  uint64_t s;
  uint64_t Next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double Gaussian() {                                                         // Box-Muller
    const double u1 = 1.0 - Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};
}  // namespace

std::vector<float> MakeLlmLikeWeight(int64_t rows, int64_t cols, uint64_t seed) {
  std::vector<float> w(static_cast<size_t>(rows * cols));
  Rng rng{seed};
  for (int64_t r = 0; r < rows; ++r) {
    const double row_std = 0.02 * (0.5 + rng.Uniform());  // 0.01 .. 0.03
    float* row = w.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) {
      double v = rng.Gaussian() * row_std;
      if (rng.Uniform() < 1e-3)
        v = (rng.Uniform() < 0.5 ? -1 : 1) * row_std * (8 + 12 * rng.Uniform());
      row[c] = static_cast<float>(v);
    }
  }
  return w;
}

ErrorStats MeasureError(const float* exact, const float* approx, int64_t n) {
  double se = 0, sig = 0, mx = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double e = static_cast<double>(approx[k]) - exact[k];
    se += e * e;
    sig += static_cast<double>(exact[k]) * exact[k];
    mx = std::fmax(mx, std::fabs(e));
  }
  ErrorStats s;
  s.rmse = n ? std::sqrt(se / static_cast<double>(n)) : 0;
  s.max_abs = mx;
  s.sqnr_db = se > 0 ? 10 * std::log10(sig / se) : std::numeric_limits<double>::infinity();
  return s;
}

}  // namespace nibble
