// A quantization method of Hugging Face safetensors checkpoints, as nibble
// reads it: its `quantization_config` section and the tensors of its
// layers. One file per method in checkpoint/methods/ (gptq, awq,
// compressed_tensors, bitsandbytes; unsupported.cc names the methods nibble
// knows of but does not read); registry.cc lists them, in listing order.
//
// A method's file holds all of it: its config struct and parser, which
// tensors make a layer (matching by name and shape) and their lowering to a
// Dequantizer (its Prepare* function). Nothing outside checkpoint/methods/
// knows a method's tensor names; the copy guard (hf_source.cc) learns them
// from HfMethodInfo::param_leaves.
#ifndef NIBBLE_CHECKPOINT_METHODS_METHOD_H_
#define NIBBLE_CHECKPOINT_METHODS_METHOD_H_

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/checkpoint.h"
#include "formats/safetensors.h"

namespace nibble {

// The quantization settings of a checkpoint folder, as files state them.
struct HfConfigFiles {
  // config.json's "quantization_config" object (null when absent).
  const nlohmann::json* quantization_config = nullptr;
  // quantize_config.json (AutoGPTQ / GPTQModel), or null.
  const nlohmann::json* quantize_config = nullptr;
  // The one that states the method: quantization_config when present.
  const nlohmann::json* main() const {
    return quantization_config != nullptr ? quantization_config : quantize_config;
  }
};

// What a method's lister reads, and the listing it appends to.
class HfLayers {
 public:
  using Entry = SafetensorsSet::Entry;
  HfLayers(const SafetensorsSet& set, const CheckpointOptions& options)
      : set_(set), options_(options) {}

  const SafetensorsSet& set() const { return set_; }
  const CheckpointOptions& options() const { return options_; }
  // The stored tensor `name`, or null.
  const Entry* Find(const std::string& name) const { return set_.Find(name); }
  // Marks `name` as read by a method's rule (nothing when it is absent):
  // consumed tensors are not listed as copies.
  void Consume(const std::string& name) {
    if (set_.Find(name) != nullptr) consumed_.insert(name);
  }
  bool Consumed(const std::string& name) const { return consumed_.count(name) > 0; }
  // Appends one layer (or refused tensor) to the listing.
  void Add(CheckpointTensor t) { tensors_.push_back(std::move(t)); }
  // Appends a property (`inspect`).
  void Property(std::string key, std::string value) {
    props_.emplace_back(std::move(key), std::move(value));
  }

  std::vector<CheckpointTensor>& tensors() { return tensors_; }
  std::vector<std::pair<std::string, std::string>>& properties() { return props_; }

 private:
  const SafetensorsSet& set_;
  const CheckpointOptions& options_;
  std::set<std::string> consumed_;
  std::vector<CheckpointTensor> tensors_;
  std::vector<std::pair<std::string, std::string>> props_;
};

// The layers one method finds in a checkpoint.
class HfMethod {
 public:
  virtual ~HfMethod() = default;
  // Appends a CheckpointTensor for each layer of this method — quantized
  // (with its `prepare`), or unsupported with the reason when the layer
  // cannot be read exactly — and consumes every tensor it read. Errors
  // stop the listing (a checkpoint nibble cannot even list).
  virtual Status List(HfLayers* layers) const = 0;
};

// One registered method.
struct HfMethodInfo {
  const char* quant_method;  // quantization_config's quant_method ("gptq")
  const char* name;          // for people ("GPTQ")
  // The lister of a checkpoint whose config states this method: parses the
  // config (`who` names it in messages) and refuses what it cannot read,
  // by name. Null: a method nibble knows of but does not read; its config
  // is refused with `unsupported`.
  StatusOr<std::unique_ptr<HfMethod>> (*configured)(const HfConfigFiles& files,
                                                    const std::string& who);
  // The lister used when the config states another method or none (the
  // layers recognized by their tensors alone), or null.
  std::unique_ptr<HfMethod> (*unconfigured)();
  // The last name components of this method's parameter and code tensors
  // ("qweight", "weight_scale", ...): a tensor so named that no lister
  // consumed is refused by name, never copied (hf_source.cc, CopyGuard).
  std::vector<const char*> param_leaves;
  // Why it is not read (configured == null).
  const char* unsupported = "";
};

// Every method, in listing order (registry.cc).
const std::vector<HfMethodInfo>& HfMethods();
// The method whose quant_method is `quant_method` (lower case), or null.
const HfMethodInfo* FindHfMethod(const std::string& quant_method);
// "gptq, awq, ..." : the quant_methods nibble reads.
std::string ReadableHfMethods();

// --- Helpers of the methods' listers and parsers ----------------------------
namespace internal {

bool EndsWith(const std::string& s, const std::string& suffix);
std::string Lower(std::string s);
// `name` without `suffix` (which it ends with).
std::string ModuleOf(const std::string& name, const std::string& suffix);
// Stored bytes of an entry (0 for null).
uint64_t BytesOf(const SafetensorsSet::Entry* e);
// Reads one input tensor (null entry: absent) into the next buffer of
// *bufs; *out is its view.
Status LoadInto(const SafetensorsSet::Entry* x, CheckpointTensor::Buffers* bufs,
                std::optional<TensorView>* out);
inline const TensorView* Ptr(const std::optional<TensorView>& v) { return v ? &*v : nullptr; }
// True for float16, bfloat16 and float32.
bool IsFloatDType(DType d);

// Optional typed fields of a config object: absent (or null) keeps *out;
// a value of another type is an error "<who>: '<key>' must be ...".
Status JsonInt(const nlohmann::json& j, const char* key, const std::string& who, int64_t* out);
Status JsonBool(const nlohmann::json& j, const char* key, const std::string& who, bool* out);
Status JsonString(const nlohmann::json& j, const char* key, const std::string& who,
                  std::string* out);
// A string or a list of strings, appended to *out.
Status JsonStringList(const nlohmann::json& j, const char* key, const std::string& who,
                      std::vector<std::string>* out);
// Parses `text` as a JSON object (`who` names it in messages).
StatusOr<nlohmann::json> ParseJsonObject(const std::string& text, const std::string& who);

}  // namespace internal
}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_METHOD_H_
