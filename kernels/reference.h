// The scalar reference: the Plan's formula evaluated element by element, straight
// from the Plan's definition (kernels/plan.h). Every fast path must produce
// the same bits. Slow by design; used by tests and as the oracle of the
// dispatch-switching tests.
#ifndef NIBBLE_KERNELS_REFERENCE_H_
#define NIBBLE_KERNELS_REFERENCE_H_

#include <cstdint>

#include "kernels/plan.h"

namespace nibble {

// Decoded float32 value of every bit pattern of a float code kind: 256
// entries for float8 kinds, 16 for float4e2m1. Immutable, built on first
// use (thread-safe).
const float* FloatCodeTable(CodeKind k);

// Raw code bits of logical element `e` (zero-extended).
uint32_t LoadCodeBits(const Plan& plan, int64_t e);

// The float32 value of logical element (row r, col c) before output
// rounding.
float ReferenceValue(const Plan& plan, int64_t r, int64_t c);

// Writes rows [r0, r1) x cols [c0, c1) of the plan's 2-D view to `out`
// (element (r, c) at out[(r - r0) * ld + (c - c0)], in plan.out's type).
// Preconditions: 0 <= r0 <= r1 <= rows, 0 <= c0 <= c1 <= cols, ld >= c1 - c0.
void DequantizeTileReference(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_REFERENCE_H_
