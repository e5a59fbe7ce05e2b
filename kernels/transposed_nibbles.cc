// DequantizeTransposedPow2 (kernels/dequantize.h): dense 4-bit codes
// written transposed, every scale of the tile a power of two (gpt-oss
// MXFP4's e8m0 scales): each value's bits are its code's value in the
// output type with the scale's exponent added. Highway dynamic dispatch;
// AVX-512 targets, and AVX2 for 16-bit outputs (the others write nothing
// and return 0).
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/numeric.h"
#include "kernels/dequantize.h"
#include "kernels/out_types.h"
#include "kernels/reference.h"
#include "kernels/transpose.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/transposed_nibbles.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
namespace {

// The plan's 16 code values (zero point kNone: Plan's "integer codes, no
// zero point" and "float4 / table codes"), or false for any other plan.
bool CodeValues(const Plan& p, float v[16]) {
  if (p.zp_kind != ZeroPointKind::kNone || CodeBits(p.code) != 4) return false;
  for (uint32_t c = 0; c < 16; ++c) {
    switch (p.code) {
      case CodeKind::kU4:
        v[c] = static_cast<float>(static_cast<int64_t>(c) - p.code_offset);
        break;
      case CodeKind::kS4:
        v[c] = static_cast<float>(static_cast<int64_t>(c ^ 8u) - 8 - p.code_offset);
        break;
      case CodeKind::kF4E2M1:
        v[c] = FloatCodeTable(CodeKind::kF4E2M1)[c];
        break;
      case CodeKind::kTable4:
        v[c] = p.code_values[c];
        break;
      default:
        return false;
    }
  }
  return true;
}

// The Pow2Table of the plan's codes and output type (MakePow2Table of
// its code values), or false.
bool MakePow2Table(const Plan& p, Pow2Table* t) {
  float v[16];
  return CodeValues(p, v) && nibble::MakePow2Table(v, p.out, t);
}

#if HWY_TARGET <= HWY_AVX3
// Each scale's exponent k (as k << t.shift: T int32_t for float32 outputs,
// int16_t for 16-bit ones) of view rows [r0, r0 + nr) and the groups of
// columns [c0, c0 + nc), to e[(g - c0 / group) * nr + r - r0]; false
// where one is not 2^k with t.k_lo <= k <= t.k_hi. tmp: nr * ng T (ng the
// groups): each row's exponents are made 16 groups a vector from its
// consecutive scales (s_axis 1), then transposed.
template <class T>
bool ScaleExponents(const Plan& p, const Pow2Table& t, int64_t r0, int64_t nr, int64_t c0,
                    int64_t nc, T* e, T* tmp) {
  const int64_t g0 = c0 / p.group, ng = (c0 + nc - 1) / p.group - g0 + 1;
  const __m512i lo = _mm512_set1_epi32(t.k_lo + 127), hi = _mm512_set1_epi32(t.k_hi + 127);
  const bool rows_of_groups = p.s_axis == 1;
  T* const out = rows_of_groups ? tmp : e;
  __mmask16 bad = 0;
  for (int64_t r = 0; r < nr; ++r) {
    const float* const s = p.scale + (r0 + r) * p.s_outer + g0 * p.s_axis;
    for (int64_t g = 0; g < ng; g += 16) {
      const int64_t n = std::min<int64_t>(16, ng - g);
      const __mmask16 live = static_cast<__mmask16>((1u << n) - 1u);
      __m512i u;
      if (rows_of_groups) {
        u = _mm512_maskz_loadu_epi32(live, s + g);
      } else {
        // (Scales s_axis apart: two gathers of 8. Not a copy into a local
        // array, which GCC 12 makes a `rep movsq` where s_axis is 1;
        // tests/kernel_calls_check.py refuses string instructions here.)
        const __m512i step = _mm512_set1_epi64(p.s_axis);
        const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
        const __m512i i0 = _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64(g), lane), step);
        const __m512i i1 =
            _mm512_mullo_epi64(_mm512_add_epi64(_mm512_set1_epi64(g + 8), lane), step);
        const __m256 lo =
            _mm512_mask_i64gather_ps(_mm256_setzero_ps(), static_cast<__mmask8>(live), i0, s, 4);
        const __m256 hi = _mm512_mask_i64gather_ps(_mm256_setzero_ps(),
                                                   static_cast<__mmask8>(live >> 8), i1, s, 4);
        u = _mm512_castps_si512(_mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1));
      }
      // (field with the sign bit: a negative scale is out of range)
      const __m512i field = _mm512_srli_epi32(u, 23);
      bad |= _mm512_mask_test_epi32_mask(live, u, _mm512_set1_epi32(0x7FFFFF)) |
             _mm512_mask_cmplt_epi32_mask(live, field, lo) |
             _mm512_mask_cmpgt_epi32_mask(live, field, hi);
      // (k in range: k << shift fits T)
      const __m512i k = _mm512_sll_epi32(_mm512_sub_epi32(field, _mm512_set1_epi32(127)),
                                         _mm_cvtsi32_si128(t.shift));
      if (rows_of_groups) {
        if constexpr (sizeof(T) == 4) {
          _mm512_mask_storeu_epi32(out + r * ng + g, live, k);
        } else {
          _mm256_mask_storeu_epi16(out + r * ng + g, live, _mm512_cvtepi32_epi16(k));
        }
      } else {
        alignas(64) int32_t kv[16];
        _mm512_store_si512(kv, k);
        for (int64_t i = 0; i < n; ++i) e[(g + i) * nr + r] = static_cast<T>(kv[i]);
      }
    }
  }
  if (bad != 0) return false;
  if (rows_of_groups) {
    TransposeTile(reinterpret_cast<const uint8_t*>(tmp), static_cast<size_t>(ng) * sizeof(T), nr,
                  ng, sizeof(T), reinterpret_cast<uint8_t*>(e), static_cast<size_t>(nr) * sizeof(T),
                  false);
  }
  return true;
}
#else
// AVX2: ScaleExponents as on AVX-512 above, 8 groups a vector.
template <class T>
bool ScaleExponents(const Plan& p, const Pow2Table& t, int64_t r0, int64_t nr, int64_t c0,
                    int64_t nc, T* e, T* tmp) {
  const int64_t g0 = c0 / p.group, ng = (c0 + nc - 1) / p.group - g0 + 1;
  // (field in [k_lo + 127, k_hi + 127]: signed compares against one past
  // either end; the sign bit in the field puts a negative scale above)
  const __m256i lo = _mm256_set1_epi32(t.k_lo + 126), hi = _mm256_set1_epi32(t.k_hi + 128);
  const __m256i mant = _mm256_set1_epi32(0x7FFFFF), zero = _mm256_setzero_si256();
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m128i shift = _mm_cvtsi32_si128(t.shift);
  const bool rows_of_groups = p.s_axis == 1;
  T* const out = rows_of_groups ? tmp : e;
  __m256i bad = zero;
  for (int64_t r = 0; r < nr; ++r) {
    const float* const s = p.scale + (r0 + r) * p.s_outer + g0 * p.s_axis;
    for (int64_t g = 0; g < ng; g += 8) {
      const int64_t n = std::min<int64_t>(8, ng - g);
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(n)), lane);
      __m256i u;
      if (rows_of_groups) {
        u = n == 8 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + g))
                   : _mm256_maskload_epi32(reinterpret_cast<const int*>(s + g), live);
      } else {
        alignas(32) float v[8] = {};
        for (int64_t i = 0; i < n; ++i) v[i] = s[(g + i) * p.s_axis];
        u = _mm256_load_si256(reinterpret_cast<const __m256i*>(v));
      }
      const __m256i field = _mm256_srli_epi32(u, 23);
      const __m256i in_range =
          _mm256_and_si256(_mm256_cmpgt_epi32(field, lo), _mm256_cmpgt_epi32(hi, field));
      const __m256i exact = _mm256_cmpeq_epi32(_mm256_and_si256(u, mant), zero);
      bad = _mm256_or_si256(bad, _mm256_andnot_si256(_mm256_and_si256(in_range, exact), live));
      // (k in range: k << shift fits T)
      alignas(32) int32_t kv[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(kv),
                         _mm256_sll_epi32(_mm256_sub_epi32(field, _mm256_set1_epi32(127)), shift));
      T* const to = rows_of_groups ? out + r * ng + g : e + g * nr + r;
      const int64_t step = rows_of_groups ? 1 : nr;
      for (int64_t i = 0; i < n; ++i) to[i * step] = static_cast<T>(kv[i]);
    }
  }
  if (!_mm256_testz_si256(bad, bad)) return false;
  if (rows_of_groups) {
    TransposeTile(reinterpret_cast<const uint8_t*>(tmp), static_cast<size_t>(ng) * sizeof(T), nr,
                  ng, sizeof(T), reinterpret_cast<uint8_t*>(e), static_cast<size_t>(nr) * sizeof(T),
                  false);
  }
  return true;
}
#endif  // HWY_TARGET <= HWY_AVX3

