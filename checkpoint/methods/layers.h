// LLM checkpoint layouts lowered to the shared Plan: GPTQ (2/4/8-bit), AWQ
// GEMM, compressed-tensors and bitsandbytes 4-bit linear layers
// (safetensors), GGUF tensors of every registered ggml block type.
// Validation and lowering only; the kernels are the shared family
// (kernels/dequantize.h).
//
// GPTQ / AWQ: output() is the PyTorch Linear weight [N, K] (N outputs, K
// input features) and Run() writes it. The 2-D view the tile API addresses
// is that [N, K] weight too (codes read straight from the checkpoint's
// column-packed words), except for misaligned AWQ qweight, and act-order
// GPTQ (a non-contiguous g_idx) on CPUs without AVX-512 (or 2- / 8-bit),
// whose view is the checkpoint's [K, N] order (output_transposed() is
// true; HasGroupMapColumnTiles() in kernels/dequantize.h says which).
// GGUF: the view is [ne[1] * ne[2] * ne[3], ne[0]]; output() has the
// PyTorch shape (ne reversed).
#ifndef NIBBLE_CHECKPOINT_METHODS_LAYERS_H_
#define NIBBLE_CHECKPOINT_METHODS_LAYERS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

// How GPTQ zero points are decoded from qzeros (b-bit fields, 32 / b per
// int32 word along N). v1 checkpoints store z - 1; each producer's own
// loader undoes that differently, and nibble decodes as the producer does:
enum class GptqZeros {
  // gptq_v2: the fields hold z.
  kStored,
  // v1, AutoGPTQ's loaders (and any producer not named): field + 1, no
  // wrap (a stored 15 is z = 16 for 4 bits; 255 is 256 for 8 bits).
  kPlusOne,
  // v1, GPTQModel: the word plus 0x11111111 (4 bits; 8 bits 0x01010101,
  // 2 bits 0x55555555) modulo 2^32, carries included, then the fields (the
  // inverse of its v2 -> v1 word subtraction).
  kWordCarry,
};
const char* GptqZerosName(GptqZeros z);

struct GptqOptions {
  // Input channels per group (-1: one group). When it disagrees with the
  // shapes (per-module `dynamic` overrides), the group size the shapes
  // imply is used if it is consistent; otherwise it is an error.
  int64_t group_size = 128;
  int bits = 4;  // 2, 4 or 8 (3 packs across words: refused by name)
  GptqZeros zeros = GptqZeros::kPlusOne;
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

// AWQ GEMM: qweight int32 [K, N / 8] and qzeros int32 [groups, N / 8] in
// AWQ's nibble order (column 8c + p in nibble {0,4,1,5,2,6,3,7}[p]);
// scales [groups, N]. Codes and zeros unsigned 0..15. qzeros null
// (symmetric, `zero_point: false`, without stored zeros): z = 8.
StatusOr<Dequantizer> PrepareAwq(int64_t group_size, const TensorView& qweight,
                                 const TensorView* qzeros, const TensorView& scales, DType out,
                                 const std::string& name);

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

// A GGUF tensor of a ggml block type nibble dequantizes (one registered in
// kernels/layouts.h; DequantizableGgmlTypeNames()), by ggml type id:
// `ne` as in the file, `data` its `bytes` bytes (any alignment).
StatusOr<Dequantizer> PrepareGgml(uint32_t type, const std::vector<int64_t>& ne,
                                  const uint8_t* data, size_t bytes, DType out,
                                  const std::string& name);

// True for the ggml types PrepareGgml handles.
bool GgmlTypeIsDequantizable(uint32_t type);

// Their names, comma-separated ("q4_0, q4_1, ..."), in registry order.
std::string DequantizableGgmlTypeNames();
// The id of the dequantizable type named `name` ("q6_k"), else 0.
uint32_t DequantizableGgmlTypeId(const std::string& name);

// rows x cols elements of a dequantizable ggml type as blocks with random
// codes and fixed, moderate header values (every header byte 0x3C): data
// for speed measurements of types nibble has no quantizer for.
StatusOr<std::vector<uint8_t>> SyntheticGgmlBlocks(uint32_t type, int64_t rows, int64_t cols,
                                                   uint64_t seed);

// "blocks of 32" / "super-blocks of 256, sub-blocks of 32"; "" for a type
// PrepareGgml does not handle.
std::string GgmlBlockDescription(uint32_t type);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_METHODS_LAYERS_H_
