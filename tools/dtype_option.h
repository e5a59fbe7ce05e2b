// The CLI's `--dtype` option: any spelling of an output type (base/dtype.h,
// any case) becomes its short name f32 / f16 / bf16, and "auto" stays (each
// format's default); anything else is a usage error that lists them.
#ifndef NIBBLE_TOOLS_DTYPE_OPTION_H_
#define NIBBLE_TOOLS_DTYPE_OPTION_H_

#include <cctype>
#include <string>

#include "CLI/CLI.hpp"
#include "base/dtype.h"

namespace nibble {

inline CLI::Validator DTypeOption() {
  return CLI::Validator(
      [](std::string& v) {
        std::string lower = v;
        for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        if (lower == "auto") {  // each format's default
          v = "auto";
          return std::string();
        }
        const DType t = ParseOutputDType(v);
        if (t == DType::kUndefined) {
          return "'" + v + "' is not an output type: " + OutputDTypeSpellings() + ", or auto";
        }
        v = OutputDTypeShortName(t);
        return std::string();
      },
      "f32|f16|bf16|auto");
}

}  // namespace nibble

#endif  // NIBBLE_TOOLS_DTYPE_OPTION_H_
