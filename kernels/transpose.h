// Tile transpose for weights produced row by row but written transposed
// (MatMulNBits [N, K] -> MatMul [K, N], gpt-oss experts [R, K] -> [K, R]).
// Data movement only.
#ifndef NIBBLE_KERNELS_TRANSPOSE_H_
#define NIBBLE_KERNELS_TRANSPOSE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace nibble {

// Writes the nr x nc tile `src` (row-major, nc elements of `elem` bytes
// per row) transposed into `dst`: element (j, c) goes to
// dst[c * dst_ld + j * elem], so each column of the tile becomes one
// contiguous run of nr * elem bytes of an output row (dst_ld bytes
// between output rows). Output rows are written a few at a time from
// their first byte to their last: sequential streams, not one line in
// each of nc rows per step (which costs a TLB miss and a read for
// ownership per line on a large output). 2- and 4-byte elements are
// transposed in registers (AVX-512: 32 x 32 / 16 x 16 blocks, a whole
// 64-byte line of an output row per store; else SSE2) and written with
// non-temporal stores where every output row starts on a 64-byte line;
// the rest element by element. Call StreamFence() before the data is
// read. Defined in kernels/transpose.cc (dispatched).
void TransposeTile(const uint8_t* src, int64_t nr, int64_t nc, size_t elem, uint8_t* dst,
                   size_t dst_ld);

namespace transpose_internal {
#if defined(__SSE2__)
// Transposes the 8 x 8 16-bit elements of rows a[0..7] in place (a[k]
// becomes column k).
inline void Transpose8x16(__m128i* a) {
  const __m128i b0 = _mm_unpacklo_epi16(a[0], a[1]), b1 = _mm_unpackhi_epi16(a[0], a[1]);
  const __m128i b2 = _mm_unpacklo_epi16(a[2], a[3]), b3 = _mm_unpackhi_epi16(a[2], a[3]);
  const __m128i b4 = _mm_unpacklo_epi16(a[4], a[5]), b5 = _mm_unpackhi_epi16(a[4], a[5]);
  const __m128i b6 = _mm_unpacklo_epi16(a[6], a[7]), b7 = _mm_unpackhi_epi16(a[6], a[7]);
  const __m128i c0 = _mm_unpacklo_epi32(b0, b2), c1 = _mm_unpackhi_epi32(b0, b2);
  const __m128i c2 = _mm_unpacklo_epi32(b1, b3), c3 = _mm_unpackhi_epi32(b1, b3);
  const __m128i c4 = _mm_unpacklo_epi32(b4, b6), c5 = _mm_unpackhi_epi32(b4, b6);
  const __m128i c6 = _mm_unpacklo_epi32(b5, b7), c7 = _mm_unpackhi_epi32(b5, b7);
  a[0] = _mm_unpacklo_epi64(c0, c4);
  a[1] = _mm_unpackhi_epi64(c0, c4);
  a[2] = _mm_unpacklo_epi64(c1, c5);
  a[3] = _mm_unpackhi_epi64(c1, c5);
  a[4] = _mm_unpacklo_epi64(c2, c6);
  a[5] = _mm_unpackhi_epi64(c2, c6);
  a[6] = _mm_unpacklo_epi64(c3, c7);
  a[7] = _mm_unpackhi_epi64(c3, c7);
}

// Transposes the 4 x 4 32-bit elements of rows a[0..3] in place.
inline void Transpose4x32(__m128i* a) {
  const __m128i t0 = _mm_unpacklo_epi32(a[0], a[1]), t1 = _mm_unpackhi_epi32(a[0], a[1]);
  const __m128i t2 = _mm_unpacklo_epi32(a[2], a[3]), t3 = _mm_unpackhi_epi32(a[2], a[3]);
  a[0] = _mm_unpacklo_epi64(t0, t2);
  a[1] = _mm_unpackhi_epi64(t0, t2);
  a[2] = _mm_unpacklo_epi64(t1, t3);
  a[3] = _mm_unpackhi_epi64(t1, t3);
}

// Columns [0, nc / kLanes * kLanes) and rows [0, nr / kLanes * kLanes) of
// TransposeTile, kLanes (16 / kElem) columns at a time: kLanes x kLanes
// blocks transposed in registers, four blocks (64 bytes of each of kLanes
// output rows) at a time, each row's four pieces stored one after
// another; with kStream (every output row's run starts on a 64-byte
// line) by non-temporal stores.
template <size_t kElem, bool kStream>
inline void TransposeLanes(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc, uint8_t* dst,
                           size_t dst_ld) {
  constexpr int64_t kLanes = static_cast<int64_t>(16 / kElem);
  constexpr int64_t kLine = 4 * kLanes;  // rows per 64-byte line
  const auto load = [&](int64_t j, int64_t c) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + static_cast<size_t>(j) * src_ld +
                                                            static_cast<size_t>(c) * kElem));
  };
  const auto transpose = [](__m128i* v) {
    if constexpr (kElem == 2) {
      Transpose8x16(v);
    } else {
      Transpose4x32(v);
    }
  };
  const auto store = [](uint8_t* d, __m128i v) {
    if constexpr (kStream) {
      _mm_stream_si128(reinterpret_cast<__m128i*>(d), v);
    } else {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d), v);
    }
  };
  const int64_t nr_lanes = nr / kLanes * kLanes;
  for (int64_t c = 0; c + kLanes <= nc; c += kLanes) {
    uint8_t* const d = dst + static_cast<size_t>(c) * dst_ld;
    int64_t j = 0;
    for (; j + kLine <= nr; j += kLine) {
      __m128i v[4][static_cast<size_t>(kLanes)];
      for (int64_t p = 0; p < 4; ++p) {
        for (int64_t i = 0; i < kLanes; ++i) v[p][i] = load(j + p * kLanes + i, c);
        transpose(v[p]);
      }
      for (int64_t i = 0; i < kLanes; ++i) {
        uint8_t* const run = d + static_cast<size_t>(i) * dst_ld + static_cast<size_t>(j) * kElem;
        for (int64_t p = 0; p < 4; ++p) store(run + 16 * p, v[p][i]);
      }
    }
    for (; j < nr_lanes; j += kLanes) {
      __m128i v[static_cast<size_t>(kLanes)];
      for (int64_t i = 0; i < kLanes; ++i) v[i] = load(j + i, c);
      transpose(v);
      for (int64_t i = 0; i < kLanes; ++i) {
        store(d + static_cast<size_t>(i) * dst_ld + static_cast<size_t>(j) * kElem, v[i]);
      }
    }
  }
}

