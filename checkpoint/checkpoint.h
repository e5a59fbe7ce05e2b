// LLM checkpoint files as a whole — what `nibble dequant`, `nibble inspect`,
// `nibble bench --weights`, nibble.open and the C checkpoint API read:
// Hugging Face safetensors checkpoints (a folder, a sharded folder or one
// .safetensors file) of every method in checkpoint/methods/, GGUF files,
// and ONNX models (onnx/onnx_checkpoint.h). A source lists the tensors
// (checkpoint/gguf_source.h, checkpoint/hf_source.h); the bytes are read by
// formats/, each layer is lowered by its method to one Plan and run by the
// shared kernels. Converting a whole checkpoint: checkpoint/convert.h.
#ifndef NIBBLE_CHECKPOINT_CHECKPOINT_H_
#define NIBBLE_CHECKPOINT_CHECKPOINT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/cancel.h"
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
  DType stored_dtype = DType::kUndefined;  // copies: their type
  // Quantized: the output type when none is requested (kUndefined: the
  // checkpoint's default).
  DType out_default = DType::kUndefined;
  // Quantized: reads the tensor's inputs into `*buffers` (they must outlive
  // the result) and builds the Dequantizer for an output type; its Run()
  // writes `shape`.
  // What a prepared Dequantizer references (kept by the caller until the
  // Dequantizer is gone): bytes read from files, and tensors (filled in
  // place, never resized after the Dequantizer is built). One Buffers may
  // serve tensor after tensor (Reuse() between them): its byte buffers keep
  // their memory, so a sequence of tensors allocates — and touches fresh
  // pages — only where one needs more than the ones before it.
  struct Buffers {
    // A byte buffer for the next input read (Load() grows it as needed and
    // never shrinks it; only its first bytes may belong to this tensor).
    std::vector<uint8_t>* NextBytes() {
      if (next_bytes == bytes.size()) bytes.emplace_back();
      return &bytes[next_bytes++];
    }
    // Forgets the previous tensor's inputs, keeping the byte buffers'
    // memory for the next one.
    void Reuse() {
      next_bytes = 0;
      tensors.clear();
      cancelled = nullptr;
    }
    // Asked between pieces of the inputs' reads (Checkpoint::Read sets it
    // for its preparation only; empty: never stops).
    CancelCallback cancelled;
    std::vector<std::vector<uint8_t>> bytes;
    size_t next_bytes = 0;
    std::vector<Tensor> tensors;
  };
  std::function<StatusOr<Dequantizer>(DType, Buffers*)> prepare;
  // Not quantized: writes the stored bytes [offset, offset + n) to dst
  // (thread-safe: positioned reads).
  std::function<Status(uint64_t offset, uint64_t n, uint8_t* dst)> read_stored;
};

// How to read what a checkpoint does not state (or to override what it
// states).
struct CheckpointOptions {
  // GPTQ: "v1" (qzeros hold z - 1) or "v2" (z); "" = as the config files or
  // the safetensors metadata state it (GPTQ with zero points is refused
  // when nothing states it).
  std::string gptq_format;
  // GPTQ v1: "autogptq" (stored + 1, no wrap) or "gptqmodel" (word-wise
  // + 0x11111111 with carries); "" = by the producer the metadata names
  // (GPTQModel -> gptqmodel; AutoGPTQ or unnamed -> autogptq).
  std::string gptq_v1_zeros;
};

// What a source lists: the tensors and what their functions reference.
struct CheckpointListing {
  std::string description;
  std::vector<std::pair<std::string, std::string>> properties;  // for `inspect`
  // The files' own metadata: safetensors' __metadata__ (every shard's,
  // the first of equal keys kept), GGUF's key / values (strings whole,
  // other values as text).
  std::vector<std::pair<std::string, std::string>> metadata;
  std::vector<CheckpointTensor> tensors;
  std::vector<std::shared_ptr<void>> keep_alive;  // what the tensors' functions reference
  InputFiles inputs;                              // every file read
  // The output type of quantized tensors that have no default of their own.
  DType default_dtype = DType::kFloat32;
  // Hugging Face checkpoints: the folder holding config.json, and its text.
  std::string hf_dir, hf_config_json;
};

class Checkpoint {
 public:
  // A GGUF file, a .safetensors file, or a folder (config.json /
  // quantize_config.json + safetensors shards): GPTQ, AWQ,
  // compressed-tensors, bitsandbytes 4-bit, or plain float tensors.
  static StatusOr<Checkpoint> Open(const std::string& path, const CheckpointOptions& options = {});
  // True if `path` looks like one (GGUF magic, .safetensors, a folder).
  static bool Recognizes(const std::string& path);

