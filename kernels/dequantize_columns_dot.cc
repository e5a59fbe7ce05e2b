// The fused dot of the checkpoint column layouts (Plan::dot without a
// tile, kernels/dequantize_families.h ColumnsDot): GPTQ's and AWQ's [N, K]
// words, compressed-tensors' act-order rows and dense 4-bit [K, N] decoded
// by columns of 16 rows for 1-8 rows of X. AVX-512 and AVX2 (one code on
// a strip's 16 rows as one zmm or two ymm; SSE4 declines), Highway dynamic
// dispatch; a translation unit of its own, so that a build on several
// cores compiles it beside the column tiles of
// kernels/dequantize_columns.cc.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_columns_dot.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/dequantize-inl.h"
#include "kernels/scratch.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3_DL && (HWY_TARGETS & HWY_AVX3)
// AVX3_DL runs the AVX3 instantiation where both are compiled: the dot
// uses no AVX3_DL instruction, and its 40 instantiations per target were
// 173 s of one core for the two (Intel guest, Release).
// (Declared with AVX3's target attributes, as the AVX3 pass defines it:
// under this pass's it would be another version of the function.)
}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();
HWY_PUSH_ATTRIBUTES(HWY_TARGET_STR_AVX3)
namespace nibble {
namespace N_AVX3 {
bool ColumnsDotHere(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1);
}  // namespace N_AVX3
}  // namespace nibble
HWY_POP_ATTRIBUTES
HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {
bool ColumnsDotHere(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return N_AVX3::ColumnsDotHere(plan, r0, r1, c0, c1);
}
#elif HWY_TARGET <= HWY_AVX2
// --- A strip's 16 rows in one value ---------------------------------------
// The dot below holds the 16 rows of a strip in an F16 (float32) or I16
// (int32): one zmm on AVX-512, two ymm on AVX2 (rows' lanes 0-7, 8-15).
// The operations are the same on both (the same bits); AVX2 has 16
// registers, so its strips keep their sums in memory (kSumsHeld) and the
// bytes of AWQ / [K, N] decode to lanes in row order (kBytesPermuted).
#if HWY_TARGET <= HWY_AVX3
struct F16 {
  __m512 v;
};
struct I16 {
  __m512i v;
};
// Whether one row of X keeps a strip's 16 partial sums in registers.
constexpr bool kSumsHeld = true;
// Whether ByteCodes's lanes hold the rows in kAwqDotRow's / kDenseDotRow's
// order (else lane l holds row l).
constexpr bool kBytesPermuted = true;
HWY_INLINE __mmask16 FirstLanes(int64_t n) {
  return static_cast<__mmask16>(n >= 16 ? 0xFFFFu : (1u << n) - 1u);
}
HWY_INLINE F16 LoadF(const float* p) { return {_mm512_loadu_ps(p)}; }
// Lanes [0, n) from p (n >= 1), the rest 0; no byte past them is read.
HWY_INLINE F16 LoadF(const float* p, int64_t n) {
  return {_mm512_maskz_loadu_ps(FirstLanes(n), p)};
}
HWY_INLINE void StoreF(float* p, F16 a) { _mm512_storeu_ps(p, a.v); }
// Lanes [0, n) to p.
HWY_INLINE void StoreF(float* p, F16 a, int64_t n) { _mm512_mask_storeu_ps(p, FirstLanes(n), a.v); }
HWY_INLINE I16 LoadI(const void* p) { return {_mm512_loadu_si512(p)}; }
HWY_INLINE I16 LoadI(const void* p, int64_t n) {
  return {_mm512_maskz_loadu_epi32(FirstLanes(n), p)};
}
HWY_INLINE void StoreI(void* p, I16 a) { _mm512_storeu_si512(p, a.v); }
HWY_INLINE F16 SetF(float x) { return {_mm512_set1_ps(x)}; }
HWY_INLINE F16 ZeroF() { return {_mm512_setzero_ps()}; }
HWY_INLINE I16 SetI(int32_t x) { return {_mm512_set1_epi32(x)}; }
HWY_INLINE F16 BitsF(I16 a) { return {_mm512_castsi512_ps(a.v)}; }
HWY_INLINE I16 BitsI(F16 a) { return {_mm512_castps_si512(a.v)}; }
HWY_INLINE F16 MulAdd(F16 a, F16 b, F16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
// float32(z + bias), bias as SetI.
HWY_INLINE F16 Biased(I16 z, I16 bias) {
  return {_mm512_cvtepi32_ps(_mm512_add_epi32(z.v, bias.v))};
}
// (float bits of q - z) * s.
HWY_INLINE F16 CodeValues(I16 q, F16 z, F16 s) {
  return {_mm512_mul_ps(_mm512_sub_ps(_mm512_castsi512_ps(q.v), z.v), s.v)};
}
// ((words >> sh) & 15) ^ magic: one ternary-logic op (0x6A: A & B ^ C)
// after the shift.
HWY_INLINE I16 WordCodes(I16 words, int sh, I16 magic) {
  const __m512i low4 = _mm512_set1_epi32(15);
  return {sh == 0 ? _mm512_ternarylogic_epi32(words.v, low4, magic.v, 0x6A)
          : sh == 28
              ? _mm512_xor_si512(_mm512_srli_epi32(words.v, 28), magic.v)
              : _mm512_ternarylogic_epi32(_mm512_srli_epi32(words.v, static_cast<unsigned>(sh)),
                                          low4, magic.v, 0x6A)};
}
// A strip's 8 bytes at p (two words: nibble order `order` of rows 0-7,
// 8-15) as (code & 15) ^ magic, in kAwqDotRow's / kDenseDotRow's lane
// order: broadcast to every 64-bit lane, lane i shifted right by 4i puts
// nibble i of word 0 in 32-bit lane 2i and of word 1 in lane 2i + 1.
HWY_INLINE I16 ByteCodes(const uint8_t* p, const uint8_t* /*order*/, I16 magic) {
  uint64_t two;
  std::memcpy(&two, p, 8);
  return {
      _mm512_ternarylogic_epi32(_mm512_srlv_epi64(_mm512_set1_epi64(static_cast<long long>(two)),
                                                  _mm512_set_epi64(28, 24, 20, 16, 12, 8, 4, 0)),
                                _mm512_set1_epi32(15), magic.v, 0x6A)};
}
// Lane l of the result = lane idx[l] of a.
HWY_INLINE F16 PermuteLanes(F16 a, const int32_t* idx) {
  return {_mm512_permutexvar_ps(_mm512_load_si512(idx), a.v)};
}
// r[i] becomes what was column i of r.
HWY_INLINE void Transpose16(F16 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; ++i) t[i] = r[i].v;
  Transpose16x16(t);
  for (int i = 0; i < 16; ++i) r[i].v = t[i];
}
// 64 bytes from src to dst: the first n (n >= 1) read, the rest 0.
HWY_INLINE void CopyLine(uint8_t* dst, const uint8_t* src, int64_t n) {
  const __mmask64 m = n >= 64 ? ~__mmask64{0} : (__mmask64{1} << n) - 1u;
  _mm512_storeu_si512(dst, _mm512_maskz_loadu_epi8(m, src));
}
#else  // AVX2
struct F16 {
  __m256 lo, hi;
};
struct I16 {
  __m256i lo, hi;
};
constexpr bool kSumsHeld = false;
constexpr bool kBytesPermuted = false;
// Lanes [0, n) of 8 set (maskload's mask).
HWY_INLINE __m256i FirstLanes8(int64_t n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(std::clamp<int64_t>(n, 0, 8))),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
HWY_INLINE F16 LoadF(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
// (Plain loads where all 16 lanes are read: AMD's masked loads take longer.)
HWY_INLINE F16 LoadF(const float* p, int64_t n) {
  if (n >= 16) return LoadF(p);
  return {_mm256_maskload_ps(p, FirstLanes8(n)), _mm256_maskload_ps(p + 8, FirstLanes8(n - 8))};
}
HWY_INLINE void StoreF(float* p, F16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
HWY_INLINE void StoreF(float* p, F16 a, int64_t n) {
  _mm256_maskstore_ps(p, FirstLanes8(n), a.lo);
  _mm256_maskstore_ps(p + 8, FirstLanes8(n - 8), a.hi);
}
HWY_INLINE I16 LoadI(const void* p) {
  const auto* q = static_cast<const __m256i*>(p);
  return {_mm256_loadu_si256(q), _mm256_loadu_si256(q + 1)};
}
HWY_INLINE I16 LoadI(const void* p, int64_t n) {
  if (n >= 16) return LoadI(p);
  const auto* q = static_cast<const int*>(p);
  return {_mm256_maskload_epi32(q, FirstLanes8(n)),
          _mm256_maskload_epi32(q + 8, FirstLanes8(n - 8))};
}
HWY_INLINE void StoreI(void* p, I16 a) {
  auto* q = static_cast<__m256i*>(p);
  _mm256_storeu_si256(q, a.lo);
  _mm256_storeu_si256(q + 1, a.hi);
}
HWY_INLINE F16 SetF(float x) { return {_mm256_set1_ps(x), _mm256_set1_ps(x)}; }
HWY_INLINE F16 ZeroF() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
HWY_INLINE I16 SetI(int32_t x) { return {_mm256_set1_epi32(x), _mm256_set1_epi32(x)}; }
HWY_INLINE F16 BitsF(I16 a) { return {_mm256_castsi256_ps(a.lo), _mm256_castsi256_ps(a.hi)}; }
HWY_INLINE I16 BitsI(F16 a) { return {_mm256_castps_si256(a.lo), _mm256_castps_si256(a.hi)}; }
HWY_INLINE F16 MulAdd(F16 a, F16 b, F16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
HWY_INLINE F16 Biased(I16 z, I16 bias) {
  return {_mm256_cvtepi32_ps(_mm256_add_epi32(z.lo, bias.lo)),
          _mm256_cvtepi32_ps(_mm256_add_epi32(z.hi, bias.hi))};
}
HWY_INLINE F16 CodeValues(I16 q, F16 z, F16 s) {
  return {_mm256_mul_ps(_mm256_sub_ps(_mm256_castsi256_ps(q.lo), z.lo), s.lo),
          _mm256_mul_ps(_mm256_sub_ps(_mm256_castsi256_ps(q.hi), z.hi), s.hi)};
}
HWY_INLINE __m256i WordCodes8(__m256i w, int sh, __m256i magic) {
  const __m256i shifted = sh == 0 ? w : _mm256_srli_epi32(w, sh);
  return _mm256_xor_si256(sh == 28 ? shifted : _mm256_and_si256(shifted, _mm256_set1_epi32(15)),
                          magic);
}
HWY_INLINE I16 WordCodes(I16 words, int sh, I16 magic) {
  return {WordCodes8(words.lo, sh, magic.lo), WordCodes8(words.hi, sh, magic.hi)};
}
// Row l's nibble order[l % 8] of word l / 8 in lane l: each word broadcast
// and shifted by 4 order[l % 8] per lane.
HWY_INLINE I16 ByteCodes(const uint8_t* p, const uint8_t* order, I16 magic) {
  uint32_t w[2];
  std::memcpy(w, p, 8);
  const __m256i shifts = _mm256_slli_epi32(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(order))), 2);
  const __m256i low4 = _mm256_set1_epi32(15);
  auto half = [&](uint32_t word, __m256i m) HWY_ATTR {
    return _mm256_xor_si256(
        _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts),
                         low4),
        m);
  };
  return {half(w[0], magic.lo), half(w[1], magic.hi)};
}
HWY_INLINE F16 PermuteLanes(F16 a, const int32_t*) { return a; }  // (row order: not called)
// The 8 x 8 transpose of 32-bit lanes: r[i] becomes column i.
HWY_INLINE void Transpose8(__m256 r[8]) {
  __m256 t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
  for (int i = 0; i < 2; ++i) {
    u[4 * i] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm256_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm256_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x20);
    r[4 + i] = _mm256_permute2f128_ps(u[i], u[4 + i], 0x31);
  }
}
HWY_INLINE void Transpose16(F16 r[16]) {
  // Quadrants: rows 0-7 / 8-15 x lanes 0-7 / 8-15, each transposed; the
  // off-diagonal two swap.
  __m256 a[8], b[8], c[8], d[8];
  for (int i = 0; i < 8; ++i) {
    a[i] = r[i].lo;
    b[i] = r[i].hi;
    c[i] = r[8 + i].lo;
    d[i] = r[8 + i].hi;
  }
  Transpose8(a);
  Transpose8(b);
  Transpose8(c);
  Transpose8(d);
  for (int i = 0; i < 8; ++i) {
    r[i] = {a[i], c[i]};
    r[8 + i] = {b[i], d[i]};
  }
}
HWY_INLINE void CopyLine(uint8_t* dst, const uint8_t* src, int64_t n) {
  if (n >= 64) {
    std::memcpy(dst, src, 64);
  } else {
    std::memcpy(dst, src, static_cast<size_t>(n));
    std::memset(dst + n, 0, static_cast<size_t>(64 - n));
  }
}
#endif

