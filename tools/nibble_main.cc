// nibble: command-line front end. Parses arguments and calls the library;
// no dequantization logic lives here.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/group_size_bench.h"
#include "bench/synthetic_weights.h"
#include "kernels/dequantize.h"
#include "op/pmx.h"
#include "op/quantize.h"
#include "tools/node_test_runner.h"

namespace {

// Parses "N,K" into two positive dims.
bool ParseShape(const std::string& s, int64_t* n, int64_t* k) {
  const auto comma = s.find(',');
  if (comma == std::string::npos) return false;
  try {
    size_t p1 = 0, p2 = 0;
    *n = std::stoll(s.substr(0, comma), &p1);
    *k = std::stoll(s.substr(comma + 1), &p2);
    return p1 == comma && p2 == s.size() - comma - 1 && *n > 0 && *k > 0;
  } catch (...) {
    return false;
  }
}

// The built-in example: an LLM-like weight quantized int4 (PMX int4x4,
// G = 128, quant_axis 1), dequantized by the operator.
int RunDemo(const std::string& shape_text, int64_t group, int threads) {
  int64_t n, k;
  if (!ParseShape(shape_text, &n, &k)) {
    std::cerr << "nibble demo: --shape must be N,K with positive integers (got '"
              << shape_text << "')\n";
    return 2;
  }
  const auto w = nibble::MakeLlmLikeWeight(n, k, 42);
  nibble::QuantizeConfig cfg;
  cfg.bits = 4;
  cfg.group_size = group;
  cfg.quant_axis = 1;
  auto q = nibble::QuantizePmx(w.data(), {n, k}, cfg);
  if (!q.ok()) {
    std::cerr << "nibble demo: " << q.status().message() << "\n";
    return 1;
  }
  nibble::DequantizeOptions opts;
  opts.name = "demo.weight";
  opts.threads = threads;
  auto prepared = nibble::PreparePmx(q->attrs, q->x.view(), q->scale.view(), nullptr, opts);
  if (!prepared.ok()) {
    std::cerr << "nibble demo: " << prepared.status().message() << "\n";
    return 1;
  }
  auto y = nibble::Tensor::Allocate(prepared->output().dtype, prepared->output().shape);
  if (!y.ok()) {
    std::cerr << "nibble demo: " << y.status().message() << "\n";
    return 1;
  }
  (void)prepared->Run(y->mutable_view(), threads);  // warm-up, faults pages in
  const auto t0 = std::chrono::steady_clock::now();
  const nibble::Status st = prepared->Run(y->mutable_view(), threads);
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    std::cerr << "nibble demo: " << st.message() << "\n";
    return 1;
  }
  const auto err = nibble::MeasureError(w.data(), y->data_as<float>(), n * k);
  std::printf("weight      float32 %s (seeded LLM-like: Gaussian + outliers)\n",
              nibble::ShapeToString({n, k}).c_str());
  std::printf("quantized   X int16 %s (int4x4), Scale float32 %s, group_size %lld, quant_axis 1\n",
              nibble::ShapeToString(q->x.shape()).c_str(),
              nibble::ShapeToString(q->scale.shape()).c_str(), static_cast<long long>(group));
  std::printf("dequantized Y %s %s\n", nibble::DTypeName(y->dtype()).c_str(),
              nibble::ShapeToString(y->shape()).c_str());
  std::printf("error       rmse %.3g, max |err| %.3g, SQNR %.2f dB\n", err.rmse, err.max_abs,
              err.sqnr_db);
  const double bytes = static_cast<double>(y->size_bytes());
  std::printf("time        %.3f ms (%.2f GB/s output, %.2f G elements/s, kernel target %s)\n",
              sec * 1e3, bytes / sec / 1e9, static_cast<double>(n * k) / sec / 1e9,
              nibble::ActiveTarget());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nibble: dequantize grouped int4/int8 weights (PMX / ONNX DequantizeLinear)"};
  app.set_version_flag("--version", std::string("nibble ") + NIBBLE_VERSION);
  app.require_subcommand(1);

  auto* demo = app.add_subcommand("demo", "Quantize a built-in LLM-like weight to int4 and dequantize it");
  std::string demo_shape = "4096,4096";
  int64_t demo_group = 128;
  int demo_threads = 0;
  demo->add_option("--shape", demo_shape, "Logical weight shape N,K")->capture_default_str();
  demo->add_option("--group-size", demo_group, "Group size along K")
      ->capture_default_str()->check(CLI::PositiveNumber);
  demo->add_option("--threads", demo_threads, "0 = all cores, 1 = this thread, n = n threads")
      ->capture_default_str()->check(CLI::NonNegativeNumber);

  auto* test = app.add_subcommand("test", "Run ONNX node-test directories through the library");
  std::vector<std::string> test_dirs;
  nibble::NodeTestOptions test_opts;
  test->add_option("dirs", test_dirs, "Test directories (or folders of them)")->required();
  test->add_option("--rtol", test_opts.rtol, "Relative tolerance (default: per output type)");
  test->add_option("--atol", test_opts.atol, "Absolute tolerance (default: per output type)");
  test->add_option("--threads", test_opts.threads, "Threads for the operator")
      ->check(CLI::NonNegativeNumber);

  auto* bench = app.add_subcommand("bench", "Group-size benchmark: speed and accuracy");
  nibble::BenchOptions bench_opts;
  nibble::AddBenchOptions(bench, &bench_opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (*demo) return RunDemo(demo_shape, demo_group, demo_threads);
  if (*test) {
    const auto sum = nibble::RunNodeTests(test_dirs, test_opts, std::cout);
    return sum.failed == 0 && sum.passed + sum.skipped > 0 ? 0 : 1;
  }
  if (*bench) return nibble::RunGroupSizeBench(bench_opts, std::cout, std::cerr);
  return 2;
}
