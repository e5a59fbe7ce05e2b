// The constant quantized weights of an ONNX graph — what `nibble fold`
// folds and the ONNX checkpoint reader (onnx/onnx_checkpoint.h) lists:
// DequantizeLinear (ai.onnx and opmx) and com.microsoft MatMulNBits nodes
// whose weight inputs are all initializers a caller cannot override.
// Library nibble (protobuf).
#ifndef NIBBLE_ONNX_ONNX_WEIGHTS_H_
#define NIBBLE_ONNX_ONNX_WEIGHTS_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "onnx/external_data.h"
#include "onnx/onnx.pb.h"
#include "op/dequantizer.h"

namespace nibble {
namespace internal {

bool IsDequantizeNode(const nibble_onnx::NodeProto& n);
bool IsMatMulNBitsNode(const nibble_onnx::NodeProto& n);
// "DequantizeLinear 'name'" for messages.
std::string NodeLabel(const nibble_onnx::NodeProto& n);

// The checks ONNX Runtime makes when it loads a graph: unique initializer
// / graph input / node output names, every node input defined. Subgraphs
// may use outer-scope names and are not checked.
Status ValidateGraph(const nibble_onnx::GraphProto& g, const std::string& model);

// What a graph's weight nodes read. `graph` must outlive it.
struct OnnxGraphView {
  const nibble_onnx::GraphProto* graph = nullptr;
  std::map<std::string, int> init_index;  // initializer name -> index
  // From IR version 4 on, an initializer that is also a graph input is a
  // default the caller may override: not a constant.
  std::set<std::string> overridable;
  int64_t model_opset = -1;  // default domain
};
OnnxGraphView MakeGraphView(const nibble_onnx::ModelProto& model);

// True when node n's weight inputs (DequantizeLinear: all; MatMulNBits: B,
// scales, zero points, g_idx) are constant initializers. *reads_overridable
// (may be null): one of them is an overridable initializer.
bool HasConstantWeight(const OnnxGraphView& view, const nibble_onnx::NodeProto& n,
                       bool* reads_overridable);

// Reads node n's constant inputs (into *storage where they are not inline)
// and builds its Dequantizer; every check happens here. `out`: the output
// type to produce (kUndefined: the node's own: its scale's type or its
// output_dtype attribute). MatMulNBits gives the [N, K] weight view (its
// MatMul operand is the transpose). Errors name the node. `cancelled`
// (optional): asked between pieces of the external data's reads.
StatusOr<Dequantizer> PrepareWeightNode(const OnnxGraphView& view, const nibble_onnx::NodeProto& n,
                                        TensorResolver* resolver, DType out,
                                        std::vector<Tensor>* storage,
                                        const CancelCallback* cancelled = nullptr);

}  // namespace internal
}  // namespace nibble

#endif  // NIBBLE_ONNX_ONNX_WEIGHTS_H_
