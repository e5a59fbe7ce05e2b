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
//   table codes (kTable4):             code_values[q] * s
// rounded once (nearest even) to the output type — unless the plan carries
// a producer's extra roundings (post_scale / product, below).
#ifndef NIBBLE_KERNELS_PLAN_H_
#define NIBBLE_KERNELS_PLAN_H_

#include <algorithm>
#include <cstdint>

#include "kernels/codes.h"
#include "kernels/layouts.h"

namespace nibble {

struct Plan {
  // --- Codes -------------------------------------------------------------
  // Where element e's code is: kernels/layouts.h (one descriptor each).
  Layout layout = Layout::kDense;
  CodeKind code = CodeKind::kU8;
  // Block layouts: the first block.
  const uint8_t* codes = nullptr;
  // kPmxWords: P (fields per word) and R (elements per index of dim 0).
  int32_t interleave = 1;
  int64_t interleave_row = 1;
  // kGptqColumns / kAwqColumns: bytes between consecutive word rows.
  int64_t word_stride = 0;
  // CodeKind::kTable4: the value of each of the 16 codes.
  const float* code_values = nullptr;
  // Subtracted from integer codes when zp_kind != kInteger (PMX int4: 8).
  int32_t code_offset = 0;

  // --- View --------------------------------------------------------------
  int64_t outer = 1, axis = 1, inner = 1;
  int64_t group = 1;  // elements along `axis` sharing one scale (>= 1)

  // --- Scale / zero point: index of (o, a, i) is
  //     o * s_outer + group_of(a) * s_axis + i * s_inner   (s_inner is 0 or 1)
  //     with group_of(a) = a / group, or axis_group[a] when set
  int64_t s_outer = 0, s_axis = 0, s_inner = 0;
  // Optional: the group of axis position a is axis_group[a] instead of
  // a / group (GPTQ / compressed-tensors act-order g_idx; any order).
  const int32_t* axis_group = nullptr;
  // Block layouts: unused (nullptr); the kernels and the reference take
  // each element's scale / zero point from its block's header (the
  // descriptor's Params), and zp_kind is the descriptor's kZp.
  const float* scale = nullptr;  // float32, widened by op/ if needed
  ZeroPointKind zp_kind = ZeroPointKind::kNone;
  const int32_t* zp_int = nullptr;  // kInteger: same indexing as scale
                                    // (for kU32 codes: the uint32's bits)
  const float* zp_float = nullptr;  // kFloat / kFloatSubtract: same indexing

  // No element's float32 value can be a subnormal, whatever the codes:
  // integer codes, zero point kNone or kInteger, and every scale zero, NaN,
  // infinite or at least FLT_MIN in magnitude (a nonzero float32(q - z) is
  // at least 1 in magnitude, so the product is at least |s|). Set by op/
  // (Dequantizer, from the front end's WidenScale) and only then: bfloat16
  // rounding then skips the per-vector subnormal test of vcvtne2ps2bf16,
  // which flushes subnormal inputs to zero. Block layouts decide by their
  // descriptor instead (kernels/layouts.h BlockNormalValues).
  bool normal_values = false;
  // No element's float32 value can be NaN, whatever the codes: integer
  // codes, zero point kNone or kInteger, and every scale finite (a finite
  // scale times an integer is finite or, past FLT_MAX, infinite). Set by
  // op/ as normal_values (from WidenScale's scan); bfloat16 rounding then
  // skips its NaN case (kernels/dequantize-inl.h UnitFacts). Block layouts
  // decide per chunk of blocks from the headers they read (RowJob::finite).
  bool finite_values = false;

