// Code layouts: where the quantized code of each element lives in memory.
//
// Every Plan names its layout explicitly (Plan::layout). Each layout has one
// descriptor here; the kernels (kernels/dequantize-inl.h and
// kernels/code_loaders-inl.h), the scalar reference (kernels/reference.cc)
// and op/ (lowering) all read the layout's facts from that descriptor, and
// every `switch` over Layout lists all cases (no `default:`), so -Wswitch
// names any place a new layout is missed.
//
// Two kinds of layout:
//  - Stream layouts (kDense, kPmxWords, kAwqWords, kGptqColumns,
//    kAwqColumns): the arrangement is described in the comments of the enum
//    and the few parameters live in the Plan (interleave, word_stride).
//  - Block layouts (ggml's quantized types): a fixed-size on-disk block
//    struct holding a header (scales / mins) and the codes of kBlockElems
//    elements. Their descriptor (below) is the block struct with its
//    static_assert'ed size, its geometry, and its decode step: where each
//    element's code bits sit (one or two bit planes, CodePlane) and
//    `Params`, the header -> per-sub-block float32 scale (and additive
//    float zero point). The kernels are templated on the descriptor;
//    nothing else about a block layout is written anywhere.
//
// Adding a block layout whose codes are bit planes (1, 2, 4 or 8 bits,
// integer or 16-entry table codes) is: its descriptor here, one line in
// NIBBLE_BLOCK_LAYOUTS, and its independent decoder in the tests.
#ifndef NIBBLE_KERNELS_LAYOUTS_H_
#define NIBBLE_KERNELS_LAYOUTS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "base/numeric.h"
#include "kernels/codes.h"
#include "kernels/ggml_grids.h"

namespace nibble {

// AWQ's order of the eight 4-bit codes inside a 32-bit word: logical
// element p (0..7) of a word is nibble kAwqNibbleOrder[p] (bits 4 * that).
// The one definition, used by the kernels, the reference and op/.
inline constexpr uint8_t kAwqNibbleOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// ---------------------------------------------------------------------------
// Block layout descriptors (ggml).
//
// Contract of a descriptor D:
//   struct Block;                 the on-disk block (packed, little-endian)
//   kName, kGgmlType              ggml's name and type id
//   kBlockElems                   elements per block (a power of two)
//   kBytes == sizeof(Block)       bytes per block
//   kPlanes                       the code's bit planes (CodePlane below):
//                                 element p's code is the field of p in
//                                 kPlanes[0], with the field of p in
//                                 kPlanes[1] (if any) above its bits
//   kCode                         code kind: kU4 (one 4-bit plane), kU8
//                                 (unsigned codes of up to 8 bits from the
//                                 planes), kS8 (one 8-bit plane), or
//                                 kTable4 (a 4-bit index into the
//                                 descriptor's kValues, 16 float32 values:
//                                 an array or a pointer)
//   kSubElems                     elements sharing one scale (>= 16)
//   kZp, kCodeOffset              zero point kind (kNone: q - kCodeOffset;
//                                 kFloat: q * s + zero) and code offset
//   Params(block, scale, zero)    the block's kBlockElems / kSubElems
//                                 scales (and zeros when kZp == kFloat), as
//                                 the format's reference decoder computes
//                                 them in float32.
//   kHalfHeader (optional)        one sub-block per block whose Params
//                                 only widens float16 header fields
//                                 (HalfHeader below)
//   kPackedHeader (optional)      the sub-blocks' scales (and mins) as bit
//                                 fields of the header (PackedHeader
//                                 below); Params is PackedHeaderParams
//   kHalfGrid (optional)          true: Params, without a kHalfHeader or
//                                 kPackedHeader, only widens float16 header
//                                 fields or multiplies them by integers
//                                 (BlockNormalValues below)
//   kPow2Scales (optional)        true: Params' scales are powers of two
//                                 (an E8M0 exponent) but for a few values
//                                 (subnormal ones): kernels may take a
//                                 scale's exponent for a multiply where
//                                 they check it is one (DeclaresPow2Scales)
// Value of element p of a block: SPEC arithmetic of the Plan with the
// sub-block's scale / zero, e.g. Q4_0: (q - 8) * d.

// One bit plane of a block's codes: `bits`-wide fields (1, 2, 4 or 8) in
// the block's bytes from `at` on. The plane is cut into runs of `run`
// elements (a power of two), span = run * bits / 8 bytes each; element q
// of a run is field q / span (bits [bits * (q / span), + bits)) of byte
// q % span of its run. So a run's first `span` elements are the low fields
// of its bytes, the next `span` the next fields, and so on (ggml's "split"
// nibbles: run 32, 4 bits = low nibbles of 16 bytes, then high nibbles);
// run = 8 / bits packs consecutive elements into each byte (span 1).
// The vector loaders need span == 1 or span >= 16.
struct CodePlane {
  uint32_t at, bits, run;
  constexpr uint32_t span() const { return run * bits / 8; }
};

// Decoded layouts' Decode and its helpers: inlined into the per-target
// kernel loop (kernels/dequantize.cc), so each SIMD target compiles them
// with its own instruction set.
#define NIBBLE_DECODE_INLINE inline __attribute__((always_inline))

namespace layout_internal {
template <class T>
inline T Field(const uint8_t* block, size_t offset) {
  T v;
  std::memcpy(&v, block + offset, sizeof(T));
  return v;  // little-endian host (x86-64 / aarch64)
}
NIBBLE_DECODE_INLINE float Half(const uint8_t* block, size_t offset) {
  return F32FromF16(Field<uint16_t>(block, offset));
}
inline void SetHalf(uint8_t* block, size_t offset, uint16_t bits) {
  std::memcpy(block + offset, &bits, 2);
}
// A moderate float16 scale for synthetic blocks: 0x3C3C (1.06).
constexpr uint16_t kModerateHalf = 0x3C3C;
}  // namespace layout_internal

// The header of the one-sub-block ggml types: a float16 scale at
// `scale_at` and, for kFloat zeros, a float16 zero at `zero_at` (else -1),
// which Params only widens (HalfHeaderParams). Declaring it (kHalfHeader)
// lets the kernels widen 16 blocks' headers at once (bit-identical: the
// same exact conversion).
struct HalfHeader {
  int32_t scale_at, zero_at;
};
inline void HalfHeaderParams(const HalfHeader& h, const uint8_t* b, float* scale, float* zero) {
  scale[0] = layout_internal::Half(b, static_cast<size_t>(h.scale_at));
  if (h.zero_at >= 0) zero[0] = layout_internal::Half(b, static_cast<size_t>(h.zero_at));
}

// The header of the K-quant-style types as data: every sub-block's scale
// (and min) is an unsigned bit field of the header, possibly in two parts
// (`lo`, then `hi` above its bits), times a float16 multiplier:
//   scale[j] = d * float32(field_j - bias)    (is_signed: the field is
//                                              two's complement)
//   zero[j]  = -(dmin * float32(min_j))        (dmin_at >= 0 only)
// Declaring it (kPackedHeader) makes Params PackedHeaderParams, and lets
// the kernels (every SIMD target) decode a block's header in vector lanes
// from the same fields (bit-identical: the same float32 operations per
// value).
struct HeaderField {
  uint8_t at = 0, shift = 0, bits = 0;  // bits [shift, shift + bits) of byte at; bits 0: none
};
struct HeaderParam {
  HeaderField lo, hi;
};
struct PackedHeader {
  int32_t d_at = 0, dmin_at = -1;  // float16 fields (dmin_at -1: no mins)
  int32_t bias = 0;
  bool is_signed = false;
  HeaderParam scale[16], min[16];  // one per sub-block
};
namespace layout_internal {
inline constexpr uint32_t HeaderBits(const uint8_t* b, const HeaderField& f) {
  return f.bits == 0 ? 0u : (uint32_t{b[f.at]} >> f.shift) & ((1u << f.bits) - 1u);
}
inline constexpr uint32_t HeaderValue(const uint8_t* b, const HeaderParam& p) {
  return HeaderBits(b, p.lo) | HeaderBits(b, p.hi) << p.lo.bits;
}
}  // namespace layout_internal
// Params of a packed header of `subs` sub-blocks.
inline void PackedHeaderParams(const PackedHeader& h, int subs, const uint8_t* b, float* scale,
                               float* zero) {
  const float d = layout_internal::Half(b, static_cast<size_t>(h.d_at));
  for (int j = 0; j < subs; ++j) {
    const HeaderParam& p = h.scale[j];
    const uint32_t u = layout_internal::HeaderValue(b, p);
    const uint32_t width = uint32_t{p.lo.bits} + p.hi.bits;
    const int32_t v = h.is_signed ? static_cast<int32_t>(u ^ (1u << (width - 1))) -
                                        static_cast<int32_t>(1u << (width - 1))
                                  : static_cast<int32_t>(u);
    scale[j] = d * static_cast<float>(v - h.bias);
  }
  if (h.dmin_at >= 0) {
    const float dmin = layout_internal::Half(b, static_cast<size_t>(h.dmin_at));
    for (int j = 0; j < subs; ++j) {
      zero[j] = -(dmin * static_cast<float>(layout_internal::HeaderValue(b, h.min[j])));
    }
  }
}

// Q4_0: {f16 d; u8 qs[16]}: (q - 8) * d.
struct GgufQ4_0 {
  struct Block {
    uint16_t d;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q4_0";
  static constexpr uint32_t kGgmlType = 2;
  static constexpr int64_t kBlockElems = 32, kBytes = 18, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32}};
  static constexpr CodeKind kCode = CodeKind::kU4;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 8;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), -1};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

