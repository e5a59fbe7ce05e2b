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

// The zero-point kinds op/checkpoint.cc lowers GPTQ and AWQ with: integer,
// or none (a constant code offset) when every stored zero point is equal.
constexpr unsigned kAwqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);
constexpr unsigned kGptqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);

#endif  // HWY_TARGET != HWY_SCALAR

void DequantizeNibblesSimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           void* out, int64_t ld) {
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
        // Integer zero points, or none when all are equal (op/checkpoint.cc).
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

}  // namespace nibble
#endif  // HWY_ONCE
