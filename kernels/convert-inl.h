// Per-target float conversions of vectors: float32 -> float16 / bfloat16
// rounding (the output-dtype step of the kernels) and the exact float16 ->
// float32 widening, included once per Highway target by
// kernels/dequantize-inl.h and kernels/convert.cc. Every conversion gives
// base/numeric.h's bits (F16FromF32 / BF16FromF32: round to nearest even;
// F32FromF16).
#if defined(NIBBLE_KERNELS_CONVERT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_CONVERT_INL_H_
#undef NIBBLE_KERNELS_CONVERT_INL_H_
#else
#define NIBBLE_KERNELS_CONVERT_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "kernels/codes.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

// float32 lanes of the float16 bits in the low 16 bits of each lane of w:
// F32FromF16's exact conversion lane-wise (normal numbers rebiased, Inf /
// NaN payloads kept as they are, subnormals through an integer conversion
// times 2^-24 — exact, and no float32 subnormal, so DAZ does not matter).
template <class DF>
HWY_INLINE hn::Vec<DF> F32FromF16Bits(DF df, hn::Vec<hn::RebindToSigned<DF>> w) {
  const hn::RebindToSigned<DF> di;
  const auto em = hn::And(w, hn::Set(di, 0x7FFF));
  const auto sign = hn::ShiftLeft<16>(hn::And(w, hn::Set(di, 0x8000)));
  const auto normal = hn::Add(hn::ShiftLeft<13>(em), hn::Set(di, 112 << 23));
  const auto inf_nan = hn::Or(hn::ShiftLeft<13>(em), hn::Set(di, 0x7F800000));
  const auto sub = hn::BitCast(di, hn::Mul(hn::ConvertTo(df, em), hn::Set(df, 0x1p-24f)));
  auto r = hn::IfThenElse(hn::Lt(em, hn::Set(di, 0x400)), sub, normal);
  r = hn::IfThenElse(hn::Gt(em, hn::Set(di, 0x7BFF)), inf_nan, r);
  return hn::BitCast(df, hn::Or(r, sign));
}

// Converts float32 lanes to float16 bits (in the low 16 bits of u32 lanes
// demoted to u16), round to nearest even. AVX2 and up use F16C (exact RNE);
// Highway 1.0.3's emulation on older targets truncates, so round here in
// integer lanes exactly as F16FromF32 does.
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE auto F16Bits(DF df, VF v) {
  const hn::Rebind<uint16_t, DF> du16;
#if HWY_TARGET < HWY_SSE4 && !defined(HWY_DISABLE_F16C)
  const hn::Rebind<hwy::float16_t, DF> df16;
  return hn::BitCast(du16, hn::DemoteTo(df16, v));
#else
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::BitCast(di, v);
  const auto abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
  const auto sign16 = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 0x8000));
  const auto lsb = hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 1));
  const auto normal = hn::Sub(hn::ShiftRight<13>(hn::Add(hn::Add(abs, hn::Set(di, 0xFFF)), lsb)),
                              hn::Set(di, 0x1C000));
  const auto sub = hn::Sub(hn::BitCast(di, hn::Add(hn::BitCast(df, abs), hn::Set(df, 0.5f))),
                           hn::Set(di, 0x3F000000));
  const auto nan =
      hn::Or(hn::Set(di, 0x7E00), hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 0x3FF)));
  auto r = hn::IfThenElse(hn::Lt(abs, hn::Set(di, 0x38800000)), sub, normal);
  r = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x477FEFFF)), hn::Set(di, 0x7C00), r);
  r = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x7F800000)), nan, r);
  return hn::DemoteTo(du16, hn::Or(r, sign16));
#endif
}

