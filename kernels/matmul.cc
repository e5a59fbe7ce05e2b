#include "kernels/matmul.h"

#include <cstring>
#include <type_traits>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/matmul.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
// DotStep on vectors: a * b + c rounded once per lane. Where the target
// has no fused multiply-add (SSE4), exactly as one: a * b is exact in
// float64 and so is TwoSum's error e of s = a * b + c there; s is then
// rounded to odd (where e != 0, the float64 neighbour on e's side with an
// odd last bit: toward zero where e and s differ in sign), which makes
// its rounding to float32 the correct rounding of the exact sum.
template <class D>
HWY_INLINE hn::Vec<D> DotStepV(D d, hn::Vec<D> a, hn::Vec<D> b, hn::Vec<D> c) {
#if HWY_NATIVE_FMA
  (void)d;
  return hn::MulAdd(a, b, c);
#else
  const hn::Half<D> dh;
  const hn::Rebind<double, decltype(dh)> dd;
  const hn::RebindToSigned<decltype(dd)> di;
  const hn::RebindToUnsigned<decltype(dd)> du;
  auto half = [&](hn::Vec<decltype(dh)> x, hn::Vec<decltype(dh)> y,
                  hn::Vec<decltype(dh)> z) HWY_ATTR {
    const auto p = hn::Mul(hn::PromoteTo(dd, x), hn::PromoteTo(dd, y));
    const auto cz = hn::PromoteTo(dd, z);
    const auto s = hn::Add(p, cz);
    const auto bb = hn::Sub(s, p);
    const auto e = hn::Add(hn::Sub(p, hn::Sub(s, bb)), hn::Sub(cz, bb));
    // inexact: e != 0 and finite (e - e is NaN for an infinite or NaN e)
    const auto inexact = hn::And(hn::Ne(e, hn::Zero(dd)), hn::Eq(hn::Sub(e, e), hn::Zero(dd)));
    const auto one = hn::IfThenElseZero(hn::RebindMask(di, inexact), hn::Set(di, 1));
    const auto differ = hn::BitCast(
        di, hn::ShiftRight<63>(hn::BitCast(du, hn::Xor(hn::BitCast(di, s), hn::BitCast(di, e)))));
    const auto bits = hn::Or(hn::Sub(hn::BitCast(di, s), hn::And(differ, one)), one);
    return hn::DemoteTo(dh, hn::BitCast(dd, bits));
  };
  return hn::Combine(d, half(hn::UpperHalf(dh, a), hn::UpperHalf(dh, b), hn::UpperHalf(dh, c)),
                     half(hn::LowerHalf(dh, a), hn::LowerHalf(dh, b), hn::LowerHalf(dh, c)));
#endif
}

// DotStep in the kernels' scalar tails, inline: DotStepV on one vector (a
// call to the C library's fmaf would leave the kernel, and without FMA
// hardware run in software).
HWY_INLINE float DotStepS(float a, float b, float c) {
  const hn::FixedTag<float, 4> d;
  return hn::GetLane(DotStepV(d, hn::Set(d, a), hn::Set(d, b), hn::Set(d, c)));
}

