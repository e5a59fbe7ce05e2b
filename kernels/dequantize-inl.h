// Per-target dequantize row kernels ("apply scale / zero point"), included
// once per Highway target by kernels/dequantize.cc and
// kernels/dequantize_bytes.cc (the foreach_target skeleton). The kernel
// family is one template, RowKernel<Loader, code, zero point, output>:
// the loader (kernels/code_loaders-inl.h) unpacks codes of one layout, the
// output conversion is kernels/convert-inl.h, and the raw AVX-512 and AVX2
// pieces are kernels/x86_avx512-inl.h and kernels/x86_avx2-inl.h.
//
// Contract (all kernels): out(r, c) = the exact value of plan element
// (r, c), bit-identical to DequantizeTileReference:
//   integer codes: float32(q - z) * s         (z = zero point or code_offset)
//   float zero pt: float32(q - code_offset) * s + zf, two roundings, no FMA
// rounded once to the output type (nearest even; bf16/f16 NaN stay NaN).
// Exactness: every vector lane performs exactly those float32 operations; a
// per-group 16-entry table T[c] (AVX-512) holds the same values computed by
// the same operations, so a lookup equals the arithmetic; so do the
// 32-entry block tables of ggml's small-code types (x86_avx512-inl.h).
// Tails: a row is processed in units of 2N lanes; elements before the first
// aligned unit (non-temporal mode) and after the last are computed with the
// scalar formula. Stores never touch memory outside [c0, c1) of each row:
// no masked stores, no overlapping stores, so neighbouring threads and tiles
// never race. Inputs are read with unaligned loads only.
#if defined(NIBBLE_KERNELS_DEQUANTIZE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#undef NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#else
#define NIBBLE_KERNELS_DEQUANTIZE_INL_H_
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include "base/numeric.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/code_loaders-inl.h"
#include "kernels/convert-inl.h"
#include "kernels/plan.h"
#include "kernels/reference.h"
#include "kernels/scratch.h"
#include "kernels/x86_avx2-inl.h"
#include "kernels/x86_avx512-inl.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

#if HWY_TARGET != HWY_SCALAR

HWY_INLINE int32_t DecodeIntCode(CodeKind k, uint32_t u) {
  switch (k) {
    case CodeKind::kS4:
      return static_cast<int32_t>(u ^ 8u) - 8;
    case CodeKind::kS8:
      return static_cast<int8_t>(u);
    case CodeKind::kS16:
      return static_cast<int16_t>(u);
    default:
      return static_cast<int32_t>(u);
  }
}

#ifndef NIBBLE_FLOAT8_TABLES
// The targets with float8_e4m3fn byte-plane tables (RowKernel::
// kFloat8Planes): AVX3_DL (VBMI's 128-entry byte permutes) and AVX2 (16-entry
// byte shuffles and exponent adds).
#define NIBBLE_FLOAT8_TABLES (HWY_TARGET <= HWY_AVX3_DL || HWY_TARGET == HWY_AVX2)
#endif

#if HWY_TARGET == HWY_AVX2
// AVX2: a float8_e4m3fn group's tables for scale s (RowKernel::
// Float8Tables), 16-byte tables of the low (lo) and high (hi) bytes of
// 16-bit output bits. With m' = (code + 1) & 0x7F (the magnitude plus one;
// 0 for NaN, 0x7F):
//   lo / hi:         entry c: code first - 1 + c (exponent fields e_lo and
//                    e_lo + 1) times s;
//   low_lo / low_hi: tables j < tables, entry c: the code of m' = 16 j + c
//                    (NaN for m' = 0) times s; only m' < first is read.
// first = 8 e_lo + 1: e_lo is the lowest exponent field whose products
// are all normal numbers of the output type (Float8Tables).
struct Float8Planes {
  __m128i lo, hi;
  __m128i low_lo[4], low_hi[4];
  int32_t first, tables;
};

// AVX2: the runs of 32 float8_e4m3fn codes of [k, stop) (stop - k a
// multiple of 32) at codes + k through t (Float8Planes, kTables its
// tables), as 16-bit values at base + 2 k (stream: non-temporal, base + 2 k
// 32-byte aligned); kMantBits: the output type's. A code of exponent
// field e >= e_lo is the entry of the code with the same mantissa and
// exponent e_lo + (e - e_lo) % 2, with (e - e_lo) / 2 * 2 added to the
// exponent field: exact because every such product is a normal number of
// the output type, for scaling by a power of two then commutes with both
// roundings (the float32 product and the output's). The other codes (zero,
// subnormal, NaN, and those whose products are not normal in the output)
// are the low tables' entries. Rounding to nearest even is symmetric, so
// the code's sign flips bit 15 (a NaN's sign is the code's own: the entry
// of 0x7F is positive whatever s).
template <int kMantBits, int kTables>
HWY_INLINE int64_t StoreFloat8Runs(const Float8Planes& t, const uint8_t* codes, int64_t k,
                                   int64_t stop, char* base, bool stream) {
  const __m256i lo_t = _mm256_broadcastsi128_si256(t.lo);
  const __m256i hi_t = _mm256_broadcastsi128_si256(t.hi);
  __m256i low_lo[kTables], low_hi[kTables];
  for (int j = 0; j < kTables; ++j) {
    low_lo[j] = _mm256_broadcastsi128_si256(t.low_lo[j]);
    low_hi[j] = _mm256_broadcastsi128_si256(t.low_hi[j]);
  }
  const __m256i first = _mm256_set1_epi8(static_cast<char>(t.first));
  // (e - e_lo) / 2 in bits 4-6 of m' - first, moved to the exponent field's
  // second bit within the high byte.
  constexpr int kShift = kMantBits + 1 - 8;
  for (; k + 32 <= stop; k += 32) {
    // Quadwords [0, 2, 1, 3]: the byte unpacks then give outputs in order.
    const __m256i c = _mm256_permute4x64_epi64(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + k)), 0xD8);
    const __m256i m1 =
        _mm256_and_si256(_mm256_add_epi8(c, _mm256_set1_epi8(1)), _mm256_set1_epi8(0x7F));
    // m' - first: negative (bit 7, the blends' select) for the low tables'
    // codes, else the table index (bits 0-3) and the exponent steps.
    const __m256i n = _mm256_sub_epi8(m1, first);
    const __m256i add = _mm256_and_si256(_mm256_srli_epi16(n, 4 - kShift),
                                         _mm256_set1_epi8(static_cast<char>(7 << kShift)));
    __m256i ll, lh;
    if constexpr (kTables == 1) {
      ll = _mm256_shuffle_epi8(low_lo[0], m1);  // (m' < first <= 16 where read)
      lh = _mm256_shuffle_epi8(low_hi[0], m1);
    } else {
      // Table j's index: m' - 16 j where in 0 .. 15 (as 0x70 + it), else a
      // byte with bit 7 set (the shuffle's zero).
      ll = lh = _mm256_setzero_si256();
      for (int j = 0; j < kTables; ++j) {
        const __m256i idx =
            _mm256_adds_epu8(_mm256_sub_epi8(m1, _mm256_set1_epi8(static_cast<char>(16 * j))),
                             _mm256_set1_epi8(0x70));
        ll = _mm256_or_si256(ll, _mm256_shuffle_epi8(low_lo[j], idx));
        lh = _mm256_or_si256(lh, _mm256_shuffle_epi8(low_hi[j], idx));
      }
    }
    const __m256i lo = _mm256_blendv_epi8(_mm256_shuffle_epi8(lo_t, n), ll, n);
    const __m256i hi =
        _mm256_blendv_epi8(_mm256_add_epi8(_mm256_shuffle_epi8(hi_t, n), add), lh, n);
    const __m256i signed_hi =
        _mm256_xor_si256(hi, _mm256_and_si256(c, _mm256_set1_epi8(static_cast<char>(0x80))));
    __m256i* d = reinterpret_cast<__m256i*>(base + k * 2);
    if (stream) {
      _mm256_stream_si256(d, _mm256_unpacklo_epi8(lo, signed_hi));
      _mm256_stream_si256(d + 1, _mm256_unpackhi_epi8(lo, signed_hi));
    } else {
      _mm256_storeu_si256(d, _mm256_unpacklo_epi8(lo, signed_hi));
      _mm256_storeu_si256(d + 1, _mm256_unpackhi_epi8(lo, signed_hi));
    }
  }
  return k;
}
#endif

#if NIBBLE_FLOAT8_TABLES
// The byte-plane tables of float8 groups (Float8Groups) kept across the
// rows of one RunRows call: entry i for the rows' group first + i, built
// for the scale whose bits it records. Rows of a 2-D scale grid (DeepSeek /
// Qwen FP8's 128 x 128 blocks: the rows of a block share their scales) and
// per-tensor scales then build each table once per block, not per row.
struct Float8TableCache {
  static constexpr int64_t kEntries = 160;  // groups cached (K <= 20480 at 128)
  int64_t first = 0;
  uint32_t bits[kEntries];  // the scale's bits; a NaN's: none yet (never finite)
  Float8Planes planes[kEntries];
  explicit Float8TableCache(int64_t first_group) : first(first_group) {
    for (uint32_t& b : bits) b = 0x7FC00000u;
  }
  // The planes of group gi for scale s (RowKernel::Float8TableFits):
  // cached, else make() (cached where gi has an entry, else in *scratch).
  template <class Make>
  HWY_INLINE const Float8Planes& Get(int64_t gi, float s, const Make& make, Float8Planes* scratch) {
    uint32_t b;
    std::memcpy(&b, &s, 4);
    const int64_t i = gi - first;
    if (i < 0 || i >= kEntries) return *scratch = make();
    if (bits[i] != b) {
      planes[i] = make();
      bits[i] = b;
    }
    return planes[i];
  }
};
// (The other instantiations' stand-in.)
struct NoFloat8TableCache {
  explicit NoFloat8TableCache(int64_t) {}
};
#endif

// One output row segment [k0, k1) (element offsets within the row), all
// loop-invariant facts of the row.
struct RowJob {
  CodeRef code;  // the loader's view of the row
  // Scales: per element (s_step 1) or grouped along the row.
  bool per_element;
  const float* scale;  // element 0's scale (per_element) or plan.scale
  const int32_t* zp_int;
  const float* zp_float;
  // Grouped: scale index of element k = base + (k / group) * step (rows
  // start on a group boundary).
  int64_t base, group, step;
  // per_element with a group map along the row (plan.axis_group, s_axis
  // 1): element k's scale index is map[k] instead of k (gathered).
  const int32_t* map = nullptr;
  // With map: 1 + the largest map entry (the row's scales read).
  int64_t map_groups = 0;
  // Optional, with map, integer zero points, at most 64 groups: the map as
  // uint16 (same indexing as map) and the row's zero points as int16 (64
  // entries, zero past map_groups), each within [-32752, 32767] so that a
  // 4-bit code minus it fits int16 (MappedRow16).
  const uint16_t* map16 = nullptr;
  const int16_t* zp16 = nullptr;
  // Optional, per element without a map (AVX2 16-bit outputs; RunRows'
  // SplitParams): the row's parameters in pair-split order. Each chunk of
  // 16 elements [q, q + 16) with q - split_origin a multiple of 16, within
  // [split_origin, split_end), has the parameters of elements q, q + 2,
  // ..., q + 14 then q + 1, ..., q + 15 at index q - split_origin of
  // split_scale (and of split_zp_int / split_zp_float, the plan's kind).
  const float* split_scale = nullptr;
  const int32_t* split_zp_int = nullptr;
  const float* split_zp_float = nullptr;
  int64_t split_origin = 0, split_end = 0;
  // No value of the job is NaN (its code values are integers, its scales
  // and zero points finite): bfloat16 rounding skips the NaN case (kNoNaN),
  // Q4_0's AVX2 tables come from its magnitudes (kSymmetricTables).
  bool finite = false;
#if NIBBLE_FLOAT8_TABLES
  // Float8Groups' tables across the call's rows (null: built per group).
  Float8TableCache* float8 = nullptr;
#endif
};

// Whether loader L has Address(c, k) (the byte holding element k's code).
template <class L, class = void>
struct HasAddress : std::false_type {};
template <class L>
struct HasAddress<L, std::void_t<decltype(&L::Address)>> : std::true_type {};
// Whether loader L has the optional LoadLow.
template <class L, class = void>
struct HasLoadLow : std::false_type {};
template <class L>
struct HasLoadLow<L, std::void_t<decltype(&L::LoadLow)>> : std::true_type {};
// Whether loader L has the optional Load16Low.
template <class L, class = void>
struct HasLoad16Low : std::false_type {};
template <class L>
struct HasLoad16Low<L, std::void_t<decltype(&L::Load16Low)>> : std::true_type {};
// Whether loader L has the optional LoadLow2.
template <class L, class = void>
struct HasLoadLow2 : std::false_type {};
template <class L>
struct HasLoadLow2<L, std::void_t<decltype(&L::LoadLow2)>> : std::true_type {};

// Whether loader L has the optional Load2 (AVX2).
template <class L, class = void>
struct HasLoad2 : std::false_type {};
template <class L>
struct HasLoad2<L, std::void_t<decltype(&L::Load2)>> : std::true_type {};

// Whether loader L has the optional LoadSplit (AVX2).
template <class L, class = void>
struct HasLoadSplit : std::false_type {};
template <class L>
struct HasLoadSplit<L, std::void_t<decltype(L::LoadSplit(std::declval<const CodeRef&>(), int64_t{},
                                                         static_cast<typename L::VI*>(nullptr),
                                                         static_cast<typename L::VI*>(nullptr)))>>
    : std::true_type {};

// Whether loader L has the optional LoadDot.
template <class L, class = void>
struct HasLoadDot : std::false_type {};
template <class L>
struct HasLoadDot<L, std::void_t<decltype(&L::LoadDot)>> : std::true_type {};

// Whether loader L has the optional LoadDotWords (and DotShift).
template <class L, class = void>
struct HasLoadDotWords : std::false_type {};
template <class L>
struct HasLoadDotWords<L, std::void_t<decltype(&L::LoadDotWords)>> : std::true_type {};

#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
// Loader L's kDotOrder where it has LoadDot, else element order.
constexpr int32_t kDotOrderIdentity[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
template <class L>
constexpr const int32_t* DotOrderOf() {
  if constexpr (HasLoadDot<L>::value) {
    return L::kDotOrder;
  } else {
    return kDotOrderIdentity;
  }
}
#endif

// Whether loader L reads a block layout whose values are never float32
// subnormals (BlockNormalValues of its descriptor).
template <class L, class = void>
struct LoaderNormalValues : std::false_type {};
template <class L>
struct LoaderNormalValues<L, std::void_t<typename L::Desc>>
    : std::bool_constant<BlockNormalValues<typename L::Desc>()> {};

// Whether loader L reads a block layout whose code values are integers
// (IntegerCodeValues of its descriptor: integer codes, or a kTable4 grid
// of integers, as IQ4_NL's and MXFP4's).
template <class L, class = void>
struct LoaderIntegerValues : std::false_type {};
template <class L>
struct LoaderIntegerValues<L, std::void_t<typename L::Desc>>
    : std::bool_constant<IntegerCodeValues<typename L::Desc>()> {};

// Whether loader L reads a block layout of 4-bit codes q whose values are
// q - 8 (no zero point: Q4_0), -8 .. 7: every nonzero value's magnitude
// is one of 1 .. 8 (RowKernel::kSymmetricTables).
template <class L, class = void>
struct LoaderSymmetricNibbles : std::false_type {};
template <class L>
struct LoaderSymmetricNibbles<L, std::void_t<typename L::Desc>>
    : std::bool_constant<L::Desc::kCode == CodeKind::kU4 && L::Desc::kCodeOffset == 8 &&
                         L::Desc::kZp == ZeroPointKind::kNone> {};

// Whether loader L reads Q5_0's layout: 5-bit codes q in two planes (the
// low 4 bits as 16 bytes' low then high nibbles, the fifth bits packed 32
// to a word), one scale per 32, values q - 16 (no zero point), -16 .. 15:
// every nonzero value's magnitude is one of 1 .. 16 (SymmetricFiveTables,
// AVX2).
template <class L, class = void>
struct LoaderSymmetricFives : std::false_type {};
template <class L>
struct LoaderSymmetricFives<L, std::void_t<typename L::Desc>> {
  using D = typename L::Desc;
  static constexpr bool Planes() {
    if constexpr (PlaneCount<D>() != 2) {
      return false;
    } else {
      return D::kPlanes[0].bits == 4 && D::kPlanes[0].span() == 16 && D::kPlanes[1].bits == 1 &&
             D::kPlanes[1].span() == 1;
    }
  }
  static constexpr bool value = D::kCode == CodeKind::kU8 && D::kCodeOffset == 16 &&
                                D::kZp == ZeroPointKind::kNone && D::kBlockElems == 32 &&
                                D::kSubElems == 32 && Planes();
};

// Whether loader L reads a block layout whose scales are powers of two
// (DeclaresPow2Scales of its descriptor).
template <class L, class = void>
struct LoaderPow2Scales : std::false_type {};
template <class L>
struct LoaderPow2Scales<L, std::void_t<typename L::Desc>>
    : std::bool_constant<DeclaresPow2Scales<typename L::Desc>::value> {};

// Loaders whose codes are dense nibbles in bytes (DenseNibblesOf), and
// their order (kHighFirst: the high nibble first).
template <class L>
struct DenseNibbleBytes : std::false_type {};
template <bool kH>
struct DenseNibbleBytes<DenseNibblesOf<kH>> : std::true_type {
  static constexpr bool kHighFirst = kH;
};

#if HWY_TARGET == HWY_AVX2
// AVX2: 32 outputs of the dense nibbles in `bytes` (16 bytes, the same in
// both 128-bit halves; kHighFirst: the high nibble first) through the
// byte-plane tables lo / hi (the low and high bytes of the 16 codes'
// 16-bit outputs in both halves: RowKernel::ShuffleTables), outputs 0-15
// to *a, 16-31 to *b. Each byte copied to the two bytes of a 16-bit lane
// (half 0: bytes 0-3 and 8-11, half 1: 4-7 and 12-15), the first code
// kept in the low byte and the second moved to the high one, so that the
// bytes hold codes [0-7, 16-23 | 8-15, 24-31]; two byte shuffles look up
// the low and high bytes and the byte unpacks interleave them in order:
// about 9 vector operations per 32 outputs where two ShuffleLookups on
// Load16's codes take about 20.
template <bool kHighFirst>
HWY_INLINE void DenseNibbleLookup32(__m256i bytes, __m256i lo, __m256i hi, __m256i* a, __m256i* b) {
  const __m256i dup = _mm256_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 8, 8, 9, 9, 10, 10, 11, 11, 4, 4, 5,
                                       5, 6, 6, 7, 7, 12, 12, 13, 13, 14, 14, 15, 15);
  const __m256i d = _mm256_shuffle_epi8(bytes, dup);  // byte x in both bytes of a lane
  const __m256i shifted = _mm256_srli_epi16(d, 4);
  const __m256i c = kHighFirst
                        ? _mm256_or_si256(_mm256_and_si256(shifted, _mm256_set1_epi16(0x000F)),
                                          _mm256_and_si256(d, _mm256_set1_epi16(0x0F00)))
                        : _mm256_or_si256(_mm256_and_si256(d, _mm256_set1_epi16(0x000F)),
                                          _mm256_and_si256(shifted, _mm256_set1_epi16(0x0F00)));
  PlaneLookup32(lo, hi, c, a, b);
}

