// GPTQ (AutoGPTQ, GPTQModel, transformers' GPTQ integration): 2-, 4- and
// 8-bit Linear layers, `<module>.qweight` int32 [K * bits / 32, N] with
// `.scales` [groups, N], `.qzeros` int32 [groups, N * bits / 32] (v1
// "gptq": z - 1; v2 "gptq_v2": z) and `.g_idx` int32 [K] (act-order).
//
// What decides how a layer is read (never guessed silently):
//  - bits from the zero points' (or g_idx's) shape, else the config;
//  - the format (v1 / v2) from CheckpointOptions, config.json /
//    quantize_config.json, or the safetensors metadata
//    ("checkpoint_format"; AutoGPTQ's "gptq_checkpoint_format") — layers
//    with zero points are refused when none
//    states it (a lone .safetensors file);
//  - v1 zero points decoded by the producer's own loader's rule
//    (GptqZeros: AutoGPTQ or unnamed: + 1 modulo 2^bits, its default
//    loader's rule; GPTQModel: word + 0x11111111).
// Without a GPTQ config, a `.qweight` whose scales are [groups, N] (N =
// qweight's columns) is read as GPTQ, its group size from the shapes.
//
// Output: the PyTorch Linear weight [N, K]. The 2-D view the tile API
// addresses is that [N, K] weight (codes read straight from qweight's
// columns), except act-order (a non-contiguous g_idx) on CPUs with
// neither AVX-512 nor AVX2 and 2- / 8-bit layers, whose view is qweight's
// [K, N] order
// (output_transposed() is true; HasGroupMapColumnTiles() in
// kernels/dequantize.h says which).
#ifndef NIBBLE_CHECKPOINT_METHODS_GPTQ_H_
#define NIBBLE_CHECKPOINT_METHODS_GPTQ_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/methods/method.h"
#include "checkpoint/methods/packed_words.h"
#include "op/dequantizer.h"

namespace nibble {

struct GptqOptions {
  // Input channels per group (-1: one group). When it disagrees with the
  // shapes (per-module `dynamic` overrides), the group size the shapes
  // imply is used if it is consistent; otherwise it is an error.
  int64_t group_size = 128;
  int bits = 4;  // 2, 4 or 8 (3 packs across words: refused by name)
  GptqZeros zeros = GptqZeros::kPlusOneWrap;
};

// qweight int32 [K * bits / 32, N] (field j of word (r, n) = element
// (r * 32 / bits + j, n)); qzeros int32 [groups, N * bits / 32] (field j =
// column (32 / bits) * c + j) or null (z = 2^(bits - 1)); scales float16 /
// bfloat16 / float32 [groups, N]; g_idx int32 [K] or null (group of input
// channel k; any order; k / G when null). Value s * (q - z).
// `out`: float32 / float16 / bfloat16, or kUndefined for the scales' type.
StatusOr<Dequantizer> PrepareGptq(const GptqOptions& options, const TensorView& qweight,
                                  const TensorView* qzeros, const TensorView& scales,
                                  const TensorView* g_idx, DType out, const std::string& name);

// A GPTQ quantization_config (config.json) and / or quantize_config.json.
struct GptqConfig {
  int bits = 4;
  int64_t group_size = 128;  // -1: one group over all input channels
  bool desc_act = false;     // act-order (g_idx may be non-monotonic)
  bool sym = true;
  // "gptq" (v1: qzeros store z - 1) or "gptq_v2" (z); format_source says
  // where it was read ("quantize_config.json checkpoint_format", "the
  // default of a GPTQ config without checkpoint_format", ...).
  std::string checkpoint_format;
  std::string format_source;
  // The producer as its metadata names it ("gptqmodel:2.2.0", from
  // meta.quantizer), "" when not named: it decides how v1 zero points are
  // decoded.
  std::string producer;
  std::string source;  // the config's place, for `inspect`
};
// Reads config.json's quantization_config and quantize_config.json (either
// may be absent); when both state the format or the producer they must
// agree. `who` names the main one in messages. Refuses marlin, gptq_p and
// bits other than 2, 3, 4 and 8 by name.
StatusOr<GptqConfig> ParseGptqConfig(const HfConfigFiles& files, const std::string& who);

// The registry's hooks (registry.cc).
StatusOr<std::unique_ptr<HfMethod>> GptqConfigured(const HfConfigFiles& files,
                                                   const std::string& who);
std::unique_ptr<HfMethod> GptqUnconfigured();

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_GPTQ_H_