// 32-bit words of up to 16 rows transposed: row q < nrows is the n words
// at src + q * stride (1 <= n <= 16; the rest of the row reads as 0, rows
// from nrows on are 0); word j of every row, 16 words, goes to dst + j *
// pitch (bytes).
HWY_INLINE void TransposeWords(const void* src, int64_t stride, int64_t n, int64_t nrows, void* dst,
                               int64_t pitch) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  F16 r[16];
#pragma GCC unroll 16
  for (int q = 0; q < 16; ++q) r[q] = q < nrows ? BitsF(LoadI(s + q * stride, n)) : ZeroF();
  Transpose16(r);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) StoreF(reinterpret_cast<float*>(d + j * pitch), r[j]);
}

// --- The fused dot of the [N, K] columns (Plan::dot, 1-8 rows of X) ------

// AWQ: lane l of a strip of 16 rows holds row kAwqDotRow[l] of the strip.
// A strip's two words (8 bytes) broadcast to every 64-bit lane and lane i
// shifted right by 4i put nibble i of word 0 in 32-bit lane 2i and nibble
// i of word 1 in lane 2i + 1; nibble i holds the word's row p with
// kAwqNibbleOrder[p] == i.
struct AwqDotRows {
  int32_t row[16];
};
constexpr AwqDotRows MakeAwqDotRows() {
  AwqDotRows r{};
  for (int p = 0; p < 8; ++p) {
    r.row[2 * kAwqNibbleOrder[p]] = p;
    r.row[2 * kAwqNibbleOrder[p] + 1] = 8 + p;
  }
  return r;
}
alignas(64) constexpr AwqDotRows kAwqDotRow = MakeAwqDotRows();
// The same for dense nibbles (row i at nibble i of 8 bytes): lane 2i
// holds row i, lane 2i + 1 row 8 + i; and the lane of each row.
constexpr AwqDotRows MakeDenseDotRows(bool lanes) {
  AwqDotRows r{};
  for (int i = 0; i < 8; ++i) {
    if (lanes) {
      r.row[i] = 2 * i;
      r.row[8 + i] = 2 * i + 1;
    } else {
      r.row[2 * i] = i;
      r.row[2 * i + 1] = 8 + i;
    }
  }
  return r;
}
alignas(64) constexpr AwqDotRows kDenseDotRow = MakeDenseDotRows(false);
alignas(64) constexpr AwqDotRows kDenseDotLane = MakeDenseDotRows(true);
// Dense nibbles' order in a word (ByteCodes's `order`: row p at nibble p).
constexpr uint8_t kDenseNibbleOrder[8] = {0, 1, 2, 3, 4, 5, 6, 7};

