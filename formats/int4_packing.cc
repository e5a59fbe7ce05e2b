#include "formats/int4_packing.h"

#include <cstring>

namespace nibble {

void PackInt4Interleaved(const uint8_t* codes, int64_t d0, int64_t row, int p, void* words) {
  auto* out = static_cast<uint8_t*>(words);
  const int64_t word_bytes = p / 2;
  std::memset(out, 0, static_cast<size_t>(d0 / p * row * word_bytes));
  for (int64_t d = 0; d < d0; ++d) {
    const int64_t i = d / p, j = d % p;
    for (int64_t r = 0; r < row; ++r) {
      const uint8_t c = codes[d * row + r] & 0xF;
      // Nibble j of a little-endian word is in byte j / 2, high half if odd.
      out[(i * row + r) * word_bytes + j / 2] |= static_cast<uint8_t>(c << (4 * (j % 2)));
    }
  }
}

void UnpackInt4Interleaved(const void* words, int64_t d0, int64_t row, int p, uint8_t* codes) {
  const auto* in = static_cast<const uint8_t*>(words);
  const int64_t word_bytes = p / 2;
  for (int64_t d = 0; d < d0; ++d) {
    const int64_t i = d / p, j = d % p;
    for (int64_t r = 0; r < row; ++r) {
      codes[d * row + r] =
          static_cast<uint8_t>((in[(i * row + r) * word_bytes + j / 2] >> (4 * (j % 2))) & 0xF);
    }
  }
}

void PackDense(const uint8_t* codes, int64_t n, int bits, uint8_t* out) {
  const int64_t bytes = (n * bits + 7) / 8;
  std::memset(out, 0, static_cast<size_t>(bytes));
  const unsigned mask = (1u << bits) - 1u;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t bit = k * bits;
    out[bit / 8] |= static_cast<uint8_t>((codes[k] & mask) << (bit % 8));
  }
}

void UnpackDense(const uint8_t* packed, int64_t n, int bits, uint8_t* codes) {
  const unsigned mask = (1u << bits) - 1u;
  for (int64_t k = 0; k < n; ++k) {
    const int64_t bit = k * bits;
    codes[k] = static_cast<uint8_t>((packed[bit / 8] >> (bit % 8)) & mask);
  }
}

}  // namespace nibble
