// GGUF bytes -> header, metadata, tensor infos; small Q4_0 / Q4_1 / Q8_0 /
// Q4_K tensors are dequantized and cross-checked with the reference.
#include <cstddef>
#include <cstdint>

#include "checkpoint/methods/ggml.h"
#include "formats/gguf.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto f = nibble::GgufFile::FromBytes(data, size, "fuzz");
  if (!f.ok()) return 0;
  for (const auto& [k, v] : (*f)->metadata()) (void)v.ToString();
  for (const auto& t : (*f)->tensors()) {
    if (!nibble::GgmlTypeIsDequantizable(t.type) || t.data == nullptr) continue;
    // Small tensors only: the header parser is the target; the kernels
    // are covered by fuzz_dequantize and the kernel suite.
    if (t.elements() > 4096) continue;
    auto d = nibble::PrepareGgml(t.type, t.ne, t.data, static_cast<size_t>(t.bytes),
                                 nibble::DType::kFloat32, t.name);
    if (d.ok()) nibble::fuzz::RunAndCrossCheck(*d);
  }
  return 0;
}