  const std::string& description() const { return description_; }
  // What `inspect` shows: the format's and the method's settings.
  const std::vector<std::pair<std::string, std::string>>& properties() const { return props_; }
  // The files' own metadata (CheckpointListing::metadata).
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }
  const std::vector<CheckpointTensor>& tensors() const { return tensors_; }
  // The output dtype of `t` when `requested` is asked for (kUndefined =
  // default: the scales' type for Hugging Face formats, float32 for GGUF).
  // Copies of float tensors (biases, norms, embeddings; float8 / 16 / 32 /
  // 64) are converted to
  // `requested` too (rounded once, to nearest even); other copies and
  // kUndefined keep their stored type.
  DType OutputDType(const CheckpointTensor& t, DType requested) const;
  // The tensor named `name` (output name first, then input name), or null;
  // a hash lookup.
  const CheckpointTensor* Find(const std::string& name) const;
  // Rows of `t` along its first dimension (1 for a rank-0 tensor).
  static int64_t Rows(const CheckpointTensor& t);
  // Bytes that Read() writes for rows [row0, row1) (row1 = -1: all rows) in
  // the type OutputDType(t, requested); an error for a range outside t
  // (another negative row1 included).
  StatusOr<uint64_t> OutputBytes(const CheckpointTensor& t, DType requested, int64_t row0 = 0,
                                 int64_t row1 = -1) const;
  // Writes rows [row0, row1) of `t` along its first dimension (row1 = -1:
  // to the end), dequantized or copied, as OutputDType(t, requested), into
  // dst (row-major, contiguous; dst_bytes >= OutputBytes). requested:
  // kUndefined, kFloat32, kFloat16 or kBFloat16. threads: 0 = OpenMP's
  // default, n = at most n threads (<= kMaxThreads). The bits do not depend
  // on the range or the thread count. Thread-safe: any number of threads
  // may read tensors of one open Checkpoint at once (positioned reads, no
  // shared mutable state). Errors name the tensor; nothing is written past
  // the range's bytes.
  // `scratch` (optional; one thread's at a time): input buffers reused from
  // an earlier Read (CheckpointTensor::Buffers) — a caller reading tensor
  // after tensor passes the same one and saves an allocation per input.
  // `cancelled` (optional, base/cancel.h): asked on the calling thread
  // before anything is read, between pieces of kCancelCheckBytes of each
  // input read from its file, and before each piece of rows of output (as
  // Dequantizer::Run's pieces); when it says stop, Read returns
  // "tensor '<name>': interrupted" (base/cancel.h's kInterrupted; dst's
  // contents then unspecified).
  Status Read(const CheckpointTensor& t, DType requested, int64_t row0, int64_t row1, int threads,
              void* dst, size_t dst_bytes, CheckpointTensor::Buffers* scratch = nullptr,
              const CancelCallback& cancelled = {}) const;
  // Reads rows [r0, r1) of one prepared tensor into dst (as Read does).
  using RowReader = std::function<Status(int64_t r0, int64_t r1, void* dst, size_t dst_bytes)>;
  // Prepares `t` once (reads its packed inputs into *scratch and lowers
  // them) for any number of row-range reads: the way to read one large
  // tensor in pieces (Read() prepares on every call). The result refers to
  // *this, `t` and *scratch, which must outlive it; scratch serves one
  // prepared tensor at a time (preparing another reuses it). Same
  // arguments, errors and bits as Read(); `cancelled` is asked while the
  // inputs are read (the row reads' pieces are the caller's).
  StatusOr<RowReader> PrepareRows(const CheckpointTensor& t, DType requested, int threads,
                                  CheckpointTensor::Buffers* scratch,
                                  const CancelCallback& cancelled = {}) const;
  // Same as Read, into a new tensor of shape t.shape with shape[0] = row1 - row0.
  StatusOr<Tensor> Read(const CheckpointTensor& t, DType requested, int64_t row0 = 0,
                        int64_t row1 = -1, int threads = 0,
                        const CancelCallback& cancelled = {}) const;
  // Writes all of `t` to dst, which holds its OutputBytes() (scratch: as
  // for Read).
  Status Fill(const CheckpointTensor& t, DType requested, int threads, uint8_t* dst,
              CheckpointTensor::Buffers* scratch = nullptr) const;
  // Every file the checkpoint was read from (outputs must be none of them).
  const InputFiles& inputs() const { return inputs_; }
  // `t` as float32 values (for the group-size study).
  StatusOr<std::vector<float>> LoadFloat(const CheckpointTensor& t, int threads) const;
  // A checkpoint of what a source listed (checkpoint/gguf_source.h,
  // checkpoint/hf_source.h, onnx/onnx_checkpoint.h).
  static Checkpoint FromListing(CheckpointListing listing);
  // Hugging Face checkpoints: the folder holding config.json etc. ("" for
  // GGUF), and config.json's text ("" when there is none).
  const std::string& hf_dir() const { return hf_dir_; }
  const std::string& hf_config_json() const { return hf_config_json_; }

 private:
  // The checks of the tensor, the output type and the thread count.
  static Status CheckRequest(const CheckpointTensor& t, DType requested, int threads);
  // Read()'s checks of the request and the destination; the bytes it
  // writes (row1 = -1 resolved).
  StatusOr<uint64_t> CheckRead(const CheckpointTensor& t, DType requested, int64_t row0,
                               int64_t* row1, int threads, const void* dst, size_t dst_bytes) const;
  // Reads quantized `t`'s inputs into *buffers (Reuse()d first; asking
  // `cancelled` meanwhile) and lowers them: Read's and PrepareRows' step.
  StatusOr<Dequantizer> Prepare(const CheckpointTensor& t, DType requested, int threads,
                                CheckpointTensor::Buffers* buffers,
                                const CancelCallback& cancelled) const;
  // Rows [row0, row1) of a prepared quantized tensor into dst (`need`
  // bytes, checked).
  static Status RunPrepared(const Dequantizer& d, const CheckpointTensor& t, int64_t row0,
                            int64_t row1, void* dst, uint64_t need, int threads,
                            const CancelCallback& cancelled = {});
  // Builds the name indexes Find() uses (after tensors_ is final).
  void IndexNames();
  std::string description_;
  std::vector<std::pair<std::string, std::string>> props_, metadata_;
  std::vector<CheckpointTensor> tensors_;
  std::unordered_map<std::string, size_t> by_name_, by_source_;  // -> tensors_
  std::vector<std::shared_ptr<void>> keep_alive_;
  InputFiles inputs_;
  DType default_dtype_ = DType::kFloat16;
  std::string hf_dir_, hf_config_json_;
};

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_CHECKPOINT_H_
