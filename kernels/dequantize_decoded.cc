// The dequantize kernel of the decoded block layouts (kernels/layouts.h,
// NIBBLE_DECODED_LAYOUTS; kernels/dequantize_families.h): each block's
// values computed in full float vectors by a per-layout BlockVectors (the
// same operations as the descriptor's Decode, so the same bits), rounded to
// the output type and stored — streamed (non-temporal) for large outputs —
// without an intermediate buffer. Blocks cut by the tile's first or last
// column are decoded into a float32 buffer and their wanted part converted.
#include "kernels/dequantize_families.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/dequantize_decoded.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/convert.h"
#include "kernels/dequantize-inl.h"
#include "kernels/layouts.h"

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET != HWY_SCALAR

using DF = KernelTag;
using VF = hn::Vec<DF>;

// BlockVectors<D> contract: Read(block) does the descriptor's per-block
// work (indices, scales, sign masks) into the object; At(e) then returns
// the block's float32 values e .. e+N-1 (e a multiple of N = Lanes(DF)),
// each the value D::Decode computes, by the same float operations. At's
// vector loads read what Read stored with narrower stores: the kernel
// reads a batch of blocks before expanding the first, so those stores
// have left the store buffer (a load straddling pending stores stalls).
// Optional, on AVX-512 and AVX2 (kOut16 true; AVX2: TQ1_0's and Q1_0's,
// returning __m256i): Read16<kOut>(block, bf16_hw) reads as
// Read does and may prepare Out16; Out16<kOut>(e, bf16_hw) returns the kOut bits
// (float16 / bfloat16) of values e .. e+2N-1 (e a multiple of 2N), each the
// value At gives rounded once (OutBits16): the layout's few distinct values
// computed by At's operations, rounded once, and selected (vpermw by index,
// then a sign flip where At's value is an exact negation; or a blend by
// sign bits) — as the row kernels' kHalfTable and the block tables do.
// bf16_hw: CpuHasAvx512Bf16().
// Every layout without its own: D::Decode into a buffer, then loads.
template <class D, class = void>
class BlockVectors {
 public:
  HWY_INLINE void Read(const uint8_t* b) { D::Decode(b, y_); }
  HWY_INLINE VF At(size_t e) const { return hn::LoadU(DF(), y_ + e); }

 private:
  alignas(64) float y_[static_cast<size_t>(D::kBlockElems)];
};

// Grid layouts (GridLayout: the i-quants, Q1_0): D::Groups sets the block's
// groups (scalar: ggml's index and scale arithmetic) — or, on AVX-512, the
// same groups computed in vectors (GridGroups<D>::Fill, x86_avx512-inl.h,
// which also applies the sign bits to the bytes of kSignedBytes grids),
// and on AVX2 for the 16-bit outputs (GridPairs, below);
// At expands 8-value groups as the scalar ExpandGroup does — grid bytes
// widened and negated by their sign bits, times the group's scale
// (kSignedBytes), the scale times 1 and then negated (kNegatedScale), or the
// delta added first (kShiftedInt8). The group of lane i is e / 8 + i / 8; one
// vector lies within one sub-block (kSubElems a multiple of N), so its
// scale is one broadcast; with N a multiple of 8 its sign bits are the
// sign bytes' bits e .. e+N-1, loaded as the mask itself.
#if HWY_TARGET == HWY_AVX2
// AVX2: entries idx (16-bit lanes, each < 8) of an 8-entry 16-bit table
// held in both 128-bit halves of `table`: one byte shuffle of the byte
// pairs (2 idx, 2 idx + 1).
HWY_INLINE __m256i LookupWords8(__m256i table, __m256i idx) {
  const __m256i pair = _mm256_add_epi16(_mm256_mullo_epi16(idx, _mm256_set1_epi16(0x0202)),
                                        _mm256_set1_epi16(0x0100));
  return _mm256_shuffle_epi8(table, pair);
}

