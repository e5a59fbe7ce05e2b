// The raw x86 intrinsics of the kernels' larger AVX-512 paths, for
// AVX-512 targets only (HWY_TARGET <= HWY_AVX3), included once per Highway
// target by kernels/dequantize-inl.h. Short ones also sit, inside
// `#if HWY_TARGET <= HWY_AVX3` blocks, beside the code they serve:
// kernels/code_loaders-inl.h (nibble and byte unpacking of the code
// loaders: included before this file), kernels/dequantize-inl.h (vpermps
// table lookups of the row kernels and the fused dot, the group-map
// selects) and kernels/dequantize_decoded.cc (NVFP4's 16-bit table).
// Why they are not Highway ops:
//  - BF16x32 / BF16x16 / StoreBF16x32: Highway 1.0.3 has no AVX512_BF16
//    target, and its bfloat16 DemoteTo truncates; vcvtne2ps2bf16 rounds
//    exactly like BF16FromF32, 2-3x faster than the integer-lane rounding.
//    Chosen at run time (CpuHasAvx512Bf16, the CPU's own flag: Highway's
//    dispatch does not detect this extension).
//  - PermuteHalves / BlendHalves32: 32 x 16-bit table
//    lookups (vpermw) and blends; Highway 1.0.3's TableLookupLanes has no
//    16-bit lanes.
//  - BlockTable16 / BlockCodes32 / BlockTableRun: 32-entry 16-bit tables
//    of the small-code ggml block types (vpermw again, or vpermt2w over a
//    table's two halves; byte-mask tests of bit planes, masked 16-bit
//    adds).
//  - GridGroups<D>::Fill: a grid i-quant block's groups (indices from
//    their bit fields, vpgatherdq / vpgatherdd from the grid or its index
//    grid, or permutes of the packed index grid — on AVX3_DL VBMI's byte
//    permutes — or scalar loads: IQ2_XXS always, GridLoads<D> per CPU;
//    the sign parity, the scales) in
//    16-lane vectors; Highway
//    1.0.3 has no 64-bit gather from 32-bit indices, no byte permutes nor
//    byte-masked arithmetic.
//  - Transpose16x16 / TransposeWords16 / ColumnNibbleTiles /
//    GptqBlockTiles: the in-register transposes and 16-bit table lookups
//    of the GPTQ / AWQ [N, K] kernels (Highway 1.0.3 has no 128-bit-block
//    shuffles of two vectors and no 16-bit TableLookupLanes).
// Every path here is checked by the tests that compare each compiled target
// with the scalar reference (==): on a CPU with AVX512_BF16 that covers
// StoreBF16x32, on one without, its integer-lane fallback.
#if defined(NIBBLE_KERNELS_X86_AVX512_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef NIBBLE_KERNELS_X86_AVX512_INL_H_
#undef NIBBLE_KERNELS_X86_AVX512_INL_H_
#else
#define NIBBLE_KERNELS_X86_AVX512_INL_H_
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "kernels/code_loaders-inl.h"
#include "kernels/convert-inl.h"
#include "kernels/dequantize.h"
#include "kernels/ggml_grids.h"
#include "kernels/plan.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET <= HWY_AVX3

// AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4): vcvtne2ps2bf16 rounds
// to nearest even and quiets NaNs exactly like BF16FromF32, but treats
// subnormal inputs as zero; units holding a subnormal take the exact
// integer-lane path instead. Highway 1.0.3 has no target with AVX512_BF16,
// so this is chosen at run time, from a flag set when the program starts
// (kernels_internal::kCpuHasAvx512Bf16): a function-local static's guard
// (its first read may call into the runtime) was checked wherever the flag
// was read, and a possible call in a kernel loop keeps the loop's
// invariants out of registers.
inline bool CpuHasAvx512Bf16() { return ::nibble::kernels_internal::kCpuHasAvx512Bf16; }

// v0 (16 lanes) then v1 as 32 bfloat16 values with vcvtne2ps2bf16 into
// *r; returns false (leaving *r alone) if a lane is subnormal, for the
// caller's exact fallback. Only on a CPU with AVX512_BF16
// (CpuHasAvx512Bf16). Inline assembly, not the intrinsic: the intrinsic
// needs a function compiled for the extra ISA, which cannot be inlined into
// AVX3 code, and a call per 32 outputs spills the loop's vector registers.
// kNormal: the caller guarantees no lane is subnormal (kernels/layouts.h
// BlockNormalValues, Plan::normal_values): no test, always true (the test
// cost 4-23 % of bfloat16 loops in cache on a Zen 4 core).
template <bool kNormal = false>
HWY_INLINE bool BF16x32(__m512 v0, __m512 v1, __m512i* r) {
  if (!kNormal && (_mm512_fpclass_ps_mask(v0, 0x20) | _mm512_fpclass_ps_mask(v1, 0x20)) != 0) {
    return false;
  }
  __m512i out;
  // AT&T operand order: low half from v0, high half from v1.
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(out) : "v"(v1), "v"(v0));
  *r = out;
  return true;
}

// 16 lanes of v as 16 bfloat16 values (vcvtneps2bf16) into *r; the same
// contract as BF16x32.
template <bool kNormal = false>
HWY_INLINE bool BF16x16(__m512 v, __m256i* r) {
  if (!kNormal && _mm512_fpclass_ps_mask(v, 0x20) != 0) return false;
  __m256i out;
  asm("vcvtneps2bf16 %1, %0" : "=v"(out) : "v"(v));
  *r = out;
  return true;
}

// One 64-byte vector at dst (non-temporal when `stream`: dst 64-byte
// aligned).
HWY_INLINE void Store64(__m512i v, char* dst, bool stream) {
  if (stream) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst), v);
  } else {
    _mm512_storeu_si512(dst, v);
  }
}
// 32 float32 values, a then b, at dst (as Store64).
HWY_INLINE void StoreF32x32(__m512 a, __m512 b, char* dst, bool stream) {
  Store64(_mm512_castps_si512(a), dst, stream);
  Store64(_mm512_castps_si512(b), dst + 64, stream);
}

// Stores BF16x32(v0, v1) at dst (non-temporal when `stream`); false (storing
// nothing) where BF16x32 is.
template <bool kNormal = false>
HWY_INLINE bool StoreBF16x32(__m512 v0, __m512 v1, char* dst, bool stream) {
  __m512i r;
  if (!BF16x32<kNormal>(v0, v1, &r)) return false;
  Store64(r, dst, stream);
  return true;
}

// The output bits (kF16 / kBF16) of the 16 lanes of v, rounded once:
// vcvtps2ph, or for bfloat16 vcvtneps2bf16 where the CPU has it and no
// lane is subnormal, else the exact integer-lane rounding.
// bf16_hw: CpuHasAvx512Bf16(), hoisted by loops that round once per few
// stores. kNormal: as BF16x32's.
template <OutType kOut, bool kNormal = false>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, hn::ScalableTag<float>>> OutBits16(
    hn::Vec<hn::ScalableTag<float>> v, bool bf16_hw) {
  const hn::ScalableTag<float> df;
  if constexpr (kOut == OutType::kF16) {
    (void)bf16_hw;
    return F16Bits(df, v);
  } else {
    __m256i r;
    if (bf16_hw && BF16x16<kNormal>(v.raw, &r)) return decltype(BF16Bits(df, v)){r};
    return BF16Bits(df, v);
  }
}
template <OutType kOut, bool kNormal = false>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, hn::ScalableTag<float>>> OutBits16(
    hn::Vec<hn::ScalableTag<float>> v) {
  return OutBits16<kOut, kNormal>(v, kOut == OutType::kBF16 && CpuHasAvx512Bf16());
}

// The 16-bit lanes of `table` selected by the low 5 bits of `idx` (vpermw).
template <class V>
HWY_INLINE V PermuteHalves(V table, V idx) {
  return V{_mm512_permutexvar_epi16(idx.raw, table.raw)};
}

// 16-bit tables of few values (the decoded layouts' Out16,
// kernels/dequantize_decoded.cc): a table from 16 output bits (lanes
// 16-31 zero), and 32 lanes of b where bit i of the 4 bytes at bits is
// set, else a (lane i taking lane 0 / 1 of `pair`).
HWY_INLINE __m512i HalfTable16(hn::Vec<hn::Rebind<uint16_t, hn::ScalableTag<float>>> h) {
  return _mm512_zextsi256_si512(h.raw);
}
HWY_INLINE void SplitPair16(hn::Vec<hn::Rebind<uint16_t, hn::ScalableTag<float>>> pair, __m512i* a,
                            __m512i* b) {
  const __m128i t = _mm256_castsi256_si128(pair.raw);
  *a = _mm512_broadcastw_epi16(t);
  *b = _mm512_broadcastw_epi16(_mm_srli_epi32(t, 16));
}
HWY_INLINE __m512i BlendHalves32(const uint8_t* bits, __m512i a, __m512i b) {
  __mmask32 m;
  std::memcpy(&m, bits, 4);
  return _mm512_mask_blend_epi16(m, a, b);
}

// v0 (16 lanes) then v1 as 32 output bits (kF16 / kBF16), each rounded
// once as OutBits16 rounds it (bfloat16: one vcvtne2ps2bf16 where the CPU
// has it and no lane is subnormal).
// bf16_hw: CpuHasAvx512Bf16() (see OutBits16). kNormal: as BF16x32's.
template <OutType kOut, bool kNormal = false>
HWY_INLINE __m512i OutBits32(__m512 v0, __m512 v1, bool bf16_hw) {
  using VF = hn::Vec<hn::ScalableTag<float>>;
  if constexpr (kOut == OutType::kBF16) {
    __m512i r;
    if (bf16_hw && BF16x32<kNormal>(v0, v1, &r)) return r;
  }
  return Concat16(OutBits16<kOut>(VF{v1}, bf16_hw), OutBits16<kOut>(VF{v0}, bf16_hw)).raw;
}
template <OutType kOut, bool kNormal = false>
HWY_INLINE __m512i OutBits32(__m512 v0, __m512 v1) {
  return OutBits32<kOut, kNormal>(v0, v1, kOut == OutType::kBF16 && CpuHasAvx512Bf16());
}

#if HWY_TARGET <= HWY_AVX3_DL
// ---------------------------------------------------------------------------
// float8_e4m3fn codes to 16-bit outputs through byte-plane tables (VBMI).
// A group's 128 magnitudes m (code & 0x7F) times its scale s, each rounded
// once to kOut, are one 128-entry table of 16-bit values kept as two byte
// planes in four registers; 64 codes then take two two-table byte permutes
// (vpermt2b reads index bits 0-6), the code's sign bit flipped into bit 15,
// and two unpacks. Same bits as the arithmetic path (decode(c) * s rounded
// once) when s is finite: round-to-nearest-even is symmetric, so
// decode(c) * s = -(decode(c & 0x7F) * s) bit for bit for a negative code,
// zeros included (-0 * s = -(+0 * s)), and the NaN code's product is that
// NaN with the code's sign (the multiply returns its NaN operand), which
// the flip gives too. With s infinite or NaN the products' NaNs do not
// follow the code's sign: such groups take the arithmetic path.
struct Float8Planes {
  __m512i lo0, lo1, hi0, hi1;  // low / high bytes of entries 0-63, 64-127
};

// Byte j of 128 (two registers): byte 2j (kOdd: 2j + 1), as permute indices.
template <bool kOdd>
struct EveryOtherByte {
  uint8_t idx[64];
  constexpr EveryOtherByte() : idx() {
    for (int j = 0; j < 64; ++j) idx[j] = static_cast<uint8_t>(2 * j + (kOdd ? 1 : 0));
  }
};
// Bytes reordered so that each 128-bit lane's byte unpacks give outputs
// in order: lane j holds bytes 8j .. 8j + 7, then 32 + 8j .. 32 + 8j + 7.
struct UnpackOrder {
  uint8_t idx[64];
  constexpr UnpackOrder() : idx() {
    for (int j = 0; j < 64; ++j) {
      const int lane = j / 16, b = j % 16;
      idx[j] = static_cast<uint8_t>(b < 8 ? 8 * lane + b : 32 + 8 * lane + (b - 8));
    }
  }
};

// The planes of decode[m] * s for m < 128 (decode: the float8 code table,
// its first 128 entries the magnitudes, +0 to the positive NaN), each
// entry Arith's multiply rounded by OutBits32 (bf16_hw: as OutBits32's).
template <OutType kOut>
HWY_INLINE Float8Planes Float8MagnitudePlanes(const float* decode, float s, bool bf16_hw) {
  const __m512 sv = _mm512_set1_ps(s);
  __m512i w[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    w[j] = OutBits32<kOut>(_mm512_mul_ps(_mm512_loadu_ps(decode + 32 * j), sv),
                           _mm512_mul_ps(_mm512_loadu_ps(decode + 32 * j + 16), sv), bf16_hw);
  }
  alignas(64) static constexpr EveryOtherByte<false> kEven{};
  alignas(64) static constexpr EveryOtherByte<true> kOdd{};
  const __m512i even = _mm512_load_si512(kEven.idx), odd = _mm512_load_si512(kOdd.idx);
  return {_mm512_permutex2var_epi8(w[0], even, w[1]), _mm512_permutex2var_epi8(w[2], even, w[3]),
          _mm512_permutex2var_epi8(w[0], odd, w[1]), _mm512_permutex2var_epi8(w[2], odd, w[3])};
}

// The 64 float8_e4m3fn codes at p through t, as 64 16-bit values at dst
// (128 bytes; stream: non-temporal, dst 64-byte aligned).
HWY_INLINE void StoreFloat8x64(const Float8Planes& t, const uint8_t* p, char* dst, bool stream) {
  alignas(64) static constexpr UnpackOrder kOrder{};
  const __m512i c = _mm512_permutexvar_epi8(_mm512_load_si512(kOrder.idx), _mm512_loadu_si512(p));
  const __m512i lo = _mm512_permutex2var_epi8(t.lo0, c, t.lo1);
  // hi ^ (c & 0x80): the code's sign into bit 15.
  const __m512i hi = _mm512_ternarylogic_epi32(_mm512_permutex2var_epi8(t.hi0, c, t.hi1), c,
                                               _mm512_set1_epi8(static_cast<char>(0x80)), 0x78);
  Store64(_mm512_unpacklo_epi8(lo, hi), dst, stream);
  Store64(_mm512_unpackhi_epi8(lo, hi), dst + 64, stream);
}
#endif  // HWY_TARGET <= HWY_AVX3_DL

