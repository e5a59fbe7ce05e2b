// Where a TensorProto's bytes live: inline raw_data, ONNX external data (a
// file beside the model, memory-mapped), or the typed *_data fields
// (decoded). Bytes only; no arithmetic.
//
// External data rules (checked): `location` is relative to the model's
// folder, never absolute, never with a ".." component; `offset` and
// `length` are non-negative integers; offset + length lies inside the file;
// length equals the tensor's byte size.
#ifndef NIBBLE_FORMATS_EXTERNAL_DATA_H_
#define NIBBLE_FORMATS_EXTERNAL_DATA_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "formats/onnx.pb.h"
#include "op/status.h"
#include "op/tensor.h"

namespace nibble {

// A read-only, private memory mapping of a whole file.
class MappedFile {
 public:
  static StatusOr<std::shared_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// True if `p` holds an external-data reference.
bool HasExternalData(const onnx::TensorProto& p);

// Resolves tensors of one model (external files are opened once).
class TensorResolver {
 public:
  // `model_dir`: the folder external locations are relative to.
  explicit TensorResolver(std::string model_dir) : model_dir_(std::move(model_dir)) {}

  // A view of the tensor's bytes. Inline raw_data and external data are
  // zero-copy (valid while `proto` and this resolver live); typed fields are
  // decoded into `*storage`. Errors name the tensor.
  StatusOr<TensorView> Resolve(const onnx::TensorProto& proto, Tensor* storage);

  // Element type and shape without touching data.
  static StatusOr<TensorView> Describe(const onnx::TensorProto& proto);

 private:
  std::string model_dir_;
  std::map<std::string, std::shared_ptr<MappedFile>> files_;
};

}  // namespace nibble

#endif  // NIBBLE_FORMATS_EXTERNAL_DATA_H_