// Transposes the 8 x 8 float32 tile v[0..7] (v[i] lane j -> v[j] lane i).
HWY_INLINE void Transpose8x8(__m256* v) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4 = _mm256_unpacklo_ps(v[4], v[5]), t5 = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6 = _mm256_unpacklo_ps(v[6], v[7]), t7 = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  v[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  v[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  v[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  v[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  v[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  v[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  v[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  v[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
#endif

#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
// Fetches the line at address a into L2 (a prefetch never faults: any
// address; Highway's Prefetch fetches into L1 only). An asm statement:
// GCC 12 (-O3) treats _mm_prefetch as free of side effects, so a lambda
// whose only effect is a prefetch counts as pure and its calls are
// dropped (CodeTiles' fetch lambda: GPTQ ran 0.68x from memory;
// DequantizeTransposedPow2's on every target until 2026-12-06).
HWY_INLINE void PrefetchL2(uintptr_t a) {
  asm volatile("prefetcht1 %0" : : "m"(*reinterpret_cast<const char*>(a)));
}
#endif

// The kOut bits (a 2-byte output type) of v0's lanes then v1's, each
// rounded once (NarrowBits: the reference's bits), as one vector of 2N
// 16-bit lanes. kNoNaN: as BF16Bits'.
template <OutType kOut, bool kNoNaN = false, class DF = KernelTag, class VF = hn::Vec<DF>>
HWY_INLINE auto OutBitsPair(DF df, VF v0, VF v1) {
#if HWY_TARGET == HWY_AVX2
  if constexpr (kOut == OutType::kBF16 && hn::MaxLanes(DF()) == 8) {
    return hn::Vec<hn::Repartition<uint16_t, DF>>{BF16BitsPair<kNoNaN>(v0.raw, v1.raw)};
  }
#endif
  return Concat16(NarrowBits<kOut, kNoNaN>(df, v1), NarrowBits<kOut, kNoNaN>(df, v0));
}

// Stores a at p and b at p + Lanes(d), non-temporal when `stream` (p then
// aligned to a vector of d).
template <class D, class V>
HWY_INLINE void StoreTwo(D d, V a, V b, hn::TFromD<D>* p, bool stream) {
  if (stream) {
    hn::Stream(a, d, p);
    hn::Stream(b, d, p + hn::Lanes(d));
  } else {
    hn::StoreU(a, d, p);
    hn::StoreU(b, d, p + hn::Lanes(d));
  }
}

// What the caller of StoreOutUnit knows of a unit's float32 values, as a
// set of bits: the shortcuts bfloat16 rounding may take (the same bits as
// without). Decided once per loop (a plan's, a job's or a block chunk's
// parameters), never per value.
//   kBf16Hw: the CPU has AVX512_BF16 and no value is a float32 subnormal:
//            vcvtne2ps2bf16 rounds without the per-unit test.
//   kNoNaN:  no value is NaN (integer codes, finite scales and zero
//            points): the integer-lane rounding skips the NaN case.
using UnitFacts = unsigned;
constexpr UnitFacts kNoFacts = 0, kBf16Hw = 1, kNoNaN = 2;

// Stores v0 then v1 (2N values of the kernels' full float vectors) at dst
// as kOut, each rounded once (NarrowBits: the reference's bits). `stream`:
// non-temporal (dst aligned to a full vector). `facts`: UnitFacts.
template <OutType kOut, class DF = KernelTag, class VF = hn::Vec<DF>>
HWY_INLINE void StoreOutUnit(DF df, VF v0, VF v1, char* dst, bool stream, UnitFacts facts) {
  (void)facts;
  if constexpr (OutDesc<kOut>::kBytes == 4) {
    StoreTwo(df, v0, v1, reinterpret_cast<float*>(dst), stream);
  } else {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kOut == OutType::kBF16 && hn::MaxLanes(DF()) == 16) {
      if (facts & kBf16Hw) {
        (void)StoreBF16x32<true>(v0.raw, v1.raw, dst, stream);  // (always true)
        return;
      }
      if (CpuHasAvx512Bf16() && StoreBF16x32<false>(v0.raw, v1.raw, dst, stream)) return;
    }
    if constexpr (kOut == OutType::kF16 && hn::MaxLanes(DF()) == 16) {
      // Each half stored as converted (two 32-byte stores): joining them
      // first took a cross-lane insert per 32 values (in cache on Zen 4 up
      // to 1.07x; on AVX2 the same measured 0.95-1.08x, not taken).
      const hn::Rebind<uint16_t, DF> dh;  // N lanes: half a vector
      StoreTwo(dh, NarrowBits<kOut>(df, v0), NarrowBits<kOut>(df, v1),
               reinterpret_cast<uint16_t*>(dst), stream);
      return;
    }
#endif
    const hn::Repartition<uint16_t, DF> du16;  // 2N lanes: one full vector
    const auto both = kOut == OutType::kBF16 && (facts & kNoNaN)
                          ? OutBitsPair<kOut, true>(df, v0, v1)
                          : OutBitsPair<kOut>(df, v0, v1);
    uint16_t* p = reinterpret_cast<uint16_t*>(dst);
    if (stream) {
      hn::Stream(both, du16, p);
    } else {
      hn::StoreU(both, du16, p);
    }
  }
}

#if HWY_TARGET == HWY_AVX2
// Stores 16 outputs of a 2-byte kOut at dst from the float32 lanes of the
// even elements (0, 2, ..., 14) and of the odd ones (1, 3, ..., 15), each
// rounded once (the reference's bits; facts: StoreOutUnit's). bfloat16:
// BF16BitsInterleaved (no cross-lane pack, which takes a pack and a
// quadword permute in element order); float16: the two conversions
// interleaved by two word unpacks.
template <OutType kOut>
HWY_INLINE void StoreSplitUnit(__m256 even, __m256 odd, char* dst, bool stream, UnitFacts facts) {
  static_assert(OutDesc<kOut>::kBytes == 2, "a 2-byte output type");
  __m256i bits;
  if constexpr (kOut == OutType::kBF16) {
    bits = (facts & kNoNaN) != 0 ? BF16BitsInterleaved<true>(even, odd)
                                 : BF16BitsInterleaved<false>(even, odd);
  } else {
    const KernelTag df;
    const __m128i e = NarrowBits<kOut>(df, hn::Vec<KernelTag>{even}).raw;
    const __m128i o = NarrowBits<kOut>(df, hn::Vec<KernelTag>{odd}).raw;
    bits = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_unpacklo_epi16(e, o)),
                                   _mm_unpackhi_epi16(e, o), 1);
  }
  if (stream) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(dst), bits);
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), bits);
  }
}
#endif

// L: the code loader of the plan's layout (kernels/code_loaders-inl.h).
template <class L, CodeKind kCode, ZeroPointKind kZp, OutType kOut>
class RowKernel {
 public:
  using DF = KernelTag;
  using DI = hn::RebindToSigned<DF>;
  using DU = hn::RebindToUnsigned<DF>;
  using VF = hn::Vec<DF>;
  using VI = hn::Vec<DI>;
  static constexpr bool kFloatCode = kCode >= CodeKind::kF8E4M3FN;
  // Integer code values (integer codes, or a block layout's table of
  // integers): with finite parameters (RowJob::finite) no value is NaN,
  // so bfloat16 rounds without the NaN case (kNoNaN). Not for a layout
  // whose AVX2 tables come from its scales' exponents (kPow2Tables,
  // MXFP4): it rounds only for its rare other scales, and the second
  // instantiation measured 0.91-0.94x in cache there.
  static constexpr bool kIntegerValues =
      !kFloatCode || (LoaderIntegerValues<L>::value && !LoaderPow2Scales<L>::value);
  static constexpr bool kTable = HWY_TARGET <= HWY_AVX3 && L::kNibbles;
  // float16/bfloat16 output from 4-bit codes on AVX-512: the group's table
  // is rounded to 16-bit output bits once, then 2N outputs are one 16-bit
  // permute (vpermw) of 2N codes. Same bits: rounding is per value.
  static constexpr bool kHalfTable = kTable && OutDesc<kOut>::kBytes == 2;
  // The same on AVX2, whose permutes hold 8 lanes: the group's 16 output
  // values split into a table of their low bytes and one of their high
  // bytes (Group::table16, table16_hi; ShuffleTables), 2N outputs two byte
  // shuffles of 2N codes and a blend (ShuffleLookup) — per group of the row
  // layouts, per sub-block of the nibble block types (WholeBlocks). Same
  // bits: rounding is per value.
  static constexpr bool kShuffleTable =
      HWY_TARGET == HWY_AVX2 && L::kNibbles && OutDesc<kOut>::kBytes == 2;
  // kSymmetricTables: a block's byte-plane tables from its 8 magnitudes
  // (LoaderSymmetricNibbles), where its scale is finite (RowJob::finite):
  // m_j = (j + 1) s rounded once to the output (one vector, not two), the
  // value of code c the magnitude of |c - 8| with the sign bit flipped
  // below 8 — rounding is symmetric and (-k) s = -(k s) — and code 8 the
  // zero 0 * s, its sign s's (the sign bit of m_0). A NaN or infinite s
  // (a NaN product's sign is the NaN's, 0 * inf is NaN) takes the
  // multiply of every value.
  static constexpr bool kSymmetricTables = kShuffleTable && LoaderSymmetricNibbles<L>::value;
  // float8_e4m3fn codes to 16-bit outputs through byte-plane tables
  // (Float8Groups; NIBBLE_FLOAT8_TABLES: AVX3_DL, AVX2), in runs of
  // kFloat8Run codes.
  static constexpr bool kFloat8Planes = NIBBLE_FLOAT8_TABLES && kCode == CodeKind::kF8E4M3FN &&
                                        kZp == ZeroPointKind::kNone && OutDesc<kOut>::kBytes == 2;
  static constexpr int64_t kFloat8Run = HWY_TARGET == HWY_AVX2 ? 32 : 64;
  // Bytes ahead of the codes being decoded that the per-element units and
  // the group loop fetch (their rows' codes, contiguous: int8, PMX / ONNX
  // scales along the row). With 16-bit outputs the hardware prefetcher
  // fell behind beside the streamed stores: 4096 x 4096 from memory on
  // the 2-core Intel VM, x r+w one thread, int8 0.73-0.76 -> 0.88-0.91,
  // onnx-b0 bfloat16 0.69 -> 0.85, pmx-q0 bfloat16 0.62 -> 0.77 at 2048
  // bytes (a probe of 1024: about half the gain); float32 outputs showed
  // none, so they fetch nothing (bench/results/2026-11-28-fetch-ahead/).
  static constexpr int64_t kFetchAhead = OutDesc<kOut>::kBytes == 2 ? kFetchAheadBytes : 0;
  // kOut where it is a 2-byte type (the half-width paths are compiled
  // for the others too, but never taken).
  static constexpr OutType kHalfOut = OutDesc<kOut>::kBytes == 2 ? kOut : OutType::kF16;
  // No value is a float32 subnormal, whatever the inputs (a block layout's
  // BlockNormalValues): bfloat16 rounding skips the subnormal test.
  static constexpr bool kNormalValues = LoaderNormalValues<L>::value;
  using DU16 = hn::Repartition<uint16_t, DF>;  // 2N x u16, a full vector
  using VU16 = hn::Vec<DU16>;

  RowKernel(const Plan& plan, const RowJob& job)
      : plan_(plan),
        job_(job),
        decode_(kCode == CodeKind::kTable4 ? plan.code_values : FloatCodeTable(kCode)) {}

  // Values of elements kk .. kk+N-1 when scales / zero points vary per
  // element (pointers already offset to the row's element 0).
  // vt: ValueTable().
  HWY_INLINE VF PerElementValues(const CodeRef& codes, const float* sp, const int32_t* zi,
                                 const float* zfp, VI off, VF vt, int64_t kk) const {
    return PerElementValuesOf(UnitCodesAt(codes, kk), sp, zi, zfp, off, vt, kk);
  }
  // Same from the codes c of those elements (UnitCodesAt).
  HWY_INLINE VF PerElementValuesOf(VI c, const float* sp, const int32_t* zi, const float* zfp,
                                   VI off, VF vt, int64_t kk) const {
    const DF df;
    const DI di;
    const VF s = hn::LoadU(df, sp + kk);
    const VI z = kZp == ZeroPointKind::kInteger ? hn::LoadU(di, zi + kk) : off;
    const VF zf = kZp == ZeroPointKind::kFloat ? hn::LoadU(df, zfp + kk) : hn::Zero(df);
    return CodeArith(c, vt, s, z, zf);
  }
  // Same through a group map: the parameters of elements kk .. kk+N-1 are
  // gathered at map[kk ..].
  HWY_INLINE VF MappedValues(const CodeRef& codes, const float* sp, const int32_t* zi,
                             const float* zfp, const int32_t* map, VI off, VF vt,
                             int64_t kk) const {
    const DF df;
    const DI di;
    const VI g = hn::LoadU(di, map + kk);
    const VF s = hn::GatherIndex(df, sp, g);
    const VI z = kZp == ZeroPointKind::kInteger ? hn::GatherIndex(di, zi, g) : off;
    const VF zf = kZp == ZeroPointKind::kFloat ? hn::GatherIndex(df, zfp, g) : hn::Zero(df);
    return LoadArith(codes, kk, vt, s, z, zf);
  }

  // The next group's codes (from k, at most to k1) fetched ahead
  // (FetchAhead): at each group step of the loops over groups.
  HWY_INLINE void FetchGroup(const CodeRef& codes, int64_t k, int64_t k1) const {
    if constexpr (HasAddress<L>::value) {
      const uint8_t* const a = L::Address(codes, k);
      FetchAhead(a, L::Address(codes, std::min(k1, k + job_.group)) - a);
    }
  }

  // 16-bit outputs of per-element rows on AVX2 from the job's parameters
  // in pair-split order (RowJob::split_scale) and codes split the same way
  // (L::LoadSplit): each 16 outputs from one vector of the even elements
  // and one of the odd, the 16-bit lanes then in element order without a
  // cross-lane pack (StoreSplitUnit), the codes with fewer shuffles than
  // in element order. The same bits: each lane's arithmetic is
  // CodeArith's. float16 only where the element-order codes take Load2's
  // four shuffles: its two unpacks cost more than a pack saves (PMX int4x4
  // words, whose codes are 16-bit lanes, measured 0.89x in cache).
  static constexpr bool kSplit =
      HWY_TARGET == HWY_AVX2 && HasLoadSplit<L>::value && !kFloatCode &&
      (kOut == OutType::kBF16 || (kOut == OutType::kF16 && HasLoad2<L>::value));

  // The per-element units of [k, k1) (scales, zero points per element):
  // every invariant in a local of this loop (through a lambda capturing by
  // reference GCC reloaded them from the closure every vector). Returns the
  // first element not written (whole units only).
  template <bool kStream>
  HWY_INLINE int64_t PerElementRow(int64_t k, int64_t k1, char* base) const {
    const DF df;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
    if constexpr (kSplit) {
      if (job_.split_scale != nullptr && k >= job_.split_origin &&
          (k - job_.split_origin) % 16 == 0) {
        k = SplitRow<kStream>(k, std::min(k1, job_.split_end), base);
      }
    }
    const CodeRef codes = job_.code;
    const float* const sp = job_.scale;
    const int32_t* const zi = job_.zp_int;
    const float* const zfp = job_.zp_float;
    const VI off = hn::Set(DI(), plan_.code_offset);
    const VF vt = ValueTable();
    const UnitFacts facts = Facts();
    for (; k + 2 * n <= k1; k += 2 * n) {
      if constexpr (kFetchAhead > 0 && HasAddress<L>::value) {
        hwy::Prefetch(L::Address(codes, k) + kFetchAhead);
      }
      VI lo, hi;
      UnitCodes(codes, k, &lo, &hi);
      StoreUnit(df, PerElementValuesOf(lo, sp, zi, zfp, off, vt, k),
                PerElementValuesOf(hi, sp, zi, zfp, off, vt, k + n), base + k * kOutBytes, kStream,
                facts);
    }
    return k;
  }

  // The units of [k, k1) from the pair-split parameters (kSplit; k -
  // split_origin a multiple of 16). Returns the first element not written.
  template <bool kStream>
  HWY_INLINE int64_t SplitRow(int64_t k, int64_t k1, char* base) const {
#if HWY_TARGET == HWY_AVX2
    if constexpr (kSplit) {
      constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
      const CodeRef codes = job_.code;
      const float* const sp = job_.split_scale;
      const int32_t* const zi = job_.split_zp_int;
      const float* const zfp = job_.split_zp_float;
      const int64_t origin = job_.split_origin;
      const VI off = hn::Set(DI(), plan_.code_offset);
      const VF vt = ValueTable();
      const UnitFacts facts = Facts();
      for (; k + 16 <= k1; k += 16) {
        if constexpr (kFetchAhead > 0 && HasAddress<L>::value) {
          hwy::Prefetch(L::Address(codes, k) + kFetchAhead);
        }
        VI even, odd;
        L::LoadSplit(codes, k, &even, &odd);
        const int64_t i = k - origin;
        StoreSplitUnit<kOut>(PerElementValuesOf(even, sp, zi, zfp, off, vt, i).raw,
                             PerElementValuesOf(odd, sp, zi, zfp, off, vt, i + 8).raw,
                             base + k * kOutBytes, kStream, facts);
      }
      return k;
    }
#endif
    (void)k1;
    (void)base;
    return k;
  }

#if HWY_TARGET <= HWY_AVX3
  // The per-element units of [k, k1) through a group map of at most
  // 16 * kRegs groups (job_.map_groups; kRegs 2, 4 or 8): the row's scales
  // (and zero points) in kRegs registers each, picked by two-table permutes
  // on the map entry's low 5 bits, blended on bit 5 (kRegs >= 4) and bit 6
  // (kRegs 8) — a gather per vector measured 5x slower. Table lanes past
  // map_groups are zero and never picked. Returns the first element not
  // written (whole units only).
  template <bool kStream, int kRegs>
  HWY_INLINE int64_t MappedRow(int64_t k, int64_t k1, char* base) const {
    static_assert(kRegs == 2 || kRegs == 4 || kRegs == 8, "2, 4 or 8 table registers");
    const DF df;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
    const CodeRef codes = job_.code;
    const int32_t* const map = job_.map;
    auto table = [&](int j, const void* p) HWY_ATTR { return TableRegister(j, p); };
    const void* zp = kZp == ZeroPointKind::kInteger ? static_cast<const void*>(job_.zp_int)
                                                    : static_cast<const void*>(job_.zp_float);
    constexpr bool kHasZ = kZp == ZeroPointKind::kInteger || kZp == ZeroPointKind::kFloat;
    __m512 st[kRegs], zt[kRegs];
#pragma GCC unroll 8
    for (int j = 0; j < kRegs; ++j) {
      st[j] = table(j, job_.scale);
      zt[j] = kHasZ ? table(j, zp) : _mm512_setzero_ps();
    }
    const __m512i bit5 = _mm512_set1_epi32(32), bit6 = _mm512_set1_epi32(64);
    const VI off = hn::Set(DI(), plan_.code_offset);
    const VF vt = ValueTable();
    auto at = [&](VI c, int64_t kk) HWY_ATTR {
      const __m512i g = _mm512_loadu_si512(map + kk);
      // Group g's entry of the tables t[0 .. kRegs-1].
      auto pick = [&](const __m512* t) HWY_ATTR {
        const __m512 r01 = _mm512_permutex2var_ps(t[0], g, t[1]);
        if constexpr (kRegs == 2) {
          return r01;
        } else {
          const __mmask16 b5 = _mm512_test_epi32_mask(g, bit5);
          const __m512 r03 = _mm512_mask_blend_ps(b5, r01, _mm512_permutex2var_ps(t[2], g, t[3]));
          if constexpr (kRegs == 4) {
            return r03;
          } else {
            const __m512 r47 = _mm512_mask_blend_ps(b5, _mm512_permutex2var_ps(t[4], g, t[5]),
                                                    _mm512_permutex2var_ps(t[6], g, t[7]));
            return _mm512_mask_blend_ps(_mm512_test_epi32_mask(g, bit6), r03, r47);
          }
        }
      };
      const VF sv{pick(st)};
      VI z = off;
      VF zf = hn::Zero(df);
      if constexpr (kHasZ) {
        const __m512 zv = pick(zt);
        if constexpr (kZp == ZeroPointKind::kInteger) {
          z = VI{_mm512_castps_si512(zv)};
        } else {
          zf = VF{zv};
        }
      }
      return CodeArith(c, vt, sv, z, zf);
    };
    const UnitFacts facts = Facts();
    for (; k + 2 * n <= k1; k += 2 * n) {
      VI lo, hi;
      UnitCodes(codes, k, &lo, &hi);
      StoreUnit(df, at(lo, k), at(hi, k + n), base + k * kOutBytes, kStream, facts);
    }
    return k;
  }
#endif

#if HWY_TARGET <= HWY_AVX3
  // Lanes [16 j, 16 j + 16) of the row's table at p (float bits) as one
  // register, zero past job_.map_groups.
  HWY_INLINE __m512 TableRegister(int j, const void* p) const {
    const int64_t left = std::max<int64_t>(0, std::min<int64_t>(16, job_.map_groups - 16 * j));
    const auto m = static_cast<__mmask16>((1u << left) - 1u);
    return _mm512_maskz_loadu_ps(m, static_cast<const float*>(p) + 16 * j);
  }

  // MappedRow for 4-bit codes with integer zero points given as
  // job_.map16 / job_.zp16 (at most 16 * kRegs <= 64 groups): per 32
  // elements the zero points picked by one word permute and subtracted from
  // the codes in 16-bit lanes (exact: the caller bounds the zero points so
  // that no difference leaves int16), then widened to the int32 difference
  // MappedRow computes; the scales as in MappedRow, their indices widened
  // from map16. The same values as MappedRow with fewer operations (act-
  // order GPTQ on a Zen 5 guest: float32 tiles in cache 1.6x, whole
  // 16-bit outputs 1.04-1.09x).
  template <bool kStream, int kRegs>
  HWY_INLINE int64_t MappedRow16(int64_t k, int64_t k1, char* base) const {
    static_assert(kRegs == 2 || kRegs == 4, "2 or 4 table registers");
    static_assert(kZp == ZeroPointKind::kInteger && kCode == CodeKind::kU4, "integer zero points");
    const DF df;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
    const CodeRef codes = job_.code;
    const uint16_t* const map = job_.map16;
    __m512 st[kRegs];
#pragma GCC unroll 4
    for (int j = 0; j < kRegs; ++j) st[j] = TableRegister(j, job_.scale);
    const __m512i z0 = _mm512_loadu_si512(job_.zp16);
    const __m512i z1 = kRegs == 4 ? _mm512_loadu_si512(job_.zp16 + 32) : z0;
    const __m512i low4 = _mm512_set1_epi16(0xF), bit5 = _mm512_set1_epi32(32);
    auto scale = [&](const uint16_t* m) HWY_ATTR {
      const __m512i g =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(m)));
      const __m512 r01 = _mm512_permutex2var_ps(st[0], g, st[1]);
      if constexpr (kRegs == 2) {
        return r01;
      } else {
        return _mm512_mask_blend_ps(_mm512_test_epi32_mask(g, bit5), r01,
                                    _mm512_permutex2var_ps(st[2], g, st[3]));
      }
    };
    const UnitFacts facts = Facts();
    for (; k + 2 * n <= k1; k += 2 * n) {
      const __m512i g = _mm512_loadu_si512(map + k);
      const __m512i z =
          kRegs == 2 ? _mm512_permutexvar_epi16(g, z0) : _mm512_permutex2var_epi16(z0, g, z1);
      const __m512i d = _mm512_sub_epi16(_mm512_and_si512(L::Load16Low(codes, k).raw, low4), z);
      const VF lo{_mm512_mul_ps(
          _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_castsi512_si256(d))), scale(map + k))};
      const VF hi{
          _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm512_extracti64x4_epi64(d, 1))),
                        scale(map + k + n))};
      StoreUnit(df, lo, hi, base + k * kOutBytes, kStream, facts);
    }
    return k;
  }
  // Whether MappedRow16 applies to this kernel (then job_.map16 / zp16 are
  // used where given).
  static constexpr bool kMapped16 =
      kZp == ZeroPointKind::kInteger && kCode == CodeKind::kU4 && std::is_same_v<L, DenseNibbles>;
  // MappedRow16 with its table registers for job_.map_groups (1 to 64).
  HWY_INLINE int64_t MappedRow16Of(int64_t k, int64_t k1, char* base, bool stream) const {
    if constexpr (kMapped16) {
      if (job_.map_groups <= 32) {
        return stream ? MappedRow16<true, 2>(k, k1, base) : MappedRow16<false, 2>(k, k1, base);
      }
      return stream ? MappedRow16<true, 4>(k, k1, base) : MappedRow16<false, 4>(k, k1, base);
    }
    (void)k1;
    (void)base;
    (void)stream;
    return k;
  }
