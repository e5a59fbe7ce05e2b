// safetensors bytes -> header validation; every accepted tensor's bytes
// are touched (ASan checks the views), float ones read as floats.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = nibble::SafetensorsFile::FromBytes(data, size, "fuzz");
  if (!f.ok()) return 0;
  for (const auto& t : (*f)->tensors()) {
    std::vector<uint8_t> storage;
    auto v = (*f)->Load(t, &storage);
    if (!v.ok()) std::abort();  // FromBytes views cannot fail after Parse
    volatile uint8_t sum = 0;
    const auto* b = static_cast<const uint8_t*>(v->data);
    for (size_t i = 0; i < v->size_bytes; ++i) sum = static_cast<uint8_t>(sum + b[i]);
    (void)sum;
    if (v->dtype == nibble::DType::kFloat16 && v->size_bytes >= 2)
      (void)nibble::FloatElement(*v, 0);
  }
  return 0;
}
