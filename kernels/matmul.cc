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
// One dot product's 64 partial sums into p: G vectors of N lanes, lane l
// of vector g holding p[g * N + l]; the elements after the last full 64
// are added by the caller.
template <size_t G, class D>
HWY_INLINE void PartialSums(D d, const float* a, const float* b, int64_t k64, float* p) {
  constexpr size_t N = kDotLanes / G;
  using V = hn::Vec<D>;
  V acc[G];
  for (size_t g = 0; g < G; ++g) acc[g] = hn::Zero(d);
  for (int64_t t = 0; t < k64; t += kDotLanes) {
    for (size_t g = 0; g < G; ++g) {
      acc[g] = hn::Add(acc[g], hn::Mul(hn::LoadU(d, a + t + g * N), hn::LoadU(d, b + t + g * N)));
    }
  }
  for (size_t g = 0; g < G; ++g) hn::StoreU(acc[g], d, p + g * N);
}

template <size_t G>
HWY_INLINE void DotRowsG(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                         int64_t ldw, int64_t k, float* y, int64_t ldy) {
  const hn::FixedTag<float, kDotLanes / G> d;
  const int64_t k64 = k / kDotLanes * kDotLanes;
  HWY_ALIGN float p[kDotLanes];
  for (int64_t j = 0; j < n; ++j) {
    const float* b = w + j * ldw;
    for (int64_t i = 0; i < m; ++i) {
      const float* a = x + i * ldx;
      PartialSums<G>(d, a, b, k64, p);
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
    DotRowsG<4>(x, m, ldx, w, n, ldw, k, y, ldy);
    return true;
  } else if constexpr (kLanes == 8) {
    DotRowsG<8>(x, m, ldx, w, n, ldw, k, y, ldy);
    return true;
  } else if constexpr (kLanes == 4) {
    DotRowsG<16>(x, m, ldx, w, n, ldw, k, y, ldy);
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
