// The dequantize kernels of the checkpoint column layouts — AWQ words, GPTQ
// and AWQ qweight read as the [N, K] weight, GPTQ act-order group maps,
// and on AVX2 compressed-tensors' act-order rows (WordTiles; the nibble
// family's row kernel elsewhere) (kernels/dequantize_families.h): Highway
// dynamic dispatch over the row kernels of kernels/dequantize-inl.h and the
// AVX-512 column tiles of kernels/x86_avx512-inl.h. (Their fused dot
// without a tile: kernels/dequantize_columns_dot.cc.)
#include <cstring>
#include <type_traits>

#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_columns.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"
#include "kernels/scratch.h"
#include "kernels/transpose.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

// (AVX-512: MapRows and the column tiles; AVX2: WordTiles.)
bool GroupMapColumnTilesHere() { return HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2; }

#if HWY_TARGET != HWY_SCALAR
// The zero-point kinds checkpoint/methods/gptq.cc lowers GPTQ and AWQ with: integer,
// or none (a constant code offset) when every stored zero point is equal.
constexpr unsigned kAwqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);
constexpr unsigned kGptqZp = ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger);

#if HWY_TARGET <= HWY_AVX3
// The most groups MapRows takes: MappedRow's table registers.
constexpr int64_t kMapRowGroups = 128;

// --- Group maps by gathers (MapRows' 16-bit outputs past the planes) -----
// A row's 16-bit values of every group as one table (GatherTables: group
// g's 16 entries, ValueTable16's, at 32 g bytes), read per element by a
// 32-bit gather at index 16 g + code (scale 2: the entry in the low half
// of the gathered lane). Used past kGatherMinGroups groups, where the row
// kernel picks each element's scale and zero point with two-table permutes
// and blends per 16 elements (MappedRow: 4 permutes and 3 blends each) —
// act-order down projections (K 11008 or 14336: 86 or 112 groups of 128;
// 4096 x 11008 float16 / bfloat16 on the Intel guest 1.13-1.25x, and
// 1.05-1.12x over MappedRow16 taken to 128 groups). The values are
// ValueTable16's, the contract's arithmetic per code, so the same bits.
// Gathers past this many groups (up to it MappedRow16 with integer zero
// points, MappedRow without: at 48 groups the gathers ran 0.79-0.84x of
// MappedRow16 on the Intel guest).
constexpr int64_t kGatherMinGroups = 64;
constexpr int64_t kGatherPadBytes = 64;  // a gather of the last entry reads 2 bytes past it
constexpr int64_t GatherRowBytes(int64_t groups) {
  return (32 * groups + kGatherPadBytes + 63) / 64 * 64;
}

// One row's gather table (GatherRowBytes(groups) at dst, 64-byte aligned;
// its padding zero) for groups [0, groups) with scales s[g] and zero
// points z[g] (kInteger; else the code offset `off`).
template <ZeroPointKind kZp, OutType kOut>
HWY_INLINE void GatherTables(const float* s, const int32_t* z, int32_t off, int64_t groups,
                             bool bf16_hw, uint8_t* dst) {
  static_assert(OutDesc<kOut>::kBytes == 2, "16-bit outputs");
  for (int64_t g = 0; g < groups; ++g) {
    const __m512i t =
        ValueTable16<kZp, kOut>(s[g], kZp == ZeroPointKind::kInteger ? z[g] : off, 0.0f, bf16_hw);
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32 * g), _mm512_castsi512_si256(t));
  }
  for (int64_t b = 32 * groups; b < GatherRowBytes(groups); b += 32) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(dst + b), _mm256_setzero_si256());
  }
}

// A chunk's group map as GatherRun16 reads it, per 32 columns from `map`
// (units of them): 16 g of the even columns, then of the odd ones (16
// int32 each), at gi + 32 u.
HWY_INLINE void GatherMap(const int32_t* map, int64_t units, int32_t* gi) {
  const __m512i even = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  for (int64_t u = 0; u < units; ++u) {
    const __m512i a = _mm512_loadu_si512(map + 32 * u), b = _mm512_loadu_si512(map + 32 * u + 16);
    _mm512_store_si512(gi + 32 * u, _mm512_slli_epi32(_mm512_permutex2var_epi32(a, even, b), 4));
    _mm512_store_si512(gi + 32 * u + 16,
                       _mm512_slli_epi32(_mm512_permutex2var_epi32(a, odd, b), 4));
  }
}

// One row's `units` x 32 elements through its gather table, their codes
// dense nibbles at `codes` (16-byte units, 16-byte aligned; element 0 in
// the low nibble of byte 0), the chunk's GatherMap at gi, the 16-bit
// outputs at dst (non-temporal when `stream`: dst then 64-byte aligned).
HWY_INLINE void GatherRun16(const uint8_t* table, const uint8_t* codes, const int32_t* gi,
                            int64_t units, char* dst, bool stream) {
  const __m512i low4 = _mm512_set1_epi32(0x0F), low16 = _mm512_set1_epi32(0xFFFF);
  for (int64_t u = 0; u < units; ++u) {
    // Lane m: byte m, the codes of elements 2m (low nibble) and 2m + 1.
    const __m512i b =
        _mm512_cvtepu8_epi32(_mm_load_si128(reinterpret_cast<const __m128i*>(codes + 16 * u)));
    const __m512i ie = _mm512_add_epi32(_mm512_load_si512(gi + 32 * u), _mm512_and_si512(b, low4));
    const __m512i io =
        _mm512_add_epi32(_mm512_load_si512(gi + 32 * u + 16), _mm512_srli_epi32(b, 4));
    const __m512i ve = _mm512_i32gather_epi32(ie, table, 2);
    const __m512i vo = _mm512_i32gather_epi32(io, table, 2);
    // Word 2m: element 2m's value, word 2m + 1: element 2m + 1's.
    Store64(_mm512_ternarylogic_epi32(ve, low16, _mm512_slli_epi32(vo, 16), 0xEA), dst + 64 * u,
            stream);
  }
}

