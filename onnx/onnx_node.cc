#include "onnx/onnx_node.h"

#include <new>

#include "op/lowering.h"

namespace nibble {

std::string NodeKind(const nibble_onnx::NodeProto& node) {
  const std::string& d = node.domain();
  if (d.empty() || d == "ai.onnx") return node.op_type();
  return d + "::" + node.op_type();
}

namespace {
bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }
}  // namespace

bool IsSupportedNode(const nibble_onnx::NodeProto& node) {
  return node.op_type() == "DequantizeLinear" &&
         (node.domain() == kPmxDomain || IsDefaultDomain(node.domain()));
}

int64_t ModelOpset(const nibble_onnx::ModelProto& model, const std::string& domain) {
  for (const auto& o : model.opset_import()) {
    if (o.domain() == domain || (IsDefaultDomain(domain) && IsDefaultDomain(o.domain()))) {
      return o.version();
    }
  }
  return -1;
}

namespace {

std::string NodeName(const nibble_onnx::NodeProto& node) {
  return node.name().empty() ? (node.output_size() ? node.output(0) : std::string()) : node.name();
}

Status ExpectType(const nibble_onnx::AttributeProto& a,
                  nibble_onnx::AttributeProto::AttributeType t, const char* type_name) {
  // Old writers may leave `type` unset; accept that if the value field fits.
  if (a.type() == t) return Status::Ok();
  if (a.type() == nibble_onnx::AttributeProto::UNDEFINED) {
    if (t == nibble_onnx::AttributeProto::INT && a.has_i()) return Status::Ok();
    if (t == nibble_onnx::AttributeProto::STRING && a.has_s()) return Status::Ok();
  }
  return Status::Error("attribute " + a.name() + " must be of type " + type_name);
}

}  // namespace

StatusOr<PmxAttributes> PmxAttributesFromNode(const nibble_onnx::NodeProto& node) {
  const std::string who = internal::Who(NodeKind(node), NodeName(node));
  PmxAttributes attrs;
  bool have_type = false;
  for (const auto& a : node.attribute()) {
    const std::string& n = a.name();
    Status st;
    if (n == "quant_data_type" || n == "quant_method") {
      st = ExpectType(a, nibble_onnx::AttributeProto::STRING, "STRING");
      if (st.ok()) (n == "quant_data_type" ? attrs.quant_data_type : attrs.quant_method) = a.s();
      if (n == "quant_data_type") have_type = true;
    } else if (n == "quant_axis" || n == "group_size" || n == "has_zeropoint" ||
               n == "float_zeropoint") {
      st = ExpectType(a, nibble_onnx::AttributeProto::INT, "INT");
      if (st.ok()) {
        int64_t* field = n == "quant_axis"      ? &attrs.quant_axis
                         : n == "group_size"    ? &attrs.group_size
                         : n == "has_zeropoint" ? &attrs.has_zeropoint
                                                : &attrs.float_zeropoint;
        *field = a.i();
      }
    } else {
      st = Status::Error("unknown attribute '" + n + "'");
    }
    if (!st.ok()) return st.WithPrefix(who);
  }
  if (!have_type) return Status::Error(who + ": required attribute quant_data_type is missing");
  return attrs;
}

StatusOr<OnnxDequantizeAttributes> OnnxAttributesFromNode(const nibble_onnx::NodeProto& node,
                                                          int64_t model_opset) {
  const std::string who = internal::Who(NodeKind(node), NodeName(node));
  OnnxDequantizeAttributes attrs;
  attrs.opset = OnnxDequantizeVersion(model_opset);
  if (attrs.opset == 0) {
    return Status::Error(who + ": the model imports default-domain opset " +
                         std::to_string(model_opset) +
                         "; DequantizeLinear needs opset 10 or later");
  }
  for (const auto& a : node.attribute()) {
    const std::string& n = a.name();
    Status st;
    if (n == "axis" || n == "block_size" || n == "output_dtype") {
      st = ExpectType(a, nibble_onnx::AttributeProto::INT, "INT");
      if (st.ok()) {
        if (n == "axis") {
          attrs.axis = a.i();
          attrs.has_axis = true;
        } else if (n == "block_size") {
          attrs.block_size = a.i();
          attrs.has_block_size = true;
        } else {
          if (a.i() < 0 || a.i() > 1000) {
            st = Status::Error("attribute output_dtype " + std::to_string(a.i()) +
                               " is not a data type");
          }
          attrs.output_dtype = static_cast<int32_t>(a.i());
          attrs.has_output_dtype = true;
        }
      }
    } else {
      st = Status::Error("unknown attribute '" + n + "'");
    }
    if (!st.ok()) return st.WithPrefix(who);
  }
  return attrs;
}

StatusOr<MatMulNBitsAttributes> MatMulNBitsAttributesFromNode(const nibble_onnx::NodeProto& n) {
  const std::string who = internal::Who(NodeKind(n), NodeName(n));
  MatMulNBitsAttributes a;
  bool has_k = false, has_n = false, has_bs = false;
  for (const auto& at : n.attribute()) {
    const std::string& name = at.name();
    const bool known = name == "K" || name == "N" || name == "bits" || name == "block_size" ||
                       name == "weight_prepacked" || name == "accuracy_level";
    if (!known) continue;  // other attributes only affect how ORT computes
    NIBBLE_RETURN_IF_ERROR(ExpectType(at, nibble_onnx::AttributeProto::INT, "INT").WithPrefix(who));
    if (name == "K") a.K = at.i(), has_k = true;
    if (name == "N") a.N = at.i(), has_n = true;
    if (name == "bits") a.bits = at.i();
    if (name == "block_size") a.block_size = at.i(), has_bs = true;
    if (name == "weight_prepacked") a.weight_prepacked = at.i();
  }
  if (!has_k || !has_n || !has_bs) {
    return Status::Error(who + ": required attribute K, N or block_size is missing");
  }
  NIBBLE_RETURN_IF_ERROR(ValidateMatMulNBitsAttributes(a, who));
  return a;
}

StatusOr<Tensor> RunNode(const nibble_onnx::NodeProto& node,
                         const std::vector<const TensorView*>& inputs, int64_t model_opset,
                         int threads) try {
  const std::string who = internal::Who(NodeKind(node), NodeName(node));
  if (!IsSupportedNode(node)) return Status::Error(who + ": operator not supported");
  const bool onnx_domain = IsDefaultDomain(node.domain());
  // Both domains take (data, scale[, zero point]).
  if (inputs.size() < 2 || inputs[0] == nullptr || inputs[1] == nullptr) {
    return Status::Error(
        who + (onnx_domain ? ": needs inputs x and x_scale" : ": needs inputs X and Scale"));
  }
  if (inputs.size() > 3) {
    return Status::Error(who + ": takes at most 3 inputs (got " + std::to_string(inputs.size()) +
                         ")");
  }
  const TensorView* zp = inputs.size() > 2 ? inputs[2] : nullptr;
  DequantizeOptions opts;
  opts.name = NodeName(node);
  opts.threads = threads;
  if (onnx_domain) {
    auto attrs = OnnxAttributesFromNode(node, model_opset);
    if (!attrs.ok()) return attrs.status();
    return DequantizeOnnx(*attrs, *inputs[0], *inputs[1], zp, opts);
  }
  auto attrs = PmxAttributesFromNode(node);
  if (!attrs.ok()) return attrs.status();
  return DequantizePmx(*attrs, *inputs[0], *inputs[1], zp, opts);
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("RunNode");
}

}  // namespace nibble
