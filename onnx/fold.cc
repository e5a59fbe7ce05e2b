#include "onnx/fold.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <set>
#include <utility>

#include "formats/atomic_file.h"
#include "formats/files.h"
#include "onnx/external_data.h"
#include "onnx/onnx_node.h"
#include "onnx/onnx_tensor.h"
#include "onnx/onnx_weights.h"
#include "onnx/onnx_writer.h"
#include "op/matmulnbits.h"
#include "op/onnx.h"
#include "op/pmx.h"

namespace nibble {

namespace {

std::string DirOf(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
}

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// Counts every use of a value name: node inputs (also inside subgraphs,
// which may reference outer-scope initializers) and graph outputs.
void CountUses(const nibble_onnx::GraphProto& g, std::map<std::string, int>* uses) {
  for (const auto& n : g.node()) {
    for (const auto& in : n.input()) {
      if (!in.empty()) ++(*uses)[in];
    }
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CountUses(a.g(), uses);
      for (const auto& sg : a.graphs()) CountUses(sg, uses);
    }
  }
  for (const auto& o : g.output()) ++(*uses)[o.name()];
}

// One folding action, prepared (validated) before anything is written.
// Its inputs are read and its Dequantizer built twice: once to validate
// (before anything is written) and again when its output is written, so
// only one fold's inputs are in memory at a time.
struct Fold {
  size_t node = 0;
  std::string weight_name;  // the new initializer
  bool transpose = false;   // MatMulNBits: [K, N] from the [N, K] view
  OutputInfo output;        // of the Dequantizer
  int64_t rows = 0, cols = 0;
};

}  // namespace

