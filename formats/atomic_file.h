// Files and folders that appear at their destination only when complete.
//
// AtomicFile writes into an unnamed temporary in the destination's folder
// (O_TMPFILE): if the process dies at any point — error, crash, SIGKILL,
// power loss before Publish() — nothing is left behind. Publish() fsyncs
// and links the data to the destination when nothing is there (one atomic
// step, no temporary name), or links it under a temporary name and renames
// that over the existing file (a SIGKILL in that instant can leave the
// temporary name). On file systems without O_TMPFILE (NFS, some FUSE
// mounts) the temporary is named from the start.
//
// AtomicFolder writes a model folder into a temporary sibling folder and
// renames it into place at the end.
//
// Temporary names: "<dest>.nibble-tmp-<host>-<pid>-<6 random characters>",
// created exclusively (O_EXCL / mkdtemp): two writers — threads or
// processes — never share or delete each other's temporaries, and nibble
// never removes anything it did not create, with one exception: a
// temporary of `dest` left by a nibble process of this host that no longer
// runs (SIGKILL, power loss, a crash) is removed by the next run writing
// `dest` (RemoveStaleTemporaries, which returns what it removed so the
// caller can say so). Errors and interruptions remove the run's own
// temporaries before it returns.
#ifndef NIBBLE_FORMATS_ATOMIC_FILE_H_
#define NIBBLE_FORMATS_ATOMIC_FILE_H_

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/xxh64.h"

namespace nibble {

// The prefix of every temporary beside `dest` (trailing slashes dropped):
// "<dest>.nibble-tmp-<host>-<pid>-"; a temporary adds 6 random characters.
std::string TempPrefixFor(const std::string& dest);

// Removes the temporaries of `dest` (files or folders named
// "<dest>.nibble-tmp-<host>-<pid>-XXXXXX") whose host is this one and whose
// process no longer runs, and returns their paths. Others — another host's,
// a live process's, this process's own, `keep` — are left alone.
std::vector<std::string> RemoveStaleTemporaries(const std::string& dest,
                                                const std::string& keep = "");
// What to tell a user about one that was removed.
std::string StaleTemporaryNote(const std::string& removed_path);

// Files beside `dest` named "<dest>.<kind>-<host>-<pid>-XXXXXX" (kind
// "nibble-tmp" or "nibble-old") whose host is this one and whose process no
// longer runs. Nothing is removed.
std::vector<std::string> FindStale(const std::string& dest, const std::string& kind);

class AtomicFile {
 public:
  AtomicFile() = default;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!published_ && !temp_.empty()) std::remove(temp_.c_str());
  }

  // Opens the temporary for `dest` (nothing exists at `dest` until Publish),
  // after removing `dest`'s stale temporaries (their paths added to
  // *removed, if given).
  Status Create(const std::string& dest, std::vector<std::string>* removed = nullptr) {
    dest_ = dest;
    std::vector<std::string> stale = RemoveStaleTemporaries(dest);
    if (removed != nullptr) removed->insert(removed->end(), stale.begin(), stale.end());
    const auto slash = dest.rfind('/');
    const std::string dir = slash == std::string::npos ? "." : dest.substr(0, slash + 1);
#ifdef O_TMPFILE
    fd_ = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
#endif
    if (fd_ < 0) {  // no O_TMPFILE here: a named temporary
      std::string name = TempPrefixFor(dest) + "XXXXXX";
      fd_ = ::mkostemp(&name[0], O_CLOEXEC);
      if (fd_ < 0) return Status::Error("cannot create '" + dest + "': " + std::strerror(errno));
      (void)::fchmod(fd_, 0644 & ~CurrentUmask());
      temp_ = name;
    }
    return Status::Ok();
  }

  // Every byte written from now on also goes into *hash (nullptr: none).
  void set_hash(Xxh64* hash) { hash_ = hash; }

  Status Write(const void* data, uint64_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    if (hash_ != nullptr) hash_->Update(p, static_cast<size_t>(n));
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, uint64_t{1} << 30));
      const ssize_t w = ::write(fd_, p, chunk);
      if (w < 0) {
        if (errno == EINTR) continue;
        return Status::Error("cannot write '" + dest_ + "': " + std::strerror(errno));
      }
      if (w == 0) return Status::Error("cannot write '" + dest_ + "': no progress");
      p += w;
      n -= static_cast<uint64_t>(w);
      offset_ += static_cast<uint64_t>(w);
    }
    StartWriteback();
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

  // Makes the data durable and gives it the destination name (replacing
  // any file there). After an error nothing new exists at the destination.
  Status Publish() {
    NIBBLE_RETURN_IF_ERROR(Stage());
    return Commit();
  }

  // First half of Publish: the data is complete and durable (fsync), but
  // has no name yet (or only its temporary name). The step that fails on a
  // full disk or an I/O error.
  Status Stage() {
    if (::fsync(fd_) != 0) {
      return Status::Error("cannot write '" + dest_ + "': " + std::strerror(errno));
    }
    return Status::Ok();
  }

  // Second half: gives the staged data the destination name. When nothing
  // exists there, the unnamed temporary is linked straight to it (no
  // temporary name is ever visible); otherwise it is linked under
  // a unique temporary name and renamed over the old file.
  Status Commit() {
    if (temp_.empty()) {
      const std::string proc = "/proc/self/fd/" + std::to_string(fd_);
      if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, dest_.c_str(), AT_SYMLINK_FOLLOW) == 0) {
        return Finish(/*renamed=*/true);
      }
      if (errno != EEXIST) {
        return Status::Error("cannot create '" + dest_ + "': " + std::strerror(errno));
      }
      // A unique temporary name (retried while taken), renamed over the
      // existing file.
      for (int attempt = 0;; ++attempt) {
        std::string name = TempPrefixFor(dest_) + RandomSuffix();
        if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, name.c_str(), AT_SYMLINK_FOLLOW) == 0) {
          temp_ = name;
          break;
        }
        if (errno != EEXIST || attempt >= 100) {
          return Status::Error("cannot create '" + dest_ + "': " + std::strerror(errno));
        }
      }
    }
    if (std::rename(temp_.c_str(), dest_.c_str()) != 0) {
      return Status::Error("cannot rename '" + temp_ + "' to '" + dest_ +
                           "': " + std::strerror(errno));
    }
    return Finish(/*renamed=*/true);
  }

  uint64_t offset() const { return offset_; }
  const std::string& dest() const { return dest_; }

  // The process's file creation mask (read without changing it).
  static mode_t CurrentUmask();
  // 6 random characters for a temporary name.
  static std::string RandomSuffix();

 private:
  // Every kWritebackBytes written, asks the kernel to start writing them to
  // disk (without waiting): Publish()'s fsync then finds little left to do,
  // and a multi-GB output does not pile up dirty pages until the kernel
  // throttles the writer. Advisory: failures are ignored (fsync reports).
  void StartWriteback() {
#ifdef SYNC_FILE_RANGE_WRITE
    constexpr uint64_t kWritebackBytes = uint64_t{32} << 20;
    if (offset_ - writeback_ < kWritebackBytes) return;
    (void)::sync_file_range(fd_, static_cast<off_t>(writeback_),
                            static_cast<off_t>(offset_ - writeback_), SYNC_FILE_RANGE_WRITE);
    writeback_ = offset_;
#endif
  }

  Status Finish(bool renamed) {
    published_ = renamed;
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) {
      return Status::Error("cannot write '" + dest_ + "': " + std::strerror(errno));
    }
    return Status::Ok();
  }

  std::string dest_;
  std::string temp_;  // named temporary, if any
  int fd_ = -1;
  uint64_t offset_ = 0;
  uint64_t writeback_ = 0;  // bytes before it: writeback started
  bool published_ = false;
  Xxh64* hash_ = nullptr;
};

