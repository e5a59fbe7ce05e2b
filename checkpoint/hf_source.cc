#include "checkpoint/hf_source.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <optional>
#include <regex>
#include <set>

#include "checkpoint/methods/layers.h"

namespace nibble {
namespace internal {

namespace {

using Entry = SafetensorsSet::Entry;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

uint64_t BytesOf(const Entry* e) { return e == nullptr ? 0 : e->tensor->end - e->tensor->begin; }

// Reads one input tensor (null entry: absent) into a new buffer.
Status LoadInto(const Entry* x, CheckpointTensor::Buffers* bufs, std::optional<TensorView>* out) {
  if (x == nullptr) return Status::Ok();
  auto v = x->file->Load(*x->tensor, bufs->NextBytes());
  if (!v.ok()) return v.status();
  *out = *v;
  return Status::Ok();
}

const TensorView* Ptr(const std::optional<TensorView>& v) { return v ? &*v : nullptr; }

DType FloatDTypeNamed(const std::string& name) {
  if (name == "float16" || name == "half") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  if (name == "float32" || name == "float") return DType::kFloat32;
  return DType::kUndefined;
}

bool IsFloatDType(DType d) {
  return d == DType::kFloat16 || d == DType::kBFloat16 || d == DType::kFloat32;
}

// How GPTQ v1 / v2 zero points are decoded in this checkpoint.
struct GptqRule {
  std::string format;  // "gptq", "gptq_v2", or "" (unknown)
  std::string format_source;
  GptqZeros zeros = GptqZeros::kPlusOne;
  std::string zeros_source;
};

StatusOr<GptqRule> ResolveGptqRule(const SafetensorsSet& set, const HfQuantConfig& q,
                                   const CheckpointOptions& o) {
  GptqRule r;
  if (q.method == HfQuantConfig::Method::kGptq) {
    r.format = q.checkpoint_format;
    r.format_source = q.format_source;
  }
  const bool defaulted = r.format.empty() || r.format_source.rfind("the default", 0) == 0;
  // The safetensors metadata may state it too (GPTQModel writes it).
  std::set<const SafetensorsFile*> seen;
  for (const Entry& e : set.entries()) {
    if (!seen.insert(e.file).second) continue;
    auto it = e.file->metadata().find("checkpoint_format");
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
  if (r.format == "gptq_v2") {
    r.zeros = GptqZeros::kStored;
    r.zeros_source = "gptq_v2 stores z";
  } else if (!o.gptq_v1_zeros.empty()) {
    if (o.gptq_v1_zeros != "autogptq" && o.gptq_v1_zeros != "gptqmodel") {
      return Status::Error("--gptq-v1-zeros must be autogptq or gptqmodel (got '" +
                           o.gptq_v1_zeros + "')");
    }
    r.zeros = o.gptq_v1_zeros == "gptqmodel" ? GptqZeros::kWordCarry : GptqZeros::kPlusOne;
    r.zeros_source = "--gptq-v1-zeros " + o.gptq_v1_zeros;
  } else if (Lower(q.producer).find("gptqmodel") != std::string::npos) {
    r.zeros = GptqZeros::kWordCarry;
    r.zeros_source = "producer '" + q.producer + "'";
  } else {
    r.zeros = GptqZeros::kPlusOne;
    r.zeros_source = q.producer.empty() ? "no producer named: AutoGPTQ's loaders"
                                        : "producer '" + q.producer + "'";
  }
  return r;
}

// The compressed-tensors config group that targets `module`, or null.
const CompressedTensorsGroup* MatchGroup(const HfQuantConfig& q, const std::string& module) {
  for (const CompressedTensorsGroup& g : q.ct_groups) {
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

// Decides which of the tensors no method rule consumed may be copied. A
// copy is only right for a tensor that holds the model's own values; one
// that holds — or sits beside — quantization parameters no rule read would
// be written as raw codes (the failure this guards against: an FP8 weight
// copied unscaled, its scale written as an extra tensor). Refused by name:
//  - quantization parameters by name (GPTQ/AWQ/compressed-tensors/
//    bitsandbytes/FP8/MXFP4/HQQ spellings, QuantParamLeaf) and every other
//    tensor of their module, except a float bias;
//  - under a quantization_config, any tensor that is not float16,
//    bfloat16, float32 or float64 (float8, integers: codes of a layout
//    nibble does not read, or its parameters).
// Without a quantization_config a float8 tensor with no parameters beside it
// is a float tensor like any other and is copied (converted on request).
class CopyGuard {
 public:
  CopyGuard(const SafetensorsSet& set, const HfQuantConfig& q,
            const std::set<std::string>& consumed)
      : q_(q) {
    for (const Entry& e : set.entries()) {
      const std::string& name = e.tensor->name;
      if (consumed.count(name)) continue;
      const auto [module, leaf] = Split(name);
      if (QuantParamLeaf(leaf, q_.method != HfQuantConfig::Method::kNone)) {
        std::string& list = params_[module];
        list += (list.empty() ? "'" : ", '") + name + "'";
      }
    }
  }

  // Why `e` (not consumed by any rule) must not be copied, or nothing.
  std::optional<std::string> Refusal(const Entry& e) const {
    const std::string& name = e.tensor->name;
    const auto [module, leaf] = Split(name);
    const std::string dtype = DTypeName(e.tensor->dtype);
    const std::string config =
        q_.method == HfQuantConfig::Method::kNone
            ? std::string("no quantization_config")
            : std::string("quantization_config ") + HfMethodName(q_.method) +
                  (q_.ct_format.empty() ? "" : " (format " + q_.ct_format + ")");
    const bool plain_float = IsFloatDType(e.tensor->dtype) || e.tensor->dtype == DType::kFloat64;
    // Parameters in the tensor's own module, or under its name
    // ("W.weight" beside "W.weight.absmax").
    auto it = params_.find(module);
    if (it == params_.end()) it = params_.find(name);
    if (it != params_.end()) {
      const bool bias = leaf == "bias" || EndsWith(leaf, "_bias");
      if (QuantParamLeaf(leaf, q_.method != HfQuantConfig::Method::kNone)) {
        return "'" + name + "' is a quantization parameter that no rule nibble knows reads (" +
               config + "); refused rather than copied";
      }
      if (!(bias && plain_float)) {
        return "'" + name + "' (" + dtype + ") has quantization parameters beside it (" +
               it->second + ") that no rule nibble knows applies (" + config +
               "): copying it would write its stored codes, not its values";
      }
    }
    if (q_.method != HfQuantConfig::Method::kNone && !plain_float) {
      return "'" + name + "' is " + dtype + " under a " + config +
             ", but no rule nibble knows reads it (the codes of a quantized layout nibble does "
             "not read?); refused rather than copied (leave it out with --exclude if it is not "
             "a weight)";
    }
    return std::nullopt;
  }

 private:
  // "<module>.<leaf>" -> {module, leaf} ("" module for a top-level name).
  static std::pair<std::string, std::string> Split(const std::string& name) {
    const size_t dot = name.rfind('.');
    if (dot == std::string::npos) return {"", name};
    return {name.substr(0, dot), name.substr(dot + 1)};
  }

  // True for a leaf name that holds quantization parameters or codes in the
  // layouts of the methods nibble knows of (read or not). `configured`:
  // under a quantization_config, where the generic spellings ("scale",
  // "<x>_scale", "<x>_zero_point") mean the same; without one they are
  // left alone (CLIP's logit_scale is a float parameter).
  static bool QuantParamLeaf(const std::string& leaf, bool configured) {
    static const char* const kNames[] = {
        // GPTQ / AWQ / bitsandbytes / HQQ
        "qweight", "qzeros", "scales", "g_idx", "SCB", "weight_format", "absmax", "quant_map",
        "nested_absmax", "nested_quant_map", "W_q",
        // compressed-tensors, FP8 (transformers / DeepSeek), NVFP4, kv-cache
        "weight_scale", "weight_scale_inv", "weight_zero_point", "weight_packed", "weight_shape",
        "weight_g_idx", "weight_global_scale", "input_scale", "input_global_scale",
        "input_zero_point", "output_scale", "output_zero_point", "k_scale", "v_scale", "q_scale"};
    for (const char* n : kNames) {
      if (leaf == n) return true;
    }
    // bitsandbytes' quant_state ("weight.quant_state.bitsandbytes__nf4"
    // splits at its last dot) and MXFP4's "<x>_blocks" / "<x>_scales".
    if (leaf.rfind("bitsandbytes__", 0) == 0) return true;
    if (EndsWith(leaf, "_blocks") || EndsWith(leaf, "_scales")) return true;
    if (!configured) return false;
    for (const char* s : {"_scale", "_scale_inv", "_zero_point", "_zeros", "_global_scale"}) {
      if (EndsWith(leaf, s)) return true;
    }
    return leaf == "scale" || leaf == "zero" || leaf == "zero_point";
  }

  const HfQuantConfig& q_;
  std::map<std::string, std::string> params_;  // module -> its parameters, quoted
};

class Lister {
 public:
  Lister(const SafetensorsSet& set, const HfQuantConfig& q, const CheckpointOptions& o,
         HfListing* out)
      : set_(set), q_(q), o_(o), out_(out) {}

  Status Run() {
    NIBBLE_RETURN_IF_ERROR(Props());
    for (const Entry& e : set_.entries()) {
      const std::string& name = e.tensor->name;
      if (EndsWith(name, ".qweight")) NIBBLE_RETURN_IF_ERROR(GptqOrAwq(e));
      if (EndsWith(name, ".weight_packed")) NIBBLE_RETURN_IF_ERROR(Compressed(e, true));
      // compressed-tensors' unpacked formats (int-quantized, float-quantized,
      // naive-quantized, dense with parameters) keep the codes under the
      // plain name: only the config and the scale beside it tell.
      if (q_.method == HfQuantConfig::Method::kCompressedTensors && EndsWith(name, ".weight") &&
          !consumed_.count(name) && set_.Find(Module(name, ".weight") + ".weight_scale")) {
        NIBBLE_RETURN_IF_ERROR(Compressed(e, false));
      }
      if (name.find(".quant_state.bitsandbytes__") != std::string::npos) {
        NIBBLE_RETURN_IF_ERROR(Bnb4(e));
      }
      if (EndsWith(name, ".SCB")) Int8(e);
    }
    // Everything else is copied through (names and shapes as stored) —
    // unless it is, or belongs with, quantization parameters no rule above
    // read: those are refused by name (CopyGuard), never copied.
    const CopyGuard guard(set_, q_, consumed_);
    for (const Entry& e : set_.entries()) {
      if (consumed_.count(e.tensor->name)) continue;
      if (auto why = guard.Refusal(e)) {
        CheckpointTensor ct;
        ct.name = e.tensor->name;
        ct.source = e.tensor->name;
        ct.kind = "unknown";
        ct.detail = e.tensor->dtype_name;
        ct.shape = e.tensor->shape;
        ct.stored_dtype = e.tensor->dtype;
        ct.stored_bytes = BytesOf(&e);
        ct.quantized = true;
        ct.supported = false;
        ct.why_not = *why;
        out_->tensors.push_back(std::move(ct));
        continue;
      }
      CheckpointTensor ct;
      ct.name = e.tensor->name;
      ct.source = e.tensor->name;
      ct.kind = "copy";
      ct.detail = e.tensor->dtype_name;
      ct.shape = e.tensor->shape;
      ct.stored_dtype = e.tensor->dtype;
      ct.stored_bytes = BytesOf(&e);
      const Entry ce = e;
      ct.read_stored = [ce](uint64_t offset, uint64_t n, uint8_t* dst) {
        return ce.file->ReadInto(*ce.tensor, dst, offset, n);
      };
      out_->tensors.push_back(std::move(ct));
    }
    return Status::Ok();
  }

 private:
  static std::string Module(const std::string& name, const std::string& suffix) {
    return name.substr(0, name.size() - suffix.size());
  }
  const Entry* Find(const std::string& name) { return set_.Find(name); }
  void Consume(const std::string& name) {
    if (set_.Find(name)) consumed_.insert(name);
  }

  Status Props() {
    auto& p = out_->props;
    if (q_.method == HfQuantConfig::Method::kNone) return Status::Ok();
    p.emplace_back("quantization", HfMethodName(q_.method));
    p.emplace_back("from", q_.source);
    switch (q_.method) {
      case HfQuantConfig::Method::kGptq:
      case HfQuantConfig::Method::kAwq:
        p.emplace_back("bits", std::to_string(q_.bits));
        p.emplace_back("group_size", std::to_string(q_.group_size));
        if (q_.method == HfQuantConfig::Method::kAwq) {
          p.emplace_back("version", q_.awq_version);
          p.emplace_back("zero_point", q_.zero_point ? "true" : "false");
        } else {
          p.emplace_back("desc_act", q_.desc_act ? "true" : "false");
          p.emplace_back("sym", q_.sym ? "true" : "false");
          if (!q_.producer.empty()) p.emplace_back("producer", q_.producer);
        }
        break;
      case HfQuantConfig::Method::kCompressedTensors:
        p.emplace_back("format", q_.ct_format);
        for (const auto& g : q_.ct_groups) {
          std::string targets;
          for (const auto& t : g.targets) targets += (targets.empty() ? "" : ", ") + t;
          p.emplace_back("group " + g.name,
                         g.format + ", " + g.type + std::to_string(g.bits) + ", " + g.strategy +
                             (g.strategy == "group" ? " " + std::to_string(g.group_size) : "") +
                             (g.symmetric ? ", symmetric" : ", asymmetric") +
                             (g.actorder.empty() ? "" : ", actorder " + g.actorder) + ", targets " +
                             targets);
        }
        break;
      case HfQuantConfig::Method::kBitsAndBytes:
        p.emplace_back("load_in_4bit", q_.bnb_4bit ? "true" : "false");
        p.emplace_back("load_in_8bit", q_.bnb_8bit ? "true" : "false");
        if (!q_.bnb_quant_type.empty()) p.emplace_back("bnb_4bit_quant_type", q_.bnb_quant_type);
        break;
      case HfQuantConfig::Method::kNone:
        break;
    }
    return Status::Ok();
  }

  StatusOr<GptqRule> Rule() {
    if (!rule_) {
      auto r = ResolveGptqRule(set_, q_, o_);
      if (!r.ok()) return r.status();
      rule_ = *r;
      if (!rule_->format.empty()) {
        out_->props.emplace_back("checkpoint_format",
                                 rule_->format + " (" + rule_->format_source + ")");
        if (rule_->format == "gptq") {
          out_->props.emplace_back("gptq_v1_zeros", std::string(GptqZerosName(rule_->zeros)) +
                                                        " (" + rule_->zeros_source + ")");
        }
      }
    }
    return *rule_;
  }

  Status GptqOrAwq(const Entry& e) {
    const std::string& name = e.tensor->name;
    const std::string prefix = Module(name, ".qweight");
    const Entry* scales = Find(prefix + ".scales");
    const Entry* qzeros = Find(prefix + ".qzeros");
    const Entry* g_idx = Find(prefix + ".g_idx");
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = name;
    ct.quantized = true;
    const Shape& qs = e.tensor->shape;
    ct.stored_bytes = BytesOf(&e) + BytesOf(scales) + BytesOf(qzeros) + BytesOf(g_idx);
    HfQuantConfig::Method method = q_.method;
    if (method != HfQuantConfig::Method::kGptq && method != HfQuantConfig::Method::kAwq) {
      method = HfQuantConfig::Method::kNone;
      if (scales != nullptr && qs.size() == 2 && scales->tensor->shape.size() == 2) {
        // No GPTQ / AWQ config: tell them apart by the shapes (scales [G, N]).
        if (scales->tensor->shape[1] == qs[1]) method = HfQuantConfig::Method::kGptq;
        if (scales->tensor->shape[1] == qs[1] * 8) method = HfQuantConfig::Method::kAwq;
      }
    }
    ct.kind = HfMethodName(method);
    if (scales == nullptr || method == HfQuantConfig::Method::kNone || qs.size() != 2) {
      ct.supported = false;
      ct.kind = "qweight";
      ct.why_not = scales == nullptr
                       ? "'" + prefix + ".scales' is missing"
                       : "no GPTQ / AWQ quantization_config and the shapes fit neither";
      consumed_.insert(name);
      out_->tensors.push_back(std::move(ct));
      return Status::Ok();
    }
    for (const char* s : {".qweight", ".scales", ".qzeros", ".g_idx"}) Consume(prefix + s);
    ct.stored_dtype = scales->tensor->dtype;
    if (IsFloatDType(scales->tensor->dtype)) ct.out_default = scales->tensor->dtype;
    const int64_t groups = scales->tensor->shape.empty() ? 0 : scales->tensor->shape[0];
    const Entry qe = e;
    if (method == HfQuantConfig::Method::kGptq) {
      // Bits: from the zero points' packing (or g_idx's length) when they
      // tell; per-module overrides (`dynamic`) may differ from the config.
      int bits = q_.method == HfQuantConfig::Method::kGptq ? q_.bits : 4;
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
      auto rule = Rule();
      if (!rule.ok()) return rule.status();
      GptqOptions o;
      // Without a GPTQ config the group size comes from the shapes (0).
      o.group_size = q_.method == HfQuantConfig::Method::kGptq ? q_.group_size : 0;
      o.bits = bits;
      o.zeros = rule->zeros;
      ct.shape = {qs[1], bits == 3 ? qs[0] * 32 / 3 : qs[0] * (32 / bits)};
      ct.detail = std::to_string(bits) + "-bit, " +
                  (rule->format.empty() ? std::string("format unknown")
                                        : (rule->format == "gptq_v2" ? "gptq_v2" : "gptq (v1)")) +
                  ", " + std::to_string(groups) + " groups" + (g_idx ? ", g_idx" : "") +
                  (qzeros ? "" : ", no qzeros (z = 2^(bits-1))");
      if (bits == 3) {
        ct.supported = false;
        ct.why_not =
            "3-bit GPTQ packs values across word boundaries and is not supported "
            "(2, 4 and 8 bits are)";
      } else if (qzeros != nullptr && rule->format.empty()) {
        ct.supported = false;
        ct.why_not =
            "the GPTQ checkpoint format (v1 'gptq' stores z - 1, 'gptq_v2' stores z) is stated "
            "nowhere (no config.json / quantize_config.json, no safetensors metadata): give "
            "--gptq-format v1 or v2";
      }
      ct.prepare = [o, qe, scales, qzeros, g_idx, prefix](
                       DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
        std::optional<TensorView> qw, sv, zv, gv;
        NIBBLE_RETURN_IF_ERROR(LoadInto(&qe, bufs, &qw));
        NIBBLE_RETURN_IF_ERROR(LoadInto(scales, bufs, &sv));
        NIBBLE_RETURN_IF_ERROR(LoadInto(qzeros, bufs, &zv));
        NIBBLE_RETURN_IF_ERROR(LoadInto(g_idx, bufs, &gv));
        return PrepareGptq(o, *qw, Ptr(zv), *sv, Ptr(gv), out, prefix);
      };
    } else {
      ct.shape = {qs[1] * 8, qs[0]};
      const bool zero_point = q_.method != HfQuantConfig::Method::kAwq || q_.zero_point;
      ct.detail =
          "gemm, " + std::to_string(groups) + " groups" + (qzeros ? "" : ", symmetric (z = 8)");
      if (!qzeros && zero_point) {
        ct.supported = false;
        ct.why_not = "AWQ GEMM with zero_point needs '" + prefix + ".qzeros'";
      }
      const int64_t g = q_.method == HfQuantConfig::Method::kAwq ? q_.group_size : 0;
      ct.prepare = [g, qe, scales, qzeros, prefix](
                       DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
        std::optional<TensorView> qw, sv, zv;
        NIBBLE_RETURN_IF_ERROR(LoadInto(&qe, bufs, &qw));
        NIBBLE_RETURN_IF_ERROR(LoadInto(scales, bufs, &sv));
        NIBBLE_RETURN_IF_ERROR(LoadInto(qzeros, bufs, &zv));
        return PrepareAwq(g, *qw, Ptr(zv), *sv, out, prefix);
      };
    }
    out_->tensors.push_back(std::move(ct));
    return Status::Ok();
  }

  // compressed-tensors: `packed` weight_packed (pack-quantized), else an
  // int8 weight (int-quantized).
  Status Compressed(const Entry& e, bool packed) {
    const std::string& name = e.tensor->name;
    const std::string prefix = Module(name, packed ? ".weight_packed" : ".weight");
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = name;
    ct.quantized = true;
    ct.kind = "compressed-tensors";
    const Entry* scale = Find(prefix + ".weight_scale");
    const Entry* zp = Find(prefix + ".weight_zero_point");
    const Entry* shape = Find(prefix + ".weight_shape");
    const Entry* g_idx = Find(prefix + ".weight_g_idx");
    for (const char* s :
         {".weight_packed", ".weight_scale", ".weight_zero_point", ".weight_shape", ".weight_g_idx",
          ".weight_global_scale", ".input_scale", ".input_global_scale", ".input_zero_point",
          ".output_scale", ".output_zero_point"}) {
      Consume(prefix + s);
    }
    consumed_.insert(name);
    ct.stored_bytes = BytesOf(&e) + BytesOf(scale) + BytesOf(zp) + BytesOf(shape) + BytesOf(g_idx);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      if (ct.shape.empty()) ct.shape = e.tensor->shape;
      out_->tensors.push_back(std::move(ct));
      return Status::Ok();
    };
    if (q_.method != HfQuantConfig::Method::kCompressedTensors) {
      return refuse("a compressed-tensors weight without a compressed-tensors quantization_config");
    }
    const CompressedTensorsGroup* g = MatchGroup(q_, prefix);
    if (g == nullptr) return refuse("no compressed-tensors config group targets '" + prefix + "'");
    ct.detail = g->format + ", " + g->type + std::to_string(g->bits) + ", " + g->strategy +
                (g->symmetric ? ", symmetric" : ", asymmetric") + (g_idx ? ", g_idx" : "");
    if (scale == nullptr) return refuse("'" + prefix + ".weight_scale' is missing");
    ct.stored_dtype = scale->tensor->dtype;
    if (IsFloatDType(scale->tensor->dtype)) ct.out_default = scale->tensor->dtype;
    const std::string want_format = packed ? "pack-quantized" : "int-quantized";
    if (g->format != want_format) {
      return refuse("compressed-tensors format '" + g->format + "' is not supported for '" + name +
                    "' (pack-quantized and int-quantized are)");
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
      NIBBLE_RETURN_IF_ERROR(LoadInto(shape, &bufs, &sv));
      if (sv->shape != Shape{2} || (sv->dtype != DType::kInt64 && sv->dtype != DType::kInt32)) {
        return refuse("'" + prefix + ".weight_shape' must be int64 [2] (got " +
                      DTypeName(sv->dtype) + " " + ShapeToString(sv->shape) + ")");
      }
      int64_t d[2];
      for (int i = 0; i < 2; ++i) {
        if (sv->dtype == DType::kInt64) {
          std::memcpy(&d[i], static_cast<const uint8_t*>(sv->data) + 8 * i, 8);
        } else {
          int32_t v;
          std::memcpy(&v, static_cast<const uint8_t*>(sv->data) + 4 * i, 4);
          d[i] = v;
        }
      }
      if (d[0] <= 0 || d[1] <= 0 || d[0] > (int64_t{1} << 36) || d[1] > (int64_t{1} << 36)) {
        return refuse("'" + prefix + ".weight_shape' [" + std::to_string(d[0]) + ", " +
                      std::to_string(d[1]) + "] is not a valid [N, K]");
      }
      ct.shape = {d[0], d[1]};
    } else {
      ct.shape = e.tensor->shape;
    }
    CompressedTensorsWeight w;
    w.packed = packed;
    w.bits = g->bits;
    w.group_size = g->strategy == "group" ? g->group_size : 0;
    const Entry we = e;
    ct.prepare = [w, we, scale, zp, shape, g_idx, prefix](
                     DType out, CheckpointTensor::Buffers* bufs) -> StatusOr<Dequantizer> {
      std::optional<TensorView> wv, sv, zv, hv, gv;
      NIBBLE_RETURN_IF_ERROR(LoadInto(&we, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(LoadInto(scale, bufs, &sv));
      NIBBLE_RETURN_IF_ERROR(LoadInto(zp, bufs, &zv));
      NIBBLE_RETURN_IF_ERROR(LoadInto(shape, bufs, &hv));
      NIBBLE_RETURN_IF_ERROR(LoadInto(g_idx, bufs, &gv));
      CompressedTensorsWeight x = w;
      x.weight = Ptr(wv);
      x.scale = Ptr(sv);
      x.zero_point = Ptr(zv);
      x.weight_shape = Ptr(hv);
      x.g_idx = Ptr(gv);
      return PrepareCompressedTensors(x, out, prefix);
    };
    out_->tensors.push_back(std::move(ct));
    return Status::Ok();
  }

  // bitsandbytes 4-bit: `e` is "<W>.quant_state.bitsandbytes__nf4|fp4".
  Status Bnb4(const Entry& e) {
    const std::string& name = e.tensor->name;
    const std::string w = name.substr(0, name.find(".quant_state.bitsandbytes__"));
    const std::string type = name.substr(name.find("bitsandbytes__") + 14);
    CheckpointTensor ct;
    ct.name = w;
    ct.source = w;
    ct.quantized = true;
    ct.kind = "bitsandbytes";
    const Entry* weight = Find(w);
    const Entry* absmax = Find(w + ".absmax");
    const Entry* qmap = Find(w + ".quant_map");
    const Entry* nabs = Find(w + ".nested_absmax");
    const Entry* nmap = Find(w + ".nested_quant_map");
    consumed_.insert(name);
    for (const char* s : {"", ".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map"}) {
      Consume(w + s);
    }
    ct.stored_bytes =
        BytesOf(weight) + BytesOf(absmax) + BytesOf(qmap) + BytesOf(nabs) + BytesOf(nmap);
    auto refuse = [&](const std::string& why) {
      ct.supported = false;
      ct.why_not = why;
      if (ct.shape.empty() && weight != nullptr) ct.shape = weight->tensor->shape;
      out_->tensors.push_back(std::move(ct));
      return Status::Ok();
    };
    if (type != "nf4" && type != "fp4") {
      return refuse("bitsandbytes quant_state '" + type + "' is not nf4 or fp4");
    }
    if (weight == nullptr) return refuse("'" + w + "' (the packed codes) is missing");
    if (absmax == nullptr) return refuse("'" + w + ".absmax' is missing");
    if (qmap == nullptr) return refuse("'" + w + ".quant_map' is missing");
    if (e.tensor->dtype != DType::kUInt8 || BytesOf(&e) > (uint64_t{1} << 20)) {
      return refuse("'" + name + "' must be a uint8 tensor holding JSON (at most 1 MiB)");
    }
    CheckpointTensor::Buffers bufs;
    std::optional<TensorView> jv;
    NIBBLE_RETURN_IF_ERROR(LoadInto(&e, &bufs, &jv));
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
    const DType dt = FloatDTypeNamed(st->dtype);
    if (dt == DType::kUndefined) {
      return refuse("'" + name + "' names dtype '" + st->dtype +
                    "' (float16, bfloat16 or float32 expected)");
    }
    ct.shape = Shape(st->shape.begin(), st->shape.end());
    auto n = CheckedNumElements(ct.shape, "'" + name + "'");
    if (!n.ok()) return refuse(n.status().message());
    if (BytesOf(weight) != static_cast<uint64_t>((*n + 1) / 2)) {
      return refuse("'" + w + "' holds " + std::to_string(BytesOf(weight)) +
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
      NIBBLE_RETURN_IF_ERROR(LoadInto(weight, bufs, &wv));
      NIBBLE_RETURN_IF_ERROR(LoadInto(absmax, bufs, &av));
      NIBBLE_RETURN_IF_ERROR(LoadInto(qmap, bufs, &qv));
      if (nested) {
        NIBBLE_RETURN_IF_ERROR(LoadInto(nabs, bufs, &nav));
        NIBBLE_RETURN_IF_ERROR(LoadInto(nmap, bufs, &nqv));
      }
      Bnb4Weight x = bw;
      x.weight = Ptr(wv);
      x.absmax = Ptr(av);
      x.quant_map = Ptr(qv);
      x.nested_absmax = Ptr(nav);
      x.nested_quant_map = Ptr(nqv);
      return PrepareBnb4(x, out, w);
    };
    out_->tensors.push_back(std::move(ct));
    return Status::Ok();
  }

  // bitsandbytes LLM.int8: listed, refused by name.
  void Int8(const Entry& e) {
    const std::string prefix = Module(e.tensor->name, ".SCB");
    const Entry* weight = Find(prefix + ".weight");
    if (weight == nullptr || weight->tensor->dtype != DType::kInt8) return;
    CheckpointTensor ct;
    ct.name = prefix + ".weight";
    ct.source = prefix + ".weight";
    ct.quantized = true;
    ct.kind = "bitsandbytes";
    ct.detail = "LLM.int8";
    ct.shape = weight->tensor->shape;
    ct.stored_bytes = BytesOf(weight) + BytesOf(&e);
    ct.supported = false;
    ct.why_not =
        "bitsandbytes LLM.int8 (load_in_8bit) is not supported (its value q * SCB / 127 takes "
        "two float32 roundings)";
    for (const char* s : {".weight", ".SCB", ".weight_format"}) Consume(prefix + s);
    out_->tensors.push_back(std::move(ct));
  }

  const SafetensorsSet& set_;
  const HfQuantConfig& q_;
  const CheckpointOptions& o_;
  HfListing* out_;
  std::set<std::string> consumed_;
  std::optional<GptqRule> rule_;
};

}  // namespace

Status ListHfTensors(const SafetensorsSet& set, const HfQuantConfig& config,
                     const CheckpointOptions& options, HfListing* out) {
  return Lister(set, config, options, out).Run();
}

}  // namespace internal
}  // namespace nibble
