#include "checkpoint/methods/bitsandbytes.h"

#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "op/lowering.h"

namespace nibble {

StatusOr<Dequantizer> PrepareBnb4(const Bnb4Weight& w, DType out, const std::string& name) try {
  const std::string who = "bitsandbytes '" + name + "'";
  if (w.weight == nullptr || w.absmax == nullptr || w.quant_map == nullptr) {
    return Status::Error(who + ": needs the weight, its absmax and its quant_map");
  }
  auto n_or = CheckedNumElements(w.shape, who);
  if (!n_or.ok()) return n_or.status();
  const int64_t n = *n_or;
  if (w.shape.empty() || n <= 0) {
    return Status::Error(who + ": quant_state shape " + ShapeToString(w.shape) + " is empty");
  }
  if (w.blocksize <= 0 || w.blocksize > (int64_t{1} << 20)) {
    return Status::Error(who + ": blocksize " + std::to_string(w.blocksize) + " is invalid");
  }
  const TensorView& q = *w.weight;
  if (q.dtype != DType::kUInt8 && q.dtype != DType::kInt8) {
    return Status::Error(who + ": the packed weight must be uint8 (got " + DTypeName(q.dtype) +
                         ")");
  }
  if (q.size_bytes != static_cast<size_t>((n + 1) / 2)) {
    return Status::Error(who + ": the packed weight has " + std::to_string(q.size_bytes) +
                         " bytes; quant_state shape " + ShapeToString(w.shape) + " needs " +
                         std::to_string((n + 1) / 2));
  }
  const int64_t blocks = (n + w.blocksize - 1) / w.blocksize;
  auto f32_count = [&](const TensorView& v, int64_t count, const char* what) -> Status {
    int64_t e = 1;
    for (int64_t d : v.shape) e *= d;
    if (v.dtype != DType::kFloat32 || e != count ||
        v.size_bytes != static_cast<size_t>(4 * count)) {
      return Status::Error(who + ": " + what + " must be float32 with " + std::to_string(count) +
                           " values (got " + DTypeName(v.dtype) + " " + ShapeToString(v.shape) +
                           ")");
    }
    return Status::Ok();
  };
  NIBBLE_RETURN_IF_ERROR(f32_count(*w.quant_map, 16, "quant_map"));
  auto read_f32 = [](const TensorView& v, int64_t i) {
    float x;
    std::memcpy(&x, static_cast<const uint8_t*>(v.data) + 4 * i, 4);
    return x;
  };
  Dequantizer::Storage st;
  st.code_values.resize(16);
  for (int i = 0; i < 16; ++i) st.code_values[static_cast<size_t>(i)] = read_f32(*w.quant_map, i);
  st.scale.resize(static_cast<size_t>(blocks));
  const TensorView& am = *w.absmax;
  if (w.nested_absmax == nullptr) {
    NIBBLE_RETURN_IF_ERROR(f32_count(am, blocks, "absmax"));
    internal::ForParamRanges(blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) st.scale[static_cast<size_t>(b)] = read_f32(am, b);
    });
  } else {
    if (w.nested_quant_map == nullptr) {
      return Status::Error(who + ": double quantization needs nested_quant_map");
    }
    if (w.nested_blocksize <= 0 || w.nested_blocksize > (int64_t{1} << 20)) {
      return Status::Error(who + ": nested_blocksize " + std::to_string(w.nested_blocksize) +
                           " is invalid");
    }
    if ((am.dtype != DType::kUInt8 && am.dtype != DType::kInt8) ||
        am.size_bytes != static_cast<size_t>(blocks)) {
      return Status::Error(who + ": absmax must be uint8 with " + std::to_string(blocks) +
                           " codes under double quantization (got " + DTypeName(am.dtype) + " " +
                           ShapeToString(am.shape) + ")");
    }
    const int64_t nested = (blocks + w.nested_blocksize - 1) / w.nested_blocksize;
    NIBBLE_RETURN_IF_ERROR(f32_count(*w.nested_absmax, nested, "nested_absmax"));
    NIBBLE_RETURN_IF_ERROR(f32_count(*w.nested_quant_map, 256, "nested_quant_map"));
    const auto* codes = static_cast<const uint8_t*>(am.data);
    internal::ForParamRanges(blocks, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        // bitsandbytes: dequantize_blockwise (one float32 product), then
        // `absmax += offset` (one float32 sum): two roundings, never fused.
        const volatile float prod = read_f32(*w.nested_quant_map, codes[b]) *
                                    read_f32(*w.nested_absmax, b / w.nested_blocksize);
        st.scale[static_cast<size_t>(b)] = prod + w.nested_offset;
      }
    });
  }
  auto ot = internal::ResolveOutType(out, w.dtype, who);
  if (!ot.ok()) return ot.status();
  Plan plan;
  plan.layout = Layout::kDenseHighNibbles;
  plan.code = CodeKind::kTable4;
  plan.codes = static_cast<const uint8_t*>(q.data);
  plan.code_values = st.code_values.data();
  plan.scale = st.scale.data();
  plan.out = *ot;
  plan.inner = 1;
  plan.group = w.blocksize;
  const int64_t cols = w.shape.back();
  if (w.shape.size() >= 2 && cols % w.blocksize == 0 && cols % 2 == 0) {
    // Rows of whole blocks: [rows, cols] so the threads split rows.
    plan.outer = n / cols;
    plan.axis = cols;
    plan.s_outer = cols / w.blocksize;
    plan.s_axis = 1;
  } else {
    plan.outer = 1;
    plan.axis = n;
    plan.s_outer = 0;
    plan.s_axis = 1;
  }
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), w.shape}, name);
  d.set_inputs({Dequantizer::InputOf("weight", w.weight), Dequantizer::InputOf("absmax", w.absmax),
                Dequantizer::InputOf("quant_map", w.quant_map),
                Dequantizer::InputOf("nested_absmax", w.nested_absmax),
                Dequantizer::InputOf("nested_quant_map", w.nested_quant_map)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareBnb4");
}

StatusOr<BnbQuantState> ParseBnbQuantState(const std::string& json, const std::string& who) {
  auto j = internal::ParseJsonObject(json, who);
  if (!j.ok()) return j.status();
  BnbQuantState b;
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(*j, "quant_type", who, &b.quant_type));
  b.quant_type = internal::Lower(b.quant_type);
  if (b.quant_type != "nf4" && b.quant_type != "fp4") {
    return Status::Error(who + ": quant_type '" + b.quant_type + "' is not nf4 or fp4");
  }
  NIBBLE_RETURN_IF_ERROR(internal::JsonInt(*j, "blocksize", who, &b.blocksize));
  if (b.blocksize <= 0) return Status::Error(who + ": 'blocksize' must be a positive integer");
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(*j, "dtype", who, &b.dtype));
  auto sh = j->find("shape");
  if (sh == j->end() || !sh->is_array() || sh->empty()) {
    return Status::Error(who + ": 'shape' must be a non-empty list of integers");
  }
  for (const auto& d : *sh) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0) {
      return Status::Error(who + ": 'shape' must be a non-empty list of integers");
    }
    b.shape.push_back(d.get<int64_t>());
  }
  if (j->contains("nested_blocksize") || j->contains("nested_offset")) {
    b.nested = true;
    NIBBLE_RETURN_IF_ERROR(internal::JsonInt(*j, "nested_blocksize", who, &b.nested_blocksize));
    if (b.nested_blocksize <= 0) {
      return Status::Error(who + ": 'nested_blocksize' must be a positive integer");
    }
    NIBBLE_RETURN_IF_ERROR(internal::JsonString(*j, "nested_dtype", who, &b.nested_dtype));
    auto off = j->find("nested_offset");
    if (off == j->end() || !off->is_number()) {
      return Status::Error(who + ": 'nested_offset' must be a number");
    }
    b.nested_offset = off->get<double>();
  }
  return b;
}

