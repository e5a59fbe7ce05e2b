// Converting a whole checkpoint (`nibble dequant`, nibble.dequant): to one
// float safetensors file, or to a Hugging Face model folder (shards, index,
// config.json without quantization_config, tokenizer files copied). Both
// are atomic: nothing appears at the output until it is complete, and
// errors and interruptions (DequantOptions::cancelled) leave nothing.
#ifndef NIBBLE_CHECKPOINT_CONVERT_H_
#define NIBBLE_CHECKPOINT_CONVERT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/cancel.h"
#include "base/status.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/progress.h"
#include "formats/safetensors_writer.h"

namespace nibble {

// One step of a conversion into a model folder that separate processes or
// machines run (nibble.distributed): every step opens the input and
// derives the same plan — the tensors, their types and shapes, the shard
// each goes into — from the same input and options, so a shard written by
// any worker is byte for byte the one a single DequantCheckpoint writes.
struct FolderStep {
  enum class Kind {
    kPlan,   // check everything, fill `shards` and `key`; write nothing
    kShard,  // write shard number `shard` into `staging` (atomically)
    kIndex,  // write the index, config.json and the copied files into `staging`
  };
  Kind kind = Kind::kPlan;
  std::string staging;  // kShard / kIndex: an existing folder
  size_t shard = 0;     // kShard
  // kShard / kIndex: when not empty, the key the plan must have (the
  // driver's): a worker that derives another — the input changed, or
  // another nibble version — writes nothing and says so.
  std::string expected_key;
  // Filled by every kind: the plan.
  struct Shard {
    std::string name;  // "model.safetensors", "model-00001-of-00003.safetensors", ...
    uint64_t bytes = 0;
    size_t tensors = 0;
  };
  std::vector<Shard> shards;
  // kShard: the XXH64 of the shard file written (base/xxh64.h), computed
  // as it was written.
  uint64_t xxh64 = 0;
  // The job's identity: the input files (path, size, modification time),
  // the tensors, types, shapes and shards, the text files and nibble's
  // version. Two steps with the same key write the same bytes.
  std::string key;
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
  ProgressCallback progress;  // after each tensor (checkpoint/progress.h)
  // Asked between tensors and row chunks; true stops the conversion with
  // nothing published (base/cancel.h).
  CancelCallback cancelled;
  // Write a Hugging Face model folder instead of one safetensors file, in
  // shards of at most max_shard_bytes: always for a Hugging Face input
  // whose output path does not end in ".safetensors"; for GGUF with `hf`
  // (checkpoint/hf_export.h).
  bool hf = false;
  uint64_t max_shard_bytes = 5'000'000'000;
  // Keep a sharded folder's complete shards when interrupted, for the next
  // run of the same job to resume (WriteHfFolder). The CLI sets it; a
  // library caller that retries in the same process does not need it (a
  // live process's temporaries are never adopted).
  bool resumable = false;
  CheckpointOptions open;
  // When set, the conversion runs only this step (a folder output only;
  // `out` is the final folder, which must still be absent or empty).
  FolderStep* step = nullptr;
};

struct DequantReport {
  int dequantized = 0, copied = 0;
  // The output type of the dequantized tensors (the first one's, when no
  // type was requested and they differ); kUndefined when there are none.
  DType dtype = DType::kUndefined;
  uint64_t bytes = 0;
  // skip_unsupported: "<input name>: <why>" of each tensor left out.
  std::vector<std::string> skipped;
  // Things a user should know that are not errors (e.g. stale temporaries
  // of an earlier, killed run that were removed).
  std::vector<std::string> notes;
};

namespace internal {
// The tensors of `ck` that `options` selects (tensors / exclude by input
// name); unsupported ones are an error naming them, or are listed in
// report->skipped with skip_unsupported. An empty selection is an error.
Status SelectTensors(const Checkpoint& ck, const DequantOptions& options, const std::string& in,
                     DequantReport* report, std::vector<const CheckpointTensor*>* chosen);
}  // namespace internal

// Converts `in` to float safetensors, atomically (nothing is written on
// error, including when a selected tensor is unsupported and
// skip_unsupported is off, or on cancellation). One rule for every input:
// an `out` ending in ".safetensors" is one file; any other `out` (a
// trailing '/' included) is a model folder, new or empty — safetensors
// shards (+ index), and for a Hugging Face input config.json without
// quantization_config and with torch_dtype, tokenizer / generation files
// copied; for GGUF with options.hf, DequantGgufToHf (transformers names,
// config.json from the metadata); other inputs keep their tensor names.
Status DequantCheckpoint(const std::string& in, const std::string& out,
                         const DequantOptions& options, DequantReport* report);
// The same for a checkpoint already open (read from `in`; an ONNX model:
// onnx/onnx_checkpoint.h).
Status DequantOpenCheckpoint(const Checkpoint& ck, const std::string& in, const std::string& out,
                             const DequantOptions& options, DequantReport* report);

// One tensor of a Hugging Face folder being written, with its byte size.
struct HfFolderItem {
  SafetensorsOutput out;
  uint64_t bytes = 0;
};

// Files copied verbatim into an output folder are at most this large.
inline constexpr uint64_t kMaxCopiedFileBytes = uint64_t{256} << 20;

// Writes a Hugging Face model folder `out_dir` (absent or empty, checked
// by the caller; it appears complete or not at all): `items` as
// model.safetensors, or as shards of at most options.max_shard_bytes (a
// larger tensor alone) with model.safetensors.index.json; each of
// `text_files` (file name, contents: config.json, tokenizer.json, ...);
// each of `copy_files` (paths) copied under its own name.
//
// Resumable: shards are written one by one into the temporary folder,
// each fsynced and renamed into it before its entry is added to the
// folder's manifest (AtomicFolder::kResumeManifest, itself replaced
// atomically). An interrupted run — Ctrl-C, an error, or a kill — leaves
// that folder when it completed a shard; a later run of the same job (the
// same `inputs` by path, size and modification time, the same tensors,
// types, shard size, text files and nibble version: the manifest's key)
// adopts it and skips each shard whose manifest entry, size and header
// (tensor names, types, shapes) match; it writes the rest. Any other run
// into OUT removes such a folder (a stale temporary).
using HfTextFiles = std::vector<std::pair<std::string, std::string>>;  // name, contents
Status WriteHfFolder(const std::string& out_dir, const std::vector<HfFolderItem>& items,
                     const HfTextFiles& text_files, const std::vector<std::string>& copy_files,
                     const InputFiles& inputs, const DequantOptions& options,
                     DequantReport* report);

}  // namespace nibble

#endif  // NIBBLE_CHECKPOINT_CONVERT_H_