// GPTQ's [K / 8, N] words with a group map (act-order g_idx, at most
// kMapRowGroups groups over [c0, c1)) written as the [N, K] output row by
// row, through the row kernel of compressed-tensors' act-order rows
// (RowKernel over DenseNibbles with the group map: each element's
// parameters picked from registers by permutes, MappedRow). Each band of
// rows (n) first transposes every group's scales (and zero points) into
// one table per row; then, a chunk of word rows (k) at a time, its words
// into row-major codes (16 x 16 word transposes: a row's 8 codes per word
// then lie along k, low nibble first: dense nibbles), and runs the row
// kernel over each row's chunk. With integer zero points and at most 64
// groups the row kernel takes its 16-bit path (MappedRow16: the chunk's
// map as uint16, each row's zero points as int16), where every zero point
// of the band lies in its bounds. 16-bit outputs of at most kPlaneGroups
// groups on VBMI (AVX3_DL) instead take each row's byte-plane tables
// (PlaneTables: every group's 16 values, built once per band row) through
// PlaneRun, whole 64-element units of the chunk at a time (the row kernel
// takes the rest): two byte permutes per class of 8 groups and plane, no
// per-element arithmetic (act-order GPTQ float16 / bfloat16 on a Zen 4
// guest: in-cache tiles 1.37-1.42x, whole tensors 1.05-1.3x at one
// thread); bands are then 32 rows (32 KiB of tables; 16-row bands read 64
// bytes of each word row per band, which on an Intel Xeon guest held a
// fifth of the whole-tensor time in the fetches of the next chunk's lines:
// 32 rows ran 1.10-1.21x there, 64 rows 0.98-1.14x). 16-bit outputs of
// more than kGatherMinGroups groups take each row's gather table
// (GatherTables, in the thread's kernel scratch) through GatherRun16, whole
// 32-element units at a time. The same values: the row kernel and the
// tables compute the contract's arithmetic on the same codes and
// parameters. Bands are otherwise 32
// rows (fewer where the stack budget for the tables allows no more), so
// that a chunk is 128 word rows: 1024 elements per row-kernel call (bands
// of 128 rows and chunks of 32 word rows measured 0.91x: the calls'
// set-up then weighs on 256 elements each); while a chunk's rows are written, the
// next chunk's word lines (a new page each: no hardware prefetcher
// follows the word stride) are fetched into L2. Returns false (nothing
// written) where it does not apply. (Not inlined: its 88 KiB of stack
// must not add to its caller's.)
template <ZeroPointKind kZp, OutType kOut>
HWY_NOINLINE bool MapRows(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          char* out, int64_t ld) {
  using Kernel = RowKernel<DenseNibbles, CodeKind::kU4, kZp, kOut>;
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  constexpr bool kHasZ = kZp == ZeroPointKind::kInteger;
  if (plan.s_outer != 1 || c0 >= c1 || r0 >= r1) return false;
  const int64_t groups = MapGroups(plan, c0, c1);
  if (groups > kMapRowGroups) return false;
  // Stack budgets (tiles allocate nothing): the band's tables, its staged
  // codes.
  constexpr int64_t kTableBytes = 32768, kCodeBytes = 24576;
  const int64_t tpitch = (groups + 15) / 16 * 16;  // entries per row's table
  // 16-bit outputs of at most kPlaneGroups groups on VBMI: byte-plane
  // tables per row (PlaneTables, kernels/x86_avx512-inl.h), bands of 32
  // rows (32 KiB of tables, after the band's scales in `scales`).
#if HWY_TARGET <= HWY_AVX3_DL
  constexpr bool kPlanes =
      OutDesc<kOut>::kBytes == 2 && (kZp == ZeroPointKind::kNone || kZp == ZeroPointKind::kInteger);
  const bool planes = kPlanes && groups <= kPlaneGroups;
  const int64_t classes = (groups + 7) / 8;
  const bool bf16_hw = kOut == OutType::kBF16 && CpuHasAvx512Bf16();
  constexpr int64_t kPlaneUnits = 16;  // 64-element units of a chunk (128 word rows)
  constexpr int64_t kPlaneBytes = 32768;
  const int64_t plane_row_bytes = PlaneRowBytes(groups);
  alignas(64) uint8_t plane_gi[kPlanes ? 64 * kPlaneUnits : 64];
  __mmask64 plane_masks[kPlanes ? kPlaneClasses * kPlaneUnits : 1];
  const int64_t plane_band = kPlaneBytes / PlaneRowBytes(kPlaneGroups);  // 32
  // The band's scales with planes (band rows of kPlaneGroups entries).
  constexpr int64_t kPlaneScaleBytes =
      4 * kPlaneGroups * (kPlaneBytes / PlaneRowBytes(kPlaneGroups));
#else
  constexpr bool kPlanes = false;
  constexpr int64_t kPlaneBytes = 0, kPlaneScaleBytes = 0;
  const bool planes = false;
  const int64_t plane_band = 32;
#endif
  const int64_t band =
      planes ? plane_band : std::min<int64_t>(32, kTableBytes / (8 * tpitch) / 16 * 16);  // >= 16
  const int64_t chunk_words = std::min<int64_t>(128, (kCodeBytes / band - 64) / 64 * 16);
  const int64_t pitch = 4 * chunk_words + 64;  // bytes per row of staged codes
  const bool stream = plan.nontemporal;
  const int64_t S = plan.word_stride;
  const int64_t w0 = c0 / 8, w1 = (c1 + 7) / 8;  // the word rows read
  // The band's scales; with planes, then the plane tables from byte
  // kPlaneScaleBytes (64-byte aligned).
  static_assert(kPlaneScaleBytes % 64 == 0, "plane tables aligned");
  constexpr int64_t kScaleBytes = std::max(kTableBytes / 2, kPlaneScaleBytes + kPlaneBytes);
  alignas(64) float scales[(kPlanes ? kScaleBytes : kTableBytes / 2) / 4];
#if HWY_TARGET <= HWY_AVX3_DL
  uint8_t* const plane_rows = reinterpret_cast<uint8_t*>(scales) + kPlaneScaleBytes;
#endif
  alignas(64) int32_t zeros[kHasZ ? kTableBytes / 8 : 1];
  alignas(64) uint8_t codes[kCodeBytes];
  // 16-bit outputs past kGatherMinGroups groups without planes: each band
  // row's gather table (GatherTables) in the thread's kernel scratch, the
  // chunk's map (GatherMap) on the stack.
  constexpr bool kGather =
      OutDesc<kOut>::kBytes == 2 && (kZp == ZeroPointKind::kNone || kZp == ZeroPointKind::kInteger);
  const int64_t gather_row_bytes = GatherRowBytes(groups);
  uint8_t* const gather_rows = kGather && !planes && groups > kGatherMinGroups
                                   ? KernelScratch(static_cast<size_t>(band * gather_row_bytes))
                                   : nullptr;
  const bool gather = gather_rows != nullptr;
  alignas(64) int32_t gather_gi[kGather ? 8 * 128 : 16];  // a chunk's 8 * 128 columns
  // MappedRow16's inputs: each of the band's rows' zero points as int16
  // (64 entries), the chunk's map as uint16 (up to 128 word rows).
  constexpr int64_t kGroups16 = 64, kMapChunk = 8 * 128;
  alignas(64) int16_t zeros16[kHasZ ? 32 * kGroups16 : 1];
  alignas(64) uint16_t map16[kHasZ ? kMapChunk : 1];
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
#if HWY_TARGET <= HWY_AVX3_DL
    if constexpr (kPlanes) {
      for (int64_t i = 0; planes && i < rows; ++i) {
        PlaneTables<kZp, kOut>(scales + i * tpitch, kHasZ ? zeros + i * tpitch : nullptr,
                               plan.code_offset, groups, bf16_hw, plane_rows + i * plane_row_bytes);
      }
    }
#endif
    if constexpr (kGather) {
      for (int64_t i = 0; gather && i < rows; ++i) {
        GatherTables<kZp, kOut>(
            scales + i * tpitch, kHasZ ? zeros + i * tpitch : nullptr, plan.code_offset, groups,
            kOut == OutType::kBF16 && CpuHasAvx512Bf16(), gather_rows + i * gather_row_bytes);
      }
    }
    bool band16 = false;
    if constexpr (kHasZ) {
      band16 = groups <= kGroups16;  // (and rows <= 32: `band`)
      // (planes: the row kernel takes at most a unit's edges; its 32-bit path.)
      band16 = band16 && !planes && !gather;
      // Each row's zero points as int16, 64 entries (zero past `groups`),
      // where all lie in [-32752, 32767].
      const __m512i lo = _mm512_set1_epi32(-32752), hi = _mm512_set1_epi32(32767);
      for (int64_t i = 0; band16 && i < rows; ++i) {
        for (int64_t g = 0; g < kGroups16; g += 16) {
          const int64_t left = std::max<int64_t>(0, std::min<int64_t>(16, groups - g));
          const auto m = static_cast<__mmask16>((1u << left) - 1u);
          const __m512i z = _mm512_maskz_loadu_epi32(m, &zeros[i * tpitch + g]);
          band16 = band16 && _mm512_cmpge_epi32_mask(z, lo) == 0xFFFF &&
                   _mm512_cmple_epi32_mask(z, hi) == 0xFFFF;
          _mm256_store_si256(reinterpret_cast<__m256i*>(&zeros16[i * kGroups16 + g]),
                             _mm512_cvtepi32_epi16(z));
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
      if (band16) {  // (entries < 64: the narrowing keeps them)
        for (int64_t k = ka; k < kb; k += 16) {
          const auto m = static_cast<__mmask16>((1u << std::min<int64_t>(16, kb - k)) - 1u);
          _mm512_mask_cvtepi32_storeu_epi16(&map16[k - 8 * wc0], m,
                                            _mm512_maskz_loadu_epi32(m, plan.axis_group + k));
        }
      }
      // planes: whole 64-element units [kp0, kp1) of the chunk, 32-byte
      // aligned in the staged codes.
      int64_t kp0 = kb, kp1 = kb;
#if HWY_TARGET <= HWY_AVX3_DL
      if (planes) {
        kp0 = std::min(kb, 8 * wc0 + (ka - 8 * wc0 + 63) / 64 * 64);
        kp1 = kp0 + (kb - kp0) / 64 * 64;
        PlaneMap(plan.axis_group + kp0, (kp1 - kp0) / 64, plane_gi, plane_masks);
      }
#endif
      // gather: whole 32-element units [kp0, kp1) of the chunk, 16-byte
      // aligned in the staged codes.
      if (gather) {
        kp0 = std::min(kb, 8 * wc0 + (ka - 8 * wc0 + 31) / 32 * 32);
        kp1 = kp0 + (kb - kp0) / 32 * 32;
        GatherMap(plan.axis_group + kp0, (kp1 - kp0) / 32, gather_gi);
      }
      // (Counted without divisions: acc / rows lines are due by row i.)
      int64_t acc = 0, line = 0;
      uintptr_t next_row = first + static_cast<uintptr_t>(next_w * S);
      for (int64_t i = 0; i < rows; ++i) {
        for (acc += next_lines; acc >= rows; acc -= rows) {
          PrefetchL2(next_row + static_cast<uintptr_t>(64 * line));
          if (++line == per) {
            line = 0;
            next_row += static_cast<uintptr_t>(S);
          }
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
        if (band16) {
          job.map16 = map16;
          job.zp16 = zeros16 + i * kGroups16;
        }
        Kernel kernel(plan, job);
        char* const row = out + ((n0 + i - r0) * ld - c0) * kOutBytes;  // + k * kOutBytes
        if (kp0 >= kp1) {
          kernel.Run(ka - 8 * wc0, kb - 8 * wc0, row + ka * kOutBytes, stream);
          continue;
        }
        if (ka < kp0) kernel.Run(ka - 8 * wc0, kp0 - 8 * wc0, row + ka * kOutBytes, stream);
        char* const d = row + kp0 * kOutBytes;
        const bool nt = stream && reinterpret_cast<uintptr_t>(d) % 64 == 0;
        if (gather) {
          GatherRun16(gather_rows + i * gather_row_bytes, codes + i * pitch + (kp0 - 8 * wc0) / 2,
                      gather_gi, (kp1 - kp0) / 32, d, nt);
        } else {
#if HWY_TARGET <= HWY_AVX3_DL
          const uint8_t* const t = plane_rows + i * plane_row_bytes;
          const uint8_t* const c = codes + i * pitch + (kp0 - 8 * wc0) / 2;
          const int64_t units = (kp1 - kp0) / 64;
          switch (classes) {
            case 1:
              PlaneRun<1>(t, c, plane_gi, plane_masks, units, d, nt);
              break;
            case 2:
              PlaneRun<2>(t, c, plane_gi, plane_masks, units, d, nt);
              break;
            case 3:
              PlaneRun<3>(t, c, plane_gi, plane_masks, units, d, nt);
              break;
            default:
              PlaneRun<4>(t, c, plane_gi, plane_masks, units, d, nt);
              break;
          }
#endif
        }
        if (kp1 < kb) kernel.Run(kp1 - 8 * wc0, kb - 8 * wc0, row + kp1 * kOutBytes, stream);
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

#if HWY_TARGET > HWY_AVX3
// --- Column layouts below AVX-512: staged rows -------------------------------
//
// AWQ's [K, N / 8] and GPTQ's [K / 8, N] words (without a group map)
// written as the [N, K] output on the targets without the AVX-512
// column tiles. The row kernels' own loaders for these layouts read one
// word per element from a different row of words (a gather per vector, a
// new cache line and often a new page per element: AWQ ran at 0.03-0.07 of
// the read + write stream on an AVX2 Zen 3 guest). Instead, a band of rows
// (n) by a chunk of columns (k) is staged as dense 4-bit rows (element k of
// row i at nibble k % 2 of byte k / 2 of the row's run, low nibble first)
// and each row's chunk goes through the row kernel of dense nibbles
// (compressed-tensors' rows) with the row's own parameters: the contract's
// arithmetic on the same codes and parameters, so the same bits.
//  GPTQ: the chunk's word rows transposed as 32-bit elements (TransposeTile):
//        word k / 8 of a row holds its codes k .. k+7 in nibble order, which
//        is the dense row's order.
//  AWQ:  the chunk's rows of words transposed as 32-bit elements (word
//        column j's words along k), then each 8 x 8 block of nibbles
//        (8 words k .. k+7 of column j: rows 8j .. 8j+7 at nibbles
//        kAwqNibbleOrder) transposed into the 8 rows' words (AwqBlock8).
// While a chunk's rows are written, the next chunk's lines (the next
// band's first at a band's end: no hardware prefetcher follows the word
// stride) are fetched into L2, spread over the rows. (GPTQ's act-order
// group map takes WordTiles below: its per-element parameters, gathered
// here, ran 0.7-0.8x of the [K, N] lowering it had then.)

// Rows per band and columns per chunk. GPTQ: 32 rows (128 bytes of each
// word row) by 1024 columns (128 word rows), 16 KiB of codes. AWQ: 128
// rows (16 words: one 64-byte line of each row k) by 256 columns, 16 KiB
// of codes and 16 KiB of transposed words.
constexpr int64_t kStagedGptqBand = 32, kStagedGptqChunk = 1024;
constexpr int64_t kStagedAwqBand = 128, kStagedAwqChunk = 256;

// AWQ: the 8 words at `in` (32-bit, rows k .. k+7 of one word column: rows
// 8j .. 8j+7 of the view, row p at nibble kAwqNibbleOrder[p]) as 8 dense
// words: row p's codes k .. k+7 (nibble t: code k + t) at out + p * pitch.
HWY_INLINE void AwqBlock8(const uint8_t* in, uint8_t* out, int64_t pitch) {
#if HWY_TARGET == HWY_AVX2
  // Byte e of each 64-bit lane of z (two words, k + 2m and k + 2m + 1)
  // packs nibble position pos(e) of both words: e < 4 the even positions
  // 2e, else the odd 2(e - 4) + 1; its low nibble from word 2m, high
  // from 2m + 1. Byte shuffles then gather row p's four bytes (m = 0..3).
  struct Shuffle {
    int8_t b[32];
  };
  constexpr Shuffle kGather = [] {
    Shuffle s{};
    for (int lane = 0; lane < 2; ++lane) {
      for (int r = 0; r < 8; ++r) {
        const int pos = kAwqNibbleOrder[r];
        const int e = pos % 2 == 0 ? pos / 2 : 4 + pos / 2;
        for (int h = 0; h < 2; ++h) s.b[16 * lane + 2 * r + h] = static_cast<int8_t>(8 * h + e);
      }
    }
    return s;
  }();
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i lo = _mm256_and_si256(v, m4);
  const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  const __m256i pl = _mm256_or_si256(lo, _mm256_srli_epi64(lo, 28));
  const __m256i ph = _mm256_or_si256(hi, _mm256_srli_epi64(hi, 28));
  const __m256i z = _mm256_blend_epi32(pl, _mm256_slli_epi64(ph, 32), 0xAA);
  // Per 128-bit lane L (m = 2L, 2L + 1): u16 r = row r's bytes (m even, m odd).
  const __m256i g =
      _mm256_shuffle_epi8(z, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kGather.b)));
  // u32 r = row r's bytes m = 0..3.
  const __m256i rows =
      _mm256_shuffle_epi8(_mm256_permute4x64_epi64(g, 0xD8),
                          _mm256_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15, 0,
                                           1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
  alignas(32) uint32_t w[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(w), rows);
  for (int p = 0; p < 8; ++p) std::memcpy(out + p * pitch, &w[p], 4);
#else
  uint32_t w[8];
  std::memcpy(w, in, sizeof(w));
  for (int p = 0; p < 8; ++p) {
    uint32_t o = 0;
    for (int t = 0; t < 8; ++t) o |= ((w[t] >> (4 * kAwqNibbleOrder[p])) & 0xFu) << (4 * t);
    std::memcpy(out + p * pitch, &o, 4);
  }
#endif
}

// The dense row of staged codes whose byte (k - k_first) / 2 holds element
// k (k_first even): the loader's Address(c, k) is codes + k / 2, so the
// base is that many bytes before the run (integer arithmetic: no pointer
// before the object is formed; every element read lies in the run).
HWY_INLINE CodeRef StagedRow(const uint8_t* run, int64_t k_first) {
  const uintptr_t base = reinterpret_cast<uintptr_t>(run) - static_cast<uintptr_t>(k_first / 2);
  return CodeRef{reinterpret_cast<const uint8_t*>(base), 0, false, 0};
}

// Whether StagedColumns takes this tile: GPTQ or AWQ columns over the
// [N, K] view (inner 1) without a group map, groups at least a vector
// long along k (or one scale per row).
HWY_INLINE bool StagedColumnsApply(const Plan& plan, int64_t c0, int64_t c1) {
  if (plan.inner != 1 || plan.axis_group != nullptr || c0 >= c1) return false;
  if (plan.layout != Layout::kGptqColumns && plan.layout != Layout::kAwqColumns) return false;
  const int64_t n = static_cast<int64_t>(hn::Lanes(KernelTag()));
  return plan.group >= n || plan.s_axis == 0;
}

// The staged rows (above) for rows [r0, r1), columns [c0, c1) where
// StagedColumnsApply. About 33 KiB of stack.
template <ZeroPointKind kZp, OutType kOut>
HWY_NOINLINE void StagedColumns(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                char* out, int64_t ld) {
  using Kernel = RowKernel<DenseNibbles, CodeKind::kU4, kZp, kOut>;
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  const bool gptq = plan.layout == Layout::kGptqColumns;
  const int64_t K = plan.cols(), S = plan.word_stride;
  const int64_t band = gptq ? kStagedGptqBand : kStagedAwqBand;
  const int64_t chunk = gptq ? kStagedGptqChunk : kStagedAwqChunk;
  const int64_t pitch = chunk / 2 + 64;  // bytes per staged row (not a power of two)
  alignas(64) uint8_t codes[kStagedAwqBand * (kStagedAwqChunk / 2 + 64)];
  static_assert(kStagedGptqBand * (kStagedGptqChunk / 2 + 64) <= sizeof(codes), "stage size");
  alignas(64) uint32_t words[kStagedAwqBand / 8 * kStagedAwqChunk];  // AWQ: transposed words
  const bool stream = plan.nontemporal;
  // Band [n0, n1): rows n0 .. up to the next multiple of `band`. Chunk
  // [ka, kb) of it: columns up to the next multiple of `chunk`; staged
  // columns [k0, k1) hold it in whole words (GPTQ) or 8-row blocks (AWQ),
  // at most to the stored rows of words.
  auto band_end = [&](int64_t n) { return std::min(r1, (n / band + 1) * band); };
  auto chunk_end = [&](int64_t k) { return std::min(c1, (k / chunk + 1) * chunk); };
  auto staged_end = [&](int64_t kb) { return std::min((kb + 7) / 8 * 8, (K + 7) / 8 * 8); };
  // The lines a chunk reads: `rows` rows of words S apart from `first`,
  // `per` 64-byte lines of each.
  struct Lines {
    uintptr_t first = 0;
    int64_t rows = 0, per = 0;
  };
  auto lines_of = [&](int64_t n0, int64_t ka) {
    Lines l;
    if (n0 >= r1) return l;
    const int64_t n1 = band_end(n0), k0 = ka / 8 * 8, k1 = staged_end(chunk_end(ka));
    const int64_t b0 = gptq ? 4 * n0 : 4 * (n0 / 8), b1 = gptq ? 4 * n1 : 4 * ((n1 + 7) / 8);
    const int64_t row0 = gptq ? k0 / 8 : k0;
    l.rows = gptq ? (k1 - k0) / 8 : std::min(k1, K) - k0;
    const uintptr_t at = reinterpret_cast<uintptr_t>(plan.codes) + static_cast<uintptr_t>(b0);
    l.first = at / 64 * 64 + static_cast<uintptr_t>(row0 * S);
    l.per = static_cast<int64_t>((at + static_cast<uintptr_t>(b1 - b0) - at / 64 * 64 + 63) / 64);
    return l;
  };
  for (int64_t n0 = r0; n0 < r1; n0 = band_end(n0)) {
    const int64_t n1 = band_end(n0);
    // AWQ stages whole words: rows [8 w0, 8 w1) of the band.
    const int64_t w0 = n0 / 8, w1 = (n1 + 7) / 8;
    const int64_t first = gptq ? n0 : 8 * w0;  // staged row 0
    for (int64_t ka = c0; ka < c1; ka = chunk_end(ka)) {
      const int64_t kb = chunk_end(ka);
      const int64_t k0 = ka / 8 * 8, k1 = staged_end(kb);
      if (gptq) {
        TransposeTile(plan.codes + (k0 / 8) * S + 4 * n0, static_cast<size_t>(S), (k1 - k0) / 8,
                      n1 - n0, 4, codes, static_cast<size_t>(pitch), false);
      } else {
        // Word column j's words k0 .. k1 - 1 at words + (j - w0) * chunk
        // (rows past K: zero codes, never written out).
        const int64_t kr = std::min(k1, K);
        TransposeTile(plan.codes + k0 * S + 4 * w0, static_cast<size_t>(S), kr - k0, w1 - w0, 4,
                      reinterpret_cast<uint8_t*>(words), static_cast<size_t>(4 * chunk), false);
        for (int64_t j = 0; j < w1 - w0; ++j) {
          uint32_t* const wj = words + j * chunk;
          for (int64_t k = kr; k < k1; ++k) wj[k - k0] = 0;
          for (int64_t k = k0; k < k1; k += 8) {
            AwqBlock8(reinterpret_cast<const uint8_t*>(wj + (k - k0)),
                      codes + 8 * j * pitch + (k - k0) / 2, pitch);
          }
        }
      }
      // The next chunk's lines, spread over this chunk's rows (counted
      // without divisions: acc / rows lines are due by row i).
      Lines next = kb < c1 ? lines_of(n0, kb) : lines_of(n1, c0);
      const int64_t rows = n1 - n0, due = next.rows * next.per;
      int64_t acc = 0, line = 0;
      for (int64_t n = n0; n < n1; ++n) {
        for (acc += due; acc >= rows; acc -= rows) {
          hwy::Prefetch(
              reinterpret_cast<const uint8_t*>(next.first + static_cast<uintptr_t>(64 * line)));
          if (++line == next.per) {
            line = 0;
            next.first += static_cast<uintptr_t>(S);
          }
        }
        // The plan's parameters, as the row kernels' own jobs.
        RowJob job{};
        job.code = StagedRow(codes + (n - first) * pitch, k0);
        job.per_element = false;
        job.scale = plan.scale;
        job.zp_int = plan.zp_int;
        job.zp_float = nullptr;
        job.base = n * plan.s_outer;
        job.group = plan.s_axis == 0 ? K : plan.group;
        job.step = plan.s_axis;
        Kernel kernel(plan, job);
        kernel.Run(ka, kb, out + ((n - r0) * ld + (ka - c0)) * kOutBytes, stream);
      }
    }
  }
  if (stream) hwy::FlushStream();
}

// Calls f(kZp, kOut) as integral constants for the plan's zero-point kind
// (none or integer: the caller checks) and output type.
template <class F>
HWY_INLINE void WithZpNoneOrIntegerOut(const Plan& plan, F f) {
  auto with_out = [&](auto zp) HWY_ATTR {
    switch (plan.out) {
#define NIBBLE_CASE(OUT) \
  case OutType::k##OUT:  \
    return f(zp, std::integral_constant<OutType, OutType::k##OUT>());
      NIBBLE_OUT_TYPES(NIBBLE_CASE)
#undef NIBBLE_CASE
    }
  };
  if (plan.zp_kind == ZeroPointKind::kNone) {
    with_out(std::integral_constant<ZeroPointKind, ZeroPointKind::kNone>());
  } else {
    with_out(std::integral_constant<ZeroPointKind, ZeroPointKind::kInteger>());
  }
}
#if HWY_TARGET == HWY_AVX2
// --- GPTQ act-order words as 8 x 8 register tiles (AVX2) -------------------
//
// Nibble j of GPTQ's word (w, n) is element (n, 8w + j) of the [N, K] view,
// so the 32 bytes of words (w, n .. n+7) are an 8 x 8 tile of codes: for
// each k = 8w + j, the 8 columns' codes are one shift and mask, and their
// parameters (scales and zero points [groups, N]: row g(k), columns n ..
// n+7) one vector load each, whatever g(k) is — a group map (act-order
// g_idx) costs no gather and no per-element selection. Per k the
// contract's arithmetic float32(q - z) * s on one vector (the same
// operations as the row kernels' Arith: the same bits), then the tile's 8
// vectors are transposed (8 x 8 float32) into the 8 rows' values of k ..
// k+7.
//  - A band's parameters (at most kWordTileGroups groups) are first copied
//    into a table of 16 columns per group: in place, one band's parameter
//    rows lie s_axis (4N bytes, a power of two in practice) apart, all in
//    one set of the L1, read in the map's order (1.7 against 2.4 G el/s in
//    cache on a Zen 3 guest, 4096 x 4096, float32).
//  - A band of 16 rows (the 64 bytes of each word row) by a chunk of
//    kWordTileChunk columns is staged in float32; each row's run is then
//    rounded and stored by the row kernels' StoreOutUnit (non-temporal:
//    whole lines of one row in order) — bfloat16's tiles rounded before
//    their transpose and staged as bits (StoreTileBf16), then copied. Two stages: the chunk
//    before's rows are written while the next is computed, a row every two word rows, so that the
//    stores' memory traffic overlaps the arithmetic.
//  - Word row w + kWordTileAhead (a new page each: no hardware prefetcher
//    follows the word stride) and, at a band's start, the next band's
//    parameter lines are fetched meanwhile.
// Below AVX-512 the act-order [N, K] view goes through here (the lowering
// asks GroupMapColumnTilesHere); it replaced the [K, N] view written
// transposed (dequantized into L2 tiles, then transposed: 2.1-2.4x the
// time from memory), but its in-cache 16-row tiles are slower than that
// path's (the stores of the staged rows: 1 RFO per line): see
// bench/EXPERIMENTS.md, "AVX2 machines".
constexpr int64_t kWordTileBand = 16, kWordTileChunk = 256, kWordTileGroups = 128;
// Word rows fetched ahead: lines 4N bytes apart share four sets of a
// 1024-set L2 (32 lines), so at most 16 in flight.
constexpr int64_t kWordTileAhead = 12;

// WordTiles' second word source: the plan's view is compressed-tensors'
// act-order rows (dense unsigned 4-bit codes along K, K even: row n's word
// w, codes 8w .. 8w+7, the 4 bytes at n K / 2 + 4 w).
HWY_INLINE bool RowWordsPlan(const Plan& plan) {
  return plan.layout == Layout::kDense && plan.code == CodeKind::kU4 && plan.cols() % 2 == 0 &&
         plan.s_axis == 1;
}

// A staged chunk being written out while the next one is computed
// (WordTiles, CodeTiles): rows [n0, n1), columns [k0, k1) of the output,
// staged row i at stage + i * pitch (elements of T); rows before `next`
// are written.
template <class T>
struct PendingRows {
  const T* stage = nullptr;
  int64_t pitch = 0, n0 = 0, n1 = 0, k0 = 0, k1 = 0, next = 0;
  // Writes rows next .. upto - 1 (those of the chunk) in order:
  // write(row n, its staged run).
  template <class F>
  HWY_INLINE void WriteUpTo(int64_t upto, F write) {
    for (; next < upto && n0 + next < n1; ++next) write(n0 + next, stage + next * pitch);
  }
};

// Whether WordTiles takes part of this tile — 0 where not, else the
// parameter rows it reads (WordTiles' `groups`: every group of the map's
// entries over the tile's words, which may name more than K / G groups;
// one where the scale is constant along the row, s_axis 0): a group map
// along the rows of the [N, K] view, zero points none or integer, at least
// 8 rows and one whole word of columns, over
//  - GPTQ's columns (without a map, StagedColumns measured as fast from
//    memory and faster in cache), scales [groups, N] (s_outer 1);
//  - or compressed-tensors' act-order rows (RowWordsPlan: dense unsigned
//    4-bit codes, each row whole bytes), scales [N, groups] (s_axis 1),
//    the map's groups over the tile's words at most kWordTileGroups (the
//    band's table).
HWY_INLINE int64_t WordTileGroups(const Plan& plan, int64_t r0, int64_t r1, int64_t c0,
                                  int64_t c1) {
  if (plan.axis_group == nullptr || plan.inner != 1 ||
      (plan.zp_kind != ZeroPointKind::kNone && plan.zp_kind != ZeroPointKind::kInteger) ||
      r1 - r0 < 8 || c1 / 8 <= (c0 + 7) / 8) {
    return 0;
  }
  const bool gptq = plan.layout == Layout::kGptqColumns;
  if (gptq ? plan.s_outer != 1 : !RowWordsPlan(plan)) return 0;
  const int64_t groups = plan.s_axis == 0 ? 1 : MapGroups(plan, (c0 + 7) / 8 * 8, c1 / 8 * 8);
  return gptq || groups <= kWordTileGroups ? groups : 0;
}

// The n values at v as kOut at dst: whole units by StoreOutUnit (from a
// vector-aligned address when `stream`), the rest by StoreOut (the same
// rounding per value). `facts`: the values' UnitFacts.
template <OutType kOut>
HWY_INLINE void StoreRun(const float* v, int64_t n, char* dst, bool stream, UnitFacts facts) {
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  const KernelTag df;
  int64_t i = 0;
  if (stream) {
    for (; i < n && reinterpret_cast<uintptr_t>(dst + i * kOutBytes) % 32 != 0; ++i) {
      StoreOut<kOut>(v[i], dst + i * kOutBytes);
    }
  }
  for (; i + 16 <= n; i += 16) {
    StoreOutUnit<kOut>(df, hn::LoadU(df, v + i), hn::LoadU(df, v + i + 8), dst + i * kOutBytes,
                       stream, facts);
  }
  for (; i < n; ++i) StoreOut<kOut>(v[i], dst + i * kOutBytes);
}

// The n 16-bit values at v copied to dst (`stream`: non-temporal from
// its first 32-byte boundary; memcpy before and after, and where not).
HWY_INLINE void CopyRun16(const uint16_t* v, int64_t n, char* dst, bool stream) {
  if (!stream) {
    std::memcpy(dst, v, static_cast<size_t>(2 * n));
    return;
  }
  // The values before the first 32-byte boundary (all of them where dst
  // is odd) copied as they are.
  const uintptr_t a = reinterpret_cast<uintptr_t>(dst);
  int64_t i = a % 2 != 0 ? n : std::min(n, static_cast<int64_t>((32 - a % 32) % 32 / 2));
  std::memcpy(dst, v, static_cast<size_t>(2 * i));
  for (; i + 16 <= n; i += 16) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + 2 * i),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(v + i)));
  }
  std::memcpy(dst + 2 * i, v + i, static_cast<size_t>(2 * (n - i)));
}

// The 8 x 8 tile v[j] (column k + j of rows n .. n+7: lane i row n + i)
// rounded to bfloat16 (BF16Rounded; kNoNaN: as BF16Bits') and stored
// transposed: row n + i's values k .. k+7 at dst + i * pitch (16-byte
// aligned). Rounded before the transpose, so half the bits move: each
// lane's pair (k + 2m, k + 2m + 1) as one 32-bit lane by one word blend,
// then a 4 x 8 transpose of those. (float16 the same way — two vcvtps2ph
// and two word unpacks a pair — ran 0.85-0.96x in cache on a Zen 3 guest
// against the float32 stage rounded row by row; bfloat16 1.06-1.10x.)
template <bool kNoNaN>
HWY_INLINE void StoreTileBf16(const __m256* v, uint16_t* dst, int64_t pitch) {
  __m256i p[4];
#pragma GCC unroll 4
  for (int m = 0; m < 4; ++m) {
    p[m] = BF16BitsInterleaved<kNoNaN>(v[2 * m], v[2 * m + 1]);
  }
  // Per 128-bit half L (rows n + 4L ..): t0 rows 4L, 4L+1 of p0, p1; t1
  // rows 4L+2, 4L+3; then e[r] = row r (low half), row r + 4 (high).
  const __m256i t0 = _mm256_unpacklo_epi32(p[0], p[1]), t1 = _mm256_unpackhi_epi32(p[0], p[1]);
  const __m256i t2 = _mm256_unpacklo_epi32(p[2], p[3]), t3 = _mm256_unpackhi_epi32(p[2], p[3]);
  const __m256i e[4] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                        _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3)};
#pragma GCC unroll 4
  for (int r = 0; r < 4; ++r) {
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + r * pitch), _mm256_castsi256_si128(e[r]));
    _mm_store_si128(reinterpret_cast<__m128i*>(dst + (r + 4) * pitch),
                    _mm256_extracti128_si256(e[r], 1));
  }
}