// Q4_1: {f16 d, m; u8 qs[16]}: q * d + m.
struct GgufQ4_1 {
  struct Block {
    uint16_t d, m;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q4_1";
  static constexpr uint32_t kGgmlType = 3;
  static constexpr int64_t kBlockElems = 32, kBytes = 20, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32}};
  static constexpr CodeKind kCode = CodeKind::kU4;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), offsetof(Block, m)};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

// Q5_0: {f16 d; u8 qh[4]; u8 qs[16]}: 5-bit codes, the low nibbles split
// as Q4_0's, bit 4 of element p = bit p of the little-endian qh: (q - 16) * d.
struct GgufQ5_0 {
  struct Block {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q5_0";
  static constexpr uint32_t kGgmlType = 6;
  static constexpr int64_t kBlockElems = 32, kBytes = 22, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32},
                                          {offsetof(Block, qh), 1, 8}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 16;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), -1};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

// Q5_1: {f16 d, m; u8 qh[4]; u8 qs[16]}: Q5_0's codes, q * d + m.
struct GgufQ5_1 {
  struct Block {
    uint16_t d, m;
    uint8_t qh[4];
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q5_1";
  static constexpr uint32_t kGgmlType = 7;
  static constexpr int64_t kBlockElems = 32, kBytes = 24, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32},
                                          {offsetof(Block, qh), 1, 8}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), offsetof(Block, m)};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

// Q8_0: {f16 d; i8 qs[32]}: q * d.
struct GgufQ8_0 {
  struct Block {
    uint16_t d;
    int8_t qs[32];
  };
  static constexpr const char* kName = "q8_0";
  static constexpr uint32_t kGgmlType = 8;
  static constexpr int64_t kBlockElems = 32, kBytes = 34, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 8, 1}};
  static constexpr CodeKind kCode = CodeKind::kS8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), -1};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

namespace layout_internal {
constexpr uint8_t U8(size_t v) { return static_cast<uint8_t>(v); }
// ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j (0..7)
// of Q4_K / Q5_K, packed in the 12 bytes at q: j < 4: the low 6 bits of
// q[j] / q[j + 4]; else the low / high nibble of q[j + 4] with the top two
// bits of q[j - 4] / q[j] above. Scales d * sc_j, zeros -(dmin * m_j).
constexpr PackedHeader K4Header(size_t d_at, size_t dmin_at, size_t q) {
  PackedHeader h;
  h.d_at = static_cast<int32_t>(d_at);
  h.dmin_at = static_cast<int32_t>(dmin_at);
  for (size_t j = 0; j < 8; ++j) {
    if (j < 4) {
      h.scale[j] = {{U8(q + j), 0, 6}, {}};
      h.min[j] = {{U8(q + j + 4), 0, 6}, {}};
    } else {
      h.scale[j] = {{U8(q + j + 4), 0, 4}, {U8(q + j - 4), 6, 2}};
      h.min[j] = {{U8(q + j + 4), 4, 4}, {U8(q + j), 6, 2}};
    }
  }
  return h;
}
}  // namespace layout_internal

// Q2_K: {u8 scales[16]; u8 qs[64]; f16 d, dmin}, sixteen 16-element
// sub-blocks j, each with a 4-bit scale (low nibble of scales[j]) and min
// (high nibble): (d * sc_j) * q - dmin * m_j. 2-bit codes: each 128-element
// half is 32 bytes, elements 32i .. 32i+31 in bits 2i of them.
struct GgufQ2_K {
  struct Block {
    uint8_t scales[16];
    uint8_t qs[64];
    uint16_t d, dmin;
  };
  static constexpr const char* kName = "q2_k";
  static constexpr uint32_t kGgmlType = 10;
  static constexpr int64_t kBlockElems = 256, kBytes = 84, kSubElems = 16;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 2, 128}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr PackedHeader kPackedHeader = [] {
    PackedHeader h;
    h.d_at = static_cast<int32_t>(offsetof(Block, d));
    h.dmin_at = static_cast<int32_t>(offsetof(Block, dmin));
    for (size_t j = 0; j < 16; ++j) {
      h.scale[j] = {{layout_internal::U8(offsetof(Block, scales) + j), 0, 4}, {}};
      h.min[j] = {{layout_internal::U8(offsetof(Block, scales) + j), 4, 4}, {}};
    }
    return h;
  }();
  static void Params(const uint8_t* b, float* scale, float* zero) {
    PackedHeaderParams(kPackedHeader, kBlockElems / kSubElems, b, scale, zero);
  }
};

// Q3_K: {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}: 3-bit codes, the
// low two bits as Q2_K's, bit 2 of element p = bit p / 32 of hmask[p % 32]
// (ggml subtracts 4 where that bit is clear: the same as q - 4). Sixteen
// 16-element sub-blocks j with 6-bit scales sc_j (low 4 bits: nibble j / 8
// of scales[j % 8]; high 2 bits: bits 2 * (j / 4) of scales[8 + j % 4]):
// (d * (sc_j - 32)) * (q - 4).
struct GgufQ3_K {
  struct Block {
    uint8_t hmask[32];
    uint8_t qs[64];
    uint8_t scales[12];
    uint16_t d;
  };
  static constexpr const char* kName = "q3_k";
  static constexpr uint32_t kGgmlType = 11;
  static constexpr int64_t kBlockElems = 256, kBytes = 110, kSubElems = 16;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 2, 128},
                                          {offsetof(Block, hmask), 1, 256}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 4;
  static constexpr PackedHeader kPackedHeader = [] {
    PackedHeader h;
    h.d_at = static_cast<int32_t>(offsetof(Block, d));
    h.bias = 32;
    constexpr size_t q = offsetof(Block, scales);
    for (size_t j = 0; j < 16; ++j) {
      h.scale[j] = {{layout_internal::U8(q + j % 8), layout_internal::U8(4 * (j / 8)), 4},
                    {layout_internal::U8(q + 8 + j % 4), layout_internal::U8(2 * (j / 4)), 2}};
    }
    return h;
  }();
  static void Params(const uint8_t* b, float* scale, float* zero) {
    PackedHeaderParams(kPackedHeader, kBlockElems / kSubElems, b, scale, zero);
  }
};

// Q4_K: {f16 d, dmin; u8 scales[12]; u8 qs[128]}, eight 32-element
// sub-blocks j with 6-bit (sc_j, m_j) packed as ggml's get_scale_min_k4:
// (d * sc_j) * q - dmin * m_j. The four 64-element runs of qs hold
// sub-blocks (2i, 2i + 1) in their low / high nibbles.
struct GgufQ4_K {
  struct Block {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qs[128];
  };
  static constexpr const char* kName = "q4_k";
  static constexpr uint32_t kGgmlType = 12;
  static constexpr int64_t kBlockElems = 256, kBytes = 144, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 64}};
  static constexpr CodeKind kCode = CodeKind::kU4;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr PackedHeader kPackedHeader =
      layout_internal::K4Header(offsetof(Block, d), offsetof(Block, dmin), offsetof(Block, scales));
  static void Params(const uint8_t* b, float* scale, float* zero) {
    PackedHeaderParams(kPackedHeader, kBlockElems / kSubElems, b, scale, zero);
  }
};

// Q5_K: {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}: Q4_K's
// scales, mins and low nibbles; bit 4 of element p = bit p / 32 of
// qh[p % 32].
struct GgufQ5_K {
  struct Block {
    uint16_t d, dmin;
    uint8_t scales[12];
    uint8_t qh[32];
    uint8_t qs[128];
  };
  static constexpr const char* kName = "q5_k";
  static constexpr uint32_t kGgmlType = 13;
  static constexpr int64_t kBlockElems = 256, kBytes = 176, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 64},
                                          {offsetof(Block, qh), 1, 256}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr PackedHeader kPackedHeader =
      layout_internal::K4Header(offsetof(Block, d), offsetof(Block, dmin), offsetof(Block, scales));
  static void Params(const uint8_t* b, float* scale, float* zero) {
    PackedHeaderParams(kPackedHeader, kBlockElems / kSubElems, b, scale, zero);
  }
};

