#include "onnx/onnx_checkpoint.h"

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "formats/files.h"
#include "onnx/external_data.h"
#include "onnx/onnx_node.h"
#include "onnx/onnx_tensor.h"
#include "onnx/onnx_weights.h"
#include "op/matmulnbits.h"
#include "op/onnx.h"
#include "op/pmx.h"

namespace nibble {

namespace {

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string DirOf(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
}

// The open model, shared by every tensor's functions. The resolver opens
// and reads external data; reads are serialized by `mu` (decoding, the
// expensive part, runs outside it).
struct OnnxState {
  InputFiles inputs;  // the resolver records into it
  nibble_onnx::ModelProto model;
  internal::OnnxGraphView view;
  std::unique_ptr<TensorResolver> resolver;
  std::mutex mu;
};

// The output of node n without reading its data (types and shapes only).
StatusOr<OutputInfo> InferNodeOutput(const OnnxState& s, const nibble_onnx::NodeProto& n) {
  auto describe = [&](int k) -> StatusOr<TensorView> {
    const auto it = s.view.init_index.find(n.input(k));
    return TensorResolver::Describe(s.view.graph->initializer(it->second));
  };
  if (internal::IsMatMulNBitsNode(n)) {
    auto a = MatMulNBitsAttributesFromNode(n);
    if (!a.ok()) return a.status();
    auto scales = describe(2);
    if (!scales.ok()) return scales.status().WithPrefix(internal::NodeLabel(n));
    return OutputInfo{scales->dtype, {a->K, a->N}};
  }
  if (n.input_size() < 2 || n.input(0).empty() || n.input(1).empty()) {
    return Status::Error(internal::NodeLabel(n) + ": needs inputs x (X) and scale");
  }
  auto x = describe(0);
  if (!x.ok()) return x.status();
  auto scale = describe(1);
  if (!scale.ok()) return scale.status();
  std::optional<TensorView> zp;
  if (n.input_size() > 2 && !n.input(2).empty()) {
    auto z = describe(2);
    if (!z.ok()) return z.status();
    zp = *z;
  }
  if (n.domain() == kPmxDomain) {
    auto attrs = PmxAttributesFromNode(n);
    if (!attrs.ok()) return attrs.status();
    return InferPmxOutput(*attrs, *x, *scale, zp ? &*zp : nullptr);
  }
  auto attrs = OnnxAttributesFromNode(n, s.view.model_opset);
  if (!attrs.ok()) return attrs.status();
  return InferOnnxOutput(*attrs, *x, *scale, zp ? &*zp : nullptr);
}

}  // namespace

StatusOr<Checkpoint> OpenOnnxCheckpoint(const std::string& path) try {
  auto state = std::make_shared<OnnxState>();
  NIBBLE_RETURN_IF_ERROR(ReadProtoFile(path, &state->model, &state->inputs));
  if (!state->model.has_graph()) {
    return Status::Error("'" + EscapeBytes(path) + "' has no graph (not an ONNX model?)");
  }
  const nibble_onnx::GraphProto& g = state->model.graph();
  NIBBLE_RETURN_IF_ERROR(internal::ValidateGraph(g, path));
  state->resolver = std::make_unique<TensorResolver>(DirOf(path), &state->inputs);
  // Every external file is opened (and checked) now: later reads only look
  // them up.
  for (const auto& t : g.initializer()) NIBBLE_RETURN_IF_ERROR(state->resolver->OpenExternal(t));
  state->view = internal::MakeGraphView(state->model);

  std::vector<CheckpointTensor> tensors;
  std::set<std::string> consumed;                      // inputs of listed weight nodes
  std::map<std::string, std::string> variable_reader;  // input -> node not listed
  std::set<std::string> names;
  for (const auto& n : g.node()) {
    const bool dq = internal::IsDequantizeNode(n), mm = internal::IsMatMulNBitsNode(n);
    if (!dq && !mm) continue;
    if (!internal::HasConstantWeight(state->view, n, nullptr)) {
      for (const auto& in : n.input()) variable_reader.emplace(in, internal::NodeLabel(n));
      continue;
    }
    auto info = InferNodeOutput(*state, n);
    if (!info.ok()) return info.status().WithPrefix("'" + EscapeBytes(path) + "'");
    CheckpointTensor ct;
    ct.quantized = true;
    ct.kind = NodeKind(n);
    ct.source = dq ? n.input(0) : n.input(1);
    ct.name = dq ? n.output(0) : n.input(1) + "_dequantized";
    ct.shape = info->shape;
    ct.out_default = info->dtype;
    {
      const auto x = TensorResolver::Describe(g.initializer(state->view.init_index.at(ct.source)));
      ct.stored_bytes = x.ok() ? x->size_bytes : 0;
      ct.detail = (x.ok() ? DTypeName(x->dtype) + " " : std::string()) +
                  (mm ? "MatMul operand [K, N] (the [N, K] weight transposed)"
                      : "node output " + ShapeToString(info->shape));
    }
    if (!names.insert(ct.name).second) {
      return Status::Error("'" + EscapeBytes(path) + "': two weights are named '" +
                           EscapeBytes(ct.name) + "'");
    }
    const nibble_onnx::NodeProto* node = &n;
    OnnxState* st = state.get();
    ct.prepare = [st, node, mm](DType out,
                                CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      StatusOr<Dequantizer> d = Status::Error("not prepared");
      {
        std::lock_guard<std::mutex> lock(st->mu);
        d = internal::PrepareWeightNode(st->view, *node, st->resolver.get(), out, &bufs->tensors,
                                        &bufs->cancelled);
      }
      if (d.ok() && mm) d->TransposeOutput();
      return d;
    };
    for (int k = 0; k < n.input_size(); ++k) {
      if (dq || k > 0) consumed.insert(n.input(k));
    }
    tensors.push_back(std::move(ct));
  }
  for (const auto& t : g.initializer()) {
    if (consumed.count(t.name())) continue;
    auto v = TensorResolver::Describe(t);
    if (!v.ok()) return v.status().WithPrefix("'" + EscapeBytes(path) + "'");
    CheckpointTensor ct;
    ct.name = ct.source = t.name();
    ct.kind = "copy";
    ct.detail = DTypeName(v->dtype);
    ct.shape = v->shape;
    ct.stored_dtype = v->dtype;
    ct.stored_bytes = v->size_bytes;
    if (DTypeBits(v->dtype) < 8) {
      ct.supported = false;
      const auto r = variable_reader.find(t.name());
      ct.why_not =
          r != variable_reader.end()
              ? DTypeName(v->dtype) + " codes of " + r->second +
                    ", whose inputs are not all constant (graph inputs a caller may override): "
                    "not dequantized"
              : DTypeName(v->dtype) +
                    " initializer that no DequantizeLinear reads: nothing says how to "
                    "dequantize it";
    }
    if (!names.insert(ct.name).second) continue;  // a weight of that name is listed
    const nibble_onnx::TensorProto* tp = &t;
    OnnxState* st = state.get();
    // Only the range asked for is read (Read converts and copies in pieces).
    ct.read_stored = [st, tp](uint64_t offset, uint64_t n, uint8_t* dst) -> Status {
      std::lock_guard<std::mutex> lock(st->mu);
      return st->resolver->ReadRange(*tp, offset, n, dst);
    };
    tensors.push_back(std::move(ct));
  }
  std::vector<std::pair<std::string, std::string>> props;
  props.emplace_back("ir_version", std::to_string(state->model.ir_version()));
  props.emplace_back("opset", std::to_string(state->view.model_opset));
  if (!state->model.producer_name().empty()) {
    props.emplace_back("producer", state->model.producer_name());
  }
  int quantized = 0;
  for (const auto& t : tensors) quantized += t.quantized ? 1 : 0;
  std::string description = "ONNX model, " + std::to_string(g.node_size()) + " nodes, " +
                            std::to_string(quantized) + " quantized weights, " +
                            std::to_string(tensors.size()) + " tensors";
  CheckpointListing listing;
  listing.description = std::move(description);
  listing.properties = std::move(props);
  listing.tensors = std::move(tensors);
  listing.inputs = state->inputs;
  listing.keep_alive = {std::shared_ptr<void>(state)};
  listing.default_dtype = DType::kFloat32;
  return Checkpoint::FromListing(std::move(listing));
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("OpenOnnxCheckpoint");
}

StatusOr<Checkpoint> OpenAnyCheckpoint(const std::string& path, const CheckpointOptions& options) {
  if (EndsWith(path, ".onnx")) return OpenOnnxCheckpoint(path);
  return Checkpoint::Open(path, options);
}

Status DequantAnyCheckpoint(const std::string& in, const std::string& out,
                            const DequantOptions& options, DequantReport* report) {
  if (!EndsWith(in, ".onnx")) return DequantCheckpoint(in, out, options, report);
  auto ck = OpenOnnxCheckpoint(in);
  if (!ck.ok()) return ck.status();
  return DequantOpenCheckpoint(*ck, in, out, options, report);
}

}  // namespace nibble
