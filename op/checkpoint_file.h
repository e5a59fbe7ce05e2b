// LLM checkpoint files as a whole — what `nibble dequant`, `nibble inspect`
// and `nibble bench --weights` use: GPTQ / AWQ safetensors (a Hugging Face
// folder, a sharded folder or one .safetensors file) and GGUF files. Formats
// are read by formats/, lowered by op/checkpoint.h, run by the shared
// kernels.
#ifndef NIBBLE_OP_CHECKPOINT_FILE_H_
#define NIBBLE_OP_CHECKPOINT_FILE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "formats/files.h"
#include "op/dequantizer.h"

namespace nibble {

// One tensor of the converted checkpoint.
struct CheckpointTensor {
  std::string name;    // output name (HF: "<prefix>.weight"; GGUF: as stored)
  std::string source;  // input name: the stored tensor ("<prefix>.qweight" for
                       // GPTQ / AWQ; GGUF and copies: as stored)
  std::string kind;    // "GPTQ", "AWQ", "q4_0", ..., or "copy" (not quantized)
  std::string detail;  // e.g. "G=128 v1 sym g_idx act-order"
  Shape shape;         // output shape (PyTorch order)
  bool quantized = false;
  bool supported = true;  // false: listed, refused by dequant
  std::string why_not;    // reason when unsupported
  uint64_t stored_bytes = 0;
  DType stored_dtype = DType::kUndefined;  // copies keep it
  // Quantized: reads the tensor's inputs into `*buffers` (they must outlive
  // the result) and builds the Dequantizer for an output type; its Run()
  // writes `shape`.
  using Buffers = std::vector<std::vector<uint8_t>>;
  std::function<StatusOr<Dequantizer>(DType, Buffers*)> prepare;
  // Not quantized: writes the stored bytes (stored_bytes of them) to dst.
  std::function<Status(uint8_t* dst)> copy_to;
};

class Checkpoint {
 public:
  // A GGUF file, a .safetensors file, or a folder (config.json /
  // quantize_config.json + safetensors shards).
  static StatusOr<Checkpoint> Open(const std::string& path);
  // True if `path` looks like one (GGUF magic, .safetensors, a folder).
  static bool Recognizes(const std::string& path);

  const std::string& description() const { return description_; }
  const std::vector<std::pair<std::string, std::string>>& properties() const { return props_; }
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  // The output dtype of `t` when `requested` (kUndefined = default: float16
  // for GPTQ/AWQ, float32 for GGUF) is asked for; copies keep their type.
  DType OutputDType(const CheckpointTensor& t, DType requested) const;
  // Writes `t` (dequantized or copied) to dst, which holds its bytes.
  Status Fill(const CheckpointTensor& t, DType requested, int threads, uint8_t* dst) const;
  // Every file the checkpoint was read from (outputs must be none of them).
  const InputFiles& inputs() const { return inputs_; }
  // `t` as float32 values (for the group-size study).
  StatusOr<std::vector<float>> LoadFloat(const CheckpointTensor& t, int threads) const;

 private:
  std::string description_;
  std::vector<std::pair<std::string, std::string>> props_;
  std::vector<CheckpointTensor> tensors_;
  std::vector<std::shared_ptr<void>> keep_alive_;
  InputFiles inputs_;
  DType default_dtype_ = DType::kFloat16;
};

struct DequantOptions {
  DType dtype = DType::kUndefined;  // f32 / f16 / bf16; default per format
  // Selection by input name (CheckpointTensor::source), ECMAScript regexes
  // searched anywhere in the name: a tensor is written when it matches
  // `tensors` ("" = all) and does not match `exclude` ("" = none).
  std::string tensors;
  std::string exclude;
  // Leave out selected tensors nibble cannot dequantize (listed in
  // DequantReport::skipped) instead of refusing the whole conversion.
  bool skip_unsupported = false;
  int threads = 0;
  bool progress = false;
  // GGUF only: write a Hugging Face style folder (op/hf_export.h) instead
  // of one safetensors file, in shards of at most max_shard_bytes.
  bool hf = false;
  uint64_t max_shard_bytes = 5'000'000'000;
};

struct DequantReport {
  int dequantized = 0, copied = 0;
  uint64_t bytes = 0;
  // skip_unsupported: "<input name>: <why>" of each tensor left out.
  std::vector<std::string> skipped;
};

namespace internal {
// The tensors of `ck` that `options` selects (tensors / exclude by input
// name); unsupported ones are an error naming them, or are listed in
// report->skipped with skip_unsupported. An empty selection is an error.
Status SelectTensors(const Checkpoint& ck, const DequantOptions& options, const std::string& in,
                     DequantReport* report, std::vector<const CheckpointTensor*>* chosen);
}  // namespace internal

// Converts `in` to a float safetensors file `out` (atomic; nothing written
// on error, including when a selected tensor is unsupported and
// skip_unsupported is off). options.hf: `out` is a folder
// (DequantGgufToHf, op/hf_export.h).
Status DequantCheckpoint(const std::string& in, const std::string& out,
                         const DequantOptions& options, DequantReport* report);

}  // namespace nibble

#endif  // NIBBLE_OP_CHECKPOINT_FILE_H_
