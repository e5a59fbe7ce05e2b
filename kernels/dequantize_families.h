// The dequantize kernel family, compiled as one translation unit per layout
// family so that a build on several cores compiles them at once; each
// exports its Highway-dispatched entry here, and kernels/dequantize.cc's
// DequantizeTile (the one dispatch table) routes a Plan to its family.
// Internal to kernels/.
#ifndef NIBBLE_KERNELS_DEQUANTIZE_FAMILIES_H_
#define NIBBLE_KERNELS_DEQUANTIZE_FAMILIES_H_

#include <cstdint>

#include "kernels/plan.h"

namespace nibble {
namespace kernels_internal {

// Same contract as DequantizeTile, for the plans of one family:
// dense 4-bit codes, bitsandbytes' high-nibble-first codes, PMX int4 words
// (kernels/dequantize_nibbles.cc);
void DequantizeNibbleFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld);
// dense 2-, 8-, 16- and 32-bit and float8 codes, PMX / GPTQ byte words
// (kernels/dequantize_bytes.cc);
void DequantizeByteFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                          void* out, int64_t ld);
// AWQ words, GPTQ and AWQ columns, dense 4-bit rows with a group map
// (compressed-tensors act-order: AVX2 word tiles, else the nibble family's)
// (kernels/dequantize_columns.cc);
void DequantizeColumnFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld);
// ggml block layouts of 4-bit and of 8-bit codes (kernels/dequantize_blocks4.cc,
// dequantize_blocks8.cc).
void DequantizeBlock4Family(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld);
void DequantizeBlock8Family(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                            void* out, int64_t ld);
// ggml's decoded block layouts: grid i-quants, TQ1_0, Q1_0, NVFP4
// (kernels/dequantize_decoded.cc).
void DequantizeDecodedFamily(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             void* out, int64_t ld);
// HasGroupMapColumnTiles (kernels/dequantize_columns.cc).
bool GroupMapColumnTilesActive();
// Plan::dot without a tile by columns of 16 rows, where the plan allows
// (1-8 rows of X; GPTQ / AWQ [N, K] columns, compressed-tensors act-order
// rows; AVX-512 and AVX2): the dot done, *plan.dot->done not set; else false, nothing
// done (kernels/dequantize_columns_dot.cc ColumnsDotHere).
bool ColumnsDot(const Plan& plan, int64_t r0, int64_t r1, int64_t c0, int64_t c1);

}  // namespace kernels_internal
}  // namespace nibble

#endif  // NIBBLE_KERNELS_DEQUANTIZE_FAMILIES_H_
