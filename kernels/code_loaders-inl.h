// Per-target code loaders: the "unpack" step of the kernels, one loader per
// code layout (kernels/layouts.h), included once per Highway target by
// kernels/dequantize-inl.h. A loader only turns bytes into raw code bit
// fields (zero-extended, in 32-bit or 16-bit lanes); scales, zero points and
// output types are the row kernel's business.
//
// Loader contract (all static; N = Lanes(KernelTag), the float32 lanes):
//   kNibbles        4-bit codes (the AVX-512 row kernel then looks values up
//                   in a per-group 16-entry table)
//   Align()         vector loads start at element offsets k with
//                   (k + Phase(c)) % Align() == 0
//   Row(plan, r)    the CodeRef of row r of the plan's 2-D view
//   Phase(c)        see Align (non-zero only for odd-start dense nibbles)
//   Scalar(c, k)    raw code of element k of the row
//   Address(c, k)   (optional) the byte holding element k's code: for
//                   fetching rows ahead (the fused dot), never read
//   Load(c, k)      raw codes of elements k .. k+N-1 (int32 lanes)
//   Load16(c, k)    (kNibbles) raw codes of elements k .. k+2N-1 (u16 lanes,
//                   each < 16: a 16-entry table lookup needs no masking)
//   LoadLow(c, k)   (optional, kNibbles) raw codes of elements k .. k+N-1 in
//                   bits 0-3 of int32 lanes, the other bits arbitrary: Load
//                   without its mask, for a 16-entry permute (which reads
//                   only those bits)
//   Load16Low(c, k) (optional, AVX-512, kNibbles) Load16 with bits 4-15 of
//                   each lane arbitrary: for a 32-entry permute of a table
//                   whose two 16-entry halves are equal (which reads only
//                   bits 0-4)
//   LoadLow2(c, k, lo, hi) (optional, AVX-512, kNibbles) LoadLow of
//                   elements k .. k+N-1 into *lo and k+N .. k+2N-1 into *hi,
//                   from one load
//   LoadDot(c, k, lo, hi) (optional, AVX-512, kNibbles) LoadLow2 in the
//                   loader's lane order kDotOrder (a 16-entry array): lane
//                   l of *lo holds element k + kDotOrder[l], of *hi
//                   k + N + kDotOrder[l]
//   LoadDotWords(c, k, w0, w1), DotShift(c, w0, w1, lo, hi) (optional,
//                   with LoadDot) LoadDot in two steps, for rows that share
//                   their words (PMX int4x4: four rows' nibbles in each
//                   word): the words' loads, the same for every row whose
//                   c.codes is the same, then the row's shift; LoadDot is
//                   the two in turn
//   LoadSplit(c, k, even, odd) (optional, AVX2) raw codes of elements
//                   k, k+2, ..., k+14 into *even and k+1, ..., k+15 into
//                   *odd, exact: the pair-split order of the row kernel's
//                   SplitRow (whose 16-bit outputs then need no cross-lane
//                   pack)
// Inputs are read with unaligned loads only, never beyond the codes of the
// elements asked for (block layouts: beyond the block holding them).
#if defined(NIBBLE_KERNELS_CODE_LOADERS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_CODE_LOADERS_INL_H_
#undef NIBBLE_KERNELS_CODE_LOADERS_INL_H_
#else
#define NIBBLE_KERNELS_CODE_LOADERS_INL_H_
#endif

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/layouts.h"
#include "kernels/plan.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

namespace hn = hwy::HWY_NAMESPACE;

// The kernels' float vector type (full width).
using KernelTag = hn::ScalableTag<float>;

// How far ahead of the codes being decoded the kernels that read them in
// order fetch into L1 (FetchAhead). The hardware prefetchers alone fell
// behind beside the streamed stores on the Intel guests: the decode's
// loads then waited for memory while its arithmetic could not overlap the
// stores (a synthetic stream with arithmetic at about 0.8 of its memory
// time reached 0.69 of the bare stream, 0.83-0.86 with its reads fetched
// 2 KiB ahead, one fetch per line spread over the loop, not in bursts:
// as good as reads from L1; bench/results/2026-12-02-fetch-ahead/).
inline constexpr int64_t kFetchAheadBytes = 2048;

// Fetches the lines of [p, p + bytes) kFetchAheadBytes ahead: the call
// per block or group of a loop that reads its codes in order. Only a hint
// (never faults, whatever the address).
HWY_INLINE void FetchAhead(const uint8_t* p, int64_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p) + static_cast<uintptr_t>(kFetchAheadBytes);
  for (int64_t o = 0; o < bytes; o += 64) {
    hwy::Prefetch(reinterpret_cast<const uint8_t*>(a + static_cast<uintptr_t>(o)));
  }
  if (bytes > 0 && bytes % 64 != 0) {  // the last line, when the span is not whole lines
    hwy::Prefetch(reinterpret_cast<const uint8_t*>(a + static_cast<uintptr_t>(bytes - 1)));
  }
}

#if HWY_TARGET != HWY_SCALAR

// Where one row's codes are: the layout-specific base (element 0 of the
// row) and the facts the loaders need, held by value in the hot loops.
struct CodeRef {
  const uint8_t* codes;
  int shift;       // kPmxWords, kAwqColumns: nibble position
  bool odd_start;  // dense nibbles: element 0 is a high nibble
  int64_t stride;  // kGptqColumns / kAwqColumns: Plan::word_stride
};

// Every lane of v (uint32) shifted right by s, the same for all lanes:
// vpsrlvd with a broadcast count where the target has it (AVX2, AVX-512:
// one operation), since vpsrld with its count in a register (Highway's
// ShiftRightSame) is two on Intel cores, one of them on port 5 with the
// widening and the table lookups; ShiftRightSame elsewhere. The same bits.
// (16-bit lanes keep ShiftRightSame: vpsrlvw is two operations too — a
// micro-test on the model 207 guest, four independent shifts beside two
// vpermd per iteration: vpsrld-by-register 1.55 ns, vpsrlvd 0.71,
// vpsrlw-by-register and vpsrlvw both 1.55.)
template <class V>
HWY_INLINE V ShiftRightBy(V v, int s) {
#if HWY_TARGET <= HWY_AVX2
  return hn::Shr(v, hn::Set(hn::DFromV<V>(), static_cast<hn::TFromV<V>>(s)));
#else
  return hn::ShiftRightSame(v, s);
#endif
}

