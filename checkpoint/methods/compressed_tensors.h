// compressed-tensors (llm-compressor; transformers' compressed-tensors
// integration): the config groups of `quantization_config` and the layers
// they target. Read: "pack-quantized" (`<module>.weight_packed` int32 with
// `.weight_shape`, 4 and 8 bits, symmetric or with `.weight_zero_point`,
// optional `.weight_g_idx`) and "int-quantized" (an int8 `.weight`), with
// `.weight_scale` of strategy tensor, channel or group; "naive-quantized"
// (the same int8 codes). Float types: "float-quantized" (a float8 e4m3
// `.weight`, `.weight_scale` per tensor / channel / group / block; the
// package's `_dequantize` computes `x_q.to(scale.dtype) * scale`, so the
// product is rounded to the scale's type, Plan::product) and
// "nvfp4-pack-quantized" (`.weight_packed` uint8 [N, K / 2], two e2m1
// codes per byte low nibble first, `.weight_scale` e4m3 per 16,
// `.weight_global_scale` float32: NVFP4PackedCompressor.decompress_weight
// unpacks to bfloat16 and dequantizes with scale = float32(weight_scale) /
// global_scale in float32, result bfloat16). Other formats (mxfp4-pack-
// quantized, dense with parameters, ...) and types are refused by name;
// activation and output scales of a read layer are dropped (a dequantized
// model computes in float).
#ifndef NIBBLE_CHECKPOINT_METHODS_COMPRESSED_TENSORS_H_
#define NIBBLE_CHECKPOINT_METHODS_COMPRESSED_TENSORS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/methods/method.h"
#include "op/dequantizer.h"

namespace nibble {

// compressed-tensors weights of one Linear layer [N, K] (N outputs):
//  - "pack-quantized": `weight` is weight_packed, int32 [N, K * bits / 32]
//    (bits 4 or 8; element k of a row at bits [k * bits, + bits) of the
//    row's little-endian words), each code stored as q + 2^(bits - 1);
//  - "int-quantized": `weight` is int8 [N, K], q itself (bits 8).
// weight_shape: the int64 [2] tensor {N, K} (pack-quantized), else null.
// scale [N, groups] (strategy group / channel) or one value (tensor), in
// the model's float type. zero_point (asymmetric; null = symmetric): int32
// packed down the rows, [ceil(N * bits / 32), groups], stored as
// zp + 2^(bits - 1) like the codes, or int8 [N, groups] holding zp.
// g_idx (act-order): int32 / int64 [K], the group of each input channel.
// Value (q - zp) * scale, rounded once to `out` (kUndefined: the scale's
// type).
struct CompressedTensorsWeight {
  bool packed = true;  // pack-quantized (else int-quantized)
  int bits = 4;
  int64_t group_size = 0;  // 0: from the shapes; checked when given
  const TensorView* weight = nullptr;
  const TensorView* weight_shape = nullptr;
  const TensorView* scale = nullptr;
  const TensorView* zero_point = nullptr;
  const TensorView* g_idx = nullptr;
};
StatusOr<Dequantizer> PrepareCompressedTensors(const CompressedTensorsWeight& w, DType out,
                                               const std::string& name);

// One config group ("config_groups": {"group_0": ...}).
struct CompressedTensorsGroup {
  std::string name;
  std::vector<std::string> targets;  // "Linear" (a class: every layer) or "re:REGEX"
  std::string format;                // the group's own, else the config's
  int bits = 4;
  std::string type = "int";  // "int" or "float"
  bool symmetric = true;
  std::string strategy = "group";  // "tensor", "channel", "group", "block", ...
  int64_t group_size = 0;
  std::vector<int64_t> block;  // block_structure [bn, bk] (strategy block)
  std::string actorder;        // "", "group", "weight", "static"
};

struct CompressedTensorsConfig {
  std::string format;
  std::vector<CompressedTensorsGroup> groups;
  std::vector<std::string> ignore;  // modules left in float
};
// Parses the quantization_config object `q` (sparsity is refused).
StatusOr<CompressedTensorsConfig> ParseCompressedTensorsConfig(const nlohmann::json& q,
                                                               const std::string& who);
// The group whose targets match `module`: a "re:" regex matched from the
// start of the module name, the exact name, or a class name such as
// "Linear" (which matches every layer); null when none does.
const CompressedTensorsGroup* MatchCompressedTensorsGroup(const CompressedTensorsConfig& c,
                                                          const std::string& module);

// The registry's hooks (registry.cc).
StatusOr<std::unique_ptr<HfMethod>> CompressedTensorsConfigured(const HfConfigFiles& files,
                                                                const std::string& who);
std::unique_ptr<HfMethod> CompressedTensorsUnconfigured();

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_COMPRESSED_TENSORS_H_