StatusOr<BnbConfig> ParseBnbConfig(const nlohmann::json& q, const std::string& who) {
  BnbConfig c;
  NIBBLE_RETURN_IF_ERROR(internal::JsonBool(q, "load_in_4bit", who, &c.load_in_4bit));
  NIBBLE_RETURN_IF_ERROR(internal::JsonBool(q, "load_in_8bit", who, &c.load_in_8bit));
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "bnb_4bit_quant_type", who, &c.quant_type));
  c.quant_type = internal::Lower(c.quant_type);
  return c;
}

namespace {

// Every layer with a quant_state (4-bit) or an SCB (LLM.int8), whatever
// the config states: the tensors say how they are read.
class BnbLister : public HfMethod {
 public:
  explicit BnbLister(std::optional<BnbConfig> config) : c_(std::move(config)) {}

  Status List(HfLayers* L) const override {
    if (c_) {
      L->Property("load_in_4bit", c_->load_in_4bit ? "true" : "false");
      L->Property("load_in_8bit", c_->load_in_8bit ? "true" : "false");
      if (!c_->quant_type.empty()) L->Property("bnb_4bit_quant_type", c_->quant_type);
    }
    for (const SafetensorsSet::Entry& e : L->set().entries()) {
      const std::string& name = e.tensor->name;
      if (L->Consumed(name)) continue;
      if (name.find(".quant_state.bitsandbytes__") != std::string::npos) {
        NIBBLE_RETURN_IF_ERROR(Bnb4(e, L));
      } else if (internal::EndsWith(name, ".SCB")) {
        Int8(e, L);
      }
    }
    return Status::Ok();
  }