// The partial sums of the MB x NB dot products of rows a, a + lda, ... of
// X with rows b, b + ldb, ... of W, over the first k16 elements, into
// p[r * ldp + c * kDotLanes ..] (kLoad: added to the sums already there,
// in order; else from +0): each product's kDotLanes partial sums are G
// vectors of N lanes (lane l of vector g: partial sum g * N + l). Every
// loaded vector of X and W serves NB and MB products.
template <size_t G, size_t MB, size_t NB, bool kLoad, class D>
HWY_INLINE void BlockSums(D d, const float* a, int64_t lda, const float* b, int64_t ldb,
                          int64_t k16, float* p, int64_t ldp) {
  constexpr size_t N = kDotLanes / G;
  using V = hn::Vec<D>;
  V acc[MB][NB][G];
  for (size_t r = 0; r < MB; ++r) {
    for (size_t c = 0; c < NB; ++c) {
      for (size_t g = 0; g < G; ++g) {
        acc[r][c][g] = kLoad ? hn::LoadU(d, p + static_cast<int64_t>(r) * ldp +
                                                static_cast<int64_t>(c * kDotLanes + g * N))
                             : hn::Zero(d);
      }
    }
  }
  for (int64_t t = 0; t < k16; t += kDotLanes) {
    for (size_t g = 0; g < G; ++g) {
      const int64_t at = t + static_cast<int64_t>(g * N);
      V wv[NB];
      for (size_t c = 0; c < NB; ++c) wv[c] = hn::LoadU(d, b + static_cast<int64_t>(c) * ldb + at);
      for (size_t r = 0; r < MB; ++r) {
        const V xv = hn::LoadU(d, a + static_cast<int64_t>(r) * lda + at);
        for (size_t c = 0; c < NB; ++c) acc[r][c][g] = DotStepV(d, xv, wv[c], acc[r][c][g]);
      }
    }
  }
  for (size_t r = 0; r < MB; ++r) {
    for (size_t c = 0; c < NB; ++c) {
      for (size_t g = 0; g < G; ++g) {
        hn::StoreU(acc[r][c][g], d,
                   p + static_cast<int64_t>(r) * ldp + static_cast<int64_t>(c * kDotLanes + g * N));
      }
    }
  }
}

// y for rows [i, i + MB) of X and [j, j + NB) of W: the block's partial
// sums, the elements after the last full kDotLanes, the halving sums.
template <size_t G, size_t MB, size_t NB, class D>
HWY_INLINE void Block(D d, const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k,
                      int64_t i, int64_t j, float* y, int64_t ldy) {
  const int64_t k16 = k / kDotLanes * kDotLanes;
  HWY_ALIGN float p[MB * NB * kDotLanes];
  BlockSums<G, MB, NB, false>(d, x + i * ldx, ldx, w + j * ldw, ldw, k16, p,
                              static_cast<int64_t>(NB * kDotLanes));
  for (size_t r = 0; r < MB; ++r) {
    const float* a = x + (i + static_cast<int64_t>(r)) * ldx;
    for (size_t c = 0; c < NB; ++c) {
      const float* b = w + (j + static_cast<int64_t>(c)) * ldw;
      float* pr = p + (r * NB + c) * kDotLanes;
      for (int64_t t = k16; t < k; ++t) pr[t % kDotLanes] = DotStepS(a[t], b[t], pr[t % kDotLanes]);
      y[(i + static_cast<int64_t>(r)) * ldy + j + static_cast<int64_t>(c)] = ReduceDotLanes(pr);
    }
  }
}

// AccumulateDotRows for rows [i, i + MB) of X and [j, j + NB) of W: the
// block's partial sums carried on in p, then the elements after the last
// full kDotLanes (the last chunk of K only may have them).
template <size_t G, size_t MB, size_t NB, class D>
HWY_INLINE void AccumulateBlock(D d, const float* x, int64_t ldx, const float* w, int64_t ldw,
                                int64_t k, int64_t i, int64_t j, float* p, int64_t n) {
  const int64_t k16 = k / kDotLanes * kDotLanes;
  const int64_t ldp = n * kDotLanes;
  float* pb = p + i * ldp + j * kDotLanes;
  BlockSums<G, MB, NB, true>(d, x + i * ldx, ldx, w + j * ldw, ldw, k16, pb, ldp);
  if (k16 == k) return;
  for (size_t r = 0; r < MB; ++r) {
    const float* a = x + (i + static_cast<int64_t>(r)) * ldx;
    for (size_t c = 0; c < NB; ++c) {
      const float* b = w + (j + static_cast<int64_t>(c)) * ldw;
      float* pr = pb + static_cast<int64_t>(r) * ldp + static_cast<int64_t>(c * kDotLanes);
      for (int64_t t = k16; t < k; ++t) pr[t % kDotLanes] = DotStepS(a[t], b[t], pr[t % kDotLanes]);
    }
  }
}

