// Where a TensorProto's bytes live: inline raw_data, ONNX external data (a
// file beside the model, read with pread), or the typed *_data fields
// (decoded). Bytes only; no arithmetic.
//
// External data rules (checked): `location` is relative to the model's
// folder, never absolute, never with a ".." component, and resolves
// (symlinks followed) inside that folder; `offset` and
// `length` are non-negative integers; offset + length lies inside the file;
// length equals the tensor's byte size.
#ifndef NIBBLE_ONNX_EXTERNAL_DATA_H_
#define NIBBLE_ONNX_EXTERNAL_DATA_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "base/status.h"
#include "base/tensor.h"
#include "formats/files.h"
#include "onnx/onnx.pb.h"

namespace nibble {

// True if `p` holds an external-data reference.
bool HasExternalData(const nibble_onnx::TensorProto& p);

// Resolves tensors of one model (external files are opened once).
class TensorResolver {
 public:
  // `model_dir`: the folder external locations are relative to.
  // `inputs`, if given, records every external data file opened.
  explicit TensorResolver(std::string model_dir, InputFiles* inputs = nullptr)
      : model_dir_(std::move(model_dir)), inputs_(inputs) {}

  // Opens (and records) the external data file of `proto`, if it has one,
  // without reading it; the same checks as Resolve's on the location.
  Status OpenExternal(const nibble_onnx::TensorProto& proto);

  // A view of the tensor's bytes. Inline raw_data is zero-copy (valid while
  // `proto` lives); external data is read into `*storage` (checked against
  // the file's size first), typed fields are decoded into it. Errors name
  // the tensor. `cancelled` (optional): asked between pieces of an external
  // read (ReadOnlyFile::Read).
  StatusOr<TensorView> Resolve(const nibble_onnx::TensorProto& proto, Tensor* storage,
                               const CancelCallback* cancelled = nullptr);

  // Copies bytes [offset, offset + n) of the tensor's data to dst: from
  // its external file (only that range is read; `cancelled` as Resolve's)
  // or its inline raw_data; typed fields are decoded whole first. A range
  // past the tensor is an error naming it.
  Status ReadRange(const nibble_onnx::TensorProto& proto, uint64_t offset, uint64_t n, uint8_t* dst,
                   const CancelCallback* cancelled = nullptr);

  // Element type and shape without touching data.
  static StatusOr<TensorView> Describe(const nibble_onnx::TensorProto& proto);

 private:
  // Where external `proto`'s data lies (v: its Describe()): its opened
  // file and the data's first byte, every location field checked.
  StatusOr<std::pair<const ReadOnlyFile*, uint64_t>> ExternalRange(
      const nibble_onnx::TensorProto& proto, const TensorView& v);
  // The opened external file of `proto` (checked location), or an error.
  StatusOr<const ReadOnlyFile*> ExternalFile(const nibble_onnx::TensorProto& proto,
                                             const std::string& location);
  std::string model_dir_;
  InputFiles* inputs_ = nullptr;
  std::map<std::string, std::shared_ptr<ReadOnlyFile>> files_;
};

}  // namespace nibble

#endif  // NIBBLE_ONNX_EXTERNAL_DATA_H_
