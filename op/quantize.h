// The PMX quantizer: the inverse of the PMX operator, for tests,
// benchmarks and group-size studies (PMX itself quantizes offline). Round
// half to even. Not required to be bit-exact across machines; the
// dequantizer is.
#ifndef NIBBLE_OP_QUANTIZE_H_
#define NIBBLE_OP_QUANTIZE_H_

#include <cstdint>

#include "base/status.h"
#include "base/tensor.h"
#include "op/onnx.h"
#include "op/pmx.h"

namespace nibble {

enum class QuantScheme {
  kSymmetric,       // s = absmax / 7 (int4) or / 127 (int8); no zero point
  kAsymmetric,      // s = (max - min) / 15 or / 255; integer zero point
  kFloatZeroPoint,  // z = (max + min) / 2, s = (max - min) / 15 or / 255
};

struct QuantizeConfig {
  int bits = 4;  // 4 or 8
  QuantScheme scheme = QuantScheme::kSymmetric;
  int64_t quant_axis = 1;               // the grouped axis (PMX: 0 or 1)
  int64_t group_size = 128;             // > 0 grouped, 0 per-channel
  bool per_tensor = false;              // one scale for the whole tensor (group_size ignored)
  DType scale_dtype = DType::kFloat32;  // float32, float16 or bfloat16
  DType zero_point_dtype = DType::kUndefined;  // default: int8 / float32 by scheme
  bool int4x8 = false;                         // int4: pack 8 per int32 instead of 4 per int16
};

// A PMX operator's inputs and attributes.
struct QuantizedWeight {
  PmxAttributes attrs;
  Tensor x;
  Tensor scale;
  Tensor zero_point;  // dtype kUndefined when the scheme has none
  const TensorView* zero_point_view_or_null(TensorView* storage) const {
    if (zero_point.dtype() == DType::kUndefined) return nullptr;
    *storage = zero_point.view();
    return storage;
  }
};

// Quantizes float32 weights `w` of logical shape `shape` (row-major).
// Asymmetric and float-zero-point ranges include 0 (min <= 0 <= max), so
// every group's zero lies inside the code range. The stored scale (after
// rounding to scale_dtype) is never smaller in magnitude than the exact one,
// so |w - dequantize(quantize(w))| <= s / 2 plus float rounding.
StatusOr<QuantizedWeight> QuantizePmx(const float* w, const Shape& shape,
                                      const QuantizeConfig& config);

// An ONNX DequantizeLinear's inputs and attributes.
struct OnnxQuantizedWeight {
  OnnxDequantizeAttributes attrs;
  Tensor x;  // int4 (symmetric), uint4 (asymmetric) or int8
  Tensor scale;
  Tensor zero_point;  // dtype kUndefined when symmetric
  const TensorView* zero_point_view_or_null(TensorView* storage) const {
    if (zero_point.dtype() == DType::kUndefined) return nullptr;
    *storage = zero_point.view();
    return storage;
  }
};

// The same quantizer, producing ONNX's layout: dense low-nibble-first int4 /
// uint4 (or int8), blocked along config.quant_axis with
// block_size = group_size (a ragged last block is allowed), per-axis (rank
// 2, group_size 0: a 1-D scale along the other axis) or per-tensor. No
// float zero point (ONNX has none).
StatusOr<OnnxQuantizedWeight> QuantizeOnnx(const float* w, const Shape& shape,
                                           const QuantizeConfig& config);

}  // namespace nibble

#endif  // NIBBLE_OP_QUANTIZE_H_
