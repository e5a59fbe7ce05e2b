// The dequantize kernels of dense 4-bit codes (ONNX int4 / uint4 / float4,
// IQ4_NL-style value tables), bitsandbytes' high-nibble-first codes and PMX
// int4 words (kernels/dequantize_families.h): Highway dynamic dispatch over
// the row kernels of kernels/dequantize-inl.h.
#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_nibbles.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

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

#endif  // HWY_TARGET != HWY_SCALAR

void DequantizeNibbleFamilySimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
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
        // Eight per 32-bit word: PMX int4x8 and GPTQ's [K, N] order (kU4),
        // and the transposed tiles of dense 4-bit codes (op/dequantizer.cc
        // WriteCodesTransposed: any 4-bit code).
        switch (plan.code) {
          case CodeKind::kS4:
            return DispatchZpOut<PmxWords<32>, CodeKind::kS4>(plan, r0, r1, c0, c1, out, ld);
          case CodeKind::kF4E2M1:
            return DispatchOut<PmxWords<32>, CodeKind::kF4E2M1>(plan, r0, r1, c0, c1, out, ld);
          case CodeKind::kTable4:
            return DispatchOut<PmxWords<32>, CodeKind::kTable4>(plan, r0, r1, c0, c1, out, ld);
          default:
            return DispatchZpOut<PmxWords<32>, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
        }
      default:  // other families: never routed here
        break;
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
namespace kernels_internal {
HWY_EXPORT(DequantizeNibbleFamilySimd);
void DequantizeNibbleFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeNibbleFamilySimd)(plan, r0, r1, c0, c1, out, ld);
}
}  // namespace kernels_internal
}  // namespace nibble
#endif  // HWY_ONCE
