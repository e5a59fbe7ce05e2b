// Seeded, LLM-like float32 weights for demos, benchmarks and tests:
// Gaussian (std 0.02, per-row std varying by up to 2x) with rare outliers
// (about 0.1% of elements at 8-20 sigma), as in real linear layers.
#ifndef NIBBLE_BENCH_SYNTHETIC_WEIGHTS_H_
#define NIBBLE_BENCH_SYNTHETIC_WEIGHTS_H_

#include <cstdint>
#include <vector>

namespace nibble {

// rows x cols, row-major. Deterministic for a given seed on every platform
// (own generator; no std:: distribution).
std::vector<float> MakeLlmLikeWeight(int64_t rows, int64_t cols, uint64_t seed);

// Accuracy of `approx` against `exact`: RMSE, max |error|, and SQNR in dB
// (10 log10(signal power / noise power)).
struct ErrorStats {
  double rmse = 0, max_abs = 0, sqnr_db = 0;
};
ErrorStats MeasureError(const float* exact, const float* approx, int64_t n);

}  // namespace nibble

#endif  // NIBBLE_BENCH_SYNTHETIC_WEIGHTS_H_