// GridPairs<D> (kHas: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S): a block's
// groups read in vectors for the 16-bit outputs, the values D::Groups
// computes — Read(b, offsets, signs, scales) sets grid entry i's byte
// offset in the pair grid (2 kEntryValues times its grid index: Grid(),
// kernels/ggml_grids.h; IQ2 one entry of 8 values a group, IQ3 two of 4),
// group k's sign byte (bit j set: value j negated; the 7-bit sign indices
// with their parity as bit 7, ggml's ksigns_iq2xs) and sub-block s's
// scale in lane s % 8 of scales[s / 8] (the descriptor's float
// operations; kept in registers: a lane read back from a stored vector
// waits for the store). The kernel then reads an entry's table positions
// as one load (BlockVectors::Out16) instead of Groups' scalar lookups and
// stores and a widening of each stored position. kFloat32: the float32
// outputs read the block this way too (BlockVectors::Read32; else Groups'
// table form, whose 64-bit words of 8 positions ran faster there for
// IQ2_XXS, IQ2_XS and IQ1_S: bench/EXPERIMENTS.md).
template <class D, class = void>
struct GridPairs {
  static constexpr bool kHas = false;
};
namespace pairs_internal {
// Bytes x (each < 128) with bit 7 set where x has an odd number of bits
// set (layout_internal::SignsOf7): the nibbles' parities by two byte
// shuffles.
HWY_INLINE __m256i Signs7(__m256i x) {
  const __m256i parity =
      _mm256_setr_epi8(0, -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0, 0,
                       -128, -128, 0, -128, 0, 0, -128, -128, 0, 0, -128, 0, -128, -128, 0);
  const __m256i low = _mm256_and_si256(x, _mm256_set1_epi8(0x0F));
  const __m256i high = _mm256_and_si256(_mm256_srli_epi16(x, 4), _mm256_set1_epi8(0x0F));
  return _mm256_or_si256(
      x, _mm256_xor_si256(_mm256_shuffle_epi8(parity, low), _mm256_shuffle_epi8(parity, high)));
}
// The sign bytes of 8 sub-blocks' aux dwords (IQ2_XXS, IQ3_XXS: sign
// index l in bits 7 l ..): sign index l to byte l of its sub-block's
// dword, with its parity (Signs7), stored as group 4 ib + l's.
HWY_INLINE void StoreAuxSigns(__m256i aux, uint8_t* signs) {
  __m256i sevens = _mm256_and_si256(aux, _mm256_set1_epi32(0x7F));
  for (int l = 1; l < 4; ++l) {
    sevens = _mm256_or_si256(
        sevens, _mm256_and_si256(_mm256_slli_epi32(aux, l), _mm256_set1_epi32(0x7F << (8 * l))));
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(signs), Signs7(sevens));
}
// Iq2Scale(d, s) of 8 lanes s: d * (0.5 + s) * 0.25, the same operations.
HWY_INLINE __m256 Scales(float d, __m256i s) {
  return _mm256_mul_ps(
      _mm256_mul_ps(_mm256_set1_ps(d), _mm256_add_ps(_mm256_set1_ps(0.5f), _mm256_cvtepi32_ps(s))),
      _mm256_set1_ps(0.25f));
}
// d * float(2 s + 1) of 8 lanes s (IQ3_S, IQ1), the same operations.
HWY_INLINE __m256 OddScales(float d, __m256i s) {
  const __m256i odd = _mm256_or_si256(_mm256_slli_epi32(s, 1), _mm256_set1_epi32(1));
  return _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(odd));
}
// The nibbles of the low 8 bytes of v in order (byte i's low, then its
// high nibble).
HWY_INLINE __m128i Nibbles(__m128i v) {
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm_unpacklo_epi8(_mm_and_si128(v, mask), _mm_and_si128(_mm_srli_epi16(v, 4), mask));
}
// The sign flip of a block's negated values: bit 15, or none where its
// scales (lane 0 of `scales`: all NaN or none, each d times a positive
// finite factor) are NaN — a NaN product keeps the scale's NaN whatever
// the value's sign.
HWY_INLINE __m256i SignFlip(__m256 scales) {
  return _mm256_set1_epi16(std::isnan(_mm256_cvtss_f32(scales)) ? int16_t{0} : int16_t{-32768});
}
// IQ2_XS / IQ2_S: 16-value sub-block j's scale from nibble j % 2 of
// scales[j / 2].
HWY_INLINE void NibbleScales(float d, const uint8_t* scales, __m256* dst) {
  const __m128i nibbles = Nibbles(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(scales)));
  dst[0] = Scales(d, _mm256_cvtepu8_epi32(nibbles));
  dst[1] = Scales(d, _mm256_cvtepu8_epi32(_mm_srli_si128(nibbles, 8)));
}
// 16 grid indices (16-bit lanes, each < 4096) as byte offsets (16 each).
HWY_INLINE void StoreOffsets(__m256i index, uint16_t* dst) {
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_slli_epi16(index, 4));
}
}  // namespace pairs_internal
// IQ2_XXS: dword 2 ib of sub-block ib's 8 bytes the four grid indices,
// dword 2 ib + 1 (aux) the sign indices (7 l) and the scale (28).
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ2_XXS>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 8;
  static constexpr bool kFloat32 = false;
  static const uint8_t* Grid() { return kGgmlIq2xxsPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ2_XXS::Block;
    const float* qs = reinterpret_cast<const float*>(b + offsetof(Block, qs));
    const __m256 lo = _mm256_loadu_ps(qs), hi = _mm256_loadu_ps(qs + 8);
    // Dwords 2 ib (the indices) and 2 ib + 1 (aux), ib = 0 .. 7 in order.
    const __m256i index =
        _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8);
    const __m256i aux =
        _mm256_permute4x64_epi64(_mm256_castps_si256(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8);
    pairs_internal::StoreOffsets(_mm256_cvtepu8_epi16(_mm256_castsi256_si128(index)), offsets);
    pairs_internal::StoreOffsets(_mm256_cvtepu8_epi16(_mm256_extracti128_si256(index, 1)),
                                 offsets + 16);
    pairs_internal::StoreAuxSigns(aux, signs);
    scales[0] = pairs_internal::Scales(layout_internal::Half(b, offsetof(Block, d)),
                                       _mm256_srli_epi32(aux, 28));
  }
};
// IQ2_XS: u16 qs[k]: grid index bits 0-8, sign index bits 9-15.
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ2_XS>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 8;
  static constexpr bool kFloat32 = false;
  static const uint8_t* Grid() { return kGgmlIq2xsPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ2_XS::Block;
    const auto* qs = reinterpret_cast<const __m256i*>(b + offsetof(Block, qs));
    const __m256i w0 = _mm256_loadu_si256(qs), w1 = _mm256_loadu_si256(qs + 1);
    const __m256i index_mask = _mm256_set1_epi16(511);
    pairs_internal::StoreOffsets(_mm256_and_si256(w0, index_mask), offsets);
    pairs_internal::StoreOffsets(_mm256_and_si256(w1, index_mask), offsets + 16);
    // The 32 sign indices as bytes in order (the pack interleaves halves).
    const __m256i sevens = _mm256_permute4x64_epi64(
        _mm256_packus_epi16(_mm256_srli_epi16(w0, 9), _mm256_srli_epi16(w1, 9)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(signs), pairs_internal::Signs7(sevens));
    pairs_internal::NibbleScales(layout_internal::Half(b, offsetof(Block, d)),
                                 b + offsetof(Block, scales), scales);
  }
};
// IQ2_S: grid index qs[k] | bits 2 (k % 4) .. +1 of qh[k / 4] << 8, the
// sign bytes as stored.
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ2_S>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 8;
  static constexpr bool kFloat32 = true;
  static const uint8_t* Grid() { return kGgmlIq2sPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ2_S::Block;
    const __m256i qh = _mm256_broadcastq_epi64(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(Block, qh))));
    // Lane k: qh[k / 4] shifted left by 8 - 2 (k % 4), bits 8-9 kept
    // (Groups' (qh << (8 - 2 l)) & 0x300).
    const __m256i shift =
        _mm256_setr_epi16(256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4, 256, 64, 16, 4);
    for (int h = 0; h < 2; ++h) {
      // Word k's low byte qh[4 h + k / 4], its high byte 0.
      const __m256i pick =
          _mm256_setr_epi8(static_cast<char>(4 * h), -128, static_cast<char>(4 * h), -128,
                           static_cast<char>(4 * h), -128, static_cast<char>(4 * h), -128,
                           static_cast<char>(4 * h + 1), -128, static_cast<char>(4 * h + 1), -128,
                           static_cast<char>(4 * h + 1), -128, static_cast<char>(4 * h + 1), -128,
                           static_cast<char>(4 * h + 2), -128, static_cast<char>(4 * h + 2), -128,
                           static_cast<char>(4 * h + 2), -128, static_cast<char>(4 * h + 2), -128,
                           static_cast<char>(4 * h + 3), -128, static_cast<char>(4 * h + 3), -128,
                           static_cast<char>(4 * h + 3), -128, static_cast<char>(4 * h + 3), -128);
      const __m256i high = _mm256_and_si256(
          _mm256_mullo_epi16(_mm256_shuffle_epi8(qh, pick), shift), _mm256_set1_epi16(0x300));
      const __m256i low = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs) + 16 * h)));
      pairs_internal::StoreOffsets(_mm256_or_si256(low, high), offsets + 16 * h);
    }
    std::memcpy(signs, b + offsetof(Block, signs), 32);
    pairs_internal::NibbleScales(layout_internal::Half(b, offsetof(Block, d)),
                                 b + offsetof(Block, scales), scales);
  }
};
// IQ3_XXS: qs[j] grid entry j's index (group k: entries 2 k, 2 k + 1);
// aux dword ib of scales_signs as IQ2_XXS's, db = d * (0.5 + s) * 0.5.
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ3_XXS>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 4;
  static constexpr bool kFloat32 = true;
  static const uint8_t* Grid() { return kGgmlIq3xxsPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ3_XXS::Block;
    const uint8_t* const qs = b + offsetof(Block, qs);
    for (int h = 0; h < 4; ++h) {
      const __m256i index =
          _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + 16 * h)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(offsets + 16 * h),
                          _mm256_slli_epi16(index, 3));
    }
    const __m256i aux =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + offsetof(Block, scales_signs)));
    pairs_internal::StoreAuxSigns(aux, signs);
    const __m256 s = _mm256_cvtepi32_ps(_mm256_srli_epi32(aux, 28));
    const float d = layout_internal::Half(b, offsetof(Block, d));
    scales[0] =
        _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(d), _mm256_add_ps(_mm256_set1_ps(0.5f), s)),
                      _mm256_set1_ps(0.5f));
  }
};
// IQ3_S: entry 8 ib + j's index qs[8 ib + j] | bit j of qh[ib] << 8, the
// sign bytes as stored, db = d * float(1 + 2 s) with s nibble ib % 2 of
// scales[ib / 2].
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ3_S>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 4;
  static constexpr bool kFloat32 = true;
  static const uint8_t* Grid() { return kGgmlIq3sPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ3_S::Block;
    const __m256i qh = _mm256_broadcastq_epi64(
        _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b + offsetof(Block, qh))));
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128);
    for (int h = 0; h < 4; ++h) {
      // Word j of entries 16 h .. (sub-blocks 2 h, 2 h + 1): qh[2 h + j / 8]
      // in its low byte; bit j % 8 of it set -> 256.
      const char lo = static_cast<char>(2 * h), hi = static_cast<char>(2 * h + 1);
      const __m256i pick = _mm256_setr_epi8(lo, -128, lo, -128, lo, -128, lo, -128, lo, -128, lo,
                                            -128, lo, -128, lo, -128, hi, -128, hi, -128, hi, -128,
                                            hi, -128, hi, -128, hi, -128, hi, -128, hi, -128);
      const __m256i bits = _mm256_and_si256(_mm256_shuffle_epi8(qh, pick), bit);
      const __m256i high =
          _mm256_and_si256(_mm256_cmpeq_epi16(bits, bit), _mm256_set1_epi16(0x100));
      const __m256i low = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs) + 16 * h)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(offsets + 16 * h),
                          _mm256_slli_epi16(_mm256_or_si256(low, high), 3));
    }
    std::memcpy(signs, b + offsetof(Block, signs), 32);
    uint32_t packed;
    std::memcpy(&packed, b + offsetof(Block, scales), 4);
    const __m128i nibbles = pairs_internal::Nibbles(_mm_cvtsi32_si128(static_cast<int>(packed)));
    scales[0] = pairs_internal::OddScales(layout_internal::Half(b, offsetof(Block, d)),
                                          _mm256_cvtepu8_epi32(nibbles));
  }
};
// IQ1_S: grid index qs[k] | bits 3 (k % 4) .. +2 of qh[k / 4] << 8, the
// group's delta negative where bit 15 of qh[k / 4] is set (its sign byte
// then 0xFF: every value of the group takes the table's second set), dl =
// d * float(2 * bits 12-14 + 1).
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ1_S>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 8;
  static constexpr bool kFloat32 = false;
  static const uint8_t* Grid() { return kGgmlIq1sPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ1_S::Block;
    const __m128i qh = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qh)));
    const __m256i qh2 = _mm256_broadcastsi128_si256(qh);
    for (int h = 0; h < 2; ++h) {
      // Word k of groups 16 h ..: qh[4 h + k / 4].
      alignas(32) static constexpr struct Pick {
        int8_t v[2][32];
        constexpr Pick() : v() {
          for (int hh = 0; hh < 2; ++hh) {
            for (int k = 0; k < 16; ++k) {
              v[hh][2 * k] = static_cast<int8_t>(2 * (4 * hh + k / 4));
              v[hh][2 * k + 1] = static_cast<int8_t>(2 * (4 * hh + k / 4) + 1);
            }
          }
        }
      } kPick{};
      const __m256i w =
          _mm256_shuffle_epi8(qh2, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.v[h])));
      // Bits 3 l .. 3 l + 2 to bits 8-10: << 8, 5, 2 for l < 3, >> 1 for l 3.
      const __m256i up = _mm256_mullo_epi16(
          w, _mm256_setr_epi16(256, 32, 4, 1, 256, 32, 4, 1, 256, 32, 4, 1, 256, 32, 4, 1));
      const __m256i high = _mm256_and_si256(_mm256_blend_epi16(up, _mm256_srli_epi16(w, 1), 0x88),
                                            _mm256_set1_epi16(0x700));
      const __m256i low = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs) + 16 * h)));
      pairs_internal::StoreOffsets(_mm256_or_si256(low, high), offsets + 16 * h);
    }
    const __m256i words = _mm256_cvtepu16_epi32(qh);  // lane ib: qh[ib]
    // Bit 15 of qh[ib] over the 4 sign bytes of groups 4 ib ...
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(signs),
                        _mm256_srai_epi32(_mm256_slli_epi32(words, 16), 31));
    scales[0] = pairs_internal::OddScales(
        layout_internal::Half(b, offsetof(Block, d)),
        _mm256_and_si256(_mm256_srli_epi32(words, 12), _mm256_set1_epi32(7)));
  }
};
// IQ1_M: grid index qs[k] | bits 4 (k % 2) .. +2 of qh[k / 2] << 8, the
// group's delta negative where bit 4 (k % 2) + 3 of qh[k / 2] is set; the
// 16-value sub-block j's dl = d * float(2 * (bits 3 (j % 4) .. of sc[j /
// 4]) + 1), d the float16 of the four top nibbles of sc[0..3].
template <class D>
struct GridPairs<D, std::enable_if_t<std::is_same_v<D, GgufIQ1_M>>> {
  static constexpr bool kHas = true;
  static constexpr int kEntryValues = 8;
  static constexpr bool kFloat32 = true;
  static const uint8_t* Grid() { return kGgmlIq1sPairGrid; }
  static HWY_INLINE void Read(const uint8_t* b, uint16_t* offsets, uint8_t* signs, __m256* scales) {
    using Block = GgufIQ1_M::Block;
    const __m256i qh = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qh))));
    __m256i negative[2];
    for (int h = 0; h < 2; ++h) {
      // Word k of groups 16 h ..: qh[8 h + k / 2] in its low byte.
      alignas(32) static constexpr struct Pick {
        int8_t v[2][32];
        constexpr Pick() : v() {
          for (int hh = 0; hh < 2; ++hh) {
            for (int k = 0; k < 16; ++k) {
              v[hh][2 * k] = static_cast<int8_t>(8 * hh + k / 2);
              v[hh][2 * k + 1] = -128;
            }
          }
        }
      } kPick{};
      const __m256i w =
          _mm256_shuffle_epi8(qh, _mm256_load_si256(reinterpret_cast<const __m256i*>(kPick.v[h])));
      // Nibble k % 2's low 3 bits to bits 8-10: << 8 (even k), << 4 (odd).
      const __m256i high = _mm256_and_si256(
          _mm256_mullo_epi16(w, _mm256_setr_epi16(256, 16, 256, 16, 256, 16, 256, 16, 256, 16, 256,
                                                  16, 256, 16, 256, 16)),
          _mm256_set1_epi16(0x700));
      const __m256i low = _mm256_cvtepu8_epi16(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + offsetof(Block, qs) + 16 * h)));
      pairs_internal::StoreOffsets(_mm256_or_si256(low, high), offsets + 16 * h);
      const __m256i bit =
          _mm256_setr_epi16(8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128, 8, 128);
      negative[h] = _mm256_cmpeq_epi16(_mm256_and_si256(w, bit), bit);
    }
    // 0xFFFF / 0 words to bytes in order (the pack interleaves halves).
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(signs),
        _mm256_permute4x64_epi64(_mm256_packs_epi16(negative[0], negative[1]), 0xD8));
    uint16_t sc[4];
    std::memcpy(sc, b + offsetof(Block, scales), 8);
    const uint32_t bits = (uint32_t{sc[0]} >> 12) | ((uint32_t{sc[1]} >> 8) & 0xF0u) |
                          ((uint32_t{sc[2]} >> 4) & 0xF00u) | (uint32_t{sc[3]} & 0xF000u);
    const float d = F32FromF16(static_cast<uint16_t>(bits));
    for (int c = 0; c < 2; ++c) {
      // Lane j of sub-blocks 8 c ..: sc[2 c + j / 4] >> 3 (j % 4), 3 bits.
      const __m256i field = _mm256_srlv_epi32(
          _mm256_setr_epi32(sc[2 * c], sc[2 * c], sc[2 * c], sc[2 * c], sc[2 * c + 1],
                            sc[2 * c + 1], sc[2 * c + 1], sc[2 * c + 1]),
          _mm256_setr_epi32(0, 3, 6, 9, 0, 3, 6, 9));
      scales[c] = pairs_internal::OddScales(d, _mm256_and_si256(field, _mm256_set1_epi32(7)));
    }
  }
};
#endif

