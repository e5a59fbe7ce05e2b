#include "checkpoint/hf_source.h"

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

#include "checkpoint/hf_config.h"
#include "checkpoint/methods/method.h"
#include "formats/files.h"
#include "formats/safetensors.h"

namespace nibble {

namespace {

using Entry = SafetensorsSet::Entry;
using internal::BytesOf;
using internal::EndsWith;
using internal::IsFloatDType;

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
  // `config`: "quantization_config <method>" (null: the checkpoint states
  // none).
  CopyGuard(const HfLayers& layers, const std::string* config)
      : config_(config != nullptr ? *config : std::string("no quantization_config")),
        configured_(config != nullptr) {
    for (const Entry& e : layers.set().entries()) {
      const std::string& name = e.tensor->name;
      if (layers.Consumed(name)) continue;
      const auto [module, leaf] = Split(name);
      if (QuantParamLeaf(leaf, configured_)) {
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
    const std::string& config = config_;
    const bool plain_float = IsFloatDType(e.tensor->dtype) || e.tensor->dtype == DType::kFloat64;
    // Parameters in the tensor's own module, or under its name
    // ("W.weight" beside "W.weight.absmax").
    auto it = params_.find(module);
    if (it == params_.end()) it = params_.find(name);
    if (it != params_.end()) {
      const bool bias = leaf == "bias" || EndsWith(leaf, "_bias");
      if (QuantParamLeaf(leaf, configured_)) {
        return "'" + name + "' is a quantization parameter that no rule nibble knows reads (" +
               config + "); refused rather than copied";
      }
      if (!(bias && plain_float)) {
        return "'" + name + "' (" + dtype + ") has quantization parameters beside it (" +
               it->second + ") that no rule nibble knows applies (" + config +
               "): copying it would write its stored codes, not its values";
      }
    }
    if (configured_ && !plain_float) {
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

  std::string config_;
  bool configured_;
  std::map<std::string, std::string> params_;  // module -> its parameters, quoted
};

}  // namespace

StatusOr<CheckpointListing> ListHfCheckpoint(const std::string& path,
                                             const CheckpointOptions& options) {
  CheckpointListing c;
  auto set_or = SafetensorsSet::Open(path, &c.inputs);
  if (!set_or.ok()) return set_or.status();
  auto set = std::make_shared<SafetensorsSet>(std::move(*set_or));
  c.keep_alive.push_back(set);
  if (IsDirectory(path)) {
    c.hf_dir = path;
  } else {
    const auto slash = path.rfind('/');
    c.hf_dir = slash == std::string::npos ? "." : path.substr(0, slash);
  }
  auto quant = ReadHfQuantization(c.hf_dir, &c.inputs);
  if (!quant.ok()) return quant.status();
  {
    auto cp = PathInside(c.hf_dir, "config.json", "config file");
    if (!cp.ok()) return cp.status();
    if (PathExists(*cp)) {
      auto text = ReadSmallFile(*cp, kMaxJsonFileBytes, "config file");
      if (!text.ok()) return text.status();
      c.hf_config_json = std::move(*text);
    }
  }
  {
    std::set<std::string> keys;
    std::set<const SafetensorsFile*> seen;
    for (const Entry& e : set->entries()) {
      if (!seen.insert(e.file).second) continue;
      for (const auto& [k, v] : e.file->metadata()) {
        if (keys.insert(k).second) c.metadata.emplace_back(k, v);
      }
    }
  }
  c.description = "safetensors, " + std::to_string(set->num_files()) + " file(s), " +
                  std::to_string(set->entries().size()) + " tensors";
  c.default_dtype = DType::kFloat16;
  HfLayers layers(*set, options);
  if (quant->method != nullptr) {
    layers.Property("quantization", quant->method->name);
    layers.Property("from", quant->source);
  }
  // Every method's layers: the configured method's lister, the others'
  // lister for layers recognized by their tensors alone.
  for (const HfMethodInfo& m : HfMethods()) {
    if (&m == quant->method) {
      NIBBLE_RETURN_IF_ERROR(quant->lister->List(&layers));
    } else if (m.unconfigured != nullptr) {
      NIBBLE_RETURN_IF_ERROR(m.unconfigured()->List(&layers));
    }
  }
  // Everything else is copied through (names and shapes as stored) —
  // unless it is, or belongs with, quantization parameters no rule above
  // read: those are refused by name (CopyGuard), never copied.
  const std::string config = quant->method == nullptr
                                 ? std::string()
                                 : "quantization_config " + std::string(quant->method->name);
  const CopyGuard guard(layers, quant->method == nullptr ? nullptr : &config);
  for (const Entry& e : set->entries()) {
    if (layers.Consumed(e.tensor->name)) continue;
    CheckpointTensor ct;
    ct.name = e.tensor->name;
    ct.source = e.tensor->name;
    ct.detail = e.tensor->dtype_name;
    ct.shape = e.tensor->shape;
    ct.stored_dtype = e.tensor->dtype;
    ct.stored_bytes = BytesOf(&e);
    if (auto why = guard.Refusal(e)) {
      ct.kind = "unknown";
      ct.quantized = true;
      ct.supported = false;
      ct.why_not = *why;
    } else {
      ct.kind = "copy";
      const Entry ce = e;
      ct.read_stored = [ce](uint64_t offset, uint64_t n, uint8_t* dst) {
        return ce.file->ReadInto(*ce.tensor, dst, offset, n);
      };
    }
    layers.Add(std::move(ct));
  }
  c.tensors = std::move(layers.tensors());
  c.properties = std::move(layers.properties());
  return c;
}

}  // namespace nibble
