// Writes a safetensors file whose tensors are produced one at a time
// (streamed): memory stays bounded by the largest tensor written whole,
// plus two row chunks for tensors produced in row ranges. Writing a chunk
// overlaps producing the next one (one I/O thread). Atomic: written to a
// temporary beside the destination, fsynced, renamed; on any error nothing
// is left at the destination.
#ifndef NIBBLE_FORMATS_SAFETENSORS_WRITER_H_
#define NIBBLE_FORMATS_SAFETENSORS_WRITER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "base/cancel.h"
#include "base/status.h"
#include "base/tensor.h"

namespace nibble {

struct SafetensorsOutput {
  std::string name;
  DType dtype = DType::kFloat32;
  Shape shape;
  // Writes exactly the tensor's bytes (elements x dtype size) to `dst`
  // (4096-byte aligned; called once, in order).
  std::function<Status(uint8_t* dst)> fill;
  // Writes rows [r0, r1) along the first dimension (row-major bytes) to
  // dst, which holds dst_bytes >= their size (4096-byte aligned).
  using RowWriter = std::function<Status(int64_t r0, int64_t r1, void* dst, size_t dst_bytes)>;
  // Optional, used instead of `fill` when set: called once, in order (after
  // the previous tensor's last rows were produced), it returns the writer
  // for this tensor's rows, which is then called for consecutive ranges
  // covering all rows and dropped before the next tensor's open_rows.
  std::function<StatusOr<RowWriter>()> open_rows;
};

struct SafetensorsWriteOptions {
  std::map<std::string, std::string> metadata;  // "__metadata__"
  // Called after each tensor: (index, tensors, bytes so far).
  std::function<void(size_t, size_t, uint64_t)> progress;
  // Row chunks of tensors with open_rows: at most this many bytes (but at
  // least one row). 4, 16 and 64 MiB converted a 3 GiB GPTQ checkpoint in
  // the same time (within the noise); 16 MiB keeps the two chunk buffers
  // at 32 MiB.
  uint64_t chunk_bytes = uint64_t{16} << 20;
  // Asked before each tensor and each row chunk (base/cancel.h).
  CancelCallback cancelled;
  // Stale temporaries of `path` removed before writing (AtomicFile::Create)
  // are added here, if set.
  std::vector<std::string>* removed_stale = nullptr;
  // If set, receives the XXH64 of the whole file (base/xxh64.h), computed
  // as it is written.
  uint64_t* xxh64 = nullptr;
};

Status WriteSafetensorsStreaming(const std::string& path,
                                 const std::vector<SafetensorsOutput>& tensors,
                                 const SafetensorsWriteOptions& options);

}  // namespace nibble

#endif  // NIBBLE_FORMATS_SAFETENSORS_WRITER_H_
