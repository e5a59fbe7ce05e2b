#include "tools/bench_options.h"

#include <string>
#include <vector>

#include "checkpoint/methods/ggml.h"
#include "op/dequantizer.h"
#include "tools/cli_checks.h"
#include "tools/dtype_option.h"

namespace nibble {

void AddBenchOptions(CLI::App* app, BenchOptions* o) {
  app->add_option("--group-sizes", o->group_sizes, "Group sizes (0 = per-channel)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(AtLeast(0, "a group size is a positive count, or 0 for per-channel", "SIZE"));
  app->add_option("--dtype", o->dtypes,
                  "Output types: f32,f16,bf16 (also fp16, float16, half, ...)")
      ->delimiter(',')
      ->capture_default_str()
      ->transform(DTypeOption());
  app->add_option("--threads", o->threads, "Thread counts (0 = all cores)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxThreads));
  const std::vector<std::string> layouts = BenchLayoutNames();
  const std::string ggml = DequantizableGgmlTypeNames();
  app->add_option(
         "--layout", o->layouts,
         "Layouts: pmx-q1 (PMX int4x4, groups along K), pmx-q0 (groups along N), "
         "onnx-b1 (ONNX int4 blocked along the last axis), onnx-b0 (ONNX int4 "
         "blocked along axis 0, ONNX Runtime's [K, N]), int8 (PMX int8), onnx8-b0 (ONNX int8 "
         "blocked along axis 0: scales along the row, each shared by G rows; G = "
         "per-channel: by all, as ONNX Runtime's per-channel int8 MatMul weights), "
         "gptq, awq "
         "(GPTQ / AWQ GEMM, written as the [N, K] weight), gptq-act (GPTQ with "
         "act-order: g_idx of a random channel order), ct / ct-act "
         "(compressed-tensors pack-quantized 4-bit symmetric, without / with a "
         "random-order weight_g_idx), bnb-nf4 (bitsandbytes NF4, blocksize 64, run "
         "once), fp8-block (DeepSeek FP8, 128 x 128 blocks), gptoss-mxfp4 (gpt-oss "
         "experts, written transposed), and the GGUF types " +
             ggml +
             " (their own block size, run once; types nibble cannot quantize use "
             "synthetic codes and report speed only)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::IsMember(layouts));
  app->add_option("--shape", o->shape, "Logical weight shape N,K")->capture_default_str();
  app->add_option("--reps", o->reps, "Timed repetitions per row (median reported)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000000));
  app->add_option("--format", o->format,
                  std::string("table, json or csv. The table's ") + kBenchColumns)
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json", "csv"}));
  app->add_option("--out", o->out,
                  "Also write the rows to OUT.json and OUT.csv (draw them with "
                  "`python3 -m nibble.study OUT.json -o study.png`)")
      ->check(CLI::Validator(
          [](std::string& v) {
            return v.empty() ? std::string(
                                   "a name prefix is needed (OUT.json and OUT.csv "
                                   "are written); got an empty one")
                             : std::string();
          },
          "OUT"));
  app->add_option("--seed", o->seed, "Seed of the synthetic weight")->capture_default_str();
  app->add_option("--weights", o->weights,
                  "Study real weights: a GGUF file, a GPTQ/AWQ folder or a .safetensors file "
                  "(re-quantized at each group size; --shape is ignored)");
  app->add_option("--weights-tensor", o->weights_tensor,
                  "Regex picking the tensor in --weights (default: the largest 2-D weight)");
  app->add_flag("!--no-in-cache", o->in_cache, "Skip the in-cache tile rows");
  app->add_option("--matmul", o->matmul,
                  "Instead of dequantizing: time the matmul Y = X · Wᵀ (op/matmul.h) at these "
                  "M (rows of X), e.g. 1,4,16,128,512, over --matmul-shapes x --layout x "
                  "--threads, against reading the packed weight once")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app->add_option("--matmul-shapes", o->matmul_shapes,
                  "Weight shapes NxK for --matmul (comma-separated)")
      ->delimiter(',')
      ->capture_default_str();
  app->add_option("--matmul-weight", o->matmul_weight,
                  "How --matmul's layouts hold W: out_in, the [N, K] weight (PyTorch's order), "
                  "or in_out, the [K, N] B of an ONNX MatMul (x @ W)")
      ->check(CLI::IsMember({"out_in", "in_out"}))
      ->capture_default_str();
  app->add_option("--matmul-gemm", o->matmul_gemm,
                  "--matmul's sums: exact (the fixed-order dot) and / or blas (the prefill path: "
                  "OpenBLAS sgemm on dequantized tiles from M = 32). With the BLAS "
                  "in the build, rows also time its sgemm on the already dequantized float32 "
                  "weight (dense ms; x dense = dense time / time)")
      ->delimiter(',')
      ->check(CLI::IsMember({"exact", "blas"}))
      ->capture_default_str();
  app->add_flag("--matmul-warm", o->matmul_warm,
                "--matmul with the weight left in the caches between runs (no flush): the "
                "decode's own speed; the read yardstick then reads from the caches too");
  app->add_option("--target", o->target,
                  "Run every kernel on this SIMD target instead of the best one the CPU runs "
                  "(e.g. AVX2 or SSE4 on an AVX-512 machine: how the same build runs on an "
                  "older CPU, measured here; the same bits on every target). The choices: "
                  "the targets compiled in that this CPU runs (an unknown one lists them)");
  app->add_flag("--store-sweep", o->store_sweep,
                "Measure plain vs non-temporal stores by output size (one thread, f32, "
                "int4x4 G=128) to place the streaming threshold");
}

}  // namespace nibble