#endif

  // Writes elements [k0, k1) of the row to y[k - k0]. `stream`: use
  // non-temporal stores for the aligned body; the caller must FlushStream.
  void Run(int64_t k0, int64_t k1, void* y, bool stream) {
    const DF df;
    const size_t N = hn::Lanes(df);
    const int64_t unit = static_cast<int64_t>(2 * N);
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
    char* const out = static_cast<char*>(y);
    const UnitFacts facts = Facts();
    // Prologue: reach a loadable element (L::Align, L::Phase) and, when streaming, an
    // output address aligned to a full vector (N * 4 bytes for every output
    // type: 2N f16/bf16 lanes or N f32 lanes per store).
    const uintptr_t vec_bytes = N * 4;
    auto aligned = [&](int64_t kk) {
      return reinterpret_cast<uintptr_t>(out + (kk - k0) * kOutBytes) % vec_bytes == 0;
    };
    // Vector loads start where the layout allows.
    constexpr int64_t kAlign = L::Align();
    const int64_t odd = L::Phase(job_.code);
    auto parity_ok = [&](int64_t kk) { return (kk + odd) % kAlign == 0; };
    int64_t k = k0;
    if (stream) {
      const int64_t limit = k0 + 2 * unit;
      while (k < k1 && k < limit && !(aligned(k) && parity_ok(k))) ++k;
      if (k >= limit || k >= k1) stream = false;  // not alignable: plain stores
    }
    if (!stream) k = k0 + (kAlign - (k0 + odd) % kAlign) % kAlign;
    k = k < k1 ? k : k1;
    ScalarRange(k0, k, out);
    char* const base = out - k0 * kOutBytes;  // element k at base + k * kOutBytes
    if constexpr (L::kBlockParams) k = WholeBlocks(k, k1, base, stream);
    if (job_.per_element) {
      // Loop invariants in locals (see below).
      const CodeRef codes = job_.code;
      const float* const sp = job_.scale;
      const int32_t* const zi = job_.zp_int;
      const float* const zfp = job_.zp_float;
      const int32_t* const map = job_.map;
      const DI di;
      const VI off = hn::Set(di, plan_.code_offset);
      const VF vt = ValueTable();
      auto units = [&](auto at) HWY_ATTR {
        if (stream) {
          for (; k + unit <= k1; k += unit) {
            StoreUnit(df, at(k), at(k + static_cast<int64_t>(N)), base + k * kOutBytes, true,
                      facts);
          }
        } else {
          for (; k + unit <= k1; k += unit) {
            StoreUnit(df, at(k), at(k + static_cast<int64_t>(N)), base + k * kOutBytes, false,
                      facts);
          }
        }
      };
      if (map != nullptr) {
#if HWY_TARGET <= HWY_AVX3
        // At most 128 groups: their parameters in registers.
        const int64_t ng = job_.map_groups;
        if (kMapped16 && job_.map16 != nullptr && ng > 0 && ng <= 64) {
          k = MappedRow16Of(k, k1, base, stream);
        } else if (ng > 0 && ng <= 32) {
          k = stream ? MappedRow<true, 2>(k, k1, base) : MappedRow<false, 2>(k, k1, base);
        } else if (ng > 32 && ng <= 64) {
          k = stream ? MappedRow<true, 4>(k, k1, base) : MappedRow<false, 4>(k, k1, base);
        } else if (ng > 64 && ng <= 128) {
          k = stream ? MappedRow<true, 8>(k, k1, base) : MappedRow<false, 8>(k, k1, base);
        } else
#endif
          units([&](int64_t kk)
                    HWY_ATTR { return MappedValues(codes, sp, zi, zfp, map, off, vt, kk); });
      } else {
        k = stream ? PerElementRow<true>(k, k1, base) : PerElementRow<false>(k, k1, base);
      }
    } else if (!kTable && job_.group == static_cast<int64_t>(N) && k % job_.group == 0) {
      // Groups of exactly one vector (ggml's 16-element sub-blocks on
      // AVX-512): each vector takes its own group's parameters, no group
      // tracking.
      const CodeRef codes = job_.code;
      const DI di;
      const int64_t step = job_.step;
      int64_t idx = ScaleIndex(k);
      auto at = [&](int64_t kk, int64_t i) HWY_ATTR {
        const VF s = hn::Set(df, job_.scale[i]);
        const VI z =
            hn::Set(di, kZp == ZeroPointKind::kInteger ? job_.zp_int[i] : plan_.code_offset);
        const VF zf = hn::Set(df, kZp == ZeroPointKind::kFloat ? job_.zp_float[i] : 0.0f);
        return Arith(Decode(L::Load(codes, kk)), s, z, zf);
      };
      for (; k + unit <= k1; k += unit, idx += 2 * step) {
        StoreUnit(df, at(k, idx), at(k + static_cast<int64_t>(N), idx + step), base + k * kOutBytes,
                  stream, facts);
      }
    } else if (job_.group == unit && k % unit == 0) {
      // Groups of exactly one unit (ggml's 32-element blocks and K-quant
      // sub-blocks, ONNX / PMX block 2N): no group tracking, no Group
      // struct. With the table (AVX-512, 4-bit codes), per unit the group's
      // table is one multiply of the loop-invariant code values (plus the
      // additive zero), rounded to the output type, then one lookup per
      // vector; without, the contract's arithmetic per vector.
      const CodeRef codes = job_.code;
      const DI di;
      const int64_t step = job_.step;
      int64_t idx = ScaleIndex(k);
      // (Locals: the output stores may alias the job's members.)
      const float* const sp = job_.scale;
      const float* const zfp = job_.zp_float;
      const int32_t* const zip = job_.zp_int;
      const VI offset = hn::Set(di, plan_.code_offset);
      const bool bf16_hw = Bf16Hw();
      for (; k + unit <= k1; k += unit, idx += step) {
        const VI z = kZp == ZeroPointKind::kInteger ? hn::Set(di, zip[idx]) : offset;
        const float zf = kZp == ZeroPointKind::kFloat ? zfp[idx] : 0.0f;
        char* const dst = base + k * kOutBytes;
        if constexpr (!kTable) {
          const VF s = hn::Set(df, sp[idx]), zfv = hn::Set(df, zf);
          const VF v0 = Arith(Decode(L::Load(codes, k)), s, z, zfv);
          const VF v1 = Arith(Decode(L::Load(codes, k + static_cast<int64_t>(N))), s, z, zfv);
          StoreUnit(df, v0, v1, dst, stream, facts);
        } else if constexpr (kHalfTable) {
#if HWY_TARGET <= HWY_AVX3
          if constexpr (!(kFloatCode && kZp == ZeroPointKind::kFloat)) {  // (UnitTable adds zf)
            k = stream ? TableGroups<true>(codes, idx, k + unit, k, k1, base)
                       : TableGroups<false>(codes, idx, k + unit, k, k1, base);
            break;
          }
#endif
          StoreHalfLookup(UnitTable(z, sp[idx], zf), L::Load16(codes, k), dst, stream, bf16_hw);
        } else {
          StoreLookup(UnitTable(z, sp[idx], zf), L::Load(codes, k),
                      L::Load(codes, k + static_cast<int64_t>(N)), dst, stream);
        }
      }
    } else if (k + unit <= k1) {  // (no whole unit: no group is read at all;
      // k may be one past the last scale)
      // Loop invariants in locals: vector stores may alias anything, so
      // members would be reloaded after every store.
      const CodeRef codes = job_.code;
      SetGroup(k);
      // The current group lives in locals (registers): as a member it would
      // be written back to memory at every group change, since the output
      // stores may alias it — for small groups that is more store traffic
      // than the output itself.
      Group g = cur_;
      int64_t g_idx = cur_idx_, g_end = cur_end_;
      while (k + unit <= k1) {
        const int64_t stop = g_end < k1 ? g_end : k1;
#if NIBBLE_FLOAT8_TABLES
        if constexpr (kFloat8Planes) {
          // whole runs per group
          if (job_.group % kFloat8Run == 0 && (g_end - k) % kFloat8Run == 0) {
            k = stream ? Float8Groups<true>(codes, g_idx, g_end, k, k1, base)
                       : Float8Groups<false>(codes, g_idx, g_end, k, k1, base);
            break;
          }
        }
#endif
#if HWY_TARGET <= HWY_AVX3
        if constexpr (kTable && OutDesc<kOut>::kBytes == 4 && HasLoadLow2<L>::value) {
          if (job_.group % unit == 0 && (g_end - k) % unit == 0) {  // (as the 16-bit tables)
            k = stream ? TableGroups<true>(codes, g_idx, g_end, k, k1, base)
                       : TableGroups<false>(codes, g_idx, g_end, k, k1, base);
            break;
          }
        }
#endif
        if constexpr (kHalfTable) {
#if HWY_TARGET <= HWY_AVX3
          if (job_.group % unit == 0 && (g_end - k) % unit == 0) {  // no unit straddles
            k = stream ? TableGroups<true>(codes, g_idx, g_end, k, k1, base)
                       : TableGroups<false>(codes, g_idx, g_end, k, k1, base);
            break;
          }
#endif
          const DU16 du16;
          for (; k + unit <= stop; k += unit) {
            const VU16 h = HalfLookup(g.table16, GroupCodes16(codes, k));
            uint16_t* p = reinterpret_cast<uint16_t*>(base + k * kOutBytes);
            if (stream) {
              hn::Stream(h, du16, p);
            } else {
              hn::StoreU(h, du16, p);
            }
          }
        } else if constexpr (kShuffleTable) {
          if (job_.group % unit == 0 && (g_end - k) % unit == 0) {  // no unit straddles
            k = stream ? ShuffleGroups<true>(codes, g_idx, g_end, k, k1, base)
                       : ShuffleGroups<false>(codes, g_idx, g_end, k, k1, base);
            break;
          }
          k = stream ? ShuffleUnits<true>(codes, g.table16, g.table16_hi, k, stop, base)
                     : ShuffleUnits<false>(codes, g.table16, g.table16_hi, k, stop, base);
        } else if (!kTable && kZp != ZeroPointKind::kInteger && plan_.code_offset == 0) {
          // Nothing to subtract (signed codes: PMX / ONNX int8): a
          // constant zero, so the subtraction folds away (same bits).
          const VI zero = hn::Zero(DI());
          k = stream ? GroupUnits<true>(codes, g, zero, k, stop, base)
                     : GroupUnits<false>(codes, g, zero, k, stop, base);
        } else {
          k = stream ? GroupUnits<true>(codes, g, g.z, k, stop, base)
                     : GroupUnits<false>(codes, g, g.z, k, stop, base);
        }
        if (k + unit > k1) break;
        if (k == g_end) {  // groups aligned with units: step to the next
          if constexpr (kFetchAhead > 0 && HasAddress<L>::value) FetchGroup(codes, k, k1);
          g_idx += job_.step;
          g_end += job_.group;
          g = MakeGroup(g_idx);
          continue;
        }
        // This unit straddles a group boundary (through the members).
        cur_ = g;
        cur_idx_ = g_idx;
        cur_end_ = g_end;
        const VF v0 = Compute(k);
        const VF v1 = Compute(k + static_cast<int64_t>(N));
        StoreUnit(df, v0, v1, base + k * kOutBytes, stream, facts);
        k += unit;
        g = cur_;
        g_idx = cur_idx_;
        g_end = cur_end_;
      }
    }
    ScalarRange(k, k1, out + (k - k0) * kOutBytes);
  }

#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
  // --- The fused dot (Plan::dot; DotUnits below) ---------------------------
  // Whether the fused dot takes this layout. AVX-512: codes looked up in
  // the group's table (kTable) or whole codes (L::kWholeCodes) by the
  // contract's arithmetic. AVX2 (kArithDot): 4-bit and whole codes of the
  // row layouts by the contract's arithmetic (UnitValues; 16-entry tables
  // take two permutes and a blend there: no kTable); the ggml block
  // layouts keep their tiles (Q4_0 / Q4_K / IQ4_NL measured 0.88-0.95x
  // fused, Q8_0 0.87-0.90x at K = 14336: their tile kernels decode more
  // cheaply than Load and Arith).
  static constexpr bool kArithDot =
      HWY_TARGET == HWY_AVX2 && !L::kBlockParams && (L::kNibbles || L::kWholeCodes);
  static constexpr bool kDots = HWY_TARGET == HWY_AVX2 ? kArithDot : kTable || L::kWholeCodes;
  // Whether DotUnits can give elements [k0, k1) of this row (kDots): whole
  // units from a loadable k0, no unit across a group boundary.
  bool CanDot(int64_t k0, int64_t k1) const {
    constexpr int64_t kUnit = 2 * static_cast<int64_t>(hn::MaxLanes(DF()));
    return kDots && !job_.per_element && k0 % kUnit == 0 && (k1 - k0) % kUnit == 0 &&
           (job_.step == 0 || job_.group % kUnit == 0) &&
           (k0 + L::Phase(job_.code)) % L::Align() == 0 && kUnit % L::Align() == 0;
  }
  // A group's state for UnitValues: its table (kTable) or its parameters.
  struct DotGroup {
    VF t, s, zf;
    VI z;
  };
  // Element k's group: its parameters' index; the elements per group
  // along the row (0: one group for the whole row) and the index step
  // from one group to the next.
  int64_t GroupIndex(int64_t k) const { return ScaleIndex(k); }
  int64_t GroupLength() const { return job_.step == 0 ? 0 : job_.group; }
  int64_t GroupStep() const { return job_.step; }
  // Group idx's DotGroup: its table (UnitTable: the values Run's lookups
  // give) or the scale and zero points Run's Arith takes.
  HWY_INLINE DotGroup GroupTable(int64_t idx) const {
    const DF df;
    const VI z =
        hn::Set(DI(), kZp == ZeroPointKind::kInteger ? job_.zp_int[idx] : plan_.code_offset);
    const float zf = kZp == ZeroPointKind::kFloat ? job_.zp_float[idx] : 0.0f;
    DotGroup g{hn::Zero(df), hn::Set(df, job_.scale[idx]), hn::Set(df, zf), z};
    if constexpr (kTable) g.t = UnitTable(z, job_.scale[idx], zf);
    return g;
  }
  using Loader = L;
  const CodeRef& Code() const { return job_.code; }
  // Whether UnitValues gives the values in the loader's kDotOrder (its
  // LoadDot) rather than in element order.
  static constexpr bool kDotOrdered = kTable && HasLoadDot<L>::value;
  // Values of elements k .. k+2N-1 (k as CanDot allows) of group g, in
  // element order or (kDotOrdered) in L::kDotOrder.
  HWY_INLINE void UnitValues(const DotGroup& g, int64_t k, VF* v0, VF* v1) const {
    constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(DF()));
    if constexpr (!kTable) {
      *v0 = Arith(Decode(L::Load(job_.code, k)), g.s, g.z, g.zf);
      *v1 = Arith(Decode(L::Load(job_.code, k + kN)), g.s, g.z, g.zf);
      return;
    }
    VI lo, hi;
    if constexpr (kDotOrdered) {
      L::LoadDot(job_.code, k, &lo, &hi);
    } else if constexpr (HasLoadLow2<L>::value) {
      L::LoadLow2(job_.code, k, &lo, &hi);
    } else if constexpr (HasLoadLow<L>::value) {
      lo = L::LoadLow(job_.code, k);
      hi = L::LoadLow(job_.code, k + kN);
    } else {
      lo = L::Load(job_.code, k);
      hi = L::Load(job_.code, k + kN);
    }
    Lookup(g, lo, hi, v0, v1);
  }
  // Rows whose codes share their words (kSharedDotWords: the loader's
  // LoadDotWords; rows with the same Code().codes): DotWords loads the
  // words of elements k .. k+2N-1 once, UnitValuesFromWords gives each
  // such row's UnitValues from them.
  static constexpr bool kSharedDotWords = kDotOrdered && HasLoadDotWords<L>::value;
  HWY_INLINE void DotWords(int64_t k, VI* w0, VI* w1) const {
    if constexpr (kSharedDotWords) L::LoadDotWords(job_.code, k, w0, w1);
  }
  HWY_INLINE void UnitValuesFromWords(const DotGroup& g, VI w0, VI w1, VF* v0, VF* v1) const {
    if constexpr (kSharedDotWords) {
      VI lo, hi;
      L::DotShift(job_.code, w0, w1, &lo, &hi);
      Lookup(g, lo, hi, v0, v1);
    }
  }
#endif

 private:
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
  // UnitValues' table lookups (kTable) of codes lo and hi.
  HWY_INLINE void Lookup(const DotGroup& g, VI lo, VI hi, VF* v0, VF* v1) const {
#if HWY_TARGET <= HWY_AVX3
    // (vpermps reads an index's low 4 bits: the raw codes' upper bits are
    // never looked at.)
    *v0 = VF{_mm512_permutexvar_ps(lo.raw, g.t.raw)};
    *v1 = VF{_mm512_permutexvar_ps(hi.raw, g.t.raw)};
#else
    (void)g;
    (void)lo;
    (void)hi;
    (void)v0;
    (void)v1;  // (unreachable: kTable is false here)
#endif
  }
