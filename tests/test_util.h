// Small helpers shared by the doctest suites.
#ifndef NIBBLE_TESTS_TEST_UTIL_H_
#define NIBBLE_TESTS_TEST_UTIL_H_

#include <utility>
#include <vector>

#include "base/tensor.h"

namespace nibble {
namespace testing {

// A view of a vector's bytes as a tensor of type t and shape s.
template <typename T>
TensorView View(DType t, Shape s, const std::vector<T>& v) {
  return {t, std::move(s), v.data(), v.size() * sizeof(T)};
}

// The values of a float32 tensor.
inline std::vector<float> Floats(const Tensor& t) {
  const float* p = t.data_as<float>();
  return std::vector<float>(p, p + t.size_bytes() / 4);
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_TEST_UTIL_H_
