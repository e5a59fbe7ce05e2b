// Highway dynamic dispatch for the dequantize kernel family. The per-target
// row kernels live in kernels/dequantize-inl.h; they are instantiated in two
// translation units so the build parallelizes: this one (4-bit codes: PMX
// int4x4 / int4x8, dense int4 / uint4 / float4) and
// kernels/dequantize_bytes.cc (8- and 16-bit integer codes, float8).
#include "kernels/dequantize.h"

#include <cstring>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

void DequantizeNibblesSimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           void* out, int64_t ld) {
#if HWY_TARGET != HWY_SCALAR
  if (SimdEligible(plan, c0, c1)) {
    if (plan.word_columns == Plan::WordColumns::kGptq && plan.code == CodeKind::kU4) {
      return DispatchZpOut<RowLayout::kGptqCols, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
    }
    if (plan.word_columns == Plan::WordColumns::kAwq && plan.code == CodeKind::kU4) {
      return DispatchZpOut<RowLayout::kAwqCols, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
    }
    if (plan.word_columns != Plan::WordColumns::kNone) {
      return DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
    }
    if (plan.block_elems > 0) {  // GGUF Q4_0 / Q4_1 / Q4_K, AWQ
      if (plan.code == CodeKind::kU4) {
        if (plan.block_elems == 32 && plan.split_elems == 32) {
          return DispatchZpOut<RowLayout::kSplit32, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
        }
        if (plan.block_elems == 256 && plan.split_elems == 64) {
          return DispatchZpOut<RowLayout::kSplit256, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
        }
        if (plan.block_elems == 8 && plan.block_bytes == 4 && plan.split_elems == 0 &&
            std::memcmp(plan.word_nibble, kAwqNibble, 8) == 0) {
          return DispatchZpOut<RowLayout::kAwqWords, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
        }
      }
      return DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
    }
    if (plan.interleave > 1 && plan.interleave_row > 1) {  // PMX int4xP, P rows per word
      if (plan.interleave == 4) {
        return DispatchZpOut<RowLayout::kWords16, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
      }
      return DispatchZpOut<RowLayout::kWords32, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
    }
    // Dense nibbles (a PMX int4xP over a single column is dense order too).
    switch (plan.code) {
      case CodeKind::kU4:
        return DispatchZpOut<RowLayout::kNibbles, CodeKind::kU4>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kS4:
        return DispatchZpOut<RowLayout::kNibbles, CodeKind::kS4>(plan, r0, r1, c0, c1, out, ld);
      case CodeKind::kF4E2M1:
        return DispatchOut<RowLayout::kNibbles, CodeKind::kF4E2M1>(plan, r0, r1, c0, c1, out, ld);
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

HWY_EXPORT(DequantizeNibblesSimd);
HWY_EXPORT(ActiveTargetName);

// Defined in kernels/dequantize_bytes.cc.
void DequantizeBytesDispatch(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld);

void DequantizeTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                    int64_t ld) {
  switch (plan.code) {
    case CodeKind::kU4:
    case CodeKind::kS4:
    case CodeKind::kF4E2M1:
      return HWY_DYNAMIC_DISPATCH(DequantizeNibblesSimd)(plan, r0, r1, c0, c1, out, ld);
    default:
      return DequantizeBytesDispatch(plan, r0, r1, c0, c1, out, ld);
  }
}

const char* ActiveTarget() { return HWY_DYNAMIC_DISPATCH(ActiveTargetName)(); }

}  // namespace nibble
#endif  // HWY_ONCE
