// Scalar numeric conversions shared by the reference kernel, the SIMD
// kernels' tails, op/ (scale widening) and the tests. All exact or
// round-to-nearest-even (every output is rounded once, that way).
#ifndef NIBBLE_BASE_NUMERIC_H_
#define NIBBLE_BASE_NUMERIC_H_

#include <cstdint>
#include <cstring>

namespace nibble {

inline uint32_t BitsFromF32(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float F32FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bfloat16 -> float32 (exact).
inline float F32FromBF16(uint16_t h) { return F32FromBits(uint32_t{h} << 16); }

// float32 -> bfloat16, round to nearest even; NaN stays NaN (quiet bit set).
inline uint16_t BF16FromF32(float f) {
  const uint32_t u = BitsFromF32(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  const uint32_t rounded = u + 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

// float16 -> float32 (exact, including subnormals, Inf, NaN payload).
// Always inlined: the kernels widen block scales with it per block, and
// GCC otherwise may leave it a call there (one per grid block, with a
// vzeroupper and the loop's vector constants reloaded after it: IQ2_XS
// and IQ2_S from memory 5-14 % slower when that happened).
inline __attribute__((always_inline)) float F32FromF16(uint16_t h) {
  const uint32_t sign = uint32_t{h & 0x8000u} << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return F32FromBits(sign | 0x7F800000u | (mant << 13));
  if (exp != 0) return F32FromBits(sign | ((exp + 112u) << 23) | (mant << 13));
  // Zero or subnormal: mant * 2^-24, exact in float32.
  const float mag = static_cast<float>(mant) * F32FromBits(0x33800000u);  // 2^-24
  return sign ? -mag : mag;
}

// float32 -> float16, round to nearest even (IEEE), overflow to Inf,
// NaN stays NaN (quiet).
inline uint16_t F16FromF32(float f) {
  const uint32_t u = BitsFromF32(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) {  // NaN: keep the top payload bits, force quiet.
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  }
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // >= 65520: Inf
  if (abs >= 0x38800000u) {                                              // normal half (>= 2^-14)
    const uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // Subnormal half or zero: value / 2^-24, rounded to nearest even. Adding
  // 0.5 (2^-1) in float32 performs exactly that rounding for abs < 2^-14.
  const float scaled = F32FromBits(abs) + 0.5f;
  return static_cast<uint16_t>(sign | (BitsFromF32(scaled) - 0x3F000000u));
}

// Float8 / float4 decoders (exact), per the ONNX type definitions.
inline float DecodeMiniFloat(uint32_t bits, int exp_bits, int mant_bits, int bias) {
  const uint32_t sign = bits >> (exp_bits + mant_bits);
  const uint32_t exp = (bits >> mant_bits) & ((1u << exp_bits) - 1u);
  const uint32_t mant = bits & ((1u << mant_bits) - 1u);
  float mag;
  if (exp == 0) {
    // Subnormal: mant * 2^(1 - bias - mant_bits).
    mag = static_cast<float>(mant) *
          F32FromBits(static_cast<uint32_t>(127 + 1 - bias - mant_bits) << 23);
  } else {
    mag = F32FromBits((static_cast<uint32_t>(static_cast<int32_t>(exp) - bias + 127) << 23) |
                      (mant << (23 - mant_bits)));
  }
  return sign ? -mag : mag;
}
inline float DecodeF8E4M3FN(uint8_t b) {
  if ((b & 0x7F) == 0x7F) return F32FromBits(0x7FC00000u | (uint32_t{b & 0x80u} << 24));
  return DecodeMiniFloat(b, 4, 3, 7);
}
inline float DecodeF8E4M3FNUZ(uint8_t b) {
  if (b == 0x80) return F32FromBits(0x7FC00000u);
  return DecodeMiniFloat(b, 4, 3, 8);
}
inline float DecodeF8E5M2(uint8_t b) {
  if ((b & 0x7C) == 0x7C) {
    const uint32_t s = uint32_t{b & 0x80u} << 24;
    return (b & 0x03) ? F32FromBits(s | 0x7FC00000u) : F32FromBits(s | 0x7F800000u);
  }
  return DecodeMiniFloat(b, 5, 2, 15);
}
inline float DecodeF8E5M2FNUZ(uint8_t b) {
  if (b == 0x80) return F32FromBits(0x7FC00000u);
  return DecodeMiniFloat(b, 5, 2, 16);
}
inline float DecodeF4E2M1(uint8_t b) { return DecodeMiniFloat(b & 0xFu, 2, 1, 1); }
// float8e8m0 (scales only): 2^(e-127); 0xFF is NaN. e = 0 is 2^-127.
inline float DecodeF8E8M0(uint8_t b) {
  if (b == 0xFF) return F32FromBits(0x7FC00000u);
  if (b == 0) return F32FromBits(0x00400000u);  // 2^-127, a float32 subnormal
  return F32FromBits(uint32_t{b} << 23);
}

}  // namespace nibble

#endif  // NIBBLE_BASE_NUMERIC_H_