// Rows [r0, r0 + (r1 - r0) / 8 * 8), columns [8 ceil(c0 / 8), 8 floor(c1
// / 8)) of the tile, where WordTileGroups gave `groups` (the caller writes
// the rest).
// kRows: RowWordsPlan's rows (else GPTQ's columns): each chunk's words of
// the band first transposed into GPTQ's order (words (w, n .. n+7) 32
// bytes together: 8 x 8 dword transposes of 8 rows' 8 words), its
// parameters' table from [N, groups].
template <bool kRows, ZeroPointKind kZp, OutType kOut>
HWY_NOINLINE void WordTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            int64_t groups, char* out, int64_t ld) {
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  // Staged values: float32, or bfloat16's bits (StoreTileBf16).
  constexpr bool kBf16 = kOut == OutType::kBF16;
  using Staged = std::conditional_t<kBf16, uint16_t, float>;
  constexpr int64_t kPitch =
      kWordTileChunk + 64 / static_cast<int64_t>(sizeof(Staged));  // per staged row
  constexpr bool kHasZ = kZp == ZeroPointKind::kInteger;
  // Two stages (the chunk being computed, the chunk before being written
  // out); with the tables, about 52 KiB of stack (float32).
  alignas(64) Staged stage[2][kWordTileBand * kPitch];
  // The band's parameters: group g's at g * kWordTileBand + (n - n0).
  alignas(64) float scales[kWordTileGroups * kWordTileBand];
  alignas(64) int32_t zeros[kHasZ ? kWordTileGroups * kWordTileBand : 1];
  alignas(64) int64_t at[kWordTileChunk];  // k's parameter offset (group g(k)'s)
  // kRows: the chunk's words of the band, word i's at i * kWordTileBand + (n - n0).
  alignas(64) uint32_t row_words[kRows ? kWordTileChunk / 8 * kWordTileBand : 8];
  const int64_t rm = r0 + (r1 - r0) / 8 * 8, ka = (c0 + 7) / 8 * 8, kb = c1 / 8 * 8;
  const int64_t S = plan.word_stride, K = plan.cols();
  const int64_t row_bytes = K / 2;  // kRows
  // Past kWordTileGroups groups, the parameters are read in place (not
  // kRows: WordTileGroups).
  const bool table = kRows || groups <= kWordTileGroups;
  const int64_t g_stride = plan.s_axis == 0 ? 0 : (table ? kWordTileBand : plan.s_axis);
  const bool stream = plan.nontemporal;
  const UnitFacts facts = kOut == OutType::kBF16 && plan.finite_values ? kNoNaN : kNoFacts;
  const uintptr_t codes = reinterpret_cast<uintptr_t>(plan.codes);
  const __m256i nibble = _mm256_set1_epi32(0xF), offset = _mm256_set1_epi32(plan.code_offset);
  auto band_end = [&](int64_t n) { return rm - n >= kWordTileBand ? n + kWordTileBand : n + 8; };
  const int64_t words = (kb - ka) / 8;  // word rows per band
  PendingRows<Staged> pending;
  auto write_rows = [&](int64_t upto) HWY_ATTR {
    pending.WriteUpTo(upto, [&](int64_t n, const Staged* run) HWY_ATTR {
      char* const dst = out + ((n - r0) * ld + (pending.k0 - c0)) * kOutBytes;
      if constexpr (kBf16) {
        CopyRun16(run, pending.k1 - pending.k0, dst, stream);
      } else {
        StoreRun<kOut>(run, pending.k1 - pending.k0, dst, stream, facts);
      }
    });
  };
  int buffer = 0;
  for (int64_t n0 = r0; n0 < rm; n0 = band_end(n0)) {
    const int64_t n1 = band_end(n0);
    // The next band's parameter lines (its first and last column's; kRows:
    // each row's first and last group's).
    if (kRows && n1 < rm) {
      for (int64_t n = n1; n < band_end(n1); ++n) {
        for (int64_t g : {int64_t{0}, groups - 1}) {
          const int64_t i = n * plan.s_outer + g;
          hwy::Prefetch(plan.scale + i);
          if constexpr (kHasZ) hwy::Prefetch(plan.zp_int + i);
        }
      }
    } else if (n1 < rm) {
      const int64_t last = band_end(n1) - 1;
      for (int64_t g = 0; g < groups; ++g) {
        for (int64_t n : {n1, last}) {
          const int64_t i = g * plan.s_axis + n;
          hwy::Prefetch(reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(plan.scale) +
                                                         static_cast<uintptr_t>(4 * i)));
          if constexpr (kHasZ) {
            hwy::Prefetch(reinterpret_cast<const uint8_t*>(
                reinterpret_cast<uintptr_t>(plan.zp_int) + static_cast<uintptr_t>(4 * i)));
          }
        }
      }
    }
    // Parameter (n, g(k)) at s_base[at[k - k0] + n - col0] (and z_base).
    const float* s_base = plan.scale;
    const int32_t* z_base = plan.zp_int;
    int64_t col0 = 0;
    if (kRows) {
      for (int64_t n = n0; n < n1; ++n) {
        for (int64_t g = 0; g < groups; ++g) {
          const int64_t i = n * plan.s_outer + g;
          scales[g * kWordTileBand + (n - n0)] = plan.scale[i];
          if constexpr (kHasZ) zeros[g * kWordTileBand + (n - n0)] = plan.zp_int[i];
        }
      }
      s_base = scales;
      z_base = zeros;
      col0 = n0;
    } else if (table) {
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t i = g * plan.s_axis + n0;
        std::memcpy(scales + g * kWordTileBand, plan.scale + i, 4 * static_cast<size_t>(n1 - n0));
        if constexpr (kHasZ) {
          std::memcpy(zeros + g * kWordTileBand, plan.zp_int + i, 4 * static_cast<size_t>(n1 - n0));
        }
      }
      s_base = scales;
      z_base = zeros;
      col0 = n0;
    }
    for (int64_t k0 = ka; k0 < kb; k0 += kWordTileChunk) {
      const int64_t k1 = std::min(kb, k0 + kWordTileChunk);
      if (plan.axis_group != nullptr) {
        for (int64_t k = k0; k < k1; ++k) at[k - k0] = plan.axis_group[k] * g_stride - col0;
      } else {  // (one division per chunk: one per element cost ~1 cycle each)
        int64_t g = k0 / plan.group, left = plan.group - k0 % plan.group;
        for (int64_t k = k0; k < k1; ++k) {
          at[k - k0] = g * g_stride - col0;
          if (--left == 0) {
            ++g;
            left = plan.group;
          }
        }
      }
      Staged* const st = stage[buffer];
      if constexpr (kRows) {
        // The band's words of the chunk in GPTQ's order; then the next
        // chunk's code lines (past the band's end: the next band's first)
        // into L2.
        const int64_t nw = (k1 - k0) / 8;
        for (int64_t h = n0; h < n1; h += 8) {
          const uint8_t* const rows = plan.codes + h * row_bytes + k0 / 2;
          int64_t i = 0;
          for (; i + 8 <= nw; i += 8) {
            __m256 v[8];
#pragma GCC unroll 8
            for (int r = 0; r < 8; ++r) {
              v[r] = _mm256_castsi256_ps(_mm256_loadu_si256(
                  reinterpret_cast<const __m256i*>(rows + r * row_bytes + 4 * i)));
            }
            Transpose8x8(v);
#pragma GCC unroll 8
            for (int j = 0; j < 8; ++j) {
              _mm256_store_ps(
                  reinterpret_cast<float*>(row_words + (i + j) * kWordTileBand + (h - n0)), v[j]);
            }
          }
          for (; i < nw; ++i) {
            for (int64_t r = 0; r < 8; ++r) {
              std::memcpy(row_words + i * kWordTileBand + (h - n0) + r,
                          rows + r * row_bytes + 4 * i, 4);
            }
          }
        }
        const bool last_chunk = k1 == kb;
        const int64_t fa = last_chunk ? n1 : n0, fb = last_chunk ? band_end(n1) : n1;
        const int64_t fk = last_chunk ? ka : k1, fk1 = std::min(kb, fk + kWordTileChunk);
        if (fa < rm) {
          for (int64_t n = fa; n < fb; ++n) {
            for (int64_t k = fk; k < fk1; k += 128) {  // one line: 128 codes
              PrefetchL2(reinterpret_cast<uintptr_t>(plan.codes + n * row_bytes + k / 2));
            }
          }
        }
      }
      for (int64_t w = k0 / 8; w < k1 / 8; ++w) {
        // Word row w + kWordTileAhead of the band's sweep (past its end:
        // the next band's), into L2.
        const int64_t ahead = w + kWordTileAhead;
        const int64_t fn = ahead < kb / 8 ? n0 : n1, fw = ahead < kb / 8 ? ahead : ahead - words;
        if (!kRows && fn < rm) {
          const uintptr_t line = codes + static_cast<uintptr_t>(fw * S + 4 * fn);
          PrefetchL2(line);
          PrefetchL2(line + static_cast<uintptr_t>(4 * (band_end(fn) - fn) - 1));
        }
        const int64_t j0 = 8 * w - k0;
        for (int64_t h = n0; h < n1; h += 8) {
          __m256i word = kRows ? _mm256_load_si256(reinterpret_cast<const __m256i*>(
                                     row_words + (w - k0 / 8) * kWordTileBand + (h - n0)))
                               : _mm256_loadu_si256(
                                     reinterpret_cast<const __m256i*>(plan.codes + w * S + 4 * h));
          __m256 v[8];
#pragma GCC unroll 8
          for (int j = 0; j < 8; ++j) {
            const int64_t p = at[j0 + j] + h;
            const __m256i q = _mm256_and_si256(word, nibble);
            word = _mm256_srli_epi32(word, 4);
            const __m256i z =
                kHasZ ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(z_base + p)) : offset;
            v[j] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(q, z)),
                                 _mm256_loadu_ps(s_base + p));
          }
          Staged* const s = st + (h - n0) * kPitch + j0;
          if constexpr (kBf16) {
            if (facts == kNoNaN) {
              StoreTileBf16<true>(v, s, kPitch);
            } else {
              StoreTileBf16<false>(v, s, kPitch);
            }
          } else {
            Transpose8x8(v);
#pragma GCC unroll 8
            for (int i = 0; i < 8; ++i) _mm256_store_ps(s + i * kPitch, v[i]);
          }
        }
        write_rows((w - k0 / 8 + 1) * kWordTileBand * 8 / kWordTileChunk);
      }
      write_rows(kWordTileBand);  // (the rest, after a short chunk)
      pending = PendingRows<Staged>{st, kPitch, n0, n1, k0, k1, 0};
      buffer ^= 1;
    }
  }
  write_rows(kWordTileBand);
  if (stream) hwy::FlushStream();
}

