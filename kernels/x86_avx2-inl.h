// The raw x86 intrinsics of the kernels' larger AVX2-only paths (the
// HWY_AVX2 target), included once per Highway target by
// kernels/dequantize-inl.h. Short ones also sit, inside
// `#if HWY_TARGET == HWY_AVX2` blocks, beside the code they serve
// (kernels/code_loaders-inl.h's Codes32In, kernels/dequantize-inl.h's
// byte-plane tables of the 4-bit layouts).
// Why they are not Highway ops: AVX2's byte shuffles (vpshufb) look up 16
// entries per 128-bit half, and Highway 1.0.3's TableLookupBytes does, but
// it has no 64-bit permutes within a vector nor byte unpacks in the
// kernels' output order.
//  - PlaneLookup32 / BytePlanes16: 32 outputs of 16-entry byte-plane
//    tables and the tables' making (the 4-bit layouts', the block half
//    tables', Q5_0's).
//  - SymmetricFiveTables / FifthBits32 / PlaneLookup32x2: Q5_0's tables
//    from its 16 magnitudes, looked up by four byte shuffles and two blends
//    per 32 outputs.
//  - BlockFiveTableShape / FiveBitCodes32 / BlockFiveTable: a 32-entry
//    table per 32-element sub-block of the 5-bit types (Q5_1, Q5_K).
//  - BlockHalfTableShape / HalfTableCodes32 / BlockHalfTable: 16-entry
//    16-bit tables of the ggml block types whose bit-plane codes have 2-4
//    bits (Q2_K, Q3_K, TQ2_0), as two byte planes, looked up by two byte
//    shuffles per 32 outputs.
// Every path here is checked by the tests that compare each compiled target
// with the scalar reference (==).
#if defined(NIBBLE_KERNELS_X86_AVX2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_X86_AVX2_INL_H_
#undef NIBBLE_KERNELS_X86_AVX2_INL_H_
#else
#define NIBBLE_KERNELS_X86_AVX2_INL_H_
#endif

#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "kernels/code_loaders-inl.h"
#include "kernels/convert-inl.h"
#include "kernels/layouts.h"
#include "kernels/plan.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2

// 32 16-bit outputs through byte-plane tables: lo / hi the low and high
// bytes of 16 entries' outputs (the same in both 128-bit halves), c the 32
// outputs' entries (each < 16) in the byte unpacks' order [0-7, 16-23 |
// 8-15, 24-31]. Two byte shuffles look up the low and high bytes, the
// unpacks interleave them in order: outputs 0-15 to *a, 16-31 to *b.
HWY_INLINE void PlaneLookup32(__m256i lo, __m256i hi, __m256i c, __m256i* a, __m256i* b) {
  const __m256i l = _mm256_shuffle_epi8(lo, c), u = _mm256_shuffle_epi8(hi, c);
  *a = _mm256_unpacklo_epi8(l, u);
  *b = _mm256_unpackhi_epi8(l, u);
}

