// Float-to-float conversion (kernels/convert.h): Highway dynamic dispatch.
// Widening is exact lane-wise integer arithmetic; rounding is the kernels'
// own (kernels/convert-inl.h), so every target gives the scalar bits.
#include "kernels/convert.h"

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/convert-inl.h"

#if HWY_ONCE
#include "base/numeric.h"
#endif

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

template <OutType kFrom, class DF>
HWY_INLINE hn::Vec<DF> LoadAsF32(DF df, const uint8_t* p) {
  if constexpr (kFrom == OutType::kF32) {
    return hn::LoadU(df, reinterpret_cast<const float*>(p));
  } else {
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint16_t, DF> du16;
    const auto w =
        hn::BitCast(di, hn::PromoteTo(hn::RebindToUnsigned<DF>(),
                                      hn::LoadU(du16, reinterpret_cast<const uint16_t*>(p))));
    if constexpr (kFrom == OutType::kF16) {
      return F32FromF16Bits(df, w);
    } else {
      return hn::BitCast(df, hn::ShiftLeft<16>(w));  // bfloat16: the high half
    }
  }
}

template <OutType kTo, class DF>
HWY_INLINE void StoreFromF32(DF df, hn::Vec<DF> v, uint8_t* p) {
  if constexpr (OutDesc<kTo>::kBytes == 4) {
    hn::StoreU(v, df, reinterpret_cast<float*>(p));
  } else {
    const hn::Rebind<uint16_t, DF> du16;
    const auto bits = NarrowBits<kTo>(df, v);
    hn::StoreU(bits, du16, reinterpret_cast<uint16_t*>(p));
  }
}

// Whole vectors; returns how many values were converted.
template <OutType kFrom, OutType kTo>
HWY_INLINE int64_t ConvertVectors(const uint8_t* src, uint8_t* dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const auto lanes = static_cast<int64_t>(hn::Lanes(df));
  constexpr int64_t kIn = OutBytes(kFrom), kOut = OutBytes(kTo);
  int64_t i = 0;
  for (; i + 2 * lanes <= n; i += 2 * lanes) {
    const auto a = LoadAsF32<kFrom>(df, src + i * kIn);
    const auto b = LoadAsF32<kFrom>(df, src + (i + lanes) * kIn);
    StoreFromF32<kTo>(df, a, dst + i * kOut);
    StoreFromF32<kTo>(df, b, dst + (i + lanes) * kOut);
  }
  for (; i + lanes <= n; i += lanes) {
    StoreFromF32<kTo>(df, LoadAsF32<kFrom>(df, src + i * kIn), dst + i * kOut);
  }
  return i;
}

template <OutType kFrom>
HWY_INLINE int64_t ConvertFrom(OutType to, const uint8_t* src, uint8_t* dst, int64_t n) {
  switch (to) {
#define NIBBLE_CASE(T) \
  case OutType::k##T:  \
    return ConvertVectors<kFrom, OutType::k##T>(src, dst, n);
    NIBBLE_OUT_TYPES(NIBBLE_CASE)
#undef NIBBLE_CASE
  }
  return 0;
}

#endif  // HWY_TARGET != HWY_SCALAR

// The values [0, done) converted with vectors; the caller does the rest.
int64_t ConvertFloatsSimd(OutType from, const void* src, OutType to, void* dst, int64_t n) {
#if HWY_TARGET != HWY_SCALAR
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  switch (from) {
#define NIBBLE_CASE(T) \
  case OutType::k##T:  \
    return ConvertFrom<OutType::k##T>(to, s, d, n);
    NIBBLE_OUT_TYPES(NIBBLE_CASE)
#undef NIBBLE_CASE
  }
#else
  (void)from, (void)src, (void)to, (void)dst, (void)n;
#endif
  return 0;
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {

HWY_EXPORT(ConvertFloatsSimd);

void ConvertFloatsReference(OutType from, const void* src, OutType to, void* dst, int64_t n) {
  if (n <= 0) return;
  if (from == to) {  // a copy: NaN payloads untouched
    std::memcpy(dst, src, static_cast<size_t>(n) * static_cast<size_t>(OutBytes(from)));
    return;
  }
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  const size_t in = static_cast<size_t>(OutBytes(from)), out = static_cast<size_t>(OutBytes(to));
  for (int64_t k = 0; k < n; ++k) {
    const size_t i = static_cast<size_t>(k);
    StoreOut(to, LoadOut(from, s + i * in), d + i * out);
  }
}

void ConvertFloats(OutType from, const void* src, OutType to, void* dst, int64_t n) {
  if (n <= 0) return;
  if (from == to) {
    std::memcpy(dst, src, static_cast<size_t>(n) * static_cast<size_t>(OutBytes(from)));
    return;
  }
  const int64_t done = HWY_DYNAMIC_DISPATCH(ConvertFloatsSimd)(from, src, to, dst, n);
  ConvertFloatsReference(from, static_cast<const uint8_t*>(src) + done * OutBytes(from), to,
                         static_cast<uint8_t*>(dst) + done * OutBytes(to), n - done);
}

}  // namespace nibble
#endif  // HWY_ONCE
