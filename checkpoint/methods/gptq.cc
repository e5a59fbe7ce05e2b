#include "checkpoint/methods/gptq.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "kernels/dequantize.h"
#include "op/lowering.h"

namespace nibble {

StatusOr<Dequantizer> PrepareGptq(const GptqOptions& o, const TensorView& qweight,
                                  const TensorView* qzeros, const TensorView& scales,
                                  const TensorView* g_idx, DType out, const std::string& name) try {
  const std::string who = "GPTQ '" + name + "'";
  if (o.bits == 3) {
    return Status::Error(who +
                         ": 3-bit GPTQ packs values across word boundaries and is not supported "
                         "(2, 4 and 8 bits are)");
  }
  if (o.bits != 2 && o.bits != 4 && o.bits != 8) {
    return Status::Error(who + ": " + std::to_string(o.bits) +
                         "-bit GPTQ is not supported (2, 4 and 8 bits are)");
  }
  const int64_t per_word = 32 / o.bits;
  auto shape = internal::CheckLinear(qweight, scales, per_word, 1, o.group_size, out, who);
  if (!shape.ok()) return shape.status();
  const int64_t K = shape->K, N = shape->N, groups = shape->groups;
  const int64_t G = shape->G;
  const OutType ot = shape->out;

  Plan plan;
  Dequantizer::Storage st;
  plan.code = o.bits == 4 ? CodeKind::kU4 : (o.bits == 8 ? CodeKind::kU8 : CodeKind::kU2);
  plan.codes = static_cast<const uint8_t*>(qweight.data);
  plan.group = G;
  plan.out = ot;
  // 4 bits: the [N, K] view reading qweight's columns directly (with a
  // g_idx: where the kernels have tiles for it); the other widths, and a
  // g_idx elsewhere, use the [K, N] view, written transposed (below).
  plan.layout = Layout::kGptqColumns;
  plan.word_stride = 4 * N;
  plan.outer = N;
  plan.axis = K;
  plan.inner = 1;
  plan.s_outer = 1;
  plan.s_axis = N;
  NIBBLE_RETURN_IF_ERROR(internal::WidenScale(scales, "scales", &st.scale, &plan.scale,
                                              internal::ScaleFactsFor(plan.out, &st.scale_facts))
                             .WithPrefix(who));
  if (qzeros != nullptr) {
    if (N % per_word != 0) {
      return Status::Error(who + ": N = " + std::to_string(N) + " is not a multiple of " +
                           std::to_string(per_word) + " (the zero points' packing)");
    }
    NIBBLE_RETURN_IF_ERROR(internal::CheckInt32(*qzeros, {groups, N / per_word}, "qzeros", who));
    internal::SetZeroPoints(*qzeros, groups, N, o.bits, nullptr, o.zeros, &plan, &st.zp_int);
  } else {
    plan.code_offset = 1 << (o.bits - 1);
  }
  if (g_idx != nullptr) {
    NIBBLE_RETURN_IF_ERROR(internal::CheckInt32(*g_idx, {K}, "g_idx", who));
    const auto* gb = static_cast<const uint8_t*>(g_idx->data);
    bool contiguous = true;
    st.axis_group.resize(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) {
      const auto g = static_cast<int32_t>(internal::LoadU32(gb + 4 * k));
      if (g < 0 || g >= groups) {
        return Status::Error(who + ": g_idx[" + std::to_string(k) + "] = " + std::to_string(g) +
                             " is outside the " + std::to_string(groups) + " groups");
      }
      st.axis_group[static_cast<size_t>(k)] = g;
      contiguous = contiguous && g == k / G;
    }
    if (contiguous) st.axis_group.clear();  // fast path: k / G
  }
  // 4 bits with a g_idx where the kernels have tiles for it (AVX-512, AVX2):
  // the [N, K] view, each column's group from the map.
  if (o.bits == 4 && (st.axis_group.empty() || HasGroupMapColumnTiles())) {
    Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(ot), {N, K}}, name);
    d.set_inputs({Dequantizer::InputOf("qweight", &qweight), Dequantizer::InputOf("qzeros", qzeros),
                  Dequantizer::InputOf("scales", &scales), Dequantizer::InputOf("g_idx", g_idx)});
    return d;
  }
  // The checkpoint's [K, N] order (words of `per_word` fields along K), one
  // scale row per input channel k (picked by g_idx[k] when given).
  internal::SetWordsAlongAxis0(&plan, static_cast<int32_t>(per_word), K, N);
  Dequantizer d(plan, std::move(st), OutputInfo{internal::OutDTypeOf(ot), {N, K}}, name);
  d.set_output_transposed(true);
  d.set_inputs({Dequantizer::InputOf("qweight", &qweight), Dequantizer::InputOf("qzeros", qzeros),
                Dequantizer::InputOf("scales", &scales), Dequantizer::InputOf("g_idx", g_idx)});
  return d;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("PrepareGptq");
}