struct LoaderTypes {
  using DF = KernelTag;
  using DI = hn::RebindToSigned<DF>;
  using DU = hn::RebindToUnsigned<DF>;
  using VI = hn::Vec<DI>;
  using DU16 = hn::Repartition<uint16_t, DF>;  // 2N x u16, a full vector
  using VU16 = hn::Vec<DU16>;
  static constexpr int64_t kMaxLanes = static_cast<int64_t>(hn::MaxLanes(DF()));
  static constexpr int64_t kWordAlign = kMaxLanes < 8 ? kMaxLanes : 8;
  // Block layouts: scales / zero points come from each block's header
  // (the descriptor's Params), not from Plan::scale.
  static constexpr bool kBlockParams = false;
  // Each code a whole byte or 16-bit word in element order (Load is one
  // widening load): the fused dot decodes such codes by the contract's
  // arithmetic (RowKernel::CanDot; other codes without a table measured
  // slower fused than through the tile).
  static constexpr bool kWholeCodes = false;
};

#if HWY_TARGET <= HWY_AVX3
// The fused dot's lane orders (LoadDot; the row kernel's DotUnits permutes
// X and its partial sums to match): lane l of a 16-lane vector holds
// element kDotOrder[l] of the 16.
// 16 nibbles in 8 bytes, the 8 bytes broadcast to every 64-bit lane and
// both halves of lane q shifted right by 4q bits: lane 2q (the low half)
// holds element q, lane 2q + 1 element q + 8.
constexpr int32_t kDotOrder8Bytes[16] = {0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15};
// 16 nibbles, one in each of 16 bytes, the 16 bytes broadcast to every
// 128-bit lane and the 32-bit lanes of 128-bit lane j shifted right by 8 j
// bits: lane 4 j + d holds element 4 d + j (a 4 x 4 transpose).
constexpr int32_t kDotOrder16Bytes[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};
// 16 codes, one in each of 16 16-bit words, the 32 bytes broadcast to both
// 256-bit halves (32-bit lane j of each: words 2j and 2j + 1) and the high
// half shifted 16 bits further: lane l < 8 holds element 2l, lane 8 + l
// element 2l + 1.
constexpr int32_t kDotOrderWordPairs[16] = {0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15};
#endif

// Shift of the nibble of element k % 8 of a word, repeated so that
// table + (k % 8) covers 16 lanes.
struct ShiftTable {
  uint32_t v[24];
};
constexpr ShiftTable MakeShiftTable(const uint8_t order[8]) {
  ShiftTable t{};
  for (int i = 0; i < 24; ++i) t.v[i] = 4u * order[i % 8];
  return t;
}
inline constexpr uint8_t kSequentialNibbleOrder[8] = {0, 1, 2, 3, 4, 5, 6, 7};
alignas(64) static constexpr ShiftTable kAwqShift = MakeShiftTable(kAwqNibbleOrder);
alignas(64) static constexpr ShiftTable kSeqShift = MakeShiftTable(kSequentialNibbleOrder);

// Two codes per byte (u16 lanes b): lane = (b & 0xF) | (b >> 4) << 8, whose
// two bytes are the two codes in order (kHighFirst: the high nibble first).
// kLowOnly (not kHighFirst): the first code's byte keeps the second code in
// its bits 4-7 (LoadLow).
template <bool kHighFirst = false, bool kLowOnly = false, class D16, class V16>
HWY_INLINE V16 PairNibbles(D16 d16, V16 b) {
  if constexpr (kHighFirst) {
    return hn::Or(hn::ShiftRight<4>(b), hn::ShiftLeft<8>(hn::And(b, hn::Set(d16, 0xF))));
  }
  const V16 first = kLowOnly ? b : hn::And(b, hn::Set(d16, 0xF));
  return hn::Or(first, hn::ShiftLeft<8>(hn::ShiftRight<4>(b)));
}

// Lane i: nibble (shifts[(k + i) % 8]) of 32-bit word (k + i) / 8, the words
// `step` bytes apart starting at `w` (k a multiple of kWordAlign).
HWY_INLINE LoaderTypes::VI WordNibbles(const uint8_t* w, int64_t step, const uint32_t* shifts,
                                       int64_t k) {
  using T = LoaderTypes;
  const T::DI di;
  const T::DU du;
  constexpr size_t kN = hn::MaxLanes(T::DU());
  hn::Vec<T::DU> words;
  if constexpr (kN > 8) {
    uint32_t w0, w1;
    std::memcpy(&w0, w, 4);
    std::memcpy(&w1, w + step, 4);
    const uint64_t two = uint64_t{w0} | (uint64_t{w1} << 32);
    const hn::Repartition<uint64_t, T::DU> du64;
    const auto idx = hn::ShiftRight<3>(hn::Iota(du, 0));
    words = hn::TableLookupLanes(hn::BitCast(du, hn::Set(du64, two)), hn::IndicesFromVec(du, idx));
  } else {
    uint32_t one;
    std::memcpy(&one, w, 4);
    words = hn::Set(du, one);
  }
  const auto sh = hn::LoadU(du, shifts + (k & 7));
  return hn::BitCast(di, hn::And(words >> sh, hn::Set(du, 0xFu)));
}

// hi:lo (N u16 lanes each) as one full vector of 2N u16 lanes. AVX-512:
// without Highway's Combine, which zero-extends lo first (one more
// instruction).
template <class V>
HWY_INLINE LoaderTypes::VU16 Concat16(V hi, V lo) {
#if HWY_TARGET <= HWY_AVX3
  return LoaderTypes::VU16{_mm512_inserti64x4(_mm512_castsi256_si512(lo.raw), hi.raw, 1)};
#else
  return hn::Combine(LoaderTypes::DU16(), hi, lo);
#endif
}

// 2N 4-bit codes from two N-code loads (word layouts).
template <class L>
HWY_INLINE LoaderTypes::VU16 TwoLoads16(const CodeRef& c, int64_t k) {
  using T = LoaderTypes;
  const hn::Rebind<uint16_t, T::DU> du16h;
  const auto lo = L::Load(c, k);
  const auto hi = L::Load(c, k + static_cast<int64_t>(hn::Lanes(T::DU())));
  return Concat16(hn::DemoteTo(du16h, hi), hn::DemoteTo(du16h, lo));
}

// --- kDense, 4-bit codes (ONNX int4 / uint4 / float4; PMX over one column);
// kHighFirst: kDenseHighNibbles (bitsandbytes).
#if HWY_TARGET <= HWY_AVX3_DL
// A multishift control (vpmultishiftqb) that picks a code from dense
// nibbles broadcast to each 64-bit lane: byte 0 of lane j (lanes of
// lane_bytes bytes) takes the 8 bits from bit 4 (j % 16) of its 64-bit
// lane — nibble j % 16, high nibble first: 4 ((j % 16) ^ 1) — in its low
// 4 bits; the other bytes take bit 0 (arbitrary: the loaders' codes have
// bits 4 and up arbitrary).
struct NibblePicks {
  uint8_t b[64];
};
constexpr NibblePicks MakeNibblePicks(int lane_bytes, bool high_first) {
  NibblePicks p{};
  for (int j = 0; j < 64 / lane_bytes; ++j) {
    p.b[lane_bytes * j] = static_cast<uint8_t>(4 * ((j % 16) ^ (high_first ? 1 : 0)));
  }
  return p;
}
// [high_first][32-bit lanes, 16-bit lanes]
alignas(64) inline constexpr NibblePicks kNibblePicks[2][2] = {
    {MakeNibblePicks(4, false), MakeNibblePicks(2, false)},
    {MakeNibblePicks(4, true), MakeNibblePicks(2, true)}};
