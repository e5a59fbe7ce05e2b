#include "formats/atomic_file.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "formats/files.h"

namespace nibble {

namespace {

// This host's name as it appears in temporary names: [A-Za-z0-9.] kept,
// anything else (including '-', the field separator) written as '_'.
std::string HostTag() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "host";
  std::string h;
  for (const char* p = buf; *p != '\0' && h.size() < 40; ++p) {
    const char c = *p;
    const bool keep =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.';
    h += keep ? c : '_';
  }
  return h;
}

// `dest` without trailing slashes (but "/" stays).
std::string Trimmed(const std::string& dest) {
  std::string p = dest;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace

std::string TempPrefixFor(const std::string& dest) {
  return Trimmed(dest) + ".nibble-tmp-" + HostTag() + "-" + std::to_string(::getpid()) + "-";
}

mode_t AtomicFile::CurrentUmask() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("Umask:", 0) == 0) {
      return static_cast<mode_t>(std::strtoul(line.c_str() + 6, nullptr, 8) & 0777u);
    }
  }
  return 022;
}

std::string AtomicFile::RandomSuffix() {
  static std::atomic<uint64_t> counter{0};
  static const char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  uint64_t x = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
               (counter.fetch_add(1) * 0x9E3779B97F4A7C15ull) ^
               (static_cast<uint64_t>(::getpid()) << 40);
  std::string s(6, 'A');
  for (char& c : s) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    c = kChars[(x >> 33) % 62];
  }
  return s;
}

std::vector<std::string> FindStale(const std::string& dest, const std::string& kind) {
  std::vector<std::string> candidates;
  const std::string d = Trimmed(dest);
  const auto slash = d.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : d.substr(0, slash));
  const std::string base = slash == std::string::npos ? d : d.substr(slash + 1);
  const std::string prefix = base + "." + kind + "-" + HostTag() + "-";
  DIR* h = ::opendir(dir.c_str());
  if (h == nullptr) return candidates;
  while (const dirent* e = ::readdir(h)) {
    const std::string name = e->d_name;
    if (name.size() <= prefix.size() + 7 || name.compare(0, prefix.size(), prefix) != 0) continue;
    // "<pid>-XXXXXX" after the prefix.
    const std::string rest = name.substr(prefix.size());
    const auto dash = rest.find('-');
    if (dash == std::string::npos || dash == 0 || rest.size() - dash - 1 != 6 ||
        rest.find_first_not_of("0123456789") != dash) {
      continue;
    }
    const long pid = std::strtol(rest.substr(0, dash).c_str(), nullptr, 10);
    if (pid <= 0 || pid == static_cast<long>(::getpid())) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still running
    candidates.push_back(dir + "/" + name);
  }
  ::closedir(h);
  return candidates;
}

std::vector<std::string> RemoveStaleTemporaries(const std::string& dest, const std::string& keep) {
  std::vector<std::string> removed;
  for (const std::string& path : FindStale(dest, "nibble-tmp")) {
    struct stat st;
    if (path == keep || ::lstat(path.c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    std::error_code ec;
    std::filesystem::remove_all(path, ec);  // symlinks inside are removed, not followed
    if (!ec) removed.push_back(path);
  }
  return removed;
}

std::string StaleTemporaryNote(const std::string& removed_path) {
  return "removed '" + EscapeBytes(removed_path) +
         "', left by an earlier nibble run that was killed";
}

AtomicFolder::~AtomicFolder() {
  if (!published_ && !keep_ && !temp_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(temp_, ec);
  }
}

namespace {

// Whether `folder`'s resume manifest starts with {"key":"<key>" (the
// writer puts the key first; at most 4 KiB are read).
bool HasResumeKey(const std::string& folder, const std::string& key) {
  const std::string want = "{\"key\":\"" + key + "\"";
  std::FILE* f = std::fopen((folder + "/" + AtomicFolder::kResumeManifest).c_str(), "rb");
  if (f == nullptr) return false;
  std::string head(want.size(), '\0');
  const size_t n = std::fread(&head[0], 1, head.size(), f);
  std::fclose(f);
  return n == want.size() && head == want;
}

}  // namespace

Status AtomicFolder::Create(const std::string& dest, std::vector<std::string>* removed,
                            const std::string& resume_key) {
  dest_ = Trimmed(dest);
  std::string resumable;
  if (!resume_key.empty()) {
    for (const std::string& path : FindStale(dest_, "nibble-tmp")) {
      struct stat st;
      if (::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == ::geteuid() &&
          HasResumeKey(path, resume_key)) {
        resumable = path;
        break;
      }
    }
  }
  const std::vector<std::string> stale = RemoveStaleTemporaries(dest_, resumable);
  if (removed != nullptr) removed->insert(removed->end(), stale.begin(), stale.end());
  std::string name = TempPrefixFor(dest_) + "XXXXXX";
  if (::mkdtemp(&name[0]) == nullptr) {
    return Status::Error("cannot create a temporary folder beside '" + EscapeBytes(dest_) +
                         "': " + std::strerror(errno));
  }
  temp_ = name;
  // Adopt: our fresh, empty folder is replaced by the interrupted run's
  // (rename(2) replaces an empty directory). A concurrent run that adopted
  // it first leaves us ENOENT: then we start empty.
  if (!resumable.empty() && ::rename(resumable.c_str(), temp_.c_str()) == 0) {
    adopted_ = resumable;
  }
  (void)::chmod(temp_.c_str(), 0777 & ~AtomicFile::CurrentUmask());
  return Status::Ok();
}

Status AtomicFolder::Publish() {
  if (::rename(temp_.c_str(), dest_.c_str()) != 0) {
    const int err = errno;
    if (err == ENOTEMPTY || err == EEXIST) {
      return Status::Error("cannot publish '" + EscapeBytes(dest_) +
                           "': something else created it meanwhile (it is not an empty folder "
                           "now); this run's result is discarded");
    }
    return Status::Error("cannot rename '" + EscapeBytes(temp_) + "' to '" + EscapeBytes(dest_) +
                         "': " + std::strerror(err));
  }
  published_ = true;
  return Status::Ok();
}

}  // namespace nibble
