// The dequantize kernel family for 8- and 16-bit integer codes and float8
// codes (see kernels/dequantize.cc for the 4-bit half and the dispatcher).
// 2-bit and 32-bit codes use the scalar reference.
#include "kernels/dequantize.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_bytes.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

void DequantizeBytesSimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         void* out, int64_t ld) {
#if HWY_TARGET != HWY_SCALAR
  if (plan.block_elems > 0) {  // GGUF Q8_0
    if (plan.block_elems == 32 && plan.code == CodeKind::kS8 && SimdEligible(plan, c0, c1)) {
      return DispatchZpOut<RowLayout::kBlock32, CodeKind::kS8>(plan, r0, r1, c0, c1, out, ld);
    }
    return DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
  }
  if (plan.interleave == 1 && SimdEligible(plan, c0, c1)) {
    switch (plan.code) {
      case CodeKind::kU8:
        return DispatchZpOut<RowLayout::kBytes, CodeKind::kU8>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kS8:
        return DispatchZpOut<RowLayout::kBytes, CodeKind::kS8>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kU16:
        return DispatchZpOut<RowLayout::kHalves, CodeKind::kU16>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kS16:
        return DispatchZpOut<RowLayout::kHalves, CodeKind::kS16>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kF8E4M3FN:
        return DispatchOut<RowLayout::kBytes, CodeKind::kF8E4M3FN>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kF8E4M3FNUZ:
        return DispatchOut<RowLayout::kBytes, CodeKind::kF8E4M3FNUZ>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kF8E5M2:
        return DispatchOut<RowLayout::kBytes, CodeKind::kF8E5M2>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kF8E5M2FNUZ:
        return DispatchOut<RowLayout::kBytes, CodeKind::kF8E5M2FNUZ>(plan, r0, r1, c0, c1, out, ld);
      default:
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
HWY_EXPORT(DequantizeBytesSimd);
void DequantizeBytesDispatch(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeBytesSimd)(plan, r0, r1, c0, c1, out, ld);
}
}  // namespace nibble
#endif  // HWY_ONCE
