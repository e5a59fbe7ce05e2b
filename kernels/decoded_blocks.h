// The reference of the decoded block layouts (kernels/layouts.h,
// NIBBLE_DECODED_LAYOUTS): an element's value is its block decoded by the
// descriptor's scalar Decode. The kernels (kernels/dequantize_decoded.cc)
// compute the same values with vectors.
#ifndef NIBBLE_KERNELS_DECODED_BLOCKS_H_
#define NIBBLE_KERNELS_DECODED_BLOCKS_H_

#include <cstdint>

#include "kernels/layouts.h"
#include "kernels/plan.h"

namespace nibble {

// Element e's float32 value (the reference: the element's block decoded).
template <class D>
float DecodedBlockValue(const Plan& plan, int64_t e) {
  float y[static_cast<size_t>(D::kBlockElems)];
  D::Decode(plan.codes + (e / D::kBlockElems) * D::kBytes, y);
  return y[e % D::kBlockElems];
}

}  // namespace nibble

#endif  // NIBBLE_KERNELS_DECODED_BLOCKS_H_
