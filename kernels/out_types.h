// Output types as descriptors: what a kernel writes per element. Each is a
// struct OutDesc<kOut> holding the facts every kernel, the reference and
// op/ read — bytes per element, its DType, its binary format (mantissa
// bits, the exponents of its normal numbers), and the scalar rounding of an
// exact float32 value (once, to nearest even) — so no code spells out
// "4 bytes for f32, else 2". The vector narrowing of each type is
// NarrowBits in kernels/convert-inl.h (per Highway target);
// NIBBLE_OUT_TYPES lists them for the dispatch switches.
//
// Adding an output type: its enum value and descriptor here, its vector
// narrowing in convert-inl.h, its row of spellings in base/dtype.cc; a
// type of a new width also needs the kernels' store of that width
// (StoreOutUnit in kernels/dequantize-inl.h, the row kernels' and the decoded
// layouts' one store).
#ifndef NIBBLE_KERNELS_OUT_TYPES_H_
#define NIBBLE_KERNELS_OUT_TYPES_H_

#include <cstdint>
#include <cstring>

#include "base/dtype.h"
#include "base/numeric.h"

namespace nibble {

enum class OutType : uint8_t { kF32, kF16, kBF16 };

// X(OutType enumerator without the k) for every output type.
#define NIBBLE_OUT_TYPES(X) X(F32) X(F16) X(BF16)

template <OutType kOut>
struct OutDesc;

template <>
struct OutDesc<OutType::kF32> {
  using Bits = float;
  static constexpr int64_t kBytes = 4;
  static constexpr DType kDType = DType::kFloat32;
  static constexpr int kMantBits = 23, kMinExp = -126, kMaxExp = 127;
  static Bits Round(float v) { return v; }
  static float Widen(Bits b) { return b; }
};

template <>
struct OutDesc<OutType::kF16> {
  using Bits = uint16_t;
  static constexpr int64_t kBytes = 2;
  static constexpr DType kDType = DType::kFloat16;
  static constexpr int kMantBits = 10, kMinExp = -14, kMaxExp = 15;
  static Bits Round(float v) { return F16FromF32(v); }
  static float Widen(Bits b) { return F32FromF16(b); }
};

template <>
struct OutDesc<OutType::kBF16> {
  using Bits = uint16_t;
  static constexpr int64_t kBytes = 2;
  static constexpr DType kDType = DType::kBFloat16;
  static constexpr int kMantBits = 7, kMinExp = -126, kMaxExp = 127;
  static Bits Round(float v) { return BF16FromF32(v); }
  static float Widen(Bits b) { return F32FromBF16(b); }
};

#define NIBBLE_OUT_CHECK(T)                                                             \
  static_assert(sizeof(OutDesc<OutType::k##T>::Bits) == OutDesc<OutType::k##T>::kBytes, \
                #T ": Bits and kBytes disagree");
NIBBLE_OUT_TYPES(NIBBLE_OUT_CHECK)
#undef NIBBLE_OUT_CHECK

// Bytes per element of `t`.
constexpr int64_t OutBytes(OutType t) {
  switch (t) {
#define NIBBLE_OUT_CASE(T) \
  case OutType::k##T:      \
    return OutDesc<OutType::k##T>::kBytes;
    NIBBLE_OUT_TYPES(NIBBLE_OUT_CASE)
#undef NIBBLE_OUT_CASE
  }
  return 0;
}

// 2^e for a normal float32 exponent e (-126 .. 127), at compile time.
constexpr float Pow2f(int e) {
  float r = 1.0f;
  for (; e > 0; --e) r *= 2.0f;
  for (; e < 0; ++e) r *= 0.5f;
  return r;
}

// The binary format of `t` (OutDesc's kMantBits, kMinExp, kMaxExp).
struct OutFormat {
  int mant_bits, min_exp, max_exp;
};
constexpr OutFormat OutFormatOf(OutType t) {
  switch (t) {
#define NIBBLE_OUT_CASE(T)                                                      \
  case OutType::k##T:                                                           \
    return {OutDesc<OutType::k##T>::kMantBits, OutDesc<OutType::k##T>::kMinExp, \
            OutDesc<OutType::k##T>::kMaxExp};
    NIBBLE_OUT_TYPES(NIBBLE_OUT_CASE)
#undef NIBBLE_OUT_CASE
  }
  return {0, 0, 0};
}

// What makes v * 2^k exact in output type `out` without arithmetic, for 16
// values v[c] (a 4-bit code's values): each value's bits in the type
// (bits[c]), its mantissa width (shift: the exponent field's first bit) and
// the exponents k for which every nonzero value times 2^k is a normal
// number of the type (k_lo .. k_hi; 2^k itself a normal float32). Then
// v * 2^k, rounded once to the type, is bits[c] plus k << shift for a
// nonzero v, and bits[c] (a signed zero) for a zero one: the float32
// product rounded to the type, bit for bit. (Power-of-two scales: gpt-oss
// MXFP4, GGUF MXFP4 — kernels/transposed_nibbles.cc, the AVX2 block
// tables in kernels/dequantize-inl.h.)
struct Pow2Table {
  uint32_t bits[16];
  int shift, k_lo, k_hi;
};

// The Pow2Table of values v in `out`, or false where a value is not exact
// in the type at some exponent (more significant bits than its mantissa,
// subnormal, infinite or NaN) or no k fits every value.
inline bool MakePow2Table(const float v[16], OutType out, Pow2Table* t) {
  const OutFormat f = OutFormatOf(out);
  const int mant = f.mant_bits, emin = f.min_exp, emax = f.max_exp;
  int e_lo = emax, e_hi = emin;
  for (int c = 0; c < 16; ++c) {
    uint32_t u;
    std::memcpy(&u, &v[c], 4);
    if ((u & 0x7FFFFFFFu) != 0) {
      const int field = static_cast<int>((u >> 23) & 0xFF);
      if (field == 0 || field == 255) return false;
      if ((u & ((1u << (23 - mant)) - 1u)) != 0) return false;
      const int e = field - 127;
      if (e < emin || e > emax) return false;
      e_lo = e < e_lo ? e : e_lo;
      e_hi = e > e_hi ? e : e_hi;
    }
    switch (out) {
      case OutType::kF32:
        t->bits[c] = u;
        break;
      case OutType::kF16:
        t->bits[c] = F16FromF32(v[c]);
        break;
      case OutType::kBF16:
        t->bits[c] = BF16FromF32(v[c]);
        break;
    }
  }
  t->shift = mant;
  t->k_lo = emin - e_lo > -126 ? emin - e_lo : -126;
  t->k_hi = emax - e_hi < 127 ? emax - e_hi : 127;
  return t->k_lo <= t->k_hi;
}

// The DType of `t`, and the output type of a DType (false: none).
constexpr DType DTypeOfOut(OutType t) {
  switch (t) {
#define NIBBLE_OUT_CASE(T) \
  case OutType::k##T:      \
    return OutDesc<OutType::k##T>::kDType;
    NIBBLE_OUT_TYPES(NIBBLE_OUT_CASE)
#undef NIBBLE_OUT_CASE
  }
  return DType::kUndefined;
}
inline bool OutTypeOfDType(DType d, OutType* t) {
#define NIBBLE_OUT_IF(T)                     \
  if (d == OutDesc<OutType::k##T>::kDType) { \
    *t = OutType::k##T;                      \
    return true;                             \
  }
  NIBBLE_OUT_TYPES(NIBBLE_OUT_IF)
#undef NIBBLE_OUT_IF
  return false;
}

// Writes v (an exact float32 value) rounded once to kOut at dst (any
// alignment).
template <OutType kOut>
inline void StoreOut(float v, void* dst) {
  const typename OutDesc<kOut>::Bits b = OutDesc<kOut>::Round(v);
  std::memcpy(dst, &b, sizeof b);
}
inline void StoreOut(OutType t, float v, void* dst) {
  switch (t) {
#define NIBBLE_OUT_CASE(T) \
  case OutType::k##T:      \
    return StoreOut<OutType::k##T>(v, dst);
    NIBBLE_OUT_TYPES(NIBBLE_OUT_CASE)
#undef NIBBLE_OUT_CASE
  }
}

// The value stored at src (exact in float32).
inline float LoadOut(OutType t, const void* src) {
  switch (t) {
#define NIBBLE_OUT_CASE(T)                   \
  case OutType::k##T: {                      \
    typename OutDesc<OutType::k##T>::Bits b; \
    std::memcpy(&b, src, sizeof b);          \
    return OutDesc<OutType::k##T>::Widen(b); \
  }
    NIBBLE_OUT_TYPES(NIBBLE_OUT_CASE)
#undef NIBBLE_OUT_CASE
  }
  return 0.0f;
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_OUT_TYPES_H_
