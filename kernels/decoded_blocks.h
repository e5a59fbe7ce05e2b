// The kernel of the decoded block layouts (kernels/layouts.h,
// NIBBLE_DECODED_LAYOUTS): each block decoded by its descriptor into float32,
// then rounded to the output type.
#ifndef NIBBLE_KERNELS_DECODED_BLOCKS_H_
#define NIBBLE_KERNELS_DECODED_BLOCKS_H_

#include <algorithm>
#include <cstdint>

#include "kernels/layouts.h"
#include "kernels/out_types.h"
#include "kernels/plan.h"

namespace nibble {

// DequantizeTile's contract for decoded block layout D: rows [r0, r1),
// columns [c0, c1) into `out` (row stride `ld` elements). Each block holding
// a wanted element is decoded once (D::Decode, float32) and `convert`
// (ConvertFloats) rounds the wanted part to plan.out — on every SIMD target
// the reference's rounding, so every target gives the same bits.
//
// Always inlined: kernels/dequantize.cc calls it from each SIMD target's
// code, so the decode loops are compiled (and vectorized) per target —
// with -ffp-contract=off and no reassociation, every target computes the
// same roundings.
// `decode(block, y)` computes D::Decode's values (the target's vector
// version where it has one).
template <class D, class Decode>
NIBBLE_DECODE_INLINE void DequantizeDecodedBlocks(
    const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out, int64_t ld,
    void (*convert)(OutType, const void*, OutType, void*, int64_t), Decode decode) {
  constexpr int64_t kB = D::kBlockElems;
  // Blocks are decoded into chunks of about 1024 values, each rounded by
  // one conversion call.
  constexpr int64_t kChunkBlocks = kB >= 1024 ? 1 : 1024 / kB;
  const int64_t row_blocks = plan.cols() / kB;
  const int64_t ob = OutBytes(plan.out);
  alignas(64) float y[static_cast<size_t>(kChunkBlocks * kB)];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* const row = plan.codes + r * row_blocks * D::kBytes;
    char* const dst = static_cast<char*>(out) + (r - r0) * ld * ob;
    for (int64_t c = c0; c < c1;) {
      const int64_t b0 = c / kB, p = c % kB;
      const int64_t blocks = std::min(kChunkBlocks, (c1 - 1) / kB - b0 + 1);
      for (int64_t k = 0; k < blocks; ++k) decode(row + (b0 + k) * D::kBytes, y + k * kB);
      const int64_t n = std::min(blocks * kB - p, c1 - c);
      convert(OutType::kF32, y + p, plan.out, dst + (c - c0) * ob, n);
      c += n;
    }
  }
}

// Element e's float32 value (the reference: the element's block decoded).
template <class D>
float DecodedBlockValue(const Plan& plan, int64_t e) {
  float y[static_cast<size_t>(D::kBlockElems)];
  D::Decode(plan.codes + (e / D::kBlockElems) * D::kBytes, y);
  return y[e % D::kBlockElems];
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_DECODED_BLOCKS_H_