// --- GPTQ / AWQ words as 64-code row runs, 16-bit outputs (AVX2) ------------
//
// Both layouts' words are turned in registers into each row's run of 64
// codes (k .. k+63, dense nibbles: code k + i at nibble i % 2 of byte i / 2)
// for a step of kCodeTileColumns columns:
//  GPTQ: the words (w, n .. n+7) for w = k/8 .. k/8+7 are 8 x 8 words; one
//        8 x 8 transpose of them (Transpose8x8 on the bits) leaves in
//        vector j the 8 words (w, n + j): row n + j's codes in order
//        (nibble t of word i: code 8i + t) (GptqCodeRuns).
//  AWQ:  the words (k + i, j .. j+7) for i = 0 .. 7 hold 8 x 8 nibbles per
//        word column (nibble t of word i: code k + i of row 8j + p with
//        kAwqNibbleOrder[p] == t); three delta swaps (4-, 8-, 16-bit)
//        across the 8 vectors transpose every column's 8 x 8 nibbles at
//        once, so vector t holds, per word column, row (j, t)'s codes k ..
//        k+7 in order. Eight such steps along k, then one 8 x 8 transpose
//        of vector t's eight, give the 64-code runs (AwqCodeRuns): no pass
//        through memory but a 2 KiB stage of the eight steps.
// Each row's 64 codes are then looked up in registers in the row kernels'
// byte-plane tables of its group (RowKernel::ShuffleTables: the contract's
// arithmetic on the 16 codes, rounded once per value — the same bits), 32
// outputs at a time (CodeTileRow: each 16 bytes broadcast to both halves,
// DenseNibbleLookup32) — the row kernels' own lookup of dense nibbles.
//  - A band of rows builds its rows' tables at each group start (groups a
//    multiple of 64 columns, or one per row).
//  - The outputs of a chunk of columns are staged and each row's run then
//    written out in order (non-temporal: whole lines of one row), spread
//    over the next chunk's rows: written directly, 32 rows' 128-byte
//    pieces at a time, GPTQ's outputs ran at 3.4 G el/s against 6.9 with
//    the stores taken out.
//  - Word rows a step or two ahead (a new page each: no hardware
//    prefetcher follows the word stride) are fetched into L2, the band's
//    lines of each.
constexpr int64_t kCodeTileColumns = 64;  // columns per step

