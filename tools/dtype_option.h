// The spellings the CLI accepts for an output type (`--dtype`), mapped to
// the canonical f32 / f16 / bf16 (case-insensitive), for CLI11's
// CheckedTransformer.
#ifndef NIBBLE_TOOLS_DTYPE_OPTION_H_
#define NIBBLE_TOOLS_DTYPE_OPTION_H_

#include <map>
#include <string>

namespace nibble {

inline const std::map<std::string, std::string>& DTypeSpellings() {
  static const std::map<std::string, std::string> kMap = {
      {"f32", "f32"},   {"fp32", "f32"},      {"float32", "f32"}, {"float", "f32"},
      {"f16", "f16"},   {"fp16", "f16"},      {"float16", "f16"}, {"half", "f16"},
      {"bf16", "bf16"}, {"bfloat16", "bf16"},
  };
  return kMap;
}

}  // namespace nibble

#endif  // NIBBLE_TOOLS_DTYPE_OPTION_H_
