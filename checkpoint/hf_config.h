// A Hugging Face checkpoint folder's quantization settings: config.json's
// `quantization_config` (or, for AutoGPTQ, quantize_config.json), handed
// to the method that reads them (checkpoint/methods/). Methods nibble does
// not read are refused here with a message naming them.
#ifndef NIBBLE_CHECKPOINT_HF_CONFIG_H_
#define NIBBLE_CHECKPOINT_HF_CONFIG_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "checkpoint/methods/method.h"
#include "formats/files.h"

namespace nibble {

struct HfQuantization {
  const HfMethodInfo* method = nullptr;  // null: the checkpoint states none
  std::string source;                    // where: "config.json quantization_config", ...
  std::unique_ptr<HfMethod> lister;      // the method's lister, its config parsed
};

// From the texts of config.json and quantize_config.json (either may be
// empty = absent). config.json's quantization_config wins; without it,
// quantize_config.json (whose quant_method defaults to gptq).
StatusOr<HfQuantization> ParseHfQuantization(const std::string& config_json,
                                             const std::string& quantize_config_json);

// Reads them from a folder (missing files are fine: no method). Each must
// be a regular file inside the folder (symlinks may not leave it) of at
// most kMaxJsonFileBytes; `inputs`, if given, records them.
StatusOr<HfQuantization> ReadHfQuantization(const std::string& dir, InputFiles* inputs = nullptr);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_HF_CONFIG_H_