// ---------------------------------------------------------------------------
// Block tables: float16 / bfloat16 output of the ggml block types whose
// integer codes have at most 5 bits (Q2_K, Q3_K, Q5_0, Q5_1, Q5_K, TQ2_0).
// The contract's values of every code c of kPerTable consecutive
// sub-blocks (c + kC * sub-block, at most 32) are computed with the
// contract's float32 operations, rounded to the output type once, and held
// in one 32 x 16-bit register; then each 32 outputs are one vpermw of
// their codes (gathered from the block's bit planes in 16-bit lanes) plus
// their sub-block's offset. A lookup equals the arithmetic: the table entry
// is that arithmetic on that code. (The arithmetic path spends a widening,
// a conversion, a multiply and a rounding per 16 outputs; measured 1.4-2.5x
// slower in cache.)
// (Tables of whole 32-element units: with kC <= kSub, 32 / kC sub-blocks
// span at least 32 elements.)
template <class D>
struct BlockTableShape : BlockTableGeometry<D, 32> {
  using G = BlockTableGeometry<D, 32>;
  using G::kC, G::kSub, G::kSubs, G::kPerTable, G::kTableElems;
  // Plane shapes BlockCodes32 reads: the low plane as 32 bytes at one
  // shift (span >= 32), the two fields of 16 bytes (span 16) or, alone,
  // 32 consecutive fields of 2 bits (span 1: one quadword, Q2_0; no layout
  // has a packed plane of 1 bit, so none is taken untested);
  // a second plane of one bit, as 32 bytes (span >= 32) or 32 consecutive
  // bits.
  static constexpr bool PlanesOk() {
    const CodePlane lo = D::kPlanes[0];
    if (lo.span() == 1) return PlaneCount<D>() == 1 && lo.bits == 2;
    if (lo.span() != 16 && lo.span() < 32) return false;
    if constexpr (PlaneCount<D>() == 2) {
      const CodePlane hi = D::kPlanes[PlaneCount<D>() - 1];
      if (hi.bits != 1 || (hi.span() != 1 && hi.span() < 32)) return false;
    }
    return true;
  }
  static constexpr bool kOk = D::kCode == CodeKind::kU8 && PlaneBits<D>() <= 5 && kC <= kSub &&
                              (D::kZp == ZeroPointKind::kNone || D::kZp == ZeroPointKind::kFloat) &&
                              PlanesOk();
};

// The loop-invariant lane facts of D's tables: lane e of the two halves
// (e = 0..31) holds code e % kC of sub-block min(e / kC, kPerTable - 1):
// its float32 code value q - code_offset and its sub-block.
struct BlockTableLanes {
  __m512 code_lo, code_hi;
  __m512i sub_lo, sub_hi;
};
template <class D>
HWY_INLINE BlockTableLanes MakeBlockTableLanes(int32_t code_offset) {
  using S = BlockTableShape<D>;
  alignas(64) int32_t code[32], sub[32];
  for (int64_t e = 0; e < 32; ++e) {
    code[e] = static_cast<int32_t>(e % S::kC) - code_offset;
    sub[e] = static_cast<int32_t>(std::min(e / S::kC, S::kPerTable - 1));
  }
  return {_mm512_cvtepi32_ps(_mm512_load_si512(code)),
          _mm512_cvtepi32_ps(_mm512_load_si512(code + 16)), _mm512_load_si512(sub),
          _mm512_load_si512(sub + 16)};
}

// The table of sub-blocks s[0 .. kPerTable) (scales; z: their float zero
// points, kZp == kFloat) as float32, entries 0-15 in *lo and 16-31 in *hi:
// entry e = the contract's value of code e % kC in sub-block e / kC. Reads
// exactly kPerTable entries.
template <class D, ZeroPointKind kZp>
HWY_INLINE void BlockTableF32(const BlockTableLanes& lanes, const float* s, const float* z,
                              __m512* lo_out, __m512* hi_out) {
  using S = BlockTableShape<D>;
  auto pick = [&](const float* p, __m512i sub) HWY_ATTR {
    if constexpr (S::kPerTable == 1) {
      (void)sub;
      return _mm512_set1_ps(p[0]);
    } else {
      constexpr auto kMask = static_cast<__mmask16>((1u << S::kPerTable) - 1u);
      return _mm512_permutexvar_ps(sub, _mm512_maskz_loadu_ps(kMask, p));
    }
  };
  __m512 lo = _mm512_mul_ps(lanes.code_lo, pick(s, lanes.sub_lo));
  __m512 hi = _mm512_mul_ps(lanes.code_hi, pick(s, lanes.sub_hi));
  if constexpr (kZp == ZeroPointKind::kFloat) {
    lo = _mm512_add_ps(lo, pick(z, lanes.sub_lo));
    hi = _mm512_add_ps(hi, pick(z, lanes.sub_hi));
  } else {
    (void)z;
  }
  *lo_out = lo;
  *hi_out = hi;
}

// The table indices of elements p .. p+31 of `block` (p % 32 == 0): each
// element's code plus kC times its sub-block's place in the table (`sub0`:
// that of element p; with 16-element sub-blocks the upper 16 lanes are in
// the next one). BlockTableShape<D>::kOk.
// kSplit: the high plane's bit adds 2 << bits of the low plane instead of
// 1 << bits, so that it picks the second register of a vpermt2w over a
// table split in two (BlockTableRunWith's kSplit).
template <class D, bool kSplit = false>
HWY_INLINE __m512i BlockCodes32(const uint8_t* block, uint64_t p, int64_t sub0) {
  using S = BlockTableShape<D>;
  using L = Blocks<D>;
  constexpr CodePlane lo = D::kPlanes[0];
  int sh;
  const uint8_t* b = L::template FieldByte<0>(block, p, &sh);
  __m512i c;
  if constexpr (lo.span() == 1) {
    // 32 fields of lo.bits (2) bits from b's bit 0 (sh is 0: p % 32
    // == 0), in one quadword broadcast; 16-bit lane e gets field e in its
    // low bits: VBMI, one multishift (byte 2 e: the 8 bits from field e's
    // bit); else the 16 bits holding field e (fields never straddle them)
    // permuted to it and shifted down.
    (void)sh;
    constexpr int kBits = static_cast<int>(lo.bits);
    struct Picks {
      uint8_t bit[64];
      int16_t word[32], shift[32];
      constexpr Picks() : bit(), word(), shift() {
        for (int e = 0; e < 32; ++e) {
          bit[2 * e] = static_cast<uint8_t>(kBits * e);
          word[e] = static_cast<int16_t>(kBits * e / 16);
          shift[e] = static_cast<int16_t>(kBits * e % 16);
        }
      }
    };
    alignas(64) static constexpr Picks kPicks{};
    uint64_t w = 0;
    std::memcpy(&w, b, 4 * kBits);  // (exactly the 32 fields' bytes)
    const __m512i x = _mm512_set1_epi64(static_cast<long long>(w));
#if HWY_TARGET <= HWY_AVX3_DL
    c = _mm512_multishift_epi64_epi8(_mm512_load_si512(kPicks.bit), x);
#else
    c = _mm512_srlv_epi16(_mm512_permutexvar_epi16(_mm512_load_si512(kPicks.word), x),
                          _mm512_load_si512(kPicks.shift));
#endif
  } else if constexpr (lo.span() >= 32) {
    c = _mm512_srl_epi16(
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b))),
        _mm_cvtsi32_si128(sh));
  } else {
    // Span 16: fields sh (elements p ..) and sh + bits (p + 16 ..) of the
    // same 16 bytes.
    const __m512i v = _mm512_cvtepu8_epi16(
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))));
    const __m512i shifts = _mm512_mask_blend_epi16(
        0xFFFF0000u, _mm512_set1_epi16(static_cast<int16_t>(sh)),
        _mm512_set1_epi16(static_cast<int16_t>(sh + static_cast<int>(lo.bits))));
    c = _mm512_srlv_epi16(v, shifts);
  }
  c = _mm512_and_si512(c, _mm512_set1_epi16(static_cast<int16_t>((1u << lo.bits) - 1u)));
  if constexpr (PlaneCount<D>() == 2) {
    constexpr CodePlane hi = D::kPlanes[1];
    __mmask32 m;
    if constexpr (hi.span() == 1) {
      uint32_t w;
      std::memcpy(&w, block + hi.at + p / 8, 4);
      m = w;
    } else {
      int hsh;
      const uint8_t* hb = L::template FieldByte<1>(block, p, &hsh);
      m = _mm256_test_epi8_mask(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(hb)),
                                _mm256_set1_epi8(static_cast<char>(1 << hsh)));
    }
    // (Add: the bit is clear in c; AVX-512 has no 16-bit masked or.)
    c = _mm512_mask_add_epi16(
        c, m, c, _mm512_set1_epi16(static_cast<int16_t>((kSplit ? 2u : 1u) << lo.bits)));
  }
  const auto base = static_cast<int16_t>(S::kC * sub0);
  if constexpr (S::kSub >= 32) {
    return _mm512_or_si512(c, _mm512_set1_epi16(base));
  } else {
    static_assert(S::kSub == 16, "sub-blocks of 16 or >= 32 elements");
    return _mm512_or_si512(
        c, _mm512_mask_blend_epi16(0xFFFF0000u, _mm512_set1_epi16(base),
                                   _mm512_set1_epi16(static_cast<int16_t>(base + S::kC))));
  }
}

// Whole blocks [0, n) of D from `blocks` (scales s / float zero points z,
// kFloat only, else null: kSubs per block, in order) through block tables to out (n * kBlockElems
// outputs of kOut; `stream`: non-temporal, out 64-byte aligned).
// kBf16Hw: CpuHasAvx512Bf16() for bfloat16 outputs (BlockTableRun).
template <class D, ZeroPointKind kZp, OutType kOut, bool kBf16Hw>
HWY_INLINE void BlockTableRunWith(const uint8_t* blocks, int64_t n, const float* s, const float* z,
                                  int32_t code_offset, char* out, bool stream) {
  using S = BlockTableShape<D>;
  const BlockTableLanes lanes = MakeBlockTableLanes<D>(code_offset);
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  // float16 tables of one sub-block's 32 codes (Q5_0, Q5_1, Q5_K): the two
  // converted halves kept in two registers and looked up by vpermt2w (the
  // codes' high bit then selects the second), instead of joined by a
  // cross-lane insert per table.
  constexpr bool kSplit = kOut == OutType::kF16 && S::kPerTable == 1 && S::kC == 32 &&
                          PlaneCount<D>() == 2 && D::kPlanes[0].bits == 4;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* const block = blocks + i * D::kBytes;
    const float* const bs = s + i * S::kSubs;
    const float* const bz = kZp == ZeroPointKind::kFloat ? z + i * S::kSubs : nullptr;
    char* const dst = out + i * D::kBlockElems * kOutBytes;
    __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
    __m512i t = _mm512_setzero_si512(), t_hi = _mm512_setzero_si512();
#pragma GCC unroll 16
    for (int64_t j = 0; j < D::kBlockElems; j += 32) {
      if (j % S::kTableElems == 0) {
        BlockTableF32<D, kZp>(lanes, bs + j / S::kSub,
                              kZp == ZeroPointKind::kFloat ? bz + j / S::kSub : nullptr, &lo, &hi);
        if constexpr (kSplit) {
          using VF = hn::Vec<hn::ScalableTag<float>>;
          t = _mm512_zextsi256_si512(OutBits16<kOut>(VF{lo}, false).raw);
          t_hi = _mm512_zextsi256_si512(OutBits16<kOut>(VF{hi}, false).raw);
        } else if constexpr (OutDesc<kOut>::kBytes == 2) {
          t = OutBits32<kOut, BlockNormalValues<D>()>(lo, hi, kBf16Hw);
        }
      }
      const __m512i idx =
          BlockCodes32<D, kSplit>(block, static_cast<uint64_t>(j), (j % S::kTableElems) / S::kSub);
      char* const at = dst + j * kOutBytes;
      if constexpr (OutDesc<kOut>::kBytes == 4) {
        // float32: the 32-entry table in two registers (vpermt2ps).
        const __m512 v0 =
            _mm512_permutex2var_ps(lo, _mm512_cvtepu16_epi32(_mm512_castsi512_si256(idx)), hi);
        const __m512 v1 = _mm512_permutex2var_ps(
            lo, _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(idx, 1)), hi);
        StoreF32x32(v0, v1, at, stream);
      } else if constexpr (kSplit) {
        Store64(_mm512_permutex2var_epi16(t, idx, t_hi), at, stream);
      } else {
        Store64(_mm512_permutexvar_epi16(idx, t), at, stream);
      }
    }
  }
}

template <class D, ZeroPointKind kZp, OutType kOut>
HWY_INLINE void BlockTableRun(const uint8_t* blocks, int64_t n, const float* s, const float* z,
                              int32_t code_offset, char* out, bool stream) {
  // (The CPU's bfloat16 flag read once, a constant of the loop: read per
  // table, its guarded static is re-read after every output store.)
  if (kOut == OutType::kBF16 && CpuHasAvx512Bf16()) {
    BlockTableRunWith<D, kZp, kOut, true>(blocks, n, s, z, code_offset, out, stream);
  } else {
    BlockTableRunWith<D, kZp, kOut, false>(blocks, n, s, z, code_offset, out, stream);
  }
}

