// Hugging Face checkpoint folders: the quantization settings of
// `config.json` ("quantization_config") or `quantize_config.json`.
// Parsing and checking only (unsupported variants are refused here, with a
// message naming the variant).
#ifndef NIBBLE_FORMATS_HF_CONFIG_H_
#define NIBBLE_FORMATS_HF_CONFIG_H_

#include <cstdint>
#include <string>

#include "base/status.h"
#include "formats/files.h"

namespace nibble {

struct HfQuantConfig {
  enum class Method { kNone, kGptq, kAwq };
  Method method = Method::kNone;
  std::string source;  // which file (and key) the settings came from
  int bits = 4;
  int64_t group_size = 128;  // -1: one group over all input channels
  bool desc_act = false;     // GPTQ act-order (g_idx may be non-monotonic)
  bool sym = true;           // GPTQ symmetric
  // GPTQ "gptq" (qzeros store z - 1) or "gptq_v2" (true z).
  std::string checkpoint_format = "gptq";
  std::string awq_version = "gemm";  // AWQ: only GEMM is supported
};

const char* HfMethodName(HfQuantConfig::Method m);

// Parses the texts of config.json and quantize_config.json (either may be
// empty = absent). `quantization_config` in config.json wins.
StatusOr<HfQuantConfig> ParseHfQuantConfig(const std::string& config_json,
                                           const std::string& quantize_config_json);

// Reads them from a folder (missing files are fine: Method::kNone). Each
// must be a regular file inside the folder (symlinks may not leave it) of
// at most kMaxJsonFileBytes; `inputs`, if given, records them.
StatusOr<HfQuantConfig> ReadHfQuantConfig(const std::string& dir, InputFiles* inputs = nullptr);

}  // namespace nibble

#endif  // NIBBLE_FORMATS_HF_CONFIG_H_
