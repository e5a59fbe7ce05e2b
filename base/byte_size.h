// Byte sizes as users write them for shard sizes (nibble dequant
// --max-shard-size, nibble.dequant(max_shard_bytes=...)).
#ifndef NIBBLE_BASE_BYTE_SIZE_H_
#define NIBBLE_BASE_BYTE_SIZE_H_

#include <cctype>
#include <cstdint>
#include <string>

namespace nibble {

// A byte size as transformers (`max_shard_size="5GB"`) and llama.cpp
// (`--split-max-size 5G`) write it: a positive integer, optionally with a
// unit, any case — K, KB, M, MB, G, GB, T, TB (powers of 1000, as both
// write them) or KiB, MiB, GiB, TiB (powers of 1024). 0 when it is not one.
inline uint64_t ParseByteSize(const std::string& text) {
  size_t i = 0;
  uint64_t n = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9') {
    if (n > (UINT64_MAX - 9) / 10) return 0;
    n = n * 10 + static_cast<uint64_t>(text[i] - '0');
    ++i;
  }
  if (i == 0 || n == 0) return 0;
  std::string unit;
  for (; i < text.size(); ++i) {
    unit += static_cast<char>(std::tolower(static_cast<unsigned char>(text[i])));
  }
  static const struct {
    const char* name;
    uint64_t factor;
  } kUnits[] = {{"", 1},
                {"b", 1},
                {"k", 1000},
                {"kb", 1000},
                {"m", 1000000},
                {"mb", 1000000},
                {"g", 1000000000},
                {"gb", 1000000000},
                {"t", 1000000000000},
                {"tb", 1000000000000},
                {"kib", uint64_t{1} << 10},
                {"mib", uint64_t{1} << 20},
                {"gib", uint64_t{1} << 30},
                {"tib", uint64_t{1} << 40}};
  for (const auto& u : kUnits) {
    if (unit == u.name) return n > UINT64_MAX / u.factor ? 0 : n * u.factor;
  }
  return 0;
}

}  // namespace nibble

#endif  // NIBBLE_BASE_BYTE_SIZE_H_