#endif

template <bool kHighFirst>
struct DenseNibblesOf : LoaderTypes {
  static constexpr bool kNibbles = true;
  static constexpr int64_t Align() { return 2; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    const int64_t e0 = r * plan.cols();
    return {plan.codes + e0 / 2, 0, (e0 & 1) != 0, 0};
  }
  static int64_t Phase(const CodeRef& c) { return c.odd_start ? 1 : 0; }
  static const uint8_t* Address(const CodeRef& c, int64_t k) {
    return c.codes + (k + (c.odd_start ? 1 : 0)) / 2;
  }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    const int64_t e = k + (c.odd_start ? 1 : 0);
    return (uint32_t{c.codes[e / 2]} >> (4 * ((e % 2) ^ (kHighFirst ? 1 : 0)))) & 0xFu;
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) { return LoadPairs<false>(c, k); }
  static HWY_INLINE VI LoadLow(const CodeRef& c, int64_t k) { return LoadPairs<!kHighFirst>(c, k); }
#if HWY_TARGET <= HWY_AVX3
  // The 2N = 32 codes' four 32-bit words (8 codes each), each broadcast
  // (a load, no shuffle), lanes 0-7 and 8-15 of a vector blended from two
  // of them, and lane l shifted right by 4 (l % 8) (4 ((l % 8) ^ 1) high
  // nibble first): its code in bits 0-3, bits 4-31 arbitrary. No work on
  // the shuffle port, which the row kernels' permutes keep busy (a byte
  // unpack and widening there measured slower).
  static HWY_INLINE void LoadLow2(const CodeRef& c, int64_t k, VI* lo, VI* hi) {
    const int64_t e = k + (c.odd_start ? 1 : 0);  // even, >= 0
    const uint8_t* p = c.codes + (e >> 1);
#if HWY_TARGET <= HWY_AVX3_DL
    // VBMI: each 8 bytes (16 codes) broadcast to the 8 64-bit lanes (a
    // load) and every 32-bit lane's code picked by one multishift
    // (kNibblePicks): no blend, no shift (in cache, float32 tables of dense
    // nibble rows 1.03-1.05x, act-order compressed-tensors float16 1.12x).
    uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    const __m512i pick = _mm512_load_si512(kNibblePicks[kHighFirst ? 1 : 0][0].b);
    *lo = VI{_mm512_multishift_epi64_epi8(pick, _mm512_set1_epi64(static_cast<long long>(a)))};
    *hi = VI{_mm512_multishift_epi64_epi8(pick, _mm512_set1_epi64(static_cast<long long>(b)))};
#else
    const __m512i shift =
        kHighFirst ? _mm512_set_epi32(24, 28, 16, 20, 8, 12, 0, 4, 24, 28, 16, 20, 8, 12, 0, 4)
                   : _mm512_set_epi32(28, 24, 20, 16, 12, 8, 4, 0, 28, 24, 20, 16, 12, 8, 4, 0);
    auto word = [&](int i) HWY_ATTR {
      int32_t w;
      std::memcpy(&w, p + 4 * i, 4);
      return _mm512_set1_epi32(w);
    };
    auto two = [&](int i) HWY_ATTR {
      return _mm512_srlv_epi32(_mm512_mask_blend_epi32(0xFF00, word(i), word(i + 1)), shift);
    };
    *lo = VI{two(0)};
    *hi = VI{two(2)};
#endif
  }
  // Each 8 bytes (16 codes) broadcast to the 8 64-bit lanes (a load, no
  // shuffle) and both 32-bit halves of 64-bit lane q shifted right by 4q
  // bits (4(q ^ 1) high nibble first): bits 0-3 of its low half then hold
  // element q, of its high half element q + 8; no work on the shuffle
  // port. (Shifts, not 64-bit rotates: on AMD's Zen 4 a zmm rotate takes
  // the FMA pipes, a shift does not.)
  static constexpr const int32_t* kDotOrder = kDotOrder8Bytes;
  static HWY_INLINE void LoadDot(const CodeRef& c, int64_t k, VI* lo, VI* hi) {
    const int64_t e = k + (c.odd_start ? 1 : 0);  // even, >= 0
    const uint8_t* p = c.codes + (e >> 1);
    uint64_t a, b;
    std::memcpy(&a, p, 8);
    std::memcpy(&b, p + 8, 8);
    const __m512i shift =
        kHighFirst ? _mm512_set_epi32(24, 24, 28, 28, 16, 16, 20, 20, 8, 8, 12, 12, 0, 0, 4, 4)
                   : _mm512_set_epi32(28, 28, 24, 24, 20, 20, 16, 16, 12, 12, 8, 8, 4, 4, 0, 0);
    *lo = VI{_mm512_srlv_epi32(_mm512_set1_epi64(static_cast<long long>(a)), shift)};
    *hi = VI{_mm512_srlv_epi32(_mm512_set1_epi64(static_cast<long long>(b)), shift)};
  }
  // The 16 bytes widened to 16-bit lanes, each lane copied to the two lanes
  // of its byte's codes (one word permute), the second shifted down by 4.
  static HWY_INLINE VU16 Load16Low(const CodeRef& c, int64_t k) {
    const int64_t e = k + (c.odd_start ? 1 : 0);  // even, >= 0
#if HWY_TARGET <= HWY_AVX3_DL
    // VBMI: bytes 0-7 broadcast to 64-bit lanes 0-3 and bytes 8-15 to lanes
    // 4-7 (loads and a blend), every 16-bit lane's code picked by one
    // multishift (kNibblePicks) instead of a widening, a word permute and
    // a shift (in cache, float16 / bfloat16 of ONNX blocked rows, compressed-
    // tensors and NF4 1.03-1.11x).
    uint64_t a, b;
    std::memcpy(&a, c.codes + (e >> 1), 8);
    std::memcpy(&b, c.codes + (e >> 1) + 8, 8);
    const __m512i src = _mm512_mask_set1_epi64(_mm512_set1_epi64(static_cast<long long>(a)), 0xF0,
                                               static_cast<long long>(b));
    return VU16{_mm512_multishift_epi64_epi8(
        _mm512_load_si512(kNibblePicks[kHighFirst ? 1 : 0][1].b), src)};
#else
    const __m256i w =
        _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c.codes + (e >> 1))));
    const __m512i dup = _mm512_permutexvar_epi16(
        _mm512_set_epi16(15, 15, 14, 14, 13, 13, 12, 12, 11, 11, 10, 10, 9, 9, 8, 8, 7, 7, 6, 6, 5,
                         5, 4, 4, 3, 3, 2, 2, 1, 1, 0, 0),
        _mm512_castsi256_si512(w));
    const __m512i shift = kHighFirst ? _mm512_set1_epi32(4) : _mm512_set1_epi32(4 << 16);
    return VU16{_mm512_srlv_epi16(dup, shift)};
