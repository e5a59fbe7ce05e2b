// DequantizeTile, ActiveTarget, HasGroupMapColumnTiles: the one dispatch
// table of the kernel family. Each layout family is its own translation
// unit (kernels/dequantize_families.h) with its own Highway dynamic
// dispatch; a Plan goes to its family by layout and code width (every
// `switch` over Layout lists all cases: -Wswitch names a missed one).
#include "kernels/dequantize.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/convert.h"
#include "kernels/decoded_blocks.h"
#include "kernels/dequantize_families.h"
#include "kernels/layouts.h"
#include "kernels/staged.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {
const char* ActiveTargetName() { return hwy::TargetName(HWY_TARGET); }

namespace hn = hwy::HWY_NAMESPACE;

// Expands `groups` groups of a grid i-quant block (kernels/layouts.h,
// GridLayout) into y: vectors of up to 8 floats, each value the expression
// of layout_internal::ExpandGroup (the same operations, so the same bits).
template <GridValues V>
HWY_INLINE void ExpandGroups(const Group8* HWY_RESTRICT g, size_t groups, float* HWY_RESTRICT y) {
  const hn::CappedTag<float, 8> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::RebindToUnsigned<decltype(df)> du;
  const size_t n = hn::Lanes(df);
  alignas(32) static constexpr uint32_t kBit[8] = {1, 2, 4, 8, 16, 32, 64, 128};
  for (size_t k = 0; k < groups; ++k, y += 8) {
    const auto scale = hn::Set(df, g[k].scale);
    const auto* bytes = reinterpret_cast<const uint8_t*>(&g[k].grid);
    for (size_t i = 0; i < 8; i += n) {
      if constexpr (V == GridValues::kSignedBytes) {
        const hn::Rebind<uint8_t, decltype(df)> d8;
        const auto q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, bytes + i)));
        const auto p = hn::Mul(scale, q);
        const auto negate = hn::TestBit(hn::Set(du, g[k].signs), hn::LoadU(du, kBit + i));
        hn::StoreU(hn::IfThenElse(hn::RebindMask(df, negate), hn::Neg(p), p), df, y + i);
      } else {
        const hn::Rebind<int8_t, decltype(df)> d8;
        const auto q = hn::ConvertTo(
            df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(bytes) + i)));
        hn::StoreU(hn::Mul(scale, hn::Add(q, hn::Set(df, g[k].delta))), df, y + i);
      }
    }
  }
}

// One block of decoded layout D: grid layouts expand their groups with
// vectors, the others run D::Decode compiled for this target.
template <class D>
HWY_INLINE void DecodeBlock(const uint8_t* b, float* y) {
  if constexpr (IsGridLayout<D>::value) {
    Group8 g[D::kBlockElems / 8];
    D::Groups(b, g);
    ExpandGroups<D::kGridValues>(g, D::kBlockElems / 8, y);
  } else {
    D::Decode(b, y);
  }
}

// The decoded block layouts, compiled for this target.
void DequantizeDecodedTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                           void* out, int64_t ld) {
  switch (plan.layout) {
#define NIBBLE_DECODED_CASE(D)                                                       \
  case Layout::k##D:                                                                 \
    return DequantizeDecodedBlocks<D>(plan, r0, r1, c0, c1, out, ld, &ConvertFloats, \
                                      [](const uint8_t* b, float* y) { DecodeBlock<D>(b, y); });
    NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
    default:
      return;  // (DequantizeTile sends only decoded layouts here)
  }
}
}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {

HWY_EXPORT(ActiveTargetName);
HWY_EXPORT(DequantizeDecodedTile);

void DequantizeTile(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                    int64_t ld) {
  using namespace kernels_internal;  // NOLINT: the family entries
  if (plan.Staged()) {
    return DequantizeTileStaged(plan, r0, r1, c0, c1, out, ld, &DequantizeTile, &ConvertFloats);
  }
  switch (plan.layout) {
    case Layout::kDense:
    case Layout::kPmxWords:
      if (CodeBits(plan.code) == 4) return DequantizeNibbleFamily(plan, r0, r1, c0, c1, out, ld);
      return DequantizeByteFamily(plan, r0, r1, c0, c1, out, ld);
    case Layout::kDenseHighNibbles:
      return DequantizeNibbleFamily(plan, r0, r1, c0, c1, out, ld);
    case Layout::kAwqWords:
    case Layout::kGptqColumns:
    case Layout::kAwqColumns:
      return DequantizeColumnFamily(plan, r0, r1, c0, c1, out, ld);
#define NIBBLE_BLOCK_CASE(D)                                        \
  case Layout::k##D:                                                \
    if (CodeBits(D::kCode) == 4) {                                  \
      return DequantizeBlock4Family(plan, r0, r1, c0, c1, out, ld); \
    }                                                               \
    return DequantizeBlock8Family(plan, r0, r1, c0, c1, out, ld);
      NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_CASE)
#undef NIBBLE_BLOCK_CASE
#define NIBBLE_DECODED_CASE(D) case Layout::k##D:
      NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
      return HWY_DYNAMIC_DISPATCH(DequantizeDecodedTile)(plan, r0, r1, c0, c1, out, ld);
  }
}

const char* ActiveTarget() { return HWY_DYNAMIC_DISPATCH(ActiveTargetName)(); }

bool HasGroupMapColumnTiles() { return kernels_internal::GroupMapColumnTilesActive(); }

}  // namespace nibble
#endif  // HWY_ONCE
