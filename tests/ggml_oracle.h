// An independent scalar decoder of ggml's block formats, written from the
// format's description (ggml-common.h's block structs and the reference
// dequantize_row_<type> routines), never from nibble's Plan or kernels:
// what a wrong lowering in checkpoint/methods/layers.cc would disagree with.
//
// Each block's values are computed in float32 with the producers'
// operations in their order (no fused multiply-add: the build uses
// -ffp-contract=off).
#ifndef NIBBLE_TESTS_GGML_ORACLE_H_
#define NIBBLE_TESTS_GGML_ORACLE_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/ggml_oracle_grids.h"

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
  kOracleQ5_0 = 6,
  kOracleQ5_1 = 7,
  kOracleQ8_0 = 8,
  kOracleQ2_K = 10,
  kOracleQ3_K = 11,
  kOracleQ4_K = 12,
  kOracleQ5_K = 13,
  kOracleQ6_K = 14,
  kOracleIQ2_XXS = 16,
  kOracleIQ2_XS = 17,
  kOracleIQ3_XXS = 18,
  kOracleIQ1_S = 19,
  kOracleIQ4_NL = 20,
  kOracleIQ3_S = 21,
  kOracleIQ2_S = 22,
  kOracleIQ4_XS = 23,
  kOracleIQ1_M = 29,
  kOracleTQ1_0 = 34,
  kOracleTQ2_0 = 35,
  kOracleMXFP4 = 39,
  kOracleNVFP4 = 40,
  kOracleQ1_0 = 41,
  kOracleQ2_0 = 42,
};
// Every type this oracle decodes.
inline constexpr uint32_t kOracleTypes[] = {
    kOracleQ4_0,   kOracleQ4_1,    kOracleQ5_0,  kOracleQ5_1,    kOracleQ8_0,
    kOracleQ2_K,   kOracleQ3_K,    kOracleQ4_K,  kOracleQ5_K,    kOracleQ6_K,
    kOracleIQ4_NL, kOracleIQ4_XS,  kOracleTQ2_0, kOracleMXFP4,   kOracleQ2_0,
    kOracleTQ1_0,  kOracleQ1_0,    kOracleNVFP4, kOracleIQ2_XXS, kOracleIQ2_XS,
    kOracleIQ2_S,  kOracleIQ3_XXS, kOracleIQ3_S, kOracleIQ1_S,   kOracleIQ1_M};

// ggml's kvalues_iq4nl: the IQ4_NL grid.
inline constexpr int8_t kOracleIQ4NLGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                1,    13,   25,  38,  53,  69,  89,  113};

