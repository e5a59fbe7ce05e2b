// TransposeTile (kernels/transpose.h): whole blocks in AVX-512 registers
// on the targets that have them, the rest (and other targets) by
// transpose_internal::TransposePortable. Data movement only.
#include "kernels/transpose.h"

#include <cstddef>
#include <cstdint>

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/transpose.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#if HWY_TARGET <= HWY_AVX3
#include <immintrin.h>
#endif

HWY_BEFORE_NAMESPACE();
namespace nibble {
namespace HWY_NAMESPACE {

#if HWY_TARGET <= HWY_AVX3
// Transposes, in each 128-bit lane of a[0 .. 16 / kElem), the
// (16 / kElem)-square block of kElem-byte elements held by that lane of
// the vectors (a[i]'s lane q becomes the lane's column i).
template <size_t kElem>
HWY_INLINE void TransposeInLanes(__m512i* a) {
  if constexpr (kElem == 2) {
    const __m512i b0 = _mm512_unpacklo_epi16(a[0], a[1]), b1 = _mm512_unpackhi_epi16(a[0], a[1]);
    const __m512i b2 = _mm512_unpacklo_epi16(a[2], a[3]), b3 = _mm512_unpackhi_epi16(a[2], a[3]);
    const __m512i b4 = _mm512_unpacklo_epi16(a[4], a[5]), b5 = _mm512_unpackhi_epi16(a[4], a[5]);
    const __m512i b6 = _mm512_unpacklo_epi16(a[6], a[7]), b7 = _mm512_unpackhi_epi16(a[6], a[7]);
    const __m512i c0 = _mm512_unpacklo_epi32(b0, b2), c1 = _mm512_unpackhi_epi32(b0, b2);
    const __m512i c2 = _mm512_unpacklo_epi32(b1, b3), c3 = _mm512_unpackhi_epi32(b1, b3);
    const __m512i c4 = _mm512_unpacklo_epi32(b4, b6), c5 = _mm512_unpackhi_epi32(b4, b6);
    const __m512i c6 = _mm512_unpacklo_epi32(b5, b7), c7 = _mm512_unpackhi_epi32(b5, b7);
    a[0] = _mm512_unpacklo_epi64(c0, c4);
    a[1] = _mm512_unpackhi_epi64(c0, c4);
    a[2] = _mm512_unpacklo_epi64(c1, c5);
    a[3] = _mm512_unpackhi_epi64(c1, c5);
    a[4] = _mm512_unpacklo_epi64(c2, c6);
    a[5] = _mm512_unpackhi_epi64(c2, c6);
    a[6] = _mm512_unpacklo_epi64(c3, c7);
    a[7] = _mm512_unpackhi_epi64(c3, c7);
  } else {
    const __m512i t0 = _mm512_unpacklo_epi32(a[0], a[1]), t1 = _mm512_unpackhi_epi32(a[0], a[1]);
    const __m512i t2 = _mm512_unpacklo_epi32(a[2], a[3]), t3 = _mm512_unpackhi_epi32(a[2], a[3]);
    a[0] = _mm512_unpacklo_epi64(t0, t2);
    a[1] = _mm512_unpackhi_epi64(t0, t2);
    a[2] = _mm512_unpacklo_epi64(t1, t3);
    a[3] = _mm512_unpackhi_epi64(t1, t3);
  }
}

// The whole kBlock x kBlock blocks of the tile (kBlock = 64 / kElem: one
// 64-byte line of each of kBlock rows in, one line of each of kBlock
// output rows out). Per block, four groups of kLanes rows are transposed
// inside the 128-bit lanes; then the four vectors holding output row
// (q * kLanes + i)'s pieces in their lane q swap 128-bit lanes (a 4 x 4
// transpose of lanes), giving each output row its whole line. Blocks
// run down the tile (j inner): kBlock output rows are written as
// sequential streams, one whole line each per block; kStream: every
// output line is 64-byte aligned, written by non-temporal stores.
template <size_t kElem, bool kStream>
HWY_NOINLINE void TransposeBlocks(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc,
                                  uint8_t* dst, size_t dst_ld) {
  constexpr int64_t kLanes = static_cast<int64_t>(16 / kElem);
  constexpr int64_t kBlock = 4 * kLanes;
  for (int64_t c = 0; c + kBlock <= nc; c += kBlock) {
    for (int64_t j = 0; j + kBlock <= nr; j += kBlock) {
      __m512i v[4][static_cast<size_t>(kLanes)];
      for (int64_t p = 0; p < 4; ++p) {
        for (int64_t i = 0; i < kLanes; ++i) {
          v[p][i] = _mm512_loadu_si512(src + static_cast<size_t>(j + p * kLanes + i) * src_ld +
                                       static_cast<size_t>(c) * kElem);
        }
        TransposeInLanes<kElem>(v[p]);
      }
      for (int64_t i = 0; i < kLanes; ++i) {
        const __m512i t0 = _mm512_shuffle_i64x2(v[0][i], v[1][i], 0x44);
        const __m512i t1 = _mm512_shuffle_i64x2(v[0][i], v[1][i], 0xEE);
        const __m512i t2 = _mm512_shuffle_i64x2(v[2][i], v[3][i], 0x44);
        const __m512i t3 = _mm512_shuffle_i64x2(v[2][i], v[3][i], 0xEE);
        const __m512i w[4] = {
            _mm512_shuffle_i64x2(t0, t2, 0x88), _mm512_shuffle_i64x2(t0, t2, 0xDD),
            _mm512_shuffle_i64x2(t1, t3, 0x88), _mm512_shuffle_i64x2(t1, t3, 0xDD)};
        for (int64_t q = 0; q < 4; ++q) {
          void* const line = dst + static_cast<size_t>(c + q * kLanes + i) * dst_ld +
                             static_cast<size_t>(j) * kElem;
          if constexpr (kStream) {
            _mm512_stream_si512(static_cast<__m512i*>(line), w[q]);
          } else {
            _mm512_storeu_si512(line, w[q]);
          }
        }
      }
    }
  }
}
#endif  // HWY_TARGET <= HWY_AVX3

void TransposeTileImpl(const uint8_t* src, int64_t nr, int64_t nc, size_t elem, uint8_t* dst,
                       size_t dst_ld) {
  if (nr <= 0 || nc <= 0) return;
  const size_t src_ld = static_cast<size_t>(nc) * elem;
  int64_t nr_done = 0, nc_done = 0;  // the blocks' rows and columns
#if HWY_TARGET <= HWY_AVX3
  if (elem == 2 || elem == 4) {
    const int64_t block = static_cast<int64_t>(64 / elem);
    const bool stream = reinterpret_cast<uintptr_t>(dst) % 64 == 0 && dst_ld % 64 == 0;
    if (elem == 2) {
      stream ? TransposeBlocks<2, true>(src, src_ld, nr, nc, dst, dst_ld)
             : TransposeBlocks<2, false>(src, src_ld, nr, nc, dst, dst_ld);
    } else {
      stream ? TransposeBlocks<4, true>(src, src_ld, nr, nc, dst, dst_ld)
             : TransposeBlocks<4, false>(src, src_ld, nr, nc, dst, dst_ld);
    }
    nr_done = nr / block * block;
    nc_done = nc / block * block;
  }
#endif
  // The rows under the blocks, then the columns right of them (all rows).
  transpose_internal::TransposePortable(src + static_cast<size_t>(nr_done) * src_ld, src_ld,
                                        nr - nr_done, nc_done, elem,
                                        dst + static_cast<size_t>(nr_done) * elem, dst_ld);
  transpose_internal::TransposePortable(src + static_cast<size_t>(nc_done) * elem, src_ld, nr,
                                        nc - nc_done, elem,
                                        dst + static_cast<size_t>(nc_done) * dst_ld, dst_ld);
}

}  // namespace HWY_NAMESPACE
}  // namespace nibble
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace nibble {
HWY_EXPORT(TransposeTileImpl);
void TransposeTile(const uint8_t* src, int64_t nr, int64_t nc, size_t elem, uint8_t* dst,
                   size_t dst_ld) {
  HWY_DYNAMIC_DISPATCH(TransposeTileImpl)(src, nr, nc, elem, dst, dst_ld);
}
}  // namespace nibble
#endif
