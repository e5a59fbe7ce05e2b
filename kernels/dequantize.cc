// Highway dynamic dispatch for the dequantize kernel family. The per-target
// code lives in kernels/dequantize-inl.h.
#include "kernels/dequantize.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

#if HWY_ONCE
namespace nibble {

HWY_EXPORT(DequantizeTileSimd);
HWY_EXPORT(ActiveTargetName);

void DequantizeTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                    void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeTileSimd)(plan, r0, r1, c0, c1, out, ld);
}

const char* ActiveTarget() { return HWY_DYNAMIC_DISPATCH(ActiveTargetName)(); }

}  // namespace nibble
#endif  // HWY_ONCE
