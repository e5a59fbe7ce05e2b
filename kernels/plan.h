// The Plan: the one lowered form of every dequantize request (PMX, ONNX,
// DirectML). op/ validates and builds it; kernels/ execute slices of it and
// trust it completely (no checks in the hot loops).
//
// Logical tensor: the output, row-major, viewed as [outer, axis, inner]
// around the quantized axis. Every kernel works on its 2-D view
// [rows, cols]:
//   inner == 1: rows = outer,        cols = axis   (groups run along a row)
//   inner  > 1: rows = outer * axis, cols = inner  (scales vary along a row)
// The logical flat index of (row r, col c) is e = r * cols + c in both cases.
//
// Value of element e with codes c(e), scale s, zero point z of its group:
//   integer codes, integer zero point: float32(q - z) * s
//   integer codes, no zero point:      float32(q - code_offset) * s
//   integer codes, float zero point:   float32(q - code_offset) * s + z
//   integer codes, subtracted float zero point (MatMulNBits):
//                                      (float32(q) - z) * s
//   float8/float4 codes:               decode(q) * s   (ONNX: zero point 0)
// rounded once (nearest even) to the output type (SPEC.md §1).
#ifndef NIBBLE_KERNELS_PLAN_H_
#define NIBBLE_KERNELS_PLAN_H_

#include <cstdint>

namespace nibble {

// How one element's bits are interpreted.
enum class CodeKind : uint8_t {
  kU2,
  kS2,
  kU4,
  kS4,
  kU8,
  kS8,
  kU16,
  kS16,
  kU32,
  kS32,
  kF8E4M3FN,
  kF8E4M3FNUZ,
  kF8E5M2,
  kF8E5M2FNUZ,
  kF4E2M1,
};

inline int CodeBits(CodeKind k) {
  switch (k) {
    case CodeKind::kU2:
    case CodeKind::kS2:
      return 2;
    case CodeKind::kU4:
    case CodeKind::kS4:
    case CodeKind::kF4E2M1:
      return 4;
    case CodeKind::kU16:
    case CodeKind::kS16:
      return 16;
    case CodeKind::kU32:
    case CodeKind::kS32:
      return 32;
    default:
      return 8;
  }
}
inline bool CodeIsFloat(CodeKind k) { return k >= CodeKind::kF8E4M3FN; }

// kFloat: additive (PMX float_zeropoint); kFloatSubtract: subtracted before
// scaling (ONNX Runtime MatMulNBits with float zero points).
enum class ZeroPointKind : uint8_t { kNone, kInteger, kFloat, kFloatSubtract };
enum class OutType : uint8_t { kF32, kF16, kBF16 };

inline int OutBytes(OutType t) { return t == OutType::kF32 ? 4 : 2; }

struct Plan {
  // --- Codes -------------------------------------------------------------
  CodeKind code = CodeKind::kU8;
  const uint8_t* codes = nullptr;
  // Packing. interleave == 1: dense, element e at bits [e*b, e*b+b) of the
  // byte stream (b = CodeBits), low bits first (ONNX sub-byte layout).
  // interleave == P (4 or 8, 4-bit codes only): PMX int4xP. With
  // R = interleave_row (elements per index of dim 0), element e = (d, j)
  // (d = e / R, j = e % R) sits in the little-endian P*4-bit word
  // (d / P) * R + j, nibble d % P.
  int32_t interleave = 1;
  int64_t interleave_row = 1;
  // Subtracted from integer codes when zp_kind != kInteger (PMX int4: 8).
  int32_t code_offset = 0;
  // Block-structured code streams (GGUF Q4_0/Q4_1/Q8_0/Q4_K, AWQ GEMM), with
  // interleave == 1. block_elems > 0: element e lives in block
  // b = e / block_elems, whose codes start at codes + b * block_bytes (the
  // bytes between, e.g. a GGUF block's scale, are skipped).
  //   8-bit codes: element p of a block is byte p.
  //   4-bit codes, split_elems > 0: the block is a run of chunks of
  //     split_elems elements (split_elems / 2 bytes each); element p of a
  //     chunk is the low nibble of byte p for p < split_elems / 2, else the
  //     high nibble of byte p - split_elems / 2 (GGUF).
  //   4-bit codes, split_elems == 0: block_elems == 8, block_bytes == 4, one
  //     little-endian 32-bit word per block; element p is nibble
  //     word_nibble[p] (AWQ GEMM: {0, 4, 1, 5, 2, 6, 3, 7}).
  // Contract: every row of the 2-D view starts at a block boundary
  // (cols() % block_elems == 0).
  int64_t block_elems = 0;
  int64_t block_bytes = 0;
  int32_t split_elems = 0;
  uint8_t word_nibble[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  // Column-packed 4-bit words (GPTQ / AWQ qweight read directly as the
  // PyTorch [N, K] weight; the view must have inner == 1), with
  // word_stride bytes between consecutive word rows of the checkpoint:
  //   kGptq: element (r, c) is nibble c % 8 of the LE 32-bit word at
  //          byte (c / 8) * word_stride + 4 * r.
  //   kAwq:  element (r, c) is nibble word_nibble[r % 8] of the word at
  //          byte c * word_stride + 4 * (r / 8).
  enum class WordColumns : uint8_t { kNone, kGptq, kAwq };
  WordColumns word_columns = WordColumns::kNone;
  int64_t word_stride = 0;

  // --- View --------------------------------------------------------------
  int64_t outer = 1, axis = 1, inner = 1;
  int64_t group = 1;  // elements along `axis` sharing one scale (>= 1)

  // --- Scale / zero point: index of (o, a, i) is
  //     o * s_outer + group_of(a) * s_axis + i * s_inner   (s_inner is 0 or 1)
  //     with group_of(a) = a / group, or axis_group[a] when set
  int64_t s_outer = 0, s_axis = 0, s_inner = 0;
  // Optional (inner > 1 views only): the group of axis position a is
  // axis_group[a] instead of a / group (GPTQ act-order g_idx; any order).
  const int32_t* axis_group = nullptr;
  const float* scale = nullptr;  // float32, widened by op/ if needed
  ZeroPointKind zp_kind = ZeroPointKind::kNone;
  const int32_t* zp_int = nullptr;  // kInteger: same indexing as scale
                                    // (for kU32 codes: the uint32's bits)
  const float* zp_float = nullptr;  // kFloat / kFloatSubtract: same indexing

  // --- Output ------------------------------------------------------------
  OutType out = OutType::kF32;
  // Use non-temporal (streaming) stores for the aligned body of each row:
  // right for outputs far larger than the caches, 5-10x slower for
  // cache-resident ones. Set by the threaded whole-tensor runner by size;
  // tiles always use plain stores.
  bool nontemporal = false;

  int64_t rows() const { return inner == 1 ? outer : outer * axis; }
  int64_t cols() const { return inner == 1 ? axis : inner; }
  int64_t elements() const { return outer * axis * inner; }
};

}  // namespace nibble

#endif  // NIBBLE_KERNELS_PLAN_H_