  // --- Output ------------------------------------------------------------
  OutType out = OutType::kF32;
  // Use non-temporal (streaming) stores for the aligned body of each row:
  // right for outputs far larger than the caches, 5-10x slower for
  // cache-resident ones. Set by the threaded whole-tensor runner by size;
  // tiles always use plain stores.
  bool nontemporal = false;
  // kGptqColumns without a group map, AVX-512: the traversal (same bits
  // either way). kAuto: the CPU's measured better one (kernels/
  // x86_avx512-inl.h, PreferGptqBlocks); the others force one (tests).
  enum class ColumnOrder : uint8_t { kAuto, kBlocks, kBands };
  ColumnOrder column_order = ColumnOrder::kAuto;
  // How scattered fields are fetched — the 32 grid entries of an IQ2_XS /
  // IQ2_S / IQ1_S / IQ1_M block (AVX-512), the float16 headers of the
  // GGUF blocks that have one (every target): by gathers or by scalar
  // loads (same bits either way). kAuto: the CPU's measured faster way
  // (kernels/dequantize.h, PreferLoads); the others force one (tests).
  enum class Fetch : uint8_t { kAuto, kGathers, kLoads };
  Fetch fetch = Fetch::kAuto;

  // --- A producer's extra roundings -------------------------------------
  // Checkpoint formats whose producer computes a value in steps. After the
  // float32 value v above, when set, in this order:
  //   v = float32(v * post_scale)   (bitsandbytes LLM.int8: q * SCB, then
  //                                  * 7.874015718698502e-3, two roundings)
  //   v = v rounded to `product` (nearest even) and widened back
  //                                 (compressed-tensors FP8: the product is
  //                                  taken in the scale's bf16 / f16)
  // and v is then rounded to `out`. The kernel families never see these
  // fields: DequantizeTile stages such a plan through float32 tiles
  // (kernels/staged.h); the reference applies them per element.
  float post_scale = 1.0f;
  OutType product = OutType::kF32;  // kF32: no intermediate rounding
  bool Staged() const { return post_scale != 1.0f || (product != OutType::kF32 && product != out); }

  // --- A fused consumer: the matmul's dot products -----------------------
  // When set (op/matmul.cc: up to 8 rows of X, float32 output, not
  // Staged()), a kernel that decodes the tile's values in registers adds
  // them to dot products instead of writing the tile, and sets *dot->done:
  // for row i < m of X, tile row j < r1 - r0 and element t < c1 - c0 (t in
  // order),
  //   s = dot->sums[(i * (r1 - r0) + j) * 16 + t % 16]
  //   s = DotStep(dot->x[i * dot->ldx + t], value(r0 + j, c0 + t), s)
  // (one fused multiply-add: kernels/matmul.h AccumulateDotRows's order and
  // layout, so the same bits). With `columns`, the view's columns are the
  // weight's rows (an ONNX MatMul's [K, N] B) and the sums lie as
  // AccumulateDotCols's: for view column j < c1 - c0 and view row
  // t < r1 - r0 (in order),
  //   s = dot->sums[(i * 16 + t % 16) * (c1 - c0) + j]
  //   s = DotStep(dot->x[i * dot->ldx + t], value(r0 + t, c0 + j), s).
  // The kernels that cannot (every other layout, target or tile shape)
  // ignore it and write the tile as without, leaving *dot->done as it was.
  struct Dot {
    const float* x;
    int64_t m, ldx;
    float* sums;
    bool* done;
    bool columns = false;
  };
  const Dot* dot = nullptr;

  // Whether the codes and zero points make normal_values and
  // finite_values follow from the scales alone (see those).
  bool ValuesFollowScales() const {
    return !CodeIsFloat(code) &&
           (zp_kind == ZeroPointKind::kNone || zp_kind == ZeroPointKind::kInteger);
  }

  int64_t rows() const { return inner == 1 ? outer : outer * axis; }
  int64_t cols() const { return inner == 1 ? axis : inner; }
  int64_t elements() const { return outer * axis * inner; }
};

// 1 + the largest group of plan.axis_group (not null) over elements [c0,
// c1): the groups a tile there reads.
inline int64_t MapGroups(const Plan& plan, int64_t c0, int64_t c1) {
  int64_t groups = 0;
  for (int64_t k = c0; k < c1; ++k) groups = std::max<int64_t>(groups, plan.axis_group[k] + 1);
  return groups;
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_PLAN_H_