#endif
  }
#endif
#if HWY_TARGET == HWY_AVX2
  // AVX2: the 2N = 16 codes from k, exact, in two vectors: one 8-byte
  // load, the nibbles split and interleaved as 16 bytes, each half
  // widened (about half the operations of two Loads).
  static HWY_INLINE void Load2(const CodeRef& c, int64_t k, VI* lo, VI* hi) {
    const int64_t e = k + (c.odd_start ? 1 : 0);  // even, >= 0
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(c.codes + (e >> 1)));
    const __m128i low = b, high = _mm_srli_epi16(b, 4);
    const __m128i x =
        _mm_and_si128(kHighFirst ? _mm_unpacklo_epi8(high, low) : _mm_unpacklo_epi8(low, high),
                      _mm_set1_epi8(0x0F));
    *lo = VI{_mm256_cvtepu8_epi32(x)};
    *hi = VI{_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(x, x))};
  }
  // AVX2: the 16 codes' 8 bytes widened to 8 lanes, one byte each: its
  // low nibble is element k + 2i (high nibble first: k + 2i + 1), its
  // high nibble the other (one widening, where Load2 takes three
  // shuffles).
  static HWY_INLINE void LoadSplit(const CodeRef& c, int64_t k, VI* even, VI* odd) {
    const int64_t e = k + (c.odd_start ? 1 : 0);  // even, >= 0
    const __m256i d =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c.codes + (e >> 1))));
    const __m256i low = _mm256_and_si256(d, _mm256_set1_epi32(0xF));
    const __m256i high = _mm256_srli_epi32(d, 4);
    *even = VI{kHighFirst ? high : low};
    *odd = VI{kHighFirst ? low : high};
  }
#endif
  template <bool kLowOnly>
  static HWY_INLINE VI LoadPairs(const CodeRef& c, int64_t k) {
    // N codes = N/2 bytes, paired into N bytes, widened to N lanes.
    const DI di;
    const DU du;
    const hn::Rebind<uint8_t, DI> du8n;                     // N x u8
    const hn::Repartition<uint16_t, decltype(du8n)> du16h;  // N/2 x u16
    const hn::Rebind<uint8_t, decltype(du16h)> du8h;        // N/2 x u8
    const int64_t e = k + (c.odd_start ? 1 : 0);            // even, >= 0 (a shift below,
                                                            // not a signed division)
    const auto b = hn::PromoteTo(du16h, hn::LoadU(du8h, c.codes + (e >> 1)));
    return hn::BitCast(
        di, hn::PromoteTo(du, hn::BitCast(du8n, PairNibbles<kHighFirst, kLowOnly>(du16h, b))));
  }
  static HWY_INLINE VU16 Load16(const CodeRef& c, int64_t k) {
    const DU16 du16;
    const hn::Rebind<uint16_t, DI> du16h;                  // N x u16
    const hn::Rebind<uint8_t, decltype(du16h)> du8h;       // N x u8
    const hn::Repartition<uint8_t, decltype(du16h)> du8f;  // 2N x u8
    const int64_t e = k + (c.odd_start ? 1 : 0);
    const auto b = hn::PromoteTo(du16h, hn::LoadU(du8h, c.codes + (e >> 1)));
    return hn::PromoteTo(du16, hn::BitCast(du8f, PairNibbles<kHighFirst>(du16h, b)));
  }
};
using DenseNibbles = DenseNibblesOf<false>;

// --- kDense, 8-bit codes (int8 / uint8 / float8).
template <CodeKind kCode>
struct DenseBytes : LoaderTypes {
  static constexpr bool kNibbles = false;
  static constexpr bool kWholeCodes = true;
  static constexpr int64_t Align() { return 1; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    return {plan.codes + r * plan.cols(), 0, false, 0};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static const uint8_t* Address(const CodeRef& c, int64_t k) { return c.codes + k; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) { return c.codes[k]; }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    const DI di;
    const DU du;
    if (kCode == CodeKind::kS8) {
      const hn::Rebind<int8_t, DI> di8;
      return hn::PromoteTo(di, hn::LoadU(di8, reinterpret_cast<const int8_t*>(c.codes) + k));
    }
    const hn::Rebind<uint8_t, DI> du8;
    return hn::BitCast(di, hn::PromoteTo(du, hn::LoadU(du8, c.codes + k)));
  }
};

