// Fine-grained FP8 (transformers `quant_method: "fp8"`): DeepSeek-V3 / R1 /
// V3.1 / V3.2, Qwen3-*-FP8, MiniMax and other releases. `<module>.weight`
// float8 e4m3 [N, K] with `<module>.weight_scale_inv` [ceil(N / bn),
// ceil(K / bk)] for `weight_block_size` [bn, bk] (edge blocks partial), or
// a `<module>.weight_scale` of one value (per tensor), [N] / [N, 1] (per
// channel) or the same block grid.
//
// Value: float32(e4m3) * scale, in float32, rounded once to the output
// type — DeepSeek's own conversion (`inference/kernel.py` weight_dequant,
// used by `fp8_cast_bf16.py`: `x.to(float32) * s`, stored as bfloat16).
// Readers that round the scale to bfloat16 first differ from it by one
// ulp on some values; nibble follows DeepSeek. Default output: bfloat16
// (the type those models are released in and DeepSeek's script writes).
// `modules_to_not_convert` modules are stored in float and copied.
#ifndef NIBBLE_CHECKPOINT_METHODS_FP8_H_
#define NIBBLE_CHECKPOINT_METHODS_FP8_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/methods/method.h"
#include "op/dequantizer.h"

namespace nibble {

struct Fp8Config {
  std::vector<int64_t> block;  // weight_block_size [bn, bk], or empty
  std::string activation_scheme;
  std::vector<std::string> not_convert;  // modules_to_not_convert
};
StatusOr<Fp8Config> ParseFp8Config(const nlohmann::json& q, const std::string& who);

// weight float8 (e4m3fn / e5m2) [N, K], scale float32 / bfloat16 /
// float16 whose shape MatchScaleGrid (scale_grid.h) fits to `block`
// ({bn, bk} or empty) -> output [N, K] (kUndefined `out`: bfloat16).
StatusOr<Dequantizer> PrepareFp8(const TensorView& weight, const TensorView& scale,
                                 const std::vector<int64_t>& block, DType out,
                                 const std::string& name);

// The registry's hook (registry.cc).
StatusOr<std::unique_ptr<HfMethod>> Fp8Configured(const HfConfigFiles& files,
                                                  const std::string& who);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_FP8_H_
