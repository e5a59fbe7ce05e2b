// Hugging Face checkpoint folders: the quantization settings of
// `config.json` ("quantization_config") or `quantize_config.json`.
// Parsing and checking only: methods and variants nibble does not read are
// refused here with a message naming them; per-tensor facts (bits, group
// size, zero points) are checked against the tensors by op/.
#ifndef NIBBLE_CHECKPOINT_HF_CONFIG_H_
#define NIBBLE_CHECKPOINT_HF_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "formats/files.h"

namespace nibble {

// One compressed-tensors config group ("config_groups": {"group_0": ...}).
struct CompressedTensorsGroup {
  std::string name;
  std::vector<std::string> targets;  // "Linear" (a class: every layer) or "re:REGEX"
  std::string format;                // the group's own, else the config's
  int bits = 4;
  std::string type = "int";  // "int" or "float"
  bool symmetric = true;
  std::string strategy = "group";  // "tensor", "channel", "group", "block", ...
  int64_t group_size = 0;
  std::string actorder;  // "", "group", "weight", "static"
};

struct HfQuantConfig {
  enum class Method { kNone, kGptq, kAwq, kCompressedTensors, kBitsAndBytes };
  Method method = Method::kNone;
  std::string source;  // which file (and key) the settings came from
  int bits = 4;
  int64_t group_size = 128;  // -1: one group over all input channels
  bool desc_act = false;     // GPTQ act-order (g_idx may be non-monotonic)
  bool sym = true;           // GPTQ symmetric
  // GPTQ: "gptq" (v1: qzeros store z - 1) or "gptq_v2" (true z); "" when no
  // file states it (a lone .safetensors): op/ then refuses to guess.
  // format_source says where it was read ("quantize_config.json
  // checkpoint_format", "the default of a GPTQ config without
  // checkpoint_format", ...).
  std::string checkpoint_format;
  std::string format_source;
  // GPTQ: the producer as its metadata names it ("gptqmodel:2.2.0", from
  // meta.quantizer), "" when not named. It decides how v1 zero points are
  // decoded (checkpoint/methods/layers.h, GptqZeros).
  std::string producer;
  std::string awq_version = "gemm";  // AWQ: only GEMM is supported
  bool zero_point = true;            // AWQ: false = symmetric (GPTQModel)
  // compressed-tensors: "format" of the config, its groups and the module
  // names / regexes ("re:...") left in float ("ignore").
  std::string ct_format;
  std::vector<CompressedTensorsGroup> ct_groups;
  std::vector<std::string> ct_ignore;
  // bitsandbytes: load_in_4bit / load_in_8bit and bnb_4bit_quant_type.
  bool bnb_4bit = false, bnb_8bit = false;
  std::string bnb_quant_type;
};

const char* HfMethodName(HfQuantConfig::Method m);

// bitsandbytes 4-bit: the JSON transformers stores, as a uint8 tensor, in
// `<W>.weight.quant_state.bitsandbytes__nf4` (or __fp4).
struct BnbQuantState {
  std::string quant_type;  // "nf4" or "fp4"
  int64_t blocksize = 0;
  std::string dtype;  // the model's float type, e.g. "float16", "bfloat16"
  std::vector<int64_t> shape;
  bool nested = false;  // double quantization
  int64_t nested_blocksize = 0;
  std::string nested_dtype;
  double nested_offset = 0.0;
};
// `who` names the tensor in messages.
StatusOr<BnbQuantState> ParseBnbQuantState(const std::string& json, const std::string& who);

// Parses the texts of config.json and quantize_config.json (either may be
// empty = absent). `quantization_config` in config.json wins; when both
// files state a GPTQ checkpoint_format or producer they must agree.
StatusOr<HfQuantConfig> ParseHfQuantConfig(const std::string& config_json,
                                           const std::string& quantize_config_json);

// Reads them from a folder (missing files are fine: Method::kNone). Each
// must be a regular file inside the folder (symlinks may not leave it) of
// at most kMaxJsonFileBytes; `inputs`, if given, records them.
StatusOr<HfQuantConfig> ReadHfQuantConfig(const std::string& dir, InputFiles* inputs = nullptr);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_HF_CONFIG_H_