// --- kDense, 16-bit codes.
template <CodeKind kCode>
struct DenseHalves : LoaderTypes {
  static constexpr bool kNibbles = false;
  static constexpr bool kWholeCodes = true;
  static constexpr int64_t Align() { return 1; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    return {plan.codes + 2 * r * plan.cols(), 0, false, 0};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static const uint8_t* Address(const CodeRef& c, int64_t k) { return c.codes + 2 * k; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    uint16_t h;
    std::memcpy(&h, c.codes + 2 * k, 2);
    return h;
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    const DI di;
    const DU du;
    if (kCode == CodeKind::kS16) {
      const hn::Rebind<int16_t, DI> di16;
      return hn::PromoteTo(di, hn::LoadU(di16, reinterpret_cast<const int16_t*>(c.codes) + k));
    }
    const hn::Rebind<uint16_t, DI> du16;
    return hn::BitCast(
        di, hn::PromoteTo(du, hn::LoadU(du16, reinterpret_cast<const uint16_t*>(c.codes) + k)));
  }
};

// PmxWords<16>'s LoadDot (AVX-512): the unit's 32 words as two 32-byte
// broadcasts (no widening) and one variable shift each, in
// kDotOrderWordPairs (over a widening load and a shift per 16 codes: the
// matmul at M = 4 1.11-1.19x, M = 1 1.0-1.19x, Intel guest,
// bench/results/2026-12-07-pmx-word-dot/). The four rows of an
// interleaved group read the same words: the fused dot loads them once
// for the four (LoadDotWords), each row then shifts its nibbles down
// (DotShift) — a broadcast of 32 bytes takes a shuffle uop on AMD's Zen 4
// (a load alone on Intel).
template <bool kOn>
struct PmxWordDots {};
#if HWY_TARGET <= HWY_AVX3
template <>
struct PmxWordDots<true> {
  using VI = LoaderTypes::VI;
  static constexpr const int32_t* kDotOrder = kDotOrderWordPairs;
  static HWY_INLINE void LoadDotWords(const CodeRef& c, int64_t k, VI* w0, VI* w1) {
    const __m256i* p = reinterpret_cast<const __m256i*>(c.codes + 2 * k);
    *w0 = VI{_mm512_broadcast_i64x4(_mm256_loadu_si256(p))};
    *w1 = VI{_mm512_broadcast_i64x4(_mm256_loadu_si256(p + 1))};
  }
  static HWY_INLINE void DotShift(const CodeRef& c, VI w0, VI w1, VI* lo, VI* hi) {
    const __m512i shift =
        _mm512_add_epi32(_mm512_set1_epi32(c.shift),
                         _mm512_set_epi32(16, 16, 16, 16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 0, 0));
    *lo = VI{_mm512_srlv_epi32(w0.raw, shift)};
    *hi = VI{_mm512_srlv_epi32(w1.raw, shift)};
  }
  static HWY_INLINE void LoadDot(const CodeRef& c, int64_t k, VI* lo, VI* hi) {
    VI w0, w1;
    LoadDotWords(c, k, &w0, &w1);
    DotShift(c, w0, w1, lo, hi);
  }
};
#endif

// --- kPmxWords: element k of the row in word k (16 or 32 bits), nibble at
// `shift`.
template <int kWordBits>
struct PmxWords : LoaderTypes, PmxWordDots<kWordBits == 16> {
  static constexpr bool kNibbles = true;
  static constexpr int64_t Align() { return 1; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    const int64_t e0 = r * plan.cols();
    const int64_t p = plan.interleave, rr = plan.interleave_row;
    const int64_t d = e0 / rr, j = e0 % rr;
    return {plan.codes + ((d / p) * rr + j) * (p / 2), static_cast<int>(4 * (d % p)), false, 0};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static const uint8_t* Address(const CodeRef& c, int64_t k) {
    return c.codes + k * (kWordBits / 8);
  }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    if (kWordBits == 16) {
      uint16_t w;
      std::memcpy(&w, c.codes + 2 * k, 2);
      return (uint32_t{w} >> c.shift) & 0xFu;
    }
    uint32_t w;
    std::memcpy(&w, c.codes + 4 * k, 4);
    return (w >> c.shift) & 0xFu;
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    return hn::BitCast(DI(), hn::And(hn::BitCast(DU(), LoadLow(c, k)), hn::Set(DU(), 0xFu)));
  }
  static HWY_INLINE VI LoadLow(const CodeRef& c, int64_t k) {
    const DI di;
    const DU du;
    if (kWordBits == 16) {
      const hn::Rebind<uint16_t, DI> du16;
      const auto w = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(c.codes) + k);
      return hn::BitCast(di, ShiftRightBy(hn::PromoteTo(du, w), c.shift));
    }
    const auto u = hn::LoadU(du, reinterpret_cast<const uint32_t*>(c.codes) + k);
    return hn::BitCast(di, ShiftRightBy(u, c.shift));
  }
#if HWY_TARGET == HWY_AVX2
  // AVX2, 16-bit words: the 16 words as 8 dwords (one load, no widening),
  // shifted once; element k + 2i's nibble at bit 0 of lane i, k + 2i + 1's
  // at bit 16.
  template <int kBits = kWordBits, std::enable_if_t<kBits == 16, int> = 0>
  static HWY_INLINE void LoadSplit(const CodeRef& c, int64_t k, VI* even, VI* odd) {
    const DU du;
    const auto x =
        ShiftRightBy(hn::LoadU(du, reinterpret_cast<const uint32_t*>(c.codes + 2 * k)), c.shift);
    *even = hn::BitCast(DI(), hn::And(x, hn::Set(du, 0xFu)));
    *odd = hn::BitCast(DI(), hn::And(hn::ShiftRight<16>(x), hn::Set(du, 0xFu)));
  }
#endif
  static HWY_INLINE VU16 Load16(const CodeRef& c, int64_t k) {
    const DU16 du16;
    if (kWordBits == 16) {
      const auto w = hn::LoadU(du16, reinterpret_cast<const uint16_t*>(c.codes) + k);
      return hn::And(hn::ShiftRightSame(w, c.shift), hn::Set(du16, 0xF));
    }
    const DU du;
    const hn::Rebind<uint16_t, DU> du16h;
    const auto* p = reinterpret_cast<const uint32_t*>(c.codes) + k;
    const auto lo = hn::And(ShiftRightBy(hn::LoadU(du, p), c.shift), hn::Set(du, 0xFu));
    const auto hi =
        hn::And(ShiftRightBy(hn::LoadU(du, p + hn::Lanes(du)), c.shift), hn::Set(du, 0xFu));
    return Concat16(hn::DemoteTo(du16h, hn::BitCast(DI(), hi)),
                    hn::DemoteTo(du16h, hn::BitCast(DI(), lo)));
  }
};

// --- kPmxWords with 8-bit fields, four per 32-bit word (GPTQ 8-bit qweight
// in its [K, N] order): element k of the row in word k, byte `shift` / 8.
struct PmxByteWords : LoaderTypes {
  static constexpr bool kNibbles = false;
  static constexpr int64_t Align() { return 1; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    const int64_t e0 = r * plan.cols();
    const int64_t rr = plan.interleave_row, d = e0 / rr, j = e0 % rr;
    return {plan.codes + ((d / 4) * rr + j) * 4, static_cast<int>(8 * (d % 4)), false, 0};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) { return c.codes[4 * k + c.shift / 8]; }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    const DU du;
    const auto u = hn::LoadU(du, reinterpret_cast<const uint32_t*>(c.codes) + k);
    return hn::BitCast(DI(), hn::And(ShiftRightBy(u, c.shift), hn::Set(du, 0xFFu)));
  }
};