// Q6_K: {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}: 6-bit codes per
// 128-element half: low nibbles split over 64 bytes of ql (elements 0-63
// low, 64-127 high nibbles), bits 4-5 = bits 2 * (q / 32) of qh[q % 32]
// (q = p % 128); sixteen 16-element sub-blocks j: (d * sc_j) * (q - 32).
struct GgufQ6_K {
  struct Block {
    uint8_t ql[128];
    uint8_t qh[64];
    int8_t scales[16];
    uint16_t d;
  };
  static constexpr const char* kName = "q6_k";
  static constexpr uint32_t kGgmlType = 14;
  static constexpr int64_t kBlockElems = 256, kBytes = 210, kSubElems = 16;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, ql), 4, 128},
                                          {offsetof(Block, qh), 2, 128}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 32;
  static constexpr PackedHeader kPackedHeader = [] {
    PackedHeader h;
    h.d_at = static_cast<int32_t>(offsetof(Block, d));
    h.is_signed = true;
    for (size_t j = 0; j < 16; ++j) {
      h.scale[j] = {{layout_internal::U8(offsetof(Block, scales) + j), 0, 8}, {}};
    }
    return h;
  }();
  static void Params(const uint8_t* b, float* scale, float* zero) {
    PackedHeaderParams(kPackedHeader, kBlockElems / kSubElems, b, scale, zero);
  }
};

// TQ2_0 (ternary): {u8 qs[64]; f16 d}: Q2_K's 2-bit code layout,
// (q - 1) * d.
struct GgufTQ2_0 {
  struct Block {
    uint8_t qs[64];
    uint16_t d;
  };
  static constexpr const char* kName = "tq2_0";
  static constexpr uint32_t kGgmlType = 35;
  static constexpr int64_t kBlockElems = 256, kBytes = 66, kSubElems = 256;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 2, 128}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 1;
  static constexpr bool kHalfGrid = true;  // Params only widens d (BlockNormalValues)
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    scale[0] = layout_internal::Half(b, offsetof(Block, d));
  }
};

// Q2_0: {f16 d; u8 qs[16]}, 64 elements, four 2-bit fields per byte from
// the low bits (element j: bits 2 * (j % 4) of qs[j / 4]): (q - 1) * d.
struct GgufQ2_0 {
  struct Block {
    uint16_t d;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q2_0";
  static constexpr uint32_t kGgmlType = 42;
  static constexpr int64_t kBlockElems = 64, kBytes = 18, kSubElems = 64;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 2, 4}};
  static constexpr CodeKind kCode = CodeKind::kU8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 1;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), -1};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

// ggml's kvalues_iq4nl: the non-linear 4-bit grid of IQ4_NL and IQ4_XS.
inline constexpr float kIq4NonLinearGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                1,    13,   25,  38,  53,  69,  89,  113};

// IQ4_NL: {f16 d; u8 qs[16]}, codes index a fixed non-linear grid:
// d * kValues[q] (ggml's kvalues_iq4nl).
struct GgufIQ4_NL {
  struct Block {
    uint16_t d;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "iq4_nl";
  static constexpr uint32_t kGgmlType = 20;
  static constexpr int64_t kBlockElems = 32, kBytes = 18, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32}};
  static constexpr CodeKind kCode = CodeKind::kTable4;
  static constexpr const float* kValues = kIq4NonLinearGrid;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr HalfHeader kHalfHeader = {offsetof(Block, d), -1};
  static void Params(const uint8_t* b, float* scale, float* zero) {
    HalfHeaderParams(kHalfHeader, b, scale, zero);
  }
};

// IQ4_XS: {f16 d; u16 scales_h; u8 scales_l[4]; u8 qs[128]}, eight
// 32-element sub-blocks ib with a 6-bit scale ls_ib (low 4 bits in
// scales_l, high 2 in scales_h): (d * (ls_ib - 32)) * kValues[q], the
// IQ4_NL grid; sub-block ib's 16 bytes of qs hold its elements 0-15 (low
// nibbles) and 16-31 (high).
struct GgufIQ4_XS {
  struct Block {
    uint16_t d, scales_h;
    uint8_t scales_l[4];
    uint8_t qs[128];
  };
  static constexpr const char* kName = "iq4_xs";
  static constexpr uint32_t kGgmlType = 23;
  static constexpr int64_t kBlockElems = 256, kBytes = 136, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32}};
  static constexpr CodeKind kCode = CodeKind::kTable4;
  static constexpr const float* kValues = kIq4NonLinearGrid;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr PackedHeader kPackedHeader = [] {
    PackedHeader h;
    h.d_at = static_cast<int32_t>(offsetof(Block, d));
    h.bias = 32;
    for (size_t ib = 0; ib < 8; ++ib) {
      // (scales_h: a little-endian u16, two bits per sub-block.)
      h.scale[ib] = {{layout_internal::U8(offsetof(Block, scales_l) + ib / 2),
                      layout_internal::U8(4 * (ib % 2)), 4},
                     {layout_internal::U8(offsetof(Block, scales_h) + 2 * ib / 8),
                      layout_internal::U8(2 * ib % 8), 2}};
    }
    return h;
  }();
  static void Params(const uint8_t* b, float* scale, float* zero) {
    PackedHeaderParams(kPackedHeader, kBlockElems / kSubElems, b, scale, zero);
  }
};

// MXFP4 (OCP microscaling float4 as ggml stores it): {u8 e; u8 qs[16]}:
// kValues[q] * 2^(e - 128) — ggml keeps twice the E2M1 values in its grid
// and halves the E8M0 scale (e = 0, 1: the subnormals 2^-128, 2^-127;
// e = 255 is 2^127, not NaN, as ggml decodes it).
struct GgufMXFP4 {
  struct Block {
    uint8_t e;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "mxfp4";
  static constexpr uint32_t kGgmlType = 39;
  static constexpr int64_t kBlockElems = 32, kBytes = 17, kSubElems = 32;
  static constexpr CodePlane kPlanes[] = {{offsetof(Block, qs), 4, 32}};
  static constexpr CodeKind kCode = CodeKind::kTable4;
  static constexpr float kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static constexpr bool kPow2Scales = true;  // 2^(e - 128), subnormal for e < 2
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    const uint32_t e = b[offsetof(Block, e)];
    scale[0] = F32FromBits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  }
};

// ---------------------------------------------------------------------------
// Decoded block layouts (ggml): types whose values are not a bit-plane code
// times a sub-block scale — base-3 digits (TQ1_0), ±d from one bit (Q1_0),
// e2m1 codes whose 16-element sub-blocks span 8 bytes (NVFP4); the grid
// i-quants (a grid entry, a sign mask and a sub-block scale per 8 values)
// belong here too. Contract of a descriptor D:
//   struct Block; kName, kGgmlType, kBlockElems (a power of two), kBytes ==
//   sizeof(Block), as for block layouts;
//   kSubElems                     elements sharing one scale (descriptions)
//   ModerateScale(block)          sets the block's scale(s) to a moderate
//                                 finite value (synthetic blocks of random
//                                 bytes for the bench and the tests)
//   Decode(block, y)              the block's kBlockElems float32 values,
//                                 computed as the format's reference decoder
//                                 computes them (same operations, same order).
// The kernel (kernels/dequantize_decoded.cc) computes each block's values
// in vectors where the layout has a vector decoder (grid layouts, TQ1_0,
// NVFP4), else runs Decode compiled for the target, and rounds them to the
// output type: exact on every target (the reference: kernels/
// decoded_blocks.h).

namespace layout_internal {
// ggml's ue4m3_to_fp32: an unsigned E4M3 byte (bit 7 ignored), exponent bias
// 7, 0x00 and 0x7F (NaN) decoded as 0, times 0.5 (ggml pairs it with its
// doubled e2m1 grid).
// Computed once per byte value at compile time (the same float operations;
// every one exact), looked up by the decoders.
// (Only 0x7F reads as 0: 0xFF is 1.875 * 2^8 like 0x7F would be, bit 7
// being ignored after the test.)
constexpr float Ue4m3HalfOf(uint32_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const uint32_t exp = (x >> 3) & 0xF, man = x & 0x7;
  float pow2 = 1.0f;  // 2^(exp - 7), exact
  for (uint32_t i = exp; i < 7; ++i) pow2 /= 2.0f;
  for (uint32_t i = 7; i < exp; ++i) pow2 *= 2.0f;
  const float raw =
      exp == 0 ? static_cast<float>(man) * 0x1p-9f : (1.0f + static_cast<float>(man) / 8.0f) * pow2;
  return raw * 0.5f;
}
struct Ue4m3HalfTable {
  float v[256];
  constexpr Ue4m3HalfTable() : v() {
    for (uint32_t x = 0; x < 256; ++x) v[x] = Ue4m3HalfOf(x);
  }
};
inline constexpr Ue4m3HalfTable kUe4m3Half{};
NIBBLE_DECODE_INLINE float GgmlUe4m3Half(uint8_t x) { return kUe4m3Half.v[x]; }
static_assert(Ue4m3HalfOf(0x38) == 0.5f && Ue4m3HalfOf(0x7E) == 224.0f &&
                  Ue4m3HalfOf(0x01) == 0x1p-10f && Ue4m3HalfOf(0xFF) == 240.0f &&
                  Ue4m3HalfOf(0x80) == 0.0f,
              "UE4M3 (halved): 1.0, the largest finite, the smallest subnormal, bit 7 ignored");
static_assert(
    [] {
      for (uint32_t x = 0; x < 256; ++x) {
        if (!(Ue4m3HalfOf(x) >= 0.0f && Ue4m3HalfOf(x) <= 240.0f)) return false;
      }
      return true;
    }(),
    "UE4M3 (halved): every byte a finite scale (GgufNVFP4::kFiniteValues)");
}  // namespace layout_internal

