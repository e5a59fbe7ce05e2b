// GGUF or safetensors bytes -> `nibble inspect` / `nibble dequant` of a
// checkpoint file (Checkpoint::Open, every tensor converted, the streaming
// safetensors writer: names that are not UTF-8 lived here), through a file
// in a private temporary folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool gguf = size >= 4 && std::memcmp(data, "GGUF", 4) == 0;
  const std::string& dir = nibble::fuzz::PrivateDir("checkpoint");
  const std::string in = dir + (gguf ? "/in.gguf" : "/in.safetensors");
  const std::string out = dir + "/out.safetensors";
  if (FILE* f = std::fopen(in.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  auto ck = nibble::Checkpoint::Open(in);
  if (ck.ok()) {
    for (const auto& t : ck->tensors()) (void)ck->OutputDType(t, nibble::DType::kUndefined);
  }
  nibble::DequantOptions o;
  o.threads = 1;
  nibble::DequantReport r;
  const nibble::Status st = nibble::DequantCheckpoint(in, out, o, &r);
  if (st.ok()) std::remove(out.c_str());
  std::remove(in.c_str());
  return 0;
}