// Calls f(std::integral_constant<size_t, mb>, ..<nb>, i, j) for the blocks
// of the m x n products: rows of X in blocks of MB (the rest one by one),
// outer, so that a block stays in cache while it meets every row of the
// caller's tile of W, NB at a time (the rest one by one).
template <size_t MB, size_t NB, class F>
HWY_INLINE void ForEachBlock(int64_t m, int64_t n, const F& f) {
  using One = std::integral_constant<size_t, 1>;
  using RowsB = std::integral_constant<size_t, MB>;
  using ColsB = std::integral_constant<size_t, NB>;
  const auto mb = static_cast<int64_t>(MB), nb = static_cast<int64_t>(NB);
  int64_t i = 0;
  for (; i + mb <= m; i += mb) {
    int64_t j = 0;
    for (; j + nb <= n; j += nb) f(RowsB(), ColsB(), i, j);
    for (; j < n; ++j) f(RowsB(), One(), i, j);
  }
  for (; i < m; ++i) {
    int64_t j = 0;
    for (; j + nb <= n; j += nb) f(One(), ColsB(), i, j);
    for (; j < n; ++j) f(One(), One(), i, j);
  }
}

template <size_t G, size_t MB, size_t NB>
HWY_INLINE void DotRowsG(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                         int64_t ldw, int64_t k, float* y, int64_t ldy) {
  const hn::FixedTag<float, kDotLanes / G> d;
  ForEachBlock<MB, NB>(m, n, [&](auto rb, auto cb, int64_t i, int64_t j) HWY_ATTR {
    Block<G, decltype(rb)::value, decltype(cb)::value>(d, x, ldx, w, ldw, k, i, j, y, ldy);
  });
}

// AccumulateDotRows's blocks, in DotRowsG's order.
template <size_t G, size_t MB, size_t NB>
HWY_INLINE void AccumulateDotRowsG(const float* x, int64_t m, int64_t ldx, const float* w,
                                   int64_t n, int64_t ldw, int64_t k, float* p) {
  const hn::FixedTag<float, kDotLanes / G> d;
  ForEachBlock<MB, NB>(m, n, [&](auto rb, auto cb, int64_t i, int64_t j) HWY_ATTR {
    AccumulateBlock<G, decltype(rb)::value, decltype(cb)::value>(d, x, ldx, w, ldw, k, i, j, p, n);
  });
}

// AccumulateDotCols for the features [j, j + Lanes(d)) and rows [i, i + MB)
// of X: the 16 sums of each product in lane groups of A, each group one
// pass over the chunk (its A * MB accumulators in registers; sum l of the
// products is fed by t = l, l + 16, ..., each loaded vector of W serving
// MB rows of X).
template <size_t A, size_t MB, class D>
HWY_INLINE void ColsStrip(D d, const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t k,
                          int64_t i, int64_t j, float* pt, int64_t n) {
  using V = hn::Vec<D>;
  static_assert(kDotLanes % A == 0, "lane groups tile the 16 sums");
  const int64_t k16 = k / kDotLanes * kDotLanes;
  for (size_t l0 = 0; l0 < kDotLanes; l0 += A) {
    V acc[MB][A];
    auto sums = [&](size_t r, size_t l) HWY_ATTR {
      return pt + ((i + static_cast<int64_t>(r)) * kDotLanes + static_cast<int64_t>(l0 + l)) * n +
             j;
    };
    for (size_t r = 0; r < MB; ++r) {
      for (size_t l = 0; l < A; ++l) acc[r][l] = hn::LoadU(d, sums(r, l));
    }
    auto step = [&](size_t l, int64_t t) HWY_ATTR {
      const V wv = hn::LoadU(d, w + t * ldw + j);
      for (size_t r = 0; r < MB; ++r) {
        const V xv = hn::Set(d, x[(i + static_cast<int64_t>(r)) * ldx + t]);
        acc[r][l] = DotStepV(d, xv, wv, acc[r][l]);
      }
    };
    for (int64_t t0 = static_cast<int64_t>(l0); t0 < k16; t0 += kDotLanes) {
      for (size_t l = 0; l < A; ++l) step(l, t0 + static_cast<int64_t>(l));
    }
    for (size_t l = 0; l < A; ++l) {
      const int64_t t = k16 + static_cast<int64_t>(l0 + l);
      if (t < k) step(l, t);
    }
    for (size_t r = 0; r < MB; ++r) {
      for (size_t l = 0; l < A; ++l) hn::StoreU(acc[r][l], d, sums(r, l));
    }
  }
}