// Transposes the 8 x 8 nibbles of every 32-bit lane of v[0..7] (nibble t
// of v[i] -> nibble i of v[t]): three delta swaps, bit b of i exchanged
// with bit b of t.
HWY_INLINE void TransposeNibbles8x8(__m256i* v) {
  const auto swap = [&](int i, int j, int shift, uint32_t mask) HWY_ATTR {
    const __m256i t = _mm256_and_si256(_mm256_xor_si256(_mm256_srli_epi32(v[i], shift), v[j]),
                                       _mm256_set1_epi32(static_cast<int>(mask)));
    v[j] = _mm256_xor_si256(v[j], t);
    v[i] = _mm256_xor_si256(v[i], _mm256_slli_epi32(t, shift));
  };
  for (int i = 0; i < 8; i += 2) swap(i, i + 1, 4, 0x0F0F0F0Fu);
  for (int i : {0, 1, 4, 5}) swap(i, i + 2, 8, 0x00FF00FFu);
  for (int i = 0; i < 4; ++i) swap(i, i + 4, 16, 0x0000FFFFu);
}

// GPTQ's [K / 8, N] words: word (w, n) holds row n's codes 8w .. 8w+7.
struct GptqCodeRuns {
  // Rows per band (the 64 bytes of each word row), columns per staged
  // chunk (two chunks staged: 34 KiB, KernelScratch), steps fetched ahead
  // (2: 16 word rows; lines 4N bytes apart share four sets of its 1024:
  // 32 lines). Measured on the Zen 3 guest (4096 x 4096, G = 128, float16,
  // one thread): bands of 8 / 16 / 64 rows by chunks of 512 / 512 / 128
  // columns 4.3 / 5.3 / 3.2 G el/s; later (2026-12-06, eight alternated
  // rounds of the bench) 64 x 512 1.02-1.09x of 16 x 512 over float16 /
  // bfloat16 at one and two threads, within the noise: not taken.
  static constexpr int64_t kBand = 16, kChunk = 512, kAheadSteps = 2;
  // Word rows per column, rows per word (the word row of column k: k /
  // kColumnsPerWordRow; the byte of row n in it: 4 n / kRowsPerWord).
  static constexpr int64_t kColumnsPerWordRow = 8, kRowsPerWord = 1;
  // The rows of [r0, r1) it takes: whole 8-row strips from r0.
  static int64_t Begin(int64_t r0) { return r0; }
  static int64_t End(int64_t r0, int64_t r1) { return r0 + (r1 - r0) / 8 * 8; }
  // Rows [b0, b1) (8-row strips), columns k .. k+63: emit(n, run) for
  // each row, strip() after each 8 rows; fetch(i) for i in [0, 8) (the
  // word rows ahead).
  template <class Emit, class Strip, class Fetch>
  HWY_INLINE static void Step(const Plan& plan, int64_t k, int64_t b0, int64_t b1, Emit emit,
                              Strip strip, Fetch fetch) {
    for (int i = 0; i < 8; ++i) fetch(i);
    const int64_t w = k / 8, S = plan.word_stride;
    for (int64_t n0 = b0; n0 < b1; n0 += 8) {
      __m256 v[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        v[i] = _mm256_castsi256_ps(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(plan.codes + (w + i) * S + 4 * n0)));
      }
      Transpose8x8(v);
#pragma GCC unroll 8
      for (int j = 0; j < 8; ++j) emit(n0 + j, _mm256_castps_si256(v[j]));
      strip();
    }
  }
};

