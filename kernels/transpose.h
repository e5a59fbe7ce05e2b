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
// nr * elem contiguous bytes; a run that is a whole aligned 64-byte line is
// written with a non-temporal store (no read-for-ownership of lines that
// are overwritten entirely). Call StreamFence() before the data is read.
inline void TransposeBlockToColumns(const uint8_t* src, int64_t nr, int64_t cols, size_t elem,
                                    uint8_t* dst, int64_t rows, int64_t r0) {
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