// --- kAwqWords: 8 elements per 32-bit word, AWQ nibble order.
struct AwqWords : LoaderTypes {
  static constexpr bool kNibbles = true;
  static constexpr int64_t Align() { return kWordAlign; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    return {plan.codes + (r * plan.cols() / 8) * 4, 0, false, 0};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static const uint8_t* Address(const CodeRef& c, int64_t k) { return c.codes + (k / 8) * 4; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    const uint8_t nib = kAwqNibbleOrder[k % 8];
    return (uint32_t{c.codes[(k / 8) * 4 + nib / 2]} >> (4 * (nib % 2))) & 0xFu;
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    return WordNibbles(c.codes + (k >> 3) * 4, 4, kAwqShift.v, k);
  }
  static HWY_INLINE VU16 Load16(const CodeRef& c, int64_t k) { return TwoLoads16<AwqWords>(c, k); }
};

// --- kGptqColumns: 8 consecutive columns per word, words `stride` apart.
struct GptqColumns : LoaderTypes {
  static constexpr bool kNibbles = true;
  static constexpr int64_t Align() { return kWordAlign; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    return {plan.codes + 4 * r, 0, false, plan.word_stride};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    const int64_t nib = k % 8;
    return (uint32_t{c.codes[(k / 8) * c.stride + nib / 2]} >> (4 * (nib % 2))) & 0xFu;
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    return WordNibbles(c.codes + (k >> 3) * c.stride, c.stride, kSeqShift.v, k);
  }
  static HWY_INLINE VU16 Load16(const CodeRef& c, int64_t k) {
    return TwoLoads16<GptqColumns>(c, k);
  }
};

// --- kAwqColumns: one word per column (`stride` apart), fixed nibble per
// row.
struct AwqColumns : LoaderTypes {
  static constexpr bool kNibbles = true;
  static constexpr int64_t Align() { return 1; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    return {plan.codes + 4 * (r / 8), 4 * kAwqNibbleOrder[r % 8], false, plan.word_stride};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    uint32_t w;
    std::memcpy(&w, c.codes + k * c.stride, 4);
    return (w >> c.shift) & 0xFu;
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    // A gather (op/ checked the base is 4-byte aligned and every offset
    // fits int32).
    const DI di;
    const DU du;
    const auto idx = hn::Mul(hn::Iota(di, 0), hn::Set(di, static_cast<int32_t>(c.stride / 4)));
    const auto* base = reinterpret_cast<const uint32_t*>(c.codes + k * c.stride);
    const auto w = hn::GatherIndex(du, base, idx);
    return hn::BitCast(di, hn::And(ShiftRightBy(w, c.shift), hn::Set(du, 0xFu)));
  }
  static HWY_INLINE VU16 Load16(const CodeRef& c, int64_t k) {
    return TwoLoads16<AwqColumns>(c, k);
  }
};

// --- Block layouts (descriptor D, kernels/layouts.h): codes in place inside
// each D::kBytes block, in one or two bit planes. A vector start (k % N ==
// 0) has, in each plane, either its N fields in N consecutive bytes at one
// shift (span >= N, or 8-bit fields), or packed in N * bits consecutive
// bits (span 1).
// Blocks<D>'s LoadLow2 where D has one 4-bit plane (AVX-512): the 2N
// codes of a unit from k (a multiple of 2N, as Blocks::Align) are the low
// then the high nibbles of N bytes (span N: one load, the high ones
// shifted down) or 2N bytes at one nibble shift (span >= 2N: two loads,
// both shifted by it) — no masks (LoadLow: bits 4-31 arbitrary).
template <class D, bool kOn>
struct BlockLowLoads {};
#if HWY_TARGET <= HWY_AVX3
template <class D>
struct BlockLowLoads<D, true> {
  using VI = LoaderTypes::VI;
  static constexpr CodePlane kPlane = D::kPlanes[0];
  static constexpr uint64_t kSpan = kPlane.span();
  static_assert(kPlane.bits == 4 && (kSpan == 16 || kSpan % 32 == 0), "span N or >= 2N");
  // The unit's first byte from k (a multiple of 2N); *q: k's offset in its
  // run of the plane (q / kSpan: the nibble, low or high).
  static HWY_INLINE const uint8_t* UnitBytes(const CodeRef& c, int64_t k, uint64_t* q) {
    constexpr uint64_t kElems = static_cast<uint64_t>(D::kBlockElems);
    const uint64_t u = static_cast<uint64_t>(k), p = u % kElems;
    *q = p % kPlane.run;
    return c.codes + (u / kElems) * static_cast<uint64_t>(D::kBytes) + kPlane.at +
           (p / kPlane.run) * kSpan + *q % kSpan;
  }
  static HWY_INLINE void LoadLow2(const CodeRef& c, int64_t k, VI* lo, VI* hi) {
    uint64_t q;
    const uint8_t* b = UnitBytes(c, k, &q);
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    if constexpr (kSpan == 16) {
      *lo = VI{x};
      *hi = VI{_mm512_srli_epi32(x, 4)};
    } else {
      const __m512i sh = _mm512_set1_epi32(static_cast<int>(4 * (q / kSpan)));
      const __m512i y =
          _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
      *lo = VI{_mm512_srlv_epi32(x, sh)};
      *hi = VI{_mm512_srlv_epi32(y, sh)};
    }
  }
  // LoadLow2's codes in kDotOrder16Bytes: each 16 bytes broadcast to the
  // four 128-bit lanes (a load on Intel; a shuffle uop too on Zen 4) and
  // 128-bit lane j's 32-bit lanes shifted right by 8 j bits, plus the
  // nibble shift (span N: 4 for the high nibbles; span >= 2N: the
  // plane's) — no work on the shuffle port. (Shifts, not 64-bit rotates:
  // on AMD's Zen 4 a zmm rotate takes the FMA pipes, a shift does not.)
  static constexpr const int32_t* kDotOrder = kDotOrder16Bytes;
  static HWY_INLINE void LoadDot(const CodeRef& c, int64_t k, VI* lo, VI* hi) {
    alignas(64) static constexpr uint32_t kShift[2][16] = {
        {0, 0, 0, 0, 8, 8, 8, 8, 16, 16, 16, 16, 24, 24, 24, 24},
        {4, 4, 4, 4, 12, 12, 12, 12, 20, 20, 20, 20, 28, 28, 28, 28}};
    uint64_t q;
    const uint8_t* b = UnitBytes(c, k, &q);
    const __m512i x = _mm512_broadcast_i64x2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
    if constexpr (kSpan == 16) {
      *lo = VI{_mm512_srlv_epi32(x, _mm512_load_si512(kShift[0]))};
      *hi = VI{_mm512_srlv_epi32(x, _mm512_load_si512(kShift[1]))};
    } else {
      const __m512i shift = _mm512_load_si512(kShift[q / kSpan]);
      const __m512i y =
          _mm512_broadcast_i64x2(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16)));
      *lo = VI{_mm512_srlv_epi32(x, shift)};
      *hi = VI{_mm512_srlv_epi32(y, shift)};
    }
  }
};
#endif

template <class D>
struct Blocks : LoaderTypes, BlockLowLoads<D, CodeBits(D::kCode) == 4 && PlaneCount<D>() == 1> {
  using Desc = D;
  static constexpr bool kBlockParams = true;
  static constexpr bool kNibbles = CodeBits(D::kCode) == 4;  // one 4-bit plane
  static constexpr size_t kPlanes = PlaneCount<D>();
  // Q8_0's one 8-bit plane: Load is one widening load, so the fused dot
  // decodes it by the contract's arithmetic (LoaderTypes::kWholeCodes;
  // 4096 x 4096, M = 1: measured 1.3-1.6x faster than through the tile;
  // the 5- and 6-bit planes measured no faster, so they stay unfused).
  static constexpr bool kWholeCodes = D::kCode == CodeKind::kS8 && kPlanes == 1;
  // 4-bit codes: vector loads start at multiples of 2N, so that Load16's 2N
  // codes are one run of bytes (span >= 2N) or both nibbles of N bytes
  // (span == N). Rows (and the kernels' row chunks) start at a block, so
  // only tiles starting mid-block pay a longer scalar prologue.
  static constexpr int64_t Align() { return kNibbles ? 2 * kMaxLanes : kMaxLanes; }
  static CodeRef Row(const Plan& plan, int64_t r) {
    return {plan.codes + (r * plan.cols() / D::kBlockElems) * D::kBytes, 0, false, 0};
  }
  static int64_t Phase(const CodeRef&) { return 0; }
  static uint32_t Scalar(const CodeRef& c, int64_t k) {
    return BlockCode<D>(c.codes + (k / D::kBlockElems) * D::kBytes, k % D::kBlockElems);
  }

