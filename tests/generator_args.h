// Command-line conventions shared by the test-data generators (make_*):
// `--help` / `-h` prints the usage and exits 0; any other argument starting
// with '-' where an output folder is expected is a usage error (exit 2) —
// never a folder named "--help".
#ifndef NIBBLE_TESTS_GENERATOR_ARGS_H_
#define NIBBLE_TESTS_GENERATOR_ARGS_H_

#include <cstdio>
#include <cstring>

namespace nibble {
namespace testing {

// Returns -1 to go on, else the exit code main should return. `usage` is
// the one-line usage text; argv[1] is the output folder.
inline int CheckGeneratorArgs(int argc, char** argv, const char* usage) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      std::printf("usage: %s\n", usage);
      return 0;
    }
  }
  if (argc >= 2 && argv[1][0] == '-') {
    std::fprintf(stderr, "unknown option '%s'\nusage: %s\n", argv[1], usage);
    return 2;
  }
  return -1;
}

}  // namespace testing
}  // namespace nibble

#endif  // NIBBLE_TESTS_GENERATOR_ARGS_H_
