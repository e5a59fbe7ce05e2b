// safetensors files and sharded safetensors folders: header validation and
// zero-copy views of the tensors' bytes. Bytes only; no arithmetic.
//
// Checked: file at least 8 bytes; header length (u64 LE) <= 100 MB and
// inside the file; header is one JSON object with no duplicate keys; every
// entry has a known dtype, a shape of non-negative integers and
// data_offsets [begin, end] with end - begin == its byte size (overflow
// checked); the tensors tile the byte buffer exactly (no holes, no overlap,
// nothing after the last); `__metadata__` maps strings to strings.
//
// Files are read with pread (never mapped: a file truncated meanwhile is an
// error, not SIGBUS); Load() copies one tensor's bytes. Views of in-memory
// bytes (FromBytes) may be misaligned — the format does not align tensors:
// read them with memcpy or unaligned loads only.
#ifndef NIBBLE_FORMATS_SAFETENSORS_H_
#define NIBBLE_FORMATS_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/tensor.h"
#include "formats/files.h"

namespace nibble {

inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype_name;  // as written ("F16", "I32", ...)
  DType dtype = DType::kUndefined;
  Shape shape;
  uint64_t begin = 0, end = 0;  // relative to the byte buffer
};

class SafetensorsFile {
 public:
  // `inputs`, if given, records the file.
  static StatusOr<std::shared_ptr<SafetensorsFile>> Open(const std::string& path,
                                                         InputFiles* inputs = nullptr);
  // Parses bytes owned by the caller (they must outlive the object);
  // `label` names the source in messages.
  static StatusOr<std::shared_ptr<SafetensorsFile>> FromBytes(const uint8_t* data, size_t size,
                                                              const std::string& label);

  const std::string& label() const { return label_; }
  // In file (offset) order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  const SafetensorsTensor* Find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The tensor's bytes: read from the file into the first bytes of
  // `*storage` (grown when smaller, never shrunk, so a reused buffer costs
  // no allocation), or (FromBytes) a view of the caller's bytes, possibly
  // misaligned.
  // `cancelled` (optional): as ReadOnlyFile::Read's.
  StatusOr<TensorView> Load(const SafetensorsTensor& t, std::vector<uint8_t>* storage,
                            const CancelCallback* cancelled = nullptr) const;
  // Copies the tensor's bytes [offset, offset + n) (default: all, end -
  // begin of them) straight to `dst`; a range past the tensor is an error.
  Status ReadInto(const SafetensorsTensor& t, uint8_t* dst, uint64_t offset = 0,
                  uint64_t n = UINT64_MAX) const;

 private:
  SafetensorsFile() = default;
  Status Parse();
  std::shared_ptr<ReadOnlyFile> file_;  // null for FromBytes
  std::string header_bytes_;            // Open(): the first 8 + n bytes
  uint64_t buffer_offset_ = 0;          // file offset of the tensor bytes
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  const uint8_t* buffer_ = nullptr;  // start of the tensor bytes
  std::string label_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint's tensors across one file or the shards listed by a folder's
// `model.safetensors.index.json` (weight_map: tensor -> shard file name;
// shard names must be plain file names inside the folder).
class SafetensorsSet {
 public:
  // `path`: a .safetensors file, or a folder holding model.safetensors or
  // model.safetensors.index.json (or exactly one *.safetensors file). Every
  // file read must resolve inside the folder (symlinks may not leave it);
  // the index is at most kMaxJsonFileBytes. `inputs` records every file.
  static StatusOr<SafetensorsSet> Open(const std::string& path, InputFiles* inputs = nullptr);

  struct Entry {
    const SafetensorsFile* file;
    const SafetensorsTensor* tensor;
  };
  // Every tensor, shard by shard in file order.
  const std::vector<Entry>& entries() const { return entries_; }
  const Entry* Find(const std::string& name) const;
  size_t num_files() const { return files_.size(); }

 private:
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::vector<Entry> entries_;
  std::map<std::string, size_t> index_;
};

}  // namespace nibble

#endif  // NIBBLE_FORMATS_SAFETENSORS_H_
