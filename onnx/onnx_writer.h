// Writes an ONNX model whose large initializers are produced one at a time
// (streamed), so memory stays bounded by the largest tensor plus the graph.
//
// Layout: the ModelProto's own fields, then the graph (field 7) holding the
// graph's fields and, appended as further `initializer` (field 5) records,
// the streamed tensors — either inline (`raw_data`, field 9) or, in external
// mode, as references into a data file beside the model (each tensor at a
// 64-byte aligned offset; 4096 for tensors of 1 MiB and more).
//
// Atomic: everything is written to temporaries beside the destination and
// renamed at the end; on any error the temporaries are removed and nothing
// is left at the destination.
#ifndef NIBBLE_ONNX_ONNX_WRITER_H_
#define NIBBLE_ONNX_ONNX_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "base/cancel.h"
#include "base/status.h"
#include "onnx/onnx.pb.h"

namespace nibble {

struct StreamedTensor {
  nibble_onnx::TensorProto meta;  // name, dims, data_type (no data fields)
  uint64_t bytes = 0;             // exact byte size of the data
  // Writes exactly `bytes` bytes to `dst` (called once, in order).
  std::function<Status(uint8_t* dst)> fill;
};

struct ModelWriteOptions {
  bool external = false;      // data of streamed tensors in a file beside the model
  std::string external_name;  // file name (default: "<model file name>.data")
  // Called after each streamed tensor: (index, tensors, bytes so far).
  std::function<void(size_t, size_t, uint64_t)> progress;
  // Asked before each streamed tensor and before the commit (base/cancel.h).
  CancelCallback cancelled;
  // Stale temporaries of the outputs removed before writing are added here.
  std::vector<std::string>* removed_stale = nullptr;
};

// Where an existing external data file waits while it is replaced:
// "<data>.nibble-old-<host>-<pid>-XXXXXX" beside it (never removed by
// another run: it is the only copy of the old data during the commit).
std::string OldDataNameFor(const std::string& data_path);

// Protobuf cannot parse messages of 2 GiB or more: above this, use external data.
inline constexpr uint64_t kMaxInlineModelBytes = (uint64_t{2} << 30) - (uint64_t{64} << 20);

// Total bytes the inline form would have.
uint64_t InlineModelBytes(const nibble_onnx::ModelProto& model,
                          const std::vector<StreamedTensor>& t);

// The external data file WriteModelStreaming writes beside `model_path`:
// `external_name` (default "<model file name>.data"), which must be a plain
// file name.
StatusOr<std::string> ExternalDataPathFor(const std::string& model_path,
                                          const std::string& external_name);

// Writes `bytes` to `path` atomically (temporary beside it + rename).
Status WriteFileAtomic(const std::string& path, const std::string& bytes);

Status WriteModelStreaming(const std::string& path, const nibble_onnx::ModelProto& model,
                           std::vector<StreamedTensor>& tensors, const ModelWriteOptions& options);

}  // namespace nibble

#endif  // NIBBLE_ONNX_ONNX_WRITER_H_
