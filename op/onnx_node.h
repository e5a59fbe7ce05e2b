// Running ONNX nodes through the operator: translates a NodeProto's
// attributes and inputs to a front end (PMX today) and runs it.
#ifndef NIBBLE_OP_ONNX_NODE_H_
#define NIBBLE_OP_ONNX_NODE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "formats/onnx.pb.h"
#include "op/pmx.h"
#include "op/status.h"
#include "op/tensor.h"

namespace nibble {

// The ONNX domain of the PMX operator.
inline constexpr const char* kPmxDomain = "opmx";

// "opmx::DequantizeLinear", "DequantizeLinear" (default domain), ...
std::string NodeKind(const onnx::NodeProto& node);

// True if RunNode can run this node.
bool IsSupportedNode(const onnx::NodeProto& node);

// Reads the PMX attributes of an opmx DequantizeLinear node. Unknown
// attributes and attributes of the wrong type are errors naming the node.
StatusOr<PmxAttributes> PmxAttributesFromNode(const onnx::NodeProto& node);

// Runs a supported node. inputs[k] is the node's k-th input (nullptr when
// the optional input is absent). Errors name the node.
StatusOr<Tensor> RunNode(const onnx::NodeProto& node,
                         const std::vector<const TensorView*>& inputs, int threads = 0);

}  // namespace nibble

#endif  // NIBBLE_OP_ONNX_NODE_H_
