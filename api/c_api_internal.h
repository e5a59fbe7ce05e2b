// The C API's handle types (api/nibble.h), shared by the core library's
// functions (api/c_api.cc) and those of library nibble (api/c_api_onnx.cc).
// Not part of the API.
#ifndef NIBBLE_API_C_API_INTERNAL_H_
#define NIBBLE_API_C_API_INTERNAL_H_

#include <memory>
#include <new>
#include <string>

#include "api/nibble.h"
#include "checkpoint/checkpoint.h"
#include "op/dequantizer.h"

struct nibble_status {
  std::string message;
};

struct nibble_dequantizer {
  nibble::Dequantizer impl;
  // What impl reads, when the handle owns it (a checkpoint tensor's inputs).
  std::shared_ptr<void> hold;
};

struct nibble_checkpoint {
  nibble::Checkpoint impl;
};

namespace nibble {
namespace c_api {

inline nibble_status* Fail(const std::string& m) { return new (std::nothrow) nibble_status{m}; }

// Converts CheckpointOptions from C; NULL = defaults.
inline CheckpointOptions ToCheckpointOptions(const nibble_checkpoint_options* options) {
  CheckpointOptions o;
  if (options) {
    if (options->gptq_format) o.gptq_format = options->gptq_format;
    if (options->gptq_v1_zeros) o.gptq_v1_zeros = options->gptq_v1_zeros;
  }
  return o;
}

// Wraps an opened checkpoint in a handle (*out), or returns the error.
inline nibble_status* Wrap(StatusOr<Checkpoint> ck, nibble_checkpoint** out) {
  if (!ck.ok()) return Fail(ck.status().message());
  auto* h = new (std::nothrow) nibble_checkpoint{std::move(*ck)};
  if (!h) return Fail(kOutOfMemory);
  *out = h;
  return nullptr;
}

}  // namespace c_api
}  // namespace nibble

#endif  // NIBBLE_API_C_API_INTERNAL_H_
