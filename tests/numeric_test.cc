// The scalar conversions are the ground truth for every kernel: check them
// against the compiler's IEEE _Float16 and hand-computed cases.
#include "base/numeric.h"

#include <cmath>
#include <cstdint>
#include <cstring>

#include "doctest/doctest.h"

namespace nibble {
namespace {

uint16_t HalfBits(_Float16 h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

TEST_CASE("F16FromF32 matches IEEE round-to-nearest-even on sampled float32 bit patterns") {
  int64_t mismatches = 0;
  for (uint64_t u = 0; u <= 0xFFFFFFFFull; u += 997) {
    const float f = F32FromBits(static_cast<uint32_t>(u));
    const uint16_t got = F16FromF32(f);
    const uint16_t want = HalfBits(static_cast<_Float16>(f));
    if (std::isnan(f)) {
      // NaN stays NaN (payloads may differ).
      if ((got & 0x7C00) != 0x7C00 || (got & 0x3FF) == 0) ++mismatches;
    } else if (got != want) {
      ++mismatches;
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("F16FromF32 boundary cases") {
  CHECK(F16FromF32(65504.0f) == 0x7BFF);
  CHECK(F16FromF32(65519.996f) == 0x7BFF);
  CHECK(F16FromF32(65520.0f) == 0x7C00);  // rounds to Inf
  CHECK(F16FromF32(-1e10f) == 0xFC00);
  CHECK(F16FromF32(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(F16FromF32(std::ldexp(1.0f, -25)) == 0x0000);     // tie -> even (0)
  CHECK(F16FromF32(std::ldexp(3.0f, -25)) == 0x0002);     // tie -> even (2)
  CHECK(F16FromF32(std::ldexp(1.0f, -14)) == 0x0400);     // smallest normal
  CHECK(F16FromF32(std::ldexp(1023.5f, -24)) == 0x0400);  // rounds up into normals
  CHECK(F16FromF32(-0.0f) == 0x8000);
  CHECK(F16FromF32(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);  // tie -> even
  CHECK(F16FromF32(1.0f + std::ldexp(3.0f, -11)) == 0x3C02);
}

TEST_CASE("F32FromF16 is exact for all 65536 half values") {
  for (uint32_t h = 0; h < 65536; ++h) {
    _Float16 v;
    const uint16_t b = static_cast<uint16_t>(h);
    std::memcpy(&v, &b, 2);
    const float want = static_cast<float>(v);
    const float got = F32FromF16(b);
    if (std::isnan(want)) {
      CHECK(std::isnan(got));
    } else {
      CHECK(BitsFromF32(got) == BitsFromF32(want));
    }
  }
}

TEST_CASE("BF16FromF32 rounds to nearest even and keeps NaN") {
  CHECK(BF16FromF32(F32FromBits(0x3F808000u)) == 0x3F80);  // tie, even stays
  CHECK(BF16FromF32(F32FromBits(0x3F818000u)) == 0x3F82);  // tie, odd rounds up
  CHECK(BF16FromF32(F32FromBits(0x3F808001u)) == 0x3F81);
  CHECK(BF16FromF32(F32FromBits(0x3F807FFFu)) == 0x3F80);
  CHECK(BF16FromF32(F32FromBits(0x7F7FFFFFu)) == 0x7F80);  // max float -> Inf
  CHECK(BF16FromF32(F32FromBits(0xFF800000u)) == 0xFF80);
  const uint16_t nan = BF16FromF32(F32FromBits(0x7F800001u));  // would round to Inf
  CHECK((nan & 0x7F80) == 0x7F80);
  CHECK((nan & 0x7F) != 0);
  CHECK(F32FromBF16(0x3F80) == 1.0f);
}

TEST_CASE("float8 / float4 / e8m0 decoders") {
  CHECK(DecodeF8E4M3FN(0x38) == 1.0f);
  CHECK(DecodeF8E4M3FN(0x7E) == 448.0f);
  CHECK(DecodeF8E4M3FN(0xFE) == -448.0f);
  CHECK(std::isnan(DecodeF8E4M3FN(0x7F)));
  CHECK(std::isnan(DecodeF8E4M3FN(0xFF)));
  CHECK(DecodeF8E4M3FN(0x01) == std::ldexp(1.0f, -9));
  CHECK(DecodeF8E4M3FNUZ(0x40) == 1.0f);
  CHECK(DecodeF8E4M3FNUZ(0x7F) == 240.0f);
  CHECK(std::isnan(DecodeF8E4M3FNUZ(0x80)));
  CHECK(DecodeF8E4M3FNUZ(0x00) == 0.0f);
  CHECK(DecodeF8E5M2(0x3C) == 1.0f);
  CHECK(DecodeF8E5M2(0x7B) == 57344.0f);
  CHECK(std::isinf(DecodeF8E5M2(0x7C)));
  CHECK(DecodeF8E5M2(0xFC) < 0);
  CHECK(std::isnan(DecodeF8E5M2(0x7D)));
  CHECK(std::isnan(DecodeF8E5M2(0xFF)));
  CHECK(DecodeF8E5M2FNUZ(0x40) == 1.0f);
  CHECK(std::isnan(DecodeF8E5M2FNUZ(0x80)));
  const float f4[8] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  for (uint8_t b = 0; b < 16; ++b) {
    CHECK(DecodeF4E2M1(b) == (b & 8 ? -f4[b & 7] : f4[b & 7]));
  }
  CHECK(std::signbit(DecodeF4E2M1(0x8)));
  CHECK(DecodeF8E8M0(127) == 1.0f);
  CHECK(DecodeF8E8M0(128) == 2.0f);
  CHECK(DecodeF8E8M0(0) == std::ldexp(1.0f, -127));
  CHECK(DecodeF8E8M0(254) == std::ldexp(1.0f, 127));
  CHECK(std::isnan(DecodeF8E8M0(255)));
}

}  // namespace
}  // namespace nibble
