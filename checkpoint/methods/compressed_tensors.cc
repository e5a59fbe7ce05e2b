#include "checkpoint/methods/compressed_tensors.h"

#include <cctype>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <utility>

#include "checkpoint/methods/scale_grid.h"
#include "op/lowering.h"

namespace nibble {

StatusOr<Dequantizer> PrepareCompressedTensors(const CompressedTensorsWeight& w, DType out,
                                               const std::string& name) try {
  const std::string who = "compressed-tensors '" + name + "'";
  if (w.weight == nullptr || w.scale == nullptr) {
    return Status::Error(who + ": needs the weight and its weight_scale");
  }
  const TensorView& q = *w.weight;
  int64_t N = 0, K = 0;
  if (w.packed) {
    if (w.bits != 4 && w.bits != 8) {
      return Status::Error(who + ": pack-quantized with " + std::to_string(w.bits) +
                           " bits is not supported (4 and 8 are; other widths straddle words)");
    }
    if (w.weight_shape == nullptr) return Status::Error(who + ": weight_shape is missing");
    const TensorView& ws = *w.weight_shape;
    if (!internal::IsIntegerDType(ws.dtype) || ws.shape.size() != 1 || ws.shape[0] != 2 ||
        ws.size_bytes != static_cast<size_t>(2 * DTypeBits(ws.dtype) / 8)) {
      return Status::Error(who + ": weight_shape must be an integer tensor [2] (got " +
                           DTypeName(ws.dtype) + " " + ShapeToString(ws.shape) + ")");
    }
    N = internal::IntegerElement(ws, 0);
    K = internal::IntegerElement(ws, 1);
    const int64_t per_word = 32 / w.bits;
    if (N <= 0 || K <= 0 || N > (int64_t{1} << 36) || K > (int64_t{1} << 36)) {
      return Status::Error(who + ": weight_shape [" + std::to_string(N) + ", " + std::to_string(K) +
                           "] is invalid");
    }
    const Shape want{N, (K + per_word - 1) / per_word};
    NIBBLE_RETURN_IF_ERROR(internal::CheckInt32(q, q.shape, "weight_packed", who));
    if (q.shape != want) {
      return Status::Error(who + ": weight_packed shape " + ShapeToString(q.shape) +
                           " does not match weight_shape [" + std::to_string(N) + ", " +
                           std::to_string(K) + "] at " + std::to_string(w.bits) +
                           " bits (expected " + ShapeToString(want) + ")");
    }
    if (K % per_word != 0) {
      return Status::Error(who + ": K = " + std::to_string(K) + " is not a multiple of " +
                           std::to_string(per_word) +
                           " (rows padded to whole words are not supported)");
    }
  } else {
    if (q.dtype != DType::kInt8 || q.shape.size() != 2) {
      return Status::Error(who + ": an int-quantized weight must be int8 [N, K] (got " +
                           DTypeName(q.dtype) + " " + ShapeToString(q.shape) + ")");
    }
    N = q.shape[0];
    K = q.shape[1];
    auto n = internal::CheckView(q, "weight");
    if (!n.ok()) return n.status().WithPrefix(who);
  }
  const TensorView& sc = *w.scale;
  // Scale: [N, groups] / [N] (channel) / one value (tensor).
  int64_t groups = 1;
  bool per_tensor = false;
  int64_t scale_elems = 1;
  for (int64_t d : sc.shape) scale_elems *= d;
  if (sc.shape.size() == 2 && sc.shape[0] == N) {
    groups = sc.shape[1];
  } else if (sc.shape.size() == 1 && sc.shape[0] == N && N != 1) {
    groups = 1;
  } else if (scale_elems == 1) {
    per_tensor = true;
  } else {
    return Status::Error(who + ": weight_scale shape " + ShapeToString(sc.shape) +
                         " fits neither [N, groups] nor one value (N = " + std::to_string(N) + ")");
  }
  if (groups <= 0) return Status::Error(who + ": weight_scale has no groups");
  int64_t G = (K + groups - 1) / groups;
  if (w.group_size > 0 && w.g_idx == nullptr && (K + w.group_size - 1) / w.group_size == groups) {
    G = w.group_size;
  }
  if ((K + G - 1) / G != groups) {
    return Status::Error(who + ": weight_scale has " + std::to_string(groups) +
                         " groups, which no group size over K = " + std::to_string(K) + " gives");
  }
  auto ot = internal::ResolveOutType(out, sc.dtype, who);
  if (!ot.ok()) return ot.status();

  Plan plan;
  Dequantizer::Storage st;
  plan.layout = Layout::kDense;
  plan.codes = static_cast<const uint8_t*>(q.data);
  plan.out = *ot;
  plan.outer = N;
  plan.axis = K;
  plan.inner = 1;
  plan.group = per_tensor ? K : G;
  plan.s_outer = per_tensor ? 0 : groups;
  plan.s_axis = per_tensor ? 0 : 1;
  const int32_t offset = w.packed ? (1 << (w.bits - 1)) : 0;
  plan.code = w.packed ? (w.bits == 4 ? CodeKind::kU4 : CodeKind::kU8) : CodeKind::kS8;
  NIBBLE_RETURN_IF_ERROR(internal::WidenScale(sc, "weight_scale", &st.scale, &plan.scale,
                                              internal::ScaleFactsFor(plan.out, &st.scale_facts))
                             .WithPrefix(who));
  if (w.zero_point != nullptr) {
    const TensorView& z = *w.zero_point;
    const int64_t zn = per_tensor ? 1 : N;
    st.zp_int.resize(static_cast<size_t>(zn * groups));
    if (w.packed && (z.dtype == DType::kInt32 || z.dtype == DType::kUInt32)) {
      // Packed down the rows, stored + offset like the codes.
      const int64_t per_word = 32 / w.bits;
      const Shape want{(zn + per_word - 1) / per_word, groups};
      NIBBLE_RETURN_IF_ERROR(internal::CheckInt32(z, want, "weight_zero_point", who));
      const auto* zb = static_cast<const uint8_t*>(z.data);
      const uint32_t mask = (1u << w.bits) - 1u;
      internal::ForParamRanges(zn * groups, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          const int64_t n = i / groups, g = i % groups;
          const uint32_t word = internal::LoadU32(zb + 4 * ((n / per_word) * groups + g));
          st.zp_int[static_cast<size_t>(i)] =
              static_cast<int32_t>((word >> (w.bits * (n % per_word))) & mask);
        }
      });
    } else {
      // Unpacked zero points: int8 [N, groups] (or one) holding zp itself.
      int64_t ze = 1;
      for (int64_t d : z.shape) ze *= d;
      if (!internal::IsIntegerDType(z.dtype) || ze != zn * groups) {
        return Status::Error(who + ": weight_zero_point " + DTypeName(z.dtype) + " " +
                             ShapeToString(z.shape) + " does not match weight_scale " +
                             ShapeToString(sc.shape));
      }
      auto n = internal::CheckView(z, "weight_zero_point");
      if (!n.ok()) return n.status().WithPrefix(who);
      internal::ForParamRanges(ze, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          st.zp_int[static_cast<size_t>(i)] =
              static_cast<int32_t>(internal::IntegerElement(z, i) + offset);
        }
      });
    }
    plan.zp_kind = ZeroPointKind::kInteger;
    plan.zp_int = st.zp_int.data();
  } else {
    plan.code_offset = offset;
  }
  if (w.g_idx != nullptr && !per_tensor) {
    const TensorView& gi = *w.g_idx;
    if ((gi.dtype != DType::kInt32 && gi.dtype != DType::kInt64) || gi.shape != Shape{K}) {
      return Status::Error(who + ": weight_g_idx must be int32 / int64 [" + std::to_string(K) +
                           "] (got " + DTypeName(gi.dtype) + " " + ShapeToString(gi.shape) + ")");
    }
    auto n = internal::CheckView(gi, "weight_g_idx");
    if (!n.ok()) return n.status().WithPrefix(who);
    st.axis_group.resize(static_cast<size_t>(K));
    bool contiguous = true;
    for (int64_t k = 0; k < K; ++k) {
      const int64_t g = internal::IntegerElement(gi, k);
      if (g < 0 || g >= groups) {
        return Status::Error(who + ": weight_g_idx[" + std::to_string(k) +
                             "] = " + std::to_string(g) + " is outside the " +
                             std::to_string(groups) + " groups");
      }
      st.axis_group[static_cast<size_t>(k)] = static_cast<int32_t>(g);
      contiguous = contiguous && g == k / G;
    }
    if (contiguous) {
      st.axis_group.clear();
    } else {
      plan.axis_group = st.axis_group.data();
    }
  }
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), {N, K}}, name);
  d.set_inputs({Dequantizer::InputOf(w.packed ? "weight_packed" : "weight", w.weight),
                Dequantizer::InputOf("weight_scale", w.scale),
                Dequantizer::InputOf("weight_zero_point", w.zero_point),
                Dequantizer::InputOf("weight_g_idx", w.g_idx)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareCompressedTensors");
}

StatusOr<CompressedTensorsConfig> ParseCompressedTensorsConfig(const nlohmann::json& q,
                                                               const std::string& who) {
  CompressedTensorsConfig c;
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "format", who, &c.format));
  NIBBLE_RETURN_IF_ERROR(internal::JsonStringList(q, "ignore", who, &c.ignore));
  auto sp = q.find("sparsity_config");
  if (sp != q.end() && !sp->is_null() && !(sp->is_object() && sp->empty())) {
    return Status::Error(who + ": compressed-tensors sparsity_config is not supported");
  }
  auto groups = q.find("config_groups");
  if (groups == q.end() || !groups->is_object() || groups->empty()) {
    return Status::Error(who + ": compressed-tensors needs a non-empty 'config_groups' object");
  }
  for (const auto& [name, g] : groups->items()) {
    const std::string gw = who + " config_groups." + name;
    if (!g.is_object()) return Status::Error(gw + " must be an object");
    CompressedTensorsGroup cg;
    cg.name = name;
    cg.format = c.format;
    NIBBLE_RETURN_IF_ERROR(internal::JsonString(g, "format", gw, &cg.format));
    NIBBLE_RETURN_IF_ERROR(internal::JsonStringList(g, "targets", gw, &cg.targets));
    auto w = g.find("weights");
    if (w == g.end() || w->is_null()) continue;  // activations only: weights stay float
    if (!w->is_object()) return Status::Error(gw + ".weights must be an object");
    const std::string ww = gw + ".weights";
    int64_t bits = 4;
    NIBBLE_RETURN_IF_ERROR(internal::JsonInt(*w, "num_bits", ww, &bits));
    if (bits < 1 || bits > 32) return Status::Error(ww + ": num_bits " + std::to_string(bits));
    cg.bits = static_cast<int>(bits);
    NIBBLE_RETURN_IF_ERROR(internal::JsonString(*w, "type", ww, &cg.type));
    NIBBLE_RETURN_IF_ERROR(internal::JsonBool(*w, "symmetric", ww, &cg.symmetric));
    NIBBLE_RETURN_IF_ERROR(internal::JsonString(*w, "strategy", ww, &cg.strategy));
    NIBBLE_RETURN_IF_ERROR(internal::JsonInt(*w, "group_size", ww, &cg.group_size));
    auto bs = w->find("block_structure");
    if (bs != w->end() && !bs->is_null()) {
      // [bn, bk]; early releases wrote the string "BNxBK".
      std::vector<int64_t> b;
      if (bs->is_array()) {
        for (const auto& x : *bs) b.push_back(x.is_number_integer() ? x.get<int64_t>() : 0);
      } else if (bs->is_string()) {
        const std::string t = bs->get<std::string>();
        const size_t x = t.find('x');
        try {
          if (x != std::string::npos) b = {std::stoll(t.substr(0, x)), std::stoll(t.substr(x + 1))};
        } catch (const std::exception&) {
          b.clear();
        }
      }
      if (b.size() != 2 || b[0] <= 0 || b[1] <= 0 || b[0] > (int64_t{1} << 30) ||
          b[1] > (int64_t{1} << 30)) {
        return Status::Error(ww + ": 'block_structure' must be two positive integers (got " +
                             bs->dump() + ")");
      }
      cg.block = b;
    }
    auto ao = w->find("actorder");
    if (ao != w->end() && ao->is_string()) cg.actorder = internal::Lower(ao->get<std::string>());
    if (ao != w->end() && ao->is_boolean() && ao->get<bool>()) cg.actorder = "group";
    cg.type = internal::Lower(cg.type);
    cg.strategy = internal::Lower(cg.strategy);
    c.groups.push_back(std::move(cg));
  }
  return c;
}

