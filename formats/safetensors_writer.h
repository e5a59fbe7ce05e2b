// Writes a safetensors file whose tensors are produced one at a time
// (streamed): memory stays bounded by the largest tensor. Atomic: written
// to a temporary beside the destination, fsynced, renamed; on any error
// nothing is left at the destination.
#ifndef NIBBLE_FORMATS_SAFETENSORS_WRITER_H_
#define NIBBLE_FORMATS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"

namespace nibble {

struct SafetensorsOutput {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  // Writes exactly the tensor's bytes (elements x dtype size) to `dst`
  // (4096-byte aligned; called once, in order).
  std::function<Status(uint8_t* dst)> fill;
};

struct SafetensorsWriteOptions {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  // Called after each tensor: (index, tensors, bytes so far).
  std::function<void(size_t, size_t, uint64_t)> progress;
};

Status WriteSafetensorsStreaming(const std::string& path,
                                 const std::vector<SafetensorsOutput>& tensors,
                                 const SafetensorsWriteOptions& options);

}  // namespace nibble

#endif  // NIBBLE_FORMATS_SAFETENSORS_WRITER_H_
