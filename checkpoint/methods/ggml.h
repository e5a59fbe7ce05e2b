// ggml's quantized block types (GGUF files): every type registered in
// kernels/layouts.h (NIBBLE_BLOCK_LAYOUTS) lowered to the shared Plan. The
// 2-D view is [ne[1] * ne[2] * ne[3], ne[0]]; output() has the PyTorch
// shape (ne reversed). The GGUF file itself is read by formats/gguf.h and
// listed by checkpoint/gguf_source.h.
#ifndef NIBBLE_CHECKPOINT_METHODS_GGML_H_
#define NIBBLE_CHECKPOINT_METHODS_GGML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

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
// Why a ggml block type id is not dequantized (for a type that is not:
// unknown ids, the activation types q8_1 / q8_k, any other): the text after
// "GGUF tensor 'x': " / "tensor 'x': ".
std::string GgmlRefusal(uint32_t type);
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

#endif  // NIBBLE_CHECKPOINT_METHODS_GGML_H_