// AWQ's [K, N / 8] words: word (k, j) holds rows 8j .. 8j+7's code k.
struct AwqCodeRuns {
  // Rows per band (the 64 bytes of each word row: 16 word columns),
  // columns per staged chunk (two chunks staged: 144 KiB, KernelScratch),
  // steps fetched ahead (64 word rows each). Measured on the Zen 3 guest
  // (4096 x 4096, G = 128, float16, one thread, from memory; medians of 4
  // alternated runs, G el/s): band x chunk x steps ahead 128 x 64 x 2
  // 1.76, 64 x 128 x 1 1.98, and 2.02-2.35 (within the machine's noise)
  // for 128 x 128 x 1 / 2 / 3, 128 x 192 x 2 and 64 x 256 x 2. Later
  // (2026-12-06, nibble_tile_probe awq whole, 3-4 alternated runs each):
  // 128 x 128 2.8-3.9, 128 x 256 3.6-5.1, 128 x 384 4.5-5.0, 256 x 256
  // 4.4-4.8, 512 x 128 3.4-3.7; 64 x 64, 32 x 128 2.0-2.6 (the stages
  // past L1: the longer runs of each row written and of each word row
  // read are what counts); in the bench 128 x 256 led 128 x 384, 256 x
  // 256 and 128 x 512 by 3-11 % at one thread.
  static constexpr int64_t kBand = 128, kChunk = 256, kAheadSteps = 2;
  static constexpr int64_t kColumnsPerWordRow = 1, kRowsPerWord = 8;
  // Whole word columns: rows [8 ceil(r0 / 8), 8 floor(r1 / 8)).
  static int64_t Begin(int64_t r0) { return (r0 + 7) / 8 * 8; }
  static int64_t End(int64_t, int64_t r1) { return r1 / 8 * 8; }
  // Row t of each word column in the transposed nibbles: the row p whose
  // nibble is t.
  struct Rows {
    int8_t of_nibble[8];
  };
  static constexpr Rows kRows = [] {
    Rows r{};
    for (int p = 0; p < 8; ++p) r.of_nibble[kAwqNibbleOrder[p]] = static_cast<int8_t>(p);
    return r;
  }();
  // Rows [b0, b1) (b0 a multiple of 8), columns k .. k+63 (64 word rows):
  // emit(n, run) for each row, strip() after each (up to) 8 rows; fetch(i)
  // for i in [0, 64).
  template <class Emit, class Strip, class Fetch>
  HWY_INLINE static void Step(const Plan& plan, int64_t k, int64_t b0, int64_t b1, Emit emit,
                              Strip strip, Fetch fetch) {
    const int64_t S = plan.word_stride;
    alignas(32) __m256i runs[8][8];  // [t][s]: nibble row t's codes k + 8s .. k+8s+7
    for (int64_t j0 = b0 / 8; j0 < b1 / 8; j0 += 8) {
      const int64_t jw = std::min<int64_t>(8, b1 / 8 - j0);  // word columns
      const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(jw)),
                                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      for (int s = 0; s < 8; ++s) {
        if (j0 == b0 / 8) {
          for (int i = 0; i < 8; ++i) fetch(8 * s + i);
        }
        __m256i v[8];
        const uint8_t* const row = plan.codes + (k + 8 * s) * S + 4 * j0;
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
          const auto* p = reinterpret_cast<const int*>(row + i * S);
          v[i] = jw == 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))
                         : _mm256_maskload_epi32(p, mask);
        }
        TransposeNibbles8x8(v);