// The byte planes of 16 values (float32: v0 values 0-7, v1 8-15), each
// rounded once to kOut (NarrowBits' / BF16Rounded's bits; kNoNaN: no
// value is NaN): *lo their low bytes, *hi their high bytes, values 0-15
// in each 128-bit half (PlaneLookup32's tables).
template <OutType kOut, bool kNoNaN>
HWY_INLINE void BytePlanes16(__m256 v0, __m256 v1, __m256i* lo, __m256i* hi) {
  if constexpr (kOut == OutType::kBF16) {
    // Bytes 2, 3 of each rounded lane: half 0 [lo 0-3, hi 0-3, lo 8-11,
    // hi 8-11], half 1 the same of entries 4-7 and 12-15; then the
    // doublewords of each plane, in order, to both halves.
    const __m256i pick =
        _mm256_setr_epi8(2, 6, 10, 14, 3, 7, 11, 15, -1, -1, -1, -1, -1, -1, -1, -1, 2, 6, 10, 14,
                         3, 7, 11, 15, -1, -1, -1, -1, -1, -1, -1, -1);
    const __m256i split = _mm256_or_si256(
        _mm256_shuffle_epi8(BF16Rounded<kNoNaN>(v0), pick),
        _mm256_shuffle_epi8(BF16Rounded<kNoNaN>(v1), _mm256_shuffle_epi32(pick, 0x4E)));
    *lo = _mm256_permutevar8x32_epi32(split, _mm256_setr_epi32(0, 4, 2, 6, 0, 4, 2, 6));
    *hi = _mm256_permutevar8x32_epi32(split, _mm256_setr_epi32(1, 5, 3, 7, 1, 5, 3, 7));
  } else {
    static_assert(kOut == OutType::kF16, "BytePlanes16: a 2-byte output type");
    // Values 0-7 and 8-15 each in both halves, their bytes packed: in-lane
    // packs instead of a byte shuffle and two cross-lane permutes (Q2_K,
    // Q3_K, TQ2_0 in cache 1.03-1.06x on the Zen 3 guest).
    const hn::Full256<float> df;
    const __m128i x0 = NarrowBits<kOut>(df, hn::Vec<decltype(df)>{v0}).raw;
    const __m128i x1 = NarrowBits<kOut>(df, hn::Vec<decltype(df)>{v1}).raw;
    const __m256i a = _mm256_inserti128_si256(_mm256_castsi128_si256(x0), x0, 1);
    const __m256i b = _mm256_inserti128_si256(_mm256_castsi128_si256(x1), x1, 1);
    const __m256i low = _mm256_set1_epi16(0xFF);
    *lo = _mm256_packus_epi16(_mm256_and_si256(a, low), _mm256_and_si256(b, low));
    *hi = _mm256_packus_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
  }
}

// ---------------------------------------------------------------------------
// Half tables: float16 / bfloat16 output of the ggml block types whose
// integer codes have 2-4 bits in bit planes (Q2_K, Q3_K, TQ2_0) on AVX2.
// The contract's values of every code c of kPerTable consecutive sub-blocks
// (entry c + kC * place, at most 16) are computed with the contract's
// float32 operations, rounded to the output type once and split into a
// table of their low bytes and one of their high bytes (each in both
// 128-bit halves); then each 32 outputs are one PlaneLookup32 of their
// entries (codes gathered from the block's planes as bytes, plus their
// sub-block's place). A lookup equals the arithmetic: the entry is that
// arithmetic on that code. A 32-element run lies in one table
// (kTableElems is a multiple of 32): one pair of shuffles, no blend. The
// arithmetic path spends a widening, a conversion, a multiply and a
// rounding per 8 outputs; here a table's 16 values are rounded for 32
// (Q3_K), 64 (Q2_K) or 256 (TQ2_0) outputs. (The 5-bit types would need
// two tables and a blend per 32 outputs, and round as many values as
// outputs. Tables of 8 entries per 128-bit half, codes in order and the
// outputs permuted instead, measured 0.93-1.17x of these in cache.)
template <class D>
struct BlockHalfTableShape : BlockTableGeometry<D, 16> {
  using G = BlockTableGeometry<D, 16>;
  using G::kC, G::kSub, G::kSubs, G::kPerTable, G::kTableElems;
  // Plane shapes HalfTableCodes32 reads: the low plane as 32 bytes at one
  // shift (span a multiple of 32), a second plane of one bit the same way;
  // or (kPacked) one plane of 32 consecutive 2-bit fields (span 1: Q2_0),
  // one sub-block per table.
  static constexpr bool kPacked = D::kPlanes[0].span() == 1;
  static constexpr bool PlanesOk() {
    if constexpr (kPacked) {
      return PlaneCount<D>() == 1 && D::kPlanes[0].bits == 2 && kPerTable == 1;
    }
    if (D::kPlanes[0].span() % 32 != 0) return false;
    if constexpr (PlaneCount<D>() == 2) {
      const CodePlane hi = D::kPlanes[1];
      return hi.bits == 1 && hi.span() % 32 == 0;
    }
    return PlaneCount<D>() == 1;
  }
  static constexpr bool kOk = D::kCode == CodeKind::kU8 && PlaneBits<D>() >= 2 &&
                              PlaneBits<D>() <= 4 &&
                              (D::kZp == ZeroPointKind::kNone || D::kZp == ZeroPointKind::kFloat) &&
                              (kSub == 16 || kSub % 32 == 0) && kTableElems % 32 == 0 &&
                              D::kBlockElems % kTableElems == 0 && PlanesOk();
  // The code of table entry e: e % kC of sub-block e / kC; kPacked: the
  // entries HalfTableCodes32 makes, code c at c and at kC c.
  static constexpr int64_t EntryCode(int64_t e) { return kPacked && e >= kC ? e / kC : e % kC; }
};