// G::kUnitTables16 of a GridGroups G with a vector Fill, else false.
template <class G>
constexpr bool UnitTables16() {
  if constexpr (G::kVector) {
    return G::kUnitTables16;
  } else {
    return false;
  }
}

// GridTable of grid type D, or (Q1_0: no table) an empty one.
template <class D, class = void>
struct GridTableOf {
  static constexpr int kM = 0, kV = 0;
  static constexpr float Value(int) { return 0.0f; }
};
template <class D>
struct GridTableOf<D, std::enable_if_t<D::kGridValues != GridValues::kNegatedScale>>
    : GridTable<D> {};

#if HWY_TARGET <= HWY_AVX3
// The block table of the kUnitTables16 types (BlockVectors below): a base
// class, empty for the other grid types, whose objects (8 a batch on the
// stack) keep their size and layout.
template <bool kUnits>
struct UnitState {};
template <>
struct UnitState<true> {
  __m512i table[2];
  uint32_t keep;
};
#endif

template <class D>
class BlockVectors<D, std::enable_if_t<IsGridLayout<D>::value>>
#if HWY_TARGET <= HWY_AVX3
    : UnitState<UnitTables16<GridGroups<D>>()>
#endif
{
  static constexpr size_t kGroups = static_cast<size_t>(D::kBlockElems / 8);
  using Table = GridTableOf<D>;
  static_assert(hn::MaxLanes(DF()) <= 16, "lane bits of the sign masks");
  static_assert(D::kSubElems % hn::MaxLanes(DF()) == 0, "one scale per vector");

 public:
  HWY_INLINE void Read(const uint8_t* b) {
#if HWY_TARGET <= HWY_AVX3
    if constexpr (GridGroups<D>::kVector) {
      GridGroups<D>::Fill(b, g_);  // the same groups in vectors (x86_avx512-inl.h)
      return;
    }
#endif
    D::Groups(b, g_);
  }
#if HWY_TARGET <= HWY_AVX3
  // kNegatedScale with one scale per block (Q1_0): the block's two values
  // (At's p and -p) rounded once; each 32 outputs one 16-bit blend by their
  // sign bits.
  static constexpr bool kBlend16 =
      D::kGridValues == GridValues::kNegatedScale && D::kSubElems == D::kBlockElems;
  // The grids with a vector Fill: Fill<true> leaves each value's position
  // in its unit's table (GridTable) in place of the grid byte; per 32
  // values the table (the unit's parameter sets times the grid's values,
  // At's operations, kOut bits of at most 16 entries) and one vpermw.
  static constexpr bool kTable16 = GridGroups<D>::kVector;
  static constexpr bool kOut16 = kBlend16 || kTable16;
  // kUnitTables16 (GridGroups<D>::kUnitTables16: the kSignedBytes types
  // with kLateIndices — Fill<true> leaves each value's position in the
  // value set — and more than one unit per 32 values): the block's one
  // table of its kUnits units' (kSubElems values, one scale) kM
  // magnitudes, at most 64 entries, built once a block (UnitTables; the
  // tables above are built every 32 values and take a permute of the
  // scales each time), and per 32 values one two-register vpermw and bit
  // 15 flipped where the sign bit is set: rounding to nearest even is
  // symmetric, so s * -v = -(s * v) bit for bit. Except for a NaN s, whose
  // products keep the NaN's sign whatever the value's: a block with one
  // flips nothing (the reference's bits). (IQ2_XS / IQ2_S 1.06-1.15x in
  // cache on Zen 4; IQ1_S / IQ1_M, whose second set is a delta, and
  // IQ2_XXS, one scale per 32 values, lost 1-10 % this way:
  // bench/EXPERIMENTS.md.)
  static constexpr int kUnits = static_cast<int>(D::kBlockElems / D::kSubElems);
  static constexpr bool kUnitTables16 = kTable16 && UnitTables16<GridGroups<D>>();
  template <OutType kOut>
  HWY_INLINE void Read16(const uint8_t* b, bool bf16_hw) {
    if constexpr (kTable16) {
      GridGroups<D>::template Fill<true>(b, g_);
      if constexpr (kUnitTables16) UnitTables<kOut>(bf16_hw);
    } else {
      const DF df;
      const VF p = hn::Mul(hn::Set(df, ReadBlend(b)), hn::Set(df, 1.0f));
      SplitPair16(OutBits16<kOut, true>(hn::IfThenElse(hn::FirstN(df, 1), p, hn::Neg(p)), bf16_hw),
                  &pos_, &neg_);
    }
  }
  template <OutType kOut>
  HWY_INLINE __m512i Out16(size_t e, bool bf16_hw) const {
    if constexpr (kUnitTables16) {
      return UnitLookup(e);
    } else if constexpr (kTable16) {
      using T = typename GridGroups<D>::Table;
      struct Lanes {
        float value[16];
        int32_t group[16];
        constexpr Lanes() : value(), group() {
          for (int t = 0; t < 16; ++t) {
            value[t] = t < T::kP * T::kV ? T::Value(t % T::kV) : 0.0f;
            group[t] = T::Group(t);
          }
        }
      };
      alignas(64) static constexpr Lanes kLanes{};
      const DF df;
      const hn::RebindToSigned<DF> di;
      const VF value = hn::Load(df, kLanes.value);
      VF scale;
      if constexpr (T::kP == 1) {
        scale = hn::Set(df, g_.scale[e / 8]);
      } else {
        const auto group = hn::IndicesFromVec(df, hn::Load(di, kLanes.group));
        scale = hn::TableLookupLanes(hn::LoadU(df, g_.scale + e / 8), group);
      }
      // At: scale * float(signed byte), or scale * (float(q) + delta).
      const VF table = hn::Mul(scale, value);
      // Each value's position in the table (GridGroups<D>::kLateIndices:
      // plus its group's offset and kM where its bit in g_.signs is set,
      // the second set; else Fill made them so).
      __m512i idx = _mm512_cvtepu8_epi16(_mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(reinterpret_cast<const uint8_t*>(g_.grid) + e)));
      constexpr bool kLate = GridGroups<D>::kLateIndices;
      if constexpr (kLate) {
        if constexpr (T::kP > 1) {  // value i's group offset T::Offset(i / 8)
          alignas(64) static constexpr struct Offsets {
            int16_t v[32];
            constexpr Offsets() : v() {
              for (int i = 0; i < 32; ++i) v[i] = static_cast<int16_t>(T::Offset(i / 8));
            }
          } kOffsets{};
          idx = _mm512_add_epi16(idx, _mm512_load_si512(kOffsets.v));
        }
        __mmask32 m;
        std::memcpy(&m, g_.signs + e / 8, 4);
        idx = _mm512_mask_add_epi16(idx, m, idx, _mm512_set1_epi16(static_cast<int16_t>(T::kM)));
      }
      // (The table's lanes 16-31 are left undefined: every position is
      // below kP * kV <= 16.)
      return _mm512_permutexvar_epi16(
          idx, _mm512_castsi256_si512(OutBits16<kOut, true>(table, bf16_hw).raw));
    } else {
      return BlendHalves32(g_.signs + e / 8, pos_, neg_);
    }
  }

 private:
  // kUnitTables16: entry u * kM + i of this->table (64 16-bit lanes) the kOut
  // bits of unit u's scale times magnitude i (At's multiply, rounded once);
  // this->keep the sign bits applied (none where the scales are NaN).
  template <OutType kOut>
  HWY_INLINE void UnitTables(bool bf16_hw) {
    using T = Table;
    static_assert(T::kSigned && kUnits * T::kM <= 64 && kGroups <= 32, "one 64-entry table");
    constexpr int kVecs = (kUnits * T::kM + 15) / 16;
    struct Lanes {
      int32_t group[4][16];  // entry 16 j + l: the first group of its unit
      float value[4][16];    // and its magnitude
      constexpr Lanes() : group(), value() {
        for (int t = 0; t < 64; ++t) {
          const bool used = t < kUnits * T::kM;
          group[t / 16][t % 16] = used ? t / T::kM * static_cast<int>(D::kSubElems / 8) : 0;
          value[t / 16][t % 16] = used ? T::Value(t % T::kM) : 0.0f;
        }
      }
    };
    alignas(64) static constexpr Lanes kLanes{};
    const DF df;
    const __m512 s0 = _mm512_loadu_ps(g_.scale), s1 = _mm512_loadu_ps(g_.scale + 16);
    __m256i w[4] = {};
#pragma GCC unroll 4
    for (int j = 0; j < kVecs; ++j) {
      const VF s{_mm512_permutex2var_ps(s0, _mm512_load_si512(kLanes.group[j]), s1)};
      w[j] = OutBits16<kOut, true>(hn::Mul(s, hn::Load(df, kLanes.value[j])), bf16_hw).raw;
    }
    this->table[0] = _mm512_inserti64x4(_mm512_castsi256_si512(w[0]), w[1], 1);
    this->table[1] = _mm512_inserti64x4(_mm512_castsi256_si512(w[2]), w[3], 1);
    // Every unit's scale is the block's d times a positive finite factor
    // (D::Groups): NaN in all units or none.
    this->keep = std::isnan(g_.scale[0]) ? 0u : ~0u;
  }
  // kUnitTables16's values e .. e + 31.
  HWY_INLINE __m512i UnitLookup(size_t e) const {
    using T = Table;
    // Value i's unit's first entry: (e + i) / kSubElems * kM.
    alignas(64) static constexpr struct Offsets {
      int16_t v[D::kBlockElems / 32][32];
      constexpr Offsets() : v() {
        for (int i = 0; i < static_cast<int>(D::kBlockElems); ++i) {
          v[i / 32][i % 32] = static_cast<int16_t>(i / static_cast<int>(D::kSubElems) * T::kM);
        }
      }
    } kOffsets{};
    const __m512i idx = _mm512_add_epi16(
        _mm512_cvtepu8_epi16(_mm256_loadu_si256(
            reinterpret_cast<const __m256i*>(reinterpret_cast<const uint8_t*>(g_.grid) + e))),
        _mm512_load_si512(kOffsets.v[e / 32]));
    const __m512i r = _mm512_permutex2var_epi16(this->table[0], idx, this->table[1]);
    uint32_t signs;
    std::memcpy(&signs, g_.signs + e / 8, 4);
    return _mm512_mask_add_epi16(r, signs & this->keep, r,
                                 _mm512_set1_epi16(static_cast<int16_t>(0x8000)));
  }

 public:
