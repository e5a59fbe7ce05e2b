// LLM checkpoint layouts (../shared/FORMATS.md) lowered to the shared Plan:
// GPTQ and AWQ GEMM linear layers (safetensors), GGUF Q4_0 / Q4_1 / Q8_0 /
// Q4_K tensors. Validation and lowering only; the kernels are the shared
// family (kernels/dequantize.h).
//
// GPTQ / AWQ: output() is the PyTorch Linear weight [N, K] (N outputs, K
// input features) and Run() writes it. The 2-D view the tile API addresses
// is that [N, K] weight too (codes read straight from the checkpoint's
// column-packed words), except for act-order GPTQ (a non-contiguous g_idx)
// and misaligned AWQ qweight, whose view is the checkpoint's [K, N] order
// (output_transposed() is true).
// GGUF: the view is [ne[1] * ne[2] * ne[3], ne[0]]; output() has the
// PyTorch shape (ne reversed).
#ifndef NIBBLE_OP_CHECKPOINT_H_
#define NIBBLE_OP_CHECKPOINT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

struct GptqOptions {
  // Input channels per group (-1: one group). When it disagrees with the
  // shapes (per-module `dynamic` overrides), the group size the shapes
  // imply is used if it is consistent; otherwise it is an error.
  int64_t group_size = 128;
  // checkpoint_format "gptq_v2": qzeros hold z. "gptq" (v1): they hold
  // z - 1 per nibble, decoded as (nibble + 1) & 15.
  bool v2 = false;
};

// qweight int32 [K / 8, N] (nibble j of word (r, n) = element (8r + j, n));
// qzeros int32 [groups, N / 8] (nibble j = column 8c + j) or null (z = 8);
// scales float16 / bfloat16 / float32 [groups, N]; g_idx int32 [K] or null
// (group of input channel k; any order; k / G when null).
// `out`: float32 / float16 / bfloat16, or kUndefined for the scales' type.
StatusOr<Dequantizer> PrepareGptq(const GptqOptions& options, const TensorView& qweight,
                                  const TensorView* qzeros, const TensorView& scales,
                                  const TensorView* g_idx, DType out, const std::string& name);

// AWQ GEMM: qweight int32 [K, N / 8] and qzeros int32 [groups, N / 8] in
// AWQ's nibble order (column 8c + p in nibble {0,4,1,5,2,6,3,7}[p]);
// scales [groups, N]. Codes and zeros unsigned 0..15.
StatusOr<Dequantizer> PrepareAwq(int64_t group_size, const TensorView& qweight,
                                 const TensorView& qzeros, const TensorView& scales, DType out,
                                 const std::string& name);

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

#endif  // NIBBLE_OP_CHECKPOINT_H_
