// Per-target dequantize kernels (included once per Highway target by
// kernels/dequantize.cc).
#if defined(NIBBLE_KERNELS_DEQUANTIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#undef NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#else
#define NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#endif

#include <cstdint>

#include "hwy/highway.h"
#include "kernels/plan.h"
#include "kernels/reference.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

void DequantizeTileSimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                        void* out, int64_t ld) {
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