// A tile's codes and scales as both kernels read them: view row r0 + r's
// codes from column c0 at src + r * pitch, its scales of groups g0 ..
// g0 + ng - 1 at p.scale + (r0 + r) * s_outer + g * s_axis.
struct TileSource {
  TileSource(const Plan& plan, int64_t r0_, int64_t c0_, int64_t nc)
      : p(plan),
        r0(r0_),
        c0(c0_),
        g0(c0_ / plan.group),
        ng((c0_ + nc - 1) / plan.group - c0_ / plan.group + 1),
        view_rows(plan.rows() - r0_),
        pitch(static_cast<size_t>(plan.axis / 2)),
        span(nc / 2),
        src(plan.codes + (r0_ * plan.axis + c0_) / 2) {}
  // Where the exponents of tile column c's group start in a panel's
  // ScaleExponents grid of np rows.
  int64_t ExponentsOf(int64_t c, int64_t np) const { return ((c0 + c) / p.group - g0) * np; }
  // Fetches into L2 share `step` of `steps` of the code lines of rows
  // [a, b) (those of the view: past the tile too, the caller's next one),
  // in address order: each row's span of the tile's columns, row after
  // row, one sequential span where the tile is whole rows (the caller's
  // panels, op/dequantizer.cc WriteTransposedBatch). The same lines
  // fetched a column of words at a time across the rows left the 16-bit
  // outputs 1.26-1.32x slower on an Intel Xeon guest (bench/HISTORY.md,
  // "gpt-oss in whole view rows"). Only a hint (never faults).
  void FetchRows(int64_t a, int64_t b, int64_t step, int64_t steps) const {
    const int64_t n = std::min(view_rows, b) - a;
    if (n <= 0) return;
    // (lines a row's span can touch: its last byte's line as the last)
    const int64_t per_row = (span + 63) / 64 + 1;
    const int64_t lo = n * per_row * step / steps, hi = n * per_row * (step + 1) / steps;
    // (line l: row a + l / per_row, line l % per_row of its span; stepped
    // without a division per line, which cost as much as the kernel's
    // arithmetic)
    int64_t r = a + lo / per_row, i = lo % per_row;
    for (int64_t l = lo; l < hi; ++l) {
      const int64_t o = std::min<int64_t>(64 * i, span - 1);
      PrefetchL2(reinterpret_cast<uintptr_t>(src + static_cast<size_t>(r) * pitch +
                                             static_cast<size_t>(o)));
      if (++i == per_row) {
        i = 0;
        ++r;
      }
    }
  }
  // Fetches into L2 the first and last of the scales of rows [a, b).
  void FetchScales(int64_t a, int64_t b) const {
    for (int64_t r = a; r < std::min(view_rows, b); ++r) {
      const float* const sr = p.scale + (r0 + r) * p.s_outer + g0 * p.s_axis;
      PrefetchL2(reinterpret_cast<uintptr_t>(sr));
      PrefetchL2(reinterpret_cast<uintptr_t>(sr + (ng - 1) * p.s_axis));
    }
  }
  const Plan& p;
  int64_t r0, c0, g0, ng, view_rows;
  size_t pitch;
  int64_t span;  // code bytes of a row in the tile
  const uint8_t* src;
};

}  // namespace
#endif  // HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2