// A model folder written into a unique temporary sibling folder
// ("<dest>.nibble-tmp-...", see above) and renamed into place by Publish().
// Until then nothing exists at `dest`; the destructor removes the
// temporary folder (and only it) unless it was published.
class AtomicFolder {
 public:
  AtomicFolder() = default;
  AtomicFolder(const AtomicFolder&) = delete;
  AtomicFolder& operator=(const AtomicFolder&) = delete;
  ~AtomicFolder();

  // Removes `dest`'s stale temporaries (their paths in *removed, if given),
  // then creates this run's temporary folder. `dest` must have been checked
  // (CheckOutputFolder).
  //
  // Resuming: with a non-empty `resume_key`, a stale temporary folder whose
  // file kResumeManifest holds {"key": resume_key, ...} (an interrupted
  // run of the same job) is not removed but adopted: renamed to this run's
  // temporary (one rename, so two runs never adopt the same folder) with
  // its files; adopted() says so.
  Status Create(const std::string& dest, std::vector<std::string>* removed = nullptr,
                const std::string& resume_key = "");
  // The temporary folder files are written into.
  const std::string& path() const { return temp_; }
  // The stale temporary this run adopted ("" when it started empty).
  const std::string& adopted() const { return adopted_; }
  // Whether the destructor keeps an unpublished temporary (for a later run
  // to resume) instead of removing it.
  void set_keep(bool keep) { keep_ = keep; }
  // Renames the temporary folder to `dest` (absent, or an empty folder).
  Status Publish();

  // The manifest file of a resumable temporary folder.
  static constexpr const char* kResumeManifest = "nibble-resume.json";

 private:
  std::string dest_, temp_, adopted_;
  bool published_ = false;
  bool keep_ = false;
};

// A 4096-byte aligned, uninitialized buffer (streaming stores and
// page-sized writes line up); empty for 0 bytes.
struct PageBufferFree {
  void operator()(uint8_t* p) const { ::operator delete[](p, std::align_val_t(4096)); }
};
using PageBuffer = std::unique_ptr<uint8_t[], PageBufferFree>;
inline PageBuffer AllocatePageBuffer(uint64_t bytes) {
  return PageBuffer(bytes ? static_cast<uint8_t*>(::operator new[](static_cast<size_t>(bytes),
                                                                   std::align_val_t(4096)))
                          : nullptr);
}

}  // namespace nibble

#endif  // NIBBLE_FORMATS_ATOMIC_FILE_H_
