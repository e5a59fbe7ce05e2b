// MXFP4 as OpenAI's gpt-oss ships its MoE experts (transformers
// `quant_method: "mxfp4"`): `<name>_blocks` uint8 [E, R, G, 16] (32 e2m1
// codes per block, low nibble first) and `<name>_scales` uint8 [E, R, G]
// (E8M0 exponents, bias 127), read as transformers' dequantization
// (integrations/mxfp4.py, convert_moe_packed_tensors) does: value =
// lut[code] * 2^(scale - 127) (torch.ldexp: float32 arithmetic, so a scale
// of 255 is 2^128 = inf), reshaped to [E, R, G * 32] and transposed to
// [E, G * 32, R] under `<name>` (e.g. `mlp.experts.gate_up_proj`) — the
// parameter of the unquantized model. Default output: bfloat16 (the
// function's default type); every value is exact in any output type
// except where float32 overflows.
#ifndef NIBBLE_CHECKPOINT_METHODS_MXFP4_H_
#define NIBBLE_CHECKPOINT_METHODS_MXFP4_H_

#include <memory>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/methods/method.h"
#include "op/dequantizer.h"

namespace nibble {

// blocks uint8 [E, R, G, 16], scales uint8 [E, R, G] -> output [E, G * 32,
// R] (kUndefined `out`: bfloat16). Reads `blocks` in place.
StatusOr<Dequantizer> PrepareMxfp4Experts(const TensorView& blocks, const TensorView& scales,
                                          DType out, const std::string& name);

// The registry's hook (registry.cc).
StatusOr<std::unique_ptr<HfMethod>> Mxfp4Configured(const HfConfigFiles& files,
                                                    const std::string& who);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_MXFP4_H_
