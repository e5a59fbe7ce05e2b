// Files written through a descriptor to a temporary name and renamed into
// place only when complete: a reader never sees a half-written output.
#ifndef NIBBLE_FORMATS_ATOMIC_FILE_H_
#define NIBBLE_FORMATS_ATOMIC_FILE_H_

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "op/status.h"

namespace nibble {

// A file written through a descriptor; closed (and removed unless
// committed) on destruction.
class TempFile {
 public:
  TempFile() = default;
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  Status Create(const std::string& path) {
    path_ = path;
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status::Error("cannot create '" + path + "': " + std::strerror(errno));
    return Status::Ok();
  }
  Status Write(const void* data, uint64_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
      const ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status::Error("cannot write '" + path_ + "': " + std::strerror(errno));
      }
      p += w;
      n -= static_cast<uint64_t>(w);
      offset_ += static_cast<uint64_t>(w);
    }
    return Status::Ok();
  }
  // Writes zeros up to `target` (>= offset()).
  Status PadTo(uint64_t target) {
    static const uint8_t zeros[4096] = {};
    while (offset_ < target) {
      NIBBLE_RETURN_IF_ERROR(Write(zeros, std::min<uint64_t>(sizeof zeros, target - offset_)));
    }
    return Status::Ok();
  }
  Status Finish() {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      fd_ = -1;
      return Status::Error("cannot finish '" + path_ + "': " + std::strerror(errno));
    }
    fd_ = -1;
    return Status::Ok();
  }
  void Commit() { committed_ = true; }
  uint64_t offset() const { return offset_; }
  const std::string& path() const { return path_; }
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_ && !path_.empty()) std::remove(path_.c_str());
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t offset_ = 0;
  bool committed_ = false;
};


// A 4096-byte aligned, uninitialized buffer (streaming stores and
// page-sized writes line up); empty for 0 bytes.
struct PageBufferFree {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(4096)); }
};
using PageBuffer = std::unique_ptr<uint8_t[], PageBufferFree>;
inline PageBuffer AllocatePageBuffer(uint64_t bytes) {
  return PageBuffer(bytes ? static_cast<uint8_t*>(::operator new[](
                                static_cast<size_t>(bytes), std::align_val_t(4096)))
                          : nullptr);
}

// "<path>.tmp-<pid>": the temporary beside `path`.
inline std::string TempNameFor(const std::string& path) {
  return path + ".tmp-" + std::to_string(::getpid());
}

}  // namespace nibble

#endif  // NIBBLE_FORMATS_ATOMIC_FILE_H_
