// Hugging Face safetensors checkpoints (a folder, a sharded folder, or one
// .safetensors file, with config.json / quantize_config.json beside it) as
// Checkpoint lists them: each quantized layer of a method nibble reads
// becomes one "<module>.weight" tensor (its packed inputs consumed; the
// methods are in checkpoint/methods/), everything else a copy under its
// stored name — unless it is, or sits beside, a quantization parameter no
// method read, or is not a float tensor under a quantization_config: those
// are refused by name (CopyGuard), never copied.
#ifndef NIBBLE_CHECKPOINT_HF_SOURCE_H_
#define NIBBLE_CHECKPOINT_HF_SOURCE_H_

#include <string>

#include "base/status.h"
#include "checkpoint/checkpoint.h"

namespace nibble {

StatusOr<CheckpointListing> ListHfCheckpoint(const std::string& path,
                                             const CheckpointOptions& options);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_HF_SOURCE_H_
