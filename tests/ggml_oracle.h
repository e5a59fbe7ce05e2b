// An independent scalar decoder of ggml's block formats, written from the
// format's description (ggml-common.h's block structs and the reference
// dequantize_row_<type> routines), never from nibble's Plan or kernels:
// what a wrong lowering in op/checkpoint.cc would disagree with.
//
// Each block's values are computed in float32 with the producers'
// operations in their order (no fused multiply-add: the build uses
// -ffp-contract=off).
#ifndef NIBBLE_TESTS_GGML_ORACLE_H_
#define NIBBLE_TESTS_GGML_ORACLE_H_

#include <cstdint>
#include <cstring>
#include <vector>

namespace nibble {
namespace testing {

// IEEE binary16 -> binary32, exact (subnormals, Inf, NaN).
inline float GgmlHalf(const uint8_t* p) {
  const uint16_t h = static_cast<uint16_t>(p[0] | (p[1] << 8));
  _Float16 f;
  std::memcpy(&f, &h, 2);
  return static_cast<float>(f);
}

// ggml type ids used below.
enum : uint32_t {
  kOracleQ4_0 = 2,
  kOracleQ4_1 = 3,
  kOracleQ8_0 = 8,
  kOracleQ4_K = 12,
  kOracleIQ4_NL = 20,
  kOracleIQ4_XS = 23,
  kOracleMXFP4 = 39,
};
// Every type this oracle decodes.
inline constexpr uint32_t kOracleTypes[] = {kOracleQ4_0,   kOracleQ4_1,   kOracleQ8_0, kOracleQ4_K,
                                            kOracleIQ4_NL, kOracleIQ4_XS, kOracleMXFP4};

// ggml's kvalues_iq4nl: the IQ4_NL grid.
inline constexpr int8_t kOracleIQ4NLGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                1,    13,   25,  38,  53,  69,  89,  113};

// Elements and bytes of one block.
inline int OracleBlockElems(uint32_t t) {
  return t == kOracleQ4_K || t == kOracleIQ4_XS ? 256 : 32;
}
inline int OracleBlockBytes(uint32_t t) {
  switch (t) {
    case kOracleQ4_0:
    case kOracleIQ4_NL:
      return 18;  // half d; u8 qs[16]
    case kOracleQ4_1:
      return 20;  // half d, m; u8 qs[16]
    case kOracleQ8_0:
      return 34;  // half d; i8 qs[32]
    case kOracleIQ4_XS:
      return 136;  // half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]
    case kOracleMXFP4:
      return 17;  // u8 e; u8 qs[16]
    default:
      return 144;  // Q4_K: half d, dmin; u8 scales[12]; u8 qs[128]
  }
}

// Q4_K's packed 6-bit scale and min of sub-block j (0..7).
inline void OracleScaleMinK4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Decodes one block of type t into y (OracleBlockElems(t) floats).
inline void OracleDecodeBlock(uint32_t t, const uint8_t* b, float* y) {
  if (t == kOracleQ4_0 || t == kOracleQ4_1) {
    const float d = GgmlHalf(b);
    const float m = t == kOracleQ4_1 ? GgmlHalf(b + 2) : 0.0f;
    const uint8_t* qs = b + (t == kOracleQ4_1 ? 4 : 2);
    for (int j = 0; j < 16; ++j) {
      if (t == kOracleQ4_0) {
        const int x0 = (qs[j] & 0xF) - 8, x1 = (qs[j] >> 4) - 8;
        y[j] = static_cast<float>(x0) * d;
        y[j + 16] = static_cast<float>(x1) * d;
      } else {
        const int x0 = qs[j] & 0xF, x1 = qs[j] >> 4;
        y[j] = static_cast<float>(x0) * d + m;
        y[j + 16] = static_cast<float>(x1) * d + m;
      }
    }
  } else if (t == kOracleIQ4_NL) {
    // dequantize_row_iq4_nl: y[j] = d * grid[qs[j] & 15], y[j + 16] = d *
    // grid[qs[j] >> 4].
    const float d = GgmlHalf(b);
    const uint8_t* qs = b + 2;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kOracleIQ4NLGrid[qs[j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kOracleIQ4NLGrid[qs[j] >> 4]);
    }
  } else if (t == kOracleIQ4_XS) {
    // dequantize_row_iq4_xs: per 32-element sub-block ib, a 6-bit scale ls
    // (4 low bits from scales_l, 2 high from scales_h), dl = d * (ls - 32),
    // y = dl * grid[q], the sub-block's 16 bytes low nibbles first.
    const float d = GgmlHalf(b);
    const int scales_h = b[2] | (b[3] << 8);
    const uint8_t* scales_l = b + 4;
    const uint8_t* qs = b + 8;
    for (int ib = 0; ib < 8; ++ib) {
      const int ls =
          ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
      const float dl = d * static_cast<float>(ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[32 * ib + j] = dl * static_cast<float>(kOracleIQ4NLGrid[qs[16 * ib + j] & 0xF]);
        y[32 * ib + j + 16] = dl * static_cast<float>(kOracleIQ4NLGrid[qs[16 * ib + j] >> 4]);
      }
    }
  } else if (t == kOracleMXFP4) {
    // dequantize_row_mxfp4: d = 2^(e - 128) (ggml's E8M0 "half", built from
    // bits: 2^-128 and 2^-127 are float32 subnormals), y = grid[q] * d with
    // ggml's doubled E2M1 grid.
    static constexpr int8_t kGrid[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    const uint32_t e = b[0];
    const uint32_t bits = e < 2 ? (0x00200000u << e) : ((e - 1) << 23);
    float d;
    std::memcpy(&d, &bits, 4);
    for (int j = 0; j < 16; ++j) {
      y[j] = static_cast<float>(kGrid[b[1 + j] & 0xF]) * d;
      y[j + 16] = static_cast<float>(kGrid[b[1 + j] >> 4]) * d;
    }
  } else if (t == kOracleQ8_0) {
    const float d = GgmlHalf(b);
    for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
  } else {  // Q4_K
    const float d = GgmlHalf(b), dmin = GgmlHalf(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* q = b + 16;
    int is = 0;
    for (int j = 0; j < 256; j += 64) {
      uint8_t sc, m;
      OracleScaleMinK4(is, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      OracleScaleMinK4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y[j + l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[j + 32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

// A whole tensor: `rows` rows of `cols` elements (cols a multiple of the
// block), blocks back to back.
inline std::vector<float> OracleDecode(uint32_t t, const uint8_t* data, int64_t rows,
                                       int64_t cols) {
  const int be = OracleBlockElems(t), bb = OracleBlockBytes(t);
  std::vector<float> y(static_cast<size_t>(rows * cols));
  for (int64_t b = 0; b < rows * cols / be; ++b) {
    OracleDecodeBlock(t, data + b * bb, y.data() + b * be);
  }
  return y;
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_GGML_ORACLE_H_
