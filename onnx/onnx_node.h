// Running ONNX nodes through the operator: translates a NodeProto's
// attributes and inputs to a front end (PMX today) and runs it.
#ifndef NIBBLE_ONNX_ONNX_NODE_H_
#define NIBBLE_ONNX_ONNX_NODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "onnx/onnx.pb.h"
#include "op/matmulnbits.h"
#include "op/onnx.h"
#include "op/pmx.h"

namespace nibble {

// The ONNX domain of the PMX operator.
inline constexpr const char* kPmxDomain = "opmx";

// "opmx::DequantizeLinear", "DequantizeLinear" (default domain), ...
std::string NodeKind(const nibble_onnx::NodeProto& node);

// True if RunNode can run this node.
bool IsSupportedNode(const nibble_onnx::NodeProto& node);

// Reads the PMX attributes of an opmx DequantizeLinear node. Unknown
// attributes and attributes of the wrong type are errors naming the node.
StatusOr<PmxAttributes> PmxAttributesFromNode(const nibble_onnx::NodeProto& node);

// Reads the attributes of a default-domain DequantizeLinear node for the
// model's default-domain opset (`model_opset`). Errors name the node.
StatusOr<OnnxDequantizeAttributes> OnnxAttributesFromNode(const nibble_onnx::NodeProto& node,
                                                          int64_t model_opset);

// Reads the attributes of a com.microsoft MatMulNBits node and validates
// them (ValidateMatMulNBitsAttributes). Errors name the node.
StatusOr<MatMulNBitsAttributes> MatMulNBitsAttributesFromNode(const nibble_onnx::NodeProto& node);

// The model's opset for `domain` ("" = default), or -1 if not imported.
int64_t ModelOpset(const nibble_onnx::ModelProto& model, const std::string& domain);

// Runs a supported node. inputs[k] is the node's k-th input (nullptr when
// the optional input is absent). `model_opset` is the model's default-domain
// opset (it selects the DequantizeLinear version). Errors name the node.
StatusOr<Tensor> RunNode(const nibble_onnx::NodeProto& node,
                         const std::vector<const TensorView*>& inputs, int64_t model_opset,
                         int threads = 0);

}  // namespace nibble

#endif  // NIBBLE_ONNX_ONNX_NODE_H_