namespace {

using internal::EndsWith;
using internal::Lower;

// checkpoint_format (or "format", or the marlin flag) of one object: ""
// when it states none.
StatusOr<std::string> FormatOf(const nlohmann::json& q, const std::string& who) {
  bool marlin = false;
  NIBBLE_RETURN_IF_ERROR(internal::JsonBool(q, "is_marlin_format", who, &marlin));
  std::string fmt;
  NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "checkpoint_format", who, &fmt));
  if (fmt.empty()) NIBBLE_RETURN_IF_ERROR(internal::JsonString(q, "format", who, &fmt));
  fmt = Lower(fmt);
  if (marlin) fmt = "marlin";
  if (!fmt.empty() && fmt != "gptq" && fmt != "gptq_v2") {
    return Status::Error(who + ": GPTQ checkpoint_format '" + fmt +
                         "' is not supported (gptq and gptq_v2 are)");
  }
  return fmt;
}

// The producer named by meta.quantizer (a string or a list of strings; the
// first entry), "" when none.
StatusOr<std::string> ProducerOf(const nlohmann::json& q, const std::string& who) {
  auto meta = q.find("meta");
  if (meta == q.end() || meta->is_null()) return std::string();
  if (!meta->is_object()) return Status::Error(who + ": 'meta' must be an object");
  auto it = meta->find("quantizer");
  if (it == meta->end() || it->is_null()) return std::string();
  if (it->is_string()) return it->get<std::string>();
  if (it->is_array() && !it->empty() && (*it)[0].is_string()) return (*it)[0].get<std::string>();
  if (it->is_array() && it->empty()) return std::string();
  return Status::Error(who + ": 'meta.quantizer' must be a string or a list of strings");
}

// One object's settings.
StatusOr<GptqConfig> ParseOne(const nlohmann::json& q, const std::string& who) {
  GptqConfig c;
  c.source = who;
  int64_t bits = 4;
  NIBBLE_RETURN_IF_ERROR(internal::JsonInt(q, "bits", who, &bits));
  if (bits != 2 && bits != 3 && bits != 4 && bits != 8) {
    return Status::Error(who + ": GPTQ with bits = " + std::to_string(bits) +
                         " is not supported (2, 4 and 8 are)");
  }
  c.bits = static_cast<int>(bits);
  NIBBLE_RETURN_IF_ERROR(internal::JsonInt(q, "group_size", who, &c.group_size));
  if (c.group_size == 0 || c.group_size < -1) {
    return Status::Error(who + ": group_size " + std::to_string(c.group_size) +
                         " is invalid (a positive size or -1)");
  }
  NIBBLE_RETURN_IF_ERROR(internal::JsonBool(q, "desc_act", who, &c.desc_act));
  NIBBLE_RETURN_IF_ERROR(internal::JsonBool(q, "sym", who, &c.sym));
  auto fmt = FormatOf(q, who);
  if (!fmt.ok()) return fmt.status();
  c.checkpoint_format = *fmt;
  c.format_source = fmt->empty() ? "" : who + " checkpoint_format";
  auto producer = ProducerOf(q, who);
  if (!producer.ok()) return producer.status();
  c.producer = *producer;
  return c;
}

}  // namespace

