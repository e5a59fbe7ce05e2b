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
// The most groups MapRows takes: MappedRow's table registers.
constexpr int64_t kMapRowGroups = 128;

// GPTQ's [K / 8, N] words with a group map (act-order g_idx, at most
// kMapRowGroups groups over [c0, c1)) written as the [N, K] output row by
// row, through the row kernel of compressed-tensors' act-order rows
// (RowKernel over DenseNibbles with the group map: each element's
// parameters picked from registers by permutes, MappedRow). Each band of
// rows (n) first transposes every group's scales (and zero points) into
// one table per row; then, a chunk of word rows (k) at a time, its words
// into row-major codes (16 x 16 word transposes: a row's 8 codes per word
// then lie along k, low nibble first: dense nibbles), and runs the row
// kernel over each row's chunk. The same values: the row kernel computes
// the contract's arithmetic on the same codes and parameters. Bands are as
// wide as the stack budget for the tables allows (up to 128 rows: more of
// each word row's bytes per visit); while a chunk's rows are written, the
// next chunk's word lines (a new page each: no hardware prefetcher
// follows the word stride) are fetched into L2. Returns false (nothing
// written) where it does not apply. (Not inlined: its 56 KiB of stack
// must not add to its caller's.)
template <ZeroPointKind kZp, OutType kOut>
HWY_NOINLINE bool MapRows(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          char* out, int64_t ld) {
  using Kernel = RowKernel<DenseNibbles, CodeKind::kU4, kZp, kOut>;
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  constexpr bool kHasZ = kZp == ZeroPointKind::kInteger;
  if (plan.s_outer != 1 || c0 >= c1 || r0 >= r1) return false;
  int64_t groups = 0;
  for (int64_t k = c0; k < c1; ++k) groups = std::max<int64_t>(groups, plan.axis_group[k] + 1);
  if (groups > kMapRowGroups) return false;
  // Stack budgets (tiles allocate nothing): the band's tables, its staged
  // codes.
  constexpr int64_t kTableBytes = 32768, kCodeBytes = 24576;
  const int64_t tpitch = (groups + 15) / 16 * 16;  // entries per row's table
  const int64_t band = std::min<int64_t>(128, kTableBytes / (8 * tpitch) / 16 * 16);  // >= 16
  const int64_t chunk_words = std::min<int64_t>(128, (kCodeBytes / band - 64) / 64 * 16);
  const int64_t pitch = 4 * chunk_words + 64;  // bytes per row of staged codes
  const bool stream = plan.nontemporal;
  const int64_t S = plan.word_stride;
  const int64_t w0 = c0 / 8, w1 = (c1 + 7) / 8;  // the word rows read
  alignas(64) float scales[kTableBytes / 8];
  alignas(64) int32_t zeros[kHasZ ? kTableBytes / 8 : 1];
  alignas(64) uint8_t codes[kCodeBytes];
  // Band n's first row after n (bands end at multiples of `band` rows).
  auto band_end = [&](int64_t n) { return std::min(r1, (n / band + 1) * band); };
  for (int64_t n0 = r0; n0 < r1; n0 = band_end(n0)) {
    const int64_t rows = band_end(n0) - n0;
    for (int64_t b = 0; b < rows; b += 16) {
      const auto m = static_cast<__mmask16>((1u << std::min<int64_t>(16, rows - b)) - 1u);
      for (int64_t g = 0; g < groups; g += 16) {
        const int64_t at = n0 + b + g * plan.s_axis;
        TransposeWords16(plan.scale + at, 4 * plan.s_axis, m, std::min<int64_t>(16, groups - g),
                         &scales[b * tpitch + g], 4 * tpitch);
        if constexpr (kHasZ) {
          TransposeWords16(plan.zp_int + at, 4 * plan.s_axis, m, std::min<int64_t>(16, groups - g),
                           &zeros[b * tpitch + g], 4 * tpitch);
        }
      }
    }
    for (int64_t wc0 = w0; wc0 < w1; wc0 += chunk_words) {
      const int64_t wc1 = std::min(w1, wc0 + chunk_words);
      for (int64_t b = 0; b < rows; b += 16) {
        const auto m = static_cast<__mmask16>((1u << std::min<int64_t>(16, rows - b)) - 1u);
        for (int64_t w = wc0; w < wc1; w += 16) {
          TransposeWords16(plan.codes + w * S + 4 * (n0 + b), S, m, std::min<int64_t>(16, wc1 - w),
                           &codes[b * pitch + 4 * (w - wc0)], pitch);
        }
      }
      // The next chunk's word rows (this band's, or the next band's
      // first): bytes [4 next_n, 4 band_end(next_n)) of each, `per` lines
      // from `first`.
      int64_t next_n = n0, next_w = wc1;
      if (wc1 >= w1) {
        next_n = band_end(n0);
        next_w = w0;
      }
      const int64_t next_words = next_n < r1 ? std::min(w1, next_w + chunk_words) - next_w : 0;
      const uintptr_t at =
          reinterpret_cast<uintptr_t>(plan.codes) + static_cast<uintptr_t>(4 * next_n);
      const uintptr_t first = at / 64 * 64;
      const int64_t per = static_cast<int64_t>(
          (at + static_cast<uintptr_t>(4 * (band_end(next_n) - next_n)) - first + 63) / 64);
      const int64_t next_lines = next_words * per;
      const int64_t ka = std::max(c0, 8 * wc0), kb = std::min(c1, 8 * wc1);
      for (int64_t i = 0; i < rows; ++i) {
        for (int64_t l = i * next_lines / rows; l < (i + 1) * next_lines / rows; ++l) {
          PrefetchL2(first + static_cast<uintptr_t>((next_w + l / per) * S + 64 * (l % per)));
        }
        // Row i's chunk: codes of elements [8 wc0, 8 wc1) of the row, the
        // map from its element 8 wc0.
        RowJob job{};
        job.code = CodeRef{codes + i * pitch, 0, false, 0};
        job.per_element = true;
        job.scale = scales + i * tpitch;
        job.zp_int = kHasZ ? zeros + i * tpitch : nullptr;
        job.zp_float = nullptr;
        job.group = 1;
        job.step = 1;
        job.map = plan.axis_group + 8 * wc0;
        job.map_groups = groups;
        Kernel kernel(plan, job);
        kernel.Run(ka - 8 * wc0, kb - 8 * wc0, out + ((n0 + i - r0) * ld + (ka - c0)) * kOutBytes,
                   stream);
      }
    }
  }
  return true;
}

// GPTQ columns with a group map (act-order g_idx): MapRows up to
// kMapRowGroups groups, else ColumnNibbleTiles' kMap tiles (the columns
// outside its 32-aligned range, the reference).
template <ZeroPointKind kZp, OutType kOut>
void GroupMapColumnsAs(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                       int64_t ld) {
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  char* const base = static_cast<char*>(out);
  if (MapRows<kZp, kOut>(plan, r0, r1, c0, c1, base, ld)) {
    if (plan.nontemporal) hwy::FlushStream();
    return;
  }
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
