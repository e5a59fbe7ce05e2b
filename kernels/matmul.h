// The dot products of nibble's matmul (op/matmul.h), in one fixed order
// that every SIMD target reproduces bit for bit: Highway dynamic dispatch
// over the same definition as DotRowsReference.
#ifndef NIBBLE_KERNELS_MATMUL_H_
#define NIBBLE_KERNELS_MATMUL_H_

#include <cstdint>
#include <cstring>

namespace nibble {

// Partial sums of one dot product.
inline constexpr int kDotLanes = 16;

// One step of a partial sum: a * b + p with one rounding (IEEE
// fusedMultiplyAdd, as every SIMD target's fused multiply-add computes it,
// == std::fma). Computed here without the C library's fmaf, which is
// slow in software where the CPU has no FMA (and in glibc 2.36 even where
// it has): a * b is exact in float64, TwoSum gives the float64 sum's exact
// error e, the sum is rounded to odd (where e != 0, the neighbour on e's
// side with an odd last bit), and that rounds to float32 as the exact sum
// does (kernels/matmul.cc DotStepV: the same steps in vectors).
inline float DotStep(float a, float b, float p) {
  const double x = static_cast<double>(a) * static_cast<double>(b), c = p, s = x + c;
  const double bb = s - x, e = (x - (s - bb)) + (c - bb);
  if (e == 0 || e - e != 0) return static_cast<float>(s);  // exact, or not finite
  uint64_t bits;
  std::memcpy(&bits, &s, sizeof bits);
  if ((e < 0) != (s < 0)) --bits;  // toward zero (s != 0: x + c == 0 is exact)
  bits |= 1;
  double odd;
  std::memcpy(&odd, &bits, sizeof odd);
  return static_cast<float>(odd);
}

// y[i * ldy + j] = Dot(x + i * ldx, w + j * ldw, k) for i < m, j < n, where
// Dot(a, b, k) is exactly, on every target:
//   p[0..15] = +0; for t = 0, 1, ..., k - 1: p[t % 16] = fma(a[t], b[t], p[t % 16])
//   (DotStep: a fused multiply-add, a[t] * b[t] + p rounded once to float32);
//   then halving: p[j] += p[j + h] for h = 8, 4, 2, 1, j < h;
//   Dot = p[0].
// 16 partial sums are one AVX-512 vector (two AVX2, four SSE4 ones) per
// product: blocks of 4 x 4 products (AVX-512) keep their accumulators in
// registers, each loaded vector serving 4 products. SSE4, which has no
// fused multiply-add, computes each step exactly in float64 (rounded to
// odd, then to float32: the same bits, slower); the scalar target runs the
// scalar definition (DotStep).
// Single-threaded, no allocation, no validation; y does not overlap x or w.
void DotRows(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n, int64_t ldw,
             int64_t k, float* y, int64_t ldy);

// DotRows in chunks of K, for tiles that do not hold whole rows: p holds
// the partial sums of the m x n dot products, product (i, j)'s at
// p + (i * n + j) * kDotLanes (kDotLanes floats). Adds, in order,
//   p_ij[t % kDotLanes] = DotStep(x[i * ldx + t], w[j * ldw + t], p_ij[t % kDotLanes]),
// t < k (as DotRows). Starting from +0 and
// called on consecutive chunks of K whose starts are multiples of
// kDotLanes (x and w advanced to the chunk; only the last chunk's length
// may be any), FinishDotRows then gives exactly DotRows's y.
// Single-threaded, no allocation, no validation.
void AccumulateDotRows(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                       int64_t ldw, int64_t k, float* p);
// y[i * ldy + j] = the halving sum of p_ij (p is overwritten).
void FinishDotRows(float* p, int64_t m, int64_t n, float* y, int64_t ldy);
// The scalar definition of AccumulateDotRows.
void AccumulateDotRowsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                                int64_t ldw, int64_t k, float* p);

// AccumulateDotRows with W by columns, as a tile of the [K, N] matrix
// holds it: W's row j, element t at w[t * ldw + j]. The partial sums lie
// lane-major, so that a vector of features is one load: product (i, j)'s
// sum l at pt[(i * kDotLanes + l) * n + j]. Adds, in order,
//   pt_ij[t % kDotLanes] = DotStep(x[i * ldx + t], w[t * ldw + j], pt_ij[..]), t < k.
// Same chunk rules as
// AccumulateDotRows; FinishDotCols then gives exactly DotRows's y.
// Single-threaded, no allocation, no validation.
void AccumulateDotCols(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                       int64_t ldw, int64_t k, float* pt);
// y[i * ldy + j] = the halving sum of pt_ij (pt is overwritten).
void FinishDotCols(float* pt, int64_t m, int64_t n, float* y, int64_t ldy);
// The scalar definition of AccumulateDotCols.
void AccumulateDotColsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                                int64_t ldw, int64_t k, float* pt);

// The scalar definition of DotRows.
void DotRowsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                      int64_t ldw, int64_t k, float* y, int64_t ldy);

// The halving sum of kDotLanes partial sums (p is overwritten).
inline float ReduceDotLanes(float* p) {
  for (int h = kDotLanes / 2; h >= 1; h /= 2) {
    for (int j = 0; j < h; ++j) p[j] += p[j + h];
  }
  return p[0];
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_MATMUL_H_