// Grid-expanded decoded layouts: the grid i-quants (ggml-quants.c
// dequantize_row_iq*: each 8 values one entry of a grid, kernels/ggml_grids.h,
// times a sub-block scale, with a sign mask (IQ2 / IQ3) or a shift of +-1/8
// (IQ1)) and Q1_0 (entry all ones, the sign from the bit: -d). A grid descriptor
// derives from GridLayout<D, kind> and adds
//   Groups(block, g)   the block's kBlockElems / 8 groups into GroupSet g
//                      (SetSigned / SetSigned7 / SetShifted per group: grid
//                      entry, sign bits or delta, scale; the grid GridOf<G>)
//                      — ggml's index and scale arithmetic;
// GridLayout derives Decode from it, and the kernel expands the groups with
// SIMD (kernels/dequantize_decoded.cc) computing the same expression per value:
//   kSignedBytes   y = scale * float(+-grid byte j), the byte negated where
//                  sign bit j is set (the i-quants: ggml's db * grid[j] *
//                  (+-1.f); the same float32 value, and a NaN scale's bits
//                  kept as that product keeps them)
//   kNegatedScale  y = scale * 1.0f, its sign bit flipped where sign bit j
//                  is set (Q1_0: ggml's d or -d, IEEE negation, which flips
//                  a NaN's sign too); the grid entry is unused
//   kShiftedInt8   y = scale * (int8 grid byte j + delta)
enum class GridValues { kSignedBytes, kNegatedScale, kShiftedInt8 };

namespace layout_internal {
// ggml's ksigns_iq2xs[i]: the 7 stored sign bits and their parity as bit 7
// (an even number of minus signs), as a table computed here (one load per
// group instead of a parity computation).
struct Signs7Table {
  uint8_t v[128];
  constexpr Signs7Table() : v() {
    for (uint32_t i = 0; i < 128; ++i) {
      uint32_t parity = 0;
      for (uint32_t b = i; b != 0; b >>= 1) parity ^= b & 1u;
      v[i] = static_cast<uint8_t>(i | (parity << 7));
    }
  }
};
inline constexpr Signs7Table kSigns7{};
NIBBLE_DECODE_INLINE uint32_t SignsOf7(uint32_t i) { return kSigns7.v[i & 127u]; }
// Per sign byte s: kM in byte j where bit j of s is set (GroupSet's
// second-set offsets).
template <int kM>
struct SecondSetTable {
  uint64_t v[256];
  constexpr SecondSetTable() : v() {
    for (uint32_t s = 0; s < 256; ++s) {
      for (uint32_t j = 0; j < 8; ++j) {
        if (((s >> j) & 1u) != 0) v[s] |= uint64_t{static_cast<uint32_t>(kM)} << (8 * j);
      }
    }
  }
};
template <int kM>
inline constexpr SecondSetTable<kM> kSecondSet{};
// The same per 7-bit sign index i: the entry of its sign byte (SignsOf7).
template <int kM>
struct SecondSet7Table {
  uint64_t v[128];
  constexpr SecondSet7Table() : v() {
    for (uint32_t i = 0; i < 128; ++i) v[i] = kSecondSet<kM>.v[kSigns7.v[i]];
  }
};
template <int kM>
inline constexpr SecondSet7Table<kM> kSecondSet7{};
}  // namespace layout_internal

// The groups of one grid block, field by field (the kernels load each field
// as a vector): group k holds values 8k .. 8k+7. Groups sets every group's
// grid and scale, and its signs (k*Bytes) or delta (kShiftedInt8); the
// padding, read by whole-vector loads and never used, is zero.
template <size_t kGroups>
struct GroupSet {
  uint64_t grid[kGroups];      // byte j: position j (little-endian host)
  uint8_t signs[kGroups + 4];  // k*Bytes: bit j set -> value j negated
                               // (the AVX-512 16-bit tables of kShiftedInt8:
                               // 0xFF -> the group's delta is negative)
  float scale[kGroups + 16];
  float delta[kGroups + 16];                 // kShiftedInt8
  static constexpr bool kPositions = false;  // GridOf: the value grid
  GroupSet() {
    std::memset(signs + kGroups, 0, 4);
    std::memset(scale + kGroups, 0, 16 * sizeof(float));
    std::memset(delta + kGroups, 0, 16 * sizeof(float));
  }
  NIBBLE_DECODE_INLINE void SetSigned(size_t k, uint64_t g, uint32_t s, float sc) {
    grid[k] = g;
    signs[k] = static_cast<uint8_t>(s);
    scale[k] = sc;
  }
  // SetSigned with the sign byte ggml's ksigns_iq2xs[i7] (SignsOf7: the 7
  // stored bits and their parity).
  NIBBLE_DECODE_INLINE void SetSigned7(size_t k, uint64_t g, uint32_t i7, float sc) {
    SetSigned(k, g, layout_internal::SignsOf7(i7), sc);
  }
  NIBBLE_DECODE_INLINE void SetShifted(size_t k, uint64_t g, float sc, float d) {
    grid[k] = g;
    scale[k] = sc;
    delta[k] = d;
  }
};

// The groups in the form of the kernels' tables (GridTable, kM the value
// set's size; kernels/dequantize_decoded.cc), written into a GroupSet
// (Groups(block, form)): Groups reads the index grid (GridOf) and each
// grid byte becomes its table entry — its position in the value set, plus
// kM where its sign bit is set (kSignedBytes) or its group's delta is
// negative (kShiftedInt8): the second set. Scales as GroupSet's; signs
// and delta are not set.
template <class Set, int kM>
struct TableForm {
  static constexpr bool kPositions = true;
  Set& set;
  NIBBLE_DECODE_INLINE void SetSigned(size_t k, uint64_t g, uint32_t s, float sc) {
    set.grid[k] = g + layout_internal::kSecondSet<kM>.v[s & 255u];
    set.scale[k] = sc;
  }
  NIBBLE_DECODE_INLINE void SetSigned7(size_t k, uint64_t g, uint32_t i7, float sc) {
    set.grid[k] = g + layout_internal::kSecondSet7<kM>.v[i7 & 127u];  // (one lookup)
    set.scale[k] = sc;
  }
  NIBBLE_DECODE_INLINE void SetShifted(size_t k, uint64_t g, float sc, float d) {
    // (No branch: IQ1_M's deltas are random per group.)
    const uint64_t negative = 0 - uint64_t{BitsFromF32(d) >> 31};
    set.grid[k] = g + (layout_internal::kSecondSet<kM>.v[255] & negative);
    set.scale[k] = sc;
  }
};

// A Groups sink keeping the sign bytes and one scale (the last group's):
// what the 16-bit kernel of a kNegatedScale type with one scale a block
// (Q1_0) needs, without GroupSet's store of every group's scale.
struct SignsAndScale {
  uint8_t* signs;
  float scale;
  NIBBLE_DECODE_INLINE void SetSigned(size_t k, uint64_t /*grid*/, uint32_t s, float sc) {
    signs[k] = static_cast<uint8_t>(s);
    scale = sc;
  }
};

namespace layout_internal {
// IQ1's delta: -1/8 where `bit` (a single bit) is set, else 1/8 (without a
// branch on a random bit).
NIBBLE_DECODE_INLINE float SignedEighth(uint32_t bit) {
  return F32FromBits(BitsFromF32(0.125f) | (bit != 0 ? 0x80000000u : 0u));
}
// An IQ2 sub-block scale from its 4-bit field s: d * (0.5 + s) * 0.25.
NIBBLE_DECODE_INLINE float Iq2Scale(float d, uint32_t s) {
  return d * (0.5f + static_cast<float>(s)) * 0.25f;
}
// The scalar expansion of group k (the reference the SIMD one equals).
template <GridValues V, size_t kGroups>
NIBBLE_DECODE_INLINE void ExpandGroup(const GroupSet<kGroups>& g, size_t k, float* y) {
  if constexpr (V == GridValues::kSignedBytes) {
    uint8_t q[8];
    std::memcpy(q, &g.grid[k], 8);
    for (int j = 0; j < 8; ++j) {
      const int32_t v = ((uint32_t{g.signs[k]} >> j) & 1u) != 0 ? -int32_t{q[j]} : int32_t{q[j]};
      y[j] = g.scale[k] * static_cast<float>(v);
    }
  } else if constexpr (V == GridValues::kNegatedScale) {
    for (int j = 0; j < 8; ++j) {
      const uint32_t flip = ((uint32_t{g.signs[k]} >> j) & 1u) << 31;
      y[j] = F32FromBits(BitsFromF32(g.scale[k] * 1.0f) ^ flip);
    }
  } else {
    int8_t q[8];
    std::memcpy(q, &g.grid[k], 8);
    for (int j = 0; j < 8; ++j) y[j] = g.scale[k] * (static_cast<float>(q[j]) + g.delta[k]);
  }
}
}  // namespace layout_internal