StatusOr<GptqConfig> ParseGptqConfig(const HfConfigFiles& files, const std::string& who) {
  std::optional<GptqConfig> main, side;
  if (files.quantization_config != nullptr) {
    auto c = ParseOne(*files.quantization_config, who);
    if (!c.ok()) return c.status();
    main = *c;
  }
  if (files.quantize_config != nullptr) {
    const std::string side_who = "quantize_config.json";
    std::string method = "gptq";
    NIBBLE_RETURN_IF_ERROR(
        internal::JsonString(*files.quantize_config, "quant_method", side_who, &method));
    if (Lower(method) == "gptq") {
      auto c = ParseOne(*files.quantize_config, side_who);
      if (!c.ok()) return c.status();
      side = *c;
    }
  }
  if (!main && !side) return Status::Error(who + ": no GPTQ settings");
  GptqConfig c = main ? *main : *side;
  if (main && side) {
    // Every place that states the format (or the producer) must agree.
    if (!c.checkpoint_format.empty() && !side->checkpoint_format.empty() &&
        c.checkpoint_format != side->checkpoint_format) {
      return Status::Error(who + " says checkpoint_format '" + c.checkpoint_format +
                           "' but quantize_config.json says '" + side->checkpoint_format + "'");
    }
    if (c.checkpoint_format.empty()) {
      c.checkpoint_format = side->checkpoint_format;
      c.format_source = side->format_source;
    }
    if (c.producer.empty()) c.producer = side->producer;
  }
  if (c.checkpoint_format.empty()) {
    // A GPTQ config that does not name a format is AutoGPTQ's, which only
    // ever wrote v1 (GPTQModel and transformers write the key).
    c.checkpoint_format = "gptq";
    c.format_source = "the default of a GPTQ config without checkpoint_format";
  }
  return c;
}

namespace {

// How GPTQ v1 / v2 zero points are decoded in this checkpoint.
struct GptqRule {
  std::string format;  // "gptq", "gptq_v2", or "" (unknown)
  std::string format_source;
  GptqZeros zeros = GptqZeros::kPlusOne;
  std::string zeros_source;
};

StatusOr<GptqRule> ResolveRule(const SafetensorsSet& set, const GptqConfig* q,
                               const CheckpointOptions& o) {
  GptqRule r;
  if (q != nullptr) {
    r.format = q->checkpoint_format;
    r.format_source = q->format_source;
  }
  const bool defaulted = r.format.empty() || r.format_source.rfind("the default", 0) == 0;
  // The safetensors metadata may state it too (GPTQModel writes it).
  std::set<const SafetensorsFile*> seen;
  for (const SafetensorsSet::Entry& e : set.entries()) {
    if (!seen.insert(e.file).second) continue;
    // GPTQModel writes "checkpoint_format", AutoGPTQ "gptq_checkpoint_format".
    auto it = e.file->metadata().find("checkpoint_format");
    if (it == e.file->metadata().end()) it = e.file->metadata().find("gptq_checkpoint_format");
    if (it == e.file->metadata().end()) continue;
    const std::string v = Lower(it->second);
    const std::string where = "the safetensors metadata of '" + e.file->label() + "'";
    if (v != "gptq" && v != "gptq_v2") {
      return Status::Error(where + ": checkpoint_format '" + it->second +
                           "' is not supported (gptq and gptq_v2 are)");
    }
    if (!r.format.empty() && !defaulted && v != r.format) {
      return Status::Error(r.format_source + " says '" + r.format + "' but " + where + " says '" +
                           v + "'");
    }
    if (r.format.empty() || defaulted) {
      r.format = v;
      r.format_source = where;
    }
  }
  if (!o.gptq_format.empty()) {
    if (o.gptq_format != "v1" && o.gptq_format != "v2") {
      return Status::Error("--gptq-format must be v1 or v2 (got '" + o.gptq_format + "')");
    }
    r.format = o.gptq_format == "v1" ? "gptq" : "gptq_v2";
    r.format_source = "--gptq-format " + o.gptq_format;
  }
  const std::string producer = q != nullptr ? q->producer : std::string();
  if (r.format == "gptq_v2") {
    r.zeros = GptqZeros::kStored;
    r.zeros_source = "gptq_v2 stores z";
  } else if (!o.gptq_v1_zeros.empty()) {
    if (o.gptq_v1_zeros == "autogptq") {
      r.zeros = GptqZeros::kPlusOneWrap;
    } else if (o.gptq_v1_zeros == "autogptq-cuda") {
      r.zeros = GptqZeros::kPlusOne;
    } else if (o.gptq_v1_zeros == "gptqmodel") {
      r.zeros = GptqZeros::kWordCarry;
    } else {
      return Status::Error("--gptq-v1-zeros must be autogptq, autogptq-cuda or gptqmodel (got '" +
                           o.gptq_v1_zeros + "')");
    }
    r.zeros_source = "--gptq-v1-zeros " + o.gptq_v1_zeros;
  } else if (Lower(producer).find("gptqmodel") != std::string::npos) {
    r.zeros = GptqZeros::kWordCarry;
    r.zeros_source = "producer '" + producer + "'";
  } else {
    r.zeros = GptqZeros::kPlusOneWrap;
    r.zeros_source = producer.empty() ? "no producer named: AutoGPTQ's default loader"
                                      : "producer '" + producer + "'";
  }
  return r;
}

// The GPTQ layers: with a GPTQ config every `.qweight`; without one, those
// whose scales are [groups, N] with N = qweight's columns.
class GptqLister : public HfMethod {
 public:
  explicit GptqLister(std::optional<GptqConfig> config) : c_(std::move(config)) {}

