// The command-line options of the group-size benchmark (`nibble bench`,
// `nibble_bench`): CLI11 registration of bench/group_size_bench.h's
// BenchOptions.
#ifndef NIBBLE_TOOLS_BENCH_OPTIONS_H_
#define NIBBLE_TOOLS_BENCH_OPTIONS_H_

#include "CLI/CLI.hpp"
#include "bench/group_size_bench.h"

namespace nibble {

// Registers the options on a CLI11 (sub)command.
void AddBenchOptions(CLI::App* app, BenchOptions* options);

}  // namespace nibble

#endif  // NIBBLE_TOOLS_BENCH_OPTIONS_H_
