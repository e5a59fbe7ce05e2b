// ONNX DequantizeLinear (default domain, opsets 10, 13, 19, 21, 23, 24, 25)
// lowered onto the same Plan and kernels as the PMX operator:
//   y = (x - x_zero_point) * x_scale, rounded once to the output type,
// per-tensor (any one-element scale), per-axis (1-D scale, block_size 0) or
// blocked (scale of x's rank with ceil(D[axis] / block_size) blocks; the
// last block may be short).
#ifndef NIBBLE_OP_ONNX_H_
#define NIBBLE_OP_ONNX_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"
#include "op/pmx.h"

namespace nibble {

// The newest DequantizeLinear version this library implements.
inline constexpr int kMaxOnnxDequantizeOpset = 25;

// The operator version that a model importing default-domain opset
// `model_opset` uses: the newest of 10, 13, 19, 21, 23, 24, 25 not above it;
// 0 if below 10 (DequantizeLinear does not exist there).
int OnnxDequantizeVersion(int64_t model_opset);

struct OnnxDequantizeAttributes {
  int opset = kMaxOnnxDequantizeOpset;  // operator version (see above)
  int64_t axis = 1;                     // 13+; negative counts from the back
  int64_t block_size = 0;               // 21+; 0 = per-tensor / per-axis
  int32_t output_dtype = 0;             // 23+; 0 = the scale's type
  // Attributes actually present on the node (an attribute the version does
  // not have is an error).
  bool has_axis = false, has_block_size = false, has_output_dtype = false;
};

// Shape/type inference (no data values read).
StatusOr<OutputInfo> InferOnnxOutput(const OnnxDequantizeAttributes& attrs, const TensorView& x,
                                     const TensorView& scale, const TensorView* zero_point,
                                     const std::string& name = "");

// Validates everything (including float8 zero points being zero) and lowers
// to a Dequantizer. `zero_point` may be null (absent). The output type is
// attrs.output_dtype if set, else the scale's type (float32 for opsets 10
// and 13); options.output_dtype, if set, must agree.
StatusOr<Dequantizer> PrepareOnnx(const OnnxDequantizeAttributes& attrs, const TensorView& x,
                                  const TensorView& scale, const TensorView* zero_point,
                                  const DequantizeOptions& options = {});

// One-shot into a new tensor.
StatusOr<Tensor> DequantizeOnnx(const OnnxDequantizeAttributes& attrs, const TensorView& x,
                                const TensorView& scale, const TensorView* zero_point,
                                const DequantizeOptions& options = {});

}  // namespace nibble

#endif  // NIBBLE_OP_ONNX_H_