// Where ColumnsDotAs finds the codes: GPTQ's [K / 8, N] words, AWQ's [K,
// N / 8] words (both read as the [N, K] weight), dense 4-bit rows
// (compressed-tensors' [N, K / 8] words: element (r, c) at nibble c of row
// r's bytes, low nibble first), or dense 4-bit [K, N] (an ONNX MatMul's B:
// the view's rows are K, its columns the features, Plan::Dot::columns).
enum class ColumnSource { kGptq, kAwq, kRows, kDenseKN };

// Plan::dot with plan.dot->m rows of X (at most kM: 1, 2, 4 or 8) over the [N, K] weight of `kSrc`,
// rows [r0, r1) (output features), elements [c0, c1) (K; c0 a multiple of 16), without a tile: per
// element k and strip of 16 rows, the 16 rows' codes of k in one vector (GPTQ, and rows staged as
// GPTQ's words by 16 x 16 word transposes: a word row's 16 words, nibble k % 8; AWQ: two words
// broadcast and shifted per 64-bit lane), the contract's arithmetic
// float32(q - z) * s (q - z as (2^23 + q) - (2^23 + z): exact for |z| <
// 2^22, which ColumnsDot checks) with the 16 rows' parameters of k's group (loaded per
// element under a group map or when groups are not whole 16-element
// units, else per 16 elements), times X's element k, added to partial sum
// (k - c0) % 16 of each row — AccumulateDotRows's order, so the same bits
// as the tile (16 partial sums per row held as 16 vectors of rows,
// transposed in and out of dot->sums). Rows go in blocks of
// kColumnsDotBlock (rows: 128; AWQ: from the word holding r0; under a group map as many as a
// 32 KiB table of every group's parameters holds, in place of parameter
// rows s_axis apart that share the L1's sets, or of rows' parameters
// s_outer apart), K in chunks of 64 (rows: 128, a line of each row)
// staged on the stack (a chunk's bytes of each word row: whole lines, read
// once, whatever the word stride's L1 sets), the next chunk's lines
// fetched into L2 meanwhile, spread over the strips' steps (no hardware
// prefetcher follows the word stride). Measured (Intel Xeon guest, one
// thread, 4096 x 4096, weight flushed): blocks of 256 rows 1.1-1.3x faster
// than 128 (fewer pages per byte read), no prefetch 1.3x slower, a
// 64-256 KiB group table (heap) no faster than 32 KiB; blocks of 512 rows
// against 256 (4096 x 4096 / 14336, M = 1 / 4 / 8, 2 rounds each way):
// AWQ M = 1 1.15x faster (each block reads a slice of every page of its
// weight: half the page walks), the others 0.97-1.08x. About 52 KiB of
// stack. One row of X keeps a strip's 16 partial sums in registers over
// the chunk's elements (AVX-512; on AVX2 they would take all 16
// registers twice over); more (kM x 16 would not fit the 32 registers),
// and AVX2's one, take partial sum j of the kM rows at a time over elements kc + j, kc +
// j + 16, .. of the chunk (each sum gets the same additions in the same
// order), decoding each element's codes once for the kM rows, with the
// parameters of the chunk's 16-element units held. Rows of X past m (3 on
// kM = 4, 5-7 on 8) repeat X's last row into sums never stored: one
// decode serves them all (measured, Intel Xeon guest, one thread, weight
// flushed: 8 rows in one pass 1.2-1.45x faster than two passes of 4).
// Applies where ColumnsDot says; map_groups: MapGroups(plan, c0, c1)
// under a group map, else 0; acc_scratch: kM * 32 KiB, 64-byte aligned
// (the strips' sums: 16 x 16 floats per strip of 16 rows and row of X).
// Rows per block of ColumnsDotAs's words ([N, K] GPTQ / AWQ; [K, N]: features).
constexpr int64_t kColumnsDotBlock = 512;
template <ColumnSource kSrc, ZeroPointKind kZp, bool kPerElement, int kM>
HWY_NOINLINE void ColumnsDotAs(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                               int64_t map_groups, float* acc_scratch) {
  constexpr bool kHasZ = kZp == ZeroPointKind::kInteger;
  constexpr bool kRowSrc = kSrc == ColumnSource::kRows, kKN = kSrc == ColumnSource::kDenseKN;
  // Two words or 8 bytes of 16 rows per element (broadcast and shifted).
  constexpr bool kAwq = kSrc == ColumnSource::kAwq || kKN;
  // Whether the strip's lanes hold its rows out of order (kAwqDotRow's /
  // kDenseDotRow's).
  constexpr bool kPermuted = kAwq && kBytesPermuted;
  constexpr int64_t kBlock = kRowSrc ? 128 : kColumnsDotBlock, kChunk = kRowSrc ? 128 : 64;
  constexpr int64_t kStrips = kBlock / 16;
  // Bytes of a staged row: a word row's kBlock words (GPTQ, rows), an
  // element's kBlock / 8 words (AWQ); the staged rows of a chunk.
  constexpr int64_t kPitch = kAwq ? kBlock / 2 : 4 * kBlock;
  constexpr int64_t kStaged = kAwq ? kChunk : kChunk / 8;
  // One row of X keeps a strip's 16 sums in registers over a chunk (else
  // strip_rows: a partial sum at a time).
  constexpr bool kHeld = kM == 1 && kSumsHeld;
  const float* const x = plan.dot->x;  // X's element c0
  const int64_t m = plan.dot->m;       // (<= kM)
  // Row i's element c0 (the rows past m: X's last row again).
  const float* xr[kM];
  for (int64_t i = 0; i < kM; ++i) xr[i] = x + std::min(i, m - 1) * plan.dot->ldx;
  float* const sums = plan.dot->sums;  // (row i of X's: + i * 16 * nf)
  const int64_t nf = r1 - r0;
  // kDenseKN: [r0, r1) are view columns, [c0, c1) view rows.
  const int64_t n_all = kKN ? plan.cols() : plan.rows();
  // Bytes between the source's rows: word rows (GPTQ, AWQ) or rows.
  const int64_t S = kRowSrc || kKN ? plan.cols() / 2 : plan.word_stride;
  const float* const scale = plan.scale;
  const int32_t* const zp = plan.zp_int;
  const int32_t* const lane_row = kKN ? kDenseDotRow.row : kAwqDotRow.row;
  const uint8_t* const order = kKN ? kDenseNibbleOrder : kAwqNibbleOrder;
  // Codes and zero points as float32 2^23 + value (exact: |value| < 2^22,
  // ColumnsDot), so that q - z is one float subtraction of exact integers:
  // a code's bits ORed into 2^23's, a zero point converted once.
  // Signed 4-bit codes: q + 8 is the code XOR 8, so 2^23 + 8 + q.
  const int32_t bias = 8388608 + (plan.code == CodeKind::kS4 ? 8 : 0);
  const I16 magic = SetI(0x4B000000 | (bias - 8388608));  // 2^23 (+ 8)
  const F16 offset = SetF(static_cast<float>(bias + plan.code_offset));
  const I16 two23 = SetI(bias);
  alignas(64) uint8_t codes[kStaged * kPitch];
  // Partial sum j of strip s's 16 rows for row i of X: acc_at(i, s, j).
  float* const acc_mem = acc_scratch;
  auto acc_at = [acc_mem](int64_t i, int64_t s, int64_t j) {
    return acc_mem + ((i * kStrips + s) * 16 + j) * 16;
  };
  int64_t goff[kChunk];  // the parameters' offset per element (or per 16)
  // The next chunk's lines: up to two per row's bytes (one more per word
  // row of GPTQ for a block's misaligned start).
  uintptr_t next_lines[kRowSrc ? 2 * kBlock : kStaged * (kPitch / 64 + 1)];
  // A group map: every group's parameters of the block's rows, one row
  // of `width` per group (in place, a group's rows lie s_axis apart: the
  // groups of a power-of-two stride share the L1's sets), if they fit.
  constexpr int64_t kTableBytes = 32768;
  alignas(64) float table_s[kPerElement ? kTableBytes / 8 : 1];
  // (zero points as 2^23 + z, float32)
  alignas(64) float table_z[kPerElement && kHasZ ? kTableBytes / 8 : 1];
  const int64_t groups = kPerElement ? map_groups : 0;  // (a table only per element)
  // Rows per block: kBlock, or as many as the group table holds (rows:
  // whole 16-group transposes).
  const int64_t table_groups = kRowSrc ? (groups + 15) / 16 * 16 : groups;
  const int64_t width =
      groups == 0 ? kBlock : std::min<int64_t>(kBlock, kTableBytes / (table_groups * 8) / 16 * 16);
  struct {
    bool table;
    const float* s;
    const void* z;  // int32 zero points in place, 2^23 + z in the table
  } params_at{width >= 16 && groups > 0, scale, zp};
  const int64_t block = width >= 16 ? width : kBlock;
  if (params_at.table) {
    params_at.s = table_s;
    params_at.z = table_z;
  }
  // Row of lane l of the strip at row f0.
  auto row_of = [&](int64_t f0, int l) { return f0 + (kPermuted ? lane_row[l] : l); };
  // The parameters of strip s (rows from f0) at offset off (goff's) into
  // *z (2^23 + z: integer zero points only) and *sv; kFull: the strip's
  // 16 rows exist (else read under a mask).
  auto params = [&](auto full_c, int64_t s, int64_t f0, int64_t off, F16* z, F16* sv) HWY_ATTR {
    constexpr bool kFull = decltype(full_c)::value;
    const int64_t n = kFull ? 16 : n_all - f0;
    // (off + col: the strip's parameters in params.s / params.z)
    const int64_t col = params_at.table ? 16 * s : f0;
    const float* const zt = static_cast<const float*>(params_at.z) + off + col;
    const int32_t* const zi = static_cast<const int32_t*>(params_at.z) + off + col;
    if constexpr (kFull) {
      *sv = LoadF(params_at.s + off + col);
      if constexpr (kHasZ) *z = params_at.table ? LoadF(zt) : Biased(LoadI(zi), two23);
    } else {
      *sv = LoadF(params_at.s + off + col, n);
      if constexpr (kHasZ) *z = params_at.table ? LoadF(zt, n) : Biased(LoadI(zi, n), two23);
    }
    if constexpr (kPermuted) {
      *sv = PermuteLanes(*sv, lane_row);
      if constexpr (kHasZ) *z = PermuteLanes(*z, lane_row);
    }
  };
  // GPTQ's and the rows' codes: nibble j % 8 of the strip's 16 words as
  // (q & 15) ^ magic (2^23's bits, and 8 for signed codes).
  auto word_codes = [&](I16 words, int j) HWY_ATTR { return WordCodes(words, 4 * (j % 8), magic); };
  // AWQ's and [K, N]'s codes: a strip's 8 staged bytes of an element at p.
  auto byte_codes = [&](const uint8_t* p) HWY_ATTR { return ByteCodes(p, order, magic); };
  // (2^23 + q) - (2^23 + z) = q - z exactly, times s rounded once: the
  // contract's float32(q - z) * s.
  auto value = [&](I16 q, F16 z, F16 sv) HWY_ATTR { return CodeValues(q, z, sv); };
  // One row of X (kHeld): one strip's elements [k, k + 16) of the chunk
  // from kc (kTail: those before c1 only) into acc (its 16 sums).
  auto strip16 = [&](auto full_c, auto tail_c, int64_t s, int64_t f0, int64_t kc, int64_t k,
                     F16* acc) HWY_ATTR {
    constexpr bool kTail = decltype(tail_c)::value;
    F16 z = offset;
    F16 sv;
    if constexpr (!kPerElement) params(full_c, s, f0, goff[(k - kc) / 16], &z, &sv);
    I16 words = SetI(0);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (kTail && k + j >= c1) break;
      if constexpr (kPerElement) params(full_c, s, f0, goff[k + j - kc], &z, &sv);
      I16 q;
      if constexpr (!kAwq) {
        if (j % 8 == 0) words = LoadI(codes + ((k + j - kc) / 8) * kPitch + 64 * s);
        q = word_codes(words, j);
      } else {
        q = byte_codes(codes + (k + j - kc) * kPitch + 8 * s);
      }
      acc[j] = MulAdd(SetF(x[k + j - c0]), value(q, z, sv), acc[j]);  // DotStep
    }
  };
  // kM rows of X (or one, !kHeld): one strip's elements [kc, ke) of the
  // chunk (kWhole: the whole chunk, kChunk elements), partial sum j at a
  // time (fetch: once per j). Unrolled over j and the chunk's 16-element
  // units, so that the addresses are constants (measured: the scalar
  // address arithmetic of a loop over the units made it issue-bound, M =
  // 4 at half this speed).
  auto strip_rows = [&](auto full_c, auto whole_c, int64_t s, int64_t f0, int64_t kc, int64_t ke,
                        auto fetch) HWY_ATTR {
    constexpr bool kWhole = decltype(whole_c)::value;
    constexpr int kUnits = static_cast<int>(kChunk / 16);
    F16 zu[kPerElement ? 1 : kUnits], su[kPerElement ? 1 : kUnits];  // (per 16 elements)
    if constexpr (!kPerElement) {
#pragma GCC unroll 8
      for (int u = 0; u < kUnits; ++u) {
        if (!kWhole && kc + 16 * u >= ke) break;
        zu[u] = offset;
        params(full_c, s, f0, goff[u], &zu[u], &su[u]);
      }
    }
    const float* xc[kM];
    for (int i = 0; i < kM; ++i) xc[i] = xr[i] + (kc - c0);
    const uint8_t* const cs = codes + (kAwq ? 8 : 64) * s;
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      fetch();
      if (!kWhole && kc + j >= ke) break;
      F16 acc[kM];
      for (int i = 0; i < kM; ++i) acc[i] = LoadF(acc_at(i, s, j));
#pragma GCC unroll 8
      for (int u = 0; u < kUnits; ++u) {
        const int e = 16 * u + j;
        if (!kWhole && kc + e >= ke) break;
        F16 z = offset;
        F16 sv;
        if constexpr (kPerElement) {
          params(full_c, s, f0, goff[e], &z, &sv);
        } else {
          z = zu[u];
          sv = su[u];
        }
        I16 q;
        if constexpr (!kAwq) {
          q = word_codes(LoadI(cs + (e / 8) * kPitch), j);
        } else {
          q = byte_codes(cs + e * kPitch);
        }
        const F16 v = value(q, z, sv);
        for (int i = 0; i < kM; ++i) acc[i] = MulAdd(SetF(xc[i][e]), v, acc[i]);  // DotStep
      }
      for (int i = 0; i < kM; ++i) StoreF(acc_at(i, s, j), acc[i]);
    }
  };
  for (int64_t fb = kAwq ? r0 / 8 * 8 : r0; fb < r1; fb += block) {
    const int64_t fe = std::min(r1, fb + block), strips = (fe - fb + 15) / 16;
    if (params_at.table) {
      for (int64_t s = 0; s < strips; ++s) {
        const int64_t f0 = fb + 16 * s;
        if constexpr (kRowSrc) {
          // Each row's parameters lie along it (s_axis 1): 16 rows x 16
          // groups transposed at a time.
          for (int64_t g = 0; g < groups; g += 16) {
            const int64_t from = f0 * plan.s_outer + g, to = g * width + 16 * s;
            const int64_t nrows = std::min<int64_t>(16, n_all - f0);
            const int64_t ng = std::min<int64_t>(16, groups - g);
            TransposeWords(scale + from, 4 * plan.s_outer, ng, nrows, table_s + to, 4 * width);
            if constexpr (kHasZ) {
              TransposeWords(zp + from, 4 * plan.s_outer, ng, nrows, table_z + to, 4 * width);
              for (int64_t i = 0; i < 16; ++i) {  // (int32 zero points -> 2^23 + z)
                float* const t = table_z + to + i * width;
                StoreF(t, Biased(LoadI(t), two23));
              }
            }
          }
        } else {
          for (int64_t g = 0; g < groups; ++g) {
            const int64_t from = g * plan.s_axis + f0, to = g * width + 16 * s;
            StoreF(table_s + to, LoadF(scale + from, n_all - f0));
            if constexpr (kHasZ) StoreF(table_z + to, Biased(LoadI(zp + from, n_all - f0), two23));
          }
        }
      }
    }
    // The strips' sums from dot->sums (rows outside [r0, fe): 0, unused).
    // kDenseKN: AccumulateDotCols's layout, a vector of rows per partial
    // sum.
    for (int64_t i = m; i < kM; ++i) {  // (rows past m: from 0)
      for (int64_t s = 0; s < strips; ++s) {
        for (int j = 0; j < 16; ++j) StoreF(acc_at(i, s, j), ZeroF());
      }
    }
    for (int64_t i = 0; i < m; ++i) {
      const float* const sums_i = sums + i * 16 * nf;
      for (int64_t s = 0; s < strips && kKN; ++s) {
        const int64_t f0 = fb + 16 * s;
        for (int j = 0; j < 16; ++j) {
          const F16 rows = LoadF(sums_i + j * nf + (f0 - r0), fe - f0);
          StoreF(acc_at(i, s, j), kPermuted ? PermuteLanes(rows, lane_row) : rows);
        }
      }
      for (int64_t s = 0; s < strips && !kKN; ++s) {
        F16 r[16];
        for (int l = 0; l < 16; ++l) {
          const int64_t f = row_of(fb + 16 * s, l);
          r[l] = f >= r0 && f < fe ? LoadF(sums_i + (f - r0) * 16) : ZeroF();
        }
        Transpose16(r);
        for (int j = 0; j < 16; ++j) StoreF(acc_at(i, s, j), r[j]);
      }
    }
    // Each source row's bytes read: GPTQ rows [fb, fe)'s words; AWQ the
    // words of rows [fb, fe) (fb a multiple of 8); rows: a chunk's.
    const int64_t at = kRowSrc ? 0 : kAwq ? fb / 2 : 4 * fb;
    const int64_t bytes = kRowSrc ? kChunk / 2 : kAwq ? 4 * ((fe - fb + 7) / 8) : 4 * (fe - fb);
    for (int64_t kc = c0; kc < c1; kc += kChunk) {
      const int64_t ke = std::min(c1, kc + kChunk);
      // Stage the chunk: GPTQ word rows kc / 8 .., AWQ element rows kc ..,
      // rows' words kc / 8 .. transposed into GPTQ's word rows.
      if constexpr (kRowSrc) {
        const int64_t nw = std::min<int64_t>(16, (ke - kc + 7) / 8);
        for (int64_t s = 0; s < strips; ++s) {
          const int64_t f0 = fb + 16 * s;
          TransposeWords(plan.codes + f0 * S + kc / 2, S, nw, std::min<int64_t>(16, fe - f0),
                         codes + 64 * s, kPitch);
        }
      } else {
        for (int64_t i = 0; i < (kAwq ? ke - kc : (ke - kc + 7) / 8); ++i) {
          const uint8_t* src = plan.codes + ((kAwq ? kc : kc / 8) + i) * S + at;
          if constexpr (kAwq) {
            for (int64_t b = 0; b < bytes; b += 64) {
              CopyLine(codes + i * kPitch + b, src + b, bytes - b);
            }
          } else {
            for (int64_t s = 0; s < strips; ++s) {
              StoreI(codes + i * kPitch + 64 * s, LoadI(src + 64 * s, (bytes - 64 * s) / 4));
            }
          }
        }
      }
      // The parameters' offsets: per element, or per 16 (whole groups of
      // 16 elements).
      if constexpr (kPerElement) {
        const int64_t pitch = params_at.table ? width : plan.s_axis;
        for (int64_t k = kc; k < ke; ++k) {
          const int64_t g = plan.axis_group != nullptr ? plan.axis_group[k] : k / plan.group;
          goff[k - kc] = g * pitch;
        }
      } else {
        for (int64_t k = kc; k < ke; k += 16) goff[(k - kc) / 16] = k / plan.group * plan.s_axis;
      }
      // The next chunk's lines (each source row's bytes [at, at + bytes)
      // of it), fetched while the strips run, spread evenly over their
      // 16-element steps.
      const int64_t next_end = std::min(c1, ke + kChunk);
      const int64_t n_next = kRowSrc ? (next_end > ke ? fe - fb : 0)
                             : kAwq  ? next_end - ke
                                     : (next_end - ke + 7) / 8;
      const int64_t next_row = kRowSrc ? fb : kAwq ? ke : ke / 8;
      const int64_t next_at = kRowSrc ? ke / 2 : at;
      const uintptr_t first =
          reinterpret_cast<uintptr_t>(plan.codes) + static_cast<uintptr_t>(next_row * S + next_at);
      int64_t lines = 0;
      for (int64_t i = 0; i < n_next; ++i) {
        const uintptr_t from = first + static_cast<uintptr_t>(i * S);
        for (uintptr_t line = from / 64 * 64; line < from + static_cast<uintptr_t>(bytes);
             line += 64) {
          next_lines[lines++] = line;
        }
      }
      const int64_t steps = strips * (kHeld ? (ke - kc + 15) / 16 : 16);
      const int64_t per_step = (lines + steps - 1) / steps;
      int64_t fetched = 0;
      auto fetch = [&]() {
        for (const int64_t end = std::min(lines, fetched + per_step); fetched < end; ++fetched) {
          PrefetchL2(next_lines[fetched]);
        }
      };
      for (int64_t s = 0; s < strips; ++s) {
        const int64_t f0 = fb + 16 * s;
        const bool full = params_at.table || f0 + 16 <= n_all;
        using T = std::true_type;
        using F = std::false_type;
        if constexpr (!kHeld) {
          if (full && ke - kc == kChunk) {
            strip_rows(T(), T(), s, f0, kc, ke, fetch);
          } else if (full) {
            strip_rows(T(), F(), s, f0, kc, ke, fetch);
          } else {
            strip_rows(F(), F(), s, f0, kc, ke, fetch);
          }
        } else {
          F16 acc[16];
          for (int j = 0; j < 16; ++j) acc[j] = LoadF(acc_at(0, s, j));
          int64_t k = kc;
          for (; k + 16 <= ke; k += 16) {
            fetch();
            if (full) {
              strip16(T(), F(), s, f0, kc, k, acc);
            } else {
              strip16(F(), F(), s, f0, kc, k, acc);
            }
          }
          if (k < ke) {
            fetch();
            if (full) {
              strip16(T(), T(), s, f0, kc, k, acc);
            } else {
              strip16(F(), T(), s, f0, kc, k, acc);
            }
          }
          for (int j = 0; j < 16; ++j) StoreF(acc_at(0, s, j), acc[j]);
        }
      }
    }
    // Back to dot->sums, rows [max(r0, fb), fe) only.
    for (int64_t i = 0; i < m; ++i) {
      float* const sums_i = sums + i * 16 * nf;
      for (int64_t s = 0; s < strips && kKN; ++s) {
        const int64_t f0 = fb + 16 * s;
        for (int j = 0; j < 16; ++j) {
          const F16 lanes = LoadF(acc_at(i, s, j));
          StoreF(sums_i + j * nf + (f0 - r0),
                 kPermuted ? PermuteLanes(lanes, kDenseDotLane.row) : lanes, fe - f0);
        }
      }
      for (int64_t s = 0; s < strips && !kKN; ++s) {
        F16 r[16];
        for (int j = 0; j < 16; ++j) r[j] = LoadF(acc_at(i, s, j));
        Transpose16(r);
        for (int l = 0; l < 16; ++l) {
          const int64_t f = row_of(fb + 16 * s, l);
          if (f >= r0 && f < fe) StoreF(sums_i + (f - r0) * 16, r[l]);
        }
      }
    }
  }
}