#elif HWY_TARGET == HWY_AVX2
  // AVX2. kBlend16 (Q1_0), per 16 outputs: the block's two values (At's p
  // and -p, each rounded once), one blend by the sign bits as a 16-bit
  // lane mask. kTable (the other grid types): the 16-bit and float32
  // outputs through GridPairs (kPairs, below: every i-quant; a grid type
  // without one expands through At).
  static constexpr bool kBlend16 =
      D::kGridValues == GridValues::kNegatedScale && D::kSubElems == D::kBlockElems;
  static constexpr bool kTable = D::kGridValues != GridValues::kNegatedScale;
  static constexpr bool kOut16 = kBlend16 || (kTable && GridPairs<D>::kHas);
  static_assert(D::kSubElems % 16 == 0, "16 outputs within one sub-block");
  // kPairs (GridPairs: every grid i-quant): Read16 reads the grid
  // entries' pair-grid offsets, the groups' sign bytes (IQ1: 0xFF where the
  // group's delta is negative) and the sub-block scales in vectors, not
  // through Groups; Out16 loads the pair-grid entries of 16 values (their
  // positions' byte-shuffle indices in the sub-block's 8-entry table),
  // looks the values up by one byte shuffle and applies the sign bits: IQ2
  // and IQ1 (3 values, 6 entries) by adding 2 kM to both bytes of each
  // such value's pair (the table's second set: the negations, or IQ1's
  // values minus 1/8), IQ3 (8 magnitudes: kFlip) by flipping bit 15 of
  // each negated value's output (rounding is symmetric; a NaN d makes
  // every scale NaN, and its products keep that NaN whatever the value's
  // sign: flip_ then 0, the reference's bits; no value of the sets is 0).
  // (Zen 3: bench/EXPERIMENTS.md.)
  static constexpr bool kPairs = GridPairs<D>::kHas;
  static constexpr bool kFlip = kPairs && Table::kV > 8;
  template <OutType kOut>
  HWY_INLINE void Read16(const uint8_t* b, bool /*bf16_hw*/) {
    const DF df;
    if constexpr (kPairs) {
      if constexpr (kFlip) {
        static_assert(Table::kM == 8 && kSubBlocks == 8 && D::kValueSet->v[0] > 0,
                      "IQ3: 8 nonzero magnitudes, 8 sub-blocks");
        __m256 scales[2];
        GridPairs<D>::Read(b, offsets_, signs_, scales);
        // Sub-block s's table: its scale times magnitude i (At's multiply,
        // rounded once), two sub-blocks a vector.
        const VF v = hn::Load(df, kValues.v);
        for (int s = 0; s < 8; s += 2) {
          const VF s0{_mm256_permutevar8x32_ps(scales[0], _mm256_set1_epi32(s))};
          const VF s1{_mm256_permutevar8x32_ps(scales[0], _mm256_set1_epi32(s + 1))};
          _mm256_store_si256(reinterpret_cast<__m256i*>(tables_ + 16 * s),
                             OutBitsPair<kOut>(df, hn::Mul(s0, v), hn::Mul(s1, v)).raw);
        }
        flip_ = pairs_internal::SignFlip(scales[0]);
      } else {
        __m256 scales[2];
        GridPairs<D>::Read(b, offsets_, signs_, scales);
        PairTables<kOut>(scales);
      }
    } else {
      const VF p = hn::Mul(hn::Set(df, ReadBlend(b)), hn::Set(df, 1.0f));
      // Lane 0: p's bits, lane 1: -p's (At's values, each rounded once).
      const __m128i h = NarrowBits<kOut>(df, hn::IfThenElse(hn::FirstN(df, 1), p, hn::Neg(p))).raw;
      pos_ = _mm256_broadcastw_epi16(h);
      neg_ = _mm256_broadcastw_epi16(_mm_srli_epi32(h, 16));
    }
  }
  template <OutType kOut>
  HWY_INLINE __m256i Out16(size_t e, bool /*bf16_hw*/) const {
    if constexpr (kPairs) {
      __m256i pairs, set;
      Pairs16(e, &pairs, &set);
      const __m256i table = _mm256_broadcastsi128_si256(
          _mm_load_si128(reinterpret_cast<const __m128i*>(tables_ + 16 * (e / kSubElemsU))));
      if constexpr (kFlip) {
        return _mm256_xor_si256(_mm256_shuffle_epi8(table, pairs), _mm256_and_si256(set, flip_));
      } else {
        pairs = _mm256_add_epi8(pairs,
                                _mm256_and_si256(set, _mm256_set1_epi16(0x0101 * 2 * Table::kM)));
        return _mm256_shuffle_epi8(table, pairs);
      }
    } else {
      const hn::Repartition<uint16_t, DF> d16;  // 16 lanes: bit i of the signs, value e + i
      const auto negated = hn::VecFromMask(d16, hn::LoadMaskBits(d16, g_.signs + e / 8));
      return _mm256_blendv_epi8(pos_, neg_, negated.raw);
    }
  }
  // kOut32 (float32 outputs). kPairs32 (GridPairs' kFloat32): Read32
  // reads the block as Read16 does and builds sub-block s's table in
  // tables_: its scale times GridTable's values 0 .. 7 (At's multiply) —
  // IQ2 / IQ1 the 6 entries of both sets (IQ2's second set -v: scale times
  // -v, At's operands), IQ3 (kFlip) its 8 magnitudes, the negated values
  // then by a flip of bit 31 (scale times -m is -(scale times m) exactly;
  // a NaN scale keeps its NaN: flip32_ 0, as flip_); Out32 looks a group's
  // 8 values up by one permute: each value's pair (2 p, 2 p + 1) — with
  // the second set's 2 kM added, as Out16 — widened to 32 bits and halved,
  // whose low 3 bits are p (+ kM) (the permute reads no other bits).
  // Otherwise (kV <= 8): Read32 runs Groups into g_ in its TableForm (each
  // value's entry t in its sub-block's table, 8 a 64-bit word) and builds
  // the same tables; Out32 permutes by t.
  static constexpr bool kPairs32 = [] {
    if constexpr (kPairs) {
      return GridPairs<D>::kFloat32;
    } else {
      return false;
    }
  }();
  static constexpr bool kOut32 = kTable && (kPairs32 || Table::kV <= 8);
  HWY_INLINE void Read32(const uint8_t* b) {
    const DF df;
    auto* tables = reinterpret_cast<float*>(tables_);
    const VF v = hn::Load(df, kValues.v);
    if constexpr (kPairs32) {
      __m256 scales[2];
      GridPairs<D>::Read(b, offsets_, signs_, scales);
      for (size_t s = 0; s < kSubBlocks; ++s) {
        const VF scale{
            _mm256_permutevar8x32_ps(scales[s / 8], _mm256_set1_epi32(static_cast<int>(s % 8)))};
        hn::Store(hn::Mul(scale, v), df, tables + 8 * s);
      }
      if constexpr (kFlip) {
        flip32_ = _mm256_set1_ps(std::isnan(_mm256_cvtss_f32(scales[0])) ? 0.0f : -0.0f);
      }
    } else {
      TableForm<GroupSet<kGroups>, Table::kM> form{g_};
      D::Groups(b, form);
      for (size_t s = 0; s < kSubBlocks; ++s) {
        hn::Store(hn::Mul(hn::Set(df, g_.scale[s * kSubElemsU / 8]), v), df, tables + 8 * s);
      }
    }
  }
  // Values e .. e+7 (e a multiple of 8).
  HWY_INLINE VF Out32(size_t e) const {
    const float* table = reinterpret_cast<const float*>(tables_) + e / kSubElemsU * 8;
    if constexpr (kPairs32) {
      const size_t k = e / 8;
      __m128i pairs = GroupPairs(k);
      const __m128i bit = _mm_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128);
      const __m128i set = _mm_cmpeq_epi16(_mm_and_si128(_mm_set1_epi16(signs_[k]), bit), bit);
      if constexpr (!kFlip) {
        pairs = _mm_add_epi8(pairs, _mm_and_si128(set, _mm_set1_epi16(0x0101 * 2 * Table::kM)));
      }
      const __m256i t = _mm256_srli_epi32(_mm256_cvtepu16_epi32(pairs), 1);
      const __m256 r = _mm256_permutevar8x32_ps(_mm256_load_ps(table), t);
      if constexpr (kFlip) {
        return VF{_mm256_xor_ps(
            r, _mm256_and_ps(_mm256_castsi256_ps(_mm256_cvtepi16_epi32(set)), flip32_))};
      }
      return VF{r};
    } else {
      const auto* t8 =
          reinterpret_cast<const __m128i*>(reinterpret_cast<const uint8_t*>(g_.grid) + e);
      return VF{_mm256_permutevar8x32_ps(_mm256_load_ps(table),
                                         _mm256_cvtepu8_epi32(_mm_loadl_epi64(t8)))};
    }
  }