// float32 -> bfloat16 bits, round to nearest even, NaN kept NaN (1.0.3's
// DemoteTo truncates). Same bits as BF16FromF32: a NaN keeps its high half
// with the quiet bit set (bits | 0x400000, then >> 16). kNoNaN: the caller
// guarantees no lane is NaN (UnitFacts' kNoNaN), so the NaN case is not
// tested (every other value rounds the same way: infinities and overflow
// to infinity included).
template <bool kNoNaN = false, class DF, class VF = hn::Vec<DF>>
HWY_INLINE auto BF16Bits(DF df, VF v) {
  const hn::Rebind<uint16_t, DF> du16;
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  (void)df;
  const auto bits = hn::BitCast(du, v);
  const auto lsb = hn::And(hn::ShiftRight<16>(bits), hn::Set(du, 1u));
  const auto rounded = hn::Add(hn::Add(bits, hn::Set(du, 0x7FFFu)), lsb);
  if constexpr (kNoNaN) {
    return hn::DemoteTo(du16, hn::BitCast(di, hn::ShiftRight<16>(rounded)));
  } else {
    const auto is_nan = hn::RebindMask(
        du,
        hn::Gt(hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7FFFFFFFu))), hn::Set(di, 0x7F800000)));
    const auto r =
        hn::ShiftRight<16>(hn::IfThenElse(is_nan, hn::Or(bits, hn::Set(du, 0x400000u)), rounded));
    return hn::DemoteTo(du16, hn::BitCast(di, r));
  }
}

#if HWY_TARGET == HWY_AVX2
// AVX2: the 8 float32 lanes of v with each lane's bfloat16 bits
// (BF16Bits' rounding, the NaN test as one unordered compare) in its high
// 16 bits; the low 16 bits are not defined. kNoNaN: as BF16Bits' (three
// of seven operations fewer: bfloat16 tiles in cache 1.1-1.26x on a Zen 3
// core).
template <bool kNoNaN = false>
HWY_INLINE __m256i BF16Rounded(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(bits, _mm256_set1_epi32(0x7FFF)), lsb);
  if constexpr (kNoNaN) return rounded;
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x400000));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
  return _mm256_blendv_epi8(rounded, quiet, nan);
}

// AVX2: the bfloat16 bits of a's and b's lanes interleaved, a's lane i in
// 16-bit lane 2i and b's in 2i + 1 (BF16Rounded's rounding, kNoNaN as
// its): a's rounded lanes shifted down, b's blended in by one word blend
// — no pack, no cross-lane permute. For vectors of the even and the odd
// elements of a run (pair-split order), or of neighbouring columns.
template <bool kNoNaN = false>
HWY_INLINE __m256i BF16BitsInterleaved(__m256 a, __m256 b) {
  return _mm256_blend_epi16(_mm256_srli_epi32(BF16Rounded<kNoNaN>(a), 16), BF16Rounded<kNoNaN>(b),
                            0xAA);
}

// AVX2: two vectors of 8 float32 lanes as 16 bfloat16 bits (lo's lanes
// first): BF16Bits' operations on each (the NaN test as one unordered
// compare, the same lanes), their high halves packed by one pack and one
// quadword permute instead of two demotions and an insert. kNoNaN: as
// BF16Bits'.
template <bool kNoNaN = false>
HWY_INLINE __m256i BF16BitsPair(__m256 lo, __m256 hi) {
  // (Each lane < 2^16: the signed-saturating pack keeps it.)
  return _mm256_permute4x64_epi64(
      _mm256_packus_epi32(_mm256_srli_epi32(BF16Rounded<kNoNaN>(lo), 16),
                          _mm256_srli_epi32(BF16Rounded<kNoNaN>(hi), 16)),
      0xD8);
}
#endif

// The vector side of the 2-byte output types' descriptors
// (kernels/out_types.h): float32 lanes narrowed to kOut's bits, the same
// bits as OutDesc<kOut>::Round.
// kNoNaN: as BF16Bits' (float16 rounds the same either way).
template <OutType kOut, bool kNoNaN = false, class DF, class VF = hn::Vec<DF>>
HWY_INLINE auto NarrowBits(DF df, VF v) {
  static_assert(OutDesc<kOut>::kBytes == 2, "NarrowBits: a 2-byte output type");
  if constexpr (kOut == OutType::kF16) {
    return F16Bits(df, v);
  } else {
    static_assert(kOut == OutType::kBF16, "NarrowBits: add the new output type here");
    return BF16Bits<kNoNaN>(df, v);
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
