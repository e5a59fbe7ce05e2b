#include "onnx/onnx_weights.h"

#include <algorithm>
#include <new>

#include "formats/files.h"
#include "onnx/onnx_node.h"
#include "op/matmulnbits.h"
#include "op/onnx.h"
#include "op/pmx.h"

namespace nibble {
namespace internal {

namespace {
bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }
}  // namespace

bool IsDequantizeNode(const nibble_onnx::NodeProto& n) {
  return n.op_type() == "DequantizeLinear" &&
         (IsDefaultDomain(n.domain()) || n.domain() == kPmxDomain);
}
bool IsMatMulNBitsNode(const nibble_onnx::NodeProto& n) {
  return n.op_type() == "MatMulNBits" && n.domain() == "com.microsoft";
}
std::string NodeLabel(const nibble_onnx::NodeProto& n) {
  const std::string name = n.name().empty() ? (n.output_size() ? n.output(0) : "") : n.name();
  return NodeKind(n) + " '" + name + "'";
}

Status ValidateGraph(const nibble_onnx::GraphProto& g, const std::string& model) {
  const std::string who = "'" + EscapeBytes(model) + "'";
  std::set<std::string> inits, graph_inputs, defined;
  for (const auto& t : g.initializer()) {
    if (!inits.insert(t.name()).second) {
      return Status::Error(who + ": initializer '" + EscapeBytes(t.name()) +
                           "' is defined twice (ONNX names must be unique)");
    }
  }
  for (const auto& vi : g.input()) {
    if (!graph_inputs.insert(vi.name()).second) {
      return Status::Error(who + ": graph input '" + EscapeBytes(vi.name()) + "' is listed twice");
    }
  }
  defined = inits;
  defined.insert(graph_inputs.begin(), graph_inputs.end());
  for (const auto& n : g.node()) {
    for (const auto& o : n.output()) {
      if (o.empty()) continue;
      if (!defined.insert(o).second) {
        return Status::Error(who + ": " + NodeLabel(n) + " output '" + EscapeBytes(o) +
                             "' is already defined (by a graph input, an initializer or another "
                             "node)");
      }
    }
  }
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) {
      if (!i.empty() && !defined.count(i)) {
        return Status::Error(who + ": " + NodeLabel(n) + " input '" + EscapeBytes(i) +
                             "' is not defined (no graph input, initializer or node output has "
                             "that name)");
      }
    }
  }
  return Status::Ok();
}

OnnxGraphView MakeGraphView(const nibble_onnx::ModelProto& model) {
  OnnxGraphView v;
  v.graph = &model.graph();
  for (int i = 0; i < v.graph->initializer_size(); ++i) {
    v.init_index[v.graph->initializer(i).name()] = i;
  }
  if (model.ir_version() >= 4) {
    for (const auto& vi : v.graph->input()) {
      if (v.init_index.count(vi.name())) v.overridable.insert(vi.name());
    }
  }
  v.model_opset = ModelOpset(model, "");
  return v;
}

namespace {
// Inputs that must be constant: DequantizeLinear all; MatMulNBits B,
// scales, zero_points, g_idx (input 0 is the activation).
int WeightInputsEnd(const nibble_onnx::NodeProto& n) {
  return IsDequantizeNode(n) ? n.input_size() : std::min(n.input_size(), 5);
}
int WeightInputsBegin(const nibble_onnx::NodeProto& n) { return IsDequantizeNode(n) ? 0 : 1; }
}  // namespace

bool HasConstantWeight(const OnnxGraphView& view, const nibble_onnx::NodeProto& n,
                       bool* reads_overridable) {
  bool all_const = true, over = false;
  for (int k = WeightInputsBegin(n); k < WeightInputsEnd(n); ++k) {
    const std::string& name = n.input(k);
    const bool overridable = view.overridable.count(name) > 0;
    all_const = all_const && (name.empty() || (view.init_index.count(name) && !overridable));
    over = over || overridable;
  }
  if (reads_overridable) *reads_overridable = over;
  return all_const;
}

StatusOr<Dequantizer> PrepareWeightNode(const OnnxGraphView& view, const nibble_onnx::NodeProto& n,
                                        TensorResolver* resolver, DType out,
                                        std::vector<Tensor>* storage,
                                        const CancelCallback* cancelled) try {
  const bool dq = IsDequantizeNode(n);
  StatusOr<MatMulNBitsAttributes> mm_attrs = MatMulNBitsAttributes();
  if (!dq) {  // attributes before any input is read or sized
    mm_attrs = MatMulNBitsAttributesFromNode(n);
    if (!mm_attrs.ok()) return mm_attrs.status();
  }
  storage->assign(static_cast<size_t>(n.input_size()), Tensor());
  std::vector<TensorView> views(static_cast<size_t>(n.input_size()));
  std::vector<const TensorView*> inputs_v(static_cast<size_t>(n.input_size()), nullptr);
  for (int k = WeightInputsBegin(n); k < WeightInputsEnd(n); ++k) {
    const std::string& name = n.input(k);
    if (name.empty()) continue;
    const auto it = view.init_index.find(name);
    if (it == view.init_index.end()) {
      return Status::Error(NodeLabel(n) + ": input '" + EscapeBytes(name) +
                           "' is not an initializer");
    }
    const size_t ku = static_cast<size_t>(k);
    auto v = resolver->Resolve(view.graph->initializer(it->second), &(*storage)[ku], cancelled);
    if (!v.ok()) return v.status().WithPrefix(NodeLabel(n));
    views[ku] = *v;
    inputs_v[ku] = &views[ku];
  }
  const std::string label = n.name().empty() ? n.output(0) : n.name();
  if (dq) {
    if (n.output_size() != 1) return Status::Error(NodeLabel(n) + ": expected one output");
    if (inputs_v.size() < 2 || !inputs_v[0] || !inputs_v[1]) {
      return Status::Error(NodeLabel(n) + ": needs inputs x (X) and scale");
    }
    const TensorView* zp = inputs_v.size() > 2 ? inputs_v[2] : nullptr;
    DequantizeOptions o;
    o.name = label;
    if (n.domain() == kPmxDomain) {
      auto attrs = PmxAttributesFromNode(n);
      if (!attrs.ok()) return attrs.status();
      o.output_dtype = out;
      return PreparePmx(*attrs, *inputs_v[0], *inputs_v[1], zp, o);
    }
    auto attrs = OnnxAttributesFromNode(n, view.model_opset);
    if (!attrs.ok()) return attrs.status();
    o.convert_output = out;
    return PrepareOnnx(*attrs, *inputs_v[0], *inputs_v[1], zp, o);
  }
  if (n.input_size() < 3) return Status::Error(NodeLabel(n) + ": needs inputs A, B, scales");
  if (n.input_size() > 4 && !n.input(4).empty()) {
    return Status::Error(NodeLabel(n) +
                         ": input g_idx (act-order) is not supported; refusing to fold");
  }
  if (n.output_size() != 1) return Status::Error(NodeLabel(n) + ": expected one output");
  const TensorView* zp = n.input_size() > 3 && !n.input(3).empty() ? &views[3] : nullptr;
  return PrepareMatMulNBits(*mm_attrs, views[1], views[2], zp, label, out);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareWeightNode");
}

}  // namespace internal
}  // namespace nibble
