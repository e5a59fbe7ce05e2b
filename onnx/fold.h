// Load-time dequantization of ONNX models (what `nibble fold` and `nibble
// inspect` call). Every DequantizeLinear (default domain and "opmx") whose inputs
// are all initializers becomes a float initializer named like the node's
// output; every com.microsoft MatMulNBits with constant weights becomes
// MatMul (+ Add for a bias) with a dequantized [K, N] initializer. The rest
// of the model is untouched.
#ifndef NIBBLE_ONNX_FOLD_H_
#define NIBBLE_ONNX_FOLD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "checkpoint/progress.h"

namespace nibble {

struct FoldOptions {
  int threads = 0;
  ProgressCallback progress;  // after each tensor written (checkpoint/progress.h)
  // Asked between tensors; true stops with nothing published
  // (base/cancel.h).
  CancelCallback cancelled;
  bool external = false;      // force external data for the output
  std::string external_name;  // its file name (default "<out>.data")
};

struct FoldReport {
  int dequantize_nodes = 0;   // DequantizeLinear folded (both domains)
  int matmulnbits_nodes = 0;  // MatMulNBits rewritten
  int removed_initializers = 0;
  int overridable_nodes = 0;  // not folded: they read overridable initializers
  uint64_t dequantized_bytes = 0;
  bool external = false;  // output written with external data
  std::string note;       // e.g. "nothing to fold"
  // Stale temporaries of an earlier, killed run that were removed.
  std::vector<std::string> notes;
};

// Reads `in`, writes `out` atomically (temporary + rename; nothing left at
// `out` on error). Errors name the node or tensor. `in` is never modified.
Status FoldModel(const std::string& in, const std::string& out, const FoldOptions& options,
                 FoldReport* report);

struct QuantizedWeightInfo {
  std::string name;           // the quantized initializer (X / B)
  std::string node;           // node name (or its first output)
  std::string kind;           // "DequantizeLinear", "opmx DequantizeLinear", "MatMulNBits"
  std::string element_type;   // codes' type, e.g. "int4", "int4x4 (int16)"
  std::string logical_shape;  // of the dequantized weight, as text
  Shape shape;                // the same, as numbers
  int bits = 0;
  std::string granularity;  // "block 32", "group 128", "per-axis", "per-tensor", ...
  std::string axis;
  std::string zero_point;  // "none", "int8", "uint4 (packed)", "float16", ...
  std::string output_type;
  uint64_t packed_bytes = 0;  // codes + scales + zero points
  uint64_t dequantized_bytes = 0;
};

// Lists the quantized weights of a model (metadata only: external data is
// not read).
StatusOr<std::vector<QuantizedWeightInfo>> InspectModel(const std::string& path);

}  // namespace nibble

#endif  // NIBBLE_ONNX_FOLD_H_