// The table entries of elements p .. p+31 of `block` (p % 32 == 0) as
// bytes in the byte unpacks' order, [p+0..7, p+16..23 | p+8..15,
// p+24..31] (as Blocks<D>::Codes32In): each element's code plus kC times
// its sub-block's place in its table. BlockHalfTableShape<D>::kOk.
template <class D>
HWY_INLINE __m256i HalfTableCodes32(const uint8_t* block, uint64_t p) {
  using S = BlockHalfTableShape<D>;
  using L = Blocks<D>;
  constexpr int kLowBits = static_cast<int>(D::kPlanes[0].bits);
  int sh;
  const uint8_t* b = L::template FieldByte<0>(block, p, &sh);
  if constexpr (S::kPacked) {
    // The 8 bytes of 32 2-bit fields (from bit 0: p % 32 == 0): byte e / 4
    // to element e's byte, masked to its field (bits 2 (e % 4) .. + 1),
    // fields 2 and 3 (the odd 16-bit words) shifted down by 4: c where e % 4
    // is 0 or 2, 4 c where it is 1 or 3 (EntryCode).
    uint64_t w;
    std::memcpy(&w, b, sizeof(w));
    const __m256i spread =
        _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(w)),
                            _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 4, 4, 4, 4, 5, 5, 5, 5, 2, 2,
                                             2, 2, 3, 3, 3, 3, 6, 6, 6, 6, 7, 7, 7, 7));
    const __m256i fields =
        _mm256_and_si256(spread, _mm256_set1_epi32(static_cast<int>(0xC0300C03u)));
    return _mm256_blend_epi16(fields, _mm256_srli_epi16(fields, 4), 0xAA);
  }
  // (16-bit shifts: a field fits its byte, the byte masks drop what
  // crosses from the neighbouring byte.)
  __m256i c = _mm256_and_si256(
      _mm256_srli_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b)), sh),
      _mm256_set1_epi8(static_cast<char>((1 << kLowBits) - 1)));
  if constexpr (PlaneCount<D>() == 2) {
    int hsh;
    const uint8_t* hb = L::template FieldByte<1>(block, p, &hsh);
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb));
    // Bit hsh of each byte to bit kLowBits.
    const __m256i moved = hsh >= kLowBits ? _mm256_srli_epi16(h, hsh - kLowBits)
                                          : _mm256_slli_epi16(h, kLowBits - hsh);
    c = _mm256_or_si256(
        c, _mm256_and_si256(moved, _mm256_set1_epi8(static_cast<char>(1 << kLowBits))));
  }
  c = _mm256_permute4x64_epi64(c, 0xD8);  // 8-byte runs 0, 2, 1, 3
  // The sub-block's place: p's, and with 16-element sub-blocks the next
  // one for p+16.. (quadwords 1 and 3).
  if constexpr (S::kSub == 16) {
    const auto bytes = [](int64_t v) {  // v in each byte of a quadword
      return static_cast<long long>(0x0101010101010101ull * static_cast<uint64_t>(v));
    };
    const int64_t at = S::kC * ((static_cast<int64_t>(p) % S::kTableElems) / S::kSub);
    return _mm256_or_si256(
        c, _mm256_setr_epi64x(bytes(at), bytes(at + S::kC), bytes(at), bytes(at + S::kC)));
  } else {
    const int64_t at = S::kC * ((static_cast<int64_t>(p) % S::kTableElems) / S::kSub);
    return at == 0 ? c : _mm256_or_si256(c, _mm256_set1_epi8(static_cast<char>(at)));
  }
}