#endif
  HWY_INLINE VF At(size_t e) const {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const VF scale = hn::Set(df, g_.scale[e / 8]);
    const uint8_t* bytes = reinterpret_cast<const uint8_t*>(g_.grid) + e;
    if constexpr (D::kGridValues == GridValues::kSignedBytes) {
#if HWY_TARGET <= HWY_AVX3
      if constexpr (GridGroups<D>::kBytesSigned) {  // Fill negated the bytes
        const hn::Rebind<int8_t, DF> d8;
        const auto q = hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(bytes)));
        return hn::Mul(scale, hn::ConvertTo(df, q));
      }
#endif
      const hn::Rebind<uint8_t, DF> d8;
      const auto q = hn::PromoteTo(di, hn::LoadU(d8, bytes));
      const auto negated = hn::RebindMask(di, NegatedLanes(e));
      return hn::Mul(scale, hn::ConvertTo(df, hn::IfThenElse(negated, hn::Neg(q), q)));
    } else if constexpr (D::kGridValues == GridValues::kNegatedScale) {
      const VF p = hn::Mul(scale, hn::Set(df, 1.0f));
      return hn::IfThenElse(NegatedLanes(e), hn::Neg(p), p);
    } else {
      const hn::Rebind<int8_t, DF> d8;
      const auto lane_group = hn::IndicesFromVec(df, hn::ShiftRight<3>(hn::Iota(di, 0)));
      const VF delta = hn::TableLookupLanes(hn::LoadU(df, g_.delta + e / 8), lane_group);
      const VF q = hn::ConvertTo(
          df, hn::PromoteTo(di, hn::LoadU(d8, reinterpret_cast<const int8_t*>(bytes))));
      return hn::Mul(scale, hn::Add(q, delta));
    }
  }

 private:
  // kBlend16 (Q1_0): D::Groups' sign bytes into g_ and the block's one
  // scale returned — through a sink, not g_: Groups' vector store of the
  // groups' scales read back at once waits for the store buffer, which a
  // streamed output keeps full (44 % of Q1_0's samples at two threads).
  HWY_INLINE float ReadBlend(const uint8_t* b) {
    SignsAndScale sink{g_.signs, 0.0f};
    D::Groups(b, sink);
    return sink.scale;
  }
  // The lanes of values e .. e+N-1 whose sign bit is set.
  HWY_INLINE hn::Mask<DF> NegatedLanes(size_t e) const {
    const DF df;
    if constexpr (hn::MaxLanes(DF()) % 8 == 0) {
      return hn::LoadMaskBits(df, g_.signs + e / 8);
    } else {
      const hn::RebindToUnsigned<DF> du;
      alignas(64) static constexpr uint32_t kLaneBit[8] = {1u << 0, 1u << 1, 1u << 2, 1u << 3,
                                                           1u << 4, 1u << 5, 1u << 6, 1u << 7};
      const uint32_t bits = uint32_t{g_.signs[e / 8]} >> (e % 8);  // bit i: lane i
      return hn::RebindMask(df, hn::TestBit(hn::Set(du, bits), hn::Load(du, kLaneBit)));
    }
  }

 private:
  GroupSet<kGroups> g_;
#if HWY_TARGET <= HWY_AVX3
  __m512i pos_, neg_;  // kBlend16