// ---------------------------------------------------------------------------
// Grid groups: the per-block work of the grid i-quants (kernels/layouts.h,
// GridLayout: D::Groups) in 16-lane vectors, one lane per 8-value group —
// grid indices assembled from their bit fields and looked up with gathers,
// ggml's 7-bit sign indices extended by their parity (ksigns_iq2xs), the
// sub-block scales computed by the same float operations as D::Groups and
// spread to their groups. GridGroups<D>::Fill(block, g) sets exactly what
// D::Groups sets in g (the same integers, the same float32 bits); the
// scalar Groups stays the definition, and a descriptor without a Fill here
// runs it (GridGroups<D>::kVector false). A new grid type gets a Fill here
// only if the scalar one is measured to limit it.
namespace grid_internal {
// Lanes k of a 16-lane int32 vector: k / 4 + first (the sub-block of group
// k for 4 groups per sub-block), as vpermd indices.
HWY_INLINE __m512i QuarterLanes(int first) {
  return _mm512_add_epi32(
      _mm512_srli_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2),
      _mm512_set1_epi32(first));
}
// Per lane: (k % 4) * step, k the lane.
HWY_INLINE __m512i QuarterShifts(int step) {
  return _mm512_mullo_epi32(
      _mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_epi32(3)),
      _mm512_set1_epi32(step));
}
// 16 sign bytes (lanes < 128): ksigns_iq2xs[s] = s with bit 7 the parity
// of its 7 bits (layout_internal::SignsOf7).
HWY_INLINE void StoreSigns7(__m512i s, uint8_t* dst) {
  __m512i t = _mm512_xor_si512(s, _mm512_srli_epi32(s, 4));
  t = _mm512_xor_si512(t, _mm512_srli_epi32(t, 2));
  t = _mm512_xor_si512(t, _mm512_srli_epi32(t, 1));
  const __m512i parity = _mm512_slli_epi32(_mm512_and_si512(t, _mm512_set1_epi32(1)), 7);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                   _mm512_cvtepi32_epi8(_mm512_or_si512(s, parity)));
}
#if HWY_TARGET <= HWY_AVX3_DL
// VBMI: the 32 sign bytes of a block (ksigns_iq2xs of 32 7-bit sign
// indices, SignsOf7) to dst, the indices' bits in bits 0-6 of bytes 0-31
// of s (bit 7 ignored): one two-table byte permute through the 128-entry
// table (the parity computation of StoreSigns7 takes 10 operations per
// 16 indices).
HWY_INLINE void StoreSignBytes7(__m512i s, uint8_t* dst) {
  const auto* t = reinterpret_cast<const __m512i*>(layout_internal::kSigns7.v);
  const __m512i signs =
      _mm512_permutex2var_epi8(_mm512_loadu_si512(t), s, _mm512_loadu_si512(t + 1));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm512_castsi512_si256(signs));
}
// The 7-bit fields at bits 7 l (l = 0-3) of the dwords of v's low 256
// bits in bytes 4 i + l (bits 0-6; i the dword): one multishift.
HWY_INLINE __m512i Sevens(__m512i v) {
  return _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x352E2720150E0700LL), v);
}
#endif
// GridLoads: the 4 entries grid[field j] to dst[j], the indices the
// 16-bit fields j of idx (four indices assembled by bit deposits).
template <class Grid>
HWY_INLINE void LoadFour(const Grid* grid, uint64_t idx, uint64_t* dst) {
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) std::memcpy(dst + j, grid + ((idx >> (16 * j)) & 0xFFFF), 8);
}
// 16 grid entries of 8 bytes: table[idx lane k] to dst[k].
HWY_INLINE void GatherGrid64(const uint64_t* table, __m512i idx, uint64_t* dst) {
  const auto* t = reinterpret_cast<const long long*>(table);  // NOLINT(runtime/int)
  _mm512_storeu_si512(dst, _mm512_i32gather_epi64(_mm512_castsi512_si256(idx), t, 8));
  _mm512_storeu_si512(dst + 8, _mm512_i32gather_epi64(_mm512_extracti64x4_epi64(idx, 1), t, 8));
}
// 16 grid entries of 4 bytes (8 groups of IQ3): table[idx lane k] to dst[k].
HWY_INLINE void GatherGrid32(const uint32_t* table, __m512i idx, uint32_t* dst) {
  _mm512_storeu_si512(dst, _mm512_i32gather_epi32(idx, table, 4));
}
// 16 bytes at p, zero-extended to int32 lanes.
HWY_INLINE __m512i Bytes16(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
// 8 bytes at p, zero-extended to int32 lanes 0-7 (lanes 8-15 zero).
HWY_INLINE __m512i Bytes8(const uint8_t* p) {
  return _mm512_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}
// (lanes >> shift) & mask, shifts per lane.
HWY_INLINE __m512i Bits(__m512i v, __m512i shift, int mask) {
  return _mm512_and_si512(_mm512_srlv_epi32(v, shift), _mm512_set1_epi32(mask));
}
// Entries table[idx] of a kEntries-entry 16-bit table (64-byte aligned;
// 256 or 512 entries) for the 32 indices in the low bits of idx's 16-bit
// lanes: two-table word permutes on bits 0-5, blended on the bits above.
// (16-lane gathers measured about 20 cycles each on Zen 4: iq3_s float16
// spent about 60 % of its time in its four per block.)
template <int kEntries>
HWY_INLINE __m512i LookupWords(const uint16_t* table, __m512i idx) {
  static_assert(kEntries == 256 || kEntries == 512, "4 or 8 permutes");
  constexpr int kPairs = kEntries / 64;
  const auto* t = reinterpret_cast<const __m512i*>(table);
  __m512i r[kPairs];
#pragma GCC unroll 8
  for (int k = 0; k < kPairs; ++k) {
    r[k] = _mm512_permutex2var_epi16(_mm512_load_si512(t + 2 * k), idx,
                                     _mm512_load_si512(t + 2 * k + 1));
  }
#pragma GCC unroll 3
  for (int n = kPairs, bit = 64; n > 1; n /= 2, bit *= 2) {
    const __mmask32 m = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(static_cast<int16_t>(bit)));
#pragma GCC unroll 4
    for (int k = 0; k < n / 2; ++k) r[k] = _mm512_mask_blend_epi16(m, r[2 * k], r[2 * k + 1]);
  }
  return r[0];
}
#if HWY_TARGET <= HWY_AVX3_DL
// LookupWords with VBMI's byte permutes, 64 indices at a time: entries
// table[idx] of a kEntries-entry packed index grid stored in byte planes
// (kernels/ggml_grids.h, *PackedIndexPlanes: the entries' low bytes, then
// their high bytes; 64-byte aligned) for 64 indices: bits 0-7 of index j
// in byte j of idx, bit 8 (512 entries) bit j of `high`. Entries 32 h ..
// 32 h + 31 as 16-bit lanes to w[h], h = 0, 1. Per plane, two-table byte
// permutes on bits 0-6 blended on bits 7 and 8, then one byte permute per
// 32 entries interleaving the planes: half the permutes of LookupWords
// (a two-table byte permute does 64 lookups where the word one does 32,
// at the same cost on the Intel guest: bench/HISTORY.md).
template <int kEntries>
HWY_INLINE void LookupWordPlanes(const uint8_t* planes, __m512i idx, __mmask64 high, __m512i w[2]) {
  static_assert(kEntries == 256 || kEntries == 512, "2 or 4 permutes a plane");
  constexpr int kPairs = kEntries / 128;
  const __mmask64 bit7 = _mm512_movepi8_mask(idx);
  const auto* t = reinterpret_cast<const __m512i*>(planes);
  __m512i plane[2];
#pragma GCC unroll 2
  for (int p = 0; p < 2; ++p) {
    __m512i r[kPairs];
#pragma GCC unroll 4
    for (int k = 0; k < kPairs; ++k) {
      r[k] = _mm512_permutex2var_epi8(_mm512_load_si512(t + p * 2 * kPairs + 2 * k), idx,
                                      _mm512_load_si512(t + p * 2 * kPairs + 2 * k + 1));
    }
    plane[p] = _mm512_mask_blend_epi8(bit7, r[0], r[1]);
    if constexpr (kPairs == 4) {
      plane[p] = _mm512_mask_blend_epi8(high, plane[p], _mm512_mask_blend_epi8(bit7, r[2], r[3]));
    }
  }
  // Byte 2 j of w[h]: low plane byte 32 h + j; byte 2 j + 1: the high one.
  alignas(64) static constexpr struct Interleave {
    uint8_t v[2][64];
    constexpr Interleave() : v() {
      for (int h = 0; h < 2; ++h) {
        for (int j = 0; j < 32; ++j) {
          v[h][2 * j] = static_cast<uint8_t>(32 * h + j);
          v[h][2 * j + 1] = static_cast<uint8_t>(64 + 32 * h + j);
        }
      }
    }
  } kInterleave{};
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {
    w[h] = _mm512_permutex2var_epi8(plane[0], _mm512_load_si512(kInterleave.v[h]), plane[1]);
  }
}
#endif
// Half h of 32 packed IQ3_XXS entries (4 3-bit positions each,
// kGgmlIq3xxsPackedIndexGrid) as 4 bytes each, position j in byte j.
template <int h>
HWY_INLINE __m512i SpreadPositions3(__m512i entries) {
#if HWY_TARGET <= HWY_AVX3_DL
  // VBMI: entries 2 L and 2 L + 1 of the half (a dword) into 64-bit lane
  // L, then each output byte the 8 bits at its position's offset (3 p, or
  // 16 + 3 p for the second entry) by one multishift, masked to 3 bits.
  const __m512i pairs = _mm512_permutexvar_epi32(
      _mm512_setr_epi32(8 * h, 0, 8 * h + 1, 0, 8 * h + 2, 0, 8 * h + 3, 0, 8 * h + 4, 0, 8 * h + 5,
                        0, 8 * h + 6, 0, 8 * h + 7, 0),
      entries);
  return _mm512_and_si512(
      _mm512_multishift_epi64_epi8(_mm512_set1_epi64(0x1916131009060300LL), pairs),
      _mm512_set1_epi8(7));
#else
  __m512i x = _mm512_cvtepu16_epi32(h == 0 ? _mm512_castsi512_si256(entries)
                                           : _mm512_extracti64x4_epi64(entries, 1));
  x = _mm512_and_si512(_mm512_or_si512(x, _mm512_slli_epi32(x, 10)), _mm512_set1_epi32(0x003F003F));
  return _mm512_and_si512(_mm512_or_si512(x, _mm512_slli_epi32(x, 5)),
                          _mm512_set1_epi32(0x07070707));
#endif
}
// Spread positions (bytes, each < kValues.n) as Fill<kIndex> leaves them:
// as they are (kIndex: positions in the unit's table), else the grid's
// values there (a byte shuffle through the value set: the grid's bytes).
template <bool kIndex, const GgmlGridValues& kValues>
HWY_INLINE __m512i PositionsOrValues(__m512i positions) {
  if constexpr (kIndex) {
    return positions;
  } else {
    alignas(16) static constexpr struct Set {
      int8_t v[16];
      constexpr Set() : v() {
        for (int i = 0; i < kValues.n; ++i) v[i] = kValues.v[i];
      }
    } kSet{};
    return _mm512_shuffle_epi8(
        _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kSet.v))),
        positions);
  }
}
// 32 looked-up IQ3 entries e (LookupWords: 4 3-bit positions each)
// stored as Fill<kIndex> leaves them: 4 bytes each (PositionsOrValues of
// the spread).
template <bool kIndex, const GgmlGridValues& kValues>
HWY_INLINE void StoreEntries3(__m512i e, uint32_t* dst) {
  _mm512_storeu_si512(dst, PositionsOrValues<kIndex, kValues>(SpreadPositions3<0>(e)));
  _mm512_storeu_si512(dst + 16, PositionsOrValues<kIndex, kValues>(SpreadPositions3<1>(e)));
}
// IQ2 sub-block scales d * (0.5 + s) * 0.25 (layout_internal::Iq2Scale).
HWY_INLINE __m512 Iq2Scales(float d, __m512i s) {
  return _mm512_mul_ps(
      _mm512_mul_ps(_mm512_set1_ps(d), _mm512_add_ps(_mm512_set1_ps(0.5f), _mm512_cvtepi32_ps(s))),
      _mm512_set1_ps(0.25f));
}
// d * float(2 s + 1) (IQ3_S with 2 s + 1 computed by the caller, IQ1).
HWY_INLINE __m512 OddScales(float d, __m512i s) {
  const __m512i odd = _mm512_or_si512(_mm512_slli_epi32(s, 1), _mm512_set1_epi32(1));
  return _mm512_mul_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(odd));
}
// IQ1's delta per lane: -1/8 where the lane's `bit` is set, else 1/8
// (layout_internal::SignedEighth).
HWY_INLINE __m512 Eighths(__m512i v, int bit) {
  const __m512i sign =
      _mm512_slli_epi32(_mm512_and_si512(v, _mm512_set1_epi32(1 << bit)), 31 - bit);
  return _mm512_castsi512_ps(_mm512_or_si512(sign, _mm512_set1_epi32(0x3E000000)));  // 0.125f
}
// Fill<kIndex> of IQ1: the delta's sign of each lane's group (`bit` of v)
// as Fill<false> needs it (Eighths, to g.delta) or as the 16-bit tables do
// (a byte per group, 0xFF where set: the group's values take the table's
// second set, GridTable).
template <bool kIndex>
HWY_INLINE void StoreDeltas(__m512i v, int bit, GroupSet<32>& g, int first) {
  if constexpr (kIndex) {
    const __m512i set = _mm512_srai_epi32(_mm512_sll_epi32(v, _mm_cvtsi32_si128(31 - bit)), 31);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(g.signs + first), _mm512_cvtepi32_epi8(set));
  } else {
    _mm512_storeu_ps(g.delta + first, Eighths(v, bit));
  }
}
// The IQ2_XS / IQ2_S scale of groups 16 h .. 16 h + 15: nibble (k / 2) % 2
// of scales[k / 4].
HWY_INLINE void Iq2HalfScales(float d, const uint8_t* scales, float* dst) {
  const __m512i bytes = Bytes8(scales);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i shift = _mm512_slli_epi32(_mm512_and_si512(lane, _mm512_set1_epi32(2)), 1);
  for (int h = 0; h < 2; ++h) {
    const __m512i s = Bits(_mm512_permutexvar_epi32(QuarterLanes(4 * h), bytes), shift, 15);
    _mm512_storeu_ps(dst + 16 * h, Iq2Scales(d, s));
  }
}
// The sign bits applied to the grid bytes: byte j of group k negated
// (as int8) where bit j of signs[k] is set.
HWY_INLINE void NegateBytes(GroupSet<32>& g) {
  for (int c = 0; c < 4; ++c) {
    const __m512i v = _mm512_loadu_si512(g.grid + 8 * c);
    const __mmask64 m = _load_mask64(reinterpret_cast<__mmask64*>(g.signs + 8 * c));
    _mm512_storeu_si512(g.grid + 8 * c, _mm512_mask_sub_epi8(v, m, _mm512_setzero_si512(), v));
  }
}
// Index bytes (Fill<true>: looked up in an index grid) made positions in
// the unit's table (GridTable): group k's offset T::Offset(k) added, and
// T::kM where the value's bit in g.signs is set (the table's second set).
template <class T>
HWY_INLINE void TableIndices(GroupSet<32>& g) {
  alignas(64) static constexpr struct Offsets {
    uint8_t v[64];
    constexpr Offsets() : v() {
      for (int i = 0; i < 64; ++i) v[i] = static_cast<uint8_t>(T::Offset(i / 8));
    }
  } kOffsets{};
  const __m512i offsets = _mm512_load_si512(kOffsets.v);
  for (int c = 0; c < 4; ++c) {
    __m512i v = _mm512_loadu_si512(g.grid + 8 * c);
    if constexpr (T::kP > 1) v = _mm512_add_epi8(v, offsets);  // (kP == 1: all 0)
    const __mmask64 m = _load_mask64(reinterpret_cast<__mmask64*>(g.signs + 8 * c));
    _mm512_storeu_si512(g.grid + 8 * c,
                        _mm512_mask_add_epi8(v, m, v, _mm512_set1_epi8(static_cast<char>(T::kM))));
  }
}
// The last step of every Fill: the index bytes made table positions
// (kIndex) — unless kLate: the Fill stored its index bytes with scalar
// stores, which a vector load here would wait for (they must leave the
// store buffer first), and the 16-bit expansion makes them positions per
// 32 values instead (GridGroups<D>::kLateIndices; 5-8 % slower where the
// bytes came from vector stores) — or the grid bytes negated by their sign
// bits (kSigned grids; GridGroups<D>::kBytesSigned says so to the
// expansion).
template <class T, bool kIndex, bool kLate = false>
HWY_INLINE void Finish(GroupSet<32>& g) {
  if constexpr (kIndex) {
    if constexpr (!kLate) TableIndices<T>(g);
  } else if constexpr (T::kSigned) {
    NegateBytes(g);  // (waiting for scalar stores costs less than At's masks)
  }
}
}  // namespace grid_internal

