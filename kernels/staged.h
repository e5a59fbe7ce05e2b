// Plans with a producer's extra roundings (Plan::post_scale, Plan::product)
// run in two stages: the kernel family writes float32 tiles, which are then
// scaled and rounded step by step. Keeps those steps out of every kernel
// family; their cost falls only on the formats that need them.
#ifndef NIBBLE_KERNELS_STAGED_H_
#define NIBBLE_KERNELS_STAGED_H_

#include <cstdint>

#include "kernels/plan.h"

namespace nibble {

// DequantizeTile's contract (kernels/dequantize.h) for a plan with
// plan.Staged(): `tile` runs the plan without its extra roundings into
// float32 chunks (at most 1024 elements of one row, on the stack), and
// `convert` (ConvertFloats or its reference) rounds them.
using TileFunction = void (*)(const Plan&, int64_t, int64_t, int64_t, int64_t, void*, int64_t);
using ConvertFunction = void (*)(OutType, const void*, OutType, void*, int64_t);
void DequantizeTileStaged(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          void* out, int64_t ld, TileFunction tile, ConvertFunction convert);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_STAGED_H_