// kSet: the grid's value set (kernels/ggml_grids.h; none for Q1_0).
template <class D, GridValues V, const GgmlGridValues* kSet = nullptr>
struct GridLayout {
  static constexpr GridValues kGridValues = V;
  static constexpr const GgmlGridValues* kValueSet = kSet;
  static void ModerateScale(uint8_t* b) {
    layout_internal::SetHalf(b, 0, layout_internal::kModerateHalf);  // d first (not IQ1_M)
  }
  NIBBLE_DECODE_INLINE static void Decode(const uint8_t* b, float* y) {
    constexpr size_t kGroups = static_cast<size_t>(D::kBlockElems / 8);
    GroupSet<kGroups> g;
    D::Groups(b, g);
    for (size_t k = 0; k < kGroups; ++k) layout_internal::ExpandGroup<V>(g, k, y + 8 * k);
  }
};
// True for descriptors with Groups (GridLayout).
template <class D, class = void>
struct IsGridLayout : std::false_type {};
template <class D>
struct IsGridLayout<D, std::void_t<decltype(D::kGridValues)>> : std::true_type {};

// The grid a descriptor's Groups reads into G: the grid itself, or
// (G::kPositions: the kernels' 16-bit tables) its index grid — the same
// entries with each byte's position in the value set (kernels/ggml_grids.h).
template <class G, class T>
NIBBLE_DECODE_INLINE const T* GridOf(const T* values, const T* positions) {
  return G::kPositions ? positions : values;
}

// The table of a 32-value unit of a grid type (float16 / bfloat16 output,
// kernels/dequantize_decoded.cc): the unit's kP scales (one per kSubElems)
// times its kV values, entry p * kV + i; kP * kV <= 16. The values are
// two sets of the grid's kM values, the second taken where a value's bit
// in g.signs is set: kSignedBytes the values and their negations,
// kShiftedInt8 (IQ1) the values plus 1/8 and minus 1/8 (the group's delta,
// the same for its 8 values). Value(i) is
// value i as a float (what At converts from the signed byte, or At's
// float(q) + delta: exact); Group(t) the group (of the unit's 4) whose
// scale entry t takes; Offset(k) the offset of group k's entries.
template <class D>
struct GridTable {
  static_assert(D::kGridValues != GridValues::kNegatedScale, "no table: a blend (Q1_0)");
  static constexpr bool kSigned = D::kGridValues == GridValues::kSignedBytes;
  static constexpr int kM = D::kValueSet->n;
  static constexpr int kV = 2 * kM;
  static constexpr int kP = static_cast<int>(32 / std::min<int64_t>(D::kSubElems, 32));
  static_assert(kP * kV <= 16, "one 16-lane table per unit");
  static constexpr float Value(int i) {
    const float v = static_cast<float>(D::kValueSet->v[i < kM ? i : i - kM]);
    if constexpr (kSigned) {
      return i < kM ? v : -v;
    } else {
      return i < kM ? v + 0.125f : v - 0.125f;  // layout_internal::SignedEighth
    }
  }
  static constexpr int Group(int t) { return t / kV < kP ? t / kV * (4 / kP) : 0; }
  static constexpr int Offset(int k) { return (k % 4) / (4 / kP) * kV; }
};

// TQ1_0 (ternary, 1.6875 bits): {u8 qs[48]; u8 qh[4]; f16 d}: five base-3
// digits per byte of qs, four per byte of qh, digit n of byte b read as
// ggml does: q = uint8(b * 3^n), (q * 3) >> 8 (0, 1, 2); value (digit - 1)
// * d. Element order: qs[0..31] digit 0..4 (32 elements each), then
// qs[32..47] digit 0..4 (16 each), then qh[0..3] digit 0..3 (4 each).
struct GgufTQ1_0 {
  struct Block {
    uint8_t qs[48];
    uint8_t qh[4];
    uint16_t d;
  };
  static constexpr const char* kName = "tq1_0";
  static constexpr uint32_t kGgmlType = 34;
  static constexpr int64_t kBlockElems = 256, kBytes = 54, kSubElems = 256;
  static void ModerateScale(uint8_t* b) {
    layout_internal::SetHalf(b, offsetof(Block, d), layout_internal::kModerateHalf);
  }
  NIBBLE_DECODE_INLINE static void Decode(const uint8_t* b, float* y) {
    static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
    const float d = layout_internal::Half(b, offsetof(Block, d));
    auto digit = [](uint8_t byte, int n) {
      const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
      return static_cast<int>((uint32_t{q} * 3u) >> 8);
    };
    const uint8_t* qs = b + offsetof(Block, qs);
    const uint8_t* qh = b + offsetof(Block, qh);
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 32; ++m) *y++ = static_cast<float>(digit(qs[m], n) - 1) * d;
    }
    for (int n = 0; n < 5; ++n) {
      for (int m = 0; m < 16; ++m) *y++ = static_cast<float>(digit(qs[32 + m], n) - 1) * d;
    }
    for (int n = 0; n < 4; ++n) {
      for (int j = 0; j < 4; ++j) *y++ = static_cast<float>(digit(qh[j], n) - 1) * d;
    }
  }
};

// Q1_0: {f16 d; u8 qs[16]}, 128 elements: bit j % 8 of qs[j / 8] set: d,
// clear: -d (ggml negates d: -0.0 for d = 0).
struct GgufQ1_0 : GridLayout<GgufQ1_0, GridValues::kNegatedScale> {
  struct Block {
    uint16_t d;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q1_0";
  static constexpr uint32_t kGgmlType = 41;
  static constexpr int64_t kBlockElems = 128, kBytes = 18, kSubElems = 128;
  // Each 8 values: d * 1, negated where the bit is clear (-d: d with its
  // sign flipped, as IEEE negation is; d * 1 == d, a NaN stays a NaN).
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    const float d = layout_internal::Half(b, offsetof(Block, d));
    for (size_t k = 0; k < 16; ++k) {
      g.SetSigned(k, 0, ~uint32_t{b[offsetof(Block, qs) + k]} & 0xFFu, d);  // (no grid)
    }
  }
};

// NVFP4 (as ggml stores it): {u8 d[4]; u8 qs[32]}, 64 elements in four
// 16-element sub-blocks s with the UE4M3 scale d[s] (GgmlUe4m3Half); the
// sub-block's 8 bytes qs[8s ..] hold its elements 0-7 (low nibbles) and 8-15
// (high): kValues[q] * scale, ggml's doubled e2m1 grid (kvalues_mxfp4).
struct GgufNVFP4 {
  struct Block {
    uint8_t d[4];
    uint8_t qs[32];
  };
  static constexpr const char* kName = "nvfp4";
  static constexpr uint32_t kGgmlType = 40;
  static constexpr int64_t kBlockElems = 64, kBytes = 36, kSubElems = 16;
  static void ModerateScale(uint8_t* /*b*/) {}  // UE4M3 scales: finite
  // Every value is finite (kValues times a UE4M3 half-scale, at most 240:
  // the format has no NaN or infinity), so bfloat16 rounding skips its NaN
  // case (kernels/dequantize_decoded.cc DecodedFinite).
  static constexpr bool kFiniteValues = true;
  NIBBLE_DECODE_INLINE static void Decode(const uint8_t* b, float* y) {
    static constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (size_t s = 0; s < 4; ++s) {
      const float d = layout_internal::GgmlUe4m3Half(b[offsetof(Block, d) + s]);
      const uint8_t* qs = b + offsetof(Block, qs) + 8 * s;
      for (size_t j = 0; j < 8; ++j) {
        y[16 * s + j] = static_cast<float>(kValues[qs[j] & 0xF]) * d;
        y[16 * s + j + 8] = static_cast<float>(kValues[qs[j] >> 4]) * d;
      }
    }
  }
};

// The grid i-quants (ggml-quants.c dequantize_row_iq*): GridLayout (above).

// IQ2_XXS (2.06 bits): {f16 d; u16 qs[32]}, eight 32-value sub-blocks of 8
// bytes: bytes 0-3 four grid indices (kGgmlIq2xxsGrid), bits 0-27 of the
// little-endian u32 at bytes 4-7 four 7-bit sign indices, bits 28-31 the
// scale: db = d * (0.5 + s) * 0.25.
struct GgufIQ2_XXS : GridLayout<GgufIQ2_XXS, GridValues::kSignedBytes, &kGgmlIq2GridValues> {
  struct Block {
    uint16_t d;
    uint16_t qs[32];
  };
  static constexpr const char* kName = "iq2_xxs";
  static constexpr uint32_t kGgmlType = 16;
  static constexpr int64_t kBlockElems = 256, kBytes = 66, kSubElems = 32;
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    const float d = Half(b, offsetof(Block, d));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint8_t* q = b + offsetof(Block, qs) + 8 * ib;
      const uint32_t aux = Field<uint32_t>(q, 4);
      const float db = Iq2Scale(d, aux >> 28);
      for (size_t l = 0; l < 4; ++l) {
        g.SetSigned7(4 * ib + l, GridOf<G>(kGgmlIq2xxsGrid, kGgmlIq2xxsIndexGrid)[q[l]],
                     (aux >> (7 * l)) & 127u, db);
      }
    }
  }
};