// GridGroups<D>: kVector (a Fill here), kBytesSigned (Fill<false> leaves
// kSignedBytes grid bytes negated by their sign bits, grid_internal::Finish),
// kLateIndices (Fill<true> leaves the index bytes unmade: Finish),
// kUnitTables16 (the 16-bit outputs from one table a block: kernels/
// dequantize_decoded.cc; kSignedBytes with kLateIndices only), Table
// (GridTable), Fill<kIndex>(block, g).
template <class D, class = void>
struct GridGroups {
  static constexpr bool kVector = false;
  static constexpr bool kBytesSigned = false;
};
// The members every vector Fill shares.
template <class D>
struct GridFill {
  static constexpr bool kVector = true;
  static constexpr bool kLateIndices = false;
  static constexpr bool kUnitTables16 = false;
  using Table = GridTable<D>;
  static constexpr bool kBytesSigned = Table::kSigned;
};

// IQ2_XXS: dword 2 ib of the sub-block's 8 bytes holds the four grid
// indices, dword 2 ib + 1 (aux) the sign indices (7 l) and the scale (28).
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<D, GgufIQ2_XXS>>> : GridFill<D> {
  static constexpr bool kLateIndices = true;  // (scalar stores, below)
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    const float d = layout_internal::Half(b, offsetof(GgufIQ2_XXS::Block, d));
    const __m512i qs = _mm512_loadu_si512(b + offsetof(GgufIQ2_XXS::Block, qs));
    // The 32 indices' grid entries (the grid bytes' positions; their values
    // for Fill<false>), loaded one by one: three memory operations a group
    // and no vector ones — the expansion is bound by the vector ports, and
    // looking the entries up in registers took about 45 vector operations
    // a block (measured 1.15-1.45x slower in cache on the Intel guest).
    {
      const uint64_t* const grid = kIndex ? kGgmlIq2xxsIndexGrid : kGgmlIq2xxsGrid;
      const uint8_t* const q = b + offsetof(GgufIQ2_XXS::Block, qs);
#pragma GCC unroll 32
      for (int k = 0; k < 32; ++k) std::memcpy(g.grid + k, grid + q[8 * (k / 4) + k % 4], 8);
    }
#if HWY_TARGET <= HWY_AVX3_DL
    // The aux dwords (odd) in dwords 0-7.
    StoreSignBytes7(
        Sevens(_mm512_permutexvar_epi32(
            _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 1, 3, 5, 7, 9, 11, 13, 15), qs)),
        g.signs);
#endif
    for (int h = 0; h < 2; ++h) {
      // Lane k: aux of sub-block 4 h + k / 4 (dword 2 ib + 1).
      const __m512i aux = _mm512_permutexvar_epi32(
          _mm512_or_si512(_mm512_slli_epi32(QuarterLanes(4 * h), 1), _mm512_set1_epi32(1)), qs);
#if HWY_TARGET > HWY_AVX3_DL
      StoreSigns7(Bits(aux, QuarterShifts(7), 127), g.signs + 16 * h);
#endif
      _mm512_storeu_ps(g.scale + 16 * h, Iq2Scales(d, _mm512_srli_epi32(aux, 28)));
    }
    Finish<typename GridGroups::Table, kIndex, kLateIndices>(g);
  }
};

// GridLoads<D>: the gathered grid types (IQ2_XS, IQ2_S, IQ1_S, IQ1_M) with
// their 32 grid entries a block loaded one by one (an index from scalar
// code, an 8-byte load, an 8-byte store: memory ports and scalar ALUs,
// beside the vector work) instead of four 8-lane gathers, the sign or
// delta offsets then added per 32 values (kLateIndices, as IQ2_XXS).
// Which is faster depends on the CPU's gathers (PreferLoads, kernels/dequantize.h): on the
// VM as a Zen 5 guest the IQ2 loads ran 1.11-1.24x in cache, as a Zen 4
// guest all four 1.07-1.28x (the gathers were half of IQ1_S's samples in
// perf), as an Intel Xeon guest the IQ2 loads 0.74-0.85x. The same values:
// the same entries, scales, signs and deltas (the kernel tests run both).
// Where an index has bit fields in two bytes (IQ2_S, IQ1_S, IQ1_M) four
// indices are assembled as the 16-bit fields of one word by two bit
// deposits (BMI2 pdep: every x86 target with AVX-512 has it), then read
// out one by one: 1.09-1.13x in cache on the Zen 4 guest against field
// by field per index (bench/EXPERIMENTS.md); a vector of 32 indices
// stored and reloaded ran 0.91x (the reloads wait on the wide store).
template <class D>
struct GridLoads : D {};
// GridBase<D>: the type D is (the one GridLoads wraps) and whether it loads.
template <class D>
struct GridBase {
  using Type = D;
  static constexpr bool kLoads = false;
};
template <class D>
struct GridBase<GridLoads<D>> {
  using Type = D;
  static constexpr bool kLoads = true;
};

// IQ2_XS: u16 qs[k]: grid index bits 0-8, sign index bits 9-15.
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<typename GridBase<D>::Type, GgufIQ2_XS>>>
    : GridFill<D> {
  static constexpr bool kLateIndices = GridBase<D>::kLoads;  // (scalar stores)
  static constexpr bool kUnitTables16 = kLateIndices;        // (16-value units)
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    const auto* const grid = kIndex ? kGgmlIq2xsIndexGrid : kGgmlIq2xsGrid;
    using Block = GgufIQ2_XS::Block;
    const float d = layout_internal::Half(b, offsetof(Block, d));
    const uint8_t* const qs = b + offsetof(Block, qs);
    if constexpr (kLateIndices) {  // GridLoads
#pragma GCC unroll 32
      for (int k = 0; k < 32; ++k) {
        uint16_t q;
        std::memcpy(&q, qs + 2 * k, 2);
        std::memcpy(g.grid + k, grid + (q & 511), 8);
      }
    }
    for (int h = 0; h < 2; ++h) {
      const __m512i q =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qs + 32 * h)));
      if constexpr (!kLateIndices) {
        GatherGrid64(grid, _mm512_and_si512(q, _mm512_set1_epi32(511)), g.grid + 16 * h);
      }
#if HWY_TARGET > HWY_AVX3_DL
      StoreSigns7(_mm512_srli_epi32(q, 9), g.signs + 16 * h);
#endif
    }
#if HWY_TARGET <= HWY_AVX3_DL
    {
      // The words' high bytes in bytes 0-31, shifted down by one bit (bit
      // 7: the next byte's bit 0, ignored).
      alignas(64) static constexpr struct HighBytes {
        uint8_t v[64];
        constexpr HighBytes() : v() {
          for (int i = 0; i < 64; ++i) v[i] = static_cast<uint8_t>((2 * i + 1) % 64);
        }
      } kHighBytes{};
      const __m512i high =
          _mm512_permutexvar_epi8(_mm512_load_si512(kHighBytes.v), _mm512_loadu_si512(qs));
      StoreSignBytes7(_mm512_srli_epi64(high, 1), g.signs);
    }
#endif
    Iq2HalfScales(d, b + offsetof(Block, scales), g.scale);
    Finish<typename GridGroups::Table, kIndex, kLateIndices>(g);
  }
};

// IQ2_S: grid index qs[k] | bits 2 (k % 4) .. +1 of qh[k / 4] << 8, the
// sign bytes as stored.
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<typename GridBase<D>::Type, GgufIQ2_S>>>
    : GridFill<D> {
  static constexpr bool kLateIndices = GridBase<D>::kLoads;  // (scalar stores)
  static constexpr bool kUnitTables16 = kLateIndices;        // (16-value units)
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    const auto* const grid = kIndex ? kGgmlIq2sIndexGrid : kGgmlIq2sGrid;
    using Block = GgufIQ2_S::Block;
    const float d = layout_internal::Half(b, offsetof(Block, d));
    const uint8_t* const qs = b + offsetof(Block, qs);
    const uint8_t* const qh = b + offsetof(Block, qh);
    if constexpr (kLateIndices) {  // GridLoads
      // The 4 indices of qh[ib] as 16-bit fields of one word: qs[4 ib + j]
      // in bits 16 j .. +7, bits 2 j .. +1 of qh[ib] in bits 16 j + 8 ..
      // +9 (two bit deposits).
#pragma GCC unroll 8
      for (int ib = 0; ib < 8; ++ib) {
        const uint64_t idx =
            _pdep_u64(layout_internal::Field<uint32_t>(qs, 4 * ib), 0x00FF00FF00FF00FFull) |
            _pdep_u64(qh[ib], 0x0300030003000300ull);
        LoadFour(grid, idx, g.grid + 4 * ib);
      }
    } else {
      const __m512i high_bits = Bytes8(qh);
      for (int h = 0; h < 2; ++h) {
        const __m512i high =
            Bits(_mm512_permutexvar_epi32(QuarterLanes(4 * h), high_bits), QuarterShifts(2), 3);
        const __m512i idx = _mm512_or_si512(Bytes16(qs + 16 * h), _mm512_slli_epi32(high, 8));
        GatherGrid64(grid, idx, g.grid + 16 * h);
      }
    }
    std::memcpy(g.signs, b + offsetof(Block, signs), 32);
    Iq2HalfScales(d, b + offsetof(Block, scales), g.scale);
    Finish<typename GridGroups::Table, kIndex, kLateIndices>(g);
  }
};

// Whether D has a GridLoads variant: a GridGroups specialization takes
// GridLoads<D> (the ones above, through GridBase).
template <class D>
inline constexpr bool kHasGridLoads = GridGroups<GridLoads<D>>::kVector;

// IQ3_XXS: two 4-byte grid entries per group (index bytes 2 k, 2 k + 1),
// aux as IQ2_XXS in scales_signs, db = d * (0.5 + s) * 0.5.
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<D, GgufIQ3_XXS>>> : GridFill<D> {
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    using Block = GgufIQ3_XXS::Block;
    const float d = layout_internal::Half(b, offsetof(Block, d));
    auto* entries = reinterpret_cast<uint32_t*>(g.grid);
    // The 64 indices looked up in the packed index grid (the grid bytes'
    // positions; their values for Fill<false>).
    __m512i e[2];
#if HWY_TARGET <= HWY_AVX3_DL
    LookupWordPlanes<256>(kGgmlIq3xxsPackedIndexPlanes, _mm512_loadu_si512(b + offsetof(Block, qs)),
                          0, e);
#else
    for (int h = 0; h < 2; ++h) {
      e[h] = LookupWords<256>(
          kGgmlIq3xxsPackedIndexGrid,
          _mm512_cvtepu8_epi16(_mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(b + offsetof(Block, qs) + 32 * h))));
    }
#endif
    for (int h = 0; h < 2; ++h) {
      StoreEntries3<kIndex, kGgmlIq3xxsGridValues>(e[h], entries + 32 * h);
    }
    const __m512i words = _mm512_castsi256_si512(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(Block, scales_signs))));
#if HWY_TARGET <= HWY_AVX3_DL
    StoreSignBytes7(Sevens(words), g.signs);
#endif
    for (int h = 0; h < 2; ++h) {
      const __m512i aux = _mm512_permutexvar_epi32(QuarterLanes(4 * h), words);
#if HWY_TARGET > HWY_AVX3_DL
      StoreSigns7(Bits(aux, QuarterShifts(7), 127), g.signs + 16 * h);
#endif
      const __m512 s = _mm512_cvtepi32_ps(_mm512_srli_epi32(aux, 28));
      _mm512_storeu_ps(
          g.scale + 16 * h,
          _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(d), _mm512_add_ps(_mm512_set1_ps(0.5f), s)),
                        _mm512_set1_ps(0.5f)));
    }
    Finish<typename GridGroups::Table, kIndex>(g);
  }
};

// IQ3_S: 4-byte grid entry j (two per group) at index qs[j] | bit j % 8 of
// qh[j / 8] << 8; sign bytes as stored; db = d * (1 + 2 s), s nibble ib % 2
// of scales[ib / 2], ib = k / 4.
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<D, GgufIQ3_S>>> : GridFill<D> {
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    using Block = GgufIQ3_S::Block;
    const float d = layout_internal::Half(b, offsetof(Block, d));
    auto* entries = reinterpret_cast<uint32_t*>(g.grid);
    // The 64 indices looked up in the packed index grid (the grid bytes'
    // positions; their values for Fill<false>): bit 8 of index j is bit j
    // of the little-endian qh (bit j % 8 of qh[j / 8]).
    uint64_t high;
    std::memcpy(&high, b + offsetof(Block, qh), 8);
    __m512i e[2];
#if HWY_TARGET <= HWY_AVX3_DL
    LookupWordPlanes<512>(kGgmlIq3sPackedIndexPlanes, _mm512_loadu_si512(b + offsetof(Block, qs)),
                          _cvtu64_mask64(high), e);
#else
    for (int h = 0; h < 2; ++h) {
      __m512i idx = _mm512_cvtepu8_epi16(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(Block, qs) + 32 * h)));
      idx = _mm512_mask_add_epi16(idx, static_cast<__mmask32>(high >> (32 * h)), idx,
                                  _mm512_set1_epi16(0x100));
      e[h] = LookupWords<512>(kGgmlIq3sPackedIndexGrid, idx);
    }
