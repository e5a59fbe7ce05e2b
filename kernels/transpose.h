// Block transpose for weights produced row by row but stored column-major
// (MatMulNBits [N, K] -> MatMul [K, N]). Data movement only.
#ifndef NIBBLE_KERNELS_TRANSPOSE_H_
#define NIBBLE_KERNELS_TRANSPOSE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace nibble {

// Writes the nr x cols block `src` (row-major, elements of `elem` bytes,
// nr * elem <= 64) transposed into `dst`: element (j, c) goes to
// dst[(c * rows + r0 + j) * elem]. Each column of the block is one run of
// nr * elem contiguous bytes. Whole aligned 64-byte lines of 2- or 4-byte
// elements, with cols a multiple of 8 or 4: transposed in SSE2 registers
// (TransposeLines); otherwise gathered element by element, a whole aligned
// line written with a non-temporal store. Call StreamFence() before the
// data is read.
#if defined(__SSE2__)
namespace transpose_internal {

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

// A whole 64-byte line per column, `kLanes` columns at a time: the four
// 16-byte pieces of kLanes rows each are transposed in registers, then
// each column's line is written by four consecutive stores. Plain stores:
// for this scattered pattern they measured 1.5x faster than non-temporal
// ones (and writing the pieces of several lines in turn, 3x slower). Needs
// nr * elem == 64, cols % kLanes == 0 and dst lines 64-byte aligned
// (checked by the caller).
template <size_t kElem>
inline void TransposeLines(const uint8_t* src, int64_t cols, uint8_t* dst, int64_t rows,
                           int64_t r0) {
  constexpr size_t kLanes = 16 / kElem;  // elements per piece
  constexpr size_t kPieces = 4;          // pieces per line
  const size_t src_row = static_cast<size_t>(cols) * kElem;
  const size_t dst_col = static_cast<size_t>(rows) * kElem;
  for (size_t c = 0; c < static_cast<size_t>(cols); c += kLanes) {
    __m128i v[kPieces][kLanes];
    for (size_t p = 0; p < kPieces; ++p) {
      for (size_t i = 0; i < kLanes; ++i) {
        v[p][i] = _mm_loadu_si128(
            reinterpret_cast<const __m128i*>(src + (p * kLanes + i) * src_row + c * kElem));
      }
      if (kElem == 2) {
        Transpose8x16(v[p]);
      } else {
        Transpose4x32(v[p]);
      }
    }
    for (size_t i = 0; i < kLanes; ++i) {
      auto* d =
          reinterpret_cast<__m128i*>(dst + (c + i) * dst_col + static_cast<size_t>(r0) * kElem);
      for (size_t p = 0; p < kPieces; ++p) _mm_store_si128(d + p, v[p][i]);
    }
  }
}

}  // namespace transpose_internal
#endif

inline void TransposeBlockToColumns(const uint8_t* src, int64_t nr, int64_t cols, size_t elem,
                                    uint8_t* dst, int64_t rows, int64_t r0) {
#if defined(__SSE2__)
  // Whole lines, every column aligned: the register transpose.
  const size_t lanes = 16 / elem;
  if ((elem == 2 || elem == 4) && static_cast<size_t>(nr) * elem == 64 &&
      static_cast<size_t>(cols) % lanes == 0 &&
      reinterpret_cast<uintptr_t>(dst + static_cast<size_t>(r0) * elem) % 64 == 0 &&
      (static_cast<size_t>(rows) * elem) % 64 == 0) {
    if (elem == 2) {
      transpose_internal::TransposeLines<2>(src, cols, dst, rows, r0);
    } else {
      transpose_internal::TransposeLines<4>(src, cols, dst, rows, r0);
    }
    return;
  }
#endif
  alignas(64) uint8_t run[64];
  const size_t run_bytes = static_cast<size_t>(nr) * elem;
  for (int64_t c = 0; c < cols; ++c) {
    const uint8_t* s = src + static_cast<size_t>(c) * elem;
    if (elem == 4) {
      for (int64_t j = 0; j < nr; ++j)
        std::memcpy(run + 4 * j, s + static_cast<size_t>(j * cols) * 4, 4);
    } else {
      for (int64_t j = 0; j < nr; ++j)
        std::memcpy(run + 2 * j, s + static_cast<size_t>(j * cols) * 2, 2);
    }
    uint8_t* d = dst + static_cast<size_t>(c * rows + r0) * elem;
#if defined(__SSE2__)
    if (run_bytes == 64 && reinterpret_cast<uintptr_t>(d) % 64 == 0) {
      for (int k = 0; k < 4; ++k) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16 * k),
                         _mm_load_si128(reinterpret_cast<const __m128i*>(run + 16 * k)));
      }
      continue;
    }
#endif
    std::memcpy(d, run, run_bytes);
  }
}

// Orders earlier non-temporal stores before later loads/stores.
inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_TRANSPOSE_H_
