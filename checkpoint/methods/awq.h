// AWQ GEMM (AutoAWQ, GPTQModel, transformers' AWQ integration): 4-bit
// Linear layers, `<module>.qweight` int32 [K, N / 8] and `.qzeros` int32
// [groups, N / 8] in AWQ's nibble order, `.scales` [groups, N]. Zero
// points when stored (`zero_point: false` checkpoints written by GPTQModel
// keep them), else z = 8. Only the GEMM version is read (gemv, gemv_fast
// and marlin are refused by name). Without an AWQ config, a `.qweight`
// whose scales are [groups, 8 N] is read as AWQ, its group size from the
// shapes. Output: the PyTorch Linear weight [N, K] (the view is [K, N] for
// qweight not 4-byte aligned in memory).
#ifndef NIBBLE_CHECKPOINT_METHODS_AWQ_H_
#define NIBBLE_CHECKPOINT_METHODS_AWQ_H_

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/methods/method.h"
#include "op/dequantizer.h"

namespace nibble {

// AWQ GEMM: qweight int32 [K, N / 8] and qzeros int32 [groups, N / 8] in
// AWQ's nibble order (column 8c + p in nibble {0,4,1,5,2,6,3,7}[p]);
// scales [groups, N]. Codes and zeros unsigned 0..15. qzeros null
// (symmetric, `zero_point: false`, without stored zeros): z = 8.
StatusOr<Dequantizer> PrepareAwq(int64_t group_size, const TensorView& qweight,
                                 const TensorView* qzeros, const TensorView& scales, DType out,
                                 const std::string& name);

// An AWQ quantization_config.
struct AwqConfig {
  int64_t group_size = 128;  // -1: one group
  std::string version = "gemm";
  bool zero_point = true;  // false: symmetric (GPTQModel)
};
StatusOr<AwqConfig> ParseAwqConfig(const nlohmann::json& q, const std::string& who);

// The registry's hooks (registry.cc).
StatusOr<std::unique_ptr<HfMethod>> AwqConfigured(const HfConfigFiles& files,
                                                  const std::string& who);
std::unique_ptr<HfMethod> AwqUnconfigured();

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_AWQ_H_