#endif
    for (int h = 0; h < 2; ++h) {
      StoreEntries3<kIndex, kGgmlIq3sGridValues>(e[h], entries + 32 * h);
    }
    std::memcpy(g.signs, b + offsetof(Block, signs), 32);
    uint32_t packed;
    std::memcpy(&packed, b + offsetof(Block, scales), 4);
    const __m512i scales = _mm512_cvtepu8_epi32(_mm_cvtsi32_si128(static_cast<int>(packed)));
    for (int h = 0; h < 2; ++h) {
      // Lane k: ib = 4 h + k / 4; byte ib / 2, nibble ib % 2.
      const __m512i ib = QuarterLanes(4 * h);
      const __m512i s = Bits(_mm512_permutexvar_epi32(_mm512_srli_epi32(ib, 1), scales),
                             _mm512_slli_epi32(_mm512_and_si512(ib, _mm512_set1_epi32(1)), 2), 15);
      _mm512_storeu_ps(g.scale + 16 * h, OddScales(d, s));
    }
    Finish<typename GridGroups::Table, kIndex>(g);
  }
};

// IQ1_S: grid index qs[k] | bits 3 (k % 4) .. +2 of qh[ib] << 8; qh[ib]
// bits 12-14 the scale, bit 15 the delta's sign.
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<typename GridBase<D>::Type, GgufIQ1_S>>>
    : GridFill<D> {
  static constexpr bool kLateIndices = GridBase<D>::kLoads;  // (scalar stores)
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    const auto* const grid = kIndex ? kGgmlIq1sIndexGrid : kGgmlIq1sGrid;
    using Block = GgufIQ1_S::Block;
    const float d = layout_internal::Half(b, offsetof(Block, d));
    if constexpr (kLateIndices) {  // GridLoads
      const uint8_t* const qs = b + offsetof(Block, qs);
      // The 4 indices of qh[ib] as 16-bit fields of one word: qs[4 ib + j]
      // in bits 16 j .. +7, bits 3 j .. +2 of qh[ib] in bits 16 j + 8 ..
      // +10 (two bit deposits).
#pragma GCC unroll 8
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t word = layout_internal::Field<uint16_t>(b, offsetof(Block, qh) + 2 * ib);
        const uint64_t idx =
            _pdep_u64(layout_internal::Field<uint32_t>(qs, 4 * ib), 0x00FF00FF00FF00FFull) |
            _pdep_u64(word, 0x0700070007000700ull);
        LoadFour(grid, idx, g.grid + 4 * ib);
      }
    }
    const __m512i qh = _mm512_castsi256_si512(_mm256_cvtepu16_epi32(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qh)))));
    for (int h = 0; h < 2; ++h) {
      const __m512i word = _mm512_permutexvar_epi32(QuarterLanes(4 * h), qh);
      if constexpr (!kLateIndices) {
        const __m512i idx = _mm512_or_si512(Bytes16(b + offsetof(Block, qs) + 16 * h),
                                            _mm512_slli_epi32(Bits(word, QuarterShifts(3), 7), 8));
        GatherGrid64(grid, idx, g.grid + 16 * h);
      }
      _mm512_storeu_ps(g.scale + 16 * h, OddScales(d, _mm512_and_si512(_mm512_srli_epi32(word, 12),
                                                                       _mm512_set1_epi32(7))));
      StoreDeltas<kIndex>(word, 15, g, 16 * h);
    }
    Finish<typename GridGroups::Table, kIndex, kLateIndices>(g);
  }
};

// IQ1_M: grid index qs[k] | bits 0-2 of nibble k % 2 of qh[k / 2] << 8,
// bit 3 of it the delta's sign; the 3-bit scale of group k at bit 6 (ib %
// 2) + 3 (k % 4 / 2) of the u16 sc[ib / 2] (ib = k / 4); d from the top
// nibbles of sc (as D::Groups).
template <class D>
struct GridGroups<D, std::enable_if_t<std::is_same_v<typename GridBase<D>::Type, GgufIQ1_M>>>
    : GridFill<D> {
  static constexpr bool kLateIndices = GridBase<D>::kLoads;  // (scalar stores)
  template <bool kIndex = false>
  static HWY_INLINE void Fill(const uint8_t* b, GroupSet<32>& g) {
    using namespace grid_internal;
    const auto* const grid = kIndex ? kGgmlIq1sIndexGrid : kGgmlIq1sGrid;
    using Block = GgufIQ1_M::Block;
    if constexpr (kLateIndices) {  // GridLoads
      const uint8_t* const qs = b + offsetof(Block, qs);
      const uint8_t* const high = b + offsetof(Block, qh);
      // The 4 indices of qh[2 i], qh[2 i + 1] as 16-bit fields of one word:
      // qs[4 i + j] in bits 16 j .. +7, nibble j of the two qh bytes (as a
      // little-endian u16) in bits 16 j + 8 .. +11, its bit 3 then cleared
      // (two bit deposits).
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        const uint64_t idx =
            _pdep_u64(layout_internal::Field<uint32_t>(qs, 4 * i), 0x00FF00FF00FF00FFull) |
            (_pdep_u64(layout_internal::Field<uint16_t>(high, 2 * i), 0x0F000F000F000F00ull) &
             0x0700070007000700ull);
        LoadFour(grid, idx, g.grid + 4 * i);
      }
    }
    uint32_t sc[4];
    for (size_t i = 0; i < 4; ++i) {
      sc[i] = layout_internal::Field<uint16_t>(b, offsetof(Block, scales) + 2 * i);
    }
    const uint32_t bits =
        (sc[0] >> 12) | ((sc[1] >> 8) & 0xF0u) | ((sc[2] >> 4) & 0xF00u) | (sc[3] & 0xF000u);
    const float d = F32FromF16(static_cast<uint16_t>(bits));
    const __m512i qh = Bytes16(b + offsetof(Block, qh));
    const __m512i words = _mm512_cvtepu16_epi32(_mm256_castsi128_si256(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(Block, scales)))));
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // Lane k: nibble k % 2 of its qh byte; scale shift 6 (ib % 2) + 3 (k % 4 / 2).
    const __m512i nibble_shift = _mm512_slli_epi32(_mm512_and_si512(lane, _mm512_set1_epi32(1)), 2);
    const __m512i scale_shift = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(lane, 2), _mm512_set1_epi32(1)),
                           _mm512_set1_epi32(6)),
        _mm512_mullo_epi32(_mm512_and_si512(_mm512_srli_epi32(lane, 1), _mm512_set1_epi32(1)),
                           _mm512_set1_epi32(3)));
    for (int h = 0; h < 2; ++h) {
      const __m512i nib =
          Bits(_mm512_permutexvar_epi32(
                   _mm512_add_epi32(_mm512_srli_epi32(lane, 1), _mm512_set1_epi32(8 * h)), qh),
               nibble_shift, 15);
      if constexpr (!kLateIndices) {
        const __m512i idx =
            _mm512_or_si512(Bytes16(b + offsetof(Block, qs) + 16 * h),
                            _mm512_slli_epi32(_mm512_and_si512(nib, _mm512_set1_epi32(7)), 8));
        GatherGrid64(grid, idx, g.grid + 16 * h);
      }
      StoreDeltas<kIndex>(nib, 3, g, 16 * h);
      const __m512i word = _mm512_permutexvar_epi32(
          _mm512_add_epi32(_mm512_srli_epi32(lane, 3), _mm512_set1_epi32(2 * h)), words);
      _mm512_storeu_ps(g.scale + 16 * h, OddScales(d, Bits(word, scale_shift, 7)));
    }
    Finish<typename GridGroups::Table, kIndex, kLateIndices>(g);
  }
};

// 16 x 16 float32 transpose in registers: on return r[i] holds what was
// column i.
HWY_INLINE void Transpose16x16(__m512 r[16]) {
  __m512 t[16], u[16], v[16];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(t[4 * i]), b = _mm512_castps_pd(t[4 * i + 1]);
    const __m512d c = _mm512_castps_pd(t[4 * i + 2]), d = _mm512_castps_pd(t[4 * i + 3]);
    u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
    u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
    u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
    u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
  }
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      v[8 * i + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0x88);
      v[8 * i + 4 + j] = _mm512_shuffle_f32x4(u[8 * i + j], u[8 * i + 4 + j], 0xDD);
    }
  }
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    r[j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0x88);
    r[8 + j] = _mm512_shuffle_f32x4(v[j], v[8 + j], 0xDD);
  }
}

// 32-bit words of up to 16 rows transposed: row q < nrows is the 16 words
// at src + q * stride (lanes outside m read as 0; rows from nrows on are
// 0); word j of every row, 16 words, goes to dst + j * pitch (bytes).
HWY_INLINE void TransposeWords16(const void* src, int64_t stride, __mmask16 m, int64_t nrows,
                                 void* dst, int64_t pitch) {
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  __m512 r[16];
#pragma GCC unroll 16
  for (int q = 0; q < 16; ++q) {
    r[q] = q < nrows ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, s + q * stride))
                     : _mm512_setzero_ps();
  }
  Transpose16x16(r);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) _mm512_storeu_ps(d + j * pitch, r[j]);
}

// The 16-entry value table of 4-bit codes under one scale s and zero point
// (z: the integer zero point, or the plan's code offset; zf: the float zero
// point, kFloat only): T[c] = the contract's value of code c (the same
// float32 operations as the row kernels' Arith, lane c computing code c, so
// a lookup equals the arithmetic), as 16 float32 (kF32) or as the 16
// rounded output bits twice (32 x u16: lanes c and 16 + c hold T[c], so a
// vpermw index needs only its low 4 bits right). bf16_hw: as OutBits16's.
template <ZeroPointKind kZp, OutType kOut>
HWY_INLINE __m512i ValueTable16(float s, int32_t z, float zf, bool bf16_hw) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  auto v = hn::Mul(hn::ConvertTo(df, hn::Sub(hn::Iota(di, 0), hn::Set(di, z))), hn::Set(df, s));
  if constexpr (kZp == ZeroPointKind::kFloat) v = hn::Add(v, hn::Set(df, zf));
  (void)zf;
  if constexpr (OutDesc<kOut>::kBytes == 4) {
    (void)bf16_hw;
    return _mm512_castps_si512(v.raw);
  } else {
    const __m256i h = OutBits16<kOut>(v, bf16_hw).raw;
    return _mm512_inserti64x4(_mm512_castsi256_si512(h), h, 1);
  }
}

// One row's ValueTable16: the row's scale and zero point at index idx.
// Computed where it is used, between the output's stores: built in bursts
// (16 rows at a time, then transposed) the tables left the store stream
// idle (GPTQ whole tensors 1.25x faster without the rebuilds).
template <ZeroPointKind kZp, OutType kOut>
HWY_INLINE __m512i RowTable16(const Plan& plan, int64_t idx, bool bf16_hw) {
  return ValueTable16<kZp, kOut>(
      plan.scale[idx], kZp == ZeroPointKind::kInteger ? plan.zp_int[idx] : plan.code_offset,
      kZp == ZeroPointKind::kFloat ? plan.zp_float[idx] : 0.0f, bf16_hw);
}

#if HWY_TARGET <= HWY_AVX3_DL
// --- Group maps by byte planes (MapRows' 16-bit outputs on VBMI) ----------
// A row's 16-bit values under a group map of at most kPlaneGroups groups,
// as tables: entry (g % 8) * 16 + c of class g / 8 holds ValueTable16's
// entry c of group g (the row's parameters of g), split into its low and
// high bytes (two 128-byte planes per class). An element is then two byte
// permutes per class (vpermi2b, 64 elements each), zero-masked to the
// columns of the class and ORed, and one interleave of the planes: no
// per-element parameter pick, conversion or rounding. The values are ValueTable16's,
// the contract's arithmetic per code, so the same bits.
// (At most 32: with 64 groups, 8 classes, the tables leave the registers
// and the lookups ran 0.5-0.7x of MappedRow16's on the Zen 4 guest.)
constexpr int64_t kPlaneGroups = 32;
constexpr int64_t kPlaneClasses = kPlaneGroups / 8;
// A row's tables: 256 bytes a class ([class][lo, hi][128]).
constexpr int64_t PlaneRowBytes(int64_t groups) { return (groups + 7) / 8 * 256; }

// The plane tables of one row (PlaneRowBytes(groups) at dst, 64-byte
// aligned) for groups [0, groups) (groups <= kPlaneGroups) with scales
// s[g] and zero points z[g] (kInteger; else the code offset `off`);
// entries of groups past `groups` are zero (never picked).
template <ZeroPointKind kZp, OutType kOut>
HWY_INLINE void PlaneTables(const float* s, const int32_t* z, int32_t off, int64_t groups,
                            bool bf16_hw, uint8_t* dst) {
  static_assert(OutDesc<kOut>::kBytes == 2, "16-bit outputs");
  static_assert(kZp == ZeroPointKind::kNone || kZp == ZeroPointKind::kInteger,
                "integer zero points");
  alignas(64) static constexpr EveryOtherByte<false> kEven{};
  alignas(64) static constexpr EveryOtherByte<true> kOdd{};
  const __m512i lo_idx = _mm512_load_si512(kEven.idx), hi_idx = _mm512_load_si512(kOdd.idx);
  for (int64_t g = 0; g < (groups + 7) / 8 * 8; g += 4) {
    __m256i h[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const int64_t gg = g + j;
      h[j] = gg < groups ? _mm512_castsi512_si256(ValueTable16<kZp, kOut>(
                               s[gg], kZp == ZeroPointKind::kInteger ? z[gg] : off, 0.0f, bf16_hw))
                         : _mm256_setzero_si256();
    }
    const __m512i w0 = _mm512_inserti64x4(_mm512_castsi256_si512(h[0]), h[1], 1);
    const __m512i w1 = _mm512_inserti64x4(_mm512_castsi256_si512(h[2]), h[3], 1);
    uint8_t* const at = dst + (g / 8) * 256 + (g / 4) % 2 * 64;
    _mm512_store_si512(at, _mm512_permutex2var_epi8(w0, lo_idx, w1));
    _mm512_store_si512(at + 128, _mm512_permutex2var_epi8(w0, hi_idx, w1));
  }
}

