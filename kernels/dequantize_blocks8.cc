// The dequantize kernels of ggml's block layouts with 8-bit codes
// (kernels/dequantize_families.h; the 4-bit ones: dequantize_blocks4.cc):
// Highway dynamic dispatch over the block row kernels of
// kernels/dequantize-inl.h. Two translation units so the build
// parallelizes.
#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_blocks8.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

void DequantizeBlock8FamilySimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                void* out, int64_t ld) {
#if HWY_TARGET != HWY_SCALAR
  if (SimdEligible(plan, c0, c1)) return RunBlockLayouts<8>(plan, r0, r1, c0, c1, out, ld);
#endif
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
namespace kernels_internal {
HWY_EXPORT(DequantizeBlock8FamilySimd);
void DequantizeBlock8Family(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeBlock8FamilySimd)(plan, r0, r1, c0, c1, out, ld);
}
}  // namespace kernels_internal
}  // namespace nibble
#endif  // HWY_ONCE