// IQ2_XS (2.31 bits): {f16 d; u16 qs[32]; u8 scales[8]}: qs[4 ib + l] bits
// 0-8 a grid index (kGgmlIq2xsGrid), bits 9-15 a 7-bit sign index; the
// sub-block's 16-value halves take nibbles 0 / 1 of scales[ib]: db = d *
// (0.5 + s) * 0.25.
struct GgufIQ2_XS : GridLayout<GgufIQ2_XS, GridValues::kSignedBytes, &kGgmlIq2GridValues> {
  struct Block {
    uint16_t d;
    uint16_t qs[32];
    uint8_t scales[8];
  };
  static constexpr const char* kName = "iq2_xs";
  static constexpr uint32_t kGgmlType = 17;
  static constexpr int64_t kBlockElems = 256, kBytes = 74, kSubElems = 16;
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    const float d = Half(b, offsetof(Block, d));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint32_t s = b[offsetof(Block, scales) + ib];
      const float db[2] = {Iq2Scale(d, s & 0xF), Iq2Scale(d, s >> 4)};
      for (size_t l = 0; l < 4; ++l) {
        const uint32_t q = Field<uint16_t>(b, offsetof(Block, qs) + 2 * (4 * ib + l));
        g.SetSigned7(4 * ib + l, GridOf<G>(kGgmlIq2xsGrid, kGgmlIq2xsIndexGrid)[q & 511], q >> 9,
                     db[l / 2]);
      }
    }
  }
};

// IQ2_S (2.56 bits): {f16 d; u8 qs[32]; u8 signs[32]; u8 qh[8]; u8
// scales[8]} (ggml's qs[64] is grid bytes then sign bytes): grid index
// qs[4 ib + l] | bits 2l, 2l+1 of qh[ib] << 8 (kGgmlIq2sGrid), sign byte
// signs[4 ib + l]; scales as IQ2_XS.
struct GgufIQ2_S : GridLayout<GgufIQ2_S, GridValues::kSignedBytes, &kGgmlIq2GridValues> {
  struct Block {
    uint16_t d;
    uint8_t qs[32];
    uint8_t signs[32];
    uint8_t qh[8];
    uint8_t scales[8];
  };
  static constexpr const char* kName = "iq2_s";
  static constexpr uint32_t kGgmlType = 22;
  static constexpr int64_t kBlockElems = 256, kBytes = 82, kSubElems = 16;
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    const float d = Half(b, offsetof(Block, d));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint32_t s = b[offsetof(Block, scales) + ib];
      const float db[2] = {Iq2Scale(d, s & 0xF), Iq2Scale(d, s >> 4)};
      const uint32_t qh = b[offsetof(Block, qh) + ib];
      for (size_t l = 0; l < 4; ++l) {
        const uint32_t index = b[offsetof(Block, qs) + 4 * ib + l] | ((qh << (8 - 2 * l)) & 0x300u);
        g.SetSigned(4 * ib + l, GridOf<G>(kGgmlIq2sGrid, kGgmlIq2sIndexGrid)[index],
                    b[offsetof(Block, signs) + 4 * ib + l], db[l / 2]);
      }
    }
  }
};

// IQ3_XXS (3.06 bits): {f16 d; u8 qs[64]; u8 scales_signs[32]}: per
// 32-value sub-block ib, qs[8 ib ..] eight grid indices of 4 values
// (kGgmlIq3xxsGrid) and the little-endian u32 at scales_signs[4 ib]: four
// 7-bit sign indices (one per 8 values) and the scale in bits 28-31: db =
// d * (0.5 + s) * 0.5.
struct GgufIQ3_XXS : GridLayout<GgufIQ3_XXS, GridValues::kSignedBytes, &kGgmlIq3xxsGridValues> {
  struct Block {
    uint16_t d;
    uint8_t qs[64];
    uint8_t scales_signs[32];
  };
  static constexpr const char* kName = "iq3_xxs";
  static constexpr uint32_t kGgmlType = 18;
  static constexpr int64_t kBlockElems = 256, kBytes = 98, kSubElems = 32;
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    const float d = Half(b, offsetof(Block, d));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint8_t* q = b + offsetof(Block, qs) + 8 * ib;
      const uint32_t aux = Field<uint32_t>(b, offsetof(Block, scales_signs) + 4 * ib);
      const float db = d * (0.5f + static_cast<float>(aux >> 28)) * 0.5f;
      for (size_t l = 0; l < 4; ++l) {
        const uint32_t* const grid_of = GridOf<G>(kGgmlIq3xxsGrid, kGgmlIq3xxsIndexGrid);
        const uint64_t grid = grid_of[q[2 * l]] | (uint64_t{grid_of[q[2 * l + 1]]} << 32);
        g.SetSigned7(4 * ib + l, grid, (aux >> (7 * l)) & 127u, db);
      }
    }
  }
};

// IQ3_S (3.44 bits): {f16 d; u8 qs[64]; u8 qh[8]; u8 signs[32]; u8
// scales[4]}: per 32-value sub-block ib, eight grid indices of 4 values
// qs[8 ib + k] | bit k of qh[ib] << 8 (kGgmlIq3sGrid), sign bytes
// signs[4 ib + l], scale nibble ib % 2 of scales[ib / 2]: db = d * (1 + 2 s).
struct GgufIQ3_S : GridLayout<GgufIQ3_S, GridValues::kSignedBytes, &kGgmlIq3sGridValues> {
  struct Block {
    uint16_t d;
    uint8_t qs[64];
    uint8_t qh[8];
    uint8_t signs[32];
    uint8_t scales[4];
  };
  static constexpr const char* kName = "iq3_s";
  static constexpr uint32_t kGgmlType = 21;
  static constexpr int64_t kBlockElems = 256, kBytes = 110, kSubElems = 32;
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    const float d = Half(b, offsetof(Block, d));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint32_t s = (uint32_t{b[offsetof(Block, scales) + ib / 2]} >> (4 * (ib % 2))) & 0xFu;
      const float db = d * static_cast<float>(1 + 2 * s);
      const uint32_t qh = b[offsetof(Block, qh) + ib];
      const uint8_t* q = b + offsetof(Block, qs) + 8 * ib;
      for (size_t l = 0; l < 4; ++l) {
        const uint32_t i0 = q[2 * l] | ((qh << (8 - 2 * l)) & 256u);
        const uint32_t i1 = q[2 * l + 1] | ((qh << (7 - 2 * l)) & 256u);
        const uint32_t* const grid_of = GridOf<G>(kGgmlIq3sGrid, kGgmlIq3sIndexGrid);
        const uint64_t grid = grid_of[i0] | (uint64_t{grid_of[i1]} << 32);
        g.SetSigned(4 * ib + l, grid, b[offsetof(Block, signs) + 4 * ib + l], db);
      }
    }
  }
};

// IQ1_S (1.56 bits): {f16 d; u8 qs[32]; u16 qh[8]}: per 32-value sub-block
// ib, grid indices qs[4 ib + l] | bits 3l .. 3l+2 of qh[ib] << 8
// (kGgmlIq1sGrid, int8 -1 / 0 / 1), dl = d * (2 * bits 12-14 + 1), delta
// = -1/8 if bit 15 else 1/8.
struct GgufIQ1_S : GridLayout<GgufIQ1_S, GridValues::kShiftedInt8, &kGgmlIq1GridValues> {
  struct Block {
    uint16_t d;
    uint8_t qs[32];
    uint16_t qh[8];
  };
  static constexpr const char* kName = "iq1_s";
  static constexpr uint32_t kGgmlType = 19;
  static constexpr int64_t kBlockElems = 256, kBytes = 50, kSubElems = 32;
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    const float d = Half(b, offsetof(Block, d));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint32_t qh = Field<uint16_t>(b, offsetof(Block, qh) + 2 * ib);
      const float dl = d * static_cast<float>(2 * ((qh >> 12) & 7u) + 1);
      const float delta = layout_internal::SignedEighth(qh & 0x8000u);
      for (size_t l = 0; l < 4; ++l) {
        const uint32_t index = b[offsetof(Block, qs) + 4 * ib + l] | (((qh >> (3 * l)) & 7u) << 8);
        g.SetShifted(4 * ib + l, GridOf<G>(kGgmlIq1sGrid, kGgmlIq1sIndexGrid)[index], dl, delta);
      }
    }
  }
};