#if HWY_TARGET <= HWY_AVX3
int64_t DequantizeTransposedPow2Simd(const Plan& p, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                                     int32_t* scratch, uint8_t* dst, int64_t ld, bool stream) {
  Pow2Table t;
  const bool wide = p.out == OutType::kF32;
  const int64_t block = wide ? 16 : 32;  // view rows per output store
  const int64_t rows = nr / block * block;
  if (rows == 0 || p.group % 8 != 0 || !MakePow2Table(p, &t)) return 0;
  // (scratch: a panel's exponents, then ScaleExponents' rows)
  const TileSource in(p, r0, c0, nc);
  const int64_t ng = in.ng, g0 = in.g0;
  const size_t pitch = in.pitch;
  const uint8_t* const src = in.src;
  int32_t* const e32 = scratch;
  int16_t* const e16 = reinterpret_cast<int16_t*>(scratch);
  const int64_t eb = wide ? 4 : 2;
  stream = stream && reinterpret_cast<uintptr_t>(dst) % 64 == 0 && (ld * eb) % 64 == 0;
  auto put = [&](uint8_t* at, __m512i v) HWY_ATTR {
    if (stream) {
      _mm512_stream_si512(reinterpret_cast<__m512i*>(at), v);
    } else {
      _mm512_storeu_si512(at, v);
    }
  };
  // 16 consecutive words (128 columns) of view rows j .. j + 15 at word w
  // (fewer at the tile's right edge: the rest zero) transposed: r[i] holds
  // word w + i of the 16 rows.
  auto words = [&](int64_t j, int64_t w, __mmask16 live, __m512 r[16]) HWY_ATTR {
    for (int i = 0; i < 16; ++i) {
      r[i] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(
          live, src + static_cast<size_t>(j + i) * pitch + static_cast<size_t>(4 * w)));
    }
    Transpose16x16(r);
  };
  const __m512i table = _mm512_loadu_si512(t.bits);  // (float32 entries)
  alignas(64) uint16_t half[32];
  for (int i = 0; i < 32; ++i) half[i] = static_cast<uint16_t>(t.bits[i % 16]);
  const __m512i table16 = _mm512_load_si512(half);  // (entries 16-31: 0-15 again)
  alignas(64) static constexpr struct Halves {
    uint16_t lo[32], hi[32];  // the words' low / high 16 bits, rows 0-15 then 16-31
    constexpr Halves() : lo(), hi() {
      for (int i = 0; i < 32; ++i) {
        lo[i] = static_cast<uint16_t>(i < 16 ? 2 * i : 32 + 2 * (i - 16));
        hi[i] = static_cast<uint16_t>(lo[i] + 1);
      }
    }
  } kHalves{};
  const __m512i lo_idx = _mm512_load_si512(kHalves.lo), hi_idx = _mm512_load_si512(kHalves.hi);
  // Blocks of kPanel view rows x 128 columns (16 words a row), in order
  // along the view rows' words (w0 inner: each row's codes read in
  // order), the next panel's rows fetched meanwhile: the rows' words
  // transposed into `staged` (8 KiB, L1), then each output row's run of
  // kPanel values written as consecutive stores (one 64-byte store in
  // each of 128 output rows per 32 view rows instead: about 0.8x one
  // thread, float16; the panel's rows first copied into L1 in row order:
  // 0.9-1.0x).
  constexpr int64_t kPanel = 128;
  constexpr int kSubs = 8;  // blocks of 16 view rows per panel
  alignas(64) __m512i staged[16][kSubs];
  for (int64_t j0 = 0; j0 < rows; j0 += kPanel) {
    const int64_t np = std::min(kPanel, rows - j0);  // (a multiple of block)
    // The panel's exponents; where one is out of range, the rows before
    // it are the ones written.
    if (wide ? !ScaleExponents(p, t, r0 + j0, np, c0, nc, e32, e32 + ng * np)
             : !ScaleExponents(p, t, r0 + j0, np, c0, nc, e16, e16 + ng * np)) {
      return j0;
    }
    for (int64_t w0 = 0; w0 < nc / 8; w0 += 16) {
      const int64_t nw = std::min<int64_t>(16, nc / 8 - w0);
      const __mmask16 live = static_cast<__mmask16>((1u << nw) - 1u);
      // The next panel's codes (FetchRows: a share per word written, over
      // the panel's steps of 16 words) and, at the first words, its
      // scales (kPanel / 16 rows per word written): fetched into L2.
      const int64_t jn = j0 + kPanel;
      const int64_t steps = (nc / 8 + 15) / 16 * 16;
      auto fetch = [&](int64_t i) HWY_ATTR {
        constexpr int64_t kPer = kPanel / 16;
        in.FetchRows(jn, jn + kPanel, w0 + i, steps);
        if (w0 == 0) in.FetchScales(jn + kPer * i, jn + kPer * (i + 1));
      };
      for (int64_t sb = 0; sb < np / 16; ++sb) {
        __m512 a[16];
        words(j0 + 16 * sb, w0, live, a);
        for (int i = 0; i < 16; ++i) staged[i][sb] = _mm512_castps_si512(a[i]);
      }
      for (int64_t i = 0; i < 16; ++i) {
        fetch(i);
        if (i >= nw) continue;
        const int64_t c = 8 * (w0 + i);            // the word's first column
        const int64_t at = in.ExponentsOf(c, np);  // its exponents
        uint8_t* const out = dst + static_cast<size_t>((c * ld + j0) * eb);
        const size_t row = static_cast<size_t>(ld * eb);
        // (The exponents are read where they lie, never copied into a
        // local array: GCC 12 makes such a copy a `rep movsq`, whose
        // stores the loads after it cannot read from the store buffer, so
        // they wait for every non-temporal store before it. Measured:
        // float32 1.5x slower with the copy on an Intel Xeon guest;
        // bench/HISTORY.md, "No local copies between the streamed
        // stores".)
        if (wide) {
          for (int f = 0; f < 8; ++f) {
            for (int64_t sb = 0; sb < np / 16; ++sb) {
              // (vpermd reads bits 0-3 of each lane: field f after the shift)
              const __m512i x =
                  f == 0 ? staged[i][sb]
                         : _mm512_srli_epi32(staged[i][sb], static_cast<unsigned>(4 * f));
              const __m512i v = _mm512_permutexvar_epi32(x, table);
              const __mmask16 nonzero = _mm512_test_epi32_mask(v, _mm512_set1_epi32(0x7FFFFFFF));
              const __m512i k = _mm512_loadu_si512(e32 + at + 16 * sb);
              put(out + f * row + 64 * sb, _mm512_mask_add_epi32(v, nonzero, v, k));
            }
          }
        } else {
          // Rows 32 q .. 32 q + 31: the words' low (fields 0-3) and high
          // (4-7) halves.
          __m512i half_words[kSubs / 2][2];
          for (int64_t q = 0; q < np / 32; ++q) {
            half_words[q][0] =
                _mm512_permutex2var_epi16(staged[i][2 * q], lo_idx, staged[i][2 * q + 1]);
            half_words[q][1] =
                _mm512_permutex2var_epi16(staged[i][2 * q], hi_idx, staged[i][2 * q + 1]);
          }
          for (int f = 0; f < 8; ++f) {
            for (int64_t q = 0; q < np / 32; ++q) {
              // (vpermw reads bits 0-4 of each lane: field f and the next
              // field's bit 0, which table16's second half ignores)
              const __m512i x = f % 4 == 0 ? half_words[q][f / 4]
                                           : _mm512_srli_epi16(half_words[q][f / 4],
                                                               static_cast<unsigned>(4 * (f % 4)));
              const __m512i v = _mm512_permutexvar_epi16(x, table16);
              const __mmask32 nonzero = _mm512_test_epi16_mask(v, _mm512_set1_epi16(0x7FFF));
              const __m512i k = _mm512_loadu_si512(e16 + at + 32 * q);
              put(out + f * row + 64 * q, _mm512_mask_add_epi16(v, nonzero, v, k));
            }
          }
        }
      }
    }
  }
  return rows;
}
#elif HWY_TARGET == HWY_AVX2
// AVX2, 16-bit outputs: the same values in blocks of 16 view rows (per
// output row one 32-byte store), panels of kPanel view rows by 8 words
// (64 columns). Each block's 16 rows of words are loaded and transposed
// as two 8 x 8 tiles (Transpose8x8) of rows {0-3, 8-11} and {4-7, 12-15},
// so that byte j of the 16 rows' words, copied to both bytes of 16-bit
// lanes (a byte shuffle of each tile, one 64-bit unpack), lies in row
// order (staged once per block). Field 2j + n (byte j's low nibble for n
// = 0, high for 1) then looks up the output's low and high bytes (two
// byte shuffles, one byte blend) and whether the value is nonzero (a
// third: k << shift added in 16-bit lanes to nonzero values only).
// float32 outputs return 0: through this scheme (two vpermps and a blend
// per 8 values, times 2^k) they measured 0.94x the caller's other path
// on a Zen 3 guest.
int64_t DequantizeTransposedPow2Simd(const Plan& p, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                                     int32_t* scratch, uint8_t* dst, int64_t ld, bool stream) {
  Pow2Table t;
  constexpr int64_t kBlock = 16;  // view rows per block
  const int64_t rows = nr / kBlock * kBlock;
  if (p.out == OutType::kF32 || rows == 0 || p.group % 8 != 0 || !MakePow2Table(p, &t)) return 0;
  // (scratch: a panel's exponents, then ScaleExponents' rows)
  const TileSource in(p, r0, c0, nc);
  const int64_t ng = in.ng, g0 = in.g0;
  int16_t* const e16 = reinterpret_cast<int16_t*>(scratch);
  constexpr int64_t kOutBytes = 2;
  stream = stream && reinterpret_cast<uintptr_t>(dst) % 64 == 0 && (ld * kOutBytes) % 64 == 0;
  auto put = [&](uint8_t* at, __m256i v) HWY_ATTR {
    if (stream) {
      _mm256_stream_si256(reinterpret_cast<__m256i*>(at), v);
    } else {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), v);
    }
  };
  // The table's low bytes, high bytes and nonzero flags, in both 128-bit
  // halves.
  alignas(16) uint8_t planes[3][16];
  for (int c = 0; c < 16; ++c) {
    planes[0][c] = static_cast<uint8_t>(t.bits[c]);
    planes[1][c] = static_cast<uint8_t>(t.bits[c] >> 8);
    planes[2][c] = (t.bits[c] & 0x7FFFu) != 0 ? 0xFF : 0;
  }
  auto plane = [&](int i) HWY_ATTR {
    return _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(planes[i])));
  };
  const __m256i tab_lo = plane(0), tab_hi = plane(1), tab_nz = plane(2);
  const __m256i high_bytes = _mm256_set1_epi16(static_cast<int16_t>(0xFF00));
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  // Byte j of each 32-bit lane to both bytes of 16-bit lanes 0-3 of its
  // 128-bit half (the upper 8 bytes zero).
  auto dup = [](int j) HWY_ATTR {
    alignas(32) int8_t c[32];
    for (int h = 0; h < 2; ++h) {
      for (int l = 0; l < 4; ++l)
        c[16 * h + 2 * l] = c[16 * h + 2 * l + 1] = static_cast<int8_t>(4 * l + j);
      for (int z = 8; z < 16; ++z) c[16 * h + z] = -128;
    }
    return _mm256_load_si256(reinterpret_cast<const __m256i*>(c));
  };
  const __m256i dups[4] = {dup(0), dup(1), dup(2), dup(3)};
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  constexpr int64_t kPanel = 128;
  constexpr int kSubs = kPanel / kBlock;
  constexpr int64_t kWords = 8;  // words per step
  // staged[i][sb][j]: byte j of word w0 + i of block sb's rows (as above).
  alignas(32) __m256i staged[kWords][kSubs][4];
  for (int64_t j0 = 0; j0 < rows; j0 += kPanel) {
    const int64_t np = std::min(kPanel, rows - j0);  // (a multiple of kBlock)
    // The panel's exponents; where one is out of range, the rows before
    // it are the ones written.
    if (!ScaleExponents(p, t, r0 + j0, np, c0, nc, e16, e16 + ng * np)) return j0;
    for (int64_t w0 = 0; w0 < nc / 8; w0 += kWords) {
      const int64_t nw = std::min<int64_t>(kWords, nc / 8 - w0);
      const __m256i live = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int32_t>(nw)), lane);
      // The next panel's codes and scales fetched as on AVX-512, over
      // the panel's steps of kWords words.
      const int64_t jn = j0 + kPanel;
      const int64_t steps = (nc / 8 + kWords - 1) / kWords * kWords;
      auto fetch = [&](int64_t i) HWY_ATTR {
        constexpr int64_t kPer = kPanel / kWords;
        in.FetchRows(jn, jn + kPanel, w0 + i, steps);
        if (w0 == 0) in.FetchScales(jn + kPer * i, jn + kPer * (i + 1));
      };
      for (int64_t sb = 0; sb < np / kBlock; ++sb) {
        const uint8_t* const at =
            in.src + static_cast<size_t>(j0 + kBlock * sb) * in.pitch + static_cast<size_t>(4 * w0);
        auto words = [&](int64_t q) HWY_ATTR {
          const auto* const w =
              reinterpret_cast<const int*>(at + static_cast<size_t>(q) * in.pitch);
          return _mm256_castsi256_ps(nw == kWords
                                         ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w))
                                         : _mm256_maskload_epi32(w, live));
        };
        __m256 a[8], b[8];
        for (int q = 0; q < 8; ++q) {
          a[q] = words(q + (q & 4));      // rows 0-3, 8-11
          b[q] = words(q + (q & 4) + 4);  // rows 4-7, 12-15
        }
        Transpose8x8(a);
        Transpose8x8(b);
        for (int64_t i = 0; i < kWords; ++i) {
          const __m256i wa = _mm256_castps_si256(a[i]), wb = _mm256_castps_si256(b[i]);
          for (int j = 0; j < 4; ++j) {
            staged[i][sb][j] = _mm256_unpacklo_epi64(_mm256_shuffle_epi8(wa, dups[j]),
                                                     _mm256_shuffle_epi8(wb, dups[j]));
          }
        }
      }
      for (int64_t i = 0; i < kWords; ++i) {
        fetch(i);
        if (i >= nw) continue;
        const int64_t c = 8 * (w0 + i);            // the word's first column
        const int64_t at = in.ExponentsOf(c, np);  // its exponents
        uint8_t* const out = dst + static_cast<size_t>((c * ld + j0) * kOutBytes);
        const size_t row = static_cast<size_t>(ld * kOutBytes);
        for (int f = 0; f < 8; ++f) {
          for (int64_t sb = 0; sb < np / kBlock; ++sb) {
            const __m256i d = staged[i][sb][f / 2];
            const __m256i idx = _mm256_and_si256(f % 2 == 0 ? d : _mm256_srli_epi16(d, 4), nibble);
            const __m256i v = _mm256_blendv_epi8(_mm256_shuffle_epi8(tab_lo, idx),
                                                 _mm256_shuffle_epi8(tab_hi, idx), high_bytes);
            const __m256i k = _mm256_and_si256(
                _mm256_shuffle_epi8(tab_nz, idx),
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(e16 + at + kBlock * sb)));
            put(out + static_cast<size_t>(f) * row + static_cast<size_t>(32 * sb),
                _mm256_add_epi16(v, k));
          }
        }
      }
    }
  }
  return rows;
}
#else
int64_t DequantizeTransposedPow2Simd(const Plan&, int64_t, int64_t, int64_t, int64_t, int32_t*,
                                     uint8_t*, int64_t, bool) {
  return 0;
}
#endif  // HWY_TARGET

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
HWY_EXPORT(DequantizeTransposedPow2Simd);
int64_t DequantizeTransposedPow2(const Plan& plan, int64_t r0, int64_t nr, int64_t c0, int64_t nc,
                                 int32_t* scratch, uint8_t* dst, int64_t ld, bool stream) {
  return HWY_DYNAMIC_DISPATCH(DequantizeTransposedPow2Simd)(plan, r0, nr, c0, nc, scratch, dst, ld,
                                                            stream);
}
}  // namespace nibble
#endif  // HWY_ONCE