#pragma GCC unroll 8
        for (int t = 0; t < 8; ++t) runs[t][s] = v[t];
      }
      for (int t = 0; t < 8; ++t) {
        __m256 v[8];
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) v[s] = _mm256_castsi256_ps(runs[t][s]);
        Transpose8x8(v);
        for (int64_t j = 0; j < jw; ++j) {
          emit(8 * (j0 + j) + kRows.of_nibble[t], _mm256_castps_si256(v[j]));
        }
        strip();
      }
    }
  }
};

// The part of a tile [r0, r1) x [c0, c1) of GPTQ's or AWQ's columns that
// CodeTiles takes: the runs' whole steps of rows [ra, rb) (the run
// source's Begin / End) by the whole kCodeTileColumns steps [ka, kb).
struct CodeTileRange {
  bool gptq;
  int64_t ra, rb, ka, kb;
};
HWY_INLINE CodeTileRange CodeTileRangeOf(const Plan& plan, int64_t r0, int64_t r1, int64_t c0,
                                         int64_t c1) {
  const bool gptq = plan.layout == Layout::kGptqColumns;
  return {gptq, gptq ? GptqCodeRuns::Begin(r0) : AwqCodeRuns::Begin(r0),
          gptq ? GptqCodeRuns::End(r0, r1) : AwqCodeRuns::End(r0, r1),
          (c0 + kCodeTileColumns - 1) / kCodeTileColumns * kCodeTileColumns,
          c1 / kCodeTileColumns * kCodeTileColumns};
}

// Whether CodeTiles takes part of this tile: GPTQ's or AWQ's columns over
// the [N, K] view without a group map, 16-bit outputs, zero points none or
// integer, groups a multiple of kCodeTileColumns (or one scale per row),
// at least 8 rows and one whole step of columns (`range`: CodeTileRangeOf
// the tile).
HWY_INLINE bool CodeTilesApply(const Plan& plan, const CodeTileRange& range) {
  if (plan.layout != Layout::kGptqColumns && plan.layout != Layout::kAwqColumns) return false;
  return plan.axis_group == nullptr && plan.inner == 1 && OutBytes(plan.out) == 2 &&
         (plan.zp_kind == ZeroPointKind::kNone || plan.zp_kind == ZeroPointKind::kInteger) &&
         (plan.s_axis == 0 || plan.group % kCodeTileColumns == 0) && range.rb - range.ra >= 8 &&
         range.kb > range.ka;
}

// A row's 64 codes (the 32 bytes of `codes`, dense nibbles) through the
// tables lo / hi (ShuffleTables) to 64 outputs at dst.
HWY_INLINE void CodeTileRow(__m256i codes, __m256i lo, __m256i hi, uint16_t* dst) {
  __m256i* p = reinterpret_cast<__m256i*>(dst);
  __m256i a, b;
  DenseNibbleLookup32<false>(_mm256_permute4x64_epi64(codes, 0x44), lo, hi, &a, &b);
  _mm256_storeu_si256(p, a);
  _mm256_storeu_si256(p + 1, b);
  DenseNibbleLookup32<false>(_mm256_permute4x64_epi64(codes, 0xEE), lo, hi, &a, &b);
  _mm256_storeu_si256(p + 2, a);
  _mm256_storeu_si256(p + 3, b);
}

// Bytes per staged row of CodeTiles<Runs> (not a power of two), and of
// its two stages.
template <class Runs>
constexpr int64_t CodeTilePitch() {
  return 2 * Runs::kChunk + 64;
}
template <class Runs>
constexpr size_t CodeTileStageBytes() {
  return static_cast<size_t>(2 * Runs::kBand * CodeTilePitch<Runs>());
}