// IQ1_M (1.75 bits): {u8 qs[32]; u8 qh[16]; u8 scales[8]}: no stored d —
// the four top nibbles of the little-endian u16 scales sc[0..3] form its
// float16 bits (sc[0] the lowest). Per 32-value sub-block ib, values 8l ..
// 8l+7: grid index qs[4 ib + l] | 3 bits of qh[2 ib + l / 2] (bits 0-2 for
// even l, 4-6 for odd) << 8, delta -1/8 if bit 3 (even l) / 7 (odd l) of
// that byte, else 1/8; 3-bit scales of sc[ib / 2] at bit 6 (ib % 2) (l < 2)
// and 6 (ib % 2) + 3 (l >= 2): dl = d * (2 s + 1).
struct GgufIQ1_M : GridLayout<GgufIQ1_M, GridValues::kShiftedInt8, &kGgmlIq1GridValues> {
  struct Block {
    uint8_t qs[32];
    uint8_t qh[16];
    uint8_t scales[8];
  };
  static constexpr const char* kName = "iq1_m";
  static constexpr uint32_t kGgmlType = 29;
  static constexpr int64_t kBlockElems = 256, kBytes = 56, kSubElems = 16;
  static void ModerateScale(uint8_t* b) {
    // d's nibbles are the high nibbles of bytes 1, 3, 5, 7 of scales.
    for (size_t i = 0; i < 4; ++i) {
      uint8_t& byte = b[offsetof(Block, scales) + 2 * i + 1];
      const uint32_t nibble = (uint32_t{layout_internal::kModerateHalf} >> (4 * i)) & 0xFu;
      byte = static_cast<uint8_t>((byte & 0x0Fu) | (nibble << 4));
    }
  }
  template <class G>
  NIBBLE_DECODE_INLINE static void Groups(const uint8_t* b, G& g) {
    using namespace layout_internal;
    uint32_t sc[4];
    for (size_t i = 0; i < 4; ++i) sc[i] = Field<uint16_t>(b, offsetof(Block, scales) + 2 * i);
    const uint32_t bits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0u) | ((sc[2] >> 4) & 0xF00u) | (sc[3] & 0xF000u);
    const float d = F32FromF16(static_cast<uint16_t>(bits));
    for (size_t ib = 0; ib < 8; ++ib) {
      const uint32_t shift = 6 * (ib % 2);
      const float dl[2] = {d * static_cast<float>(2 * ((sc[ib / 2] >> shift) & 7u) + 1),
                           d * static_cast<float>(2 * ((sc[ib / 2] >> (shift + 3)) & 7u) + 1)};
      for (size_t l = 0; l < 4; ++l) {
        const uint32_t qh = uint32_t{b[offsetof(Block, qh) + 2 * ib + l / 2]} >> (4 * (l % 2));
        const uint32_t index = b[offsetof(Block, qs) + 4 * ib + l] | ((qh & 7u) << 8);
        g.SetShifted(4 * ib + l, GridOf<G>(kGgmlIq1sGrid, kGgmlIq1sIndexGrid)[index], dl[l / 2],
                     SignedEighth(qh & 8u));
      }
    }
  }
};

// The registry of decoded block layouts. X(Descriptor) for each.
#define NIBBLE_DECODED_LAYOUTS(X) \
  X(GgufTQ1_0)                    \
  X(GgufQ1_0)                     \
  X(GgufNVFP4)                    \
  X(GgufIQ2_XXS)                  \
  X(GgufIQ2_XS)                   \
  X(GgufIQ2_S)                    \
  X(GgufIQ3_XXS)                  \
  X(GgufIQ3_S)                    \
  X(GgufIQ1_S)                    \
  X(GgufIQ1_M)

// Compile-time checks of a decoded block descriptor's contract.
template <class D>
constexpr bool CheckDecodedDescriptor() {
  static_assert(sizeof(typename D::Block) == D::kBytes, "block struct size != kBytes");
  static_assert(D::kBlockElems > 0 && (D::kBlockElems & (D::kBlockElems - 1)) == 0,
                "kBlockElems must be a power of two");
  return true;
}
#define NIBBLE_CHECK_DECODED(D) static_assert(CheckDecodedDescriptor<D>(), #D);
NIBBLE_DECODED_LAYOUTS(NIBBLE_CHECK_DECODED)
#undef NIBBLE_CHECK_DECODED

// The registry: every block layout, once. X(Descriptor) for each.
#define NIBBLE_BLOCK_LAYOUTS(X) \
  X(GgufQ4_0)                   \
  X(GgufQ4_1)                   \
  X(GgufQ5_0)                   \
  X(GgufQ5_1)                   \
  X(GgufQ8_0)                   \
  X(GgufQ2_K)                   \
  X(GgufQ3_K)                   \
  X(GgufQ4_K)                   \
  X(GgufQ5_K)                   \
  X(GgufQ6_K)                   \
  X(GgufTQ2_0)                  \
  X(GgufQ2_0)                   \
  X(GgufIQ4_NL)                 \
  X(GgufIQ4_XS)                 \
  X(GgufMXFP4)

// Number of planes and total code bits of descriptor D.
template <class D>
constexpr size_t PlaneCount() {
  return sizeof(D::kPlanes) / sizeof(D::kPlanes[0]);
}
template <class D>
constexpr uint32_t PlaneBits() {
  uint32_t bits = 0;
  for (const CodePlane& pl : D::kPlanes) bits += pl.bits;
  return bits;
}

// The geometry of block tables of kEntries entries of D's sub-blocks (the
// AVX-512 32-entry tables, the AVX2 16-entry byte-plane tables): kC codes
// per sub-block, kPerTable whole sub-blocks per table (as many as fit, at
// most a block's kSubs), covering kTableElems elements.
template <class D, int64_t kEntries>
struct BlockTableGeometry {
  static constexpr int64_t kC = int64_t{1} << PlaneBits<D>();  // codes per sub-block
  static constexpr int64_t kSub = D::kSubElems;
  static constexpr int64_t kSubs = D::kBlockElems / D::kSubElems;
  static constexpr int64_t kPerTable = kEntries / kC < kSubs ? kEntries / kC : kSubs;
  static constexpr int64_t kTableElems = kPerTable * kSub;
};

// Whether descriptor D declares kHalfHeader.
template <class D, class = void>
struct HasHalfHeader : std::false_type {};
template <class D>
struct HasHalfHeader<D, std::void_t<decltype(D::kHalfHeader)>> : std::true_type {};

// Whether descriptor D declares kPackedHeader.
template <class D, class = void>
struct HasPackedHeader : std::false_type {};
template <class D>
struct HasPackedHeader<D, std::void_t<decltype(D::kPackedHeader)>> : std::true_type {};

// Whether descriptor D declares kHalfGrid (true).
template <class D, class = void>
struct DeclaresHalfGrid : std::false_type {};
template <class D>
struct DeclaresHalfGrid<D, std::void_t<decltype(D::kHalfGrid)>> : std::bool_constant<D::kHalfGrid> {
};

// Whether descriptor D declares kPow2Scales (true).
template <class D, class = void>
struct DeclaresPow2Scales : std::false_type {};
template <class D>
struct DeclaresPow2Scales<D, std::void_t<decltype(D::kPow2Scales)>>
    : std::bool_constant<D::kPow2Scales> {};

// Whether every code value of D is an integer: integer codes, or a
// kTable4 grid of integers.
template <class D>
constexpr bool IntegerCodeValues() {
  if constexpr (D::kCode == CodeKind::kTable4) {
    for (int c = 0; c < 16; ++c) {
      const float v = D::kValues[c];
      if (!(v >= -16777216.0f && v <= 16777216.0f) ||
          v != static_cast<float>(static_cast<int32_t>(v))) {
        return false;
      }
    }
    return true;
  } else {
    return !CodeIsFloat(D::kCode);
  }
}

// Whether no value of D's blocks is a float32 subnormal, whatever the
// blocks' bytes: each is zero, NaN, infinite or at least 2^-24 in
// magnitude. So when the scales and zeros are float16 header fields times
// integers (kHalfHeader, kPackedHeader, or a descriptor's own
// `static constexpr bool kHalfGrid = true`) and the code values are
// integers: every float16 is a multiple of 2^-24; integer multiples and
// sums of such multiples are too, and float32 rounding keeps them so (a
// multiple of 2^-24 below 1 is exact in 24 bits; above, it rounds to a
// multiple of its ulp, >= 2^-23). The bfloat16 kernels then round with
// vcvtne2ps2bf16, which flushes subnormal inputs, without testing each
// vector for them (kernels/x86_avx512-inl.h).
template <class D>
constexpr bool BlockNormalValues() {
  return (HasHalfHeader<D>::value || HasPackedHeader<D>::value || DeclaresHalfGrid<D>::value) &&
         IntegerCodeValues<D>();
}