  Status List(HfLayers* L) const override {
    if (c_) {
      L->Property("bits", std::to_string(c_->bits));
      L->Property("group_size", std::to_string(c_->group_size));
      L->Property("desc_act", c_->desc_act ? "true" : "false");
      L->Property("sym", c_->sym ? "true" : "false");
      if (!c_->producer.empty()) L->Property("producer", c_->producer);
    }
    std::optional<GptqRule> rule;
    for (const SafetensorsSet::Entry& e : L->set().entries()) {
      const std::string& name = e.tensor->name;
      if (!EndsWith(name, ".qweight") || L->Consumed(name)) continue;
      const std::string prefix = internal::ModuleOf(name, ".qweight");
      const SafetensorsSet::Entry* scales = L->Find(prefix + ".scales");
      const Shape& qs = e.tensor->shape;
      const bool shaped = scales != nullptr && qs.size() == 2 &&
                          scales->tensor->shape.size() == 2 && scales->tensor->shape[1] == qs[1];
      if (!c_ && !shaped) continue;  // not GPTQ's (AWQ's, or no method's)
      if (!rule) {
        auto r = ResolveRule(L->set(), c_ ? &*c_ : nullptr, L->options());
        if (!r.ok()) return r.status();
        rule = *r;
        if (!rule->format.empty()) {
          L->Property("checkpoint_format", rule->format + " (" + rule->format_source + ")");
          if (rule->format == "gptq") {
            L->Property("gptq_v1_zeros",
                        std::string(GptqZerosName(rule->zeros)) + " (" + rule->zeros_source + ")");
          }
        }
      }
      Layer(e, prefix, scales, *rule, L);
    }
    return Status::Ok();
  }