// AccumulateDotCols: features in vectors (the last n % Lanes one by one, in
// the reference's order), rows of X MB at a time with lane groups of A
// (the rest one by one, lane groups of A1).
template <size_t A, size_t MB, size_t A1>
HWY_INLINE void AccumulateDotColsG(const float* x, int64_t m, int64_t ldx, const float* w,
                                   int64_t n, int64_t ldw, int64_t k, float* pt) {
  const hn::ScalableTag<float> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const auto mb = static_cast<int64_t>(MB);
  int64_t j = 0;
  for (; j + lanes <= n; j += lanes) {
    int64_t i = 0;
    for (; i + mb <= m; i += mb) ColsStrip<A, MB>(d, x, ldx, w, ldw, k, i, j, pt, n);
    for (; i < m; ++i) ColsStrip<A1, 1>(d, x, ldx, w, ldw, k, i, j, pt, n);
  }
  for (; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t t = 0; t < k; ++t) {
        float& s = pt[(i * kDotLanes + t % kDotLanes) * n + j];
        s = DotStepS(x[i * ldx + t], w[t * ldw + j], s);
      }
    }
  }
}
#endif

// AccumulateDotCols's blocking: A * MB accumulators (AVX-512: 16 of 32
// registers; AVX2 and 128-bit targets: 8 of 16). Four rows of X per loaded vector of W:
// measured (VM, one thread, ONNX int4 [K, N] 4096 x 4096, tiles of 128
// features x 512 of K, two rounds) M = 16 / 64 15 / 48-51 ms with one row
// and 16 sums per pass, 13-13.4 / 42-43 with 2 x 8, 11-16 / 33-35 with
// 4 x 4; M = 1 the same (bench/results/2026-11-28-matmul-cols/).
// Returns false when this target has no vector form (the caller runs the
// reference: the same bits).
bool AccumulateDotColsSimd(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                           int64_t ldw, int64_t k, float* pt) {
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
  if constexpr (HWY_LANES(float) >= 16) {
    AccumulateDotColsG<4, 4, 16>(x, m, ldx, w, n, ldw, k, pt);
  } else {
    AccumulateDotColsG<2, 4, 8>(x, m, ldx, w, n, ldw, k, pt);
  }
  return true;
#else
  (void)x, (void)m, (void)ldx, (void)w, (void)n, (void)ldw, (void)k, (void)pt;
  return false;
#endif
}

// The blocking of each target: MB * NB * G accumulator vectors within its
// registers (AVX-512: 16 of 32; AVX2 and 128-bit targets: 8 of 16). Returns false when
// this target has no vector form (the caller runs the reference: the same
// bits).
bool AccumulateDotRowsSimd(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                           int64_t ldw, int64_t k, float* p) {
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
  constexpr size_t kLanes = HWY_LANES(float);
  if constexpr (kLanes >= 16) {
    AccumulateDotRowsG<1, 4, 4>(x, m, ldx, w, n, ldw, k, p);
    return true;
  } else if constexpr (kLanes == 8) {
    AccumulateDotRowsG<2, 2, 2>(x, m, ldx, w, n, ldw, k, p);
    return true;
  } else if constexpr (kLanes == 4) {
    AccumulateDotRowsG<4, 1, 2>(x, m, ldx, w, n, ldw, k, p);
    return true;
  }
#endif
  (void)x, (void)m, (void)ldx, (void)w, (void)n, (void)ldw, (void)k, (void)p;
  return false;
}

