// Writers of LLM checkpoint layouts from float32 weights (round to nearest,
// the producers' simple schemes): GPTQ v1/v2 (optionally act-order g_idx),
// AWQ GEMM, GGUF Q4_0 / Q4_1 / Q8_0 / Q4_K blocks. For tests, benchmarks
// and group-size studies on real weights; the inverse of op/checkpoint.h.
// W is the PyTorch Linear weight [N, K] (row-major, N outputs).
#ifndef NIBBLE_OP_QUANTIZE_CHECKPOINT_H_
#define NIBBLE_OP_QUANTIZE_CHECKPOINT_H_

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"

namespace nibble {

struct GptqTensors {
  Tensor qweight;  // int32 [K / 8, N]
  Tensor qzeros;   // int32 [groups, N / 8]
  Tensor scales;   // float16 [groups, N]
  Tensor g_idx;    // int32 [K]
};

// group_size -1: one group. sym: z = 8 (qzeros 0x77777777 in v1). v2: qzeros
// hold z (v1: z - 1, and z >= 1 so every loader reads the same values).
// g_idx: group of each input channel (any order, every group used); empty =
// k / G. Needs K % 8 == 0 and N % 8 == 0.
StatusOr<GptqTensors> QuantizeGptq(const float* w, int64_t N, int64_t K, int64_t group_size,
                                   bool sym, bool v2, const std::vector<int32_t>& g_idx = {});

struct AwqTensors {
  Tensor qweight;  // int32 [K, N / 8], AWQ nibble order
  Tensor qzeros;   // int32 [groups, N / 8], AWQ nibble order
  Tensor scales;   // float16 [groups, N]
};
StatusOr<AwqTensors> QuantizeAwq(const float* w, int64_t N, int64_t K, int64_t group_size);

// The bytes of a GGUF tensor of ggml type 2 (Q4_0), 3 (Q4_1), 8 (Q8_0) or
// 12 (Q4_K) holding w as rows x cols (ne = [cols, rows]); cols must be a
// multiple of the block (32, or 256 for Q4_K).
StatusOr<std::vector<uint8_t>> QuantizeGgml(uint32_t type, const float* w, int64_t rows,
                                            int64_t cols);

}  // namespace nibble

#endif  // NIBBLE_OP_QUANTIZE_CHECKPOINT_H_