 private:
  // 4-bit: `e` is "<W>.quant_state.bitsandbytes__nf4|fp4".
  Status Bnb4(const SafetensorsSet::Entry& e, HfLayers* L) const {
    const std::string& name = e.tensor->name;
    const std::string w = name.substr(0, name.find(".quant_state.bitsandbytes__"));
    const std::string type = name.substr(name.find("bitsandbytes__") + 14);
    CheckpointTensor ct;
    ct.name = w;
    ct.source = w;
    ct.quantized = true;
    ct.kind = "bitsandbytes";
    const SafetensorsSet::Entry* weight = L->Find(w);
    const SafetensorsSet::Entry* absmax = L->Find(w + ".absmax");
    const SafetensorsSet::Entry* qmap = L->Find(w + ".quant_map");
    const SafetensorsSet::Entry* nabs = L->Find(w + ".nested_absmax");
    const SafetensorsSet::Entry* nmap = L->Find(w + ".nested_quant_map");
    L->Consume(name);
    for (const char* s : {"", ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map"}) {
      L->Consume(w + s);
    }
    ct.stored_bytes = internal::BytesOf(weight) + internal::BytesOf(absmax) +
                      internal::BytesOf(qmap) + internal::BytesOf(nabs) + internal::BytesOf(nmap);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      if (ct.shape.empty() && weight != nullptr) ct.shape = weight->tensor->shape;
      L->Add(std::move(ct));
      return Status::Ok();
    };
    if (type != "nf4" && type != "fp4") {
      return refuse("bitsandbytes quant_state '" + type + "' is not nf4 or fp4");
    }
    if (weight == nullptr) return refuse("'" + w + "' (the packed codes) is missing");
    if (absmax == nullptr) return refuse("'" + w + ".absmax' is missing");
    if (qmap == nullptr) return refuse("'" + w + ".quant_map' is missing");
    if (e.tensor->dtype != DType::kUInt8 || internal::BytesOf(&e) > (uint64_t{1} << 20)) {
      return refuse("'" + name + "' must be a uint8 tensor holding JSON (at most 1 MiB)");
    }
    CheckpointTensor::Buffers bufs;
    std::optional<TensorView> jv;
    NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&e, &bufs, &jv));
    const std::string text(static_cast<const char*>(jv->data), jv->size_bytes);
    auto st = ParseBnbQuantState(text, "'" + name + "'");
    if (!st.ok()) return refuse(st.status().message());
    if (st->quant_type != type) {
      return refuse("'" + name + "' says quant_type '" + st->quant_type + "'");
    }
    if (st->nested && (nabs == nullptr || nmap == nullptr)) {
      return refuse("double quantization, but '" + w + ".nested_absmax' or '" + w +
                    ".nested_quant_map' is missing");
    }
    // The model's type, as torch names it (str(dtype) without "torch.").
    const DType dt = TorchDType(st->dtype);
    if (!IsOutputDType(dt)) {
      return refuse("'" + name + "' names dtype '" + st->dtype +
                    "' (float16, bfloat16 or float32 expected)");
    }
    ct.shape = Shape(st->shape.begin(), st->shape.end());
    auto n = CheckedNumElements(ct.shape, "'" + name + "'");
    if (!n.ok()) return refuse(n.status().message());
    if (internal::BytesOf(weight) != static_cast<uint64_t>((*n + 1) / 2)) {
      return refuse("'" + w + "' holds " + std::to_string(internal::BytesOf(weight)) +
                    " bytes of codes; quant_state shape " + ShapeToString(ct.shape) + " needs " +
                    std::to_string((*n + 1) / 2));
    }
    ct.stored_dtype = dt;
    ct.out_default = dt;
    ct.detail = st->quant_type + ", blocks of " + std::to_string(st->blocksize) +
                (st->nested ? ", double quantization (nested blocks of " +
                                  std::to_string(st->nested_blocksize) + ")"
                            : "");
    Bnb4Weight bw;
    bw.shape = ct.shape;
    bw.blocksize = st->blocksize;
    bw.nested_blocksize = st->nested ? st->nested_blocksize : 256;
    bw.nested_offset = static_cast<float>(st->nested_offset);
    bw.dtype = dt;
    const bool nested = st->nested;
    ct.prepare = [bw, weight, absmax, qmap, nabs, nmap, nested, w](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> wv, av, qv, nav, nqv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(weight, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(absmax, bufs, &av));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(qmap, bufs, &qv));
      if (nested) {
        NIBBLE_RETURN_IF_ERROR(internal::LoadInto(nabs, bufs, &nav));
        NIBBLE_RETURN_IF_ERROR(internal::LoadInto(nmap, bufs, &nqv));
      }
      Bnb4Weight x = bw;
      x.weight = internal::Ptr(wv);
      x.absmax = internal::Ptr(av);
      x.quant_map = internal::Ptr(qv);
      x.nested_absmax = internal::Ptr(nav);
      x.nested_quant_map = internal::Ptr(nqv);
      return PrepareBnb4(x, out, w);
    };
    L->Add(std::move(ct));
    return Status::Ok();
  }

  // LLM.int8 (load_in_8bit): int8 `weight` [N, K], `SCB` float32 [N] (each
  // row's absmax), `weight_format` (0 = row-major). Value as bitsandbytes'
  // int8_vectorwise_dequant computes it: A * SCB.view(-1, 1) *
  // 7.874015718698502e-3 in float32 — two multiplications, in that order,
  // each rounded (Plan::post_scale) — then `.to(dtype)`. Default output:
  // float16 (the type transformers loads these models in).
  void Int8(const SafetensorsSet::Entry& e, HfLayers* L) const {
    const std::string prefix = internal::ModuleOf(e.tensor->name, ".SCB");
    const SafetensorsSet::Entry* weight = L->Find(prefix + ".weight");
    if (weight == nullptr || weight->tensor->dtype != DType::kInt8) return;
    const SafetensorsSet::Entry* format = L->Find(prefix + ".weight_format");
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = prefix + ".weight";
    ct.quantized = true;
    ct.kind = "bitsandbytes";
    ct.detail = "LLM.int8, row scales (SCB)";
    ct.shape = weight->tensor->shape;
    ct.stored_dtype = DType::kFloat16;
    ct.out_default = DType::kFloat16;
    ct.stored_bytes = internal::BytesOf(weight) + internal::BytesOf(&e);
    for (const char* s : {".weight", ".SCB", ".weight_format"}) L->Consume(prefix + s);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      L->Add(std::move(ct));
    };
    const Shape& ws = weight->tensor->shape;
    if (ws.size() != 2) {
      return refuse("'" + ct.name + "' has shape " + ShapeToString(ws) + " ([N, K] expected)");
    }
    if (e.tensor->dtype != DType::kFloat32 ||
        (e.tensor->shape != Shape{ws[0]} && e.tensor->shape != Shape{ws[0], 1})) {
      return refuse("'" + e.tensor->name + "' is " + DTypeName(e.tensor->dtype) + " " +
                    ShapeToString(e.tensor->shape) + " (float32 [" + std::to_string(ws[0]) +
                    "] expected: one absmax per row)");
    }
    if (format != nullptr) {
      CheckpointTensor::Buffers bufs;
      std::optional<TensorView> fv;
      if (internal::BytesOf(format) > 8 || !internal::IsIntegerDType(format->tensor->dtype) ||
          !internal::LoadInto(format, &bufs, &fv).ok() || fv->size_bytes == 0 ||
          internal::IntegerElement(*fv, 0) != 0) {
        return refuse("'" + format->tensor->name +
                      "' is not 0 (row-major): the tiled int8 layouts of old bitsandbytes "
                      "(col_turing, col_ampere) are not read");
      }
    }
    const SafetensorsSet::Entry scb = e;
    const std::string name = ct.name;
    ct.prepare = [weight, scb, name](DType out,
                                     CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      const std::string who = "bitsandbytes LLM.int8 '" + name + "'";
      std::optional<TensorView> wv, sv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(weight, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&scb, bufs, &sv));
      auto ot = internal::ResolveOutType(out, DType::kFloat16, who);
      if (!ot.ok()) return ot.status();
      auto n = internal::CheckView(*wv, "weight");
      if (!n.ok()) return n.status().WithPrefix(who);
      const int64_t N = wv->shape[0], K = wv->shape[1];
      Plan plan;
      Dequantizer::Storage st;
      plan.layout = Layout::kDense;
      plan.code = CodeKind::kS8;
      plan.codes = static_cast<const uint8_t*>(wv->data);
      plan.out = *ot;
      plan.outer = N;
      plan.axis = K;
      plan.inner = 1;
      plan.group = K > 0 ? K : 1;
      plan.s_outer = 1;
      plan.s_axis = 0;
      plan.post_scale = 7.874015718698502e-3f;
      NIBBLE_RETURN_IF_ERROR(
          internal::WidenScale(*sv, "SCB", &st.scale, &plan.scale, nullptr).WithPrefix(who));
      Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(*ot), {N, K}}, name);
      d.set_inputs({Dequantizer::InputOf("weight", internal::Ptr(wv)),
                    Dequantizer::InputOf("SCB", internal::Ptr(sv))});
      return d;
    };
    L->Add(std::move(ct));
  }

  std::optional<BnbConfig> c_;
};

}  // namespace

StatusOr<std::unique_ptr<HfMethod>> BnbConfigured(const HfConfigFiles& files,
                                                  const std::string& who) {
  auto c = ParseBnbConfig(*files.main(), who);
  if (!c.ok()) return c.status();
  return std::unique_ptr<HfMethod>(new BnbLister(*c));
}

std::unique_ptr<HfMethod> BnbUnconfigured() {
  return std::unique_ptr<HfMethod>(new BnbLister(std::nullopt));
}

}  // namespace nibble
