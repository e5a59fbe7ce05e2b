// The CLI's `--dtype` option: any spelling of an output type (base/dtype.h,
// any case) becomes its short name f32 / f16 / bf16; anything else is a
// usage error that lists them.
#ifndef NIBBLE_TOOLS_DTYPE_OPTION_H_
#define NIBBLE_TOOLS_DTYPE_OPTION_H_

#include <string>

#include "CLI/CLI.hpp"
#include "base/dtype.h"

namespace nibble {

inline CLI::Validator DTypeOption() {
  return CLI::Validator(
      [](std::string& v) {
        const DType t = ParseOutputDType(v);
        if (t == DType::kUndefined) {
          return "'" + v + "' is not an output type: " + OutputDTypeSpellings();
        }
        v = OutputDTypeShortName(t);
        return std::string();
      },
      "f32|f16|bf16");
}

}  // namespace nibble

#endif  // NIBBLE_TOOLS_DTYPE_OPTION_H_