 private:
  void Layer(const SafetensorsSet::Entry& e, const std::string& prefix,
             const SafetensorsSet::Entry* scales, const GptqRule& rule, HfLayers* L) const {
    const SafetensorsSet::Entry* qzeros = L->Find(prefix + ".qzeros");
    const SafetensorsSet::Entry* g_idx = L->Find(prefix + ".g_idx");
    const Shape& qs = e.tensor->shape;
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = e.tensor->name;
    ct.quantized = true;
    ct.kind = "GPTQ";
    ct.stored_bytes = internal::BytesOf(&e) + internal::BytesOf(scales) +
                      internal::BytesOf(qzeros) + internal::BytesOf(g_idx);
    for (const char* s : {".qweight", ".scales", ".qzeros", ".g_idx"}) L->Consume(prefix + s);
    if (scales == nullptr || qs.size() != 2 || scales->tensor->shape.size() != 2) {
      ct.supported = false;
      ct.shape = qs;
      ct.why_not = scales == nullptr ? "'" + prefix + ".scales' is missing"
                                     : "qweight and scales must be 2-D (got " + ShapeToString(qs) +
                                           " and " + ShapeToString(scales->tensor->shape) + ")";
      L->Add(std::move(ct));
      return;
    }
    ct.stored_dtype = scales->tensor->dtype;
    if (internal::IsFloatDType(scales->tensor->dtype)) ct.out_default = scales->tensor->dtype;
    const int64_t groups = scales->tensor->shape[0];
    // Bits: from the zero points' packing (or g_idx's length) when they
    // tell; per-module overrides (`dynamic`) may differ from the config.
    int bits = c_ ? c_->bits : 4;
    const int64_t N = qs[1];
    if (qzeros != nullptr && qzeros->tensor->shape.size() == 2 && N > 0) {
      const int64_t zc = qzeros->tensor->shape[1];
      for (int b : {2, 3, 4, 8}) {
        if (zc * 32 == N * b) bits = b;
      }
    } else if (g_idx != nullptr && g_idx->tensor->shape.size() == 1 &&
               g_idx->tensor->shape[0] > 0) {
      const int64_t K = g_idx->tensor->shape[0];
      for (int b : {2, 4, 8}) {
        if (qs[0] * 32 == K * b) bits = b;
      }
    }
    GptqOptions o;
    // Without a GPTQ config the group size comes from the shapes (0).
    o.group_size = c_ ? c_->group_size : 0;
    o.bits = bits;
    o.zeros = rule.zeros;
    ct.shape = {qs[1], bits == 3 ? qs[0] * 32 / 3 : qs[0] * (32 / bits)};
    ct.detail = std::to_string(bits) + "-bit, " +
                (rule.format.empty() ? std::string("format unknown")
                                     : (rule.format == "gptq_v2" ? "gptq_v2" : "gptq (v1)")) +
                ", " + std::to_string(groups) + " groups" + (g_idx ? ", g_idx" : "") +
                (qzeros ? "" : ", no qzeros (z = 2^(bits-1))");
    if (bits == 3) {
      ct.supported = false;
      ct.why_not =
          "3-bit GPTQ packs values across word boundaries and is not supported (2, 4 and 8 bits "
          "are)";
    } else if (qzeros != nullptr && rule.format.empty()) {
      ct.supported = false;
      ct.why_not =
          "the GPTQ checkpoint format (v1 'gptq' stores z - 1, 'gptq_v2' stores z) is stated "
          "nowhere (no config.json / quantize_config.json, no safetensors metadata): give "
          "--gptq-format v1 or v2";
    }
    const SafetensorsSet::Entry qe = e;
    ct.prepare = [o, qe, scales, qzeros, g_idx, prefix](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> qw, sv, zv, gv;
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(&qe, bufs, &qw));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(scales, bufs, &sv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(qzeros, bufs, &zv));
      NIBBLE_RETURN_IF_ERROR(internal::LoadInto(g_idx, bufs, &gv));
      return PrepareGptq(o, *qw, internal::Ptr(zv), *sv, internal::Ptr(gv), out, prefix);
    };
    L->Add(std::move(ct));
  }

  std::optional<GptqConfig> c_;
};

}  // namespace

StatusOr<std::unique_ptr<HfMethod>> GptqConfigured(const HfConfigFiles& files,
                                                   const std::string& who) {
  auto c = ParseGptqConfig(files, who);
  if (!c.ok()) return c.status();
  return std::unique_ptr<HfMethod>(new GptqLister(*c));
}

std::unique_ptr<HfMethod> GptqUnconfigured() {
  return std::unique_ptr<HfMethod>(new GptqLister(std::nullopt));
}

}  // namespace nibble
