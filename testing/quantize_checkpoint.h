// Writers of LLM checkpoint layouts from float32 weights (round to nearest,
// the producers' simple schemes): GPTQ v1/v2 (optionally act-order g_idx),
// AWQ GEMM, compressed-tensors pack-quantized, bitsandbytes NF4, GGUF
// Q4_0 / Q4_1 / Q8_0 / Q4_K / MXFP4 blocks. For tests, benchmarks
// and group-size studies on real weights; the inverse of op/checkpoint.h.
// W is the PyTorch Linear weight [N, K] (row-major, N outputs).
#ifndef NIBBLE_TESTING_QUANTIZE_CHECKPOINT_H_
#define NIBBLE_TESTING_QUANTIZE_CHECKPOINT_H_

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
// g_idx: group of each of the K input channels (any order, every group
// used; an error if not K entries or one out of range); empty =
// k / G. Needs K % 8 == 0 and N % 8 == 0.
StatusOr<GptqTensors> QuantizeGptq(const float* w, int64_t N, int64_t K, int64_t group_size,
                                   bool sym, bool v2, const std::vector<int32_t>& g_idx = {});

struct AwqTensors {
  Tensor qweight;  // int32 [K, N / 8], AWQ nibble order
  Tensor qzeros;   // int32 [groups, N / 8], AWQ nibble order
  Tensor scales;   // float16 [groups, N]
};
StatusOr<AwqTensors> QuantizeAwq(const float* w, int64_t N, int64_t K, int64_t group_size);

// compressed-tensors "pack-quantized", 4-bit symmetric (no zero point):
// code q = round(w / s) clamped to -8..7 with s = absmax / 7 (float16),
// stored as q + 8. g_idx as for QuantizeGptq (empty: k / G; otherwise
// written to weight_g_idx). Needs K % 8 == 0.
struct CompressedTensorsTensors {
  Tensor weight_packed;  // int32 [N, K / 8]: element k at bits 4 (k % 8) of word k / 8
  Tensor weight_scale;   // float16 [N, groups]
  Tensor weight_shape;   // int64 [2] = {N, K}
  Tensor weight_g_idx;   // int32 [K] (empty without g_idx)
};
StatusOr<CompressedTensorsTensors> QuantizeCompressedTensors(
    const float* w, int64_t N, int64_t K, int64_t group_size,
    const std::vector<int32_t>& g_idx = {});

// bitsandbytes NF4 of the flattened weight: blocks of `blocksize`
// elements, absmax per block (float32), code = the NF4 level nearest to
// w / absmax, two codes per byte, the first in the high nibble.
struct Bnb4Tensors {
  Tensor weight;     // uint8 [ceil(N * K / 2), 1]
  Tensor absmax;     // float32 [blocks]
  Tensor quant_map;  // float32 [16], the NF4 levels
};
StatusOr<Bnb4Tensors> QuantizeBnbNf4(const float* w, int64_t N, int64_t K, int64_t blocksize);

// DeepSeek-style FP8: per block of block x block elements s = amax / 448
// (float32, stored as weight_scale_inv: the value is e4m3 * s), codes the
// float8_e4m3fn nearest to w / s (ties to even).
struct Fp8BlockTensors {
  Tensor weight;     // float8_e4m3fn bits, uint8 [N, K]
  Tensor scale_inv;  // float32 [ceil(N / block), ceil(K / block)]
};
StatusOr<Fp8BlockTensors> QuantizeFp8Blocks(const float* w, int64_t N, int64_t K, int64_t block);

// gpt-oss MXFP4 of one expert whose unquantized parameter is w [N, K]:
// it is stored transposed, blocks of 32 along N (a column of w): the OCP
// MX scale 2^(floor(log2 amax) - 2) as e8m0, e2m1 codes nearest to
// w / scale, low nibble first. Needs N % 32 == 0.
struct Mxfp4Tensors {
  Tensor blocks;  // uint8 [1, K, N / 32, 16]
  Tensor scales;  // uint8 [1, K, N / 32]
};
StatusOr<Mxfp4Tensors> QuantizeMxfp4Experts(const float* w, int64_t N, int64_t K);

// The bytes of a GGUF tensor of ggml type 2 (Q4_0), 3 (Q4_1), 8 (Q8_0), 12
// (Q4_K) or 39 (MXFP4) holding w as rows x cols (ne = [cols, rows]); cols
// must be a multiple of the block (32, or 256 for Q4_K).
StatusOr<std::vector<uint8_t>> QuantizeGgml(uint32_t type, const float* w, int64_t rows,
                                            int64_t cols);

}  // namespace nibble

#endif  // NIBBLE_TESTING_QUANTIZE_CHECKPOINT_H_
