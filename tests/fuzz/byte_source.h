// Draws typed values from a fuzz input, front to back; once the bytes run
// out every draw returns its minimum (so short inputs stay meaningful).
#ifndef NIBBLE_TESTS_FUZZ_BYTE_SOURCE_H_
#define NIBBLE_TESTS_FUZZ_BYTE_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace nibble {
namespace fuzz {

class ByteSource {
 public:
  ByteSource(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  uint8_t Byte() {
    if (left_ == 0) return 0;
    --left_;
    return *p_++;
  }
  bool Bool() { return (Byte() & 1) != 0; }
  // Uniform-ish in [lo, hi] (hi - lo < 2^32).
  int64_t Range(int64_t lo, int64_t hi) {
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    uint64_t v = 0;
    for (int i = 0; i < 4 && (span >> (8 * i)) != 0; ++i) v = (v << 8) | Byte();
    return lo + static_cast<int64_t>(v % span);
  }
  std::vector<uint8_t> Bytes(size_t n) {
    const size_t k = n < left_ ? n : left_;
    std::vector<uint8_t> out(p_, p_ + k);
    p_ += k;
    left_ -= k;
    return out;
  }
  std::string String(size_t max_len) {
    const size_t n = static_cast<size_t>(Range(0, static_cast<int64_t>(max_len)));
    const auto b = Bytes(n);
    return std::string(b.begin(), b.end());
  }

 private:
  const uint8_t* p_;
  size_t left_;
};

}  // namespace fuzz
}  // namespace nibble

#endif  // NIBBLE_TESTS_FUZZ_BYTE_SOURCE_H_
