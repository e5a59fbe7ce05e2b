// The group-size benchmark (`nibble bench`, `nibble_bench`): speed of the
// dequantizer per layout x group size x output type x threads, as a ratio
// to this machine's streaming-store fill and memcpy of the same output size
// measured in the same run, plus the accuracy of quantizing the weight at
// that group size.
#ifndef NIBBLE_BENCH_GROUP_SIZE_BENCH_H_
#define NIBBLE_BENCH_GROUP_SIZE_BENCH_H_

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

namespace nibble {

// What the table's columns mean.
extern const char* const kBenchColumns;

struct BenchOptions {
  std::vector<int64_t> group_sizes{32, 64, 128, 256, 0};  // 0 = per-channel
  std::vector<std::string> dtypes{"bf16"};
  std::vector<int> threads{1, 0};  // 0 = all cores
  // A representative few: the operator's own layout, GPTQ, a GGUF k-quant
  // and FP8. With --weights and no layout given: the weight's own layout
  // (LoadedWeight::layout) and pmx-q1.
  std::vector<std::string> layouts{"pmx-q1", "gptq", "q4_k", "fp8-block"};
  bool layouts_given = false;       // set by the CLI when --layout was used
  std::string shape = "4096,4096";  // logical N,K
  int reps = 9;
  std::string format = "table";  // table | json | csv (standard output)
  // Also write the rows to <out>.json and <out>.csv (atomically), for
  // `python3 -m nibble.study <out>.json -o study.png`. "" = no files.
  std::string out;
  bool in_cache = true;  // add the in-cache tile rows
  uint64_t seed = 42;
  bool store_sweep = false;  // instead: plain vs non-temporal stores by size
  // The kernel target every run uses (SelectTarget: one of
  // AvailableTargets, e.g. "AVX2" on an AVX-512 machine); "" = the best
  // this CPU runs. Restored when the bench returns.
  std::string target;
  // Instead: the matmul (op/matmul.h) at these M over `matmul_shapes` (N,K
  // each), the layouts and thread counts, against the machine's read
  // bandwidth over the packed weight (RunMatMulBench). Shapes are "NxK".
  std::vector<int64_t> matmul;
  std::vector<std::string> matmul_shapes{"4096x4096", "11008x4096", "4096x14336"};
  // "out_in": each layout quantizes the [N, K] weight (PyTorch's order);
  // "in_out": the [K, N] matrix (an ONNX MatMul's B, ONNX Runtime's
  // DequantizeLinear -> MatMul), multiplied as MatMulOptions::kInOut.
  std::string matmul_weight = "out_in";
  // --matmul's sums (MatMulOptions::Gemm): "exact" and / or "blas". With
  // the BLAS in the build each row also times the BLAS's sgemm on the
  // already dequantized float32 weight (the "dense" yardstick).
  std::vector<std::string> matmul_gemm{"exact"};
  // --matmul with the weight left in the caches between runs (no flush):
  // the decode's own speed, as for a layer that stays cache-resident; the
  // read yardstick is then a read from the caches too.
  bool matmul_warm = false;
  // Real weights instead of the synthetic one: a checkpoint (GGUF file,
  // GPTQ/AWQ folder, safetensors, ...) and a regex picking the tensor (the
  // first large 2-D float or quantized weight by default). Loaded through
  // `load_weights` (set by the CLI, which owns the checkpoint readers).
  std::string weights;
  std::string weights_tensor;
  struct LoadedWeight {
    std::string name;
    int64_t rows = 0, cols = 0;  // [N, K] (leading dims flattened)
    std::vector<float> values;
    std::string layout;  // the bench layout of its own format ("" if none)
  };
  std::function<bool(const std::string& path, const std::string& regex, LoadedWeight* out,
                     std::string* error)>
      load_weights;
};

// Median wall time in seconds of `fn` over `reps` (>= 1) runs after one
// warm-up run: the timing every nibble measurement uses.
double MedianSeconds(int reps, const std::function<void()>& fn);

// Each of `fns` once (warm-up), then `reps` rounds of all of them in turn
// (A B C A B C ...): each one's wall times in seconds, sorted. How the
// bench times a kernel against its yardsticks, so that a load that comes
// and goes hits all of them alike. `untimed(i)`, when given, runs right
// before every call of fns[i] and is not timed (the bench flushes the
// run's bytes from the caches there).
std::vector<std::vector<double>> InterleavedSeconds(
    int reps, const std::vector<std::function<void()>>& fns,
    const std::function<void(size_t)>& untimed = nullptr);

// Flushes the cache lines of [p, p + bytes) from every cache level (a
// clflush per line, all threads for more than 1 MiB, then a fence), so
// that the next access to those bytes goes to memory. How the bench
// starts every timed run cold; a no-op where the CPU has no such
// instruction.
void FlushFromCaches(const void* p, size_t bytes);

// The names --layout accepts: the operator's and checkpoint layouts, then
// every dequantizable ggml type (tools/bench_options.h registers them).
std::vector<std::string> BenchLayoutNames();

// The matmul benchmark (BenchOptions::matmul): per shape x layout (G = 128
// where the layout has groups) x M x threads, the median time of
// MatMul(W, X) with the packed weight flushed from the caches before each
// run, the packed weight's GB/s, and the time of reading those same bytes
// once (StreamReadWrite with nothing to write, on as many threads) measured
// in the same rounds, interleaved: `x_read` = matmul time / read time (1 is
// the memory limit of M = 1). Rows as a table, or JSON / CSV.
int RunMatMulBench(const BenchOptions& options, std::ostream& out, std::ostream& err);

// Runs the sweep; results to `out`, progress and errors to `err`.
// Returns a process exit code.
int RunGroupSizeBench(const BenchOptions& options, std::ostream& out, std::ostream& err);

}  // namespace nibble

#endif  // NIBBLE_BENCH_GROUP_SIZE_BENCH_H_