#endif

  // A group's table over the 16 4-bit codes: the contract's arithmetic on
  // the code values (Arith's float32(q - z), or decode(q)) with scale s and
  // additive zero zf, lane c = T[c].
  HWY_INLINE VF UnitTable(VI z, float s, float zf) const {
    const DF df;
    const DI di;
    const VF q = kFloatCode ? hn::LoadU(df, decode_)
                            : hn::ConvertTo(df, hn::Sub(Decode(hn::Iota(di, 0)), z));
    const VF prod = hn::Mul(q, hn::Set(df, s));
    return kZp == ZeroPointKind::kFloat ? hn::Add(prod, hn::Set(df, zf)) : prod;
  }

  // Stores the 2N values of `codes16` (Load16: each < 16, so the table's
  // upper half is never read) looked up in table t, rounded to the 16-bit
  // output type. bf16_hw: Bf16Hw().
  static HWY_INLINE void StoreHalfLookup(VF t, VU16 codes16, char* dst, bool stream, bool bf16_hw) {
    const DU16 du16;
#if HWY_TARGET <= HWY_AVX3
    // (The table's upper half is never read: left undefined, not zeroed.)
    const VU16 v = HalfLookup(VU16{_mm512_castsi256_si512(HalfBits(t, bf16_hw).raw)}, codes16);
#else
    const VU16 v = HalfLookup(hn::ZeroExtendVector(du16, HalfBits(t, bf16_hw)), codes16);
#endif
    uint16_t* p = reinterpret_cast<uint16_t*>(dst);
    if (stream) {
      hn::Stream(v, du16, p);
    } else {
      hn::StoreU(v, du16, p);
    }
  }

  // Stores the 2N values of codes c0, c1 looked up in table t (float32
  // lanes; StoreUnit rounds to the output type).
  static HWY_INLINE void StoreLookup(VF t, VI c0, VI c1, char* dst, bool stream) {
    const DF df;
    StoreUnit(df, hn::TableLookupLanes(t, hn::IndicesFromVec(df, c0)),
              hn::TableLookupLanes(t, hn::IndicesFromVec(df, c1)), dst, stream, kNoFacts);
  }

  // Block layouts: the whole blocks from k (if k is at a block start) up to
  // k1, block by block, each block's units unrolled so that every code
  // offset, shift and sub-block index is a constant (no per-vector address
  // arithmetic). Returns where it stopped (k if it did nothing). Values as
  // in Run's other paths: the same table or the same arithmetic per lane.
  HWY_INLINE int64_t WholeBlocks(int64_t k, int64_t k1, char* base, bool stream) {
    using D = typename L::Desc;
    const DF df;
    const DI di;
    constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(DF()));
    constexpr int64_t kUnit = 2 * kN, kB = D::kBlockElems, kSub = D::kSubElems;
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
    // Shapes this loop covers: whole units per block, and a group per
    // table (tables) or per vector (arithmetic).
    constexpr bool kShapeOk =
        kB % kUnit == 0 && (kTable || kShuffleTable ? kSub % kUnit == 0 : kSub % kN == 0);
    if constexpr (!kShapeOk) {
      return k;
    } else {
      if (hn::Lanes(df) != static_cast<size_t>(kN) || k % kB != 0) return k;
      const float* const sp = job_.scale;
      const float* const zfp = job_.zp_float;
#if HWY_TARGET <= HWY_AVX3
      if constexpr (BlockTableShape<D>::kOk) {
        // Codes of at most 5 bits: block tables.
        const int64_t n = (k1 - k) / kB, g = ScaleIndex(k);
        BlockTableRun<D, kZp, kOut>(job_.code.codes + (k / kB) * D::kBytes, n, sp + g,
                                    kZp == ZeroPointKind::kFloat ? zfp + g : nullptr,
                                    plan_.code_offset, base + k * kOutBytes, stream);
        return k + n * kB;
      }
#endif
      const int32_t* const zip = job_.zp_int;
      const VI offset = hn::Set(di, plan_.code_offset);
      const UnitFacts facts = Facts();
      auto zero_of = [&](int64_t g) HWY_ATTR {
        return kZp == ZeroPointKind::kInteger ? hn::Set(di, zip[g]) : offset;
      };
      auto zf_of = [&](int64_t g) HWY_ATTR {
        return kZp == ZeroPointKind::kFloat ? hn::Set(df, zfp[g]) : hn::Zero(df);
      };
      int64_t g0 = ScaleIndex(k);  // the block's first sub-block
      const uint8_t* block = job_.code.codes + (k / kB) * D::kBytes;
      // The contract's arithmetic on one block's units: q(p) = the N
      // integer codes at p, z(g) = what is subtracted from them in
      // sub-block g.
      auto arith_block = [&](char* out, auto q, auto z) HWY_ATTR {
#pragma GCC unroll 16
        for (int64_t j = 0; j < kB; j += kUnit) {
          const int64_t ga = g0 + j / kSub, gb = g0 + (j + kN) / kSub;
          const uint64_t p = static_cast<uint64_t>(j);
          const VF sa = hn::Set(df, sp[ga]), sb = hn::Set(df, sp[gb]);
          const VF v0 = Arith(q(p), sa, z(ga), zf_of(ga));
          const VF v1 = Arith(q(p + kN), sb, z(gb), zf_of(gb));
          StoreUnit(df, v0, v1, out + j * kOutBytes, stream, facts);
        }
      };
      // Every whole block from k through body(out), out = where it goes.
      auto each_block = [&](auto body) HWY_ATTR {
        for (; k + kB <= k1; k += kB, g0 += kB / kSub, block += D::kBytes) {
          body(base + k * kOutBytes);
        }
      };
      if constexpr (kTable) {
        // One table per sub-block, one lookup per vector.
        const bool bf16_hw = Bf16Hw();
        each_block([&](char* out) HWY_ATTR {
          VF t = hn::Zero(df);
#pragma GCC unroll 16
          for (int64_t j = 0; j < kB; j += kUnit) {
            const int64_t g = g0 + j / kSub;
            if (j % kSub == 0) {
              t = UnitTable(zero_of(g), sp[g], kZp == ZeroPointKind::kFloat ? zfp[g] : 0.0f);
            }
            const uint64_t p = static_cast<uint64_t>(j);
            if constexpr (kHalfTable) {
              StoreHalfLookup(t, L::Load16In(block, p), out + j * kOutBytes, stream, bf16_hw);
            } else {
              StoreLookup(t, L::LoadIn(block, p), L::LoadIn(block, p + kN), out + j * kOutBytes,
                          stream);
            }
          }
        });
        return k;
      }
      if constexpr (kShuffleTable) {
        // AVX2, 4-bit codes, 16-bit outputs: one pair of byte tables per
        // sub-block (ShuffleTables), 2N outputs per ShuffleLookup.
        // Each sub-block's tables are built one sub-block ahead, before
        // the current one's lookups (as ShuffleGroups').
        // With L::kCodes32 and sub-blocks of whole 32-code runs, 32 outputs
        // per Codes32In, two byte shuffles and the byte unpacks.
        // Tables of finite values (RowJob::finite: integer code values,
        // the chunk's headers finite): bfloat16 rounds without the NaN
        // case, Q4_0's are made from its 8 magnitudes (kSymmetricTables).
        constexpr bool kRuns32 = L::kCodes32 && kSub % 32 == 0;
        constexpr int64_t kStep = kRuns32 ? 32 : kUnit;
        const DU16 du16;
        const ShuffleTableSource tables(*this);
        auto run = [&](auto no_nan, auto streamed) HWY_ATTR {
          constexpr bool kNoNaNTables = decltype(no_nan)::value;
          constexpr bool kStreamed = decltype(streamed)::value;
          VU16 next_lo = hn::Zero(du16), next_hi = hn::Zero(du16);
          if (k + kB <= k1) tables.template Build<kNoNaNTables>(g0, &next_lo, &next_hi);
          each_block([&](char* out) HWY_ATTR {
            VU16 lo = next_lo, hi = next_hi;
#pragma GCC unroll 16
            for (int64_t j = 0; j < kB; j += kStep) {
              if (j % kSub == 0) {
                lo = next_lo;
                hi = next_hi;
                // (the next block's first, where there is a next block)
                if (j + kSub < kB || k + 2 * kB <= k1) {
                  tables.template Build<kNoNaNTables>(g0 + j / kSub + 1, &next_lo, &next_hi);
                }
              }
              uint16_t* const at = reinterpret_cast<uint16_t*>(out + j * kOutBytes);
#if HWY_TARGET == HWY_AVX2
              if constexpr (kRuns32) {
                __m256i a, b;
                PlaneLookup32(lo.raw, hi.raw, L::Codes32In(block, static_cast<uint64_t>(j)), &a,
                              &b);
                StoreTwo(du16, VU16{a}, VU16{b}, at, kStreamed);  // (du16's lanes: kUnit)
                continue;
              }
#endif
              const VU16 h = ShuffleLookup(lo, hi, L::Load16In(block, static_cast<uint64_t>(j)));
              if (kStreamed) {
                hn::Stream(h, du16, at);
              } else {
                hn::StoreU(h, du16, at);
              }
            }
          });
        };
        WithLoopFlags((kOut == OutType::kBF16 || kSymmetricTables) && job_.finite && kIntegerValues,
                      stream, run);
        return k;
      }
#if HWY_TARGET == HWY_AVX2
      if constexpr (kOutBytes == 2 && LoaderSymmetricFives<L>::value) {
        // AVX2, Q5_0 to 16-bit outputs where the chunk's scales are finite
        // (RowJob::finite): a block's four tables from its 16 magnitudes
        // (SymmetricFiveTables), 32 outputs per PlaneLookup32x2.
        if (job_.finite) {
          const DU16 du16;
          WithStreamFlag(stream, [&](auto streamed) HWY_ATTR {
            constexpr bool kStreamed = decltype(streamed)::value;
            each_block([&](char* out) HWY_ATTR {
              __m256i neg_lo, neg_hi, pos_lo, pos_hi;
              SymmetricFiveTables<kOut>(sp[g0], &neg_lo, &neg_hi, &pos_lo, &pos_hi);
              uint32_t fifth;
              std::memcpy(&fifth, block + D::kPlanes[1].at, sizeof(fifth));
              __m256i a, b;
              PlaneLookup32x2(neg_lo, neg_hi, pos_lo, pos_hi, L::Codes32In(block, 0),
                              FifthBits32(fifth), &a, &b);
              StoreTwo(du16, VU16{a}, VU16{b}, reinterpret_cast<uint16_t*>(out), kStreamed);
            });
          });
          return k;
        }
      }
      if constexpr (kOutBytes == 2 && BlockFiveTableShape<D>::kOk) {
        // AVX2, 5-bit codes, 16-bit outputs: two pairs of byte tables per
        // 32-element sub-block (BlockFiveTable), 32 outputs per
        // PlaneLookup32x2. Tables of finite values (RowJob::finite):
        // bfloat16 rounds without the NaN case.
        const FiveTableLanes lanes(plan_.code_offset);
        const DU16 du16;
        auto run = [&](auto no_nan, auto streamed) HWY_ATTR {
          constexpr bool kNoNaNTables = decltype(no_nan)::value;
          constexpr bool kStreamed = decltype(streamed)::value;
          each_block([&](char* out) HWY_ATTR {
#pragma GCC unroll 16
            for (int64_t j = 0; j < kB; j += 32) {
              const int64_t g = g0 + j / 32;
              __m256i t[4], low, fifth, a, b;
              BlockFiveTable<kZp, kOut, kNoNaNTables>(
                  lanes, sp[g], kZp == ZeroPointKind::kFloat ? zfp[g] : 0.0f, t);
              FiveBitCodes32<D>(block, static_cast<uint64_t>(j), &low, &fifth);
              PlaneLookup32x2(t[0], t[1], t[2], t[3], low, fifth, &a, &b);
              StoreTwo(du16, VU16{a}, VU16{b}, reinterpret_cast<uint16_t*>(out + j * kOutBytes),
                       kStreamed);
            }
          });
        };
        WithLoopFlags(kOut == OutType::kBF16 && job_.finite && kIntegerValues, stream, run);
        return k;
      }
      if constexpr (kOutBytes == 2 && BlockHalfTableShape<D>::kOk) {
        // AVX2, codes of 2-4 bits in bit planes, 16-bit outputs: a pair of
        // byte tables per kTableElems elements (BlockHalfTable), two byte
        // shuffles and the unpacks per 32 outputs. Tables of finite values
        // (RowJob::finite): bfloat16 rounds without the NaN case.
        using S = BlockHalfTableShape<D>;
        const HalfTableLanes lanes = MakeHalfTableLanes<D>(plan_.code_offset);
        const DU16 du16;
        auto run = [&](auto no_nan, auto streamed) HWY_ATTR {
          constexpr bool kNoNaNTables = decltype(no_nan)::value;
          constexpr bool kStreamed = decltype(streamed)::value;
          each_block([&](char* out) HWY_ATTR {
            __m256i lo = _mm256_setzero_si256(), hi = lo;
#pragma GCC unroll 16
            for (int64_t j = 0; j < kB; j += 32) {
              if (j % S::kTableElems == 0) {
                const int64_t g = g0 + j / kSub;
                BlockHalfTable<D, kZp, kOut, kNoNaNTables>(
                    lanes, sp + g, kZp == ZeroPointKind::kFloat ? zfp + g : nullptr, &lo, &hi);
              }
              __m256i a, b;
              PlaneLookup32(lo, hi, HalfTableCodes32<D>(block, static_cast<uint64_t>(j)), &a, &b);
              StoreTwo(du16, VU16{a}, VU16{b}, reinterpret_cast<uint16_t*>(out + j * kOutBytes),
                       kStreamed);
            }
          });
        };
        WithLoopFlags(kOut == OutType::kBF16 && job_.finite && kIntegerValues, stream, run);
        return k;
      }
#endif
      if constexpr (BlockBytesShape<D>::kOk) {
        if (BlockBytesShape<D>::OffsetOk(plan_.code_offset)) {
          // Bit-field codes: each B gathered into bytes as q - offset
          // (so a zero offset below), then one sign-extending load per N.
          const hn::Rebind<int8_t, DI> di8;
          constexpr auto kVecBytes = static_cast<int64_t>(BlockBytesShape<D>::kVecBytes);
          alignas(64) int8_t qb[kB];
          each_block([&](char* out) HWY_ATTR {
#pragma GCC unroll 16
            for (int64_t j = 0; j < kB; j += kVecBytes) {
              BlockBytes<D>(block, static_cast<uint64_t>(j), plan_.code_offset, qb + j);
            }
            arith_block(
                out, [&](uint64_t p) HWY_ATTR { return hn::PromoteTo(di, hn::Load(di8, qb + p)); },
                [&](int64_t) HWY_ATTR { return hn::Zero(di); });
          });
          return k;
        }
      }
      const auto codes_at = [&](uint64_t p) HWY_ATTR { return Decode(L::LoadIn(block, p)); };
      if (kZp != ZeroPointKind::kInteger && plan_.code_offset == 0) {
        // Nothing to subtract (Q8_0's signed codes): a constant zero, so
        // the subtraction folds away (q - 0 is q: same bits).
        each_block([&](char* out) HWY_ATTR {
          arith_block(out, codes_at, [&](int64_t) HWY_ATTR { return hn::Zero(di); });
        });
        return k;
      }
      each_block([&](char* out) HWY_ATTR { arith_block(out, codes_at, zero_of); });
      return k;
    }
  }

  // Calls run(no_nan, streamed) with both as compile-time constants
  // (std::bool_constant): the block loops' per-chunk choices, so that no
  // branch is left per store (one moved the stores out of the loop's line).
  template <class Run>
  static HWY_INLINE void WithLoopFlags(bool no_nan, bool stream, const Run& run) {
    if (no_nan) {
      WithStreamFlag(stream, [&](auto streamed) HWY_ATTR { run(std::true_type(), streamed); });
    } else {
      WithStreamFlag(stream, [&](auto streamed) HWY_ATTR { run(std::false_type(), streamed); });
    }
  }
  // Calls run(streamed), `stream` as a compile-time constant.
  template <class Run>
  static HWY_INLINE void WithStreamFlag(bool stream, const Run& run) {
    if (stream) {
      run(std::true_type());
    } else {
      run(std::false_type());
    }
  }

  // --- Scalar path (prologue, tails) -------------------------------------
  void ScalarRange(int64_t k0, int64_t k1, char* out) const {
    for (int64_t k = k0; k < k1; ++k) {
      const float v = ScalarValue(k);
      StoreOut<kOut>(v, out + (k - k0) * OutDesc<kOut>::kBytes);
    }
  }

  uint32_t ScalarCode(int64_t k) const { return L::Scalar(job_.code, k); }

  int64_t ScaleIndex(int64_t k) const {
    if (job_.per_element) return job_.map != nullptr ? job_.map[k] : k;
    return job_.base + (k / job_.group) * job_.step;
  }

  float ScalarValue(int64_t k) const {
    const int64_t idx = ScaleIndex(k);
    const float s = job_.scale[idx];
    if (kFloatCode) return decode_[ScalarCode(k)] * s;
    const int32_t q = DecodeIntCode(kCode, ScalarCode(k));
    if (kZp == ZeroPointKind::kInteger) return static_cast<float>(q - job_.zp_int[idx]) * s;

    const float prod = static_cast<float>(q - plan_.code_offset) * s;
    if (kZp == ZeroPointKind::kFloat) return prod + job_.zp_float[idx];
    return prod;
  }

  // --- Vector path ---------------------------------------------------------
  // Raw codes (unsigned bit fields) of elements k .. k+N-1.
  HWY_INLINE VI LoadCodes(int64_t k) const { return L::Load(job_.code, k); }

  // Whether bfloat16 rounding may take AVX512_BF16 here (CpuHasAvx512Bf16
  // for bfloat16 outputs on AVX-512 targets): for a local of the caller's
  // loop, which HalfBits then takes (read per table, its guarded static is
  // re-read after every output store and keeps the loop's invariants out of
  // registers: bfloat16 Q4_0 in cache ran at 0.80 of float16).
  static HWY_INLINE bool Bf16Hw() {
#if HWY_TARGET <= HWY_AVX3
    return kOut == OutType::kBF16 && CpuHasAvx512Bf16();
#else
    return false;
#endif
  }

  // 16-bit output bits of the N lanes of v (a group's table); bf16_hw:
  // Bf16Hw().
  static HWY_INLINE auto HalfBits(VF v, bool bf16_hw) {
#if HWY_TARGET <= HWY_AVX3
    return OutBits16<kHalfOut, kNormalValues>(v, bf16_hw);
#else
    (void)bf16_hw;
    const DF df;
    return NarrowBits<kHalfOut>(df, v);
#endif
  }

  // Codes of elements k .. k+2N-1 for HalfLookup in a group's table16
  // (whose halves are equal: Load16Low where the loader has it).
  static HWY_INLINE VU16 GroupCodes16(const CodeRef& codes, int64_t k) {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (HasLoad16Low<L>::value) return L::Load16Low(codes, k);
#endif
    return L::Load16(codes, k);
  }

  static HWY_INLINE VU16 HalfLookup(VU16 table16, VU16 c) {
#if HWY_TARGET <= HWY_AVX3
    return PermuteHalves(table16, c);
#else
    (void)c;
    return table16;  // unreachable: kHalfTable is false here
#endif
  }

  // kShuffleTable: lane i of the result = the 16-bit value whose low byte
  // is byte c[i] of each 128-bit half of `lo` and whose high byte is byte
  // c[i] of each half of `hi` (c: Load16's codes, each < 16).
  static HWY_INLINE VU16 ShuffleLookup(VU16 lo, VU16 hi, VU16 c) {
#if HWY_TARGET == HWY_AVX2
    const __m256i idx = _mm256_or_si256(c.raw, _mm256_slli_epi16(c.raw, 8));  // c in both bytes
    return VU16{_mm256_blendv_epi8(_mm256_shuffle_epi8(lo.raw, idx),
                                   _mm256_shuffle_epi8(hi.raw, idx), _mm256_set1_epi16(-256))};
#else
    (void)hi;
    (void)c;
    return lo;  // unreachable: kShuffleTable is false here
#endif
  }

  // Integer value q of raw codes (sign extension for signed sub-byte codes).
  HWY_INLINE VI Decode(VI c) const {
    const DI di;
    if (kCode == CodeKind::kS4) return hn::Sub(hn::Xor(c, hn::Set(di, 8)), hn::Set(di, 8));
    return c;
  }

  // The contract's arithmetic on N lanes (for float codes, q holds the raw
  // bit patterns: decode through the table, then x * s).
  HWY_INLINE VF Arith(VI q, VF s, VI z, VF zf) const {
    const DF df;
    if constexpr (kCode == CodeKind::kF8E4M3FN || kCode == CodeKind::kF8E5M2) {
      (void)z;
      (void)zf;
      return hn::Mul(DecodeFloat8(q), s);
    }
    if (kFloatCode) {
      (void)z;
      (void)zf;
      return hn::Mul(FloatCodeValues(q), s);
    }
    const VF prod = hn::Mul(hn::ConvertTo(df, hn::Sub(q, z)), s);
    return kZp == ZeroPointKind::kFloat ? hn::Add(prod, zf) : prod;
  }

  // Float codes q (one bit pattern per lane) -> decode_[q]. On AVX2 a
  // 16-entry table (E2M1, a 4-bit value table: q < 16) is two registers:
  // each half permuted by q's low 3 bits (vpermps), blended on bit 3 —
  // the table's own entries, so the gather's bits, at a fraction of its
  // cost (the gather of 8 lanes held iq4 / mxfp4 / nf4 float32 outputs
  // at 0.3-0.4 x r+w on Zen 3).
  HWY_INLINE VF FloatCodeValues(VI q) const {
    const DF df;
#if HWY_TARGET == HWY_AVX2
    if constexpr (kCode == CodeKind::kF4E2M1 || kCode == CodeKind::kTable4) {
      const __m256 lo = _mm256_permutevar8x32_ps(_mm256_loadu_ps(decode_), q.raw);
      const __m256 hi = _mm256_permutevar8x32_ps(_mm256_loadu_ps(decode_ + 8), q.raw);
      const __m256 bit3 = _mm256_castsi256_ps(_mm256_slli_epi32(q.raw, 28));
      return VF{_mm256_blendv_ps(lo, hi, bit3)};
    }
#endif
    return hn::GatherIndex(df, decode_, q);
  }

  // float8_e4m3fn / float8_e5m2 bits (one per lane) -> their float32
  // values, exactly the decode table's (FloatCodeTable) bits, by
  // arithmetic instead of a gather: the magnitude's exponent and mantissa
  // bits placed at the top of a float32's and the result scaled by
  // 2^(127 - bias) (exact: a subnormal float8 is a float32 subnormal
  // made normal), the sign OR-ed in; e4m3fn's S.1111.111 is NaN, e5m2's
  // top exponent infinity or NaN (0x7FC00000 with the sign, as the table).
  HWY_INLINE VF DecodeFloat8(VI q) const {
    const DF df;
    const DI di;
    constexpr bool kE4 = kCode == CodeKind::kF8E4M3FN;
    constexpr int kMantBits = kE4 ? 3 : 2;
    const VI mag = hn::And(q, hn::Set(di, 0x7F));
    const VF value = hn::Mul(hn::BitCast(df, hn::ShiftLeft<23 - kMantBits>(mag)),
                             hn::Set(df, kE4 ? 0x1p120f : 0x1p112f));
    const VI sign = hn::ShiftLeft<24>(hn::And(q, hn::Set(di, 0x80)));
    VI bits = hn::Or(hn::BitCast(di, value), sign);
    const VI nan = hn::Or(hn::Set(di, 0x7FC00000), sign);
    if constexpr (kE4) {
      bits = hn::IfThenElse(hn::Eq(mag, hn::Set(di, 0x7F)), nan, bits);
    } else {
      const VI inf = hn::Or(hn::Set(di, 0x7F800000), sign);
      const VI special = hn::IfThenElse(hn::Eq(mag, hn::Set(di, 0x7C)), inf, nan);
      bits = hn::IfThenElse(hn::Gt(mag, hn::Set(di, 0x7B)), special, bits);
    }
    return hn::BitCast(df, bits);
  }

  // Per-element rows on AVX-512 with 4-bit codes and a zero point that is
  // the same for every element (none, a code offset, or a float zero):
  // lane c of ValueTable() is float32(q(c) - z) (float codes: decode(c)),
  // so a vector's code values are one permute of its raw codes instead of
  // a sign extension, subtraction and conversion (or a gather). Same bits:
  // each entry is computed by Arith's own operations (a small integer,
  // exact) or is the decode table's entry.
  static constexpr bool kValueTable = kTable && kZp != ZeroPointKind::kInteger;

  HWY_INLINE VF ValueTable() const {
    const DF df;
    const DI di;
    if constexpr (!kValueTable) return hn::Zero(df);  // unused
    if constexpr (kFloatCode) return hn::LoadU(df, decode_);
    return hn::ConvertTo(df, hn::Sub(Decode(hn::Iota(di, 0)), hn::Set(di, plan_.code_offset)));
  }

  // The codes of elements kk .. kk+N-1 as CodeArith takes them: where
  // kValueTable, the loader's LoadLow where it has one (vpermps reads only
  // the index's low 4 bits); else L::Load.
  HWY_INLINE VI UnitCodesAt(const CodeRef& codes, int64_t kk) const {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kValueTable && HasLoadLow<L>::value) return L::LoadLow(codes, kk);
