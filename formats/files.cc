#include "formats/files.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace nibble {

namespace {

const char* KindOf(mode_t m) {
  if (S_ISREG(m)) return "a regular file";
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

FileId IdOf(const struct stat& st) {
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
}

// Opens `path` read-only as a regular file (never blocking on a FIFO).
StatusOr<int> OpenRegular(const std::string& path, struct stat* st) {
  if (path.find('\0') != std::string::npos) {
    return Status::Error("cannot open '" + EscapeBytes(path) + "': the path holds a NUL byte");
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    return Status::Error("cannot open '" + EscapeBytes(path) + "': " + std::strerror(errno));
  }
  if (::fstat(fd, st) != 0) {
    const std::string err = std::strerror(errno);
    ::close(fd);
    return Status::Error("cannot open '" + EscapeBytes(path) + "': " + err);
  }
  if (!S_ISREG(st->st_mode)) {
    ::close(fd);
    return Status::Error("'" + EscapeBytes(path) + "' is " + KindOf(st->st_mode) +
                         ", not a regular file");
  }
  // Back to blocking reads (O_NONBLOCK has no effect on regular files, but
  // be explicit).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

// Length of the valid UTF-8 sequence at s[i], or 0.
size_t Utf8Length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) {
    n = 2, cp = c & 0x1Fu;
  } else if ((c & 0xF0) == 0xE0) {
    n = 3, cp = c & 0x0Fu;
  } else if ((c & 0xF8) == 0xF0) {
    n = 4, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3Fu);
  }
  // Overlong forms, surrogates and values past U+10FFFF are invalid.
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
      cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
    return 0;
  }
  return n;
}

std::string Hex(unsigned char c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02x", c);
  return buf;
}

}  // namespace

void InputFiles::Add(const FileId& id, const std::string& path) {
  if (Find(id) == nullptr) files_.emplace_back(id, path);
}

const std::string* InputFiles::Find(const FileId& id) const {
  for (const auto& f : files_) {
    if (f.first == id) return &f.second;
  }
  return nullptr;
}

void InputFiles::Merge(const InputFiles& other) {
  for (const auto& f : other.files_) Add(f.first, f.second);
}

StatusOr<std::shared_ptr<ReadOnlyFile>> ReadOnlyFile::Open(const std::string& path,
                                                           InputFiles* inputs) {
  struct stat st;
  auto fd = OpenRegular(path, &st);
  if (!fd.ok()) return fd.status();
  std::shared_ptr<ReadOnlyFile> f(new ReadOnlyFile());
  f->fd_ = *fd;
  f->size_ = static_cast<uint64_t>(st.st_size);
  f->id_ = IdOf(st);
  f->path_ = path;
  if (inputs != nullptr) inputs->Add(f->id_, path);
  return f;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

Status ReadOnlyFile::Read(uint64_t offset, size_t n, void* dst,
                          const CancelCallback* cancelled) const {
  auto* p = static_cast<uint8_t*>(dst);
  const bool ask = cancelled != nullptr && *cancelled;
  const size_t piece = ask ? static_cast<size_t>(kCancelCheckBytes) : size_t{1} << 30;
  for (bool first = true; n > 0; first = false) {
    if (ask && !first) NIBBLE_RETURN_IF_ERROR(CheckCancelled(*cancelled));
    const size_t chunk = std::min<size_t>(n, piece);
    const ssize_t r = ::pread(fd_, p, chunk, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return Status::Error("cannot read '" + EscapeBytes(path_) + "': " + std::strerror(errno));
    }
    if (r == 0) {
      return Status::Error("'" + EscapeBytes(path_) + "' ended at byte " + std::to_string(offset) +
                           " while reading (was it truncated or replaced?)");
    }
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::Ok();
}

StatusOr<std::string> ReadSmallFile(const std::string& path, uint64_t max_bytes,
                                    const std::string& what, InputFiles* inputs) {
  auto f = ReadOnlyFile::Open(path, inputs);
  if (!f.ok()) return f.status();
  const uint64_t size = (*f)->size();
  if (size > max_bytes) {
    return Status::Error(what + " '" + EscapeBytes(path) + "' has " + std::to_string(size) +
                         " bytes, more than the " + std::to_string(max_bytes) + "-byte limit");
  }
  std::string text;
  try {
    text.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    return Status::Error("out of memory reading " + what + " '" + EscapeBytes(path) + "'");
  }
  if (size > 0) NIBBLE_RETURN_IF_ERROR((*f)->Read(0, static_cast<size_t>(size), &text[0]));
  return text;
}

bool PathExists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

StatusOr<std::string> PathInside(const std::string& dir, const std::string& name,
                                 const std::string& what) {
  const std::string d = dir.empty() ? std::string(".") : dir;
  const std::string joined = (d.back() == '/' ? d : d + "/") + name;
  char buf[PATH_MAX];
  if (::realpath(d.c_str(), buf) == nullptr) {
    return Status::Error("cannot open folder '" + EscapeBytes(d) + "': " + std::strerror(errno));
  }
  std::string root = buf;
  // The Hugging Face hub cache keeps files as symlinks from
  // <repo>/snapshots/<revision>/ to <repo>/blobs/: there the repository
  // folder is the boundary.
  {
    const auto s1 = root.rfind('/');
    const std::string parent = s1 == std::string::npos ? std::string() : root.substr(0, s1);
    const auto s2 = parent.rfind('/');
    if (s2 != std::string::npos && parent.substr(s2 + 1) == "snapshots" && s2 > 0) {
      root = parent.substr(0, s2);
    }
  }
  if (::realpath(joined.c_str(), buf) == nullptr) {
    if (errno == ENOENT || errno == ENOTDIR) {
      // Missing: the open reports it. A dangling symlink is still checked
      // lexically below by its link text's absence of escapes.
      if (!PathExists(joined)) return joined;
    }
    return Status::Error(what + " '" + EscapeBytes(joined) + "': " + std::strerror(errno));
  }
  const std::string real = buf;
  if (root != "/") root += "/";
  if (real.compare(0, root.size(), root) != 0) {
    return Status::Error(what + " '" + EscapeBytes(joined) + "' resolves to '" + EscapeBytes(real) +
                         "', outside the model folder '" + EscapeBytes(d) +
                         "' (symlinks and '..' may not leave it)");
  }
  return joined;
}

namespace {

// The checks every output path shares: not empty, no NUL byte, and its
// folder exists and is a folder. `path` may end in '/'.
Status CheckOutputCommon(const std::string& path, const std::string& what) {
  if (path.empty()) return Status::Error(what + " path is empty");
  if (path.find('\0') != std::string::npos) {
    return Status::Error(what + " '" + EscapeBytes(path) + "': the path holds a NUL byte");
  }
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const auto slash = p.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : p.substr(0, slash));
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    return Status::Error("cannot write " + what + " '" + EscapeBytes(path) + "': its folder '" +
                         EscapeBytes(dir) + "': " + std::strerror(errno));
  }
  if (!S_ISDIR(st.st_mode)) {
    return Status::Error("cannot write " + what + " '" + EscapeBytes(path) + "': its folder '" +
                         EscapeBytes(dir) + "' is " + KindOf(st.st_mode));
  }
  return Status::Ok();
}

}  // namespace

