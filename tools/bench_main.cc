// nibble_bench: the group-size benchmark as a standalone program (the same
// code as `nibble bench`).
#include <iostream>

#include "CLI/CLI.hpp"
#include "bench/group_size_bench.h"
#include "tools/bench_options.h"

int main(int argc, char** argv) {
  CLI::App app{"nibble_bench: dequantize speed and accuracy per group size"};
  nibble::BenchOptions options;
  nibble::AddBenchOptions(&app, &options);
  CLI11_PARSE(app, argc, argv);
  options.layouts_given = app.count("--layout") > 0;
  return nibble::RunGroupSizeBench(options, std::cout, std::cerr);
}
