// Highway dynamic dispatch for the dequantize kernel family. The per-target
// row kernels live in kernels/dequantize-inl.h; they are instantiated in two
// translation units so the build parallelizes: this one (4-bit codes: PMX
// int4x4 / int4x8, dense int4 / uint4 / float4) and
// kernels/dequantize_bytes.cc (8- and 16-bit integer codes, float8).
#include "kernels/dequantize.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

bool GroupMapColumnTilesHere() { return HWY_TARGET <= HWY_AVX3; }

#if HWY_TARGET != HWY_SCALAR
// Dense 4-bit codes (ONNX int4 / uint4 / float4; PMX over one column).
HWY_INLINE void DenseNibbleCodes(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                 void* out, int64_t ld) {
  switch (plan.code) {
    case CodeKind::kU4:
      return DispatchZpOut<DenseNibbles, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
    case CodeKind::kS4:
      return DispatchZpOut<DenseNibbles, CodeKind::kS4>(plan, r0, r1, c0, c1, out, ld);
    case CodeKind::kF4E2M1:
      return DispatchOut<DenseNibbles, CodeKind::kF4E2M1>(plan, r0, r1, c0, c1, out, ld);
    case CodeKind::kTable4:
      return DispatchOut<DenseNibbles, CodeKind::kTable4>(plan, r0, r1, c0, c1, out, ld);
    case CodeKind::kU2:  // not 4-bit codes: never routed here (DequantizeTile)
    case CodeKind::kS2:
    case CodeKind::kU8:
    case CodeKind::kS8:
    case CodeKind::kU16:
    case CodeKind::kS16:
    case CodeKind::kU32:
    case CodeKind::kS32:
    case CodeKind::kF8E4M3FN:
    case CodeKind::kF8E4M3FNUZ:
    case CodeKind::kF8E5M2:
    case CodeKind::kF8E5M2FNUZ:
      break;
  }
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

// The zero-point kinds checkpoint/methods/gptq.cc lowers GPTQ and AWQ with: integer,
// or none (a constant code offset) when every stored zero point is equal.
constexpr unsigned kAwqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);
constexpr unsigned kGptqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);

#if HWY_TARGET <= HWY_AVX3
// GPTQ columns with a group map (act-order g_idx): ColumnNibbleTiles' kMap
// tiles; the columns outside its 32-aligned range, the reference.
template <ZeroPointKind kZp, OutType kOut>
void GroupMapColumnsAs(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                       int64_t ld) {
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  char* const base = static_cast<char*>(out);
  const auto edge = [&](int64_t r, int64_t ca, int64_t cb) HWY_ATTR {
    DequantizeTileReference(plan, r, r + 1, ca, cb, base + ((r - r0) * ld + (ca - c0)) * kOutBytes,
                            ld);
  };
  using Edge = decltype(edge);
  // Staged when the stores are cached (as GPTQ's table tiles).
  if (plan.nontemporal) {
    ColumnNibbleTiles<true, false, kZp, kOut, Edge, true>(plan, r0, r1, c0, c1, base, ld, edge);
    hwy::FlushStream();
  } else {
    ColumnNibbleTiles<true, true, kZp, kOut, Edge, true>(plan, r0, r1, c0, c1, base, ld, edge);
  }
}

void GroupMapColumns(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                     int64_t ld) {
#define NIBBLE_CASE(ZP, OUT)                                                                     \
  if (plan.zp_kind == ZeroPointKind::ZP && plan.out == OutType::k##OUT) {                        \
    return GroupMapColumnsAs<ZeroPointKind::ZP, OutType::k##OUT>(plan, r0, r1, c0, c1, out, ld); \
  }
#define NIBBLE_CASE_NONE(OUT) NIBBLE_CASE(kNone, OUT)
#define NIBBLE_CASE_INTEGER(OUT) NIBBLE_CASE(kInteger, OUT)
  // The zero-point kinds checkpoint/methods/gptq.cc lowers GPTQ with.
  NIBBLE_OUT_TYPES(NIBBLE_CASE_NONE)
  NIBBLE_OUT_TYPES(NIBBLE_CASE_INTEGER)
#undef NIBBLE_CASE_INTEGER
#undef NIBBLE_CASE_NONE
#undef NIBBLE_CASE
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}
#endif  // HWY_TARGET <= HWY_AVX3

#endif  // HWY_TARGET != HWY_SCALAR

void DequantizeNibblesSimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           void* out, int64_t ld) {
#if HWY_TARGET <= HWY_AVX3
  if (plan.layout == Layout::kGptqColumns && plan.axis_group != nullptr && plan.inner == 1) {
    return GroupMapColumns(plan, r0, r1, c0, c1, out, ld);
  }
#endif
#if HWY_TARGET != HWY_SCALAR
  if (SimdEligible(plan, c0, c1)) {
    switch (plan.layout) {
      case Layout::kDense:
        return DenseNibbleCodes(plan, r0, r1, c0, c1, out, ld);
      case Layout::kDenseHighNibbles:
        // bitsandbytes: value-table codes (other codes: the reference).
        if (plan.code == CodeKind::kTable4) {
          return DispatchOut<DenseNibblesOf<true>, CodeKind::kTable4>(plan, r0, r1, c0, c1, out,
                                                                      ld);
        }
        break;
      case Layout::kPmxWords:
        // Over a single column (one element per dim-0 index), int4xP words
        // hold consecutive elements: dense order.
        if (plan.interleave_row == 1) return DenseNibbleCodes(plan, r0, r1, c0, c1, out, ld);
        if (plan.interleave == 4) {
          return DispatchZpOut<PmxWords<16>, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
        }
        return DispatchZpOut<PmxWords<32>, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
      case Layout::kAwqWords:
        // Integer zero points, or none when all are equal (checkpoint/methods/gptq.cc).
        return DispatchZpOut<AwqWords, CodeKind::kU4, kAwqZp>(plan, r0, r1, c0, c1, out, ld);
      case Layout::kGptqColumns:
        return DispatchZpOut<GptqColumns, CodeKind::kU4, kGptqZp>(plan, r0, r1, c0, c1, out, ld);
      case Layout::kAwqColumns:
        return DispatchZpOut<AwqColumns, CodeKind::kU4, kAwqZp>(plan, r0, r1, c0, c1, out, ld);
#define NIBBLE_BLOCK_CASE(D) \
  case Layout::k##D:         \
    return RunBlockLayout<D, 4>(plan, r0, r1, c0, c1, out, ld);
        NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_CASE)
#undef NIBBLE_BLOCK_CASE
    }
  }
#endif
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {

HWY_EXPORT(DequantizeNibblesSimd);
HWY_EXPORT(ActiveTargetName);
HWY_EXPORT(GroupMapColumnTilesHere);

// Defined in kernels/dequantize_bytes.cc.
void DequantizeBytesDispatch(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld);

void DequantizeTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                    int64_t ld) {
  // One translation unit per code width keeps the build parallel.
  if (CodeBits(plan.code) == 4) {
    return HWY_DYNAMIC_DISPATCH(DequantizeNibblesSimd)(plan, r0, r1, c0, c1, out, ld);
  }
  DequantizeBytesDispatch(plan, r0, r1, c0, c1, out, ld);
}

const char* ActiveTarget() { return HWY_DYNAMIC_DISPATCH(ActiveTargetName)(); }

bool HasGroupMapColumnTiles() { return HWY_DYNAMIC_DISPATCH(GroupMapColumnTilesHere)(); }

}  // namespace nibble
#endif  // HWY_ONCE