// The rows of X ColumnsDotAs takes m (1-8) rows of X as: 1, 2, 4 or 8.
constexpr int ColumnsDotRowsOfX(int64_t m) { return m <= 2 ? static_cast<int>(m) : m <= 4 ? 4 : 8; }

// ColumnsDotAs for plan.dot->m (1-8) rows of X. Without kSumsHeld (AVX2:
// 16 registers) 5-8 rows go in two passes, of 4 and the rest, each
// decoding the weight: one pass of 8 spills its sums (measured, the Zen 4
// guest under --target AVX2, GPTQ / AWQ 4096 x 4096 M = 8: 12.8-13.5 ms in
// one pass against 8.6-9.3 by tiles).
template <ColumnSource kSrc, ZeroPointKind kZp, bool kPerElement>
void ColumnsDotRows(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                    int64_t map_groups, float* acc_scratch) {
  // One pass over p.dot->m rows of X (1-8; without kSumsHeld 1-4).
  auto pass = [&](const Plan& p) HWY_ATTR {
    switch (ColumnsDotRowsOfX(p.dot->m)) {
      case 1:
        return ColumnsDotAs<kSrc, kZp, kPerElement, 1>(p, r0, r1, c0, c1, map_groups, acc_scratch);
      case 2:
        return ColumnsDotAs<kSrc, kZp, kPerElement, 2>(p, r0, r1, c0, c1, map_groups, acc_scratch);
      case 4:
        return ColumnsDotAs<kSrc, kZp, kPerElement, 4>(p, r0, r1, c0, c1, map_groups, acc_scratch);
      default:
        if constexpr (kSumsHeld) {
          return ColumnsDotAs<kSrc, kZp, kPerElement, 8>(p, r0, r1, c0, c1, map_groups,
                                                         acc_scratch);
        }
    }
  };
  if (kSumsHeld || plan.dot->m <= 4) return pass(plan);
  Plan part = plan;
  Plan::Dot rows = *plan.dot;
  part.dot = &rows;
  rows.m = 4;
  pass(part);
  rows.x += 4 * rows.ldx;
  rows.m = plan.dot->m - 4;
  rows.sums += 4 * 16 * (r1 - r0);
  pass(part);
}