// A chunk's group map as PlaneRun reads it, per 64 columns from `map`
// (units of them; every group < kPlaneGroups), in UnpackOrder: each column's
// byte (g % 8) << 4 (gi, 64 bytes a unit) and the mask of the columns of
// each class c = g / 8 (masks, kPlaneClasses a unit).
HWY_INLINE void PlaneMap(const int32_t* map, int64_t units, uint8_t* gi, __mmask64* masks) {
  alignas(64) static constexpr UnpackOrder kOrder{};
  const __m512i order = _mm512_load_si512(kOrder.idx);
  for (int64_t u = 0; u < units; ++u) {
    const int32_t* const m = map + 64 * u;
    const __m512i g = _mm512_permutexvar_epi8(
        order,
        _mm512_inserti64x4(_mm512_castsi256_si512(
                               _mm256_set_m128i(_mm512_cvtepi32_epi8(_mm512_loadu_si512(m + 16)),
                                                _mm512_cvtepi32_epi8(_mm512_loadu_si512(m)))),
                           _mm256_set_m128i(_mm512_cvtepi32_epi8(_mm512_loadu_si512(m + 48)),
                                            _mm512_cvtepi32_epi8(_mm512_loadu_si512(m + 32))),
                           1));
    // (Bytes shifted in 16-bit lanes: the bits crossing a byte are masked.)
    _mm512_store_si512(gi + 64 * u,
                       _mm512_and_si512(_mm512_slli_epi16(g, 4), _mm512_set1_epi8(0x70)));
    const __m512i cls = _mm512_and_si512(_mm512_srli_epi16(g, 3), _mm512_set1_epi8(0x1F));
    for (int64_t c = 0; c < kPlaneClasses; ++c) {
      masks[u * kPlaneClasses + c] =
          _mm512_cmpeq_epi8_mask(cls, _mm512_set1_epi8(static_cast<char>(c)));
    }
  }
}

// One row's `units` x 64 elements through its plane tables (PlaneTables,
// kClasses classes), their codes dense nibbles at `codes` (32-byte units,
// 32-byte aligned; element 0 at the low nibble of byte 0), the chunk's
// PlaneMap (gi, masks), the 16-bit outputs at dst (non-temporal when
// `stream`: dst then 64-byte aligned). Each class's lookup is zero outside
// its columns (zero-masked permutes), the classes ORed three at a time.
template <int kClasses>
HWY_INLINE void PlaneRun(const uint8_t* table, const uint8_t* codes, const uint8_t* gi,
                         const __mmask64* masks, int64_t units, char* dst, bool stream) {
  static_assert(kClasses >= 1 && kClasses <= kPlaneClasses, "the tables in 4 to 16 registers");
  __m512i held[kClasses][2][2];
#pragma GCC unroll 4
  for (int c = 0; c < kClasses; ++c) {
    for (int p = 0; p < 2; ++p) {
      held[c][p][0] = _mm512_load_si512(table + 256 * c + 128 * p);
      held[c][p][1] = _mm512_load_si512(table + 256 * c + 128 * p + 64);
    }
  }
  // The unit's 8 code dwords in UnpackOrder (dword j, 8 codes, to the low
  // half of 64-bit lane order[j]); then byte b of each 64-bit lane is bits
  // 4b .. 4b + 7 of it: code b in the low nibble.
  const __m512i order = _mm512_set_epi32(7, 7, 3, 3, 6, 6, 2, 2, 5, 5, 1, 1, 4, 4, 0, 0);
  const __m512i picks = _mm512_set1_epi64(0x1C1814100C080400);
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t u = 0; u < units; ++u) {
    const __m512i x = _mm512_multishift_epi64_epi8(
        picks,
        _mm512_permutexvar_epi32(order, _mm512_castsi256_si512(_mm256_load_si256(
                                            reinterpret_cast<const __m256i*>(codes + 32 * u)))));
    // (x & 0x0F) | gi: the table index.
    const __m512i idx = _mm512_ternarylogic_epi32(x, low4, _mm512_load_si512(gi + 64 * u), 0xEA);
    const __mmask64* const m = masks + u * kPlaneClasses;
    // Plane p's bytes from class c (zero outside its columns).
    auto look = [&](int c, int p) HWY_ATTR {
      const __m512i a = held[c][p][0], b = held[c][p][1];
      if constexpr (kClasses == 1) return _mm512_permutex2var_epi8(a, idx, b);
      return _mm512_maskz_permutex2var_epi8(m[c], a, idx, b);
    };
    auto plane = [&](int p) HWY_ATTR {
      __m512i acc = look(0, p);
      int c = 1;
#pragma GCC unroll 4
      for (; c + 2 <= kClasses; c += 2) {
        acc = _mm512_ternarylogic_epi32(acc, look(c, p), look(c + 1, p), 0xFE);  // a | b | c
      }
      if (c < kClasses) acc = _mm512_or_si512(acc, look(c, p));
      return acc;
    };
    const __m512i lo = plane(0), hi = plane(1);
    Store64(_mm512_unpacklo_epi8(lo, hi), dst + 128 * u, stream);
    Store64(_mm512_unpackhi_epi8(lo, hi), dst + 128 * u + 64, stream);
  }
}
#endif  // HWY_TARGET <= HWY_AVX3_DL

// Writes one output row's 32 values (codes16: 32 codes in u16 lanes, only
// the low 4 bits of each are significant; or for kF32 lo / hi: 16 codes in
// u32 lanes each) through the row's table (RowTable16) at dst.
template <OutType kOut>
HWY_INLINE void StoreLookup32(__m512i table, __m512i lo, __m512i hi, char* dst, bool stream) {
  if constexpr (OutDesc<kOut>::kBytes == 4) {
    const __m512 t = _mm512_castsi512_ps(table);
    StoreF32x32(_mm512_permutexvar_ps(lo, t), _mm512_permutexvar_ps(hi, t), dst, stream);
  } else {
    (void)hi;
    Store64(_mm512_permutexvar_epi16(lo, table), dst, stream);
  }
}

// GPTQ's 4 word rows w[q] of a 32-column tile (lane i: the word of row
// n0 + i) as each row's 32 codes: x[j], 128-bit lane l, holds the 16 code
// bytes of row 4l + j (byte m: columns 2m, 2m + 1 in its low, high
// nibble).
HWY_INLINE void GptqTileCodes(__m512i w0, __m512i w1, __m512i w2, __m512i w3, __m512i x[4]) {
  const __m512i a0 = _mm512_unpacklo_epi32(w0, w1), a1 = _mm512_unpackhi_epi32(w0, w1);
  const __m512i b0 = _mm512_unpacklo_epi32(w2, w3), b1 = _mm512_unpackhi_epi32(w2, w3);
  x[0] = _mm512_unpacklo_epi64(a0, b0);
  x[1] = _mm512_unpackhi_epi64(a0, b0);
  x[2] = _mm512_unpacklo_epi64(a1, b1);
  x[3] = _mm512_unpackhi_epi64(a1, b1);
}

// Column-packed words (4-byte aligned) in word rows `stride` bytes apart,
// read a 64-byte line at a time: a load from mid-line touches two lines,
// and the column tiles' word rows do not stay in L1 between tiles (see
// ColumnNibbleTiles, GptqBlockTiles). When every word row puts a word at
// the same line offset (`stride` a multiple of 64), a run of words starting
// at word w0 is lanes Lane(w0) .. of Lines() whole lines from Line(row, w0)
// on; otherwise Lane() is 0 and loads start at the word (as if aligned).
class WordLines {
 public:
  WordLines(const uint8_t* codes, int64_t stride, bool use)
      : codes_(reinterpret_cast<uintptr_t>(codes)), stride_(stride), on_(use && stride % 64 == 0) {}
  // Word w's lane in its line (0 when the offsets differ).
  int64_t Lane(int64_t w) const {
    return on_ ? static_cast<int64_t>((codes_ + 4 * static_cast<uint64_t>(w)) % 64 / 4) : 0;
  }
  // Where word w's line starts in word row `row` (through an integer: it
  // may lie before the codes).
  const uint8_t* Line(int64_t row, int64_t w) const {
    return reinterpret_cast<const uint8_t*>(codes_ + static_cast<uint64_t>(row * stride_) +
                                            4 * static_cast<uint64_t>(w - Lane(w)));
  }
  // Lines holding `words` words from lane `lane0`, and the lanes of line h
  // among them.
  static int64_t Lines(int64_t lane0, int64_t words) { return (lane0 + words + 15) / 16; }
  static __mmask16 Mask(int64_t h, int64_t lane0, int64_t words) {
    const auto lo = static_cast<unsigned>(h == 0 ? lane0 : 0);
    const auto hi = static_cast<unsigned>(std::min<int64_t>(16, lane0 + words - 16 * h));
    return static_cast<__mmask16>(((1u << hi) - 1u) & ~((1u << lo) - 1u));
  }

 private:
  uintptr_t codes_;
  int64_t stride_;
  bool on_;
};

