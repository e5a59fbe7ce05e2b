// Opening the files a command reads, and checking the path it writes,
// safely. Bytes and file identities only; no arithmetic.
//
// Every input is opened with O_NONBLOCK and must be a regular file: a FIFO,
// a device, a socket or a directory is refused at once (opening a FIFO
// never blocks, /dev/zero is never read). Small metadata files (JSON, ONNX
// protobuf) are read only if their size, checked before reading, is under a
// cap. Files named inside a model folder must resolve (symlinks and ".."
// followed) to a file inside that folder. Each file a command reads is
// recorded by device and inode in an InputFiles set, and an output path is
// refused if it names any of them (by any spelling: "./m", an absolute path,
// a symlink or a hard link), before anything is written.
#ifndef NIBBLE_FORMATS_FILES_H_
#define NIBBLE_FORMATS_FILES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/cancel.h"
#include "base/status.h"

namespace nibble {

// Metadata files (config.json, index files, ONNX models without their
// external data) larger than this are refused before they are read.
inline constexpr uint64_t kMaxJsonFileBytes = uint64_t{64} << 20;
// A protobuf message cannot exceed 2 GiB.
inline constexpr uint64_t kMaxProtoFileBytes = (uint64_t{2} << 30) - 1;

struct FileId {
  uint64_t dev = 0, ino = 0;
  bool operator==(const FileId& o) const { return dev == o.dev && ino == o.ino; }
};

// The files one command has read (or will read), by identity.
class InputFiles {
 public:
  void Add(const FileId& id, const std::string& path);
  // The path of the recorded file with this identity, or nullptr.
  const std::string* Find(const FileId& id) const;
  void Merge(const InputFiles& other);
  size_t size() const { return files_.size(); }
  const std::vector<std::pair<FileId, std::string>>& files() const { return files_; }

 private:
  std::vector<std::pair<FileId, std::string>> files_;
};

// A file read with pread(), never memory-mapped: if the file shrinks while
// nibble reads it (another process truncates it), Read() returns an error
// instead of the process dying of SIGBUS. Opening refuses anything but a
// regular file without blocking.
class ReadOnlyFile {
 public:
  // `inputs`, if given, records the file.
  static StatusOr<std::shared_ptr<ReadOnlyFile>> Open(const std::string& path,
                                                      InputFiles* inputs = nullptr);
  ~ReadOnlyFile();
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  uint64_t size() const { return size_; }  // at Open()
  const std::string& path() const { return path_; }
  const FileId& id() const { return id_; }
  // Reads exactly n bytes at `offset` into dst; an error naming the file if
  // it has become shorter or cannot be read. `cancelled` (optional): asked
  // between pieces of kCancelCheckBytes; when it says stop, an error
  // ending in kInterrupted (dst's contents then unspecified).
  Status Read(uint64_t offset, size_t n, void* dst,
              const CancelCallback* cancelled = nullptr) const;

 private:
  ReadOnlyFile() = default;
  int fd_ = -1;
  uint64_t size_ = 0;
  FileId id_;
  std::string path_;
};

// The whole content of a regular file of at most `max_bytes` (the size is
// checked before anything is read or allocated). `what` names the file's
// role in messages ("config", "ONNX model").
StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes,
                                    const std::string& what, InputFiles* inputs = nullptr);

// True if `path` exists (lstat: a dangling symlink exists too).
bool PathExists(const std::string& path);
// True if `path` is a directory (following symlinks).
bool IsDirectory(const std::string& path);

// `dir` + "/" + `name` after checking that it resolves (realpath: every
// symlink and ".." followed) to a path inside realpath(dir). One exception,
// for the Hugging Face hub cache: when dir is <repo>/snapshots/<revision>,
// whose files are symlinks into <repo>/blobs/, the boundary is <repo>. A
// missing file is fine (the caller's open reports it); a path that leaves
// the boundary is an error naming `what`.
StatusOr<std::string> PathInside(const std::string& dir, const std::string& name,
                                 const std::string& what);

// The output checks of every command (dequant, fold, bench), made before
// any work. Both refuse an empty path, a NUL byte, and a path whose folder
// does not exist or is not a folder (the message carries errno's text);
// `what` names the option ("output", "--out", "external data output").
//
// A file output: it must not exist, or be a regular file that is none of
// `inputs`. Symbolic links are refused (nibble replaces outputs atomically
// by rename, which would replace the link, not its target: name the
// target instead), and so are FIFOs, devices, sockets, directories and a
// path ending in '/'.
Status CheckOutputPath(const std::string& path, const InputFiles& inputs,
                       const std::string& what = "output");
// A folder output (a model folder, published by renaming a finished
// temporary folder into place): it must not exist, or be an empty folder;
// a symbolic link, a file (an input or not) or a non-empty folder is
// refused. A trailing '/' is allowed.
Status CheckOutputFolder(const std::string& path, const InputFiles& inputs,
                         const std::string& what = "output");

// `s` with every byte that is not printable ASCII or part of valid UTF-8
// written as \xNN, and control characters escaped: safe to print.
std::string EscapeBytes(const std::string& s);
// `s` as the inside of a JSON string (valid UTF-8 out; bytes that are not
// valid UTF-8 appear as the six characters \\xNN).
std::string JsonEscape(const std::string& s);
// True if `s` is valid UTF-8.
bool IsValidUtf8(const std::string& s);

}  // namespace nibble

#endif  // NIBBLE_FORMATS_FILES_H_
