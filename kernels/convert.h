// Float-to-float conversion of stored tensors (a checkpoint's float16
// embedding read as bfloat16 or float32, ...): Highway dynamic dispatch,
// each value rounded once.
#ifndef NIBBLE_KERNELS_CONVERT_H_
#define NIBBLE_KERNELS_CONVERT_H_

#include <cstdint>

#include "kernels/codes.h"

namespace nibble {

// Converts n values of type `from` at src (float32, float16 or bfloat16
// bits, any alignment) to type `to` at dst: widened exactly to float32,
// then rounded to nearest even (F16FromF32 / BF16FromF32 of F32FromF16 /
// F32FromBF16: NaN stays NaN, overflow to Inf). from == to copies the
// bits (a float16 NaN is not quieted).
// Bit-identical to ConvertFloatsReference on every target. Single-threaded,
// no allocation, no validation; src and dst do not overlap.
void ConvertFloats(OutType from, const void* src, OutType to, void* dst, int64_t n);

// The scalar definition of ConvertFloats.
void ConvertFloatsReference(OutType from, const void* src, OutType to, void* dst, int64_t n);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_CONVERT_H_
