// The spellings the CLI accepts for an output type (`--dtype`), mapped to
// the canonical f32 / f16 / bf16 (case-insensitive).
#ifndef NIBBLE_TOOLS_DTYPE_OPTION_H_
#define NIBBLE_TOOLS_DTYPE_OPTION_H_

#include <cctype>
#include <map>
#include <string>

#include "CLI/CLI.hpp"

namespace nibble {

inline const std::map<std::string, std::string>& DTypeSpellings() {
  static const std::map<std::string, std::string> kMap = {
      {"f32", "f32"},   {"fp32", "f32"},      {"float32", "f32"}, {"float", "f32"},
      {"f16", "f16"},   {"fp16", "f16"},      {"float16", "f16"}, {"half", "f16"},
      {"bf16", "bf16"}, {"bfloat16", "bf16"},
  };
  return kMap;
}

// The CLI11 transform of a `--dtype` value: any spelling above (any case)
// becomes f32 / f16 / bf16; anything else is a usage error that lists them.
inline CLI::Validator DTypeOption() {
  return CLI::Validator(
      [](std::string& v) {
        std::string key = v;
        for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        const auto it = DTypeSpellings().find(key);
        if (it == DTypeSpellings().end()) {
          return "'" + v +
                 "' is not an output type: f32, f16 or bf16 (also fp32, float32, float, fp16, "
                 "float16, half, bfloat16; any case)";
        }
        v = it->second;
        return std::string();
      },
      "f32|f16|bf16");
}

}  // namespace nibble

#endif  // NIBBLE_TOOLS_DTYPE_OPTION_H_
