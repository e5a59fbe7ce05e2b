// CLI11 checks with messages a user can read (CLI11's PositiveNumber
// reports 0 as "not in range 0.000000 to 179769313486231570814527..."),
// byte sizes with units, and the nearest name for "did you mean" hints.
#ifndef NIBBLE_TOOLS_CLI_CHECKS_H_
#define NIBBLE_TOOLS_CLI_CHECKS_H_

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "CLI/CLI.hpp"
#include "base/byte_size.h"

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

// Accepts a decimal integer in [min, max]; anything else is a usage error
// "`what` (got VALUE)".
inline CLI::Validator InRange(long long min, long long max, std::string what, std::string desc) {
  return CLI::Validator(
      [min, max, what](std::string& v) {
        errno = 0;
        char* end = nullptr;
        const long long x = std::strtoll(v.c_str(), &end, 10);
        if (end != v.c_str() && *end == '\0' && errno == 0 && x >= min && x <= max) {
          return std::string();
        }
        return what + " (got " + v + ")";
      },
      std::move(desc));
}

// The CLI11 transform of a byte-size option: any spelling above becomes
// its number of bytes; anything else is a usage error.
inline CLI::Validator ByteSizeOption(std::string what) {
  return CLI::Validator(
      [what](std::string& v) {
        const uint64_t n = ParseByteSize(v);
        if (n == 0) {
          return what +
                 " must be a positive size: bytes, or with a unit (5GB, 500MB, 5G, 4GiB; K, M, G, "
                 "T are powers of 1000, KiB, MiB, GiB, TiB of 1024) (got " +
                 v + ")";
        }
        v = std::to_string(n);
        return std::string();
      },
      "SIZE");
}

// The edit distance between a and b (insertions, deletions,
// substitutions and swaps of neighbours), for "did you mean" hints.
inline size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
  for (size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t sub = d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, sub});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

// The candidate nearest to `word` when it is close enough to be a typo of
// it (at most a third of its letters wrong, at least one allowed), else "".
inline std::string Nearest(const std::string& word, const std::vector<std::string>& candidates) {
  const size_t allowed = std::max<size_t>(1, word.size() / 3);
  std::string best;
  size_t best_d = allowed + 1;
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_d) {
      best = c;
      best_d = d;
    }
  }
  return best;
}

}  // namespace nibble

#endif  // NIBBLE_TOOLS_CLI_CHECKS_H_