  // The block holding element k of the row and k's position p in it.
  // Unsigned arithmetic: every divisor is a power of two, so this is
  // shifts and masks (signed division would add sign fix-ups to every
  // vector load: measured 10-50 % slower on the block layouts).
  static HWY_INLINE const uint8_t* BlockOf(const CodeRef& c, int64_t k, uint64_t* p) {
    const uint64_t u = static_cast<uint64_t>(k);
    constexpr uint64_t kElems = static_cast<uint64_t>(D::kBlockElems);
    *p = u % kElems;
    return c.codes + (u / kElems) * static_cast<uint64_t>(D::kBytes);
  }
  // Contiguous planes: the byte holding element p's field and its shift.
  template <size_t kI>
  static HWY_INLINE const uint8_t* FieldByte(const uint8_t* block, uint64_t p, int* shift) {
    constexpr CodePlane pl = D::kPlanes[kI];
    constexpr uint64_t run = pl.run, span = pl.span();
    const uint64_t q = p % run;
    *shift = static_cast<int>(pl.bits * (q / span));
    return block + pl.at + (p / run) * span + q % span;
  }
  // Fields of elements p .. p+N-1 of plane kI (u32 lanes, zero-extended).
  template <size_t kI>
  static HWY_INLINE hn::Vec<DU> Fields(const uint8_t* block, uint64_t p) {
    const DU du;
    constexpr CodePlane pl = D::kPlanes[kI];
    constexpr uint32_t kMask = (1u << pl.bits) - 1u;
    if constexpr (pl.bits == 8 || pl.span() >= static_cast<uint32_t>(kMaxLanes)) {
      int sh;
      const uint8_t* b = FieldByte<kI>(block, p, &sh);
      const hn::Rebind<uint8_t, DU> du8;
      const auto u = hn::PromoteTo(du, hn::LoadU(du8, b));
      if constexpr (pl.bits == 8) return u;
      return hn::And(ShiftRightBy(u, sh), hn::Set(du, kMask));
    } else {
      // span 1: N * bits consecutive bits (<= 32), from bit p * bits.
      static_assert(pl.span() == 1 && kMaxLanes * pl.bits <= 32, "packed plane too wide");
      constexpr size_t kBits = static_cast<size_t>(kMaxLanes) * pl.bits;
      const uint64_t bit = p * pl.bits;
      uint32_t w = 0;
      std::memcpy(&w, block + pl.at + bit / 8, (kBits + 7) / 8);
      w >>= bit % 8;  // non-zero only when N * bits < 8
      const auto shifts = hn::Mul(hn::Iota(du, 0), hn::Set(du, pl.bits));
      return hn::And(hn::Set(du, w) >> shifts, hn::Set(du, kMask));
    }
  }
  static HWY_INLINE VI Load(const CodeRef& c, int64_t k) {
    uint64_t p;
    const uint8_t* block = BlockOf(c, k, &p);
    return LoadIn(block, p);
  }
  // Load / Load16 of elements p .. of `block` (the whole-block loops call
  // these with p a compile-time constant after unrolling, so every offset
  // and shift folds away).
  static HWY_INLINE VI LoadIn(const uint8_t* block, uint64_t p) {
    const DI di;
    if constexpr (D::kCode == CodeKind::kS8) {
      int sh;
      const uint8_t* b = FieldByte<0>(block, p, &sh);
      const hn::Rebind<int8_t, DI> di8;
      return hn::PromoteTo(di, hn::LoadU(di8, reinterpret_cast<const int8_t*>(b)));
    } else if constexpr (kPlanes == 1) {
      return hn::BitCast(di, Fields<0>(block, p));
    } else {
      constexpr int kLowBits = static_cast<int>(D::kPlanes[0].bits);
      return hn::BitCast(
          di, hn::Or(Fields<0>(block, p), hn::ShiftLeft<kLowBits>(Fields<kPlanes - 1>(block, p))));
    }
  }
  // kNibbles: the 2N codes from k (a multiple of 2N), widened to 16-bit
  // lanes: with span >= 2N, 2N bytes at one nibble shift; with span == N,
  // the low then the high nibbles of N bytes.
  static HWY_INLINE VU16 Load16(const CodeRef& c, int64_t k) {
    uint64_t p;
    const uint8_t* block = BlockOf(c, k, &p);
    return Load16In(block, p);
  }
  static HWY_INLINE VU16 Load16In(const uint8_t* block, uint64_t p) {
    const DU16 du16;
    const hn::Rebind<uint8_t, DU16> d8;  // 2N bytes
    const hn::Half<DU16> dh;
    const hn::Rebind<uint8_t, decltype(dh)> dh8;  // N bytes
    constexpr uint32_t kSpan = D::kPlanes[0].span();
    int sh;
    const uint8_t* b = FieldByte<0>(block, p, &sh);
    if constexpr (kSpan >= 2 * static_cast<uint32_t>(kMaxLanes)) {
      const auto v = hn::PromoteTo(du16, hn::LoadU(d8, b));
      return hn::And(hn::ShiftRightSame(v, sh), hn::Set(du16, 0xF));
    } else {
      static_assert(kSpan == static_cast<uint32_t>(kMaxLanes), "span N or >= 2N");
#if HWY_TARGET <= HWY_AVX3
      // The N bytes in both halves (a broadcast load), widened, then
      // shifted by 0 (low half) or 4 (high half) per lane: one shuffle
      // (the widening) instead of two.
      (void)dh8;
      static_assert(kMaxLanes == 16, "AVX-512: 16 float lanes");
      alignas(64) static constexpr uint16_t kShift[32] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                          0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4,
                                                          4, 4, 4, 4, 4, 4, 4, 4, 4, 4};
      const auto v = hn::PromoteTo(du16, hn::LoadDup128(d8, b));
      return hn::And(v >> hn::Load(du16, kShift), hn::Set(du16, 0xF));
#else
      const auto v = hn::PromoteTo(dh, hn::LoadU(dh8, b));
      return hn::Combine(du16, hn::ShiftRight<4>(v), hn::And(v, hn::Set(dh, 0xF)));
#endif
    }
  }

  // kNibbles on AVX2: whether Codes32In serves this layout — its plane
  // holds 32 consecutive codes as 16 bytes' low then high nibbles (span
  // 16: ggml's 32-element blocks, IQ4_XS) or as 32 bytes at one shift
  // (span a multiple of 32: Q4_K's 64-element runs).
  static constexpr bool kCodes32 = HWY_TARGET == HWY_AVX2 && kNibbles &&
                                   (D::kPlanes[0].span() == 16 || D::kPlanes[0].span() % 32 == 0);