#endif
    return L::Load(codes, kk);
  }
  // UnitCodesAt of kk (lo) and kk + N (hi): one load where kValueTable and
  // the loader has LoadLow2 (AVX-512), or the loader has Load2 (AVX2).
  HWY_INLINE void UnitCodes(const CodeRef& codes, int64_t kk, VI* lo, VI* hi) const {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kValueTable && HasLoadLow2<L>::value) {
      L::LoadLow2(codes, kk, lo, hi);
      return;
    }
#elif HWY_TARGET == HWY_AVX2
    if constexpr (HasLoad2<L>::value) {
      L::Load2(codes, kk, lo, hi);
      return;
    }
#endif
    *lo = UnitCodesAt(codes, kk);
    *hi = UnitCodesAt(codes, kk + static_cast<int64_t>(hn::Lanes(DF())));
  }
  // Values of codes c (UnitCodesAt): through the value table vt where
  // kValueTable, else Arith.
  HWY_INLINE VF CodeArith(VI c, VF vt, VF s, VI z, VF zf) const {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (kValueTable) {
      const VF prod = hn::Mul(VF{_mm512_permutexvar_ps(c.raw, vt.raw)}, s);
      return kZp == ZeroPointKind::kFloat ? hn::Add(prod, zf) : prod;
    }
#endif
    (void)vt;
    return Arith(Decode(c), s, z, zf);
  }
  HWY_INLINE VF LoadArith(const CodeRef& codes, int64_t kk, VF vt, VF s, VI z, VF zf) const {
    return CodeArith(UnitCodesAt(codes, kk), vt, s, z, zf);
  }

  struct Group {
    VF s, zf, table;
    VI z;
    VU16 table16;  // kHalfTable: output bits of T[c] in lanes c and 16 + c
    // kShuffleTable: byte c of each 128-bit half of table16 / table16_hi
    // holds the low / high byte of T[c]'s output bits.
    VU16 table16_hi;
  };

  HWY_INLINE Group MakeGroup(int64_t idx) const {
    const DF df;
    const DI di;
    Group g;
    g.s = hn::Set(df, job_.scale[idx]);
    g.z = hn::Set(di, kZp == ZeroPointKind::kInteger ? job_.zp_int[idx] : plan_.code_offset);
    g.zf = hn::Set(df, kZp == ZeroPointKind::kFloat ? job_.zp_float[idx] : 0.0f);
    if (kTable && kFloatCode) {
      // T[c] = decode(c) * s: the 16 decoded values are a plain load (the
      // same product as Arith's, without its gather).
      g.table = hn::Mul(hn::LoadU(df, decode_), g.s);
    } else if (kTable) {
      // T[c] for every 4-bit code c, by the same operations as Arith.
      g.table = Arith(Decode(hn::Iota(di, 0)), g.s, g.z, g.zf);
    } else {
      g.table = g.s;
    }
    if (kHalfTable) {
      const DU16 du16;
      const auto h = HalfBits(g.table, Bf16Hw());
      g.table16 = hn::Combine(du16, h, h);
    } else {
      g.table16 = hn::Zero(DU16());
    }
    g.table16_hi = hn::Zero(DU16());
    if constexpr (kShuffleTable) ShuffleTables(g.s, g.z, g.zf, &g.table16, &g.table16_hi);
    return g;
  }

  // kShuffleTable: ShuffleLookup's tables of the 16 4-bit codes' values
  // with scale s, zero z and additive zero zf (Arith's operations, rounded
  // once per value). (Public: the AVX2 GPTQ code tiles look their
  // transposed codes up in them, kernels/dequantize_columns.cc.)
 public:
  HWY_INLINE void ShuffleTables(VF s, VI z, VF zf, VU16* lo, VU16* hi) const {
#if HWY_TARGET == HWY_AVX2
    const DF df;
    const DI di;
    // (Float codes: the 16 decoded values are a plain load — Arith's
    // product without its lookup, FloatCodeValues.)
    const VF t0 =
        kFloatCode ? hn::Mul(hn::LoadU(df, decode_), s) : Arith(Decode(hn::Iota(di, 0)), s, z, zf);
    const VF t1 = kFloatCode ? hn::Mul(hn::LoadU(df, decode_ + 8), s)
                             : Arith(Decode(hn::Iota(di, 8)), s, z, zf);
    ShuffleTablesOf(t0, t1, lo, hi);
#else
    (void)s;
    (void)z;
    (void)zf;
    *lo = *hi = hn::Zero(DU16());  // unreachable: kShuffleTable is false here
#endif
  }

  // ShuffleTables' second half: T[0..7] = t0, T[8..15] = t1 (float32),
  // rounded to the output bits; *lo = their low bytes in both 128-bit
  // halves, *hi their high bytes.
  // kNoNaN: no T[c] is NaN (bfloat16 rounds without the NaN case).
  template <bool kNoNaN = false>
  static HWY_INLINE void ShuffleTablesOf(VF t0, VF t1, VU16* lo, VU16* hi) {
#if HWY_TARGET == HWY_AVX2
    BytePlanes16<kHalfOut, kNoNaN>(t0.raw, t1.raw, &lo->raw, &hi->raw);
#else
    (void)t0;
    (void)t1;
    *lo = *hi = hn::Zero(DU16());  // unreachable: kShuffleTable is false here
#endif
  }

 private:
#if HWY_TARGET <= HWY_AVX3
  // A group's table (float32, or kHalfTable: its 16 output values in lanes
  // c and 16 + c), MakeGroup's (and UnitTable's) by the same operations, with
  // what does not change along the row in members of this local object
  // (the pointers, the code values q - z for a constant z, the CPU's
  // bfloat16 flag): MakeGroup reloads them from the kernel's members every
  // group, since the output stores may alias them, and with 128-element
  // groups that was as many instructions as the group's four units.
  struct GroupTables {
    explicit HWY_INLINE GroupTables(const RowKernel& rk)
        : sp(rk.job_.scale),
          zip(rk.job_.zp_int),
          zfp(rk.job_.zp_float),
          bf16_hw(kOut == OutType::kBF16 && CpuHasAvx512Bf16()),
          iota(rk.Decode(hn::Iota(DI(), 0))),
          q(kFloatCode ? hn::LoadU(DF(), rk.decode_)
                       : hn::ConvertTo(DF(), hn::Sub(iota, hn::Set(DI(), rk.plan_.code_offset)))) {}
    // Group i's 16 values, float32 (lane c: code c).
    HWY_INLINE VF Values(const RowKernel& rk, int64_t i) const {
      const DF df;
      const VF s = hn::Set(df, sp[i]);
      VF t;
      if constexpr (kFloatCode) {
        t = hn::Mul(q, s);
      } else if constexpr (kZp == ZeroPointKind::kInteger) {
        t = rk.Arith(iota, s, hn::Set(DI(), zip[i]), hn::Zero(df));
      } else {
        t = hn::Mul(q, s);
        if constexpr (kZp == ZeroPointKind::kFloat) t = hn::Add(t, hn::Set(df, zfp[i]));
      }
      return t;
    }
    // Group i's 16 output values (the upper 16 bits of each lane zero).
    HWY_INLINE auto Half(const RowKernel& rk, int64_t i) const {
      return OutBits16<kHalfOut, kNormalValues>(Values(rk, i), bf16_hw);
    }
    // Group i's table, the values in lanes c and 16 + c (any index whose
    // low 4 bits are the code: GroupCodes16).
    HWY_INLINE VU16 operator()(const RowKernel& rk, int64_t i) const {
      const auto h = Half(rk, i);
      return hn::Combine(DU16(), h, h);
    }
    // Group i's table in lanes 0 .. 15 only (the upper half undefined): for
    // clean codes (< 16: L::Load16).
    HWY_INLINE VU16 Low(const RowKernel& rk, int64_t i) const {
      return VU16{_mm512_castsi256_si512(Half(rk, i).raw)};
    }
    const float* sp;
    const int32_t* zip;
    const float* zfp;
    bool bf16_hw;
    VI iota;  // Decode(c) for c = 0 .. 15
    VF q;     // decode(c), or float32(Decode(c) - code_offset)
  };

  // One unit through the 16-bit table t16 at base + k * 2.
  template <bool kStream>
  static HWY_INLINE void HalfTableUnit(const CodeRef& codes, VU16 t16, int64_t k, char* base) {
    const VU16 h = HalfLookup(t16, GroupCodes16(codes, k));
    uint16_t* p = reinterpret_cast<uint16_t*>(base + k * 2);
    if (kStream) {
      hn::Stream(h, DU16(), p);
    } else {
      hn::StoreU(h, DU16(), p);
    }
  }

#endif  // HWY_TARGET <= HWY_AVX3

#if NIBBLE_FLOAT8_TABLES
  // Whether Float8Tables(s) gives every code's product with scale s. AVX3_DL
  // (each of the 128 magnitudes' products rounded): a finite s (the planes'
  // sign rule). AVX2 (StoreFloat8Runs' exponent adds): s = +-2^E x 1.f
  // normal with min_exp <= E <= max_exp - 9 (the output type's), so that
  // 448 x |s| < 1.75 x 2^max_exp is finite in the output and e_lo <= 7 (at
  // most 4 low tables).
  static HWY_INLINE bool Float8TableFits(float s) {
#if HWY_TARGET == HWY_AVX2
    using O = OutDesc<kOut>;
    uint32_t b;
    std::memcpy(&b, &s, 4);
    const int field = static_cast<int>((b >> 23) & 0xFF);  // E + 127
    return field != 0 && field - 127 >= O::kMinExp && field - 127 <= O::kMaxExp - 9;
#else
    return std::isfinite(s);
#endif
  }

  // The tables of a group with scale s (Float8TableFits(s)): each entry
  // Arith's product (the decode table's value times s) rounded as the
  // arithmetic path rounds it. AVX2: e_lo = max(1, min_exp + 7 - E), the
  // lowest exponent field e whose products (at least 2^(e - 7) x 2^E) are
  // all normal in the output type; bfloat16 has e_lo = 1 (one low table)
  // for every |s| >= 2^-120, float16 for |s| >= 2^-8 (DeepSeek-like
  // scales of about 2^-12: e_lo = 5, three low tables).
  HWY_INLINE Float8Planes Float8Tables(float s, bool bf16_hw) const {
#if HWY_TARGET == HWY_AVX2
    (void)bf16_hw;
    using O = OutDesc<kOut>;
    uint32_t b;
    std::memcpy(&b, &s, 4);
    const int e = static_cast<int>((b >> 23) & 0xFF) - 127;
    const int e_lo = std::max(1, O::kMinExp + 7 - e);
    Float8Planes t;
    t.first = 8 * e_lo + 1;
    t.tables = (t.first + 15) / 16;
    const DF df;
    const VF sv = hn::Set(df, s);
    VU16 lo, hi;
    auto keep = [](VU16 v) HWY_ATTR { return _mm256_castsi256_si128(v.raw); };
    ShuffleTablesOf(hn::Mul(hn::LoadU(df, decode_ + 8 * e_lo), sv),
                    hn::Mul(hn::LoadU(df, decode_ + 8 * e_lo + 8), sv), &lo, &hi);
    t.lo = keep(lo);
    t.hi = keep(hi);
    for (int j = 0; j < 4; ++j) {
      // Codes 16 j - 1 .. 16 j + 14 (j = 0: 0x7F, then 0 .. 14).
      VF a;
      if (j == 0) {
        const __m256 shifted = _mm256_permutevar8x32_ps(hn::LoadU(df, decode_).raw,
                                                        _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6));
        a = VF{_mm256_blend_ps(shifted, _mm256_set1_ps(decode_[0x7F]), 0x01)};
      } else {
        a = hn::LoadU(df, decode_ + 16 * j - 1);
      }
      ShuffleTablesOf(hn::Mul(a, sv), hn::Mul(hn::LoadU(df, decode_ + 16 * j + 7), sv), &lo, &hi);
      t.low_lo[j] = keep(lo);
      t.low_hi[j] = keep(hi);
    }
    return t;
#else
    return Float8MagnitudePlanes<kOut>(decode_, s, bf16_hw);
#endif
  }

  // kFloat8Planes: the runs of kFloat8Run codes of [k, k1) through each
  // group's byte-plane tables (Float8Tables; StoreFloat8x64 on AVX3_DL,
  // StoreFloat8x32 on AVX2), where every group holds whole runs: from group
  // idx (ending at g_end, a whole number of runs after k) on. A group whose
  // scale the tables cannot take (Float8TableFits) takes the group loop's
  // arithmetic (GroupUnits). Returns the first element not written
  // (k + kFloat8Run > k1). fp8-block (DeepSeek's 128 x 128 blocks) in
  // cache, one thread, against DecodeFloat8 and the rounding: bfloat16
  // 5.97 -> 18.90 G el/s, float16 7.14 -> 19.13 on the Intel guest
  // (AVX3_DL); 3.25 -> 9.63 and 4.84 -> 7.28 on the Zen 3 guest (AVX2).
  template <bool kStream>
  HWY_INLINE int64_t Float8Groups(const CodeRef& codes, int64_t idx, int64_t g_end, int64_t k,
                                  int64_t k1, char* base) const {
    const bool bf16_hw = Bf16Hw();
    int64_t gi = k / job_.group;  // the group's index in the row
    for (;; ++gi) {
      const int64_t stop = g_end < k1 ? g_end : k1;
      // No run left (k1 within a run): done, the group's scale unread (past
      // the row's last group it may not exist). Else k is the group's start.
      if (k + kFloat8Run > stop) return k;
      const float s = job_.scale[idx];
      if (Float8TableFits(s)) {
        const auto make = [&]() HWY_ATTR { return Float8Tables(s, bf16_hw); };
        Float8Planes scratch;
        const Float8Planes& t =
            job_.float8 != nullptr ? job_.float8->Get(gi, s, make, &scratch) : (scratch = make());
#if HWY_TARGET == HWY_AVX2
        constexpr int kMant = OutDesc<kOut>::kMantBits;
        const uint8_t* const p = L::Address(codes, 0);  // (one byte a code)
        switch (t.tables) {
          case 1:
            k = StoreFloat8Runs<kMant, 1>(t, p, k, stop, base, kStream);
            break;
          case 2:
            k = StoreFloat8Runs<kMant, 2>(t, p, k, stop, base, kStream);
            break;
          case 3:
            k = StoreFloat8Runs<kMant, 3>(t, p, k, stop, base, kStream);
            break;
          default:
            k = StoreFloat8Runs<kMant, 4>(t, p, k, stop, base, kStream);
            break;
        }
#else
        for (; k + kFloat8Run <= stop; k += kFloat8Run) {
          StoreFloat8x64(t, L::Address(codes, k), base + k * 2, kStream);
        }
#endif
      } else {
        const Group g = MakeGroup(idx);  // the group loop's arithmetic
        k = GroupUnits<kStream>(codes, g, g.z, k, stop, base);
      }
      if (k != g_end) return k;  // k1 inside this group: less than a run left
      FetchGroup(codes, k, k1);
      idx += job_.step;
      g_end += job_.group;
    }
  }
#endif  // NIBBLE_FLOAT8_TABLES
#if HWY_TARGET <= HWY_AVX3

  // The whole units of [k, k1) through their groups' tables (GroupTables:
  // 16-bit outputs, or float32 where the loader has LoadLow2), where every
  // group holds whole units: from group idx (ending at g_end, a whole
  // number of units after k) on. Returns the first element not written
  // (k + 2N > k1).
  template <bool kStream>
  HWY_INLINE int64_t TableGroups(const CodeRef& codes, int64_t idx, int64_t g_end, int64_t k,
                                 int64_t k1, char* base) const {
    const int64_t unit = 2 * static_cast<int64_t>(hn::Lanes(DF()));
    const int64_t step = job_.step, group = job_.group;
    const GroupTables tables(*this);
    if constexpr (OutDesc<kOut>::kBytes == 4) {
      if constexpr (HasLoadLow2<L>::value) {
        // float32: the table in one register, vpermps on the codes' low 4
        // bits (LoadLow2), as GroupUnits.
        VF t = tables.Values(*this, idx);
        for (;;) {
          const int64_t stop = g_end < k1 ? g_end : k1;
          for (; k + unit <= stop; k += unit) {
            VI c0, c1;
            L::LoadLow2(codes, k, &c0, &c1);
            StoreUnit(DF(), VF{_mm512_permutexvar_ps(c0.raw, t.raw)},
                      VF{_mm512_permutexvar_ps(c1.raw, t.raw)}, base + k * 4, kStream,
                      false);  // (float32)
          }
          if (k + unit > k1) return k;
          idx += step;
          g_end += group;
          t = tables.Values(*this, idx);
        }
      }
      return k;  // (loaders without LoadLow2 never come here)
    } else {
      if (group == unit) {
        // One unit per group: no group bookkeeping; the table in one half
        // and clean codes (measured: a full table and GroupCodes16 4-13 %
        // slower here for float16, one more instruction per unit).
        for (; k + unit <= k1; k += unit, idx += step) {
          const VU16 h = HalfLookup(tables.Low(*this, idx), L::Load16(codes, k));
          uint16_t* p = reinterpret_cast<uint16_t*>(base + k * 2);
          if (kStream) {
            hn::Stream(h, DU16(), p);
          } else {
            hn::StoreU(h, DU16(), p);
          }
        }
        return k;
      }
      VU16 t16 = tables(*this, idx);
      for (;;) {
        const int64_t stop = g_end < k1 ? g_end : k1;
        for (; k + unit <= stop; k += unit) HalfTableUnit<kStream>(codes, t16, k, base);
        if (k + unit > k1) return k;
        idx += step;
        g_end += group;
        t16 = tables(*this, idx);
      }
    }
  }
#endif

#if HWY_TARGET == HWY_AVX2
  // kPow2Tables: a block's byte-plane tables where its scale is 2^k with k
  // in the code values' range for the output type (Pow2Table): the values'
  // bits in the type with k << shift added to the nonzero ones — no
  // multiply, no rounding, the same bits (out_types.h MakePow2Table) —
  // made once per process for every such k and then loaded: one unsigned
  // compare picks the scales that qualify (GGUF MXFP4, 16-bit outputs: in
  // cache on the Zen 3 guest, see bench/EXPERIMENTS.md).
  static constexpr bool kPow2Tables = kShuffleTable && LoaderPow2Scales<L>::value;
  struct Pow2Planes {
    // Scale s = 2^k qualifies where x = rotr(bits(s) - base, 23) < limit
    // (rotated, any mantissa bit lands above bit 8; the sign bit counts
    // as a field above 255): x = k - k_lo, planes[x] its tables (low
    // bytes, high bytes, each in both 128-bit halves). None qualifies
    // where the values have no Pow2Table (limit 0).
    uint32_t base = 0, limit = 0;
    alignas(32) uint8_t planes[256][2][32];
  };
  // The planes of the descriptor's code values in kOut, once per process.
  static const Pow2Planes& BlockPow2Planes() {
    static const Pow2Planes planes = [] {
      Pow2Planes t{};
      Pow2Table p;
      float v[16];
      for (int c = 0; c < 16; ++c) v[c] = L::Desc::kValues[c];
      if (!MakePow2Table(v, kOut, &p)) return t;
      t.base = static_cast<uint32_t>(p.k_lo + 127) << 23;
      t.limit = static_cast<uint32_t>(p.k_hi - p.k_lo) + 1;
      for (uint32_t x = 0; x < t.limit; ++x) {
        const uint32_t add = (x + static_cast<uint32_t>(p.k_lo)) << p.shift;  // k << shift
        for (int c = 0; c < 32; ++c) {
          const uint32_t bits = p.bits[c % 16];
          const uint32_t b = ((bits & 0x7FFFu) != 0 ? bits + add : bits) & 0xFFFFu;
          t.planes[x][0][c] = static_cast<uint8_t>(b & 0xFF);
          t.planes[x][1][c] = static_cast<uint8_t>(b >> 8);
        }
      }
      return t;
    }();
    return planes;
  }
  static const Pow2Planes* Pow2PlanesOf() {
    if constexpr (kPow2Tables) {
      return &BlockPow2Planes();
    } else {
      return nullptr;
    }
  }
