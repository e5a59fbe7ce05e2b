// An ONNX model (external data beside it) as a Checkpoint: the same
// listing and reading API as GGUF and Hugging Face checkpoints
// (checkpoint/checkpoint.h). Library nibble (protobuf).
//
// Tensors, in graph order:
//  - each DequantizeLinear (ai.onnx, opmx) whose inputs are constant
//    initializers: named by its output value, shape and default type as the
//    node defines them (other float types on request: each value computed
//    in float32 and rounded once);
//  - each com.microsoft MatMulNBits with constant weights: named
//    "<B>_dequantized" and shaped [K, N] — the MatMul operand, exactly the
//    initializer `nibble fold` writes;
//  - every other initializer (biases, norms, embeddings...), as stored.
// Codes, scales and zero points read only by those nodes are not listed.
#ifndef NIBBLE_ONNX_ONNX_CHECKPOINT_H_
#define NIBBLE_ONNX_ONNX_CHECKPOINT_H_

#include <string>

#include "base/status.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"

namespace nibble {

// Opens an ONNX model. Reads the model and the external data files'
// sizes; tensors are decoded when read.
StatusOr<Checkpoint> OpenOnnxCheckpoint(const std::string& path);

// An ONNX model (a path ending in ".onnx") through OpenOnnxCheckpoint,
// anything else through Checkpoint::Open.
StatusOr<Checkpoint> OpenAnyCheckpoint(const std::string& path,
                                       const CheckpointOptions& options = {});

// DequantCheckpoint (checkpoint/checkpoint.h), ONNX models included: their
// weights and other initializers into one safetensors file.
Status DequantAnyCheckpoint(const std::string& in, const std::string& out,
                            const DequantOptions& options, DequantReport* report);

}  // namespace nibble

#endif  // NIBBLE_ONNX_ONNX_CHECKPOINT_H_