#elif HWY_TARGET == HWY_AVX2
  static constexpr size_t kSubBlocks = static_cast<size_t>(D::kBlockElems / D::kSubElems);
  static constexpr size_t kSubElemsU = static_cast<size_t>(D::kSubElems);
  static_assert(!kTable || Table::kV > 8 || kSubBlocks % 2 == 0, "sub-blocks in pairs");
  // The kV values (lanes beyond: 0, never looked up).
  struct Values {
    float v[16];
    constexpr Values() : v() {
      for (int t = 0; t < Table::kV; ++t) v[t] = Table::Value(t);
    }
  };
  alignas(32) static constexpr Values kValues{};
  // kPairs without kFlip (IQ2, IQ1): sub-block s's table (scale s in lane
  // s % 8 of scales[s / 8]; scales[1] unset for 8 sub-blocks) into
  // tables_ + 16 s: entry i the kOut bits of scale times GridTable's value
  // i (At's multiply, rounded once). IQ2: entries 3 + i as entries i with
  // bit 15 flipped — scale times -v rounded, as rounding is symmetric —
  // except for a NaN scale, whose products keep its NaN whatever the
  // value's sign: then (every sub-block's scale is d times a positive
  // finite factor: all NaN or none) the same bits; IQ1: 6 products (v -
  // 1/8 is no negation). Entries 6, 7 zero (never looked up). The
  // products are one vector a value over 16 sub-blocks, their words
  // transposed to one table a sub-block: a third of the multiplies and
  // roundings of a table of 8 products per sub-block.
  template <OutType kOut>
  HWY_INLINE void PairTables(__m256* scales) {
    static_assert(Table::kM == 3 && kSubBlocks <= 16, "IQ2 / IQ1: 3 values, 8 or 16 sub-blocks");
    const DF df;
    if constexpr (kSubBlocks == 8) scales[1] = scales[0];  // (lanes 8-15 unused)
    __m256i r[8];  // row i: entry i of sub-block s in 16-bit lane s
    // kSignedBytes: 3 products, their negations by the flip; IQ1 (the
    // second set v - 1/8, not a negation): 6 products.
    constexpr int kProducts = Table::kSigned ? 3 : 6;
    for (int i = 0; i < kProducts; ++i) {
      // The value made opaque to the compiler: with it a known constant
      // GCC may compute s * -c as -(s * c) (IEEE leaves a NaN product's
      // sign open), flipping a NaN scale's sign where the reference's
      // multiply keeps it (the NaN-d kernel test failed that way for IQ1).
      __m256 c = _mm256_set1_ps(Table::Value(i));
      asm("" : "+x"(c));
      const VF v{c};
      r[i] = OutBitsPair<kOut>(df, hn::Mul(VF{scales[0]}, v), hn::Mul(VF{scales[1]}, v)).raw;
    }
    if constexpr (Table::kSigned) {
      const __m256i flip = pairs_internal::SignFlip(scales[0]);
      for (int i = 0; i < 3; ++i) r[3 + i] = _mm256_xor_si256(r[i], flip);
    }
    // 8 x 8 words transposed in each 128-bit half (rows 6, 7 zero): t[j]
    // holds sub-block j's table in its low half, sub-block 8 + j's in its
    // high half.
    const __m256i zero = _mm256_setzero_si256();
    const __m256i a0 = _mm256_unpacklo_epi16(r[0], r[1]), a1 = _mm256_unpackhi_epi16(r[0], r[1]);
    const __m256i a2 = _mm256_unpacklo_epi16(r[2], r[3]), a3 = _mm256_unpackhi_epi16(r[2], r[3]);
    const __m256i a4 = _mm256_unpacklo_epi16(r[4], r[5]), a5 = _mm256_unpackhi_epi16(r[4], r[5]);
    const __m256i b[8] = {_mm256_unpacklo_epi32(a0, a2),   _mm256_unpackhi_epi32(a0, a2),
                          _mm256_unpacklo_epi32(a1, a3),   _mm256_unpackhi_epi32(a1, a3),
                          _mm256_unpacklo_epi32(a4, zero), _mm256_unpackhi_epi32(a4, zero),
                          _mm256_unpacklo_epi32(a5, zero), _mm256_unpackhi_epi32(a5, zero)};
    auto* const t = reinterpret_cast<__m128i*>(tables_);
    for (int j = 0; j < 8; ++j) {
      const __m256i q = j % 2 == 0 ? _mm256_unpacklo_epi64(b[j / 2], b[4 + j / 2])
                                   : _mm256_unpackhi_epi64(b[j / 2], b[4 + j / 2]);
      _mm_store_si128(t + j, _mm256_castsi256_si128(q));
      if constexpr (kSubBlocks == 16) _mm_store_si128(t + 8 + j, _mm256_extracti128_si256(q, 1));
    }
  }
  // kPairs: values e .. e+15's pair-grid positions (groups k = e / 8, k +
  // 1: GroupPairs) and their sign bits as 16-bit lane masks.
  HWY_INLINE void Pairs16(size_t e, __m256i* pairs, __m256i* set) const {
    const size_t k = e / 8;
    *pairs = _mm256_inserti128_si256(_mm256_castsi128_si256(GroupPairs(k)), GroupPairs(k + 1), 1);
    uint16_t two;  // the two groups' sign bytes: bit i for value e + i
    std::memcpy(&two, signs_ + k, 2);
    const __m256i bit = _mm256_setr_epi16(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096,
                                          8192, 16384, -32768);
    *set = _mm256_cmpeq_epi16(_mm256_and_si256(_mm256_set1_epi16(static_cast<int16_t>(two)), bit),
                              bit);
  }
  // kPairs: group k's pair-grid positions (2 p, 2 p + 1 for each of its 8
  // values): one 16-byte entry, or two 8-byte ones (IQ3).
  HWY_INLINE __m128i GroupPairs(size_t k) const {
    const uint8_t* const grid = GridPairs<D>::Grid();
    if constexpr (GridPairs<D>::kEntryValues == 8) {
      return _mm_load_si128(reinterpret_cast<const __m128i*>(grid + offsets_[k]));
    } else {
      return _mm_castpd_si128(_mm_loadh_pd(
          _mm_castsi128_pd(
              _mm_loadl_epi64(reinterpret_cast<const __m128i*>(grid + offsets_[2 * k]))),
          reinterpret_cast<const double*>(grid + offsets_[2 * k + 1])));
    }
  }
  alignas(32) uint8_t tables_[kTable ? kSubBlocks * 32 : 1];  // kTable: 32 bytes a sub-block
  __m256i pos_, neg_;                                         // kBlend16
  // kPairs (Read16): each grid entry's pair-grid offset, each group's
  // sign byte; kFlip: the block's sign flip (bit 15, or 0 for a NaN d).
  static constexpr size_t kEntries = [] {
    if constexpr (kPairs) {
      return static_cast<size_t>(D::kBlockElems / GridPairs<D>::kEntryValues);
    } else {
      return size_t{1};
    }
  }();
  alignas(32) uint16_t offsets_[kEntries];
  alignas(32) uint8_t signs_[kPairs ? kGroups : 2];
  __m256i flip_;
  __m256 flip32_;  // kFlip, float32: bit 31, or 0 for a NaN d
#endif
};

// TQ1_0: base-3 digit n of byte x is ((uint8(x * 3^n)) * 3) >> 8, the value
// float(digit - 1) * d (GgufTQ1_0::Decode). Values 0-159: qs[e % 32] digit
// e / 32; 160-239: qs[32 + (e - 160) % 16] digit (e - 160) / 16; 240-255:
// qh[(e - 240) % 4] digit (e - 240) / 4 (the last 16 bytes and powers are
// laid out per element here).
template <class D>
class BlockVectors<D, std::enable_if_t<std::is_same_v<D, GgufTQ1_0>>> {
  static_assert(hn::MaxLanes(DF()) <= 16, "a vector within one digit run");
  // The powers 3^n of the digits, and those of values 240-255 (digit
  // (e - 240) / 4 of qh[(e - 240) % 4]) per element.
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  alignas(16) static constexpr uint8_t kTailPow[16] = {1, 1, 1, 1, 3,  3,  3,  3,
                                                       9, 9, 9, 9, 27, 27, 27, 27};

 public:
  HWY_INLINE void Read(const uint8_t* b) {
    b_ = b;
    d_ = layout_internal::Half(b, offsetof(GgufTQ1_0::Block, d));
    for (size_t j = 0; j < 16; ++j) tail_[j] = b[offsetof(GgufTQ1_0::Block, qh) + j % 4];
  }
#if HWY_TARGET <= HWY_AVX3
  // Read, then the table: lane t the kOut bits of float(t - 1) * d (At's
  // operations; digits are 0-2), and the bytes of values 160-255 laid out
  // per 32 (mid_: qs[32..47] twice, then the tail's 16).
  static constexpr bool kOut16 = true;
  template <OutType kOut>
  HWY_INLINE void Read16(const uint8_t* b, bool bf16_hw) {
    Read(b);
    const DF df;
    const hn::RebindToSigned<DF> di;
    const VF v =
        hn::Mul(hn::ConvertTo(df, hn::Sub(hn::Iota(di, 0), hn::Set(di, 1))), hn::Set(df, d_));
    table_ = HalfTable16(OutBits16<kOut, true>(v, bf16_hw));
    const uint8_t* qs = b + offsetof(GgufTQ1_0::Block, qs);
    std::memcpy(mid_, qs + 32, 16);
    std::memcpy(mid_ + 16, qs + 32, 16);
    std::memcpy(mid_ + 32, tail_, 16);
  }
  // 32 digits in 16-bit lanes (x * 3^n, the low byte, times 3, >> 8), each
  // the index of its value in table_.
  template <OutType kOut>
  HWY_INLINE __m512i Out16(size_t e, bool /*bf16_hw*/) const {
    // The powers of values e .. e+31 (unit e / 32).
    struct Pow16 {
      uint16_t v[8][32];
      constexpr Pow16() : v() {
        for (size_t j = 0; j < 256; ++j) {
          v[j / 32][j % 32] = j < 160   ? kPow3[j / 32]
                              : j < 240 ? kPow3[(j - 160) / 16]
                                        : kPow3[(j - 240) / 4];
        }
      }
    };
    alignas(64) static constexpr Pow16 kPow{};
    const hn::Repartition<uint16_t, DF> d16;  // 2N lanes
    const hn::Rebind<uint8_t, decltype(d16)> d8;
    const uint8_t* x = e < 160 ? b_ + offsetof(GgufTQ1_0::Block, qs) : e < 224 ? mid_ : mid_ + 16;
    const auto q =
        hn::And(hn::Mul(hn::PromoteTo(d16, hn::LoadU(d8, x)), hn::Load(d16, kPow.v[e / 32])),
                hn::Set(d16, 0xFF));
    const auto digit = hn::ShiftRight<8>(hn::Mul(q, hn::Set(d16, 3)));
    return PermuteHalves(decltype(digit){table_}, digit).raw;
  }
#elif HWY_TARGET == HWY_AVX2
  // AVX2: the same per 16 values and one byte shuffle: table_ holds the
  // kOut bits of float(t - 1) * d (At's operations) at bytes 2t, 2t + 1 of
  // both 128-bit halves, looked up by digit (LookupWords8).
  static constexpr bool kOut16 = true;
  template <OutType kOut>
  HWY_INLINE void Read16(const uint8_t* b, bool /*bf16_hw*/) {
    Read(b);
    const DF df;
    const hn::RebindToSigned<DF> di;
    const VF v =
        hn::Mul(hn::ConvertTo(df, hn::Sub(hn::Iota(di, 0), hn::Set(di, 1))), hn::Set(df, d_));
    table_ = _mm256_broadcastsi128_si256(NarrowBits<kOut>(df, v).raw);
  }
  // Values e .. e+15 (e a multiple of 16: within one digit run, as At's).
  template <OutType kOut>
  HWY_INLINE __m256i Out16(size_t e, bool /*bf16_hw*/) const {
    const uint8_t* qs = b_ + offsetof(GgufTQ1_0::Block, qs);
    const uint8_t* x = e < 160 ? qs + e % 32 : e < 240 ? qs + 32 : tail_;
    const __m256i pow =
        e < 160 ? _mm256_set1_epi16(kPow3[e / 32])
        : e < 240
            ? _mm256_set1_epi16(kPow3[(e - 160) / 16])
            : _mm256_cvtepu8_epi16(_mm_load_si128(reinterpret_cast<const __m128i*>(kTailPow)));
    // x * 3^n < 2^15, its low byte times 3 < 2^10 (At's operations).
    const __m256i q = _mm256_and_si256(
        _mm256_mullo_epi16(
            _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x))), pow),
        _mm256_set1_epi16(0xFF));
    const __m256i digit = _mm256_srli_epi16(_mm256_mullo_epi16(q, _mm256_set1_epi16(3)), 8);
    return LookupWords8(table_, digit);
  }