// The loop-invariant float32 code values of a table's entries: entry e
// (0..15, in two vectors) is code EntryCode(e) minus the code offset.
struct HalfTableLanes {
  __m256 code0, code1;
};
template <class D>
HWY_INLINE HalfTableLanes MakeHalfTableLanes(int32_t code_offset) {
  using S = BlockHalfTableShape<D>;
  alignas(32) int32_t code[16];
  for (int64_t e = 0; e < 16; ++e) code[e] = static_cast<int32_t>(S::EntryCode(e)) - code_offset;
  return {_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(code))),
          _mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(code + 8)))};
}

// Entries 8 kI .. 8 kI + 7's parameter (scale or zero) from the table's
// sub-blocks' p[0 .. kPerTable): entry e's sub-block is
// min(e / kC, kPerTable - 1). Reads only those.
template <class D, int kI>
HWY_INLINE __m256 HalfTableParam(const float* p) {
  using S = BlockHalfTableShape<D>;
  constexpr int64_t kA = (8 * kI) / S::kC < S::kPerTable ? (8 * kI) / S::kC : S::kPerTable - 1;
  constexpr int64_t kB =
      (8 * kI + 7) / S::kC < S::kPerTable ? (8 * kI + 7) / S::kC : S::kPerTable - 1;
  if constexpr (kA == kB) {
    return _mm256_broadcast_ss(p + kA);
  } else {
    // kC == 4: sub-blocks kA (lanes 0-3) and kA + 1 (lanes 4-7).
    static_assert(S::kC == 4 && kB == kA + 1, "two sub-blocks per 8 entries");
    double two;
    std::memcpy(&two, p + kA, sizeof(two));
    return _mm256_permutevar_ps(_mm256_castpd_ps(_mm256_set1_pd(two)),
                                _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
  }
}

// The byte planes of the table of sub-blocks s[0 .. kPerTable) (scales; z:
// their float zero points, kZp == kFloat only): *lo the entries' low bytes,
// *hi their high bytes, entries 0-15 in each 128-bit half. kNoNaN: no
// entry is NaN (BF16Rounded's). The arithmetic: Arith's, (q - offset) * s
// (+ z), rounded once to kOut.
template <class D, ZeroPointKind kZp, OutType kOut, bool kNoNaN>
HWY_INLINE void BlockHalfTable(const HalfTableLanes& lanes, const float* s, const float* z,
                               __m256i* lo, __m256i* hi) {
  __m256 v0 = _mm256_mul_ps(lanes.code0, HalfTableParam<D, 0>(s));
  __m256 v1 = _mm256_mul_ps(lanes.code1, HalfTableParam<D, 1>(s));
  if constexpr (kZp == ZeroPointKind::kFloat) {
    v0 = _mm256_add_ps(v0, HalfTableParam<D, 0>(z));
    v1 = _mm256_add_ps(v1, HalfTableParam<D, 1>(z));
  } else {
    (void)z;
  }
  BytePlanes16<kOut, kNoNaN>(v0, v1, lo, hi);
}

// ---------------------------------------------------------------------------
// Symmetric 5-bit blocks (Q5_0: one scale d per 32 codes q, values
// (q - 16) d, -16 d .. 15 d) to float16 / bfloat16, where d is finite.
// Every nonzero value's magnitude is one of d, 2 d, ..., 16 d: those 16
// products are rounded once (two vectors) into byte planes M, entry j the
// magnitude 16 - j; the codes below 16 (the negative values) take M at
// their low 4 bits with the sign bit flipped (rounding to nearest even is
// symmetric and (-k) d = -(k d)), those from 16 on (0 .. 15 d) M shifted
// by one entry, code 16 the zero 0 * d with d's sign (the sign bit of
// M's d). Each 32 outputs are four byte shuffles of the codes' low 4 bits
// and two byte blends by their fifth bits (PlaneLookup32x2). The
// arithmetic path rounds all 32 values; a NaN or infinite d takes it.
// The four tables of scale d: *neg_lo / *neg_hi the low / high bytes of the
// values of codes 0-15, *pos_lo / *pos_hi those of codes 16-31, in both
// 128-bit halves.
template <OutType kOut>
HWY_INLINE void SymmetricFiveTables(float d, __m256i* neg_lo, __m256i* neg_hi, __m256i* pos_lo,
                                    __m256i* pos_hi) {
  const __m256 s = _mm256_set1_ps(d);
  __m256i m_lo, m_hi;  // entry j: (16 - j) d
  BytePlanes16<kOut, true>(_mm256_mul_ps(_mm256_setr_ps(16, 15, 14, 13, 12, 11, 10, 9), s),
                           _mm256_mul_ps(_mm256_setr_ps(8, 7, 6, 5, 4, 3, 2, 1), s), &m_lo, &m_hi);
  *neg_lo = m_lo;
  *neg_hi = _mm256_xor_si256(m_hi, _mm256_set1_epi8(-128));
  // Code 16 + c: entry 16 - c (c > 0); c = 0: low byte 0 (the shuffle's
  // zeroing index), high byte d's sign (entry 15, masked).
  *pos_lo = _mm256_shuffle_epi8(
      m_lo, _mm256_setr_epi8(-128, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, -128, 15, 14,
                             13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1));
  *pos_hi = _mm256_and_si256(
      _mm256_shuffle_epi8(
          m_hi, _mm256_setr_epi8(15, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 15, 15, 14,
                                 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1)),
      _mm256_setr_epi8(-128, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -128, -1,
                       -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
}

// The fifth bits of 32 codes, bit p of `bits` that of code p, as bytes
// (0xFF where set) in the byte unpacks' order [0-7, 16-23 | 8-15, 24-31].
HWY_INLINE __m256i FifthBits32(uint32_t bits) {
  const __m256i mask = _mm256_setr_epi8(1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128,
                                        1, 2, 4, 8, 16, 32, 64, -128, 1, 2, 4, 8, 16, 32, 64, -128);
  const __m256i bytes =
      _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                          _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1,
                                           1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, mask), mask);
}

// PlaneLookup32 over two pairs of tables: code c's entry c of lo0 / hi0
// where `second` is clear, of lo1 / hi1 where it is set (0xFF).
HWY_INLINE void PlaneLookup32x2(__m256i lo0, __m256i hi0, __m256i lo1, __m256i hi1, __m256i c,
                                __m256i second, __m256i* a, __m256i* b) {
  const __m256i l =
      _mm256_blendv_epi8(_mm256_shuffle_epi8(lo0, c), _mm256_shuffle_epi8(lo1, c), second);
  const __m256i u =
      _mm256_blendv_epi8(_mm256_shuffle_epi8(hi0, c), _mm256_shuffle_epi8(hi1, c), second);
  *a = _mm256_unpacklo_epi8(l, u);
  *b = _mm256_unpackhi_epi8(l, u);
}

// ---------------------------------------------------------------------------
// Five-bit tables: float16 / bfloat16 output of the ggml block types whose
// 5-bit codes are a 4-bit plane and a 1-bit plane, one sub-block per 32
// elements (Q5_1, Q5_K; Q5_0 where its scale is not finite). Each
// sub-block's 32 values (the contract's operations on every code, rounded
// once) become two pairs of byte-plane tables, and each 32 outputs one
// PlaneLookup32x2 by the codes' low 4 bits and fifth bits, gathered as
// bytes. A table rounds as many values as it serves outputs; the
// arithmetic path spent most of its time gathering the two planes' bits
// in 32-bit lanes and converting them.
template <class D>
struct BlockFiveTableShape {
  // Plane shapes read: the low plane as Codes32In reads it (span 16 or a
  // multiple of 32), the fifth bits packed (span 1) or one bit of 32
  // bytes (span a multiple of 32).
  static constexpr bool PlanesOk() {
    if constexpr (PlaneCount<D>() != 2) {
      return false;
    } else {
      constexpr CodePlane lo = D::kPlanes[0], hi = D::kPlanes[1];
      return lo.bits == 4 && (lo.span() == 16 || lo.span() % 32 == 0) && hi.bits == 1 &&
             (hi.span() == 1 || hi.span() % 32 == 0);
    }
  }
  static constexpr bool kOk =
      D::kCode == CodeKind::kU8 && D::kSubElems == 32 && D::kBlockElems % 32 == 0 &&
      (D::kZp == ZeroPointKind::kNone || D::kZp == ZeroPointKind::kFloat) && PlanesOk();
};

// Codes p .. p+31 of `block` (p % 32 == 0) in the byte unpacks' order:
// *low their low 4 bits, *fifth 0xFF where their fifth bit is set.
template <class D>
HWY_INLINE void FiveBitCodes32(const uint8_t* block, uint64_t p, __m256i* low, __m256i* fifth) {
  *low = Blocks<D>::Codes32In(block, p);
  constexpr CodePlane hi = D::kPlanes[1];
  if constexpr (hi.span() == 1) {
    uint32_t bits;
    std::memcpy(&bits, block + hi.at + p / 8, sizeof(bits));
    *fifth = FifthBits32(bits);
  } else {
    int hsh;
    const uint8_t* hb = Blocks<D>::template FieldByte<1>(block, p, &hsh);
    const __m256i bit = _mm256_set1_epi8(static_cast<char>(1 << hsh));
    const __m256i h =
        _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb)), 0xD8);
    *fifth = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
  }
}

