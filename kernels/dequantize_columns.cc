// The dequantize kernels of the checkpoint column layouts — AWQ words, GPTQ
// and AWQ qweight read as the [N, K] weight, GPTQ act-order group maps
// (kernels/dequantize_families.h): Highway dynamic dispatch over the row
// kernels of kernels/dequantize-inl.h and the AVX-512 column tiles of
// kernels/x86_avx512-inl.h.
#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_columns.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

bool GroupMapColumnTilesHere() { return HWY_TARGET <= HWY_AVX3; }

#if HWY_TARGET != HWY_SCALAR
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

void DequantizeColumnFamilySimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                void* out, int64_t ld) {
#if HWY_TARGET <= HWY_AVX3
  if (plan.layout == Layout::kGptqColumns && plan.axis_group != nullptr && plan.inner == 1) {
    return GroupMapColumns(plan, r0, r1, c0, c1, out, ld);
  }
#endif
#if HWY_TARGET != HWY_SCALAR
  if (SimdEligible(plan, c0, c1)) {
    switch (plan.layout) {
      case Layout::kAwqWords:
        // Integer zero points, or none when all are equal (checkpoint/methods/awq.cc).
        return DispatchZpOut<AwqWords, CodeKind::kU4, kAwqZp>(plan, r0, r1, c0, c1, out, ld);
      case Layout::kGptqColumns:
        return DispatchZpOut<GptqColumns, CodeKind::kU4, kGptqZp>(plan, r0, r1, c0, c1, out, ld);
      case Layout::kAwqColumns:
        return DispatchZpOut<AwqColumns, CodeKind::kU4, kAwqZp>(plan, r0, r1, c0, c1, out, ld);
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
HWY_EXPORT(DequantizeColumnFamilySimd);
HWY_EXPORT(GroupMapColumnTilesHere);
void DequantizeColumnFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeColumnFamilySimd)(plan, r0, r1, c0, c1, out, ld);
}
bool GroupMapColumnTilesActive() { return HWY_DYNAMIC_DISPATCH(GroupMapColumnTilesHere)(); }
}  // namespace kernels_internal
}  // namespace nibble
#endif  // HWY_ONCE
