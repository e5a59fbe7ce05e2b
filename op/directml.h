// DirectML's DML_ELEMENT_WISE_DEQUANTIZE_LINEAR: the general
// broadcast entry point. y = (input - zero_point) * scale with scale and
// zero point broadcast to the input's shape by numpy rules (DirectML's
// stride-0 dimensions).
//
// Lowering: when the dims along which the scale (and zero point) vary form
// one contiguous run, the request is a per-axis Plan over that run (the fast
// kernels); otherwise the broadcast scale / zero point are materialized to
// the input's size (correct, more memory).
#ifndef NIBBLE_OP_DIRECTML_H_
#define NIBBLE_OP_DIRECTML_H_

#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

// input: int8/16/32 or uint8/16/32. scale: float32 or float16 (bfloat16
// accepted). zero_point: optional, same type as input. Output: float32 or
// float16 (bfloat16 accepted); kUndefined = the scale's type.
StatusOr<Dequantizer> PrepareBroadcastDequantize(const TensorView& input, const TensorView& scale,
                                                 const TensorView* zero_point,
                                                 DType output_dtype = DType::kUndefined,
                                                 const std::string& name = "");

StatusOr<Tensor> BroadcastDequantize(const TensorView& input, const TensorView& scale,
                                     const TensorView* zero_point,
                                     DType output_dtype = DType::kUndefined,
                                     const std::string& name = "", int threads = 0);

}  // namespace nibble

#endif  // NIBBLE_OP_DIRECTML_H_
