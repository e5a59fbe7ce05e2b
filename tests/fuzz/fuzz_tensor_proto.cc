// TensorProto bytes -> Describe / Resolve (raw_data, typed fields, external
// data references resolved against a folder with one small data file).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "onnx/external_data.h"
#include "onnx/onnx.pb.h"
#include "onnx/onnx_tensor.h"
#include "tests/fuzz/fuzz_util.h"

namespace {
// A private folder holding "w.data" (64 bytes), made once.
std::string DataDir() {
  static const std::string dir = [] {
    const std::string& d = nibble::fuzz::PrivateDir("tensor-proto");
    if (FILE* f = std::fopen((d + "/w.data").c_str(), "wb")) {
      for (int i = 0; i < 64; ++i) std::fputc(i, f);
      std::fclose(f);
    }
    return d;
  }();
  return dir;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nibble_onnx::TensorProto p;
  if (!p.ParseFromArray(data, static_cast<int>(size))) return 0;
  auto d = nibble::TensorResolver::Describe(p);
  if (!d.ok() || d->size_bytes > (size_t{1} << 20)) return 0;
  nibble::TensorResolver resolver(DataDir());
  nibble::Tensor storage;
  auto v = resolver.Resolve(p, &storage);
  if (v.ok() && v->size_bytes > 0) {
    // Touch every byte (ASan checks the view's bounds).
    volatile uint8_t sum = 0;
    const auto* b = static_cast<const uint8_t*>(v->data);
    for (size_t i = 0; i < v->size_bytes; ++i) sum = static_cast<uint8_t>(sum + b[i]);
    (void)sum;
  }
  if (!nibble::HasExternalData(p)) (void)nibble::TensorFromProto(p);
  return 0;
}
