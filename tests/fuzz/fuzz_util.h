// Shared by the fuzz harnesses: bounds that keep one input's work small
// (the harnesses explore parsers and lowering, not big allocations).
#ifndef NIBBLE_TESTS_FUZZ_FUZZ_UTIL_H_
#define NIBBLE_TESTS_FUZZ_FUZZ_UTIL_H_

#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "kernels/plan.h"
#include "kernels/reference.h"
#include "op/dequantizer.h"

namespace nibble {
namespace fuzz {

inline constexpr int64_t kMaxElements = int64_t{1} << 18;

// A private folder nibble-fuzz-<tag>-XXXXXX under $TMPDIR (or /tmp), made
// once per process for harnesses that go through files, and removed with
// its contents when the process exits normally (a crash leaves it; the
// finding is saved elsewhere). "/nonexistent" if it cannot be made.
inline const std::string& PrivateDir(const char* tag) {
  class Dir {
   public:
    explicit Dir(const char* tag) {
      const char* tmp = std::getenv("TMPDIR");
      std::string tmpl = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") +
                         "/nibble-fuzz-" + tag + "-XXXXXX";
      made_ = ::mkdtemp(&tmpl[0]) != nullptr;
      path = made_ ? tmpl : std::string("/nonexistent");
    }
    Dir(const Dir&) = delete;
    Dir& operator=(const Dir&) = delete;
    ~Dir() {
      std::error_code ec;
      if (made_) std::filesystem::remove_all(path, ec);
    }
    std::string path;

   private:
    bool made_ = false;
  };
  static const Dir dir(tag);
  return dir.path;
}

// Runs `d` whole (1 thread) and through the scalar reference, and aborts
// (a finding) unless they agree bit for bit (NaN matches NaN).
inline void RunAndCrossCheck(const Dequantizer& d) {
  const int64_t n = d.rows() * d.cols();
  if (n <= 0 || n > kMaxElements) return;
  const size_t ob = static_cast<size_t>(OutBytes(d.plan().out));
  std::vector<uint8_t> a(static_cast<size_t>(n) * ob), b(a.size());
  MutableTensorView y{d.output().dtype, d.output().shape, a.data(), a.size()};
  if (!d.Run(y, 1).ok()) std::abort();
  if (d.output_transposed()) return;  // the reference writes the view's order
  DequantizeTileReference(d.plan(), 0, d.rows(), 0, d.cols(), b.data(), d.cols());
  for (int64_t k = 0; k < n; ++k) {
    const uint8_t* pa = &a[static_cast<size_t>(k) * ob];
    const uint8_t* pb = &b[static_cast<size_t>(k) * ob];
    if (std::memcmp(pa, pb, ob) == 0) continue;
    bool nan_a, nan_b;
    if (ob == 4) {
      float x, z;
      std::memcpy(&x, pa, 4);
      std::memcpy(&z, pb, 4);
      nan_a = std::isnan(x), nan_b = std::isnan(z);
    } else {
      uint16_t x, z;
      std::memcpy(&x, pa, 2);
      std::memcpy(&z, pb, 2);
      const uint16_t inf = d.plan().out == OutType::kF16 ? 0x7C00 : 0x7F80;
      nan_a = (x & 0x7FFF) > inf, nan_b = (z & 0x7FFF) > inf;
    }
    if (!(nan_a && nan_b)) std::abort();
  }
}

}  // namespace fuzz
}  // namespace nibble

#endif  // NIBBLE_TESTS_FUZZ_FUZZ_UTIL_H_