#endif
  HWY_INLINE VF At(size_t e) const {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<uint8_t, DF> d8;
    const hn::Rebind<uint16_t, DF> d16;  // x * 3^n < 2^15, (q * 3) < 2^10
    const uint8_t* qs = b_ + offsetof(GgufTQ1_0::Block, qs);
    hn::Vec<decltype(d16)> x, pow;
    if (e < 160) {
      x = hn::PromoteTo(d16, hn::LoadU(d8, qs + e % 32));
      pow = hn::Set(d16, kPow3[e / 32]);
    } else if (e < 240) {
      x = hn::PromoteTo(d16, hn::LoadU(d8, qs + 32 + (e - 160) % 16));
      pow = hn::Set(d16, kPow3[(e - 160) / 16]);
    } else {
      x = hn::PromoteTo(d16, hn::LoadU(d8, tail_ + (e - 240)));
      pow = hn::PromoteTo(d16, hn::LoadU(d8, kTailPow + (e - 240)));
    }
    const auto q = hn::And(hn::Mul(x, pow), hn::Set(d16, 0xFF));
    const auto digit = hn::PromoteTo(di, hn::ShiftRight<8>(hn::Mul(q, hn::Set(d16, 3))));
    return hn::Mul(hn::ConvertTo(df, hn::Sub(digit, hn::Set(di, 1))), hn::Set(df, d_));
  }

 private:
  const uint8_t* b_ = nullptr;
  float d_ = 0.0f;
  alignas(16) uint8_t tail_[16];
#if HWY_TARGET <= HWY_AVX3
  __m512i table_;
  alignas(16) uint8_t mid_[48];
#elif HWY_TARGET == HWY_AVX2
  __m256i table_;
#endif
};

// NVFP4: sub-block s (16 values) is kValues[code] * d[s]; its 8 bytes hold
// codes 0-7 (low nibbles) and 8-15 (high). The constructor lays the 64
// codes' int8 values out in element order (128-bit byte shuffles).
template <class D>
class BlockVectors<D, std::enable_if_t<std::is_same_v<D, GgufNVFP4>>> {
  static_assert(hn::MaxLanes(DF()) <= 16, "a vector within one sub-block");

 public:
  HWY_INLINE void Read(const uint8_t* b) {
    alignas(16) static constexpr int8_t kValues[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                                       0, -1, -2, -3, -4, -6, -8, -12};
    const hn::Full128<uint8_t> d8;
    const hn::Full128<uint64_t> d64;
    const auto table = hn::LoadU(d8, reinterpret_cast<const uint8_t*>(kValues));
    for (size_t s = 0; s < 4; s += 2) {
      const auto bytes = hn::LoadU(d8, b + offsetof(GgufNVFP4::Block, qs) + 8 * s);
      const auto lo = hn::BitCast(d64, hn::And(bytes, hn::Set(d8, 0xF)));
      const auto hi = hn::BitCast(d64, hn::ShiftRight<4>(bytes));
      hn::StoreU(hn::TableLookupBytes(table, hn::BitCast(d8, hn::InterleaveLower(d64, lo, hi))), d8,
                 reinterpret_cast<uint8_t*>(values_ + 16 * s));
      hn::StoreU(hn::TableLookupBytes(table, hn::BitCast(d8, hn::InterleaveUpper(d64, lo, hi))), d8,
                 reinterpret_cast<uint8_t*>(values_ + 16 * s + 16));
    }
    for (size_t s = 0; s < 4; ++s) {
      d_[s] = layout_internal::GgmlUe4m3Half(b[offsetof(GgufNVFP4::Block, d) + s]);
    }
  }
#if HWY_TARGET <= HWY_AVX3
  // 16-bit outputs from one table per block: lane 8 s + m the kOut bits of
  // kMagnitude[m] * d[s] (At's operation for the codes m < 8). Code c >= 8
  // is the negation of code c - 8 — At's float(-x) * d is -(x * d) exactly
  // and rounding to float16 / bfloat16 is symmetric — except that code 8
  // is +0 (0 * d, d >= 0), as code 0: so value c is table lane
  // 8 s + (c & 7) with its sign bit flipped where c >= 9.
  static constexpr bool kOut16 = true;
  template <OutType kOut>
  HWY_INLINE void Read16(const uint8_t* b, bool bf16_hw) {
    alignas(64) static constexpr float kMagnitude[16] = {0, 1, 2, 3, 4, 6, 8, 12,
                                                         0, 1, 2, 3, 4, 6, 8, 12};
    qs_ = b + offsetof(GgufNVFP4::Block, qs);
    const __m512 m = _mm512_load_ps(kMagnitude);
    __m512 v[2];
    for (size_t h = 0; h < 2; ++h) {
      const float d0 = layout_internal::GgmlUe4m3Half(b[offsetof(GgufNVFP4::Block, d) + 2 * h]);
      const float d1 = layout_internal::GgmlUe4m3Half(b[offsetof(GgufNVFP4::Block, d) + 2 * h + 1]);
      v[h] = _mm512_mul_ps(m, _mm512_mask_mov_ps(_mm512_set1_ps(d0), 0xFF00, _mm512_set1_ps(d1)));
    }
    table_ = OutBits32<kOut, true>(v[0], v[1], bf16_hw);
  }
  // Values e .. e+31: sub-blocks 2 u, 2 u + 1 (u = e / 32), their codes the
  // 16 bytes qs[16 u ..] — in 16-bit lanes bytes 0-7 (low nibbles), 0-7
  // (high), 8-15 (low), 8-15 (high).
  template <OutType kOut>
  HWY_INLINE __m512i Out16(size_t e, bool /*bf16_hw*/) const {
    alignas(64) static constexpr struct Offsets {
      uint16_t v[2][32];
      constexpr Offsets() : v() {
        for (int u = 0; u < 2; ++u) {
          for (int i = 0; i < 32; ++i) v[u][i] = static_cast<uint16_t>(16 * u + 8 * (i / 16));
        }
      }
    } kOffsets{};
    uint64_t lo, hi;
    std::memcpy(&lo, qs_ + e / 2, 8);
    std::memcpy(&hi, qs_ + e / 2 + 8, 8);
    const __m256i bytes = _mm256_blend_epi32(_mm256_set1_epi64x(static_cast<int64_t>(lo)),
                                             _mm256_set1_epi64x(static_cast<int64_t>(hi)), 0xF0);
    // Each lane's nibble in bits 12-15 (low nibbles shifted by 12, high
    // ones by 8; bits 8-11 of the latter hold the low nibble).
    alignas(64) static constexpr struct Shifts {
      uint16_t v[32];
      constexpr Shifts() : v() {
        for (int i = 0; i < 32; ++i) v[i] = i % 16 < 8 ? 12 : 8;
      }
    } kShifts{};
    const __m512i x = _mm512_sllv_epi16(_mm512_cvtepu8_epi16(bytes), _mm512_load_si512(kShifts.v));
    // Table lane (c & 7) | offset; the sign flipped where c >= 9: bit 15
    // of x - 0x1000 saturated (c = 0: 0; c >= 1: (c - 1) << 12 | low bits).
    const __m512i idx = _mm512_ternarylogic_epi32(_mm512_srli_epi16(x, 12), _mm512_set1_epi16(7),
                                                  _mm512_load_si512(kOffsets.v[e / 32]), 0xEA);
    const __m512i flip = _mm512_subs_epu16(x, _mm512_set1_epi16(0x1000));
    // r ^ (flip & 0x8000)
    return _mm512_ternarylogic_epi32(_mm512_permutexvar_epi16(idx, table_), flip,
                                     _mm512_set1_epi16(static_cast<int16_t>(0x8000)), 0x78);
  }
#endif
  HWY_INLINE VF At(size_t e) const {
    const DF df;
    const hn::RebindToSigned<DF> di;
    const hn::Rebind<int8_t, DF> d8;
    const VF q = hn::ConvertTo(df, hn::PromoteTo(di, hn::LoadU(d8, values_ + e)));
    return hn::Mul(q, hn::Set(df, d_[e / 16]));
  }