// Plan::dot by ColumnsDotAs where it applies: 1-8 rows of X, float32 values
// (no producer's roundings), 4-bit codes with zero points none or integer,
// c0 a multiple of 16, and
//  - GPTQ's / AWQ's [N, K] columns with scales [groups, N] (s_outer 1;
//    AWQ without a group map and with groups of whole 16-element units);
//  - dense unsigned 4-bit rows along K (inner 1, K a multiple of 8) with a
//    group map (compressed-tensors act-order) and scales [N, groups]
//    (s_axis 1) of at most 256 groups over [c0, c1).
// Returns false, having done nothing, elsewhere.
bool ColumnsDotHere(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  const Layout layout = plan.layout;
  constexpr int64_t kSmall = int64_t{1} << 22;  // ColumnsDotAs's 2^23 + z
  if (plan.dot == nullptr || plan.dot->m < 1 || plan.dot->m > 8 || plan.out != OutType::kF32 ||
      plan.Staged() || (plan.inner != 1 && !plan.dot->columns) || c0 % 16 != 0 || c0 >= c1 ||
      r0 >= r1 ||
      (plan.zp_kind != ZeroPointKind::kNone && plan.zp_kind != ZeroPointKind::kInteger) ||
      plan.code_offset <= -kSmall || plan.code_offset >= kSmall) {
    return false;
  }
  // The strips' sums of a block (32 KiB per row of X) in the thread's
  // scratch.
  float* const acc = reinterpret_cast<float*>(KernelScratch(
      static_cast<size_t>(ColumnsDotRowsOfX(plan.dot->m) * kColumnsDotBlock * 16 * 4)));
  if (acc == nullptr) return false;
  const bool per_element = plan.axis_group != nullptr || plan.group % 16 != 0;
  using Z = ZeroPointKind;
  using Src = ColumnSource;
  if (plan.dot->columns) {
    // Dense 4-bit [K, N] (view rows [r0, r1) of K, columns [c0, c1) the
    // features), groups of whole 16-element units along K, scales [K / G,
    // N] (one outer index; s_inner 1).
    const int64_t n = plan.cols();
    if (layout != Layout::kDense || (plan.code != CodeKind::kU4 && plan.code != CodeKind::kS4) ||
        plan.inner == 1 || plan.outer != 1 || plan.s_inner != 1 || per_element || n % 16 != 0 ||
        r0 % 16 != 0 || c0 % 16 != 0) {
      return false;
    }
    if (plan.zp_kind == ZeroPointKind::kInteger) {
      for (int64_t g = r0 / plan.group; g <= (r1 - 1) / plan.group; ++g) {
        for (int64_t f = c0; f < c1; ++f) {
          const int32_t v = plan.zp_int[g * plan.s_axis + f];
          if (v <= -kSmall || v >= kSmall) return false;
        }
      }
      ColumnsDotRows<Src::kDenseKN, Z::kInteger, false>(plan, c0, c1, r0, r1, 0, acc);
    } else {
      ColumnsDotRows<Src::kDenseKN, Z::kNone, false>(plan, c0, c1, r0, r1, 0, acc);
    }
    return true;
  }
  const bool gptq = layout == Layout::kGptqColumns && plan.s_outer == 1;
  const bool awq = layout == Layout::kAwqColumns && plan.s_outer == 1 && !per_element;
  const bool rows = layout == Layout::kDense && plan.code == CodeKind::kU4 &&
                    plan.axis_group != nullptr && plan.s_axis == 1 && plan.cols() % 8 == 0;
  if (!gptq && !awq && !rows) return false;
  // Under a group map: the groups [c0, c1) reads (rows: their group table
  // holds 16 rows of up to 256 groups).
  const int64_t map_groups = plan.axis_group != nullptr ? MapGroups(plan, c0, c1) : 0;
  if (rows && map_groups > 256) return false;
  // (AVX2's two passes for 5-8 rows of X: act-order rows measured slower
  // than their tiles, 11.5 against 8.9 ms at 4096 x 4096, M = 8.)
  if (!kSumsHeld && rows && plan.dot->m > 4) return false;
  const bool z = plan.zp_kind == ZeroPointKind::kInteger;
  if (z) {
    // Every zero point the rows [r0, r1) (AWQ: from r0's word) use over
    // [c0, c1): |z| < 2^22.
    int64_t g0 = c0 / plan.group, g1 = (c1 - 1) / plan.group + 1;
    if (plan.axis_group != nullptr) {
      g0 = 0;
      g1 = map_groups;
    }
    const bool rows_major = layout == Layout::kDense;
    const int64_t ra = layout == Layout::kAwqColumns ? r0 / 8 * 8 : r0;
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t r = ra; r < r1; ++r) {
        const int32_t v = plan.zp_int[rows_major ? r * plan.s_outer + g : g * plan.s_axis + r];
        if (v <= -kSmall || v >= kSmall) return false;
      }
    }
  }
  if (gptq) {
    if (per_element) {
      z ? ColumnsDotRows<Src::kGptq, Z::kInteger, true>(plan, r0, r1, c0, c1, map_groups, acc)
        : ColumnsDotRows<Src::kGptq, Z::kNone, true>(plan, r0, r1, c0, c1, map_groups, acc);
    } else {
      z ? ColumnsDotRows<Src::kGptq, Z::kInteger, false>(plan, r0, r1, c0, c1, map_groups, acc)
        : ColumnsDotRows<Src::kGptq, Z::kNone, false>(plan, r0, r1, c0, c1, map_groups, acc);
    }
    return true;
  }
  if (awq) {
    z ? ColumnsDotRows<Src::kAwq, Z::kInteger, false>(plan, r0, r1, c0, c1, map_groups, acc)
      : ColumnsDotRows<Src::kAwq, Z::kNone, false>(plan, r0, r1, c0, c1, map_groups, acc);
    return true;
  }
  z ? ColumnsDotRows<Src::kRows, Z::kInteger, true>(plan, r0, r1, c0, c1, map_groups, acc)
    : ColumnsDotRows<Src::kRows, Z::kNone, true>(plan, r0, r1, c0, c1, map_groups, acc);
  return true;
}

#else
bool ColumnsDotHere(const Plan&, int64_t, int64_t, int64_t, int64_t) { return false; }
#endif  // HWY_TARGET <= HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
namespace kernels_internal {
HWY_EXPORT(ColumnsDotHere);
bool ColumnsDot(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  return HWY_DYNAMIC_DISPATCH(ColumnsDotHere)(plan, r0, r1, c0, c1);
}
}  // namespace kernels_internal
}  // namespace nibble
#endif  // HWY_ONCE
