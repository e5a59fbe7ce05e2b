// Tile transpose for weights produced row by row but written transposed
// (MatMulNBits [N, K] -> MatMul [K, N], gpt-oss experts [R, K] -> [K, R]).
// Data movement only.
#ifndef NIBBLE_KERNELS_TRANSPOSE_H_
#define NIBBLE_KERNELS_TRANSPOSE_H_

#include <cstddef>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace nibble {

// Writes the nr x nc tile `src` (row-major, nc elements of `elem` bytes
// per row, src_ld >= nc * elem bytes between its rows) transposed into
// `dst`: element (j, c) goes to
// dst[c * dst_ld + j * elem], so each column of the tile becomes one
// contiguous run of nr * elem bytes of an output row (dst_ld bytes
// between output rows). Output rows are written a few at a time from
// their first byte to their last: sequential streams, not one line in
// each of nc rows per step (which costs a TLB miss and a read for
// ownership per line on a large output). 2- and 4-byte elements are
// transposed in registers (AVX-512: 32 x 32 / 16 x 16 blocks, a whole
// 64-byte line of an output row per store; other x86 targets: 128-bit
// registers) and, with `stream`, written with non-temporal stores where
// every output row starts on a 64-byte line (for an output far larger
// than the caches); the rest element by element. Call StreamFence()
// before the data is read. Defined in kernels/transpose.cc (dispatched).
void TransposeTile(const uint8_t* src, size_t src_ld, int64_t nr, int64_t nc, size_t elem,
                   uint8_t* dst, size_t dst_ld, bool stream);

// Orders earlier non-temporal stores before later loads/stores.
inline void StreamFence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_TRANSPOSE_H_