// The first byte of the 16-byte window holding every field of D's packed
// header (the vector decoder loads that window).
template <class D>
constexpr int64_t PackedHeaderWindow() {
  constexpr PackedHeader h = D::kPackedHeader;
  int64_t lo = D::kBytes - 16;
  for (int64_t j = 0; j < D::kBlockElems / D::kSubElems; ++j) {
    const HeaderField fields[4] = {h.scale[j].lo, h.scale[j].hi, h.min[j].lo, h.min[j].hi};
    for (const HeaderField& f : fields) {
      if (f.bits != 0 && f.at < lo) lo = f.at;
    }
  }
  return lo;
}

// The contract of a packed header: every field inside the block and the
// 16-byte window, at most 8 bits in all per value, mins exactly with
// float zero points.
template <class D>
constexpr bool CheckPackedHeader() {
  constexpr PackedHeader h = D::kPackedHeader;
  constexpr int64_t subs = D::kBlockElems / D::kSubElems;
  if (subs > 16 || D::kBytes < 16) return false;
  if (h.d_at < 0 || h.d_at + 2 > D::kBytes || h.dmin_at + 2 > D::kBytes) return false;
  if ((h.dmin_at >= 0) != (D::kZp == ZeroPointKind::kFloat)) return false;
  const int64_t win = PackedHeaderWindow<D>();
  if (win < 0) return false;
  for (int64_t j = 0; j < 2 * subs; ++j) {
    if (j >= subs && h.dmin_at < 0) break;
    const HeaderParam& p = j < subs ? h.scale[j] : h.min[j - subs];
    {
      if (p.lo.bits == 0 || p.lo.bits + p.hi.bits > 8) return false;
      const HeaderField fields[2] = {p.lo, p.hi};
      for (const HeaderField& f : fields) {
        if (f.bits == 0) continue;
        if (f.shift + f.bits > 8 || f.at >= D::kBytes || f.at < win || f.at >= win + 16) {
          return false;
        }
      }
    }
  }
  return true;
}

// Compile-time checks of every registered descriptor's contract.
template <class D>
constexpr bool CheckBlockDescriptor() {
  if constexpr (HasHalfHeader<D>::value) {
    // The kernels read 4 bytes at each field (a 32-bit gather).
    constexpr HalfHeader h = D::kHalfHeader;
    static_assert(D::kSubElems == D::kBlockElems, "kHalfHeader: one sub-block per block");
    static_assert(h.scale_at >= 0 && h.scale_at + 4 <= D::kBytes, "kHalfHeader: scale_at");
    static_assert((h.zero_at >= 0) == (D::kZp == ZeroPointKind::kFloat),
                  "kHalfHeader: a zero field exactly for kFloat zeros");
    static_assert(h.zero_at + 4 <= D::kBytes, "kHalfHeader: zero_at");
  }
  if constexpr (HasPackedHeader<D>::value) {
    static_assert(CheckPackedHeader<D>(), "kPackedHeader: fields, window or mins");
  }
  static_assert(sizeof(typename D::Block) == D::kBytes, "block struct size != kBytes");
  static_assert(D::kBlockElems > 0 && (D::kBlockElems & (D::kBlockElems - 1)) == 0,
                "kBlockElems must be a power of two");
  static_assert(D::kBlockElems % D::kSubElems == 0 && D::kSubElems >= 16, "bad kSubElems");
  static_assert(PlaneCount<D>() >= 1 && PlaneCount<D>() <= 2, "one or two code planes");
  static_assert(D::kCode == CodeKind::kU8
                    ? PlaneBits<D>() <= 8
                    : PlaneCount<D>() == 1 && PlaneBits<D>() == uint32_t(CodeBits(D::kCode)),
                "kU8 codes of <= 8 bits, or one plane of the code kind's width");
  static_assert(!CodeIsFloat(D::kCode) || D::kZp == ZeroPointKind::kNone,
                "value-table codes have no zero point");
  for (const CodePlane& pl : D::kPlanes) {
    if (pl.bits != 1 && pl.bits != 2 && pl.bits != 4 && pl.bits != 8) return false;
    if (pl.run == 0 || (pl.run & (pl.run - 1)) != 0 || pl.run * pl.bits % 8 != 0) return false;
    if (D::kBlockElems % pl.run != 0) return false;
    if (pl.span() != 1 && pl.span() < 16) return false;  // the vector loaders' shapes
    if (pl.span() == 1 && pl.bits > 2 && pl.bits != 8) return false;
    if (pl.at + static_cast<uint64_t>(D::kBlockElems) * pl.bits / 8 > uint64_t(D::kBytes)) {
      return false;  // the plane lies inside the block
    }
  }
  return true;
}
#define NIBBLE_CHECK_BLOCK(D) static_assert(CheckBlockDescriptor<D>(), #D);
NIBBLE_BLOCK_LAYOUTS(NIBBLE_CHECK_BLOCK)
#undef NIBBLE_CHECK_BLOCK

// Where element e's code is. One value per layout; Plan::layout.
enum class Layout : uint8_t {
  // Element e at bits [e * b, e * b + b) of the byte stream (b =
  // CodeBits(code)), low bits first (ONNX / DirectML; PMX int8).
  kDense,
  // Element e at bits [e * 4, e * 4 + 4) of the byte stream with the two
  // nibbles of each byte swapped: element 2i is the high nibble of byte i,
  // 2i + 1 the low one (bitsandbytes 4-bit; 4-bit codes only).
  kDenseHighNibbles,
  // Words of P b-bit fields (b = CodeBits(code); P * b = 16 or 32):
  // PMX int4xP (P = 4 or 8, b = 4), GPTQ qweight read in its [K, N] order
  // (P = 32 / b: 2-, 4- or 8-bit). With R = Plan::interleave_row (elements
  // per index of dim 0) and P = Plan::interleave, element e = (d, j)
  // (d = e / R, j = e % R) is field d % P of the little-endian P*b-bit word
  // (d / P) * R + j.
  kPmxWords,
  // AWQ GEMM rows: 8 elements per little-endian 32-bit word, element p of a
  // word at nibble kAwqNibbleOrder[p]. Rows start at a word.
  kAwqWords,
  // GPTQ / AWQ qweight read directly as the PyTorch [N, K] weight (inner
  // == 1), Plan::word_stride bytes between consecutive word rows, the words
  // 4-byte aligned (Plan::codes and word_stride multiples of 4):
  //   kGptqColumns: element (r, c) is nibble c % 8 of the LE 32-bit word at
  //                 byte (c / 8) * word_stride + 4 * r.
  //   kAwqColumns:  element (r, c) is nibble kAwqNibbleOrder[r % 8] of the
  //                 word at byte c * word_stride + 4 * (r / 8).
  kGptqColumns,
  kAwqColumns,
// Block layouts (descriptors above): element e is element e %
// kBlockElems of block e / kBlockElems, which starts at Plan::codes +
// block * kBytes (Plan::codes points at the first block). Every row starts
// at a block.
#define NIBBLE_LAYOUT_ENUM(D) k##D,
  NIBBLE_BLOCK_LAYOUTS(NIBBLE_LAYOUT_ENUM)
  // Decoded block layouts (descriptors above): as block layouts, the
  // values from D::Decode.
  NIBBLE_DECODED_LAYOUTS(NIBBLE_LAYOUT_ENUM)
#undef NIBBLE_LAYOUT_ENUM
};

// The Layout value of a block descriptor.
template <class D>
struct BlockLayoutOf;
#define NIBBLE_LAYOUT_OF(D)                        \
  template <>                                      \
  struct BlockLayoutOf<D> {                        \
    static constexpr Layout kValue = Layout::k##D; \
  };
NIBBLE_BLOCK_LAYOUTS(NIBBLE_LAYOUT_OF)
NIBBLE_DECODED_LAYOUTS(NIBBLE_LAYOUT_OF)
#undef NIBBLE_LAYOUT_OF

// Whether `layout` is a decoded block layout.
constexpr bool IsDecodedLayout(Layout layout) {
#define NIBBLE_IS_DECODED(D) \
  if (layout == Layout::k##D) return true;
  NIBBLE_DECODED_LAYOUTS(NIBBLE_IS_DECODED)
#undef NIBBLE_IS_DECODED
  return false;
}

// The field of element p (0 <= p < kBlockElems) in plane `pl` of `block`.
inline uint32_t PlaneField(const uint8_t* block, const CodePlane& pl, int64_t p) {
  const uint64_t u = static_cast<uint64_t>(p), span = pl.span();
  const uint64_t run = u / pl.run, q = u % pl.run;
  const uint8_t byte = block[pl.at + run * span + q % span];
  return (uint32_t{byte} >> (pl.bits * (q / span))) & ((1u << pl.bits) - 1u);
}

// Raw code of element p (0 <= p < kBlockElems) of `block` (the
// descriptor's planes; zero-extended).
template <class D>
inline uint32_t BlockCode(const uint8_t* block, int64_t p) {
  uint32_t code = 0, bits = 0;
  for (const CodePlane& pl : D::kPlanes) {
    code |= PlaneField(block, pl, p) << bits;
    bits += pl.bits;
  }
  return code;
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_LAYOUTS_H_
