// The tensors of a Hugging Face safetensors checkpoint, as Checkpoint
// (checkpoint/checkpoint.h) lists them: each quantized Linear layer of a GPTQ,
// AWQ, compressed-tensors or bitsandbytes 4-bit checkpoint becomes one
// "<module>.weight" [N, K] tensor (its packed inputs consumed), everything
// else a copy under its stored name.
//
// What decides how a layer is read (never guessed silently):
//  - GPTQ: bits from the zero points' (or g_idx's) shape, else the config;
//    the format (v1 / v2) from CheckpointOptions, config.json /
//    quantize_config.json, or the safetensors metadata ("checkpoint_format")
//    — layers with zero points are refused when none states it; v1 zero
//    points decoded by the producer's rule (GptqZeros).
//  - AWQ GEMM: zero points when stored (`zero_point: false` checkpoints
//    written by GPTQModel keep them), else z = 8.
//  - compressed-tensors: the config group whose targets match the module
//    (a "re:" regex matched from the start of the module name, the exact
//    name, or a class name such as "Linear", which matches every layer).
//  - bitsandbytes 4-bit: the layer's quant_state JSON.
#ifndef NIBBLE_CHECKPOINT_HF_SOURCE_H_
#define NIBBLE_CHECKPOINT_HF_SOURCE_H_

#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "checkpoint/hf_config.h"
#include "formats/safetensors.h"
#include "checkpoint/checkpoint.h"

namespace nibble {
namespace internal {

struct HfListing {
  std::vector<CheckpointTensor> tensors;
  std::vector<std::pair<std::string, std::string>> props;  // for `inspect`
};

// `set` must outlive the listed tensors (their closures read from it).
Status ListHfTensors(const SafetensorsSet& set, const HfQuantConfig& config,
                     const CheckpointOptions& options, HfListing* out);

}  // namespace internal
}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_HF_SOURCE_H_
