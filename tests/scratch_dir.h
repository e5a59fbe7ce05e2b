// Per-process scratch folders for tests that write files (ctest runs the
// test cases of one binary concurrently, each in its own process).
#ifndef NIBBLE_TESTS_SCRATCH_DIR_H_
#define NIBBLE_TESTS_SCRATCH_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace nibble {
namespace testing {

// This process's scratch root, removed when the process exits.
inline const std::filesystem::path& ScratchRoot() {
  struct Root {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("nibble_ckpt_" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Root root;
  return root.path;
}

// An empty folder `name` under the scratch root.
inline std::filesystem::path TempDir(const std::string& name) {
  const std::filesystem::path p = ScratchRoot() / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_SCRATCH_DIR_H_