// Rows [r0, r1) (Runs' Begin / End of a tile's rows), columns [c0, c1)
// (multiples of kCodeTileColumns) of the output at `out` (element (r0,
// c0)), where CodeTilesApply. `stages`: CodeTileStageBytes<Runs>() bytes,
// 64-byte aligned (KernelScratch: the chunk being computed and the chunk
// before being written out). Stack: the tables (kBand x 64 bytes).
template <class Runs, ZeroPointKind kZp, OutType kOut>
HWY_NOINLINE void CodeTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            char* out, int64_t ld, uint8_t* stages) {
  static_assert(OutDesc<kOut>::kBytes == 2, "16-bit outputs");
  using Kernel = RowKernel<DenseNibbles, CodeKind::kU4, kZp, kOut>;
  using VU16 = typename Kernel::VU16;
  constexpr int64_t kStep = kCodeTileColumns, kBand = Runs::kBand, kChunk = Runs::kChunk;
  constexpr int64_t kPitch = CodeTilePitch<Runs>();
  constexpr int64_t kPerRow = Runs::kColumnsPerWordRow, kPerWord = Runs::kRowsPerWord;
  constexpr int64_t kAhead = Runs::kAheadSteps * kStep / kPerRow;  // word rows
  uint8_t* const stage[2] = {stages, stages + kBand * kPitch};
  __m256i lo[kBand], hi[kBand];  // each band row's tables
  const KernelTag df;
  const hn::RebindToSigned<KernelTag> di;
  const int64_t S = plan.word_stride;
  const RowJob job{};  // (the tables' arithmetic reads none of it)
  const Kernel kernel(plan, job);
  // Non-temporal where every row's runs start 32-byte aligned.
  const bool stream =
      plan.nontemporal && reinterpret_cast<uintptr_t>(out) % 32 == 0 && (2 * ld) % 32 == 0;
  const uintptr_t codes = reinterpret_cast<uintptr_t>(plan.codes);
  const int64_t w_end = c1 / kPerRow, words = (c1 - c0) / kPerRow;
  PendingRows<uint8_t> pending;
  auto write_rows = [&](int64_t upto) HWY_ATTR {
    pending.WriteUpTo(upto, [&](int64_t n, const uint8_t* src) HWY_ATTR {
      char* dst = out + 2 * ((n - r0) * ld + (pending.k0 - c0));
      for (int64_t e = 0; e < 2 * (pending.k1 - pending.k0); e += 32) {
        const __m256i x = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + e));
        auto* d = reinterpret_cast<__m256i*>(dst + e);
        if (stream) {
          _mm256_stream_si256(d, x);
        } else {
          _mm256_storeu_si256(d, x);
        }
      }
    });
  };
  int buffer = 0;
  for (int64_t b0 = r0; b0 < r1; b0 += kBand) {
    const int64_t b1 = std::min(r1, b0 + kBand);  // (a multiple of 8 rows)
    int64_t g_cur = -1;
    for (int64_t kc = c0; kc < c1; kc += kChunk) {
      const int64_t kd = std::min(c1, kc + kChunk);
      uint8_t* const st = stage[buffer];
      // The chunk before's rows are written out among this chunk's: one
      // per `steps` rows computed, after each 8 (a band's rows every
      // step; not inside the 8: the branch made GCC spill the 8 x 8
      // transpose and the constants), so
      // that the streamed stores overlap the arithmetic (with a step's
      // share of them at once, perf put AWQ's time from memory in the
      // stores: 2.4 G el/s float16 against 4.6 in cache; spread, 1.08x).
      const int64_t steps = (kd - kc) / kStep;
      int64_t owed = 0;
      for (int64_t k = kc; k < kd; k += kStep) {
        const int64_t g = plan.s_axis == 0 ? 0 : k / plan.group;
        if (g != g_cur) {  // the band's tables of group g
          g_cur = g;
          for (int64_t n = b0; n < b1; ++n) {
            const int64_t i = n * plan.s_outer + g * plan.s_axis;
            const auto z =
                hn::Set(di, kZp == ZeroPointKind::kInteger ? plan.zp_int[i] : plan.code_offset);
            VU16 l, u;
            kernel.ShuffleTables(hn::Set(df, plan.scale[i]), z, hn::Zero(df), &l, &u);
            lo[n - b0] = l.raw;
            hi[n - b0] = u.raw;
          }
        }
        // Word row `ahead` + i (past the band's last: the next band's
        // first) into L2, the band's lines of it.
        const int64_t ahead = k / kPerRow + kAhead;
        auto fetch = [&](int64_t i) HWY_ATTR {
          const int64_t a = ahead + i;
          const int64_t fn = a < w_end ? b0 : b1, fw = a < w_end ? a : a - words;
          if (fn >= r1) return;
          const int64_t rows = std::min(r1, fn + kBand) - fn;
          const uintptr_t at = codes + static_cast<uintptr_t>(fw * S + 4 * fn / kPerWord);
          for (uintptr_t l = at / 64 * 64; l < at + static_cast<uintptr_t>(4 * rows / kPerWord);
               l += 64) {
            PrefetchL2(l);
          }
        };
        Runs::Step(
            plan, k, b0, b1,
            [&](int64_t n, __m256i run) HWY_ATTR {
              CodeTileRow(run, lo[n - b0], hi[n - b0],
                          reinterpret_cast<uint16_t*>(st + (n - b0) * kPitch + 2 * (k - kc)));
            },
            [&]() HWY_ATTR {  // a row of the chunk before every `steps` rows computed
              for (owed += 8; owed >= steps; owed -= steps) write_rows(pending.next + 1);
            },
            fetch);
      }
      write_rows(kBand);  // (the rest, after a short chunk)
      pending = PendingRows<uint8_t>{st, kPitch, b0, b1, kc, kd, 0};
      buffer ^= 1;
    }
  }
  write_rows(kBand);
  if (stream) hwy::FlushStream();
}
#endif  // HWY_TARGET == HWY_AVX2

#endif  // HWY_TARGET > HWY_AVX3

#endif  // HWY_TARGET != HWY_SCALAR

// DequantizeColumnFamilySimd's paths other than WordTiles.
void ColumnFamilyTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                       int64_t ld) {
#if HWY_TARGET <= HWY_AVX3
  if (plan.layout == Layout::kGptqColumns && plan.axis_group != nullptr && plan.inner == 1) {
    return GroupMapColumns(plan, r0, r1, c0, c1, out, ld);
  }
#endif
#if HWY_TARGET > HWY_AVX3 && HWY_TARGET != HWY_SCALAR
  if (StagedColumnsApply(plan, c0, c1) &&
      (plan.zp_kind == ZeroPointKind::kNone || plan.zp_kind == ZeroPointKind::kInteger)) {
    return WithZpNoneOrIntegerOut(plan, [&](auto zp, auto ot) HWY_ATTR {
      StagedColumns<decltype(zp)::value, decltype(ot)::value>(plan, r0, r1, c0, c1,
                                                              static_cast<char*>(out), ld);
    });
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

void DequantizeColumnFamilySimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                void* out, int64_t ld) {
#if HWY_TARGET == HWY_AVX2
  const CodeTileRange range = CodeTileRangeOf(plan, r0, r1, c0, c1);
  uint8_t* const stages = CodeTilesApply(plan, range)
                              ? KernelScratch(range.gptq ? CodeTileStageBytes<GptqCodeRuns>()
                                                         : CodeTileStageBytes<AwqCodeRuns>())
                              : nullptr;
  if (stages != nullptr) {
    // The whole steps of the runs' rows, then the rest around them.
    // (Copies, not structured bindings: C++17 lambdas cannot capture those.)
    const bool gptq = range.gptq;
    const int64_t ra = range.ra, rb = range.rb, ka = range.ka, kb = range.kb;
    char* const y = static_cast<char*>(out);
    char* const ya = y + (ra - r0) * ld * 2;  // row ra
    WithZpNoneOrIntegerOut(plan, [&](auto zp, auto ot) HWY_ATTR {
      constexpr ZeroPointKind kZp = decltype(zp)::value;
      constexpr OutType kOut = decltype(ot)::value;
      if constexpr (OutDesc<kOut>::kBytes == 2) {
        if (gptq) {
          CodeTiles<GptqCodeRuns, kZp, kOut>(plan, ra, rb, ka, kb, ya + (ka - c0) * 2, ld, stages);
        } else {
          CodeTiles<AwqCodeRuns, kZp, kOut>(plan, ra, rb, ka, kb, ya + (ka - c0) * 2, ld, stages);
        }
      }
    });
    if (r0 < ra) ColumnFamilyTiles(plan, r0, ra, c0, c1, y, ld);
    if (c0 < ka) ColumnFamilyTiles(plan, ra, rb, c0, ka, ya, ld);
    if (kb < c1) ColumnFamilyTiles(plan, ra, rb, kb, c1, ya + (kb - c0) * 2, ld);
    if (rb < r1) ColumnFamilyTiles(plan, rb, r1, c0, c1, y + (rb - r0) * ld * 2, ld);
    return;
  }
  if (const int64_t groups = WordTileGroups(plan, r0, r1, c0, c1); groups > 0) {
    // The whole words of 8-row strips, then the rest around them (rows:
    // by the nibble family's row kernel).
    const int64_t rm = r0 + (r1 - r0) / 8 * 8, ka = (c0 + 7) / 8 * 8, kb = c1 / 8 * 8;
    char* const y = static_cast<char*>(out);
    const int64_t eb = OutBytes(plan.out);
    const bool rows = plan.layout == Layout::kDense;
    WithZpNoneOrIntegerOut(plan, [&](auto zp, auto ot) HWY_ATTR {
      if (rows) {
        WordTiles<true, decltype(zp)::value, decltype(ot)::value>(plan, r0, r1, c0, c1, groups, y,
                                                                  ld);
      } else {
        WordTiles<false, decltype(zp)::value, decltype(ot)::value>(plan, r0, r1, c0, c1, groups, y,
                                                                   ld);
      }
    });
    const auto rest = rows ? &kernels_internal::DequantizeNibbleFamily : &ColumnFamilyTiles;
    if (c0 < ka) rest(plan, r0, rm, c0, ka, y, ld);
    if (kb < c1) rest(plan, r0, rm, kb, c1, y + (kb - c0) * eb, ld);
    if (rm < r1) rest(plan, rm, r1, c0, c1, y + (rm - r0) * ld * eb, ld);
    return;
  }
#endif
  // (Dense rows: routed here for WordTiles; elsewhere the nibble family's.)
  if (plan.layout == Layout::kDense) {
    return kernels_internal::DequantizeNibbleFamily(plan, r0, r1, c0, c1, out, ld);
  }
  ColumnFamilyTiles(plan, r0, r1, c0, c1, out, ld);
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