Status FoldModel(const std::string& in, const std::string& out, const FoldOptions& options,
                 FoldReport* report) try {
  *report = FoldReport();
  InputFiles inputs;
  nibble_onnx::ModelProto src;
  NIBBLE_RETURN_IF_ERROR(ReadProtoFile(in, &src, &inputs));
  if (!src.has_graph()) {
    return Status::Error("'" + EscapeBytes(in) + "' has no graph (not an ONNX model?)");
  }
  nibble_onnx::GraphProto* sg = src.mutable_graph();
  NIBBLE_RETURN_IF_ERROR(internal::ValidateGraph(*sg, in));
  TensorResolver resolver(DirOf(in), &inputs);
  // Every file this fold reads is open (and known) before the output is
  // checked against them.
  for (const auto& t : sg->initializer()) NIBBLE_RETURN_IF_ERROR(resolver.OpenExternal(t));
  NIBBLE_RETURN_IF_ERROR(CheckOutputPath(out, inputs));
  // The external data output (named, or forced): checked before any work
  // too (an automatic one, above 2 GB, is checked once the size is known).
  if (options.external || !options.external_name.empty()) {
    auto data_path = ExternalDataPathFor(out, options.external_name);
    if (!data_path.ok()) return data_path.status();
    NIBBLE_RETURN_IF_ERROR(CheckOutputPath(*data_path, inputs, "external data output"));
  }

  const internal::OnnxGraphView view = internal::MakeGraphView(src);
  std::set<std::string> names;  // every value name, for unique new names
  for (const auto& n : sg->node()) {
    for (const auto& o : n.output()) names.insert(o);
    for (const auto& i : n.input()) names.insert(i);
  }
  for (const auto& i : sg->initializer()) names.insert(i.name());
  auto unique_name = [&](const std::string& base) {
    std::string s = base;
    for (int k = 1; names.count(s); ++k) s = base + "_" + std::to_string(k);
    names.insert(s);
    return s;
  };

  // Reads node n's constant inputs and builds its Dequantizer.
  auto prepare = [&](const nibble_onnx::NodeProto& n,
                     std::vector<Tensor>* storage) -> StatusOr<Dequantizer> {
    return internal::PrepareWeightNode(view, n, &resolver, DType::kUndefined, storage);
  };

  // Pass 1: find and validate every fold (nothing is kept but its shape).
  std::vector<Fold> folds;
  std::map<size_t, std::vector<nibble_onnx::NodeProto>> replacement;
  for (int ni = 0; ni < sg->node_size(); ++ni) {
    const nibble_onnx::NodeProto& n = sg->node(ni);
    const bool dq = internal::IsDequantizeNode(n), mm = internal::IsMatMulNBitsNode(n);
    if (!dq && !mm) continue;
    bool reads_overridable = false;
    if (!internal::HasConstantWeight(view, n, &reads_overridable)) {
      if (reads_overridable) ++report->overridable_nodes;
      continue;
    }
    Fold f;
    f.node = static_cast<size_t>(ni);
    {
      std::vector<Tensor> storage;
      auto d = prepare(n, &storage);
      if (!d.ok()) return d.status();
      f.output = d->output();
      f.rows = d->rows();
      f.cols = d->cols();
    }
    if (dq) {
      f.weight_name = n.output(0);
      ++report->dequantize_nodes;
    } else {
      f.transpose = true;
      f.weight_name = unique_name(n.input(1) + "_dequantized");
      // MatMul(A, W) [+ Add(bias)] producing the node's output.
      std::vector<nibble_onnx::NodeProto> rep(1);
      nibble_onnx::NodeProto& mm_node = rep[0];
      mm_node.set_op_type("MatMul");
      mm_node.set_name(n.name());
      mm_node.add_input(n.input(0));
      mm_node.add_input(f.weight_name);
      const bool bias = n.input_size() > 5 && !n.input(5).empty();
      if (bias) {
        const std::string tmp = unique_name(n.output(0) + "_matmul");
        mm_node.add_output(tmp);
        nibble_onnx::NodeProto add;
        add.set_op_type("Add");
        add.set_name(n.name().empty() ? "" : n.name() + "_bias");
        add.add_input(tmp);
        add.add_input(n.input(5));
        add.add_output(n.output(0));
        rep.push_back(add);
      } else {
        mm_node.add_output(n.output(0));
      }
      replacement[f.node] = std::move(rep);
      ++report->matmulnbits_nodes;
    }
    folds.push_back(std::move(f));
  }

  // Pass 2: the output model. Nodes: folded DequantizeLinear removed,
  // MatMulNBits replaced.
  std::set<size_t> folded;
  for (const auto& f : folds) folded.insert(f.node);
  nibble_onnx::ModelProto dst;
  {
    google::protobuf::RepeatedPtrField<nibble_onnx::TensorProto> inits;
    google::protobuf::RepeatedPtrField<nibble_onnx::NodeProto> nodes;
    inits.Swap(sg->mutable_initializer());
    nodes.Swap(sg->mutable_node());
    dst = src;  // everything but initializers and nodes (cheap)
    inits.Swap(sg->mutable_initializer());
    nodes.Swap(sg->mutable_node());
  }
  nibble_onnx::GraphProto* dg = dst.mutable_graph();
  for (int ni = 0; ni < sg->node_size(); ++ni) {
    const size_t i = static_cast<size_t>(ni);
    if (!folded.count(i)) {
      *dg->add_node() = sg->node(ni);
    } else if (replacement.count(i)) {
      for (auto& r : replacement[i]) *dg->add_node() = std::move(r);
    }
  }
  std::map<std::string, int> uses;
  CountUses(*dg, &uses);

  // Initializers: kept ones still used (or never used by a folded node);
  // inline ones stay in the graph, external ones are streamed into the
  // output's own data.
  std::set<std::string> folded_inputs;
  for (const auto& f : folds) {
    for (const auto& in_name : sg->node(static_cast<int>(f.node)).input())
      folded_inputs.insert(in_name);
  }
  std::vector<StreamedTensor> streamed;
  std::set<std::string> removed;
  for (int i = 0; i < sg->initializer_size(); ++i) {
    const nibble_onnx::TensorProto& t = sg->initializer(i);
    if (folded_inputs.count(t.name()) && !uses.count(t.name())) {
      removed.insert(t.name());
      ++report->removed_initializers;
      continue;
    }
    if (HasExternalData(t)) {
      auto desc = TensorResolver::Describe(t);
      if (!desc.ok()) return desc.status();
      StreamedTensor s;
      s.meta.set_name(t.name());
      s.meta.set_data_type(t.data_type());
      for (int64_t d : t.dims()) s.meta.add_dims(d);
      s.bytes = desc->size_bytes;
      const nibble_onnx::TensorProto* tp = &t;
      s.fill = [&resolver, tp](uint8_t* dst_bytes) -> Status {
        Tensor scratch;
        auto v = resolver.Resolve(*tp, &scratch);
        if (!v.ok()) return v.status();
        if (v->size_bytes) std::memcpy(dst_bytes, v->data, v->size_bytes);
        return Status::Ok();
      };
      streamed.push_back(std::move(s));
    } else if (folded_inputs.count(t.name())) {
      *dg->add_initializer() = t;  // a fold still reads this one's bytes
    } else {
      dg->add_initializer()->Swap(sg->mutable_initializer(i));  // move, no copy
    }
  }
  // Old-IR models list initializers among graph inputs: drop removed ones.
  {
    google::protobuf::RepeatedPtrField<nibble_onnx::ValueInfoProto> kept_inputs;
    for (const auto& vi : dg->input()) {
      if (!removed.count(vi.name())) *kept_inputs.Add() = vi;
    }
    dg->mutable_input()->Swap(&kept_inputs);
  }
  // The folded weights, produced while writing (one fold's inputs and
  // output in memory at a time).
  const int threads = options.threads;
  for (const auto& f : folds) {
    StreamedTensor s;
    const OutputInfo& o = f.output;
    s.meta.set_name(f.weight_name);
    s.meta.set_data_type(static_cast<int32_t>(o.dtype));
    const Shape shape = f.transpose ? Shape{f.cols, f.rows} : o.shape;
    for (int64_t d : shape) s.meta.add_dims(d);
    s.bytes =
        static_cast<uint64_t>(f.rows * f.cols) * static_cast<uint64_t>(DTypeBits(o.dtype) / 8);
    report->dequantized_bytes += s.bytes;
    const nibble_onnx::NodeProto* node = &sg->node(static_cast<int>(f.node));
    const bool transpose = f.transpose;
    const uint64_t bytes = s.bytes;
    s.fill = [&prepare, node, transpose, shape, threads, o, bytes](uint8_t* dst_bytes) -> Status {
      std::vector<Tensor> storage;
      auto dq = prepare(*node, &storage);
      if (!dq.ok()) return dq.status();
      MutableTensorView y{o.dtype, shape, dst_bytes, static_cast<size_t>(bytes)};
      return transpose ? dq->RunTransposed(y, threads) : dq->Run(y, threads);
    };
    streamed.push_back(std::move(s));
  }
  // MatMul / Add need the default domain.
  if (report->matmulnbits_nodes > 0 && ModelOpset(dst, "") < 13) {
    bool found = false;
    for (auto& op : *dst.mutable_opset_import()) {
      if (IsDefaultDomain(op.domain())) op.set_version(13), found = true;
    }
    if (!found) {
      auto* op = dst.add_opset_import();
      op->set_domain("");
      op->set_version(13);
    }
  }
  if (report->overridable_nodes > 0) {
    report->note = std::to_string(report->overridable_nodes) +
                   " quantized node(s) left as they are: they read initializers that are also "
                   "graph inputs (values a caller may override); remove those from the graph "
                   "inputs to fold them";
  }
  if (folds.empty()) {
    if (report->note.empty()) report->note = "nothing to fold; the model is copied unchanged";
    if (streamed.empty() && !options.external) {  // no external data: a byte copy
      auto bytes = ReadSmallFile(in, kMaxProtoFileBytes, "ONNX model");
      if (!bytes.ok()) return bytes.status();
      return WriteFileAtomic(out, *bytes);
    }
  }

  ModelWriteOptions wo;
  wo.external = options.external || InlineModelBytes(dst, streamed) > kMaxInlineModelBytes;
  wo.external_name = options.external_name;
  report->external = wo.external;
  if (wo.external) {
    auto data_path = ExternalDataPathFor(out, wo.external_name);
    if (!data_path.ok()) return data_path.status();
    NIBBLE_RETURN_IF_ERROR(CheckOutputPath(*data_path, inputs, "external data output"));
  }
  if (options.progress) {
    wo.progress = [&options](size_t i, size_t n, uint64_t bytes) {
      options.progress(Progress{i, n, bytes, 0});
    };
  }
  wo.cancelled = options.cancelled;
  std::vector<std::string> stale;
  wo.removed_stale = &stale;
  if (wo.external) {
    // A run killed between the two commits of an earlier replacement left
    // the old data under a backup name (onnx/onnx_writer.h): say where.
    auto data_path = ExternalDataPathFor(out, wo.external_name);
    if (data_path.ok()) {
      for (const std::string& old : FindStale(*data_path, "nibble-old")) {
        report->notes.push_back("'" + EscapeBytes(old) +
                                "' is the external data a run killed while replacing it kept; "
                                "this run writes the pair anew, so it is no longer needed: "
                                "remove it");
      }
    }
  }
  const Status st = WriteModelStreaming(out, dst, streamed, wo);
  for (const std::string& p : stale) {
    report->notes.push_back(StaleTemporaryNote(p));
  }
  return st;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("FoldModel");
}