#endif

  // kShuffleTable (AVX2): groups' byte-plane tables (ShuffleTables' operations, so the same
  // bits) from what does not change along a job in locals of the caller's loop: the job's
  // parameter pointers and the 16 codes' values before the scale, converted once where what
  // is subtracted is the plan's constant (float codes: the decoded values). As members of
  // the kernel they are reloaded after every output store (which may alias them).
  struct ShuffleTableSource {
    explicit HWY_INLINE ShuffleTableSource(const RowKernel& rk)
        : sp(rk.job_.scale),
          zip(rk.job_.zp_int),
          zfp(rk.job_.zp_float),
          q0(rk.Decode(hn::Iota(DI(), 0))),
          q1(rk.Decode(hn::Iota(DI(), 8))),
          c0(kFloatCode ? hn::LoadU(DF(), rk.decode_)
                        : hn::ConvertTo(DF(), hn::Sub(q0, hn::Set(DI(), rk.plan_.code_offset)))),
          c1(kFloatCode ? hn::LoadU(DF(), rk.decode_ + 8)
                        : hn::ConvertTo(DF(), hn::Sub(q1, hn::Set(DI(), rk.plan_.code_offset)))) {}
    // Group i's tables to *lo, *hi (kNoNaN: ShuffleTablesOf's).
    template <bool kNoNaN = false>
    HWY_INLINE void Build(int64_t i, VU16* lo, VU16* hi) const {
#if HWY_TARGET == HWY_AVX2
      if constexpr (kPow2Tables) {
        uint32_t b;
        std::memcpy(&b, &sp[i], 4);
        const uint32_t d = b - pow2_base, x = (d >> 23) | (d << 9);
        if (__builtin_expect(x < pow2_limit, 1)) {
          const auto* t = reinterpret_cast<const __m256i*>(pow2->planes[x]);
          *lo = VU16{_mm256_load_si256(t)};
          *hi = VU16{_mm256_load_si256(t + 1)};
          return;
        }
      }
      if constexpr (kSymmetricTables && kNoNaN) {
        const VF m = hn::Mul(VF{_mm256_setr_ps(1, 2, 3, 4, 5, 6, 7, 8)}, hn::Set(DF(), sp[i]));
        // v: m_j's bits at bytes 2j (low), 2j + 1 (high) of both halves.
        __m256i v;
        if constexpr (kHalfOut == OutType::kBF16) {
          const __m256i r = _mm256_shuffle_epi8(
              BF16Rounded<true>(m.raw),
              _mm256_setr_epi8(2, 3, 6, 7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1, 2, 3, 6,
                               7, 10, 11, 14, 15, -1, -1, -1, -1, -1, -1, -1, -1));
          v = _mm256_permute4x64_epi64(r, 0x88);  // quadwords 0, 2, 0, 2
        } else {
          v = _mm256_broadcastsi128_si256(NarrowBits<kHalfOut>(DF(), m).raw);
        }
        // Code c < 8: m_(7 - c), sign flipped; c = 8: m_0's sign bit only;
        // c > 8: m_(c - 9).
        const __m256i idx_lo =
            _mm256_setr_epi8(14, 12, 10, 8, 6, 4, 2, 0, -1, 0, 2, 4, 6, 8, 10, 12, 14, 12, 10, 8, 6,
                             4, 2, 0, -1, 0, 2, 4, 6, 8, 10, 12);
        const __m256i idx_hi =
            _mm256_setr_epi8(15, 13, 11, 9, 7, 5, 3, 1, 1, 1, 3, 5, 7, 9, 11, 13, 15, 13, 11, 9, 7,
                             5, 3, 1, 1, 1, 3, 5, 7, 9, 11, 13);
        const __m256i flip = _mm256_setr_epi8(-128, -128, -128, -128, -128, -128, -128, -128, 0, 0,
                                              0, 0, 0, 0, 0, 0, -128, -128, -128, -128, -128, -128,
                                              -128, -128, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m256i keep =
            _mm256_setr_epi8(-1, -1, -1, -1, -1, -1, -1, -1, -128, -1, -1, -1, -1, -1, -1, -1, -1,
                             -1, -1, -1, -1, -1, -1, -1, -128, -1, -1, -1, -1, -1, -1, -1);
        *lo = VU16{_mm256_shuffle_epi8(v, idx_lo)};
        *hi = VU16{_mm256_and_si256(_mm256_xor_si256(_mm256_shuffle_epi8(v, idx_hi), flip), keep)};
        return;
      }
#endif
      const DF df;
      const VF s = hn::Set(df, sp[i]);
      if constexpr (!kFloatCode && kZp == ZeroPointKind::kInteger) {
        // Arith with the group's z.
        const VI z = hn::Set(DI(), zip[i]);
        ShuffleTablesOf<kNoNaN>(hn::Mul(hn::ConvertTo(df, hn::Sub(q0, z)), s),
                                hn::Mul(hn::ConvertTo(df, hn::Sub(q1, z)), s), lo, hi);
      } else if constexpr (!kFloatCode && kZp == ZeroPointKind::kFloat) {
        const VF zf = hn::Set(df, zfp[i]);  // Arith's product plus zf
        ShuffleTablesOf<kNoNaN>(hn::Add(hn::Mul(c0, s), zf), hn::Add(hn::Mul(c1, s), zf), lo, hi);
      } else {
        ShuffleTablesOf<kNoNaN>(hn::Mul(c0, s), hn::Mul(c1, s), lo, hi);
      }
    }
    HWY_INLINE void operator()(int64_t i, VU16* lo, VU16* hi) const { Build<false>(i, lo, hi); }
#if HWY_TARGET == HWY_AVX2
    const Pow2Planes* pow2 = Pow2PlanesOf();
    uint32_t pow2_base = kPow2Tables ? pow2->base : 0, pow2_limit = kPow2Tables ? pow2->limit : 0;
#endif
    const float* sp;
    const int32_t* zip;
    const float* zfp;
    VI q0, q1;
    VF c0, c1;
  };

  // kShuffleTable (AVX2): the whole units of [k, stop) through one
  // group's byte-plane tables lo / hi (ShuffleTables). Returns the first
  // element not written.
  template <bool kStream>
  HWY_INLINE int64_t ShuffleUnits(const CodeRef& codes, VU16 lo, VU16 hi, int64_t k, int64_t stop,
                                  char* base) const {
    const DU16 du16;
    const int64_t unit = 2 * static_cast<int64_t>(hn::Lanes(DF()));
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
#if HWY_TARGET == HWY_AVX2
    if constexpr (DenseNibbleBytes<L>::value) {
      // 32 outputs from 16 bytes (whole bytes: an even first code).
      for (; !codes.odd_start && k + 2 * unit <= stop; k += 2 * unit) {
        __m256i a, b;
        DenseNibbleLookup32<DenseNibbleBytes<L>::kHighFirst>(
            _mm256_broadcastsi128_si256(
                _mm_loadu_si128(reinterpret_cast<const __m128i*>(L::Address(codes, k)))),
            lo.raw, hi.raw, &a, &b);
        __m256i* p = reinterpret_cast<__m256i*>(base + k * kOutBytes);
        if (kStream) {
          _mm256_stream_si256(p, a);
          _mm256_stream_si256(p + 1, b);
        } else {
          _mm256_storeu_si256(p, a);
          _mm256_storeu_si256(p + 1, b);
        }
      }
    }
#endif
    for (; k + unit <= stop; k += unit) {
      const VU16 h = ShuffleLookup(lo, hi, L::Load16(codes, k));
      uint16_t* p = reinterpret_cast<uint16_t*>(base + k * kOutBytes);
      if (kStream) {
        hn::Stream(h, du16, p);
      } else {
        hn::StoreU(h, du16, p);
      }
    }
    return k;
  }

  // kShuffleTable (AVX2): the whole units of [k, k1) where every group
  // holds whole units, from group idx (ending at g_end, a whole number of
  // units after k) on. Returns the first element not written
  // (k + 2N > k1). Each group's tables are built one group ahead, before
  // the current group's lookups, from locals (ShuffleTableSource): the
  // group loop's MakeGroup reloads the job's members after every store
  // and starts a table's chain (scale, product, rounding, byte split, about
  // 25 cycles) only after the previous group's lookups, and the
  // out-of-order window did not hide it: PMX int4 G = 32 to float16 in
  // cache took about 34 cycles per group on Zen 3 (the same operations in
  // a lean loop: 11).
  template <bool kStream>
  HWY_INLINE int64_t ShuffleGroups(const CodeRef& codes, int64_t idx, int64_t g_end, int64_t k,
                                   int64_t k1, char* base) const {
    const int64_t unit = 2 * static_cast<int64_t>(hn::Lanes(DF()));
    const int64_t step = job_.step, group = job_.group;
    const ShuffleTableSource tables(*this);
    VU16 lo, hi;
    tables(idx, &lo, &hi);
    for (;;) {
      const int64_t stop = g_end < k1 ? g_end : k1;
      VU16 next_lo = lo, next_hi = hi;
      if (g_end + unit <= k1) tables(idx + step, &next_lo, &next_hi);
      k = ShuffleUnits<kStream>(codes, lo, hi, k, stop, base);
      if (k + unit > k1) return k;
      if constexpr (kFetchAhead > 0 && HasAddress<L>::value) FetchGroup(codes, k, k1);
      idx += step;
      g_end += group;
      lo = next_lo;
      hi = next_hi;
    }
  }

  // The whole units from k up to stop (all in group g), z: what is
  // subtracted from the codes (g.z, or an equal constant that folds away).
  // Returns the first element not written.
  template <bool kStream>
  HWY_INLINE int64_t GroupUnits(const CodeRef& codes, const Group& g, VI z, int64_t k, int64_t stop,
                                char* base) const {
    const DF df;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
    const UnitFacts facts = Facts();
    for (; k + 2 * n <= stop; k += 2 * n) {
#if HWY_TARGET <= HWY_AVX3
      if constexpr (kTable && HasLoadLow2<L>::value) {
        // vpermps reads only the codes' low 4 bits.
        VI c0, c1;
        L::LoadLow2(codes, k, &c0, &c1);
        StoreUnit(df, VF{_mm512_permutexvar_ps(c0.raw, g.table.raw)},
                  VF{_mm512_permutexvar_ps(c1.raw, g.table.raw)}, base + k * kOutBytes, kStream,
                  facts);
        continue;
      }
#elif HWY_TARGET == HWY_AVX2
      if constexpr (HasLoad2<L>::value) {
        VI c0, c1;
        L::Load2(codes, k, &c0, &c1);
        StoreUnit(df, GroupValue(g, c0, z), GroupValue(g, c1, z), base + k * kOutBytes, kStream,
                  facts);
        continue;
      }
#endif
      const VF v0 = GroupValue(g, L::Load(codes, k), z);
      const VF v1 = GroupValue(g, L::Load(codes, k + n), z);
      StoreUnit(df, v0, v1, base + k * kOutBytes, kStream, facts);
    }
    return k;
  }

  // z: what is subtracted from the codes, g.z or an equal constant.
  HWY_INLINE VF GroupValue(const Group& g, VI c, VI z) const {
    if (kTable) {
      const DF df;
      return hn::TableLookupLanes(g.table, hn::IndicesFromVec(df, c));
    }
    return Arith(Decode(c), g.s, z, g.zf);
  }
  HWY_INLINE VF GroupValue(const Group& g, VI c) const { return GroupValue(g, c, g.z); }

  // Grouped rows: current group's parameters and where it ends.
  void SetGroup(int64_t k) {
    cur_idx_ = ScaleIndex(k);
    cur_ = MakeGroup(cur_idx_);
    cur_end_ = k / job_.group * job_.group + job_.group;
  }

  // The group after the current one (no division: cheap for small groups).
  HWY_INLINE void NextGroup() {
    cur_idx_ += job_.step;
    cur_end_ += job_.group;
    cur_ = MakeGroup(cur_idx_);
  }

  // Values of elements k .. k+N-1 (called in increasing k).
  HWY_INLINE VF Compute(int64_t k) {
    const DF df;
    const DI di;
    const int64_t n = static_cast<int64_t>(hn::Lanes(df));
    const VI c = LoadCodes(k);
    if (job_.per_element) {
      const VI off = hn::Set(di, plan_.code_offset);
      return job_.map != nullptr ? MappedValues(job_.code, job_.scale, job_.zp_int, job_.zp_float,
                                                job_.map, off, ValueTable(), k)
                                 : PerElementValues(job_.code, job_.scale, job_.zp_int,
                                                    job_.zp_float, off, ValueTable(), k);
    }
    if (k + n <= cur_end_) return GroupValue(cur_, c);
    if (k >= cur_end_) {  // first lane already in a later group
      SetGroup(k);
      if (k + n <= cur_end_) return GroupValue(cur_, c);
    }
    // The vector straddles a group boundary (group >= N: at most one).
    const VF a = GroupValue(cur_, c);
    const size_t in_first = static_cast<size_t>(cur_end_ - k);
    NextGroup();
    const VF b = GroupValue(cur_, c);
    return hn::IfThenElse(hn::FirstN(df, in_first), a, b);
  }

  // The job's UnitFacts for bfloat16 units: kBf16Hw where no value is
  // subnormal (kNormalValues, Plan::normal_values) and the CPU has
  // AVX512_BF16; kNoNaN where RowJob::finite. For StoreUnit's `facts`,
  // read once per loop.
  HWY_INLINE UnitFacts Facts() const {
    if constexpr (kOut != OutType::kBF16) {
      return kNoFacts;
    } else {
      UnitFacts f = job_.finite && kIntegerValues ? kNoNaN : kNoFacts;
#if HWY_TARGET <= HWY_AVX3
      if ((kNormalValues || plan_.normal_values) && CpuHasAvx512Bf16()) f |= kBf16Hw;
#endif
      return f;
    }
  }

  // Stores v0 then v1 (2N outputs) at dst; `stream`: non-temporal (dst
  // aligned to a full vector). `facts`: Facts() (a local of the caller's
  // loop: members would be re-read after every store).
 public:
  static HWY_INLINE void StoreUnit(DF df, VF v0, VF v1, char* dst, bool stream, UnitFacts facts) {
    StoreOutUnit<kOut>(df, v0, v1, dst, stream, facts);
  }

 private:
  const Plan& plan_;
  const RowJob& job_;
  const float* decode_;  // float codes: decoded value of each bit pattern
  Group cur_;
  int64_t cur_idx_ = 0, cur_end_ = 0;
};

// float32 lanes of the float16 bits in the low 16 bits of each lane of w
// (the upper 16 bits ignored): kernels/convert-inl.h's F32FromF16Bits on
// the kernels' vector type, or on x86 with F16C (AVX2 and up) the lanes
// narrowed to 16 bits and one vcvtph2ps — the same values as HalfFactor's
// (below), a signalling NaN made quiet as the products it enters make it
// anyway (a block header's scales and mins; the emulation was 30-40 % of
// Q4_0's / Q4_1's 16-bit dequantizing in perf on the Zen 4 guest).
HWY_INLINE hn::Vec<KernelTag> WidenHalfBits(hn::Vec<hn::RebindToSigned<KernelTag>> w) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 && !defined(HWY_DISABLE_F16C)
  return hn::Vec<KernelTag>{_mm512_cvtph_ps(_mm512_cvtepi32_epi16(w.raw))};
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  // The 8 low halves packed into words 0-3 of each 128-bit half, those
  // two quadwords to the low 128 bits.
  const __m256i low = _mm256_and_si256(w.raw, _mm256_set1_epi32(0xFFFF));
  const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, low), 0x08);
  return hn::Vec<KernelTag>{_mm256_cvtph_ps(_mm256_castsi256_si128(packed))};
#else
  return F32FromF16Bits(KernelTag(), w);
#endif
}

// The float16 field at b + at as float32 for a factor of products
// (a block header's scale): F32FromF16's value. x86 targets with F16C
// (AVX2 and up) convert in hardware — one instruction instead of a
// branchy scalar decode per field (Q4_K's fused M = 1 dot spent about a
// third of its time widening headers; its matmul at M = 1 / 4 measured
// 1.02-1.09x, bench/results/2026-12-07-f16c-headers/) — exact for every
// value, subnormals included (vcvtph2ps ignores MXCSR.DAZ: a runtime's
// flush-to-zero mode does not change it), but a signalling NaN comes back
// quiet with the same payload; the products it enters quiet it the same
// way, so they keep their bits.
HWY_INLINE float HalfFactor(const uint8_t* b, size_t at) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(layout_internal::Field<uint16_t>(b, at))));
#else
  return layout_internal::Half(b, at);
#endif
}

// Whether none of p[0, n) is NaN or infinite (full vectors, then one
// value at a time).
HWY_INLINE bool AllFinite(const float* p, int64_t n) {
  const KernelTag df;
  const hn::RebindToUnsigned<KernelTag> du;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  const auto exponent = hn::Set(du, 0x7F800000u);
  auto any = hn::Zero(du);  // exponent bits all set in some lane
  int64_t i = 0;
  for (; i + lanes <= n; i += lanes) {
    const auto e = hn::And(hn::BitCast(du, hn::LoadU(df, p + i)), exponent);
    any = hn::Or(any, hn::VecFromMask(du, hn::Eq(e, exponent)));
  }
  bool ok = hn::AllTrue(du, hn::Eq(any, hn::Zero(du)));
  for (; i < n; ++i) ok &= std::isfinite(p[i]);
  return ok;
}

// Params of blocks [0, n) from `blocks` into scale[i] (and zero[i]) for a
// descriptor with a float16 header (kHalfHeader): each field of N blocks
// fetched (`loads`: by N scalar 16-bit loads into a buffer read back as
// one vector, else by one 32-bit gather) and widened lane-wise; the last
// n % N blocks by Params. (The loads: Zen 4, Q4_0 / Q5_0 / Q5_1 / Q8_0 /
// IQ4_NL in cache 1.05-1.09x; a scalar Params per block 0.68-0.78x.)
template <class D>
HWY_INLINE void HalfHeaders(const uint8_t* blocks, int64_t n, float* scale, float* zero,
                            bool loads) {
  const KernelTag df;
  const hn::RebindToSigned<KernelTag> di;
  constexpr HalfHeader h = D::kHalfHeader;
  const int64_t lanes = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  if (loads) {
    alignas(64) int32_t sb[hn::MaxLanes(di)], zb[hn::MaxLanes(di)];
    for (; i + lanes <= n; i += lanes) {
      const uint8_t* b = blocks + i * D::kBytes;
      for (int64_t j = 0; j < lanes; ++j) {
        uint16_t v;
        std::memcpy(&v, b + j * D::kBytes + h.scale_at, 2);
        sb[j] = v;
        if constexpr (h.zero_at >= 0) {
          std::memcpy(&v, b + j * D::kBytes + h.zero_at, 2);
          zb[j] = v;
        }
      }
      hn::StoreU(WidenHalfBits(hn::Load(di, sb)), df, scale + i);
      if constexpr (h.zero_at >= 0) hn::StoreU(WidenHalfBits(hn::Load(di, zb)), df, zero + i);
    }
  }
  alignas(64) int32_t at[hn::MaxLanes(di)];
  for (int64_t j = 0; j < lanes; ++j) at[j] = static_cast<int32_t>(j * D::kBytes);
  const auto offsets = hn::Load(di, at);
  for (; i + lanes <= n; i += lanes) {
    const uint8_t* b = blocks + i * D::kBytes;
    // (Byte offsets: the gather reads 4 unaligned bytes at each.)
    const auto s = hn::GatherOffset(di, reinterpret_cast<const int32_t*>(b + h.scale_at), offsets);
    hn::StoreU(WidenHalfBits(s), df, scale + i);
    if constexpr (h.zero_at >= 0) {
      const auto z = hn::GatherOffset(di, reinterpret_cast<const int32_t*>(b + h.zero_at), offsets);
      hn::StoreU(WidenHalfBits(z), df, zero + i);
    }
  }
  for (; i < n; ++i) D::Params(blocks + i * D::kBytes, scale + i, zero + i);
}

// Packed headers (kPackedHeader: the K-quants' and IQ4_XS's sub-block
// scales and mins) decoded in vector lanes, a block at a time: the
// header's bytes are one 16-byte window, each lane picks its field's bytes
// with a byte shuffle (pshufb), shifts and masks them per lane, and
// applies the float32 operations of PackedHeaderParams (d * float32(v -
// bias), -(dmin * float32(m))), so the values are the scalar decoder's.
// The scalar loop spent about as long per block as dequantizing its 256
// elements (AVX-512, perf: 9-19 % of the whole run against 15-34 % for
// the kernel; AVX2, Q2_K to float16: more than the kernel).
template <class D>
struct PackedHeaderLanes {
  static constexpr PackedHeader kH = D::kPackedHeader;
  static constexpr int64_t kSubs = D::kBlockElems / D::kSubElems;
  static constexpr bool kMins = kH.dmin_at >= 0;
  static constexpr int64_t kWindow = PackedHeaderWindow<D>();
  // Lane plan: entry p is the scale of sub-block p (p < kSubs), else the
  // min of sub-block p - kSubs (kMins); the kernels' vectors of N lanes
  // take entries p0 .. p0 + N - 1.
  static constexpr int64_t kEntries = 32;  // CheckPackedHeader: kSubs <= 16
  struct Table {
    uint8_t lo_idx[kEntries] = {}, hi_idx[kEntries] = {};  // window bytes (0x80: none, read as 0)
    uint32_t lo_shift[kEntries] = {}, lo_mask[kEntries] = {};
    uint32_t hi_shift[kEntries] = {}, hi_mask[kEntries] = {}, hi_pos[kEntries] = {};
    uint32_t sext[kEntries] = {};  // sign extension: shift left then right by this
    int32_t bias[kEntries] = {};
    bool has_hi = false;
  };
  static constexpr Table Make() {
    Table t;
    for (int64_t p = 0; p < kEntries; ++p) {
      const bool is_scale = p < kSubs, is_min = kMins && !is_scale && p < 2 * kSubs;
      t.lo_idx[p] = t.hi_idx[p] = 0x80;
      if (!is_scale && !is_min) continue;
      const HeaderParam& f = is_scale ? kH.scale[p] : kH.min[p - kSubs];
      t.lo_idx[p] = static_cast<uint8_t>(f.lo.at - kWindow);
      t.lo_shift[p] = f.lo.shift;
      t.lo_mask[p] = (1u << f.lo.bits) - 1u;
      if (f.hi.bits != 0) {
        t.has_hi = true;
        t.hi_idx[p] = static_cast<uint8_t>(f.hi.at - kWindow);
        t.hi_shift[p] = f.hi.shift;
        t.hi_mask[p] = (1u << f.hi.bits) - 1u;
        t.hi_pos[p] = f.lo.bits;
      }
      if (is_scale && kH.is_signed) t.sext[p] = 32u - f.lo.bits - f.hi.bits;
      t.bias[p] = is_scale ? kH.bias : 0;
    }
    return t;
  }
  static constexpr Table kTable = Make();
};

