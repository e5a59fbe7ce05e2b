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
//    static_assert'ed size, its geometry, and its decode step: how the codes
//    sit inside a block (a code "shape" the kernels know: split nibbles or
//    bytes) and `Params`, the header -> per-sub-block float32 scale (and
//    additive float zero point). The kernels are templated on the
//    descriptor; nothing else about a block layout is written anywhere.
//
// Adding a block layout whose codes have an existing shape (4-bit split
// nibbles or bytes, integer or table codes) is: its descriptor here, one
// line in NIBBLE_BLOCK_LAYOUTS, and its independent decoder in the tests.
#ifndef NIBBLE_KERNELS_LAYOUTS_H_
#define NIBBLE_KERNELS_LAYOUTS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/numeric.h"
#include "kernels/codes.h"

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
//   kCodesAt                      byte offset of the codes within a block
//   kCode                         code kind: kU4, kS8, or kTable4 (a 4-bit
//                                 index into the descriptor's kValues, 16
//                                 float32 values: an array or a pointer)
//   kSplit (4-bit codes only)     the block's codes are runs of kSplit
//                                 elements, kSplit / 2 bytes each; element
//                                 p of a run is the low nibble of byte p for
//                                 p < kSplit / 2, else the high nibble of
//                                 byte p - kSplit / 2. kSplit / 2 >= 16.
//   kSubElems                     elements sharing one scale (>= 16)
//   kZp, kCodeOffset              zero point kind (kNone: q - kCodeOffset;
//                                 kFloat: q * s + zero) and code offset
//   Params(block, scale, zero)    the block's kBlockElems / kSubElems
//                                 scales (and zeros when kZp == kFloat), as
//                                 the format's reference decoder computes
//                                 them in float32.
// Value of element p of a block: SPEC arithmetic of the Plan with the
// sub-block's scale / zero, e.g. Q4_0: (q - 8) * d.

namespace layout_internal {
template <class T>
inline T Field(const uint8_t* block, size_t offset) {
  T v;
  std::memcpy(&v, block + offset, sizeof(T));
  return v;  // little-endian host (x86-64 / aarch64)
}
inline float Half(const uint8_t* block, size_t offset) {
  return F32FromF16(Field<uint16_t>(block, offset));
}
}  // namespace layout_internal

