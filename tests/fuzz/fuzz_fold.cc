// ONNX model bytes -> `nibble inspect` and `nibble fold` (graph rewriting of
// DequantizeLinear / MatMulNBits, external data, the streaming writer),
// through a file in a private temporary folder.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "onnx/fold.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = nibble::fuzz::PrivateDir("fold");
  const std::string in = dir + "/in.onnx", out = dir + "/out.onnx";
  if (FILE* f = std::fopen(in.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  } else {
    return 0;
  }
  auto info = nibble::InspectModel(in);
  (void)info;
  nibble::FoldOptions o;
  o.threads = 1;
  nibble::FoldReport r;
  const nibble::Status st = nibble::FoldModel(in, out, o, &r);
  if (st.ok()) std::remove(out.c_str());
  std::remove((out + ".data").c_str());
  return 0;
}