 private:
  alignas(16) int8_t values_[64];
  float d_[4];
#if HWY_TARGET <= HWY_AVX3
  const uint8_t* qs_ = nullptr;  // Read16's block's codes
  __m512i table_;
#endif
};

// Whether BlockVectors B has the 16-bit output path (Read16 / Out16).
template <class B, class = void>
struct HasOut16 : std::false_type {};
template <class B>
struct HasOut16<B, std::enable_if_t<B::kOut16>> : std::true_type {};
// Whether BlockVectors B has the float32 output path (AVX2: Read32 / Out32).
template <class B, class = void>
struct HasOut32 : std::false_type {};
template <class B>
struct HasOut32<B, std::enable_if_t<B::kOut32>> : std::true_type {};

// Whether every value of decoded layout D is finite (D::kFiniteValues):
// its bfloat16 units round without the NaN case (UnitFacts' kNoNaN).
template <class D, class = void>
struct DecodedFinite : std::false_type {};
template <class D>
struct DecodedFinite<D, std::enable_if_t<D::kFiniteValues>> : std::true_type {};

// No decoded layout's value is a float32 subnormal: every nonzero value is
// at least 2^-27 in magnitude (a float16 scale's smallest subnormal 2^-24
// times at most 1/8; NVFP4's smallest UE4M3 half-scale 2^-10), so bfloat16
// rounding needs no subnormal test.
// kFast: bfloat16 output on a CPU with AVX512_BF16 (CpuHasAvx512Bf16),
// a constant in the loops (DecodedRows).
template <class D, OutType kOut, bool kFast>
void DecodedRowsWith(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                     int64_t ld) {
  constexpr int64_t kB = D::kBlockElems, kOutBytes = OutDesc<kOut>::kBytes;
  const DF df;
  const size_t N = hn::Lanes(df);
  static_assert(kB % 32 == 0, "whole units of 2N lanes per block");
  const int64_t row_blocks = plan.cols() / kB;
  constexpr bool fast = kFast;
  // The units' UnitFacts (StoreOutUnit).
  constexpr UnitFacts kFacts =
      (kFast ? kBf16Hw : kNoFacts) |
      (kOut == OutType::kBF16 && DecodedFinite<D>::value ? kNoNaN : kNoFacts);
#if HWY_TARGET <= HWY_AVX3 || HWY_TARGET == HWY_AVX2
  constexpr bool kOut16 = kOutBytes == 2 && HasOut16<BlockVectors<D>>::value;
#else
  constexpr bool kOut16 = false;
#endif
#if HWY_TARGET == HWY_AVX2
  constexpr bool kOut32 = kOut == OutType::kF32 && HasOut32<BlockVectors<D>>::value;
#else
  constexpr bool kOut32 = false;
#endif
  // Blocks read per batch (about 2048 values).
  constexpr int64_t kBatch = kB >= 2048 ? 1 : 2048 / kB;
  BlockVectors<D> v[kBatch];
  bool streamed = false;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* const row = plan.codes + r * row_blocks * D::kBytes;
    char* const dst = static_cast<char*>(out) + (r - r0) * ld * kOutBytes;  // column c0
    // A block cut by c0 or c1: decoded into y, its wanted part converted.
    auto part = [&](int64_t b, int64_t ca, int64_t cb) HWY_ATTR {
      alignas(64) float y[static_cast<size_t>(kB)];
      v[0].Read(row + b * D::kBytes);
      for (size_t e = 0; e < static_cast<size_t>(kB); e += N) hn::Store(v[0].At(e), df, y + e);
      ConvertFloats(OutType::kF32, y + (ca - b * kB), kOut, dst + (ca - c0) * kOutBytes, cb - ca);
    };
    int64_t b0 = c0 / kB, b1 = c1 / kB;  // whole blocks [b0, b1) after the cut ones
    if (c0 % kB != 0) {
      part(b0, c0, std::min(c1, (b0 + 1) * kB));
      ++b0;
    }
    if (b0 < b1) {
      char* body = dst + (b0 * kB - c0) * kOutBytes;
      const bool stream =
          plan.nontemporal && reinterpret_cast<uintptr_t>(body) % (N * sizeof(float)) == 0;
      streamed |= stream;
      for (int64_t b = b0; b < b1; b += kBatch) {
        const int64_t nb = std::min(kBatch, b1 - b);
        for (int64_t i = 0; i < nb; ++i) {
          if constexpr (kOut16) {
            v[i].template Read16<kOut>(row + (b + i) * D::kBytes, fast);
          } else if constexpr (kOut32) {
            v[i].Read32(row + (b + i) * D::kBytes);
          } else {
            v[i].Read(row + (b + i) * D::kBytes);
          }
        }
        for (int64_t i = 0; i < nb; ++i, body += kB * kOutBytes) {
          // The codes kFetchAheadBytes on, one block's lines per block
          // stored (one thread from memory: geometric mean 1.04-1.08x
          // over the ten types; IQ2_XXS 1.13-1.18, NVFP4 1.07-1.12).
          FetchAhead(row + (b + i) * D::kBytes, D::kBytes);
#if HWY_TARGET == HWY_AVX2  // (the 16 steps unrolled: 1.03-1.26x in cache for IQ2)
#pragma GCC unroll 16
#endif
          for (size_t e = 0; e < static_cast<size_t>(kB); e += 2 * N) {
            char* const at = body + static_cast<int64_t>(e) * kOutBytes;
            if constexpr (kOut16) {
#if HWY_TARGET <= HWY_AVX3
              Store64(v[i].template Out16<kOut>(e, fast), at, stream);
#elif HWY_TARGET == HWY_AVX2
              const __m256i bits = v[i].template Out16<kOut>(e, fast);
              if (stream) {
                _mm256_stream_si256(reinterpret_cast<__m256i*>(at), bits);
              } else {
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), bits);
              }
#endif
            } else if constexpr (kOut32) {
              StoreOutUnit<kOut>(df, v[i].Out32(e), v[i].Out32(e + N), at, stream, kFacts);
            } else {
              StoreOutUnit<kOut>(df, v[i].At(e), v[i].At(e + N), at, stream, kFacts);
            }
          }
        }
      }
    }
    if (c1 % kB != 0 && c1 / kB >= b0) part(c1 / kB, std::max(c0, c1 / kB * kB), c1);
  }
  if (streamed) hwy::FlushStream();
}

template <class D, OutType kOut>
void DecodedRows(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                 int64_t ld) {
#if HWY_TARGET <= HWY_AVX3
  if constexpr (kHasGridLoads<D>) {  // (the same values, per CPU the faster)
    if (FetchByLoads(plan)) return DecodedRows<GridLoads<D>, kOut>(plan, r0, r1, c0, c1, out, ld);
  }
  if constexpr (kOut == OutType::kBF16) {  // (no kFast copy for the other types)
    if (CpuHasAvx512Bf16()) return DecodedRowsWith<D, kOut, true>(plan, r0, r1, c0, c1, out, ld);
  }
#endif
  DecodedRowsWith<D, kOut, false>(plan, r0, r1, c0, c1, out, ld);
}

template <class D>
void DecodedLayout(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                   int64_t ld) {
  switch (plan.out) {
#define NIBBLE_CASE(T) \
  case OutType::k##T:  \
    return DecodedRows<D, OutType::k##T>(plan, r0, r1, c0, c1, out, ld);
    NIBBLE_OUT_TYPES(NIBBLE_CASE)
#undef NIBBLE_CASE
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

void DequantizeDecodedFamilySimd(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                                 void* out, int64_t ld) {
#if HWY_TARGET != HWY_SCALAR
  switch (plan.layout) {
#define NIBBLE_DECODED_CASE(D) \
  case Layout::k##D:           \
    return DecodedLayout<D>(plan, r0, r1, c0, c1, out, ld);
    NIBBLE_DECODED_LAYOUTS(NIBBLE_DECODED_CASE)
#undef NIBBLE_DECODED_CASE
    default:
      break;  // (DequantizeTile sends only decoded layouts here)
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
HWY_EXPORT(DequantizeDecodedFamilySimd);
void DequantizeDecodedFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld) {
  HWY_DYNAMIC_DISPATCH(DequantizeDecodedFamilySimd)(plan, r0, r1, c0, c1, out, ld);
}
}  // namespace kernels_internal
}  // namespace nibble
#endif  // HWY_ONCE