// Column-packed 4-bit checkpoint words on AVX-512 (AWQ's kAwqColumns, and
// GPTQ's kGptqColumns with a group map; GPTQ without one: GptqBlockTiles),
// written as the [N, K] output: tiles of 32 columns (k) by a band of rows
// (n) whose codes arrive in lanes along n, transposed in registers. A band
// walks the whole column range, so every output row is written
// sequentially (scattered rows cost a TLB miss per store: measured 2x
// slower).
//  AWQ:  bands of up to 256 rows (32 words of each row k, two cache
//        lines); a tile is 32 loads of a line, transposed as two 16 x 16
//        u32 blocks;
//        the transposed codes of up to 4 tiles are kept (8 KiB) and each
//        row's values for all of them stored as one run: per 32 columns
//        one lookup in the row's 16-entry table for the tile's group
//        (RowTable16) and one 64-byte store (f16/bf16; two for f32).
//  GPTQ with a group map (kMap: act-order g_idx, plan.axis_group, any
//        group per column): bands of up to 16 rows, a tile one 64-byte
//        load from each of the 4 word rows of its 32 columns; no tables:
//        each column's 16 codes along n are computed with the contract's
//        arithmetic against that column's scales (and zero points), which
//        lie contiguously along n (one load each), and the 32 x 16 floats
//        are transposed in registers (two Transpose16x16) into the rows'
//        32 values.
// AWQ needs plan.group % 32 == 0 (a tile has one group) and bands starting
// at a word (n % 8 == 0). Columns outside [ka, kb) (32-aligned) and rows
// outside the bands go through `edge(r, ca, cb)`. kStage (GPTQ only):
// tiles go through a staging block (below); used when not streaming.
template <bool kGptq, bool kStage, ZeroPointKind kZp, OutType kOut, class Edge, bool kMap = false>
void ColumnNibbleTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, char* out,
                       int64_t ld, const Edge& edge) {
  static_assert(kGptq || !kMap, "group maps: GPTQ columns only");
  static_assert(kGptq || !kStage, "AWQ stages codes, not output");
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  constexpr int64_t kBand = kGptq ? 16 : 256;
  const bool stream = plan.nontemporal;
  // Rows in bands: GPTQ any rows; AWQ whole words.
  const int64_t rb0 = kGptq ? r0 : std::min(r1, (r0 + 7) / 8 * 8);
  const int64_t rb1 = kGptq ? r1 : rb0 + (r1 - rb0) / 8 * 8;
  const int64_t ka = std::min(c1, (c0 + 31) / 32 * 32);
  const int64_t kb = ka + (c1 - ka) / 32 * 32;
  for (int64_t r = r0; r < rb0; ++r) edge(r, c0, c1);
  for (int64_t r = rb1; r < r1; ++r) edge(r, c0, c1);
  if (ka >= kb) {
    for (int64_t r = rb0; r < rb1; ++r) edge(r, c0, c1);
    return;
  }
  const int64_t S = plan.word_stride, G = plan.group;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  // (In a local: the output stores may alias the flag's static.)
  const bool bf16_hw = kOut == OutType::kBF16 && CpuHasAvx512Bf16();
  (void)bf16_hw;
  alignas(64) uint8_t tab[kBand][64];
  // Band row i's table for group g (rows from n0): at a new group (fresh)
  // built (RowTable16, between the rows' stores) and kept in tab[i] for
  // the group's next tiles.
  auto row_table = [&](bool fresh, int64_t g, int64_t n0, int64_t i) HWY_ATTR {
    if (!fresh) return _mm512_load_si512(tab[i]);
    const __m512i table = RowTable16<kZp, kOut>(plan, g * plan.s_axis + n0 + i, bf16_hw);
    _mm512_store_si512(tab[i], table);
    return table;
  };
  // kStage: the tiles go to a staging block of kStageCols columns whose
  // row pitch is 64 bytes longer than its data (not a power of two),
  // copied out row by row. A band writes its 16 rows interleaved: at a
  // power-of-two output pitch those stores share L1 sets (measured: a
  // GPTQ float16 tile at an 8 KiB pitch 2-3x slower than at 8 KiB + 64).
  // On the stack (about 25 KiB): tiles run allocation-free.
  constexpr int64_t kStageCols = 24576 / (kBand * kOutBytes);
  constexpr int64_t kStagePitch = kStageCols * kOutBytes + 64;  // bytes
  alignas(64) char stage_block[kStage ? kBand * kStagePitch : 64];
  char* const stage = kStage ? stage_block : nullptr;
  const bool staging = kStage;
  const int64_t KC = staging ? kStageCols : kb - ka;
  // kMap: each band's scales (and zero points), 16 per group, copied
  // into `band_params` (scales, then zero points' 32-bit words): the
  // plan's group rows are s_axis apart, a power of two for real layers, so
  // a tile's 32 columns' rows would all share one L1 set (measured 2.5x
  // slower). On the stack (32 KiB) for up to kMapGroups groups; more are
  // read in place (same values).
  constexpr int64_t kMapGroups = 256;
  int64_t map_groups = 0;
  alignas(64) uint32_t band_block[kMap ? 32 * kMapGroups : 16];
  uint32_t* band_params = nullptr;
  if constexpr (kMap) {
    for (int64_t k = ka; k < kb; ++k) {
      map_groups = std::max<int64_t>(map_groups, plan.axis_group[k] + 1);
    }
    if (map_groups <= kMapGroups) band_params = band_block;
  }
  // Word lines (WordLines; row n's word: n / 8 for AWQ, n for GPTQ):
  //  - AWQ loads a band a whole line at a time from the line's start
  //    (masked to its words; a 32-row float16 tile at rows 32-63 ran at
  //    4.9 G el/s against 8.9 at rows 0-31);
  //  - GPTQ's 16-row bands load 16 words from where the band starts; over
  //    ranges of 128 rows or more (an extra band costs less than the
  //    crossings it saves) the first band ends at a line boundary (codes
  //    16 bytes past a line: the whole float16 tensor was 1.15x slower).
  // Either way the first band ends at a line boundary, so the others start
  // at one.
  const WordLines word_lines(plan.codes, S, !kGptq || rb1 - rb0 >= 128);
  auto lane_of = [&](int64_t n) { return word_lines.Lane(kGptq ? n : n / 8); };
  auto band_rows = [&](int64_t n) {
    return std::min(kBand - (kGptq ? 1 : 8) * lane_of(n), rb1 - n);
  };
  for (int64_t n0 = rb0, rows = 0; n0 < rb1; n0 += rows) {
    rows = band_rows(n0);
    // kMap: group g's scales for this band at map_s + g * map_stride, its
    // zero points' words at map_z + g * map_stride.
    const float* map_s = plan.scale + n0 * plan.s_outer;
    const void* map_z = kZp == ZeroPointKind::kFloat ? static_cast<const void*>(plan.zp_float)
                                                     : static_cast<const void*>(plan.zp_int);
    if (map_z != nullptr) {
      map_z = static_cast<const uint32_t*>(map_z) + n0 * plan.s_outer;
    }
    int64_t map_stride = plan.s_axis;
    if (kMap && band_params) {
      const auto m = static_cast<__mmask16>((1u << rows) - 1u);
      uint32_t* const bs = band_params;
      uint32_t* const bz = bs + 16 * map_groups;
      for (int64_t g = 0; g < map_groups; ++g) {
        _mm512_storeu_si512(bs + 16 * g,
                            _mm512_maskz_loadu_epi32(
                                m, reinterpret_cast<const uint32_t*>(map_s) + g * plan.s_axis));
        if (kZp == ZeroPointKind::kInteger || kZp == ZeroPointKind::kFloat) {
          _mm512_storeu_si512(
              bz + 16 * g,
              _mm512_maskz_loadu_epi32(m, static_cast<const uint32_t*>(map_z) + g * plan.s_axis));
        }
      }
      map_s = reinterpret_cast<const float*>(bs);
      map_z = bz;
      map_stride = 16;
    }
    for (int64_t r = n0; r < n0 + rows; ++r) {
      if (c0 < ka) edge(r, c0, ka);
      if (kb < c1) edge(r, kb, c1);
    }
    char* const row0 = out + ((n0 - r0) * ld - c0) * kOutBytes;  // + i * ld + k
    auto dst = [&](int64_t i, int64_t k) { return row0 + (i * ld + k) * kOutBytes; };
    auto nt = [&](const char* p) { return stream && reinterpret_cast<uintptr_t>(p) % 64 == 0; };
    int64_t g_cur = -1;
    if constexpr (!kGptq) {
      // AWQ, in chunks of up to kAwqChunk columns inside one group: the
      // chunk's tiles are loaded and transposed into `codes` (the
      // transposed 4-bit words, 2 KiB a tile), then each output row gets
      // its chunk's values as one run of stores (256 bytes for 16-bit
      // outputs), row after row. Staging the codes rather than the output
      // saves writing every value to a block and reading it back to copy
      // it out (measured, float16 4096 x 4096: 2.4-2.6 ms with a staged
      // output block, about the fill's 1.25 ms plus the tiles' 1.2 ms).
      // A band is up to two lines of words (16 words, 128 rows, each) of
      // a row k, transposed separately: reading 128 bytes of each
      // row k rather than 64 (nibble_access_probe on the 16-core Xeon:
      // a256x256p 0.66-0.71 of the fill against awq r+w's 0.58-0.61).
      // While a chunk's rows are written, the next chunk's lines (the
      // next band's first at a band's end) are prefetched into L2.
      constexpr int64_t kAwqChunk = 128;
      // The band's words are lanes lane0 .. lane0 + words - 1 of `lines`
      // lines (at most 2) in each word row k, the first at
      // word_lines.Line(k, n0 / 8); word j of the band is lane
      // (lane0 + j) % 16 of line (lane0 + j) / 16.
      const int64_t words = rows / 8, lane0 = lane_of(n0);
      const int64_t lines = WordLines::Lines(lane0, words);
      alignas(64) uint32_t codes[kBand / 128][kAwqChunk / 32][2][16][16];
      auto chunk_end = [&](int64_t k) { return std::min({kb, k + kAwqChunk, (k / G + 1) * G}); };
      // u16 halves of 32 words (a: rows k0 .. k0+15, b: k0+16 .. k0+31):
      // the low half of a word holds AWQ nibbles 0-3, the high half 4-7.
      const __m512i half_lo =
          _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28,
                           26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
      const __m512i half_hi = _mm512_add_epi16(half_lo, _mm512_set1_epi16(1));
      for (int64_t kc0 = ka; kc0 < kb;) {
        const int64_t g = kc0 / G;
        const int64_t kc1 = chunk_end(kc0);
        const int tiles = static_cast<int>((kc1 - kc0) / 32);
        // The next chunk: its first word row's first line, its lines per
        // word row and its row count.
        const uint8_t* next = nullptr;
        int64_t next_rows = 0, next_lines = 1;
        if (kc1 < kb) {
          next = word_lines.Line(kc1, n0 / 8);
          next_rows = chunk_end(kc1) - kc1;
          next_lines = lines;
        } else if (n0 + rows < rb1) {
          const int64_t n1 = n0 + rows;
          next = word_lines.Line(ka, n1 / 8);
          next_rows = chunk_end(ka) - ka;
          next_lines = WordLines::Lines(lane_of(n1), band_rows(n1) / 8);
        }
        const int64_t line_count = next_rows * next_lines;
        // A new group: rows_out builds each row's table (RowTable16, kept
        // in tab for the group's next chunks) between the row's stores.
        const bool fresh = g != g_cur;
        g_cur = g;
        for (int64_t h = 0; h < lines; ++h) {
          const __mmask16 m = WordLines::Mask(h, lane0, words);
          for (int t = 0; t < tiles; ++t) {
            const int64_t k0 = kc0 + 32 * t;
            // Line h of rows k0 .. k0+31 (one cache line each).
            const uint8_t* wp = word_lines.Line(k0, n0 / 8) + 64 * h;
            __m512 a[16], b[16];
#pragma GCC unroll 16
            for (int q = 0; q < 16; ++q) {
              a[q] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, wp + q * S));
              b[q] = _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, wp + (16 + q) * S));
            }
            Transpose16x16(a);  // a[j]: word j of rows k0 .. k0+15
            Transpose16x16(b);  //        and of rows k0+16 .. k0+31 in b[j]
#pragma GCC unroll 16
            for (int q = 0; q < 16; ++q) {
              _mm512_store_ps(codes[h][t][0][q], a[q]);
              _mm512_store_ps(codes[h][t][1][q], b[q]);
            }
          }
        }
        // Rows 8j .. 8j+7 from word j of each tile, kTiles tiles.
        auto rows_out = [&](auto tiles_c) HWY_ATTR {
          constexpr int kTiles = decltype(tiles_c)::value;
          // (Counted without divisions: acc / words lines are due by word j.)
          int64_t acc = 0, line = 0;
          for (int64_t j = 0; j < words; ++j) {
            for (acc += line_count; acc >= words; acc -= words) {
              _mm_prefetch(reinterpret_cast<const char*>(next + 64 * line), _MM_HINT_T1);
              if (++line == next_lines) {
                line = 0;
                next += S;
              }
            }
            __m512i h[kTiles][2];
            const int64_t lj = lane0 + j;
#pragma GCC unroll 4
            for (int t = 0; t < kTiles; ++t) {
              const __m512i wa = _mm512_load_si512(codes[lj / 16][t][0][lj % 16]);
              const __m512i wb = _mm512_load_si512(codes[lj / 16][t][1][lj % 16]);
              if constexpr (OutDesc<kOut>::kBytes == 4) {
                h[t][0] = wa;
                h[t][1] = wb;
              } else {
                h[t][0] = _mm512_permutex2var_epi16(wa, half_lo, wb);
                h[t][1] = _mm512_permutex2var_epi16(wa, half_hi, wb);
              }
            }
#pragma GCC unroll 8
            for (int p = 0; p < 8; ++p) {
              const int nib = kAwqNibbleOrder[p];
              const int64_t i = 8 * j + p;
              char* const d = dst(i, kc0);
              const bool d_nt = nt(d);  // then every tile's run is aligned too
              const __m512i table = row_table(fresh, g, n0, i);
#pragma GCC unroll 4
              for (int t = 0; t < kTiles; ++t) {
                char* const dt = d + 32 * t * kOutBytes;
                if constexpr (OutDesc<kOut>::kBytes == 4) {
                  // vpermps reads the low 4 bits of each index.
                  StoreLookup32<kOut>(table, _mm512_srli_epi32(h[t][0], 4 * nib),
                                      _mm512_srli_epi32(h[t][1], 4 * nib), dt, d_nt);
                } else {
                  const __m512i c16 = _mm512_srli_epi16(h[t][nib / 4], 4 * (nib % 4));
                  StoreLookup32<kOut>(table, c16, c16, dt, d_nt);
                }
              }
            }
          }
        };
        static_assert(kAwqChunk == 128, "rows_out instantiations below");
        switch (tiles) {
          case 4:
            rows_out(std::integral_constant<int, 4>{});
            break;
          case 3:
            rows_out(std::integral_constant<int, 3>{});
            break;
          case 2:
            rows_out(std::integral_constant<int, 2>{});
            break;
          default:
            rows_out(std::integral_constant<int, 1>{});
            break;
        }
        kc0 = kc1;
      }
      continue;
    }
    for (int64_t kc0 = ka; kc0 < kb; kc0 += KC) {
      const int64_t kc1 = std::min(kb, kc0 + KC);
      auto tdst = [&](int64_t i, int64_t k) {
        return staging ? stage + i * kStagePitch + (k - kc0) * kOutBytes : dst(i, k);
      };
      auto tnt = [&](const char* p) { return !staging && nt(p); };
      for (int64_t k0 = kc0; k0 < kc1; k0 += 32) {
        const int64_t g = k0 / G;
        // A new group: each row's table is built (RowTable16, kept in tab
        // for the group's next tiles) between the rows' stores.
        const bool fresh = !kMap && g != g_cur;
        if (!kMap) g_cur = g;
        if constexpr (kGptq) {
          const auto m = static_cast<__mmask16>((1u << rows) - 1u);
          const uint8_t* wp = plan.codes + (k0 / 8) * S + 4 * n0;
          // Two tiles ahead: each word row is a new page the hardware
          // prefetchers do not follow.
          if (k0 + 96 <= kb) {
            for (int q = 8; q < 12; ++q) hwy::Prefetch(wp + q * S);
          }
          const __m512i w0 = _mm512_maskz_loadu_epi32(m, wp);
          const __m512i w1 = _mm512_maskz_loadu_epi32(m, wp + S);
          const __m512i w2 = _mm512_maskz_loadu_epi32(m, wp + 2 * S);
          const __m512i w3 = _mm512_maskz_loadu_epi32(m, wp + 3 * S);
          if constexpr (kMap) {
            const hn::ScalableTag<float> df;
            const hn::RebindToSigned<decltype(df)> di;
            const __m512i w[4] = {w0, w1, w2, w3};
            const __m512i low4x32 = _mm512_set1_epi32(0x0F);
            // Column k0 + c of rows n0 .. n0 + 15: the RowTable16
            // arithmetic with the actual codes.
            auto column = [&](int c) HWY_ATTR {
              const int64_t at = plan.axis_group[k0 + c] * map_stride;
              const __m512i code = _mm512_and_si512(
                  _mm512_srli_epi32(w[c / 8], static_cast<unsigned>(4 * (c % 8))), low4x32);
              const auto* zw = static_cast<const uint32_t*>(map_z) + at;
              __m512i z = _mm512_set1_epi32(plan.code_offset);
              if (kZp == ZeroPointKind::kInteger) z = _mm512_maskz_loadu_epi32(m, zw);
              const auto q = hn::Sub(hn::Vec<decltype(di)>{code}, hn::Vec<decltype(di)>{z});
              auto x = hn::Mul(hn::ConvertTo(df, q),
                               hn::Vec<decltype(df)>{_mm512_maskz_loadu_ps(m, map_s + at)});
              if (kZp == ZeroPointKind::kFloat) {
                x = hn::Add(
                    x, hn::Vec<decltype(df)>{_mm512_castsi512_ps(_mm512_maskz_loadu_epi32(m, zw))});
              }
              return x;
            };
            auto put = [&](int64_t i, int64_t k, __m512 v) HWY_ATTR {
              char* d = tdst(i, k);
              if (tnt(d)) {
                _mm512_stream_ps(reinterpret_cast<float*>(d), v);
              } else {
                _mm512_storeu_ps(reinterpret_cast<float*>(d), v);
              }
            };
            // Sixteen vectors at a time (32 spill): float32 in two halves
            // of 16 columns, each a 16 x 16 transpose and one 64-byte store
            // per row; 16-bit outputs as 16 column pairs (the two columns'
            // values interleaved in 32-bit lanes), one transpose and one
            // store per row.
            __m512 v[16];
            if constexpr (OutDesc<kOut>::kBytes == 4) {
              for (int h = 0; h < 2; ++h) {
#pragma GCC unroll 16
                for (int c = 0; c < 16; ++c) v[c] = column(16 * h + c).raw;
                Transpose16x16(v);  // v[i]: columns k0 + 16h .. + 15 of row n0 + i
                for (int64_t i = 0; i < rows; ++i) put(i, k0 + 16 * h, v[i]);
              }
            } else {
              const __m512i pair =
                  _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39,
                                   7, 38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
              const __m512i pair1 =  // the same from one register: b at 16
                  _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23,
                                   7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
#pragma GCC unroll 16
              for (int c = 0; c < 16; ++c) {
                if constexpr (kOut == OutType::kBF16) {
                  // Both columns rounded by one vcvtne2ps2bf16 (column
                  // 2c in lanes 0-15, 2c + 1 in 16-31), then interleaved:
                  // one check and conversion per pair instead of two.
                  const __m512i ab =
                      OutBits32<kOut>(column(2 * c).raw, column(2 * c + 1).raw, bf16_hw);
                  v[c] = _mm512_castsi512_ps(_mm512_permutexvar_epi16(pair1, ab));
                } else {
                  const __m256i a = OutBits16<kOut>(column(2 * c)).raw;
                  const __m256i b = OutBits16<kOut>(column(2 * c + 1)).raw;
                  v[c] = _mm512_castsi512_ps(_mm512_permutex2var_epi16(
                      _mm512_castsi256_si512(a), pair, _mm512_castsi256_si512(b)));
                }
              }
              Transpose16x16(v);  // v[i]: columns k0 .. k0 + 31 of row n0 + i
              for (int64_t i = 0; i < rows; ++i) put(i, k0, v[i]);
            }
            continue;
          }
          __m512i x[4];
          GptqTileCodes(w0, w1, w2, w3, x);
          const __m512i pick_lo = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0);
          const __m512i pick_hi = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            const __m512i lo = _mm512_and_si512(x[j], low4);
            const __m512i hi = _mm512_and_si512(_mm512_srli_epi16(x[j], 4), low4);
            // Lane l: columns 0..15 (e0) and 16..31 (e1) of row 4l + j, a byte each.
            const __m512i e0 = _mm512_unpacklo_epi8(lo, hi), e1 = _mm512_unpackhi_epi8(lo, hi);
            // Rows j, 4 + j (y01) and 8 + j, 12 + j (y23): 32 code bytes each.
            const __m512i y[2] = {_mm512_permutex2var_epi64(e0, pick_lo, e1),
                                  _mm512_permutex2var_epi64(e0, pick_hi, e1)};
#pragma GCC unroll 4
            for (int l = 0; l < 4; ++l) {
              const int64_t i = 4 * l + j;
              if (i >= rows) continue;
              const __m256i codes = l % 2 == 0 ? _mm512_castsi512_si256(y[l / 2])
                                               : _mm512_extracti64x4_epi64(y[l / 2], 1);
              char* d = tdst(i, k0);
              const __m512i table = row_table(fresh, g, n0, i);
              if constexpr (OutDesc<kOut>::kBytes == 4) {
                StoreLookup32<kOut>(table, _mm512_cvtepu8_epi32(_mm256_castsi256_si128(codes)),
                                    _mm512_cvtepu8_epi32(_mm256_extracti128_si256(codes, 1)), d,
                                    nt(d));  // staged only when not streaming: nt(d) false
              } else {
                const __m512i c16 = _mm512_cvtepu8_epi16(codes);
                StoreLookup32<kOut>(table, c16, c16, d, tnt(d));
              }
            }
          }
        }
      }
      if (staging) {
        const int64_t bytes = (kc1 - kc0) * kOutBytes;
        for (int64_t i = 0; i < rows; ++i) {
          char* d = dst(i, kc0);
          const char* src = stage + i * kStagePitch;
          if (stream && reinterpret_cast<uintptr_t>(d) % 64 == 0) {  // bytes: a multiple of 64
            for (int64_t b = 0; b < bytes; b += 64) {
              _mm512_stream_si512(reinterpret_cast<__m512i*>(d + b), _mm512_load_si512(src + b));
            }
          } else {
            std::memcpy(d, src, static_cast<size_t>(bytes));
          }
        }
      }
    }
  }
}