const CompressedTensorsGroup* MatchCompressedTensorsGroup(const CompressedTensorsConfig& c,
                                                          const std::string& module) {
  for (const CompressedTensorsGroup& g : c.groups) {
    for (const std::string& t : g.targets) {
      if (t.rfind("re:", 0) == 0) {
        try {
          if (std::regex_search(module, std::regex(t.substr(3)),
                                std::regex_constants::match_continuous)) {
            return &g;
          }
        } catch (const std::regex_error&) {
          continue;  // an invalid pattern targets nothing
        }
      } else if (t == module) {
        return &g;
      } else if (!t.empty() && std::isupper(static_cast<unsigned char>(t[0])) &&
                 t.find('.') == std::string::npos) {
        return &g;  // a class name ("Linear"): every quantized layer has one
      }
    }
  }
  return nullptr;
}

namespace {

// The compressed-tensors layers: `.weight_packed` (pack-quantized), and
// under a compressed-tensors config a `.weight` with a `.weight_scale`
// beside it (the unpacked formats keep the codes under the plain name:
// only the config and the scale tell).
class CompressedTensorsLister : public HfMethod {
 public:
  explicit CompressedTensorsLister(std::optional<CompressedTensorsConfig> config)
      : c_(std::move(config)) {}

  Status List(HfLayers* L) const override {
    if (c_) {
      L->Property("format", c_->format);
      for (const auto& g : c_->groups) {
        std::string targets;
        for (const auto& t : g.targets) targets += (targets.empty() ? "" : ", ") + t;
        L->Property("group " + g.name,
                    g.format + ", " + g.type + std::to_string(g.bits) + ", " + g.strategy +
                        (g.strategy == "group" ? " " + std::to_string(g.group_size) : "") +
                        (g.symmetric ? ", symmetric" : ", asymmetric") +
                        (g.actorder.empty() ? "" : ", actorder " + g.actorder) + ", targets " +
                        targets);
      }
    }
    for (const SafetensorsSet::Entry& e : L->set().entries()) {
      const std::string& name = e.tensor->name;
      if (L->Consumed(name)) continue;
      if (internal::EndsWith(name, ".weight_packed")) {
        NIBBLE_RETURN_IF_ERROR(Layer(e, true, L));
      } else if (c_ && internal::EndsWith(name, ".weight") &&
                 L->Find(internal::ModuleOf(name, ".weight") + ".weight_scale") != nullptr) {
        NIBBLE_RETURN_IF_ERROR(Layer(e, false, L));
      }
    }
    return Status::Ok();
  }