// Returns false when this target has no vector form (the caller runs the
// reference: the same bits).
bool DotRowsSimd(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n, int64_t ldw,
                 int64_t k, float* y, int64_t ldy) {
#if HWY_TARGET != HWY_SCALAR && !HWY_HAVE_SCALABLE
  constexpr size_t kLanes = HWY_LANES(float);
  // Accumulators: MB * NB * G vectors, within the target's registers.
  if constexpr (kLanes >= 16) {
    DotRowsG<1, 4, 4>(x, m, ldx, w, n, ldw, k, y, ldy);  // 16 of 32
    return true;
  } else if constexpr (kLanes == 8) {
    DotRowsG<2, 2, 2>(x, m, ldx, w, n, ldw, k, y, ldy);  // 8 of 16
    return true;
  } else if constexpr (kLanes == 4) {
    DotRowsG<4, 1, 2>(x, m, ldx, w, n, ldw, k, y, ldy);  // 8 of 16
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
HWY_EXPORT(AccumulateDotRowsSimd);
HWY_EXPORT(AccumulateDotColsSimd);

void AccumulateDotRowsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                                int64_t ldw, int64_t k, float* p) {
  for (int64_t j = 0; j < n; ++j) {
    const float* b = w + j * ldw;
    for (int64_t i = 0; i < m; ++i) {
      const float* a = x + i * ldx;
      float* pr = p + (i * n + j) * kDotLanes;
      for (int64_t t = 0; t < k; ++t) pr[t % kDotLanes] = DotStep(a[t], b[t], pr[t % kDotLanes]);
    }
  }
}

void AccumulateDotRows(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                       int64_t ldw, int64_t k, float* p) {
  if (!HWY_DYNAMIC_DISPATCH(AccumulateDotRowsSimd)(x, m, ldx, w, n, ldw, k, p)) {
    AccumulateDotRowsReference(x, m, ldx, w, n, ldw, k, p);
  }
}

void FinishDotRows(float* p, int64_t m, int64_t n, float* y, int64_t ldy) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) y[i * ldy + j] = ReduceDotLanes(p + (i * n + j) * kDotLanes);
  }
}

void AccumulateDotColsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                                int64_t ldw, int64_t k, float* pt) {
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t t = 0; t < k; ++t) {
        float& s = pt[(i * kDotLanes + t % kDotLanes) * n + j];
        s = DotStep(x[i * ldx + t], w[t * ldw + j], s);
      }
    }
  }
}

void AccumulateDotCols(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                       int64_t ldw, int64_t k, float* pt) {
  if (!HWY_DYNAMIC_DISPATCH(AccumulateDotColsSimd)(x, m, ldx, w, n, ldw, k, pt)) {
    AccumulateDotColsReference(x, m, ldx, w, n, ldw, k, pt);
  }
}

void FinishDotCols(float* pt, int64_t m, int64_t n, float* y, int64_t ldy) {
  // ReduceDotLanes's halving, feature by feature (a whole row of sums at a
  // time: the same additions).
  for (int64_t i = 0; i < m; ++i) {
    float* p = pt + i * kDotLanes * n;
    for (int h = kDotLanes / 2; h >= 1; h /= 2) {
      for (int l = 0; l < h; ++l) {
        float* to = p + l * n;
        const float* from = p + (l + h) * n;
        for (int64_t j = 0; j < n; ++j) to[j] += from[j];
      }
    }
    std::memcpy(y + i * ldy, p, static_cast<size_t>(n) * sizeof(float));
  }
}

void DotRowsReference(const float* x, int64_t m, int64_t ldx, const float* w, int64_t n,
                      int64_t ldw, int64_t k, float* y, int64_t ldy) {
  float p[kDotLanes];
  for (int64_t j = 0; j < n; ++j) {
    const float* b = w + j * ldw;
    for (int64_t i = 0; i < m; ++i) {
      const float* a = x + i * ldx;
      std::memset(p, 0, sizeof p);
      for (int64_t t = 0; t < k; ++t) p[t % kDotLanes] = DotStep(a[t], b[t], p[t % kDotLanes]);
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