// Q4_0: {f16 d; u8 qs[16]}: (q - 8) * d.
struct GgufQ4_0 {
  struct Block {
    uint16_t d;
    uint8_t qs[16];
  };
  static constexpr const char* kName = "q4_0";
  static constexpr uint32_t kGgmlType = 2;
  static constexpr int64_t kBlockElems = 32, kBytes = 18, kSplit = 32, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kU4;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 8;
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    scale[0] = layout_internal::Half(b, offsetof(Block, d));
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
  static constexpr int64_t kBlockElems = 32, kBytes = 20, kSplit = 32, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kU4;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static void Params(const uint8_t* b, float* scale, float* zero) {
    scale[0] = layout_internal::Half(b, offsetof(Block, d));
    zero[0] = layout_internal::Half(b, offsetof(Block, m));
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
  static constexpr int64_t kBlockElems = 32, kBytes = 34, kSplit = 0, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kS8;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    scale[0] = layout_internal::Half(b, offsetof(Block, d));
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
  static constexpr int64_t kBlockElems = 256, kBytes = 144, kSplit = 64, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kU4;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kFloat;
  static constexpr int32_t kCodeOffset = 0;
  static void Params(const uint8_t* b, float* scale, float* zero) {
    const float d = layout_internal::Half(b, offsetof(Block, d));
    const float dmin = layout_internal::Half(b, offsetof(Block, dmin));
    const uint8_t* q = b + offsetof(Block, scales);
    for (int j = 0; j < 8; ++j) {
      uint32_t sc, m;
      if (j < 4) {
        sc = q[j] & 63u;
        m = q[j + 4] & 63u;
      } else {
        sc = (q[j + 4] & 0xFu) | (static_cast<uint32_t>(q[j - 4] >> 6) << 4);
        m = static_cast<uint32_t>(q[j + 4] >> 4) | (static_cast<uint32_t>(q[j] >> 6) << 4);
      }
      scale[j] = d * static_cast<float>(sc);
      zero[j] = -(dmin * static_cast<float>(m));
    }
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
  static constexpr int64_t kBlockElems = 32, kBytes = 18, kSplit = 32, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kTable4;
  static constexpr const float* kValues = kIq4NonLinearGrid;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    scale[0] = layout_internal::Half(b, offsetof(Block, d));
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
  static constexpr int64_t kBlockElems = 256, kBytes = 136, kSplit = 32, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kTable4;
  static constexpr const float* kValues = kIq4NonLinearGrid;
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    const float d = layout_internal::Half(b, offsetof(Block, d));
    const uint32_t high = layout_internal::Field<uint16_t>(b, offsetof(Block, scales_h));
    const uint8_t* low = b + offsetof(Block, scales_l);
    for (int ib = 0; ib < 8; ++ib) {
      const uint32_t ls =
          ((low[ib / 2] >> (4 * (ib % 2))) & 0xFu) | (((high >> (2 * ib)) & 3u) << 4);
      scale[ib] = d * static_cast<float>(static_cast<int32_t>(ls) - 32);
    }
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
  static constexpr int64_t kBlockElems = 32, kBytes = 17, kSplit = 32, kSubElems = 32;
  static constexpr size_t kCodesAt = offsetof(Block, qs);
  static constexpr CodeKind kCode = CodeKind::kTable4;
  static constexpr float kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  static constexpr ZeroPointKind kZp = ZeroPointKind::kNone;
  static constexpr int32_t kCodeOffset = 0;
  static void Params(const uint8_t* b, float* scale, float* /*zero*/) {
    const uint32_t e = b[offsetof(Block, e)];
    scale[0] = F32FromBits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
  }
};

// The registry: every block layout, once. X(Descriptor) for each.
#define NIBBLE_BLOCK_LAYOUTS(X) \
  X(GgufQ4_0)                   \
  X(GgufQ4_1)                   \
  X(GgufQ8_0)                   \
  X(GgufQ4_K)                   \
  X(GgufIQ4_NL)                 \
  X(GgufIQ4_XS)                 \
  X(GgufMXFP4)

// Compile-time checks of every registered descriptor's contract.
template <class D>
constexpr bool CheckBlockDescriptor() {
  static_assert(sizeof(typename D::Block) == D::kBytes, "block struct size != kBytes");
  static_assert(D::kBlockElems > 0 && (D::kBlockElems & (D::kBlockElems - 1)) == 0,
                "kBlockElems must be a power of two");
  static_assert(D::kBlockElems % D::kSubElems == 0 && D::kSubElems >= 16, "bad kSubElems");
  static_assert(CodeBits(D::kCode) == 4 || CodeBits(D::kCode) == 8, "4- or 8-bit codes");
  static_assert(!CodeIsFloat(D::kCode) || D::kZp == ZeroPointKind::kNone,
                "value-table codes have no zero point");
  static_assert(CodeBits(D::kCode) != 4 ||
                    (D::kSplit >= 32 && D::kBlockElems % D::kSplit == 0 &&
                     D::kCodesAt + D::kBlockElems / 2 <= static_cast<size_t>(D::kBytes)),
                "4-bit codes: kSplit runs of >= 32 elements inside the block");
  static_assert(
      CodeBits(D::kCode) != 8 || D::kCodesAt + D::kBlockElems <= static_cast<size_t>(D::kBytes),
      "8-bit codes inside the block");
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
  // PMX int4xP (Plan::interleave P = 4 or 8; 4-bit codes): with R =
  // Plan::interleave_row (elements per index of dim 0), element e = (d, j)
  // (d = e / R, j = e % R) is nibble d % P of the little-endian P*4-bit word
  // (d / P) * R + j.
  kPmxWords,
  // AWQ GEMM rows: 8 elements per little-endian 32-bit word, element p of a
  // word at nibble kAwqNibbleOrder[p]. Rows start at a word.
  kAwqWords,
  // GPTQ / AWQ qweight read directly as the PyTorch [N, K] weight (inner
  // == 1), Plan::word_stride bytes between consecutive word rows:
  //   kGptqColumns: element (r, c) is nibble c % 8 of the LE 32-bit word at
  //                 byte (c / 8) * word_stride + 4 * r.
  //   kAwqColumns:  element (r, c) is nibble kAwqNibbleOrder[r % 8] of the
  //                 word at byte c * word_stride + 4 * (r / 8).
  kGptqColumns,
  kAwqColumns,
// Block layouts (descriptors above): element e is element e %
// kBlockElems of block e / kBlockElems, whose codes start at Plan::codes
// + block * kBytes (Plan::codes points at the first block's codes, i.e.
// kCodesAt bytes into the data). Every row starts at a block.
#define NIBBLE_LAYOUT_ENUM(D) k##D,
  NIBBLE_BLOCK_LAYOUTS(NIBBLE_LAYOUT_ENUM)
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
#undef NIBBLE_LAYOUT_OF

// Raw code of element p (0 <= p < kBlockElems) of a block whose codes
// start at `codes` (the descriptor's code shape; zero-extended).
template <class D>
inline uint32_t BlockCode(const uint8_t* codes, int64_t p) {
  if constexpr (CodeBits(D::kCode) == 8) {
    return codes[p];
  } else {
    constexpr int64_t half = D::kSplit / 2;
    const int64_t run = p / D::kSplit, q = p % D::kSplit;
    return (uint32_t{codes[run * half + q % half]} >> (q < half ? 0 : 4)) & 0xFu;
  }
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_LAYOUTS_H_
