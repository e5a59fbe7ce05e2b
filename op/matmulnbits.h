// ONNX Runtime's com.microsoft MatMulNBits weight (its contrib-op definition):
// B uint8 [N, k_blocks, blob_size] (k_blocks = ceil(K / block_size),
// blob_size = block_size * bits / 8), codes along K low nibble first (bits
// 4) or one byte each (bits 8), the last block zero-padded; scales
// [N, k_blocks] (or legacy 1-D [N * k_blocks]); zero points absent
// (2^(bits-1)), packed uint8 [N, ceil(k_blocks * bits / 8)] with per-row
// padding (or 1-D), or float [N, k_blocks] like the scales.
// Value: (q - z) * s — for float zero points (float32(q) - z) * s.
// Lowered to the shared Plan as an [N, K] weight (rows padded to whole
// blocks in memory).
#ifndef NIBBLE_OP_MATMULNBITS_H_
#define NIBBLE_OP_MATMULNBITS_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

struct MatMulNBitsAttributes {
  int64_t K = 0, N = 0;          // required
  int64_t bits = 4;              // 4 or 8 supported
  int64_t block_size = 0;        // required: a power of two >= 16
  int64_t weight_prepacked = 0;  // non-zero (a device layout) is rejected
};

// Checks the attributes alone, before any arithmetic uses them: bits 4 or
// 8, weight_prepacked 0, K and N in [1, 2^40], block_size a power of two in
// [16, 2^20], and K * N representable. Errors start with `who`.
Status ValidateMatMulNBitsAttributes(const MatMulNBitsAttributes& attrs, const std::string& who);

// A Dequantizer whose 2-D view is the [N, K] weight (cols() == K); use
// RunTransposed for MatMul's [K, N]. `zero_points` may be null; `g_idx`
// must be handled by the caller (rejected).
// `out`: the output type (kUndefined: the scales' type, as the operator).
StatusOr<Dequantizer> PrepareMatMulNBits(const MatMulNBitsAttributes& attrs, const TensorView& b,
                                         const TensorView& scales, const TensorView* zero_points,
                                         const std::string& name = "",
                                         DType out = DType::kUndefined);

}  // namespace nibble

#endif  // NIBBLE_OP_MATMULNBITS_H_