// Elements and bytes of one block.
inline int OracleBlockElems(uint32_t t) {
  switch (t) {
    case kOracleQ4_0:
    case kOracleQ4_1:
    case kOracleQ5_0:
    case kOracleQ5_1:
    case kOracleQ8_0:
    case kOracleIQ4_NL:
    case kOracleMXFP4:
      return 32;
    case kOracleQ2_0:
    case kOracleNVFP4:
      return 64;
    case kOracleQ1_0:
      return 128;
    default:
      return 256;
  }
}
inline int OracleBlockBytes(uint32_t t) {
  switch (t) {
    case kOracleQ5_0:
      return 22;  // half d; u8 qh[4]; u8 qs[16]
    case kOracleQ5_1:
      return 24;  // half d, m; u8 qh[4]; u8 qs[16]
    case kOracleQ2_K:
      return 84;  // u8 scales[16]; u8 qs[64]; half d, dmin
    case kOracleQ3_K:
      return 110;  // u8 hmask[32]; u8 qs[64]; u8 scales[12]; half d
    case kOracleQ5_K:
      return 176;  // half d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]
    case kOracleQ6_K:
      return 210;  // u8 ql[128]; u8 qh[64]; i8 scales[16]; half d
    case kOracleTQ2_0:
      return 66;  // u8 qs[64]; half d
    case kOracleQ4_0:
    case kOracleIQ4_NL:
    case kOracleQ2_0:
    case kOracleQ1_0:
      return 18;  // half d; u8 qs[16]
    case kOracleTQ1_0:
      return 54;  // u8 qs[48]; u8 qh[4]; half d
    case kOracleNVFP4:
      return 36;  // u8 d[4] (UE4M3); u8 qs[32]
    case kOracleQ4_1:
      return 20;  // half d, m; u8 qs[16]
    case kOracleQ8_0:
      return 34;  // half d; i8 qs[32]
    case kOracleIQ4_XS:
      return 136;  // half d; u16 scales_h; u8 scales_l[4]; u8 qs[128]
    case kOracleMXFP4:
      return 17;  // u8 e; u8 qs[16]
    case kOracleIQ2_XXS:
      return 66;  // half d; u16 qs[32]
    case kOracleIQ2_XS:
      return 74;  // half d; u16 qs[32]; u8 scales[8]
    case kOracleIQ2_S:
      return 82;  // half d; u8 qs[64]; u8 qh[8]; u8 scales[8]
    case kOracleIQ3_XXS:
      return 98;  // half d; u8 qs[96]
    case kOracleIQ3_S:
      return 110;  // half d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8 scales[4]
    case kOracleIQ1_S:
      return 50;  // half d; u8 qs[32]; u16 qh[8]
    case kOracleIQ1_M:
      return 56;  // u8 qs[32]; u8 qh[16]; u8 scales[8] (d in 4 nibbles)
    default:
      return 144;  // Q4_K: half d, dmin; u8 scales[12]; u8 qs[128]
  }
}

// Byte offsets of a block's float16 fields (scales d, mins m / dmin).
inline std::vector<int> OracleHalfFields(uint32_t t) {
  switch (t) {
    case kOracleQ4_1:
    case kOracleQ5_1:
    case kOracleQ4_K:
    case kOracleQ5_K:
      return {0, 2};
    case kOracleQ2_K:
      return {80, 82};
    case kOracleQ3_K:
      return {108};
    case kOracleQ6_K:
      return {208};
    case kOracleTQ2_0:
      return {64};
    case kOracleTQ1_0:
      return {52};
    case kOracleMXFP4:
    case kOracleNVFP4:
    case kOracleIQ1_M:
      return {};
    default:
      return {0};
  }
}