 private:
  // `packed`: weight_packed (pack-quantized), else the plain weight.
  Status Layer(const SafetensorsSet::Entry& e, bool packed, HfLayers* L) const {
    const std::string& name = e.tensor->name;
    const std::string prefix = internal::ModuleOf(name, packed ? ".weight_packed" : ".weight");
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = name;
    ct.quantized = true;
    ct.kind = "compressed-tensors";
    const SafetensorsSet::Entry* scale = L->Find(prefix + ".weight_scale");
    const SafetensorsSet::Entry* zp = L->Find(prefix + ".weight_zero_point");
    const SafetensorsSet::Entry* shape = L->Find(prefix + ".weight_shape");
    const SafetensorsSet::Entry* g_idx = L->Find(prefix + ".weight_g_idx");
    for (const char* s :
         {".weight_packed", ".weight_scale", ".weight_zero_point", ".weight_shape", ".weight_g_idx",
          ".weight_global_scale", ".input_scale", ".input_global_scale", ".input_zero_point",
          ".output_scale", ".output_zero_point"}) {
      L->Consume(prefix + s);
    }
    L->Consume(name);
    ct.stored_bytes = internal::BytesOf(&e) + internal::BytesOf(scale) + internal::BytesOf(zp) +
                      internal::BytesOf(shape) + internal::BytesOf(g_idx);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      if (ct.shape.empty()) ct.shape = e.tensor->shape;
      L->Add(std::move(ct));
      return Status::Ok();
    };
    if (!c_) {
      return refuse("a compressed-tensors weight without a compressed-tensors quantization_config");
    }
    const CompressedTensorsGroup* g = MatchCompressedTensorsGroup(*c_, prefix);
    if (g == nullptr) return refuse("no compressed-tensors config group targets '" + prefix + "'");
    ct.detail = g->format + ", " + g->type + std::to_string(g->bits) + ", " + g->strategy +
                (g->symmetric ? ", symmetric" : ", asymmetric") + (g_idx ? ", g_idx" : "");
    if (scale == nullptr) return refuse("'" + prefix + ".weight_scale' is missing");
    if (g->type == "float") {
      return FloatLayer(e, packed, prefix, *g, scale, zp, shape, std::move(ct), L);
    }
    ct.stored_dtype = scale->tensor->dtype;
    if (internal::IsFloatDType(scale->tensor->dtype)) ct.out_default = scale->tensor->dtype;
    const std::string want_format =
        packed ? "pack-quantized" : (g->format == "naive-quantized" ? g->format : "int-quantized");
    if (g->format != want_format) {
      return refuse("compressed-tensors format '" + g->format + "' is not supported for '" + name +
                    "' (pack-quantized, int-quantized, naive-quantized, float-quantized and "
                    "nvfp4-pack-quantized are)");
    }
    if (g->type != "int") {
      return refuse("compressed-tensors weights of type '" + g->type +
                    "' are not supported (int is)");
    }
    if (g->strategy != "group" && g->strategy != "channel" && g->strategy != "tensor") {
      return refuse("compressed-tensors strategy '" + g->strategy +
                    "' is not supported (group, channel and tensor are)");
    }
    if ((packed && g->bits != 4 && g->bits != 8) || (!packed && g->bits != 8)) {
      return refuse("compressed-tensors " + want_format + " with num_bits " +
                    std::to_string(g->bits) + " is not supported (" +
                    (packed ? "4 and 8 are: other widths straddle words" : "8 is") + ")");
    }
    if (!packed && e.tensor->dtype != DType::kInt8) {
      return refuse("compressed-tensors int-quantized weights must be int8 (got " +
                    DTypeName(e.tensor->dtype) + ")");
    }
    if (!g->symmetric && zp == nullptr) {
      return refuse("asymmetric, but '" + prefix + ".weight_zero_point' is missing");
    }
    if (packed) {
      if (shape == nullptr) return refuse("'" + prefix + ".weight_shape' is missing");
      // The output shape is stored as data: read its 2 values now.
      CheckpointTensor::Buffers bufs;
      std::optional<TensorView> sv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(shape, &bufs, &sv));
      if (sv->shape != Shape{2} || (sv->dtype != DType::kInt64 && sv->dtype != DType::kInt32)) {
        return refuse("'" + prefix + ".weight_shape' must be int64 [2] (got " +
                      DTypeName(sv->dtype) + " " + ShapeToString(sv->shape) + ")");
      }
      const int64_t d0 = internal::IntegerElement(*sv, 0), d1 = internal::IntegerElement(*sv, 1);
      if (d0 <= 0 || d1 <= 0 || d0 > (int64_t{1} << 36) || d1 > (int64_t{1} << 36)) {
        return refuse("'" + prefix + ".weight_shape' [" + std::to_string(d0) + ", " +
                      std::to_string(d1) + "] is not a valid [N, K]");
      }
      ct.shape = {d0, d1};
    } else {
      ct.shape = e.tensor->shape;
    }
    CompressedTensorsWeight w;
    w.packed = packed;
    w.bits = g->bits;
    w.group_size = g->strategy == "group" ? g->group_size : 0;
    const SafetensorsSet::Entry we = e;
    ct.prepare = [w, we, scale, zp, shape, g_idx, prefix](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> wv, sv, zv, hv, gv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&we, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(scale, bufs, &sv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(zp, bufs, &zv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(shape, bufs, &hv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(g_idx, bufs, &gv));
      CompressedTensorsWeight x = w;
      x.weight = internal::Ptr(wv);
      x.scale = internal::Ptr(sv);
      x.zero_point = internal::Ptr(zv);
      x.weight_shape = internal::Ptr(hv);
      x.g_idx = internal::Ptr(gv);
      return PrepareCompressedTensors(x, out, prefix);
    };
    L->Add(std::move(ct));
    return Status::Ok();
  }

  // A float-typed group's layer: float-quantized (float8 `.weight`) or
  // nvfp4-pack-quantized (`.weight_packed` uint8).
  Status FloatLayer(const SafetensorsSet::Entry& e, bool packed, const std::string& prefix,
                    const CompressedTensorsGroup& g, const SafetensorsSet::Entry* scale,
                    const SafetensorsSet::Entry* zp, const SafetensorsSet::Entry* shape,
                    CheckpointTensor ct, HfLayers* L) const {
    const std::string& name = e.tensor->name;
    const SafetensorsSet::Entry* global = L->Find(prefix + ".weight_global_scale");
    ct.stored_bytes += internal::BytesOf(global);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      if (ct.shape.empty()) ct.shape = e.tensor->shape;
      L->Add(std::move(ct));
      return Status::Ok();
    };
    const bool nvfp4 = g.format == "nvfp4-pack-quantized";
    if (g.format != (packed ? "nvfp4-pack-quantized" : "float-quantized")) {
      return refuse("compressed-tensors format '" + g.format +
                    "' with type float is not supported"
                    " for '" +
                    name + "' (float-quantized and nvfp4-pack-quantized are)");
    }
    if (g.bits != (nvfp4 ? 4 : 8)) {
      return refuse("compressed-tensors " + g.format + " with num_bits " + std::to_string(g.bits) +
                    " is not supported (" + (nvfp4 ? "4" : "8") + " is)");
    }
    if (!g.symmetric) {
      return refuse(
          "compressed-tensors float weights with asymmetric zero points are not "
          "supported");
    }
    const DType wd = e.tensor->dtype;
    const Shape& ws = e.tensor->shape;
    if (ws.size() != 2) {
      return refuse("'" + name + "' has shape " + ShapeToString(ws) + " ([N, K] expected)");
    }
    int64_t N = ws[0], K = ws[1];
    if (N <= 0 || K <= 0 || N > (int64_t{1} << 40) || K > (int64_t{1} << 40)) {
      return refuse("'" + name + "' has shape " + ShapeToString(ws) +
                    " (an empty or too large weight)");
    }
    const DType sd = scale->tensor->dtype;
    if (nvfp4) {
      if (wd != DType::kUInt8) {
        return refuse("'" + name + "' is " + DTypeName(wd) + " (NVFP4 codes are uint8)");
      }
      K = 2 * ws[1];
      if (sd != DType::kFloat8E4M3FN) {
        return refuse("'" + scale->tensor->name + "' is " + DTypeName(sd) +
                      " (NVFP4 scales are float8_e4m3fn)");
      }
      if (global == nullptr) return refuse("'" + prefix + ".weight_global_scale' is missing");
      if (global->tensor->dtype != DType::kFloat32 || internal::BytesOf(global) != 4) {
        return refuse("'" + global->tensor->name + "' must be one float32 (got " +
                      DTypeName(global->tensor->dtype) + " " +
                      ShapeToString(global->tensor->shape) + ")");
      }
      if (shape != nullptr) {
        CheckpointTensor::Buffers bufs;
        std::optional<TensorView> sv;
        NIBBLE_RETURN_IF_ERROR(internal::LoadInto(shape, &bufs, &sv));
        if (sv->shape != Shape{2} || !internal::IsIntegerDType(sv->dtype) ||
            internal::IntegerElement(*sv, 0) != N || internal::IntegerElement(*sv, 1) != K) {
          return refuse("'" + prefix + ".weight_shape' does not state [" + std::to_string(N) +
                        ", " + std::to_string(K) + "], the shape of '" + name + "' unpacked");
        }
      }
    } else {
      if (wd != DType::kFloat8E4M3FN && wd != DType::kFloat8E5M2) {
        return refuse("'" + name + "' is " + DTypeName(wd) +
                      " (float-quantized weights are float8_e4m3fn or float8_e5m2)");
      }
      if (!internal::IsFloatDType(sd)) {
        return refuse("'" + scale->tensor->name + "' is " + DTypeName(sd) +
                      " (float32, bfloat16 or float16 expected)");
      }
    }
    if (zp != nullptr) {
      return refuse("'" + zp->tensor->name +
                    "' is stored, but a symmetric float format has no "
                    "zero point");
    }
    ct.shape = {N, K};
    int64_t br = 0, bc = 0;
    std::string what;
    Status m =
        MatchScaleGrid(N, K, scale->tensor->shape, g.block,
                       g.strategy == "group" || g.strategy == "tensor_group" ? g.group_size : 0,
                       scale->tensor->name, &br, &bc, &what);
    if (!m.ok()) return refuse(m.message());
    // The product's type: the scale's (float-quantized), bfloat16 (NVFP4:
    // the unpacked codes' type).
    const DType product = nvfp4 ? DType::kBFloat16 : sd;
    ct.stored_dtype = product;
    ct.out_default = product;
    ct.detail = g.format + ", " +
                (nvfp4                      ? "e2m1"
                 : wd == DType::kFloat8E5M2 ? "e5m2"
                                            : "e4m3") +
                ", " + what + ", product in " + DTypeName(product);
    const SafetensorsSet::Entry we = e;
    ct.prepare = [we, scale, global, nvfp4, N, K, br, bc, product, prefix](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      const std::string who = "compressed-tensors '" + prefix + "'";
      std::optional<TensorView> wv, sv, gv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&we, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(scale, bufs, &sv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(global, bufs, &gv));
      auto ot = internal::ResolveOutType(out, product, who);
      if (!ot.ok()) return ot.status();
      ScaleGridWeight w;
      w.codes = &*wv;
      w.code = nvfp4 ? CodeKind::kF4E2M1
                     : (wv->dtype == DType::kFloat8E5M2 ? CodeKind::kF8E5M2 : CodeKind::kF8E4M3FN);
      w.N = N;
      w.K = K;
      w.block_rows = br;
      w.block_cols = bc;
      w.out = *ot;
      w.product = internal::OutTypeOf(product);
      NIBBLE_RETURN_IF_ERROR(
          ScaleGridFrom(*sv, "'" + scale->tensor->name + "'", &w.grid).WithPrefix(who));
      if (nvfp4) {
        // _dequantize: scale = scale.to(float32) / global_scale (float32).
        float gs;
        std::memcpy(&gs, gv->data, 4);
        for (float& x : w.grid) x = x / gs;
      }
      return PrepareScaleGrid(std::move(w), prefix + ".weight", who);
    };
    L->Add(std::move(ct));
    return Status::Ok();
  }

  std::optional<CompressedTensorsConfig> c_;
};

}  // namespace

StatusOr<std::unique_ptr<HfMethod>> CompressedTensorsConfigured(const HfConfigFiles& files,
                                                                const std::string& who) {
  auto c = ParseCompressedTensorsConfig(*files.main(), who);
  if (!c.ok()) return c.status();
  return std::unique_ptr<HfMethod>(new CompressedTensorsLister(*c));
}

std::unique_ptr<HfMethod> CompressedTensorsUnconfigured() {
  return std::unique_ptr<HfMethod>(new CompressedTensorsLister(std::nullopt));
}

}  // namespace nibble
