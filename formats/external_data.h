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

// A file read with pread(), never memory-mapped: if the file shrinks while
// nibble reads it (another process truncates it), Read() returns an error
// instead of the process dying of SIGBUS.
class ReadOnlyFile {
 public:
  static StatusOr<std::shared_ptr<ReadOnlyFile>> Open(const std::string& path);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  uint64_t size() const { return size_; }  // at Open()
  const std::string& path() const { return path_; }
  // Reads exactly n bytes at `offset` into dst; an error naming the file if
  // it has become shorter or cannot be read.
  Status Read(uint64_t offset, size_t n, void* dst) const;

 private:
  ReadOnlyFile() = default;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string path_;
};

// True if `p` holds an external-data reference.
bool HasExternalData(const onnx::TensorProto& p);

// Resolves tensors of one model (external files are opened once).
class TensorResolver {
 public:
  // `model_dir`: the folder external locations are relative to.
  explicit TensorResolver(std::string model_dir) : model_dir_(std::move(model_dir)) {}

  // A view of the tensor's bytes. Inline raw_data is zero-copy (valid while
  // `proto` lives); external data is read into `*storage` (checked against
  // the file's size first), typed fields are decoded into it. Errors name
  // the tensor.
  StatusOr<TensorView> Resolve(const onnx::TensorProto& proto, Tensor* storage);

  // Element type and shape without touching data.
  static StatusOr<TensorView> Describe(const onnx::TensorProto& proto);

 private:
  std::string model_dir_;
  std::map<std::string, std::shared_ptr<ReadOnlyFile>> files_;
};

}  // namespace nibble

#endif  // NIBBLE_FORMATS_EXTERNAL_DATA_H_