// Makes a random block's scales moderate and finite, keeping r's bits in
// them: float16 fields ~2^-7 (high byte 0x20 .. 0x27), MXFP4's E8M0 near 1,
// IQ1_M's scattered float16 d (the high nibbles of its scale bytes 1, 3, 5,
// 7) likewise.
inline void OracleModerateScales(uint32_t t, uint8_t* blk, uint32_t r) {
  if (t == kOracleMXFP4) {
    blk[0] = static_cast<uint8_t>(120 + r % 10);
  } else if (t == kOracleIQ1_M) {
    const uint16_t d = static_cast<uint16_t>(((0x20u + r % 8) << 8) | ((r >> 3) & 0xFF));
    for (int i = 0; i < 4; ++i) {
      uint8_t& byte = blk[48 + 2 * i + 1];
      byte = static_cast<uint8_t>((byte & 0x0F) | (((d >> (4 * i)) & 0xF) << 4));
    }
  } else {
    for (int at : OracleHalfFields(t)) blk[at + 1] = static_cast<uint8_t>(0x20 + r % 8);
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

// The i-quant grids, built here from the quantizer's index lists
// (tests/ggml_oracle_grids.h: digit i of entry k, `bits` wide, is the level
// index of position i) and the level values of ggml's format description.
struct OracleGrid {
  std::vector<int> flat;  // 8 values per point (IQ3: 4, the rest unused)
  const int* Point(int k) const { return flat.data() + 8 * static_cast<size_t>(k); }
};
inline OracleGrid OracleBuildGrid(const uint16_t* index, int n, int bits, int positions,
                                  const std::vector<int>& levels) {
  OracleGrid g;
  g.flat.assign(8 * static_cast<size_t>(n), 0);
  for (int k = 0; k < n; ++k) {
    for (int i = 0; i < positions; ++i) {
      g.flat[8 * static_cast<size_t>(k) + static_cast<size_t>(i)] =
          levels[static_cast<size_t>((index[k] >> (bits * i)) & ((1 << bits) - 1))];
    }
  }
  return g;
}
inline const OracleGrid& OracleIqGrid(uint32_t t) {
  static const OracleGrid iq2xxs = OracleBuildGrid(kOracle_kgrid_2bit_256, 256, 2, 8, {8, 25, 43});
  static const OracleGrid iq2xs = OracleBuildGrid(kOracle_kgrid_2bit_512, 512, 2, 8, {8, 25, 43});
  static const OracleGrid iq2s = OracleBuildGrid(kOracle_kgrid_2bit_1024, 1024, 2, 8, {8, 25, 43});
  static const OracleGrid iq3xxs =
      OracleBuildGrid(kOracle_kgrid_256, 256, 3, 4, {4, 12, 20, 28, 36, 44, 52, 62});
  static const OracleGrid iq3s =
      OracleBuildGrid(kOracle_kgrid_512, 512, 3, 4, {1, 3, 5, 7, 9, 11, 13, 15});
  static const OracleGrid iq1s = OracleBuildGrid(kOracle_kgrid_1bit_2048, 2048, 2, 8, {-1, 0, 1});
  switch (t) {
    case kOracleIQ2_XXS:
      return iq2xxs;
    case kOracleIQ2_XS:
      return iq2xs;
    case kOracleIQ2_S:
      return iq2s;
    case kOracleIQ3_XXS:
      return iq3xxs;
    case kOracleIQ3_S:
      return iq3s;
    default:
      return iq1s;
  }
}
// Sign of position j from a full 8-bit sign byte.
inline float OracleSign(int byte, int j) { return (byte >> j) & 1 ? -1.0f : 1.0f; }
// ggml's ksigns_iq2xs: 7 stored sign bits, the 8th makes their count even.
inline int OracleSigns7(int s) {
  int ones = 0;
  for (int i = 0; i < 7; ++i) ones += (s >> i) & 1;
  return s | ((ones % 2) << 7);
}
inline uint32_t OracleU32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
         (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

// The grid i-quants, from dequantize_row_iq2_xxs ... iq1_m: 8 values per
// grid point (IQ3: two 4-value points), float32 expressions in ggml's order.
inline void OracleDecodeIq(uint32_t t, const uint8_t* b, float* y) {
  const OracleGrid& grid = OracleIqGrid(t);
  auto signed8 = [&](float db, const int* p0, const int* p1, int signs, float* out) {
    for (int j = 0; j < 8; ++j) {
      const int v = p1 == nullptr ? p0[j] : (j < 4 ? p0[j] : p1[j - 4]);
      out[j] = db * static_cast<float>(v) * OracleSign(signs, j);
    }
  };
  if (t == kOracleIQ1_M) {
    uint16_t sc[4];
    for (int i = 0; i < 4; ++i) sc[i] = static_cast<uint16_t>(b[48 + 2 * i] | (b[49 + 2 * i] << 8));
    const uint16_t dbits = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00F0) |
                                                 ((sc[2] >> 4) & 0x0F00) | (sc[3] & 0xF000));
    const uint8_t raw[2] = {static_cast<uint8_t>(dbits & 0xFF), static_cast<uint8_t>(dbits >> 8)};
    const float d = GgmlHalf(raw);
    for (int ib = 0; ib < 8; ++ib) {
      for (int l = 0; l < 4; ++l) {
        const int s3 = (sc[ib / 2] >> (6 * (ib % 2) + (l < 2 ? 0 : 3))) & 7;
        const float dl = d * static_cast<float>(2 * s3 + 1);
        const int h = b[32 + 2 * ib + l / 2];
        const int hh = l % 2 == 0 ? (h & 0x0F) : (h >> 4);
        const int idx = b[4 * ib + l] | ((hh & 7) << 8);
        const float delta = (hh & 8) ? -0.125f : 0.125f;
        for (int j = 0; j < 8; ++j) {
          y[32 * ib + 8 * l + j] = dl * (static_cast<float>(grid.Point(idx)[j]) + delta);
        }
      }
    }
    return;
  }
  const float d = GgmlHalf(b);
  for (int ib = 0; ib < 8; ++ib) {
    float* out = y + 32 * ib;
    if (t == kOracleIQ2_XXS) {
      const uint32_t aux = OracleU32(b + 2 + 8 * ib + 4);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.25f;
      for (int l = 0; l < 4; ++l) {
        signed8(db, grid.Point(b[2 + 8 * ib + l]), nullptr,
                OracleSigns7(static_cast<int>((aux >> (7 * l)) & 127)), out + 8 * l);
      }
    } else if (t == kOracleIQ2_XS || t == kOracleIQ2_S) {
      const int sc = b[(t == kOracleIQ2_XS ? 66 : 74) + ib];
      for (int l = 0; l < 4; ++l) {
        const int s4 = l < 2 ? (sc & 0xF) : (sc >> 4);
        const float db = d * (0.5f + static_cast<float>(s4)) * 0.25f;
        int idx, signs;
        if (t == kOracleIQ2_XS) {
          const int q = b[2 + 2 * (4 * ib + l)] | (b[3 + 2 * (4 * ib + l)] << 8);
          idx = q & 511;
          signs = OracleSigns7(q >> 9);
        } else {
          idx = b[2 + 4 * ib + l] | (((b[66 + ib] >> (2 * l)) & 3) << 8);
          signs = b[34 + 4 * ib + l];
        }
        signed8(db, grid.Point(idx), nullptr, signs, out + 8 * l);
      }
    } else if (t == kOracleIQ3_XXS) {
      const uint32_t aux = OracleU32(b + 66 + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (int l = 0; l < 4; ++l) {
        signed8(db, grid.Point(b[2 + 8 * ib + 2 * l]), grid.Point(b[2 + 8 * ib + 2 * l + 1]),
                OracleSigns7(static_cast<int>((aux >> (7 * l)) & 127)), out + 8 * l);
      }
    } else if (t == kOracleIQ3_S) {
      const int s4 = (b[106 + ib / 2] >> (4 * (ib % 2))) & 0xF;
      const float db = d * static_cast<float>(1 + 2 * s4);
      const int qh = b[66 + ib];
      for (int l = 0; l < 4; ++l) {
        const int i0 = b[2 + 8 * ib + 2 * l] | (((qh >> (2 * l)) & 1) << 8);
        const int i1 = b[2 + 8 * ib + 2 * l + 1] | (((qh >> (2 * l + 1)) & 1) << 8);
        signed8(db, grid.Point(i0), grid.Point(i1), b[74 + 4 * ib + l], out + 8 * l);
      }
    } else {  // IQ1_S
      const int qh = b[34 + 2 * ib] | (b[35 + 2 * ib] << 8);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7) + 1);
      const float delta = (qh & 0x8000) ? -0.125f : 0.125f;
      for (int l = 0; l < 4; ++l) {
        const int idx = b[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
        for (int j = 0; j < 8; ++j) {
          out[8 * l + j] = dl * (static_cast<float>(grid.Point(idx)[j]) + delta);
        }
      }
    }
  }
}

// Decodes one block of type t into y (OracleBlockElems(t) floats).
inline void OracleDecodeBlock(uint32_t t, const uint8_t* b, float* y) {
  switch (t) {
    case kOracleIQ2_XXS:
    case kOracleIQ2_XS:
    case kOracleIQ2_S:
    case kOracleIQ3_XXS:
    case kOracleIQ3_S:
    case kOracleIQ1_S:
    case kOracleIQ1_M:
      return OracleDecodeIq(t, b, y);
    default:
      break;
  }
  if (t == kOracleQ5_0 || t == kOracleQ5_1) {
    // dequantize_row_q5_0 / q5_1: xh_0 = ((qh >> j) << 4) & 0x10, xh_1 =
    // (qh >> (j + 12)) & 0x10; Q5_0: (x - 16) * d; Q5_1: x * d + m.
    const bool one = t == kOracleQ5_1;
    const float d = GgmlHalf(b);
    const float m = one ? GgmlHalf(b + 2) : 0.0f;
    const uint8_t* qhp = b + (one ? 4 : 2);
    const uint32_t qh = static_cast<uint32_t>(qhp[0] | (qhp[1] << 8) | (qhp[2] << 16)) |
                        (static_cast<uint32_t>(qhp[3]) << 24);
    const uint8_t* qs = qhp + 4;
    for (int j = 0; j < 16; ++j) {
      const uint32_t xh_0 = ((qh >> j) << 4) & 0x10;
      const uint32_t xh_1 = (qh >> (j + 12)) & 0x10;
      const int x0 = static_cast<int>((qs[j] & 0x0Fu) | xh_0);
      const int x1 = static_cast<int>((qs[j] >> 4) | xh_1);
      if (one) {
        y[j] = static_cast<float>(x0) * d + m;
        y[j + 16] = static_cast<float>(x1) * d + m;
      } else {
        y[j] = static_cast<float>(x0 - 16) * d;
        y[j + 16] = static_cast<float>(x1 - 16) * d;
      }
    }
  } else if (t == kOracleQ2_K) {
    // dequantize_row_q2_K.
    const uint8_t* scales = b;
    const uint8_t* q = b + 16;
    const float d = GgmlHalf(b + 80), dmin = GgmlHalf(b + 82);
    int is = 0;
    float* out = y;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = scales[is++];
        float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *out++ = dl * static_cast<float>(static_cast<int8_t>((q[l] >> shift) & 3)) - ml;
        }
        sc = scales[is++];
        dl = d * static_cast<float>(sc & 0xF);
        ml = dmin * static_cast<float>(sc >> 4);
        for (int l = 0; l < 16; ++l) {
          *out++ = dl * static_cast<float>(static_cast<int8_t>((q[l + 16] >> shift) & 3)) - ml;
        }
        shift += 2;
      }
      q += 32;
    }
  } else if (t == kOracleQ3_K) {
    // dequantize_row_q3_K, including its kmask1 / kmask2 unpacking of the
    // twelve scale bytes into sixteen 6-bit scales.
    const uint8_t* hm = b;
    const uint8_t* q = b + 32;
    const float d_all = GgmlHalf(b + 108);
    uint32_t aux[4];
    std::memcpy(aux, b + 96, 12);
    const uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
    const uint32_t tmp = aux[2];
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
    int8_t scales[16];
    std::memcpy(scales, aux, 16);
    int is = 0;
    uint8_t m = 1;
    float* out = y;
    for (int n = 0; n < 256; n += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * static_cast<float>(scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *out++ = dl * static_cast<float>(static_cast<int8_t>((q[l] >> shift) & 3) -
                                           ((hm[l] & m) ? 0 : 4));
        }
        dl = d_all * static_cast<float>(scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *out++ = dl * static_cast<float>(static_cast<int8_t>((q[l + 16] >> shift) & 3) -
                                           ((hm[l + 16] & m) ? 0 : 4));
        }
        shift += 2;
        m = static_cast<uint8_t>(m << 1);
      }
      q += 32;
    }
  } else if (t == kOracleQ5_K) {
    // dequantize_row_q5_K.
    const float d = GgmlHalf(b), dmin = GgmlHalf(b + 2);
    const uint8_t* scales = b + 4;
    const uint8_t* qh = b + 16;
    const uint8_t* ql = b + 48;
    int is = 0;
    uint8_t u1 = 1, u2 = 2;
    float* out = y;
    for (int j = 0; j < 256; j += 64) {
      uint8_t sc, m;
      OracleScaleMinK4(is + 0, scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      OracleScaleMinK4(is + 1, scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) {
        *out++ = d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      }
      for (int l = 0; l < 32; ++l) {
        *out++ = d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      }
      ql += 32;
      is += 2;
      u1 = static_cast<uint8_t>(u1 << 2);
      u2 = static_cast<uint8_t>(u2 << 2);
    }
  } else if (t == kOracleQ6_K) {
    // dequantize_row_q6_K.
    const uint8_t* ql = b;
    const uint8_t* qh = b + 128;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
    const float d = GgmlHalf(b + 208);
    float* out = y;
    for (int n = 0; n < 256; n += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        out[l + 0] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
        out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
      out += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  } else if (t == kOracleTQ2_0) {
    // dequantize_row_tq2_0: (q - 1) * d, four 2-bit fields per byte.
    const float d = GgmlHalf(b + 64);
    float* out = y;
    for (int j = 0; j < 64; j += 32) {
      for (int l = 0; l < 4; ++l) {
        for (int m = 0; m < 32; ++m) {
          const int8_t q = static_cast<int8_t>((b[j + m] >> (l * 2)) & 3);
          *out++ = static_cast<float>(q - 1) * d;
        }
      }
    }
  } else if (t == kOracleTQ1_0) {
    // dequantize_row_tq1_0: digit n of a byte is ((uint8)(b * 3^n) * 3) >>
    // 8; qs[0..31] then qs[32..47] five digits each, digit-major, then qh
    // four digits, digit-major; (digit - 1) * d.
    const float d = GgmlHalf(b + 52);
    static constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
    float* out = y;
    auto put = [&](uint8_t byte, int n) {
      const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
      const int16_t xi = static_cast<int16_t>((static_cast<uint16_t>(q) * 3) >> 8);
      *out++ = static_cast<float>(xi - 1) * d;
    };
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 32; ++m) put(b[m], n);
    }
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 16; ++m) put(b[32 + m], n);
    }
    for (int n = 0; n < 4; ++n) {
      for (int j = 0; j < 4; ++j) put(b[48 + j], n);
    }
  } else if (t == kOracleQ1_0) {
    // dequantize_row_q1_0: bit j % 8 of qs[j / 8]: d, else -d.
    const float d = GgmlHalf(b);
    const float neg_d = -d;
    for (int j = 0; j < 128; ++j) y[j] = ((b[2 + j / 8] >> (j % 8)) & 1) ? d : neg_d;
  } else if (t == kOracleNVFP4) {
    // dequantize_row_nvfp4 with ggml_ue4m3_to_fp32 (ldexpf; 0 and 0x7F are
    // 0; times 0.5 for the doubled grid).
    static constexpr int8_t kGrid[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (int s = 0; s < 4; ++s) {
      const uint8_t x = b[s];
      float d = 0.0f;
      if (x != 0 && x != 0x7F) {
        const int exp = (x >> 3) & 0xF, man = x & 0x7;
        const float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                                   : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
        d = raw * 0.5f;
      }
      for (int j = 0; j < 8; ++j) {
        const uint8_t q = b[4 + 8 * s + j];
        y[16 * s + j] = static_cast<float>(kGrid[q & 0x0F]) * d;
        y[16 * s + j + 8] = static_cast<float>(kGrid[q >> 4]) * d;
      }
    }
  } else if (t == kOracleQ2_0) {
    // dequantize_row_q2_0: element j is bits 2 * (j % 4) of qs[j / 4],
    // ((int)q - 1) * d (00 = -1, 01 = 0, 10 = +1, 11 = +2).
    const float d = GgmlHalf(b);
    for (int j = 0; j < 64; ++j) {
      const int q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
      y[j] = static_cast<float>(q - 1) * d;
    }
  } else if (t == kOracleQ4_0 || t == kOracleQ4_1) {
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