#endif  // __SSE2__

// TransposeTile on any CPU: the nr x nc tile at src, src_ld bytes between
// its rows (SSE2 registers where compiled for, else element by element).
inline void TransposePortable(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc,
                              size_t elem, uint8_t* dst, size_t dst_ld) {
  if (nr <= 0 || nc <= 0) return;
  int64_t nr_done = 0, nc_done = 0;  // the register part's rows and columns
#if defined(__SSE2__)
  if (elem == 2 || elem == 4) {
    const int64_t lanes = static_cast<int64_t>(16 / elem);
    const bool stream = reinterpret_cast<uintptr_t>(dst) % 64 == 0 && dst_ld % 64 == 0;
    if (elem == 2) {
      stream ? TransposeLanes<2, true>(src, src_ld, nr, nc, dst, dst_ld)
             : TransposeLanes<2, false>(src, src_ld, nr, nc, dst, dst_ld);
    } else {
      stream ? TransposeLanes<4, true>(src, src_ld, nr, nc, dst, dst_ld)
             : TransposeLanes<4, false>(src, src_ld, nr, nc, dst, dst_ld);
    }
    nr_done = nr / lanes * lanes;
    nc_done = nc / lanes * lanes;
  }
#endif
  // The rest element by element: rows [nr_done, nr) of the register
  // part's columns, then every row of the columns after them.
  for (int64_t c = 0; c < nc; ++c) {
    for (int64_t j = c < nc_done ? nr_done : 0; j < nr; ++j) {
      std::memcpy(dst + static_cast<size_t>(c) * dst_ld + static_cast<size_t>(j) * elem,
                  src + static_cast<size_t>(j) * src_ld + static_cast<size_t>(c) * elem, elem);
    }
  }
}

}  // namespace transpose_internal

// Orders earlier non-temporal stores before later loads/stores.
inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_TRANSPOSE_H_