StatusOr<std::vector<QuantizedWeightInfo>> InspectModel(const std::string& path) try {
  nibble_onnx::ModelProto m;
  NIBBLE_RETURN_IF_ERROR(ReadProtoFile(path, &m));
  if (!m.has_graph()) {
    return Status::Error("'" + EscapeBytes(path) + "' has no graph (not an ONNX model?)");
  }
  const auto& g = m.graph();
  std::map<std::string, const nibble_onnx::TensorProto*> inits;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  const int64_t model_opset = ModelOpset(m, "");
  // A weight's inputs are initializers; other names (activations) are not
  // weights and are skipped, but a malformed initializer is an error.
  auto describe = [&](const std::string& name) -> StatusOr<TensorView> {
    auto it = inits.find(name);
    if (it == inits.end()) return Status::Error("not an initializer");
    return TensorResolver::Describe(*it->second);
  };
  auto is_init = [&](const std::string& name) { return inits.count(name) > 0; };
  std::vector<QuantizedWeightInfo> out;
  for (const auto& n : g.node()) {
    const bool dq = internal::IsDequantizeNode(n), mm = internal::IsMatMulNBitsNode(n);
    if (!dq && !mm) continue;
    if (n.input_size() < (mm ? 3 : 2)) continue;
    QuantizedWeightInfo w;
    w.node = n.name().empty() ? (n.output_size() ? n.output(0) : "") : n.name();
    const std::string x_name = mm ? n.input(1) : n.input(0);
    const std::string s_name = mm ? n.input(2) : n.input(1);
    if (!is_init(x_name) || !is_init(s_name)) continue;  // activations are not weights
    StatusOr<MatMulNBitsAttributes> mm_attrs = MatMulNBitsAttributes();
    if (mm) {  // attributes first: the sizes below use them
      mm_attrs = MatMulNBitsAttributesFromNode(n);
      if (!mm_attrs.ok()) return mm_attrs.status();
    }
    auto x = describe(x_name);
    if (!x.ok()) return x.status().WithPrefix(internal::NodeLabel(n));
    auto scale = describe(s_name);
    if (!scale.ok()) return scale.status().WithPrefix(internal::NodeLabel(n));
    const int zi = mm ? 3 : 2;
    StatusOr<TensorView> zp = Status::Error("absent");
    if (n.input_size() > zi && !n.input(zi).empty()) {
      zp = describe(n.input(zi));
      if (!zp.ok() && is_init(n.input(zi))) return zp.status().WithPrefix(internal::NodeLabel(n));
    }
    w.name = x_name;
    w.packed_bytes = x->size_bytes + scale->size_bytes + (zp.ok() ? zp->size_bytes : 0);
    TensorView zv = zp.ok() ? *zp : TensorView{};
    if (mm) {
      const auto& a = mm_attrs;  // validated: K * N fits
      w.kind = "MatMulNBits";
      w.element_type = "uint" + std::to_string(a->bits) + " (MatMulNBits)";
      w.shape = {a->K, a->N};
      w.logical_shape = ShapeToString(w.shape);
      w.bits = static_cast<int>(a->bits);
      w.granularity = "block " + std::to_string(a->block_size);
      w.axis = "K";
      w.zero_point =
          zp.ok() ? (zp->dtype == DType::kUInt8 ? "uint" + std::to_string(a->bits) + " (packed)"
                                                : DTypeName(zp->dtype))
                  : "none (" + std::to_string(1 << (a->bits - 1)) + ")";
      w.output_type = DTypeName(scale->dtype);
      w.dequantized_bytes =
          static_cast<uint64_t>(a->K * a->N) * static_cast<uint64_t>(DTypeBits(scale->dtype) / 8);
    } else if (n.domain() == kPmxDomain) {
      auto a = PmxAttributesFromNode(n);
      if (!a.ok()) return a.status();
      auto info = InferPmxOutput(*a, *x, *scale, zp.ok() ? &zv : nullptr);
      if (!info.ok()) return info.status().WithPrefix(w.node);
      w.kind = "opmx DequantizeLinear";
      w.element_type = a->quant_data_type == "int4"
                           ? (x->dtype == DType::kInt16 ? "int4x4 (int16)" : "int4x8 (int32)")
                           : "int8";
      w.bits = a->quant_data_type == "int4" ? 4 : 8;
      w.shape = info->shape;
      w.logical_shape = ShapeToString(w.shape);
      w.granularity = a->group_size > 0 ? "group " + std::to_string(a->group_size)
                      : *CheckedNumElements(scale->shape, "scale") == 1 ? "per-tensor"
                                                                        : "per-channel";
      w.axis = std::to_string(a->quant_axis);
      w.zero_point =
          !zp.ok() ? "none" : (a->float_zeropoint ? "float " : "") + DTypeName(zp->dtype);
      w.output_type = DTypeName(info->dtype);
      w.dequantized_bytes = static_cast<uint64_t>(*CheckedNumElements(info->shape, "y")) *
                            static_cast<uint64_t>(DTypeBits(info->dtype) / 8);
    } else {
      auto a = OnnxAttributesFromNode(n, model_opset);
      if (!a.ok()) return a.status();
      auto info = InferOnnxOutput(*a, *x, *scale, zp.ok() ? &zv : nullptr, w.node);
      if (!info.ok()) return info.status();
      w.kind = "DequantizeLinear";
      w.element_type = DTypeName(x->dtype);
      w.bits = DTypeBits(x->dtype);
      w.shape = x->shape;
      w.logical_shape = ShapeToString(w.shape);
      const int64_t ns = *CheckedNumElements(scale->shape, "scale");
      w.granularity = ns == 1             ? "per-tensor"
                      : a->block_size > 0 ? "block " + std::to_string(a->block_size)
                                          : "per-axis";
      w.axis = ns == 1 ? "-" : std::to_string(a->axis);
      w.zero_point = zp.ok() ? DTypeName(zp->dtype) : "none";
      w.output_type = DTypeName(info->dtype);
      w.dequantized_bytes = static_cast<uint64_t>(*CheckedNumElements(info->shape, "y")) *
                            static_cast<uint64_t>(DTypeBits(info->dtype) / 8);
    }
    out.push_back(std::move(w));
  }
  return out;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("InspectModel");
}

}  // namespace nibble
