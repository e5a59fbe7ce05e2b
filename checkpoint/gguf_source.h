// GGUF files (llama.cpp) as Checkpoint lists them: every tensor under its
// stored name with the PyTorch shape (ne reversed); plain types (f32, f16,
// bf16, f64, i8 ... i64) are copies, block types nibble dequantizes are
// quantized tensors (checkpoint/methods/ggml.h), other types are listed
// and refused by name. The metadata are the properties.
#ifndef NIBBLE_CHECKPOINT_GGUF_SOURCE_H_
#define NIBBLE_CHECKPOINT_GGUF_SOURCE_H_

#include <string>

#include "base/status.h"
#include "checkpoint/checkpoint.h"

namespace nibble {

// True if `path` is a regular file starting with the GGUF magic (opened
// without blocking: a FIFO is not a GGUF file).
bool HasGgufMagic(const std::string& path);

StatusOr<CheckpointListing> ListGgufCheckpoint(const std::string& path);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_GGUF_SOURCE_H_