Status CheckOutputPath(const std::string& path, const InputFiles& inputs, const std::string& what) {
  NIBBLE_RETURN_IF_ERROR(CheckOutputCommon(path, what));
  if (path.back() == '/') {
    return Status::Error(what + " '" + EscapeBytes(path) +
                         "' ends in '/' (a folder), but this output is one file");
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::Error("cannot write " + what + " '" + EscapeBytes(path) +
                         "': " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    return Status::Error(what + " '" + EscapeBytes(path) +
                         "' is a symbolic link; nibble replaces outputs atomically and would "
                         "replace the link itself, so it refuses: give the link's target path");
  }
  if (!S_ISREG(st.st_mode)) {
    return Status::Error(what + " '" + EscapeBytes(path) + "' exists and is " + KindOf(st.st_mode) +
                         "; refusing to replace it");
  }
  if (const std::string* in = inputs.Find(IdOf(st))) {
    return Status::Error(what + " '" + EscapeBytes(path) + "' is the input file '" +
                         EscapeBytes(*in) + "' (same file); the input is never modified");
  }
  return Status::Ok();
}

Status CheckOutputFolder(const std::string& path, const InputFiles& inputs,
                         const std::string& what) {
  NIBBLE_RETURN_IF_ERROR(CheckOutputCommon(path, what));
  struct stat st;
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  if (::lstat(p.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Status::Error("cannot write " + what + " '" + EscapeBytes(path) +
                         "': " + std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    return Status::Error(what + " '" + EscapeBytes(path) +
                         "' is a symbolic link; a model folder is published by renaming a "
                         "finished folder into place, which would replace the link itself: give "
                         "the link's target path");
  }
  if (!S_ISDIR(st.st_mode)) {
    if (const std::string* in = inputs.Find(IdOf(st))) {
      return Status::Error(what + " '" + EscapeBytes(path) + "' is the input file '" +
                           EscapeBytes(*in) + "' (same file); the input is never modified");
    }
    return Status::Error(what + " '" + EscapeBytes(path) + "' exists and is " + KindOf(st.st_mode) +
                         ", not a folder (a model folder is written here: give a new path, or "
                         "an empty folder)");
  }
  DIR* d = ::opendir(p.c_str());
  if (d == nullptr) {
    return Status::Error("cannot write " + what + " '" + EscapeBytes(path) +
                         "': " + std::strerror(errno));
  }
  bool empty = true;
  while (const dirent* e = ::readdir(d)) {
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
      empty = false;
      break;
    }
  }
  ::closedir(d);
  if (!empty) {
    return Status::Error(what + " '" + EscapeBytes(path) +
                         "' is a folder that is not empty (give a new path, or an empty folder)");
  }
  return Status::Ok();
}

bool IsValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = Utf8Length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string EscapeBytes(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = Utf8Length(s, i);
    if (n == 0 || c < 0x20 || c == 0x7F || c == '\\') {
      o += c == '\\' ? std::string("\\\\") : Hex(c);
      ++i;
      continue;
    }
    o.append(s, i, n);
    i += n;
  }
  return o;
}

std::string JsonEscape(const std::string& s) {
  std::string o;
  o.reserve(s.size() + 2);
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = Utf8Length(s, i);
    if (n == 0) {
      o += "\\" + Hex(c);  // the JSON text \\xNN: a backslash, then xNN
      ++i;
      continue;
    }
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o.append(s, i, n);
    }
    i += n;
  }
  return o;
}

}  // namespace nibble
