// bitsandbytes (transformers' bitsandbytes integration). 4-bit (NF4 /
// FP4, with or without double quantization): each layer's JSON
// quant_state (`<W>.quant_state.bitsandbytes__nf4|fp4`, a uint8 tensor)
// says how `<W>` (the packed codes), `<W>.absmax`, `<W>.quant_map` and the
// nested tensors are read; the code book is read from quant_map, not from
// memory. LLM.int8 (`load_in_8bit`: an int8 `<W>` with `.SCB`) is listed
// and refused by name.
#ifndef NIBBLE_CHECKPOINT_METHODS_BITSANDBYTES_H_
#define NIBBLE_CHECKPOINT_METHODS_BITSANDBYTES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/methods/method.h"
#include "op/dequantizer.h"

namespace nibble {

// bitsandbytes 4-bit (NF4 / FP4) as transformers saves it: `weight` uint8
// holding the flattened weight's n = prod(shape) codes two per byte, the
// high nibble first; blocks of `blocksize` consecutive elements (the last
// may be partial) share absmax[block]; value = quant_map[code] *
// absmax[block] in float32. absmax is float32 [ceil(n / blocksize)], or
// with double quantization uint8 codes q whose value is, in float32,
// nested_quant_map[q] * nested_absmax[block / nested_blocksize] rounded,
// then + nested_offset rounded (bitsandbytes' two steps).
struct Bnb4Weight {
  Shape shape;
  int64_t blocksize = 64;
  const TensorView* weight = nullptr;
  const TensorView* absmax = nullptr;
  const TensorView* quant_map = nullptr;  // float32 [16]
  // Double quantization (all null when absent).
  const TensorView* nested_absmax = nullptr;     // float32
  const TensorView* nested_quant_map = nullptr;  // float32 [256]
  int64_t nested_blocksize = 256;
  float nested_offset = 0.0f;
  DType dtype = DType::kFloat16;  // the model's type (the default output)
};
StatusOr<Dequantizer> PrepareBnb4(const Bnb4Weight& w, DType out, const std::string& name);

// The JSON transformers stores, as a uint8 tensor, in
// `<W>.quant_state.bitsandbytes__nf4` (or __fp4).
struct BnbQuantState {
  std::string quant_type;  // "nf4" or "fp4"
  int64_t blocksize = 0;
  std::string dtype;  // the model's float type, e.g. "float16", "bfloat16"
  std::vector<int64_t> shape;
  bool nested = false;  // double quantization
  int64_t nested_blocksize = 0;
  std::string nested_dtype;
  double nested_offset = 0.0;
};
// `who` names the tensor in messages.
StatusOr<BnbQuantState> ParseBnbQuantState(const std::string& json, const std::string& who);

// A bitsandbytes quantization_config.
struct BnbConfig {
  bool load_in_4bit = false, load_in_8bit = false;
  std::string quant_type;  // bnb_4bit_quant_type
};
StatusOr<BnbConfig> ParseBnbConfig(const nlohmann::json& q, const std::string& who);

// The registry's hooks (registry.cc).
StatusOr<std::unique_ptr<HfMethod>> BnbConfigured(const HfConfigFiles& files,
                                                  const std::string& who);
std::unique_ptr<HfMethod> BnbUnconfigured();

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_BITSANDBYTES_H_