// Whether GptqBlockTiles (blocks) or ColumnNibbleTiles (16-row bands)
// runs GPTQ columns without a group map here. Both were alternated on three
// machines (bench/EXPERIMENTS.md): on a 16-core Intel Xeon (family 6, model
// 207) the blocks ran 1.14-1.62x at one thread and 1.03-1.25x at 16; on a
// 2-core AMD EPYC VM as a Zen 4 guest (family 19h) they ran 0.73-0.92x,
// its memory serving the bands' interleaved strided reads and row stores
// well; on the same VM as a Zen 5 guest (family 1Ah) 0.98-1.00x at one
// thread and 1.19-1.24x at two. So: bands on AMD before Zen 5, blocks
// elsewhere, until more machines are measured.
inline bool PreferGptqBlocks() { return CpuIsIntel() || AmdCpuFamily() >= 0x1A; }

// GPTQ columns (kGptqColumns without a group map) on AVX-512, written as
// the [N, K] output in blocks: a band of up to 128 rows (n) by a chunk of
// up to 256 columns (k, chunks at multiples of 256; other sizes for float32
// outputs, below).
//  1. Codes: the chunk's word rows (k / 8) are read across the band, 4 *
//     band bytes of each (512 for 128 rows), 16 rows by 32 columns a tile
//     (one 64-byte load from each of 4 word rows), transposed in registers
//     (two rounds of 32- and 64-bit unpacks) into each row's 32 codes as 16
//     packed bytes, and kept in `stage` (band * chunk / 2 bytes, 16 KiB).
//  2. Values: each row's chunk is one run of stores (512 bytes for 16-bit
//     outputs), row after row: per 32 columns one lookup in the row's
//     16-entry table for that tile's group and one 64-byte store (two for
//     float32); the table (RowTable16) is built in the row's loop where
//     the group changes, its arithmetic between the stores.
// While a chunk's codes are read, the next chunk's (the next band's first
// at a band's end) are prefetched into L2, line for line.
// Why blocks: reading one 64-byte line of each word row (16 rows at a
// time, ColumnNibbleTiles' order) while writing 16 row streams kept loads
// and stores from overlapping on a 16-core Xeon (nibble_access_probe:
// 0.39-0.47 of the fill against 0.66-0.75 for blocks). The output rows'
// runs need no staging for cached stores (16 interleaved rows at a
// power-of-two pitch would share L1 sets).
// Needs plan.group % 32 == 0 (a tile has one group).
// Columns outside [ka, kb) (32-aligned) go through `edge(r, ca, cb)`.
template <ZeroPointKind kZp, OutType kOut, class Edge>
void GptqBlockTiles(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, char* out,
                    int64_t ld, const Edge& edge) {
  constexpr int64_t kOutBytes = OutDesc<kOut>::kBytes;
  // float32: runs of 2 KiB (512 columns) over 64 rows; 16-bit: 512 bytes
  // (256 columns) over 128 rows. Either way 16 KiB of codes. Streamed
  // float32 (a whole tensor from memory): runs of 512 bytes (128 columns)
  // over 256 rows, each word row's read then 1 KiB: 1.12-1.14x from memory
  // on an Intel Xeon guest, where those blocks ran 0.84x in cache
  // (bench/HISTORY.md, "GPTQ float32 blocks of 256 rows when streamed").
  constexpr int64_t kMaxChunk = OutDesc<kOut>::kBytes == 4 ? 512 : 256;
  const int64_t chunk = kOutBytes == 4 && plan.nontemporal ? 128 : kMaxChunk;
  const int64_t band = 16384 / (chunk / 2);
  const bool stream = plan.nontemporal;
  const int64_t ka = std::min(c1, (c0 + 31) / 32 * 32);
  const int64_t kb = ka + (c1 - ka) / 32 * 32;
  if (ka >= kb) {
    for (int64_t r = r0; r < r1; ++r) edge(r, c0, c1);
    return;
  }
  const int64_t S = plan.word_stride, G = plan.group;
  // (In a local: the output stores may alias the flag's static.)
  const bool bf16_hw = kOut == OutType::kBF16 && CpuHasAvx512Bf16();
  // The codes of tile t of rows 16 * b .. 16 * b + 15 (256 bytes) at
  // stage + (b * tiles + t) * 256; row 16b + 4l + j's 16 bytes at + 64 j +
  // 16 l.
  alignas(64) uint8_t stage[16384];  // band * chunk / 2 bytes
  auto chunk_end = [&](int64_t k) { return std::min(kb, (k / chunk + 1) * chunk); };
  // Word lines (WordLines; row n's word is n): a band's rows are lanes
  // lane0 .. lane0 + rows - 1 of whole lines, each loaded from the line's
  // start, masked to the band's words (codes 16 bytes past a line, loaded
  // from there: float16 1.2-1.4x slower). The first band ends at a line
  // boundary, so the others start at one.
  const WordLines word_lines(plan.codes, S, true);
  auto band_rows = [&](int64_t n) { return std::min(band - word_lines.Lane(n), r1 - n); };
  for (int64_t n0 = r0, rows = 0; n0 < r1; n0 += rows) {
    rows = band_rows(n0);
    // Row n0 + i is lane (lane0 + i) % 16 of line (lane0 + i) / 16 of the
    // band's `lines` (at most band / 16) in each word row.
    const int64_t lane0 = word_lines.Lane(n0), lines = WordLines::Lines(lane0, rows);
    for (int64_t r = n0; r < n0 + rows; ++r) {
      if (c0 < ka) edge(r, c0, ka);
      if (kb < c1) edge(r, kb, c1);
    }
    for (int64_t kc0 = ka; kc0 < kb;) {
      const int64_t kc1 = chunk_end(kc0);
      const int64_t tiles = (kc1 - kc0) / 32;
      // The next chunk's first word row's first line, its lines per word
      // row and its tiles.
      const uint8_t* next = nullptr;
      int64_t next_lines = 1, next_tiles = 0;
      if (kc1 < kb) {
        next = word_lines.Line(kc1 / 8, n0);
        next_lines = lines;
        next_tiles = (chunk_end(kc1) - kc1) / 32;
      } else if (n0 + rows < r1) {
        const int64_t n1 = n0 + rows;
        next = word_lines.Line(ka / 8, n1);
        next_lines = WordLines::Lines(word_lines.Lane(n1), band_rows(n1));
        next_tiles = (chunk_end(ka) - ka) / 32;
      }
      // Tile t's group's scale and zero point index less the row:
      // tile_at[t] + n (no division per tile).
      int64_t tile_at[kMaxChunk / 32];
      for (int64_t t = 0; t < tiles; ++t) tile_at[t] = (kc0 + 32 * t) / G * plan.s_axis;
      for (int64_t b = 0; b < lines; ++b) {
        const __mmask16 m = WordLines::Mask(b, lane0, rows);
        for (int64_t t = 0; t < tiles; ++t) {
          const uint8_t* wp = word_lines.Line((kc0 + 32 * t) / 8, n0) + 64 * b;
          const __m512i w0 = _mm512_maskz_loadu_epi32(m, wp);
          const __m512i w1 = _mm512_maskz_loadu_epi32(m, wp + S);
          const __m512i w2 = _mm512_maskz_loadu_epi32(m, wp + 2 * S);
          const __m512i w3 = _mm512_maskz_loadu_epi32(m, wp + 3 * S);
          __m512i x[4];
          GptqTileCodes(w0, w1, w2, w3, x);
          uint8_t* const st = stage + (b * tiles + t) * 256;
          for (int j = 0; j < 4; ++j) _mm512_store_si512(st + 64 * j, x[j]);
        }
      }
      // The next chunk's lines (word row q, line l of the band's 4 * band
      // bytes), spread over this chunk's rows: reads overlap the stores.
      // (Counted without divisions: acc / rows lines are due by row i.)
      const int64_t line_count = 4 * next_tiles * next_lines;
      int64_t acc = 0, line = 0;
      for (int64_t i = 0; i < rows; ++i) {
        for (acc += line_count; acc >= rows; acc -= rows) {
          _mm_prefetch(reinterpret_cast<const char*>(next + 64 * line), _MM_HINT_T1);
          if (++line == next_lines) {
            line = 0;
            next += S;
          }
        }
        char* const d = out + ((n0 + i - r0) * ld + (kc0 - c0)) * kOutBytes;
        // Aligned at the start, then every 64-byte store of the run is.
        const bool d_nt = stream && reinterpret_cast<uintptr_t>(d) % 64 == 0;
        const int64_t li = lane0 + i;  // its lane from the band's first line
        const uint8_t* const st =
            stage + (li / 16) * tiles * 256 + (li % 4) * 64 + (li % 16) / 4 * 16;
        // The row's table for the tile's group, built when the group
        // changes (RowTable16: between the stores).
        __m512i table = _mm512_setzero_si512();
        int64_t table_at = -1;
        for (int64_t t = 0; t < tiles; ++t) {
          const __m128i p = _mm_load_si128(reinterpret_cast<const __m128i*>(st + t * 256));
          if (tile_at[t] != table_at) {
            table_at = tile_at[t];
            table = RowTable16<kZp, kOut>(plan, table_at + n0 + i, bf16_hw);
          }
          char* const dt = d + 32 * t * kOutBytes;
          if constexpr (OutDesc<kOut>::kBytes == 4) {
            // u64 lane m = byte m; | << 28: u32 lane 2m's low 4 bits hold
            // column 2m, lane 2m + 1's column 2m + 1 (vpermps reads 4 bits).
            const __m512i lo = _mm512_cvtepu8_epi64(p);
            const __m512i hi = _mm512_cvtepu8_epi64(_mm_unpackhi_epi64(p, p));
            StoreLookup32<kOut>(table, _mm512_or_si512(lo, _mm512_slli_epi64(lo, 28)),
                                _mm512_or_si512(hi, _mm512_slli_epi64(hi, 28)), dt, d_nt);
          } else {
            // u32 lane m = byte m; | << 12: u16 lane 2m's low 4 bits hold
            // column 2m, lane 2m + 1's column 2m + 1 (the table is held
            // twice, so vpermw's fifth index bit does not matter).
            const __m512i c = _mm512_cvtepu8_epi32(p);
            const __m512i idx = _mm512_or_si512(c, _mm512_slli_epi32(c, 12));
            StoreLookup32<kOut>(table, idx, idx, dt, d_nt);
          }
        }
      }
      kc0 = kc1;
    }
  }
}

#endif  // HWY_TARGET <= HWY_AVX3

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#endif  // include guard
