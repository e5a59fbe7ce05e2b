#include "kernels/matmul.h"

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// The 64 partial sums of MB dot products of one weight row b with rows
// a, a + lda, ... (each weight vector loaded once for all MB rows) into
// p[r * 64 ..]: G vectors of N lanes per row, lane l of vector g holding
// partial sum g * N + l; the elements after the last full 64 are added by
// the caller.
template <size_t G, size_t MB, class D>
HWY_INLINE void PartialSums(D d, const float* a, int64_t lda, const float* b, int64_t k64,
                            float* p) {
  constexpr size_t N = kDotLanes / G;
  using V = hn::Vec<D>;
  V acc[MB][G];
  for (size_t r = 0; r < MB; ++r) {
    for (size_t g = 0; g < G; ++g) acc[r][g] = hn::Zero(d);
  }
  for (int64_t t = 0; t < k64; t += kDotLanes) {
    for (size_t g = 0; g < G; ++g) {
      const V wv = hn::LoadU(d, b + t + g * N);
      for (size_t r = 0; r < MB; ++r) {
        const float* ar = a + static_cast<int64_t>(r) * lda;
        acc[r][g] = hn::Add(acc[r][g], hn::Mul(hn::LoadU(d, ar + t + g * N), wv));
      }
    }
  }
  for (size_t r = 0; r < MB; ++r) {
    for (size_t g = 0; g < G; ++g) hn::StoreU(acc[r][g], d, p + r * kDotLanes + g * N);
  }
}

// Rows of X in blocks of MB (then one at a time) against each row of W.
template <size_t G, size_t MB>
HWY_INLINE void DotRowsG(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                         int64_t ldw, int64_t k, float* y, int64_t ldy) {
  const hn::FixedTag<float, kDotLanes / G> d;
  const int64_t k64 = k / kDotLanes * kDotLanes;
  HWY_ALIGN float p[MB * kDotLanes];
  // X rows outer (a block of them stays in cache), W rows inner (the
  // caller's tile of W stays in cache).
  int64_t i = 0;
  for (; i + static_cast<int64_t>(MB) <= m; i += static_cast<int64_t>(MB)) {
    for (int64_t j = 0; j < n; ++j) {
      const float* b = w + j * ldw;
      PartialSums<G, MB>(d, x + i * ldx, ldx, b, k64, p);
      for (size_t r = 0; r < MB; ++r) {
        const float* a = x + (i + static_cast<int64_t>(r)) * ldx;
        float* pr = p + r * kDotLanes;
        for (int64_t t = k64; t < k; ++t) pr[t % kDotLanes] += a[t] * b[t];
        y[(i + static_cast<int64_t>(r)) * ldy + j] = ReduceDotLanes(pr);
      }
    }
  }
  for (; i < m; ++i) {
    const float* a = x + i * ldx;
    for (int64_t j = 0; j < n; ++j) {
      const float* b = w + j * ldw;
      PartialSums<G, 1>(d, a, ldx, b, k64, p);
      for (int64_t t = k64; t < k; ++t) p[t % kDotLanes] += a[t] * b[t];
      y[i * ldy + j] = ReduceDotLanes(p);
    }
  }
}
#endif

// Returns false when this target has no vector form (the caller runs the
// reference: the same bits).
bool DotRowsSimd(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n, int64_t ldw,
                 int64_t k, float* y, int64_t ldy) {
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
  constexpr size_t kLanes = HWY_LANES(float);
  if constexpr (kLanes >= 16) {
    DotRowsG<4, 4>(x, m, ldx, w, n, ldw, k, y, ldy);
    return true;
  } else if constexpr (kLanes == 8) {
    DotRowsG<8, 2>(x, m, ldx, w, n, ldw, k, y, ldy);
    return true;
  } else if constexpr (kLanes == 4) {
    DotRowsG<16, 1>(x, m, ldx, w, n, ldw, k, y, ldy);
    return true;
  }
#endif
  (void)x, (void)m, (void)ldx, (void)w, (void)n, (void)ldw, (void)k, (void)y, (void)ldy;
  return false;
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {

HWY_EXPORT(DotRowsSimd);

void DotRowsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                      int64_t ldw, int64_t k, float* y, int64_t ldy) {
  float p[kDotLanes];
  for (int64_t j = 0; j < n; ++j) {
    const float* b = w + j * ldw;
    for (int64_t i = 0; i < m; ++i) {
      const float* a = x + i * ldx;
      std::memset(p, 0, sizeof p);
      for (int64_t t = 0; t < k; ++t) p[t % kDotLanes] += a[t] * b[t];
      y[i * ldy + j] = ReduceDotLanes(p);
    }
  }
}

void DotRows(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n, int64_t ldw,
             int64_t k, float* y, int64_t ldy) {
  if (!HWY_DYNAMIC_DISPATCH(DotRowsSimd)(x, m, ldx, w, n, ldw, k, y, ldy)) {
    DotRowsReference(x, m, ldx, w, n, ldw, k, y, ldy);
  }
}

}  // namespace nibble
#endif  // HWY_ONCE