#if HWY_TARGET == HWY_AVX2
  // kCodes32: codes p .. p+31 (p a multiple of 32) of `block` as bytes in
  // the byte unpacks' order, [p+0..7, p+16..23 | p+8..15, p+24..31]: two
  // byte-shuffle lookups of them and the unpacks of the results (low:
  // outputs p .. p+15, high: p+16 .. p+31) give the 32 outputs in order
  // (RowKernel::WholeBlocks), with about half the shuffles of two Load16In
  // and ShuffleLookups.
  static HWY_INLINE __m256i Codes32In(const uint8_t* block, uint64_t p) {
    constexpr uint32_t kSpan = D::kPlanes[0].span();
    const __m256i nibble = _mm256_set1_epi8(0x0F);
    int sh;
    const uint8_t* b = FieldByte<0>(block, p, &sh);
    if constexpr (kSpan == 16) {
      // (sh is 0 here: codes p+16 .. are the same bytes' high nibbles.)
      const __m256i d = _mm256_shuffle_epi8(
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))),
          _mm256_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
                           15, 8, 9, 10, 11, 12, 13, 14, 15));
      return _mm256_blend_epi32(_mm256_and_si256(d, nibble),
                                _mm256_and_si256(_mm256_srli_epi16(d, 4), nibble), 0xCC);
    } else {
      const __m256i q = _mm256_permute4x64_epi64(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), 0xD8);  // 8-byte runs 0, 2, 1, 3
      return _mm256_and_si256(sh == 0 ? q : _mm256_srli_epi16(q, 4), nibble);
    }
  }
#endif
};

// Block bytes: the codes of the ggml block types whose codes are bit
// fields of two planes (Q3_K, Q5_K, Q6_K) gathered a whole vector of
// bytes at a time (16-bit shifts and byte masks over B bytes at once, B
// the vector's bytes) and stored as int8 q - code_offset, so that the
// arithmetic path then reads each N codes with one sign-extending load
// instead of assembling them plane by plane in 32-bit lanes (a widening
// load, shift and mask per plane, a shift and an or per N values, then
// the subtraction: AVX2, alternated, in cache, Q3_K 1.18-1.36x, Q6_K
// 1.06-1.65x, Q5_K 1.12-1.21x). The arithmetic on q - code_offset is
// unchanged: the same integer, converted and multiplied the same way.
// (On AVX-512 the block tables take the types of at most 5 bits first:
// there this serves Q6_K.)
template <class D>
struct BlockBytesShape {
  using D8 = hn::Repartition<uint8_t, KernelTag>;  // B bytes: a full vector
  static constexpr uint64_t kVecBytes = hn::MaxLanes(D8());
  // Plane shapes read: each B-element run of a plane is B bytes at one
  // shift (span a multiple of B) or B / 2 bytes at two consecutive shifts
  // (span B / 2). (Q5_0 / Q5_1, whose fifth bits are packed one per
  // element, measured no faster through bytes on AVX2: 0.94-1.05x.)
  static constexpr bool PlanesOk() {
    uint32_t bits = 0;
    for (const CodePlane& pl : D::kPlanes) {
      const uint64_t span = pl.span();
      const bool whole = span % kVecBytes == 0 && pl.run % kVecBytes == 0;
      const bool halves = 2 * span == kVecBytes && pl.run % kVecBytes == 0;
      if (!whole && !halves) return false;
      bits += pl.bits;
    }
    return bits <= 8;
  }
  // Two planes only: a one-plane type's codes are one widening load, a
  // shift and a mask per N already (AVX2, alternated, in cache: Q2_K
  // 0.87-0.97x, TQ2_0 0.79-0.99x through bytes).
  static constexpr bool kOk = D::kCode == CodeKind::kU8 && PlaneCount<D>() == 2 &&
                              D::kZp != ZeroPointKind::kInteger &&
                              static_cast<uint64_t>(D::kBlockElems) % kVecBytes == 0 && PlanesOk();
  // q - code_offset fits int8 for every q < 2^bits.
  static bool OffsetOk(int32_t code_offset) {
    return code_offset <= 128 && code_offset >= (int32_t{1} << PlaneBits<D>()) - 128;
  }
};

// Codes p .. p + B - 1 (p a multiple of B) of `block` as int8
// q - code_offset at dst (B bytes, aligned).
template <class D>
HWY_INLINE void BlockBytes(const uint8_t* block, uint64_t p, int32_t code_offset, int8_t* dst) {
  using S = BlockBytesShape<D>;
  static_assert(S::kOk, "block bytes shape");
  const typename S::D8 d8;
  const hn::Repartition<uint16_t, decltype(d8)> d16;
  const hn::Half<decltype(d8)> dh;
  const hn::Repartition<uint16_t, decltype(dh)> dh16;
  auto code = hn::Zero(d8);
  uint32_t acc = 0;  // bits below this plane's field
  for (const CodePlane& pl : D::kPlanes) {
    const uint64_t run = pl.run, span = pl.span();
    const uint64_t q = p % run;
    const uint8_t* const at = block + pl.at + (p / run) * span + q % span;
    const auto sh = static_cast<int>(pl.bits * (q / span));
    // 16-bit shifts (there are no 8-bit ones): a field fits its byte
    // (sh + bits <= 8 and acc + bits <= 8), so the byte mask removes every
    // bit the shifts moved across a byte boundary.
    hn::Vec<decltype(d8)> field;
    if (span >= S::kVecBytes) {
      field = hn::BitCast(d8, hn::ShiftRightSame(hn::BitCast(d16, hn::LoadU(d8, at)), sh));
    } else {  // span B / 2: elements p .. at shift sh, the next B / 2 at sh + bits
      const auto x = hn::BitCast(dh16, hn::LoadU(dh, at));
      field =
          hn::Combine(d8, hn::BitCast(dh, hn::ShiftRightSame(x, sh + static_cast<int>(pl.bits))),
                      hn::BitCast(dh, hn::ShiftRightSame(x, sh)));
    }
    if (acc != 0) {
      field = hn::BitCast(d8, hn::ShiftLeftSame(hn::BitCast(d16, field), static_cast<int>(acc)));
    }
    const auto mask = static_cast<uint8_t>(((1u << pl.bits) - 1u) << acc);
    code = hn::Or(code, hn::And(field, hn::Set(d8, mask)));
    acc += pl.bits;
  }
  code = hn::Sub(code, hn::Set(d8, static_cast<uint8_t>(code_offset)));
  const hn::Repartition<int8_t, decltype(d8)> di8;
  hn::Store(hn::BitCast(di8, code), di8, dst);
}

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
