// Hugging Face config texts: the input is config.json, then (after the
// first NUL byte, if any) quantize_config.json.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/hf_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string all(reinterpret_cast<const char*>(data), size);
  const auto nul = all.find('\0');
  const std::string a = all.substr(0, nul);
  const std::string b = nul == std::string::npos ? std::string() : all.substr(nul + 1);
  auto c = nibble::ParseHfQuantization(a, b);
  if (c.ok() && c->method != nullptr) (void)std::string(c->method->name);
  return 0;
}