// Entries p0 .. p0 + N - 1 of PackedHeaderLanes<D> for the header window
// `win`: each field's value minus its bias, as float32.
template <class D>
HWY_INLINE hn::Vec<KernelTag> PackedHeaderValues(hn::Vec<hn::Full128<uint8_t>> win, int64_t p0) {
  using P = PackedHeaderLanes<D>;
  const KernelTag df;
  const hn::RebindToUnsigned<KernelTag> du;
  const hn::RebindToSigned<KernelTag> di;
  const hn::Rebind<uint8_t, decltype(du)> du8;  // N bytes
  const auto& t = P::kTable;
  auto field = [&](const uint8_t* idx, const uint32_t* shift, const uint32_t* mask) HWY_ATTR {
    const auto bytes = hn::PromoteTo(du, hn::TableLookupBytesOr0(win, hn::LoadU(du8, idx + p0)));
    return hn::And(bytes >> hn::LoadU(du, shift + p0), hn::LoadU(du, mask + p0));
  };
  auto x = field(t.lo_idx, t.lo_shift, t.lo_mask);
  if constexpr (P::kTable.has_hi) {
    x = hn::Or(x, field(t.hi_idx, t.hi_shift, t.hi_mask) << hn::LoadU(du, t.hi_pos + p0));
  }
  auto v = hn::BitCast(di, x);
  if constexpr (P::kH.is_signed) {
    const auto sext = hn::LoadU(du, t.sext + p0);
    v = hn::BitCast(di, x << sext) >> hn::BitCast(di, sext);
  }
  return hn::ConvertTo(df, hn::Sub(v, hn::LoadU(di, t.bias + p0)));
}

// Params of blocks [0, n) from `blocks` for a descriptor with a packed
// header: the kSubs scales of block i at scale + i * kSubs (and zeros at
// zero + i * kSubs, kMins only; else zero is not touched). Vectors of N
// lanes hold whole runs of scales or mins (kSubs a multiple of N), or a
// block's scales then its mins (N = 2 kSubs, AVX-512 with eight
// sub-blocks); other shapes go block by block through D::Params.
template <class D>
HWY_INLINE void PackedHeaders(const uint8_t* blocks, int64_t n, float* scale, float* zero) {
  using P = PackedHeaderLanes<D>;
  const KernelTag df;
  constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(KernelTag()));
  constexpr bool kRuns = P::kSubs % kN == 0, kHalves = kN == 2 * P::kSubs;
  if (!(kRuns || kHalves) || hn::Lanes(df) != static_cast<size_t>(kN)) {
    for (int64_t i = 0; i < n; ++i) {
      D::Params(blocks + i * D::kBytes, scale + i * P::kSubs, zero + i * P::kSubs);
    }
    return;
  }
  const hn::Full128<uint8_t> d8;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* const b = blocks + i * D::kBytes;
    float* const s = scale + i * P::kSubs;
    float* const z = zero + i * P::kSubs;
    const auto win = hn::LoadU(d8, b + P::kWindow);
    const auto d = hn::Set(df, HalfFactor(b, static_cast<size_t>(P::kH.d_at)));
    // zero = -(dmin * m) == (-dmin) * m exactly (negation is exact).
    const auto neg_dmin =
        hn::Set(df, P::kMins ? -HalfFactor(b, static_cast<size_t>(P::kH.dmin_at)) : 0.0f);
    if constexpr (kRuns) {
      for (int64_t p = 0; p < P::kSubs; p += kN) {
        hn::StoreU(hn::Mul(d, PackedHeaderValues<D>(win, p)), df, s + p);
        if constexpr (P::kMins) {
          hn::StoreU(hn::Mul(neg_dmin, PackedHeaderValues<D>(win, P::kSubs + p)), df, z + p);
        }
      }
    } else {
      const hn::Half<KernelTag> dh;
      const auto m = P::kMins ? hn::IfThenElse(hn::FirstN(df, P::kSubs), d, neg_dmin) : d;
      const auto v = hn::Mul(m, PackedHeaderValues<D>(win, 0));
      hn::StoreU(hn::LowerHalf(dh, v), dh, s);
      if constexpr (P::kMins) hn::StoreU(hn::UpperHalf(dh, v), dh, z);
    }
  }
}

// Block layouts' row chunks (RunRows): kElems elements (a multiple of the
// block), kSubs sub-blocks of kSubElems each; other layouts: unused.
// kScratch: the length of the arrays that hold a chunk's parameters (at
// least one AVX-512 vector: AllFinite reads whole vectors).
template <class L, class = void>
struct BlockChunk {
  static constexpr int64_t kElems = 1, kSubElems = 1, kSubs = 1, kScratch = 16;
};
template <class L>
struct BlockChunk<L, std::enable_if_t<L::kBlockParams>> {
  using Desc = typename L::Desc;
  static constexpr int64_t kElems = Desc::kBlockElems > 2048 ? Desc::kBlockElems : 2048;
  static constexpr int64_t kSubElems = Desc::kSubElems;
  static constexpr int64_t kSubs = kElems / kSubElems;
  static constexpr int64_t kScratch = kSubs > 16 ? kSubs : 16;
};

#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
// Lines DotUnits fetches ahead while it runs (the next weight rows' codes
// of the same columns): up to four byte ranges, spread evenly over its
// units, so that the loop never waits on a full set of line fill buffers.
struct DotPrefetch {
  const uint8_t* at[4] = {};
  const uint8_t* end[4] = {};
  int ranges = 0;
  // Adds [begin, begin + bytes) from its line unless empty or from the
  // last range's line (rows sharing their words).
  void Add(const uint8_t* begin, int64_t bytes) {
    const uint8_t* const line =
        reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(begin) & ~uintptr_t{63});
    if (bytes <= 0 || ranges == 4 || (ranges > 0 && line == at[ranges - 1])) return;
    at[ranges] = line;
    end[ranges] = begin + bytes;
    ++ranges;
  }
  int64_t Lines() const {
    int64_t n = 0;
    for (int i = 0; i < ranges; ++i) n += (end[i] - at[i] + 63) / 64;
    return n;
  }
  // Slice i of `parts` (0 <= i < parts) of each range's lines: the parts'
  // slices together are the ranges' lines, each once.
  DotPrefetch Part(int64_t i, int64_t parts) const {
    DotPrefetch q;
    for (int r = 0; r < ranges; ++r) {
      const int64_t lines = (end[r] - at[r] + 63) / 64;
      const int64_t a = lines * i / parts, b = lines * (i + 1) / parts;
      if (b == a) continue;
      q.at[q.ranges] = at[r] + 64 * a;
      q.end[q.ranges] = at[r] + 64 * b;
      ++q.ranges;
    }
    return q;
  }
};

// Plan::dot over elements [k0, k1) of kRows weight rows and kM rows of X at
// once (ks: the weight rows' kernels, each CanDot(k0, k1)): x is X row 0's
// activation of element k0, X row i at x + i * ldx; the partial sums of
// (X row i, weight row r) at p + i * ldp + r * 16. Per unit and weight row:
// the unit's 2N values by the group's table or the contract's arithmetic
// (UnitValues: the values Run writes), then
// for each row of X x0 * v0 and x1 * v1 added in that order, each a fused
// multiply-add (DotStep) — lane l of a
// vector is partial sum (k - k0 + l) % 16 (AVX2: of a unit's two vectors of
// 8, the first adds to sums 0-7 and the second to 8-15), so this is
// AccumulateDotRows's order exactly. Where UnitValues gives its values in the loader's
// kDotOrder (K::kDotOrdered), X's vectors and the partial sums are permuted
// the same way (lane l then holds partial sum kDotOrder[l]: the same additions in
// the same order, so the same bits). kRows weight rows interleaved: each
// product's sums are one chain of dependent additions.
template <int kRows, int kM, bool kShared, class K>
HWY_INLINE void DotUnits(const K* ks, int64_t k0, int64_t k1, const float* x, int64_t ldx, float* p,
                         int64_t ldp, DotPrefetch pf) {
  const KernelTag df;
  using VF = hn::Vec<KernelTag>;
  constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(KernelTag()));
  // Vectors of a product's 16 partial sums: one (AVX-512), or two (AVX2:
  // a unit's first vector of values to sums 0-7, its second to 8-15).
  constexpr int kS = static_cast<int>(16 / kN);
  static_assert(kN * kS == 16, "16 partial sums per product");
  const hn::RebindToSigned<KernelTag> di;
  const int32_t* const dot_order = DotOrderOf<typename K::Loader>();
  const auto order = hn::IndicesFromVec(df, hn::LoadU(di, dot_order));
  // v's 16 values (element order) in kDotOrder where K::kDotOrdered: lane l
  // from lane kDotOrder[l].
  auto in = [&](VF v) HWY_ATTR { return K::kDotOrdered ? hn::TableLookupLanes(v, order) : v; };
  VF acc[kM][kRows][kS];
  for (int i = 0; i < kM; ++i) {
    for (int r = 0; r < kRows; ++r) {
      for (int j = 0; j < kS; ++j) acc[i][r][j] = in(hn::LoadU(df, p + i * ldp + r * 16 + j * kN));
    }
  }
  // The groups' parameter indices step along (no division per group: the
  // groups of ggml's blocks are one unit long).
  int64_t idx[kRows];
  for (int r = 0; r < kRows; ++r) idx[r] = ks[r].GroupIndex(k0);
  const int64_t length = ks[0].GroupLength(), step = ks[0].GroupStep();
  int64_t end = length == 0 ? k1 : std::min(k1, (k0 / length + 1) * length);
  // pf's lines: per_unit at each unit, range by range.
  const int64_t units = (k1 - k0) / (2 * kN);
  const int64_t per_unit = units == 0 ? 0 : (pf.Lines() + units - 1) / units;
  int range = 0;
  for (int64_t k = k0; k < k1; end = std::min(k1, end + length)) {
    typename K::DotGroup t[kRows];
    for (int r = 0; r < kRows; ++r) {
      t[r] = ks[r].GroupTable(idx[r]);
      idx[r] += step;
    }
    for (; k < end; k += 2 * kN) {
      const float* const xk = x + (k - k0);
      for (int64_t j = 0; j < per_unit && range < pf.ranges; ++j) {
        hwy::Prefetch(pf.at[range]);
        pf.at[range] += 64;
        if (pf.at[range] >= pf.end[range]) ++range;
      }
      VF v0[kRows], v1[kRows];
      if constexpr (kShared) {
        typename K::VI w0, w1;
        ks[0].DotWords(k, &w0, &w1);
        for (int r = 0; r < kRows; ++r) ks[r].UnitValuesFromWords(t[r], w0, w1, &v0[r], &v1[r]);
      } else {
        for (int r = 0; r < kRows; ++r) ks[r].UnitValues(t[r], k, &v0[r], &v1[r]);
      }
      VF x0[kM], x1[kM];
      for (int i = 0; i < kM; ++i) {
        x0[i] = in(hn::LoadU(df, xk + i * ldx));
        x1[i] = in(hn::LoadU(df, xk + i * ldx + kN));
      }
      for (int r = 0; r < kRows; ++r) {
        for (int i = 0; i < kM; ++i) {
          acc[i][r][0] = hn::MulAdd(x0[i], v0[r], acc[i][r][0]);  // DotStep
          acc[i][r][kS - 1] = hn::MulAdd(x1[i], v1[r], acc[i][r][kS - 1]);
        }
      }
    }
  }
  if constexpr (K::kDotOrdered) {
    // (back to element order: lane kDotOrder[l] from lane l)
    alignas(64) int32_t back[kN];
    for (int64_t l = 0; l < kN; ++l) back[dot_order[l]] = static_cast<int32_t>(l);
    const auto out = hn::IndicesFromVec(df, hn::Load(di, back));
    for (int i = 0; i < kM; ++i) {
      for (int r = 0; r < kRows; ++r) {
        hn::StoreU(hn::TableLookupLanes(acc[i][r][0], out), df, p + i * ldp + r * 16);
      }
    }
  } else {
    for (int i = 0; i < kM; ++i) {
      for (int r = 0; r < kRows; ++r) {
        for (int j = 0; j < kS; ++j) hn::StoreU(acc[i][r][j], df, p + i * ldp + r * 16 + j * kN);
      }
    }
  }
}

// Plan::dot for rows [r0, r1), columns [c0, c1) (the row kernels' float32
// instantiation), four rows at a time. chunk_job / row_job: RunRows's
// jobs (block layouts by chunks of their parameters, others by row).
// Returns false, having done nothing, where a row cannot (CanDot).
template <class L, CodeKind kCode, ZeroPointKind kZp, class ChunkJob, class RowJobOf>
HWY_INLINE bool FusedDot(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                         const ChunkJob& chunk_job, const RowJobOf& row_job) {
  using K = RowKernel<L, kCode, kZp, OutType::kF32>;
  using Chunk = BlockChunk<L>;
  constexpr int kRows = 4;
  const Plan::Dot& dot = *plan.dot;
  if (dot.columns) return false;  // (rows only; the columns: ColumnsDot)
  // Float codes (FP8) and table codes (NF4 / FP4 on AVX2) decode by
  // arithmetic or lookups at a cost that the tile pays once: past four
  // rows of X (two passes over the codes, or AVX-512's one of eight) they
  // measured no faster than the tile (4096 x 4096 / 14336, fp8-block
  // M = 5 / 6 0.84-0.95x, M = 8 0.99-1.05x, AVX-512 and AVX2; AVX2
  // bnb-nf4 M = 8 0.84-0.86x; Intel guest, one thread, weight flushed).
  if (!K::kTable && (CodeIsFloat(kCode) || kCode == CodeKind::kTable4) && dot.m > 4) {
    return false;
  }
  const int64_t ldp = (r1 - r0) * 16;  // between rows of X's sums
  // Weight rows [r, r + rows) over [k0, k1) from their jobs, with every
  // row of X. With a table: four weight rows with four, then three or two
  // rows of X at a time (each pass decodes the weight rows again: two or
  // three rows one by one took as long as four together, Intel guest), a
  // lone weight row with X row by row (its codes are then in L1). Without
  // (the contract's arithmetic per unit: a scale and zero points per
  // weight row): one row of X with four weight rows; more rows of X with
  // two weight rows at a time with eight, four, three or two rows of X
  // (AVX-512), or on AVX2 two weight rows with two rows of X and one
  // weight row with four or three (four weight rows' parameters and sums
  // would outgrow the registers; a sum's additions are one chain, so
  // fewer than eight chains in flight wait on the FMA's latency: one
  // weight row with two or four rows of X on AVX-512 measured 1.9x / 2.8x
  // the time of M = 1, weight in cache), in slices of kSlice elements,
  // the weight rows one after the other per slice (X's rows of a slice
  // stay in L1: over the whole of a K = 4096 row, four rows of X are 64
  // KiB, read again from L2 per weight row).
  // pf: lines to fetch meanwhile (by the first pass over X's rows).
  constexpr int64_t kSlice = 1024;
  constexpr bool kWide = hn::MaxLanes(KernelTag()) == 16;  // (one vector per 16 sums)
  auto rows_dot = [&](const RowJob* jobs, int64_t r, int64_t rows, int64_t k0, int64_t k1,
                      const DotPrefetch& pf) HWY_ATTR {
    // kR weight rows from ks over [ka, kb), their sums from p; pf_here:
    // the lines to fetch (by the first pass over X's rows).
    auto with_x = [&](const K* ks, auto rows_c, float* p, int64_t ka, int64_t kb,
                      const DotPrefetch& pf_here) HWY_ATTR {
      constexpr int kR = decltype(rows_c)::value;
      // The most rows of X per pass (see above).
      constexpr int kMaxX = K::kTable     ? (kR == kRows ? 4 : 1)
                            : kR == kRows ? 1
                            : kWide       ? 8
                            : kR == 1     ? 4
                                          : 2;
      const float* const x = dot.x + (ka - c0);
      int64_t i = 0;
      // Rows that share their words (K::kSharedDotWords) load them once.
      bool shared = K::kSharedDotWords && kR > 1;
      for (int r = 1; r < kR; ++r) shared = shared && ks[r].Code().codes == ks[0].Code().codes;
      auto pass = [&](auto rows_of_x) HWY_ATTR {
        constexpr int kM = decltype(rows_of_x)::value;
        const DotPrefetch pf_pass = i == 0 ? pf_here : DotPrefetch();
        if (K::kSharedDotWords && shared) {
          DotUnits<kR, kM, K::kSharedDotWords>(ks, ka, kb, x + i * dot.ldx, dot.ldx, p + i * ldp,
                                               ldp, pf_pass);
        } else {
          DotUnits<kR, kM, false>(ks, ka, kb, x + i * dot.ldx, dot.ldx, p + i * ldp, ldp, pf_pass);
        }
        i += kM;
      };
      if constexpr (kMaxX >= 8) {
        while (i + 8 <= dot.m) pass(std::integral_constant<int, 8>());
      }
      if constexpr (kMaxX >= 4) {
        while (i + 4 <= dot.m) pass(std::integral_constant<int, 4>());
        if (dot.m - i == 3) pass(std::integral_constant<int, 3>());
      }
      if constexpr (kMaxX >= 2) {
        while (i + 2 <= dot.m) pass(std::integral_constant<int, 2>());
      }
      while (i < dot.m) pass(std::integral_constant<int, 1>());
    };
    float* const p = dot.sums + (r - r0) * 16;
    if (rows == kRows && (K::kTable || dot.m == 1)) {
      const K ks[kRows] = {K(plan, jobs[0]), K(plan, jobs[1]), K(plan, jobs[2]), K(plan, jobs[3])};
      return with_x(ks, std::integral_constant<int, kRows>(), p, k0, k1, pf);
    }
    if (!K::kTable && dot.m > 1) {
      // (slices start at k0 + a multiple of kSlice: CanDot's alignment holds)
      const bool pairs = kWide || dot.m == 2;
      const int64_t slices = (k1 - k0 + kSlice - 1) / kSlice;
      for (int64_t s = 0; s < slices; ++s) {
        const int64_t ka = k0 + s * kSlice, kb = std::min(k1, ka + kSlice);
        int64_t j = 0;
        for (; pairs && j + 2 <= rows; j += 2) {
          const K two[2] = {K(plan, jobs[j]), K(plan, jobs[j + 1])};
          with_x(two, std::integral_constant<int, 2>(), p + j * 16, ka, kb,
                 j == 0 ? pf.Part(s, slices) : DotPrefetch());
        }
        for (; j < rows; ++j) {
          const K one[1] = {K(plan, jobs[j])};
          with_x(one, std::integral_constant<int, 1>(), p + j * 16, ka, kb,
                 j == 0 ? pf.Part(s, slices) : DotPrefetch());
        }
      }
      return;
    }
    for (int64_t j = 0; j < rows; ++j) {
      const K one[1] = {K(plan, jobs[j])};
      with_x(one, std::integral_constant<int, 1>(), p + j * 16, k0, k1,
             j == 0 ? pf : DotPrefetch());
    }
  };
  // The view's rows after [r, r + kRows) (the next four, those of the
  // next tile past r1 too).
  const int64_t rows_all = plan.rows();
  if constexpr (L::kBlockParams) {
    // Every chunk starts at c0 or a multiple of Chunk::kElems (of the unit)
    // and a block layout's rows at a block: CanDot over [c0, c1) with the
    // chunks' job shape decides for all (no parameters needed to ask).
    {
      RowJob shape;
      shape.code = L::Row(plan, r0);
      shape.per_element = false;
      shape.group = Chunk::kSubElems;
      shape.step = 1;
      if (!K(plan, shape).CanDot(c0, c1)) return false;
    }
    alignas(64) float sc[kRows][static_cast<size_t>(Chunk::kScratch)];
    alignas(64) float zf[kRows][static_cast<size_t>(Chunk::kScratch)];
    for (int64_t r = r0; r < r1; r += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, r1 - r);
      for (int64_t x0 = c0; x0 < c1;) {
        const int64_t x1 = std::min(c1, (x0 / Chunk::kElems + 1) * Chunk::kElems);
        RowJob jobs[kRows];
        for (int64_t i = 0; i < rows; ++i) jobs[i] = chunk_job(r + i, x0, x1, sc[i], zf[i]);
        // The next rows' blocks of this chunk (chunk_job fetches a row's
        // next chunk; the rows run kRows at a time, so the next row's
        // first chunk is not that).
        using Desc = typename L::Desc;
        const int64_t b0 = x0 / Desc::kBlockElems;
        const int64_t bytes = (x1 - x0 + Desc::kBlockElems - 1) / Desc::kBlockElems * Desc::kBytes;
        DotPrefetch pf;
        for (int64_t i = r + kRows; i < std::min(rows_all, r + 2 * kRows); ++i) {
          pf.Add(L::Row(plan, i).codes + b0 * Desc::kBytes, bytes);
        }
        rows_dot(jobs, r, rows, x0, x1, pf);
        x0 = x1;
      }
    }
  } else {
    for (int64_t r = r0; r < r1; ++r) {
      const RowJob job = row_job(r);
      if (!K(plan, job).CanDot(c0, c1)) return false;
    }
    for (int64_t r = r0; r < r1; r += kRows) {
      const int64_t rows = std::min<int64_t>(kRows, r1 - r);
      RowJob jobs[kRows];
      for (int64_t i = 0; i < rows; ++i) jobs[i] = row_job(r + i);
      DotPrefetch pf;
      for (int64_t i = r + kRows; i < std::min(rows_all, r + 2 * kRows); ++i) {
        const CodeRef next = L::Row(plan, i);
        pf.Add(L::Address(next, c0), L::Address(next, c1) - L::Address(next, c0));
      }
      rows_dot(jobs, r, rows, c0, c1, pf);
    }
  }
  return true;
}
#endif

