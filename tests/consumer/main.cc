// Consumer of the installed C++ API: dequantize the SPEC worked example.
#include <cstdio>
#include <vector>

#include "op/pmx.h"
#include "op/version.h"

int main() {
  const std::vector<unsigned char> bytes = {0x80, 0x4b, 0x9f, 0xa7};
  const float scale = 0.5f;
  nibble::PmxAttributes a;
  a.quant_data_type = "int4";
  a.quant_axis = 0;
  a.group_size = 0;
  auto y = nibble::DequantizePmx(a, {nibble::DType::kInt16, {1, 2}, bytes.data(), 4},
                                 {nibble::DType::kFloat32, {1}, &scale, 4}, nullptr);
  if (!y.ok() || y->data_as<float>()[1] != 3.5f) {
    std::printf("consumer: FAILED\n");
    return 1;
  }
  std::printf("consumer (C++, nibble %s): ok\n", NIBBLE_VERSION);
  return 0;
}
