// The dequantize kernels of dense 8- and 16-bit integer and float8 codes and
// of PMX / GPTQ byte words (kernels/dequantize_families.h): Highway dynamic
// dispatch over the row kernels of kernels/dequantize-inl.h. 2-bit and
// 32-bit codes use the scalar reference.
#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_bytes.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET != HWY_SCALAR
// Dense 8- and 16-bit codes.
HWY_INLINE void DenseByteCodes(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                               void* out, int64_t ld) {
  switch (plan.code) {
    case CodeKind::kU8:
      return DispatchZpOut<DenseBytes<CodeKind::kU8>, CodeKind::kU8>(plan, r0, r1, c0, c1, out, ld);
    case CodeKind::kS8:
      return DispatchZpOut<DenseBytes<CodeKind::kS8>, CodeKind::kS8>(plan, r0, r1, c0, c1, out, ld);
    case CodeKind::kU16:
      return DispatchZpOut<DenseHalves<CodeKind::kU16>, CodeKind::kU16>(plan, r0, r1, c0, c1, out,
                                                                        ld);
    case CodeKind::kS16:
      return DispatchZpOut<DenseHalves<CodeKind::kS16>, CodeKind::kS16>(plan, r0, r1, c0, c1, out,
                                                                        ld);
    case CodeKind::kF8E4M3FN:
      return DispatchOut<DenseBytes<CodeKind::kF8E4M3FN>, CodeKind::kF8E4M3FN>(plan, r0, r1, c0, c1,
                                                                               out, ld);
    case CodeKind::kF8E4M3FNUZ:
      return DispatchOut<DenseBytes<CodeKind::kF8E4M3FNUZ>, CodeKind::kF8E4M3FNUZ>(plan, r0, r1, c0,
                                                                                   c1, out, ld);
    case CodeKind::kF8E5M2:
      return DispatchOut<DenseBytes<CodeKind::kF8E5M2>, CodeKind::kF8E5M2>(plan, r0, r1, c0, c1,
                                                                           out, ld);
    case CodeKind::kF8E5M2FNUZ:
      return DispatchOut<DenseBytes<CodeKind::kF8E5M2FNUZ>, CodeKind::kF8E5M2FNUZ>(plan, r0, r1, c0,
                                                                                   c1, out, ld);
    case CodeKind::kU2:  // 2- and 32-bit codes (rare): the reference
    case CodeKind::kS2:
    case CodeKind::kU4:
    case CodeKind::kS4:
    case CodeKind::kF4E2M1:
    case CodeKind::kTable4:
    case CodeKind::kU32:
    case CodeKind::kS32:
      break;
  }
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

// The zero-point kinds checkpoint/methods/gptq.cc lowers GPTQ with.
constexpr unsigned kGptqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);

#endif  // HWY_TARGET != HWY_SCALAR

void DequantizeByteFamilySimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                              void* out, int64_t ld) {
#if HWY_TARGET != HWY_SCALAR
  if (SimdEligible(plan, c0, c1)) {
    switch (plan.layout) {
      case Layout::kDense:
        return DenseByteCodes(plan, r0, r1, c0, c1, out, ld);
      case Layout::kPmxWords:
        // GPTQ 8-bit words in [K, N] order (2-bit fields: the reference).
        if (plan.code == CodeKind::kU8 && plan.interleave == 4) {
          // One element per dim-0 index: the bytes are in dense order.
          if (plan.interleave_row == 1) {
            return DispatchZpOut<DenseBytes<CodeKind::kU8>, CodeKind::kU8, kGptqZp>(
                plan, r0, r1, c0, c1, out, ld);
          }
          return DispatchZpOut<PmxByteWords, CodeKind::kU8, kGptqZp>(plan, r0, r1, c0, c1, out, ld);
        }
        break;
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
HWY_EXPORT(DequantizeByteFamilySimd);
void DequantizeByteFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeByteFamilySimd)(plan, r0, r1, c0, c1, out, ld);
}
}  // namespace kernels_internal
}  // namespace nibble
#endif  // HWY_ONCE