// The float32 code values q - code_offset of codes 0-31 (the loop's
// invariants), 8 per vector.
struct FiveTableLanes {
  explicit HWY_INLINE FiveTableLanes(int32_t code_offset) {
    for (int i = 0; i < 4; ++i) {
      code[i] = _mm256_cvtepi32_ps(
          _mm256_sub_epi32(_mm256_setr_epi32(8 * i, 8 * i + 1, 8 * i + 2, 8 * i + 3, 8 * i + 4,
                                             8 * i + 5, 8 * i + 6, 8 * i + 7),
                           _mm256_set1_epi32(code_offset)));
    }
  }
  __m256 code[4];
};

// A sub-block's tables (scale s, float zero point z, kZp == kFloat only):
// t[0] / t[1] the low / high bytes of codes 0-15's values, t[2] / t[3]
// those of 16-31. The arithmetic: Arith's, (q - offset) * s (+ z), rounded
// once to kOut. kNoNaN: no value is NaN.
template <ZeroPointKind kZp, OutType kOut, bool kNoNaN>
HWY_INLINE void BlockFiveTable(const FiveTableLanes& lanes, float s, float z, __m256i* t) {
  const __m256 sv = _mm256_set1_ps(s);
  __m256 v[4];
  for (int i = 0; i < 4; ++i) {
    v[i] = _mm256_mul_ps(lanes.code[i], sv);
    if constexpr (kZp == ZeroPointKind::kFloat) v[i] = _mm256_add_ps(v[i], _mm256_set1_ps(z));
  }
  if constexpr (kZp != ZeroPointKind::kFloat) (void)z;
  BytePlanes16<kOut, kNoNaN>(v[0], v[1], &t[0], &t[1]);
  BytePlanes16<kOut, kNoNaN>(v[2], v[3], &t[2], &t[3]);
}

#endif  // HWY_TARGET == HWY_AVX2

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
