// A main() for the fuzz harnesses in ordinary builds: runs every file (or
// every file in every folder) given on the command line through
// LLVMFuzzerTestOneInput once — the seed corpus and the regression inputs
// of past findings, under whatever sanitizers the build uses.
#include <dirent.h>
#include <sys/stat.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int RunFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    return 1;
  }
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
  LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  return 0;
}

int main(int argc, char** argv) {
  int files = 0, errors = 0;
  for (int i = 1; i < argc; ++i) {
    struct stat st;
    if (::stat(argv[i], &st) != 0) {
      std::fprintf(stderr, "missing %s\n", argv[i]);
      ++errors;
      continue;
    }
    if (S_ISDIR(st.st_mode)) {
      DIR* d = ::opendir(argv[i]);
      while (dirent* e = d ? ::readdir(d) : nullptr) {
        if (e->d_name[0] == '.') continue;
        errors += RunFile(std::string(argv[i]) + "/" + e->d_name);
        ++files;
      }
      if (d) ::closedir(d);
    } else {
      errors += RunFile(argv[i]);
      ++files;
    }
  }
  std::printf("replayed %d inputs, %d unreadable\n", files, errors);
  return errors == 0 && files > 0 ? 0 : 1;
}