#if HWY_TARGET == HWY_AVX2
// RunRows' per-element parameter rows in pair-split order for
// RowKernel::SplitRow (RowJob::split_scale): a copy of columns
// [origin, end) (c0 and c1 rounded down to 16) in the thread's kernel
// scratch, made again only when a row's parameters are not the previous
// row's — where rows share them in runs of plan.group >= kMinRows (the
// layouts whose scales vary along the row and are grouped across rows:
// PMX / ONNX int4 along axis 0; the loaders with a LoadSplit).
// Holds the scratch while RunRows runs (which asks nothing else for it).
class SplitParams {
 public:
  static constexpr int64_t kMinRows = 8;

  SplitParams(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1)
      : origin_(c0 / 16 * 16), end_(c1 / 16 * 16) {
    if (plan.inner == 1 || plan.s_inner != 1 || plan.axis_group != nullptr ||
        plan.group < kMinRows || r1 - r0 < kMinRows || end_ - origin_ < 16) {
      return;
    }
    const size_t n = static_cast<size_t>(end_ - origin_);
    const size_t arrays = plan.zp_int != nullptr || plan.zp_float != nullptr ? 2 : 1;
    uint8_t* const p = KernelScratch(arrays * n * sizeof(float));
    if (p == nullptr) return;  // (the rows run in element order)
    scale_ = reinterpret_cast<float*>(p);
    zero_ = p + n * sizeof(float);
  }

  // Gives job (a per-element row's) its parameters in pair-split order,
  // copied first where they are not the last job's.
  HWY_INLINE void Attach(RowJob* job) {
    if (scale_ == nullptr || !job->per_element || job->map != nullptr) return;
    if (job->scale != from_) {
      from_ = job->scale;
      Split(job->scale, scale_);
      if (job->zp_int != nullptr) Split(job->zp_int, zero_);
      if (job->zp_float != nullptr) Split(job->zp_float, zero_);
    }
    job->split_scale = scale_;
    if (job->zp_int != nullptr) job->split_zp_int = reinterpret_cast<const int32_t*>(zero_);
    if (job->zp_float != nullptr) job->split_zp_float = reinterpret_cast<const float*>(zero_);
    job->split_origin = origin_;
    job->split_end = end_;
  }

 private:
  // Row elements [origin_, end_) of `row` (4-byte values, element 0 at row)
  // to `to` in pair-split order.
  HWY_INLINE void Split(const void* row, void* to) const {
    const float* src = static_cast<const float*>(row) + origin_;
    float* dst = static_cast<float*>(to);
    for (int64_t i = 0; i < end_ - origin_; i += 16) {
      const __m256 a = _mm256_loadu_ps(src + i), b = _mm256_loadu_ps(src + i + 8);
      // Per 128-bit half: a's pairs' first (second) lanes, then b's; the
      // quadword permute puts a's halves first.
      const __m256 even = _mm256_shuffle_ps(a, b, 0x88), odd = _mm256_shuffle_ps(a, b, 0xDD);
      _mm256_storeu_ps(dst + i,
                       _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even), 0xD8)));
      _mm256_storeu_ps(dst + i + 8,
                       _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd), 0xD8)));
    }
  }

  int64_t origin_, end_;
  float* scale_ = nullptr;
  uint8_t* zero_ = nullptr;
  const float* from_ = nullptr;  // the parameters copied (their job's scale)
};
#endif

template <class L, CodeKind kCode, ZeroPointKind kZp, OutType kOut>
void RunRows(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
             int64_t ld) {
  const int64_t cols = plan.cols();
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  const bool stream = plan.nontemporal;
  // A group map along the rows: the number of groups it reaches (once per
  // slice, not per row).
  int64_t map_groups = 0;
  if (plan.inner == 1 && plan.axis_group != nullptr) {
    for (int64_t a = 0; a < cols; ++a) {
      map_groups = std::max<int64_t>(map_groups, int64_t{plan.axis_group[a]} + 1);
    }
  }
  // Block layouts: the row's elements go in chunks of kChunk (from a
  // multiple of it), each chunk's scales (and zeros) computed from its
  // blocks' headers into L1-resident arrays right before the chunk is
  // dequantized (one pass over the data, no tensor-sized scale arrays, and
  // the work is split over the threads with the rows).
  using Chunk = BlockChunk<L>;
  // Float16 headers by scalar loads or gathers (Plan::Fetch).
  const bool header_loads = FetchByLoads(plan);
  // Row r's job over [x0, x1), inside one chunk: the chunk's parameters
  // into sc / zf (Chunk::kScratch each).
  auto chunk_job = [&](int64_t r, int64_t x0, int64_t x1, float* sc, float* zf) HWY_ATTR {
    RowJob job;
    job.code = L::Row(plan, r);
    job.per_element = false;
    job.scale = sc;
    job.zp_int = nullptr;
    job.zp_float = zf;
    job.group = Chunk::kSubElems;
    job.step = 1;
    const int64_t cs = x0 / Chunk::kElems * Chunk::kElems;
    job.base = -(cs / Chunk::kSubElems);
    if constexpr (L::kBlockParams) {
      using Desc = typename L::Desc;
      constexpr int64_t kSubsPerBlock = Desc::kBlockElems / Desc::kSubElems;
      const int64_t b0 = x0 / Desc::kBlockElems;
      const int64_t b1 = (x1 + Desc::kBlockElems - 1) / Desc::kBlockElems;
      // The next chunk's blocks, a chunk ahead: the header pass below is
      // their first reader (a gather) and otherwise waits on memory. The
      // addresses may lie past the row or the tensor: a prefetch never
      // faults (integer arithmetic, no out-of-object pointer).
      {
        const uintptr_t next =
            reinterpret_cast<uintptr_t>(job.code.codes) + static_cast<uintptr_t>(b1 * Desc::kBytes);
        const int64_t ahead = (b1 - b0) * Desc::kBytes;
        for (int64_t o = 0; o < ahead; o += 64) {
          hwy::Prefetch(reinterpret_cast<const uint8_t*>(next + static_cast<uintptr_t>(o)));
        }
      }
      if constexpr (HasHalfHeader<Desc>::value) {
        const int64_t at = b0 - cs / Desc::kBlockElems;
        HalfHeaders<Desc>(job.code.codes + b0 * Desc::kBytes, b1 - b0, sc + at, zf + at,
                          header_loads);
      } else if constexpr (HasPackedHeader<Desc>::value) {
        const int64_t at = (b0 - cs / Desc::kBlockElems) * kSubsPerBlock;
        PackedHeaders<Desc>(job.code.codes + b0 * Desc::kBytes, b1 - b0, sc + at, zf + at);
      } else {
        for (int64_t b = b0; b < b1; ++b) {
          const int64_t at = (b - cs / Desc::kBlockElems) * kSubsPerBlock;
          Desc::Params(job.code.codes + b * Desc::kBytes, sc + at, zf + at);
        }
      }
      if constexpr ((kOut == OutType::kBF16 ||
                     (OutDesc<kOut>::kBytes == 2 &&
                      (LoaderSymmetricNibbles<L>::value || LoaderSymmetricFives<L>::value))) &&
                    IntegerCodeValues<Desc>() && !DeclaresPow2Scales<Desc>::value) {
        // bfloat16 (and Q4_0's / Q5_0's 16-bit tables, kSymmetricTables,
        // SymmetricFiveTables)
        // from integer code values: no value is NaN if no parameter of the
        // chunk's blocks is NaN or infinite (RowJob::finite; not read for
        // power-of-two scales: RowKernel::kIntegerValues).
        const int64_t at = (b0 - cs / Desc::kBlockElems) * kSubsPerBlock;
        const int64_t n = (b1 - b0) * kSubsPerBlock;
        job.finite =
            AllFinite(sc + at, n) && (kZp != ZeroPointKind::kFloat || AllFinite(zf + at, n));
      }
    }
    return job;
  };
#if NIBBLE_FLOAT8_TABLES
  // Float8Groups' tables, shared by the rows (about 41 KiB of stack on
  // AVX3_DL, 28 KiB on AVX2, in the float8 16-bit instantiations only).
  using Float8Cache = std::conditional_t<RowKernel<L, kCode, kZp, kOut>::kFloat8Planes,
                                         Float8TableCache, NoFloat8TableCache>;
  [[maybe_unused]] Float8Cache float8_cache(plan.group > 0 ? c0 / plan.group : 0);
#endif
  // Row r's job (layouts whose parameters are the plan's).
  auto row_job = [&](int64_t r) HWY_ATTR {
    RowJob job;
#if NIBBLE_FLOAT8_TABLES
    if constexpr (RowKernel<L, kCode, kZp, kOut>::kFloat8Planes) job.float8 = &float8_cache;
#endif
    job.code = L::Row(plan, r);
    // Scales.
    if (plan.inner == 1) {
      // A group map along the row: gathered per element (SimdEligible:
      // only with s_axis 1).
      job.map = plan.axis_group;
      job.map_groups = map_groups;
      job.per_element = job.map != nullptr || (plan.group == 1 && plan.s_axis == 1);
      job.base = r * plan.s_outer;
      job.group = plan.group;
      job.step = plan.s_axis;
    } else {
      const int64_t o = r / plan.axis, a = r % plan.axis;
      const int64_t ga = plan.axis_group != nullptr ? plan.axis_group[a] : a / plan.group;
      job.base = o * plan.s_outer + ga * plan.s_axis;
      job.per_element = plan.s_inner == 1;
      job.group = cols;  // constant along the row
      job.step = 0;
    }
    if (job.step == 0) job.group = cols;  // scale constant along the row
    job.scale = plan.scale;
    job.zp_int = plan.zp_int;
    job.zp_float = plan.zp_float;
    job.finite = plan.finite_values;
    if (job.per_element) {
      job.scale = plan.scale + job.base;
      if (plan.zp_int) job.zp_int = plan.zp_int + job.base;
      if (plan.zp_float) job.zp_float = plan.zp_float + job.base;
    }
    return job;
  };
#if HWY_TARGET == HWY_AVX2
  // (Unused, and asks for no scratch, where the kernel has no kSplit.)
  [[maybe_unused]] auto split = [&]() HWY_ATTR {
    if constexpr (RowKernel<L, kCode, kZp, kOut>::kSplit) {
      return SplitParams(plan, r0, r1, c0, c1);
    } else {
      return 0;
    }
  }();
#endif
  // Row r, columns [ca, cb), written at y.
  auto run_row = [&](int64_t r, int64_t ca, int64_t cb, char* y) HWY_ATTR {
    if constexpr (L::kBlockParams) {
      alignas(64) float sc[static_cast<size_t>(Chunk::kScratch)];
      alignas(64) float zf[static_cast<size_t>(Chunk::kScratch)];
      for (int64_t x0 = ca; x0 < cb;) {
        const int64_t x1 = std::min(cb, (x0 / Chunk::kElems + 1) * Chunk::kElems);
        const RowJob job = chunk_job(r, x0, x1, sc, zf);
        RowKernel<L, kCode, kZp, kOut> kernel(plan, job);
        kernel.Run(x0, x1, y + (x0 - ca) * kOutBytes, stream);
        x0 = x1;
      }
    } else {
      RowJob job = row_job(r);
#if HWY_TARGET == HWY_AVX2
      if constexpr (RowKernel<L, kCode, kZp, kOut>::kSplit) split.Attach(&job);
#endif
      RowKernel<L, kCode, kZp, kOut> kernel(plan, job);
      kernel.Run(ca, cb, y, stream);
    }
  };
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
  if constexpr (kOut == OutType::kF32 && RowKernel<L, kCode, kZp, kOut>::kDots &&
                !std::is_same_v<L, AwqColumns> &&
                !std::is_same_v<L, GptqColumns>) {  // (the columns: ColumnsDot)
    if (plan.dot != nullptr && FusedDot<L, kCode, kZp>(plan, r0, r1, c0, c1, chunk_job, row_job)) {
      *plan.dot->done = true;
      return;
    }
  }
#endif
  char* const base = static_cast<char*>(out);
#if HWY_TARGET <= HWY_AVX3
  constexpr bool kGptq = std::is_same_v<L, GptqColumns>;
  if constexpr ((kGptq || std::is_same_v<L, AwqColumns>)&&kZp != ZeroPointKind::kFloatSubtract) {
    if (plan.group % 32 == 0) {
      const auto edge = [&](int64_t r, int64_t ca, int64_t cb) HWY_ATTR {
        run_row(r, ca, cb, base + ((r - r0) * ld + (ca - c0)) * kOutBytes);
      };
      if constexpr (kGptq) {
        // Blocks or 16-row bands (PreferGptqBlocks); the bands stage
        // their tiles for cached stores (streamed directly: measured no
        // faster staged).
        const bool blocks = plan.column_order == Plan::ColumnOrder::kAuto
                                ? PreferGptqBlocks()
                                : plan.column_order == Plan::ColumnOrder::kBlocks;
        if (blocks) {
          GptqBlockTiles<kZp, kOut>(plan, r0, r1, c0, c1, base, ld, edge);
        } else if (stream) {
          ColumnNibbleTiles<true, false, kZp, kOut>(plan, r0, r1, c0, c1, base, ld, edge);
        } else {
          ColumnNibbleTiles<true, true, kZp, kOut>(plan, r0, r1, c0, c1, base, ld, edge);
        }
      } else {
        // AWQ stages its codes (see ColumnNibbleTiles).
        ColumnNibbleTiles<false, false, kZp, kOut>(plan, r0, r1, c0, c1, base, ld, edge);
      }
      if (stream) hwy::FlushStream();
      return;
    }
  }
#endif
  if (std::is_same_v<L, GptqColumns>) {
    // A row reads one word per 8 columns, word_stride bytes apart: the 16
    // rows sharing those cache lines run together over column chunks, so
    // each line is fetched once (large power-of-two strides map every word
    // of a row to the same cache sets).
    constexpr int64_t kBand = 16, kChunk = 256;  // measured: 64 and 1024 slower
    for (int64_t rb = r0; rb < r1; rb = (rb / kBand + 1) * kBand) {
      const int64_t re = std::min<int64_t>(r1, (rb / kBand + 1) * kBand);
      for (int64_t cc = c0; cc < c1; cc += kChunk) {
        const int64_t ce = std::min<int64_t>(c1, cc + kChunk);
        // The next chunk's lines (no hardware prefetcher follows this stride).
        const int64_t pe = std::min<int64_t>(c1, ce + kChunk);
        for (int64_t w = ce / 8; w < (pe + 7) / 8; ++w) {
          hwy::Prefetch(plan.codes + w * plan.word_stride + 4 * rb);
        }
        for (int64_t r = rb; r < re; ++r) {
          run_row(r, cc, ce, base + ((r - r0) * ld + (cc - c0)) * kOutBytes);
        }
      }
    }
  } else {
    // Narrow tiles of many rows (a transposed write's bands): one short
    // run of each row's codes and scales, rows far apart, which the
    // hardware prefetcher does not follow: row r + kRowsAhead's are
    // fetched while row r runs.
    constexpr int64_t kRowsAhead = 8, kNarrowBytes = 512;
    const int64_t rows_ahead = [&]() HWY_ATTR -> int64_t {
      if constexpr (HasAddress<L>::value && !L::kBlockParams) {
        if (r1 - r0 > kRowsAhead && c1 > c0) {
          const CodeRef c = L::Row(plan, r0);
          if (L::Address(c, c1 - 1) - L::Address(c, c0) < kNarrowBytes) return kRowsAhead;
        }
      }
      return 0;
    }();
    const bool scale_rows =
        rows_ahead > 0 && plan.inner == 1 && plan.axis_group == nullptr && plan.s_axis > 0;
    for (int64_t r = r0; r < r1; ++r) {
      if constexpr (HasAddress<L>::value && !L::kBlockParams) {
        if (rows_ahead > 0 && r + rows_ahead < r1) {
          const CodeRef c = L::Row(plan, r + rows_ahead);
          const uint8_t* const a = L::Address(c, c0);
          const uint8_t* const e = L::Address(c, c1 - 1);
          for (const uint8_t* p = a; p <= e; p += 64) hwy::Prefetch(p);
          hwy::Prefetch(e);
          if (scale_rows) {
            const float* const s = plan.scale + (r + rows_ahead) * plan.s_outer;
            hwy::Prefetch(s + c0 / plan.group * plan.s_axis);
            hwy::Prefetch(s + (c1 - 1) / plan.group * plan.s_axis);
          }
        }
      }
      run_row(r, c0, c1, base + (r - r0) * ld * kOutBytes);
    }
  }
  // Order the non-temporal stores before anything the caller does next
  // (once per call: an sfence per row would drain the write-combining
  // buffers thousands of times per tensor).
  if (stream) hwy::FlushStream();
}

// Zero-point kinds as a bit set: which RunRows variants a layout compiles.
constexpr unsigned ZpBit(ZeroPointKind k) { return 1u << static_cast<unsigned>(k); }
constexpr unsigned kAllZp =
    ZpBit(ZeroPointKind::kNone) | ZpBit(ZeroPointKind::kInteger) | ZpBit(ZeroPointKind::kFloat);

// kZps: the zero-point kinds op/ ever lowers this layout with (the others,
// and kFloatSubtract, run the reference: same bits, fewer instantiations).
template <class L, CodeKind kCode, unsigned kZps = kAllZp>
void DispatchZpOut(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                   int64_t ld) {
#define NIBBLE_CASE(ZP, OUT)                                                                       \
  if constexpr ((kZps & ZpBit(ZeroPointKind::ZP)) != 0) {                                          \
    if (plan.zp_kind == ZeroPointKind::ZP && plan.out == OutType::k##OUT) {                        \
      return RunRows<L, kCode, ZeroPointKind::ZP, OutType::k##OUT>(plan, r0, r1, c0, c1, out, ld); \
    }                                                                                              \
  }
#define NIBBLE_CASE_NONE(OUT) NIBBLE_CASE(kNone, OUT)
#define NIBBLE_CASE_INTEGER(OUT) NIBBLE_CASE(kInteger, OUT)
#define NIBBLE_CASE_FLOAT(OUT) NIBBLE_CASE(kFloat, OUT)
  NIBBLE_OUT_TYPES(NIBBLE_CASE_NONE)
  NIBBLE_OUT_TYPES(NIBBLE_CASE_INTEGER)
  NIBBLE_OUT_TYPES(NIBBLE_CASE_FLOAT)
#undef NIBBLE_CASE_FLOAT
#undef NIBBLE_CASE_INTEGER
#undef NIBBLE_CASE_NONE
#undef NIBBLE_CASE
  // kFloatSubtract (MatMulNBits float zero points, rare), kinds not in
  // kZps: the reference.
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

// Float codes have no zero point (op/ validated that ONNX float8 zero points
// are zero and drops float4 ones).
template <class L, CodeKind kCode>
void DispatchOut(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                 int64_t ld) {
  switch (plan.out) {
#define NIBBLE_CASE(T) \
  case OutType::k##T:  \
    return RunRows<L, kCode, ZeroPointKind::kNone, OutType::k##T>(plan, r0, r1, c0, c1, out, ld);
    NIBBLE_OUT_TYPES(NIBBLE_CASE)
#undef NIBBLE_CASE
  }
}

// Block layout D (kernels/layouts.h), in the translation unit that
// compiles kBits-wide codes (kernels/dequantize_blocks4.cc and
// dequantize_blocks8.cc); DequantizeTile routes by code width, so the
// other branch is never taken.
template <class D, int kBits>
void RunBlockLayout(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                    int64_t ld) {
  if constexpr (CodeBits(D::kCode) != kBits) {
    DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
  } else if constexpr (CodeIsFloat(D::kCode)) {  // value-table codes: no zero point
    DispatchOut<Blocks<D>, D::kCode>(plan, r0, r1, c0, c1, out, ld);
  } else {
    DispatchZpOut<Blocks<D>, D::kCode, ZpBit(D::kZp)>(plan, r0, r1, c0, c1, out, ld);
  }
}

// Every block layout of kBits-wide codes (the others: the reference).
template <int kBits>
void RunBlockLayouts(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                     int64_t ld) {
  switch (plan.layout) {
#define NIBBLE_BLOCK_CASE(D) \
  case Layout::k##D:         \
    return RunBlockLayout<D, kBits>(plan, r0, r1, c0, c1, out, ld);
    NIBBLE_BLOCK_LAYOUTS(NIBBLE_BLOCK_CASE)
#undef NIBBLE_BLOCK_CASE
#define NIBBLE_DECODED_CASE(D) case Layout::k##D:
    NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
    case Layout::kDense:  // not (bit-plane) block layouts: never routed here
    case Layout::kDenseHighNibbles:
    case Layout::kPmxWords:
    case Layout::kAwqWords:
    case Layout::kGptqColumns:
    case Layout::kAwqColumns:
      break;
  }
  DequantizeTileReference(plan, r0, r1, c0, c1, out, ld);
}

#endif  // HWY_TARGET != HWY_SCALAR

#if HWY_TARGET != HWY_SCALAR
// True if the SIMD row kernels handle this tile: rows long enough for one
// unit of 2N lanes, and groups along a row at least N long (so a vector
// straddles at most one group boundary).
HWY_INLINE bool SimdEligible(const Plan& plan, int64_t c0, int64_t c1) {
  const KernelTag df;
  const int64_t n = static_cast<int64_t>(hn::Lanes(df));
  // A group map along the row (inner == 1, compressed-tensors act-order):
  // parameters gathered per element, at map[c] of the row's own (s_axis
  // 1; other strides, the reference).
  const bool mapped = plan.inner == 1 && plan.axis_group != nullptr;
  const bool groups_ok = mapped ? plan.s_axis == 1
                                : (plan.inner != 1 || plan.group >= n ||
                                   (plan.group == 1 && plan.s_axis == 1) || plan.s_axis == 0);
  return groups_ok && c1 - c0 >= 2 * n;
}
#endif

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
