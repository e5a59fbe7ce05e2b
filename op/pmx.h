// The PMX (OpenPPL) DequantizeLinear operator, ONNX domain "opmx"
// (OpenPPL's PMX op set): int4 packed four per int16 ("int4x4", or eight per int32,
// "int4x8") or int8 codes, grouped / per-channel / per-tensor scales, no,
// integer or float zero point.
#ifndef NIBBLE_OP_PMX_H_
#define NIBBLE_OP_PMX_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

// The operator's attributes with their defaults. Bools are ONNX INTs: any
// value other than 0 or 1 is an error.
struct PmxAttributes {
  std::string quant_data_type;  // required: "int4" or "int8"
  std::string quant_method;     // reserved, ignored
  int64_t quant_axis = 1;       // 0 or 1
  int64_t group_size = 128;     // > 0 grouped; 0 per-channel or per-tensor
  int64_t has_zeropoint = 0;
  int64_t float_zeropoint = 0;
};

struct DequantizeOptions {
  // float32, float16 or bfloat16; kUndefined = the scale's type.
  DType output_dtype = DType::kUndefined;
  // Node or tensor name used in error messages.
  std::string name;
  // 0 = OpenMP's default, 1 = the caller's thread, n = n threads.
  int threads = 0;
  // ONNX DequantizeLinear only: produce this type (float32, float16 or
  // bfloat16) instead of the node's output type — for checkpoint readers
  // whose caller chooses; each value is still computed in float32 and
  // rounded once. kUndefined: the node's type.
  DType convert_output = DType::kUndefined;
};

// Shape/type inference: validates attributes, types and shapes (not data
// values) and returns the output's type and logical shape.
// `zero_point` may be null (absent input).
StatusOr<OutputInfo> InferPmxOutput(const PmxAttributes& attrs, const TensorView& x,
                                    const TensorView& scale, const TensorView* zero_point,
                                    const DequantizeOptions& options = {});

// Validates everything (including integer int4 zero points in [0, 15]) and
// lowers the request to a Dequantizer.
StatusOr<Dequantizer> PreparePmx(const PmxAttributes& attrs, const TensorView& x,
                                 const TensorView& scale, const TensorView* zero_point,
                                 const DequantizeOptions& options = {});

// One-shot: prepare and run into a caller-provided output.
Status DequantizePmx(const PmxAttributes& attrs, const TensorView& x, const TensorView& scale,
                     const TensorView* zero_point, const MutableTensorView& y,
                     const DequantizeOptions& options = {});

// One-shot: prepare and run into a newly allocated output.
StatusOr<Tensor> DequantizePmx(const PmxAttributes& attrs, const TensorView& x,
                               const TensorView& scale, const TensorView* zero_point,
                               const DequantizeOptions& options = {});

}  // namespace nibble

#endif  // NIBBLE_OP_PMX_H_
