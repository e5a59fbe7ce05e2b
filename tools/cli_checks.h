// CLI11 checks with messages a user can read. (CLI11's PositiveNumber
// reports 0 as "not in range 0.000000 to 179769313486231570814527...".)
#ifndef NIBBLE_TOOLS_CLI_CHECKS_H_
#define NIBBLE_TOOLS_CLI_CHECKS_H_

#include <cerrno>
#include <cstdlib>
#include <string>
#include <utility>

#include "CLI/CLI.hpp"

namespace nibble {

// Accepts a decimal integer of at least `min`; anything else is a usage
// error "`what` (got VALUE)". `desc` names the kind in --help.
inline CLI::Validator AtLeast(long long min, std::string what, std::string desc) {
  return CLI::Validator(
      [min, what](std::string& v) {
        errno = 0;
        char* end = nullptr;
        const long long x = std::strtoll(v.c_str(), &end, 10);
        if (end != v.c_str() && *end == '\0' && errno == 0 && x >= min) return std::string();
        return what + " (got " + v + ")";
      },
      std::move(desc));
}

}  // namespace nibble

#endif  // NIBBLE_TOOLS_CLI_CHECKS_H_
