#include "bench/group_size_bench.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <memory>
#include <optional>
#include <ostream>
#include <random>
#include <sstream>
#include <string>

#include "base/numeric.h"
#include "bench/synthetic_weights.h"
#include "checkpoint/methods/awq.h"
#include "checkpoint/methods/bitsandbytes.h"
#include "checkpoint/methods/compressed_tensors.h"
#include "checkpoint/methods/fp8.h"
#include "checkpoint/methods/ggml.h"
#include "checkpoint/methods/gptq.h"
#include "checkpoint/methods/mxfp4.h"
#include "formats/atomic_file.h"
#include "formats/files.h"
#include "formats/gguf.h"
#include "hwy/cache_control.h"
#include "kernels/blas_gemm.h"
#include "kernels/dequantize.h"
#include "kernels/stream_fill.h"
#include "op/dequantizer.h"
#include "op/matmul.h"
#include "op/onnx.h"
#include "op/pmx.h"
#include "op/quantize.h"
#include "testing/quantize_checkpoint.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace nibble {

// Median wall time of `fn` over `reps` runs after one warm-up run.
double MedianSeconds(int reps, const std::function<void()>& fn) {
  fn();
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

std::vector<std::vector<double>> InterleavedSeconds(int reps,
                                                    const std::vector<std::function<void()>>& fns,
                                                    const std::function<void(size_t)>& untimed) {
  for (const auto& fn : fns) fn();  // warm-up: pages touched, caches and clocks settled
  std::vector<std::vector<double>> t(fns.size());
  for (int r = 0; r < reps; ++r) {
    for (size_t i = 0; i < fns.size(); ++i) {
      if (untimed) untimed(i);
      const auto t0 = std::chrono::steady_clock::now();
      fns[i]();
      t[i].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  for (auto& v : t) std::sort(v.begin(), v.end());
  return t;
}

// What the table's columns mean (printed under it, and in --help).
const char* const kBenchColumns =
    "columns: G group size (chan: one group per row; GGUF / NF4 / FP8: the format's block); "
    "thr threads; ms median time per tensor, preparing included; prep% the share of it spent "
    "preparing the request (one thread: validation, lowering, parameter widening); out GB/s output "
    "bytes per "
    "second (min-max over the repetitions); Gel/s elements per second; strm GB/s the machine's "
    "write stream measured interleaved (+-% its spread), x strm the ratio to it; cpy GB/s memcpy "
    "of the output's size, x cpy the ratio; x r+w the ratio to reading the layout's stored bytes "
    "and writing the output: the memory limit of this job (1.0 = at the limit); rmse, max err, "
    "SQNR dB: error against the float32 weight (- : speed only). Rows '<layout>-tile': the "
    "in-cache tile API (compute rate, no memory traffic).";

namespace {

double Median(const std::vector<double>& sorted) { return sorted[sorted.size() / 2]; }

// The spread of sorted run times: half the 10th-90th percentile range,
// relative to the median (one outlier among 9 runs does not count; a load
// that comes and goes does).
double Spread(const std::vector<double>& sorted) {
  const size_t n = sorted.size();
  const size_t lo = static_cast<size_t>(0.1 * static_cast<double>(n - 1) + 0.5), hi = n - 1 - lo;
  return (sorted[hi] - sorted[lo]) / 2 / Median(sorted);
}

// Above this yardstick spread a row prints no ratio.
constexpr double kMaxYardstickSpread = 0.10;

// Where the read + write yardstick's loads end up (so none is dead code).
std::atomic<uint32_t> rw_sink{0};

int AllThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// 64-byte aligned, uninitialised buffer.
struct Buffer {
  explicit Buffer(size_t bytes) : size(bytes) {
    void* p = nullptr;
    if (posix_memalign(&p, 64, std::max<size_t>(bytes, 64)) != 0) p = nullptr;
    data.reset(static_cast<char*>(p));
  }
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> data;
  size_t size;
};

// Splits [0, bytes) into `threads` 64-byte aligned pieces and runs fn on each.
void Parallel(int threads, size_t bytes, const std::function<void(size_t, size_t)>& fn) {
  if (threads <= 1) {
    fn(0, bytes);
    return;
  }
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(threads)
#endif
  for (int t = 0; t < threads; ++t) {
    const size_t a = bytes * static_cast<size_t>(t) / static_cast<size_t>(threads) / 64 * 64;
    const size_t b = t + 1 == threads ? bytes
                                      : bytes * static_cast<size_t>(t + 1) /
                                            static_cast<size_t>(threads) / 64 * 64;
    fn(a, b);
  }
}

}  // namespace

void FlushFromCaches(const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / 64 * 64;
  const size_t span = static_cast<size_t>(reinterpret_cast<uintptr_t>(p) + bytes - begin);
  Parallel(span > (size_t{1} << 20) ? AllThreads() : 1, span, [&](size_t a, size_t b) {
    for (size_t o = a; o < b; o += 64) {
      hwy::FlushCacheline(reinterpret_cast<const void*>(begin + o));
    }
  });
  std::atomic_thread_fence(std::memory_order_seq_cst);  // the flushes done before timing
}

namespace {

struct Row {
  std::string layout;
  int64_t group_size = 0;
  std::string dtype;
  int threads = 1;
  int64_t elements = 0;
  std::string target = ActiveTarget();  // the kernel target it ran on
  double seconds = 0, out_gbps = 0, gelems = 0, stream_gbps = 0, memcpy_gbps = 0;
  // The median time of the timed path's first step, preparing the request
  // (validation, lowering, scale / zero-point widening: one thread), inside
  // `seconds`; 0 where not measured (tile rows).
  double prepare_seconds = 0;
  double ratio_stream = 0, ratio_memcpy = 0;
  // min / max over the interleaved runs (GB/s of output), and the fill's
  // spread; ratio_valid is false when the spread exceeds kMaxYardstickSpread.
  double out_gbps_min = 0, out_gbps_max = 0, stream_gbps_min = 0, stream_gbps_max = 0;
  double yardstick_spread = 0;
  bool ratio_valid = true;
  // The read + write yardstick (StreamReadWrite of the layout's input and
  // output bytes): its output GB/s, spread, and the kernel's ratio to it.
  int64_t in_bytes = 0;
  double rw_gbps = 0, rw_spread = 0, ratio_rw = 0;
  bool ratio_rw_valid = false;
  double rmse = 0, max_abs = 0, sqnr_db = 0;
  bool accuracy = true;  // false: synthetic codes, rmse / max_abs / sqnr_db not measured
  std::string note;
};

// An accuracy figure of r formatted with `fmt`, or `none` when not measured.
std::string Acc(const Row& r, double v, const char* fmt, const char* none) {
  if (!r.accuracy) return none;
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

struct BenchLayout {
  std::string name;
  int bits;
  int64_t quant_axis;
  bool onnx;           // ONNX dense int4 (DequantizeLinear) instead of PMX int4x4
  std::string family;  // "" (PMX / ONNX), "gptq", "awq", "ct", "bnb", "gguf"
  uint32_t ggml_type = 0;
  bool act_order = false;  // gptq / ct: input channels in a random order (g_idx)
};

// bitsandbytes' default block (the bench runs NF4 once, at this block).
constexpr int64_t kBnbBlock = 64;
// DeepSeek-V3's FP8 block (weight_block_size [128, 128]).
constexpr int64_t kFp8Block = 128;

bool FindLayout(const std::string& name, BenchLayout* l) {
  if (name == "pmx-q1")
    *l = {name, 4, 1, false, ""};
  else if (name == "pmx-q0")
    *l = {name, 4, 0, false, ""};
  else if (name == "onnx-b1")
    *l = {name, 4, 1, true, ""};
  else if (name == "onnx-b0")
    *l = {name, 4, 0, true, ""};
  else if (name == "int8")
    *l = {name, 8, 1, false, ""};
  else if (name == "onnx8-b0")
    *l = {name, 8, 0, true, ""};
  else if (name == "gptq")
    *l = {name, 4, 0, false, "gptq"};
  else if (name == "gptq-act")
    *l = {name, 4, 0, false, "gptq", 0, /*act_order=*/true};
  else if (name == "awq")
    *l = {name, 4, 0, false, "awq"};
  else if (name == "ct")
    *l = {name, 4, 1, false, "ct"};
  else if (name == "ct-act")
    *l = {name, 4, 1, false, "ct", 0, /*act_order=*/true};
  else if (name == "bnb-nf4")
    *l = {name, 4, 1, false, "bnb"};
  else if (name == "fp8-block")
    *l = {name, 8, 1, false, "fp8"};
  else if (name == "gptoss-mxfp4")
    *l = {name, 4, 0, false, "mxfp4"};
  else if (const uint32_t t = DequantizableGgmlTypeId(name); t != 0)
    *l = {name, 4, 1, false, "gguf", t};  // every registered ggml block type
  else
    return false;
  return true;
}

// A quantized weight in one front end's form, ready to prepare.
struct BenchWeight {
  std::optional<QuantizedWeight> pmx;
  std::optional<OnnxQuantizedWeight> onnx;
  std::optional<GptqTensors> gptq;
  std::optional<AwqTensors> awq;
  std::optional<CompressedTensorsTensors> ct;
  std::optional<Bnb4Tensors> bnb;
  std::optional<Fp8BlockTensors> fp8;
  std::optional<Mxfp4Tensors> mxfp4;
  std::vector<uint8_t> gguf;
  uint32_t ggml_type = 0;
  bool synthetic = false;  // gguf: random codes, no quantizer (speed only)
  bool act_order = false;  // gptq: g_idx passed (channels in a random order)
  int64_t n = 0, k = 0, group = 0;
  StatusOr<Dequantizer> Prepare(DType out, const std::string& name) const {
    if (gptq) {
      GptqOptions o;
      o.group_size = group;
      const TensorView z = gptq->qzeros.view();
      const TensorView g = gptq->g_idx.view();
      return PrepareGptq(o, gptq->qweight.view(), &z, gptq->scales.view(), act_order ? &g : nullptr,
                         out, name);
    }
    if (awq) {
      const TensorView z = awq->qzeros.view();
      return PrepareAwq(group, awq->qweight.view(), &z, awq->scales.view(), out, name);
    }
    if (ct) {
      const TensorView wp = ct->weight_packed.view(), sc = ct->weight_scale.view();
      const TensorView sh = ct->weight_shape.view(), gi = ct->weight_g_idx.view();
      CompressedTensorsWeight x;
      x.packed = true;
      x.bits = 4;
      x.group_size = act_order ? 0 : group;
      x.weight = &wp;
      x.weight_shape = &sh;
      x.scale = &sc;
      x.g_idx = act_order ? &gi : nullptr;
      return PrepareCompressedTensors(x, out, name);
    }
    if (bnb) {
      const TensorView wt = bnb->weight.view(), am = bnb->absmax.view(), qm = bnb->quant_map.view();
      Bnb4Weight x;
      x.shape = {n, k};
      x.blocksize = kBnbBlock;
      x.weight = &wt;
      x.absmax = &am;
      x.quant_map = &qm;
      return PrepareBnb4(x, out, name);
    }
    if (fp8) {
      TensorView wt = fp8->weight.view();
      wt.dtype = DType::kFloat8E4M3FN;  // the codes' bits, stored as uint8
      return PrepareFp8(wt, fp8->scale_inv.view(), {kFp8Block, kFp8Block}, out, name);
    }
    if (mxfp4) return PrepareMxfp4Experts(mxfp4->blocks.view(), mxfp4->scales.view(), out, name);
    if (ggml_type != 0) return PrepareGgml(ggml_type, {k, n}, gguf.data(), gguf.size(), out, name);
    DequantizeOptions o;
    o.output_dtype = out;
    o.name = name;
    if (pmx) return PreparePmx(pmx->attrs, pmx->x.view(), pmx->scale.view(), nullptr, o);
    OnnxDequantizeAttributes a = onnx->attrs;
    a.output_dtype = static_cast<int32_t>(out);
    a.has_output_dtype = true;
    return PrepareOnnx(a, onnx->x.view(), onnx->scale.view(), nullptr, o);
  }
  // Calls fn(data, bytes) for every stored tensor a dequantization reads
  // (codes, scales, zero points, g_idx; a GGUF tensor's blocks).
  template <class Fn>
  void ForEachInput(const Fn& fn) const {
    const auto t = [&](const Tensor& x) { fn(x.data(), x.size_bytes()); };
    if (gptq) {
      t(gptq->qweight);
      t(gptq->qzeros);
      t(gptq->scales);
      if (act_order) t(gptq->g_idx);
    } else if (awq) {
      t(awq->qweight);
      t(awq->qzeros);
      t(awq->scales);
    } else if (ct) {
      t(ct->weight_packed);
      t(ct->weight_scale);
      if (act_order) t(ct->weight_g_idx);
    } else if (bnb) {
      t(bnb->weight);
      t(bnb->absmax);
      t(bnb->quant_map);
    } else if (fp8) {
      t(fp8->weight);
      t(fp8->scale_inv);
    } else if (mxfp4) {
      t(mxfp4->blocks);
      t(mxfp4->scales);
    } else if (ggml_type != 0) {
      fn(gguf.data(), gguf.size());
    } else if (pmx) {
      t(pmx->x);
      t(pmx->scale);
      t(pmx->zero_point);
    } else {
      t(onnx->x);
      t(onnx->scale);
      t(onnx->zero_point);
    }
  }
  // The bytes a dequantization reads.
  size_t InputBytes() const {
    size_t n = 0;
    ForEachInput([&](const void*, size_t bytes) { n += bytes; });
    return n;
  }
  Status Run(const Dequantizer& d, Tensor* y, int threads) const {
    return d.Run(y->mutable_view(), threads);
  }
};

// Quantizes w [n, k] for a layout at group size g (0 = per-channel).
Status QuantizeFor(const BenchLayout& layout, const float* w, int64_t n, int64_t k, int64_t g,
                   BenchWeight* bw) {
  bw->n = n;
  bw->k = k;
  bw->group = g == 0 ? -1 : g;
  std::vector<int32_t> g_idx;
  if (layout.act_order && g != 0) {
    // desc_act: channels quantized in a (Hessian-derived) order, the i-th
    // of which falls in group i / G: a fixed random permutation here.
    std::vector<int64_t> order(static_cast<size_t>(k));
    for (int64_t c = 0; c < k; ++c) order[static_cast<size_t>(c)] = c;
    std::mt19937_64 rng(1234);
    std::shuffle(order.begin(), order.end(), rng);
    g_idx.resize(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      g_idx[static_cast<size_t>(order[static_cast<size_t>(i)])] = static_cast<int32_t>(i / g);
    }
  }
  bw->act_order = layout.act_order && g != 0;
  if (layout.family == "ct") {
    auto q = QuantizeCompressedTensors(w, n, k, bw->group, g_idx);
    if (!q.ok()) return q.status();
    bw->ct = std::move(*q);
    return Status::Ok();
  }
  if (layout.family == "bnb") {
    auto q = QuantizeBnbNf4(w, n, k, kBnbBlock);
    if (!q.ok()) return q.status();
    bw->bnb = std::move(*q);
    return Status::Ok();
  }
  if (layout.family == "fp8") {
    auto q = QuantizeFp8Blocks(w, n, k, kFp8Block);
    if (!q.ok()) return q.status();
    bw->fp8 = std::move(*q);
    return Status::Ok();
  }
  if (layout.family == "mxfp4") {
    auto q = QuantizeMxfp4Experts(w, n, k);
    if (!q.ok()) return q.status();
    bw->mxfp4 = std::move(*q);
    return Status::Ok();
  }
  if (layout.family == "gptq") {
    auto q = QuantizeGptq(w, n, k, bw->group, /*sym=*/false, /*v2=*/false, g_idx);
    if (!q.ok()) return q.status();
    bw->gptq = std::move(*q);
    return Status::Ok();
  }
  if (layout.family == "awq") {
    auto q = QuantizeAwq(w, n, k, bw->group);
    if (!q.ok()) return q.status();
    bw->awq = std::move(*q);
    return Status::Ok();
  }
  if (layout.family == "gguf") {
    auto q = QuantizeGgml(layout.ggml_type, w, n, k);
    if (!q.ok()) {  // no quantizer for this type: synthetic blocks (speed only)
      q = SyntheticGgmlBlocks(layout.ggml_type, n, k, 1);
      if (!q.ok()) return q.status();
      bw->synthetic = true;
    }
    bw->gguf = std::move(*q);
    bw->ggml_type = layout.ggml_type;
    return Status::Ok();
  }
  QuantizeConfig cfg;
  cfg.bits = layout.bits;
  cfg.quant_axis = layout.quant_axis;
  cfg.group_size = g;
  if (layout.onnx) {
    auto q = QuantizeOnnx(w, {n, k}, cfg);
    if (!q.ok()) return q.status();
    bw->onnx = std::move(*q);
  } else {
    auto q = QuantizePmx(w, {n, k}, cfg);
    if (!q.ok()) return q.status();
    bw->pmx = std::move(*q);
  }
  return Status::Ok();
}

std::vector<float> ToFloat(const Tensor& y) {
  const int64_t n = *CheckedNumElements(y.shape(), "y");
  std::vector<float> f(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) f[static_cast<size_t>(k)] = FloatElement(y.view(), k);
  return f;
}

// ratio_stream as text, or `none` when the yardstick was too unsteady.
std::string Ratio(const Row& r, const char* none) {
  if (!r.ratio_valid) return none;
  char b[32];
  std::snprintf(b, sizeof b, "%.4f", r.ratio_stream);
  return b;
}

// `s` as the inside of a JSON string.
std::string JsonEscape(const std::string& s) {
  std::string o;
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char u[8];
      std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      o += u;
    } else {
      o += c;
    }
  }
  return o;
}

// `s` as one CSV field (quoted when it holds a comma, quote or newline).
std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string o = "\"";
  for (const char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

// One row's machine-readable fields, in output order: name, value as text
// (empty = null), and whether it is a string.
struct Field {
  const char* name;
  std::string value;
  bool text = false;
};

std::string Num(const char* fmt, double v) {
  char b[64];
  std::snprintf(b, sizeof b, fmt, v);
  return b;
}

std::vector<Field> Fields(const Row& r) {
  return {{"layout", r.layout, true},
          {"group_size", std::to_string(r.group_size)},
          {"dtype", r.dtype, true},
          {"threads", std::to_string(r.threads)},
          {"elements", std::to_string(r.elements)},
          {"seconds", Num("%.9g", r.seconds)},
          {"prepare_seconds", Num("%.9g", r.prepare_seconds)},
          {"out_gbps", Num("%.4f", r.out_gbps)},
          {"gelems_per_s", Num("%.4f", r.gelems)},
          {"stream_gbps", Num("%.4f", r.stream_gbps)},
          {"memcpy_gbps", Num("%.4f", r.memcpy_gbps)},
          {"ratio_stream", Ratio(r, "")},
          {"ratio_memcpy", Num("%.4f", r.ratio_memcpy)},
          {"out_gbps_min", Num("%.4f", r.out_gbps_min)},
          {"out_gbps_max", Num("%.4f", r.out_gbps_max)},
          {"stream_gbps_min", Num("%.4f", r.stream_gbps_min)},
          {"stream_gbps_max", Num("%.4f", r.stream_gbps_max)},
          {"yardstick_spread", Num("%.4f", r.yardstick_spread)},
          {"in_bytes", std::to_string(r.in_bytes)},
          {"rw_gbps", Num("%.4f", r.rw_gbps)},
          {"rw_spread", Num("%.4f", r.rw_spread)},
          {"ratio_rw", r.ratio_rw_valid ? Num("%.4f", r.ratio_rw) : std::string()},
          {"rmse", Acc(r, r.rmse, "%.6g", "")},
          {"max_abs_err", Acc(r, r.max_abs, "%.6g", "")},
          {"sqnr_db", Acc(r, r.sqnr_db, "%.3f", "")},
          {"target", r.target, true},
          {"note", r.note, true}};
}

void PrintRows(const std::vector<Row>& rows, const std::string& format, std::ostream& out) {
  if (format == "json") {
    out << "[\n";
    for (size_t i = 0; i < rows.size(); ++i) {
      const std::vector<Field> fields = Fields(rows[i]);
      out << "  {";
      for (size_t f = 0; f < fields.size(); ++f) {
        const Field& x = fields[f];
        out << (f ? ", " : "") << '"' << x.name << "\": ";
        if (x.text) {
          out << '"' << JsonEscape(x.value) << '"';
        } else {
          out << (x.value.empty() ? "null" : x.value);
        }
      }
      out << "}" << (i + 1 < rows.size() ? "," : "") << "\n";
    }
    out << "]\n";
    return;
  }
  if (format == "csv") {
    const std::vector<Field> header = Fields(Row());
    for (size_t f = 0; f < header.size(); ++f) out << (f ? "," : "") << header[f].name;
    out << "\n";
    for (const Row& r : rows) {
      const std::vector<Field> fields = Fields(r);
      for (size_t f = 0; f < fields.size(); ++f) {
        out << (f ? "," : "") << (fields[f].text ? CsvField(fields[f].value) : fields[f].value);
      }
      out << "\n";
    }
    return;
  }
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "%-15s %5s %5s %3s %9s %6s %8s %13s %7s %8s %5s %6s %8s %6s %6s %9s %9s %7s\n",
                "layout", "G", "dtype", "thr", "ms", "prep%", "out GB/s", "(min-max)", "Gel/s",
                "strm GB/s", "+-%", "x strm", "cpy GB/s", "x cpy", "x r+w", "rmse", "max err",
                "SQNR dB");
  out << buf;
  for (const Row& r : rows) {
    const std::string g = r.group_size == 0 ? "chan" : std::to_string(r.group_size);
    char range[32] = "-", spread[16] = "-";
    if (r.out_gbps_max > 0) {
      std::snprintf(range, sizeof range, "%.1f-%.1f", r.out_gbps_min, r.out_gbps_max);
    }
    if (r.stream_gbps > 0) std::snprintf(spread, sizeof spread, "%.0f", r.yardstick_spread * 100);
    std::snprintf(
        buf, sizeof buf,
        "%-15s %5s %5s %3d %9.3f %6s %8.2f %13s %7.3f %8.2f %5s %6s %8.2f %6.2f %6s %9s %9s %7s\n",
        r.layout.c_str(), g.c_str(), r.dtype.c_str(), r.threads, r.seconds * 1e3,
        r.prepare_seconds > 0 ? Num("%.1f", 100 * r.prepare_seconds / r.seconds).c_str() : "-",
        r.out_gbps, range, r.gelems, r.stream_gbps, spread, Ratio(r, "-").c_str(), r.memcpy_gbps,
        r.ratio_memcpy, r.ratio_rw_valid ? Num("%.2f", r.ratio_rw).c_str() : "-",
        Acc(r, r.rmse, "%.3g", "-").c_str(), Acc(r, r.max_abs, "%.3g", "-").c_str(),
        Acc(r, r.sqnr_db, "%.2f", "-").c_str());
    out << buf;
  }
}

// The group-size question answered from the rows: for each layout, type
// and thread count measured at several group sizes, how much the speed
// varies across them and the accuracy at each.
void PrintVerdicts(const std::vector<Row>& rows, std::ostream& out) {
  std::vector<std::string> seen;
  for (const Row& a : rows) {
    const std::string key = a.layout + "/" + a.dtype + "/" + std::to_string(a.threads);
    if (!a.accuracy || a.layout.find("-tile") != std::string::npos ||
        std::find(seen.begin(), seen.end(), key) != seen.end()) {
      continue;
    }
    seen.push_back(key);
    std::vector<const Row*> same;
    for (const Row& b : rows) {
      if (b.layout == a.layout && b.dtype == a.dtype && b.threads == a.threads && b.accuracy) {
        same.push_back(&b);
      }
    }
    if (same.size() < 2) continue;
    double lo = same[0]->gelems, hi = same[0]->gelems;
    for (const Row* r : same) lo = std::min(lo, r->gelems), hi = std::max(hi, r->gelems);
    std::string acc;
    for (const Row* r : same) {
      acc += (acc.empty() ? "" : ", ") + Num("%.1f", r->sqnr_db) + " dB " +
             (r->group_size == 0 ? std::string("per channel")
                                 : "at G=" + std::to_string(r->group_size));
    }
    out << a.layout << " (" << a.dtype << ", " << a.threads << " thread"
        << (a.threads > 1 ? "s" : "") << "): speed varies "
        << Num("%.0f", hi > 0 ? (hi - lo) / hi * 100 : 0.0) << " % across the group sizes ("
        << Num("%.2f", lo) << "-" << Num("%.2f", hi) << " G el/s); "
        << ((hi - lo) / hi < 0.1 ? "choose by accuracy: " : "accuracy: ") << acc << "\n";
  }
}

// The embedding path: at each of `thread_counts`, every thread (each on
// its own rows and buffer) dequantizes the same tile of `prep`'s tensor
// again and again through the tile API: about 256 KiB of output (whole
// rows where a row fits, else the first 256 KiB of a row), so the codes,
// scales and output stay in the core's caches and the figure is the
// kernel's compute rate. Reported against memcpy of the same bytes in
// cache at the same thread count (no fill yardstick: nothing goes to
// memory), which is also what the machine's cores give together: the
// kernel's scaling from 1 to T threads is judged against memcpy's.
void InCacheRows(const Dequantizer& prep, const std::string& lname, int64_t group,
                 const std::string& dname, int reps, const std::vector<int>& thread_counts,
                 std::vector<Row>* rows) {
  const int64_t cols = prep.cols(), nrows = prep.rows();
  const int64_t out_bytes = DTypeBits(prep.output().dtype) / 8;
  constexpr int64_t kTileBytes = 256 * 1024;
  if (nrows == 0 || cols == 0) return;
  const int64_t tc =
      std::min<int64_t>(cols, std::max<int64_t>(256, kTileBytes / out_bytes / 256 * 256));
  const int64_t tr = std::max<int64_t>(1, std::min<int64_t>(nrows, kTileBytes / (tc * out_bytes)));
  const size_t tile_bytes = static_cast<size_t>(tr * tc * out_bytes);
  const int inner = std::max<int>(1, static_cast<int>((int64_t{1} << 26) / (tr * tc)));
  for (const int t : thread_counts) {
    std::vector<Buffer> tiles, srcs;
    for (int i = 0; i < t; ++i) {
      tiles.emplace_back(tile_bytes);
      srcs.emplace_back(tile_bytes);
      std::memset(tiles.back().data.get(), 0, tile_bytes);
      std::memset(srcs.back().data.get(), 1, tile_bytes);
    }
    auto on_threads = [&](const std::function<void(int)>& fn) {
      if (t == 1) return fn(0);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(t)
#endif
      for (int i = 0; i < t; ++i) fn(i);
    };
    bool ok = true;
    const auto times = InterleavedSeconds(
        reps,
        {[&] {
           on_threads([&](int i) {
             const int64_t r0 = (i * tr) % std::max<int64_t>(1, nrows - tr + 1);
             for (int it = 0; it < inner; ++it) {
               if (!prep.RunTile(r0, r0 + tr, 0, tc, tiles[static_cast<size_t>(i)].data.get(), tc)
                        .ok()) {
                 ok = false;
               }
             }
           });
         },
         [&] {
           on_threads([&](int i) {
             for (int it = 0; it < inner; ++it) {
               std::memcpy(tiles[static_cast<size_t>(i)].data.get(),
                           srcs[static_cast<size_t>(i)].data.get(), tile_bytes);
               asm volatile("" ::: "memory");
             }
           });
         }});
    if (!ok) return;
    Row r;
    r.layout = lname + "-tile";
    r.group_size = group;
    r.dtype = dname;
    r.threads = t;
    r.elements = tr * tc * inner * t;
    r.seconds = Median(times[0]);
    const double gb = static_cast<double>(tile_bytes) * inner * t / 1e9;
    r.out_gbps = gb / r.seconds;
    r.out_gbps_min = gb / times[0].back();
    r.out_gbps_max = gb / times[0].front();
    r.gelems = static_cast<double>(r.elements) / r.seconds / 1e9;
    r.memcpy_gbps = gb / Median(times[1]);
    r.ratio_memcpy = r.out_gbps / r.memcpy_gbps;
    r.note = "in-cache " + std::to_string(tr) + "x" + std::to_string(tc) + " tile";
    r.ratio_valid = false;  // no fill yardstick in cache; see ratio_memcpy
    r.accuracy = false;
    rows->push_back(r);
  }
}

}  // namespace

std::vector<std::string> BenchLayoutNames() {
  std::vector<std::string> layouts = {"pmx-q1",   "pmx-q0",  "onnx-b1",   "onnx-b0",     "int8",
                                      "onnx8-b0", "gptq",    "gptq-act",  "awq",         "ct",
                                      "ct-act",   "bnb-nf4", "fp8-block", "gptoss-mxfp4"};
  const std::string ggml = DequantizableGgmlTypeNames();
  for (size_t at = 0; at < ggml.size();) {
    const size_t comma = ggml.find(", ", at);
    layouts.push_back(ggml.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
    at = comma == std::string::npos ? ggml.size() : comma + 2;
  }
  return layouts;
}

namespace {

constexpr const char* kBenchOutFormats[] = {"json", "csv"};

// True if folder `dir` is `root` or inside it (by device and inode, so any
// spelling of either path — relative, "..", symlinks — compares right).
bool FolderInside(const std::string& dir, const std::string& root) {
  struct stat r;
  if (::stat(root.c_str(), &r) != 0) return false;
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(dir, ec);
  if (ec) return false;
  for (;;) {
    struct stat st;
    if (::stat(p.c_str(), &st) == 0 && st.st_dev == r.st_dev && st.st_ino == r.st_ino) return true;
    if (p == p.parent_path() || p.empty()) return false;
    p = p.parent_path();
  }
}

// --out OUT: OUT is a name prefix; OUT.json and OUT.csv are checked like
// every output (formats/files.h) and opened now, so a bad --out fails
// before the runs. Never inside the checkpoint being studied.
StatusOr<std::vector<std::unique_ptr<AtomicFile>>> OpenBenchOut(const BenchOptions& opt) {
  const std::string what = "--out '" + EscapeBytes(opt.out) + "'";
  struct stat st;
  if (opt.out.back() == '/' || (::stat(opt.out.c_str(), &st) == 0 && !S_ISREG(st.st_mode))) {
    return Status::Error(what +
                         " names a folder or a special file; --out takes a name prefix (OUT.json "
                         "and OUT.csv are written), e.g. results/study");
  }
  std::vector<std::unique_ptr<AtomicFile>> files;
  for (const char* format : kBenchOutFormats) {
    const std::string path = opt.out + "." + format;
    InputFiles weights;
    if (!opt.weights.empty() && !IsDirectory(opt.weights)) {
      auto f = ReadOnlyFile::Open(opt.weights, &weights);  // identity only
      (void)f;
    }
    NIBBLE_RETURN_IF_ERROR(CheckOutputPath(path, weights, "--out file"));
    // The checkpoint: a folder, or the folder of a .safetensors file (a
    // GGUF or ONNX file is a checkpoint of its own: only it is protected).
    const bool folder = IsDirectory(opt.weights);
    const bool st_file = opt.weights.size() > 12 &&
                         opt.weights.compare(opt.weights.size() - 12, 12, ".safetensors") == 0;
    if (folder || st_file) {
      const std::string root =
          folder ? opt.weights : std::filesystem::path(opt.weights).parent_path().string();
      const auto slash = path.rfind('/');
      const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
      if (FolderInside(dir, root.empty() ? "." : root)) {
        return Status::Error(what + " would write '" + EscapeBytes(path) +
                             "' into the checkpoint studied (--weights '" +
                             EscapeBytes(opt.weights) + "'): choose another folder");
      }
    }
    files.push_back(std::make_unique<AtomicFile>());
    NIBBLE_RETURN_IF_ERROR(files.back()->Create(path));
  }
  return files;
}

// Plain vs non-temporal stores for outputs from 64 KiB to 256 MiB, each size
// dequantized repeatedly into the same buffer (as a runtime reusing a
// scratch buffer would): cache-resident sizes favour plain stores.
int RunStoreSweep(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  const int64_t k = 4096;
  const auto w = MakeLlmLikeWeight(16384, k, opt.seed);
  out << "output bytes   plain GB/s   streaming GB/s   streaming/plain\n";
  for (int64_t rows = 4; rows <= 16384; rows *= 2) {
    QuantizeConfig cfg;
    auto q = QuantizePmx(w.data(), {rows, k}, cfg);
    if (!q.ok()) {
      err << q.status().message() << "\n";
      return 1;
    }
    auto prep = PreparePmx(q->attrs, q->x.view(), q->scale.view(), nullptr, {});
    if (!prep.ok()) return 1;
    Plan plan = prep->plan();
    const size_t bytes = static_cast<size_t>(rows * k) * 4;
    Buffer y(bytes);
    std::memset(y.data.get(), 0, bytes);
    const int inner =
        static_cast<int>(std::max<int64_t>(1, (int64_t{64} << 20) / static_cast<int64_t>(bytes)));
    double t[2];
    for (int nt = 0; nt < 2; ++nt) {
      plan.nontemporal = nt == 1;
      t[nt] = MedianSeconds(opt.reps,
                            [&] {
                              for (int i = 0; i < inner; ++i)
                                DequantizeTile(plan, 0, rows, 0, k, y.data.get(), k);
                            }) /
              inner;
    }
    char buf[160];
    std::snprintf(buf, sizeof buf, "%12zu %12.2f %16.2f %17.2f\n", bytes,
                  static_cast<double>(bytes) / t[0] / 1e9, static_cast<double>(bytes) / t[1] / 1e9,
                  t[0] / t[1]);
    out << buf;
  }
  return 0;
}

}  // namespace

int RunMatMulBench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  std::vector<std::string> layouts = opt.layouts;
  if (!opt.layouts_given) {
    layouts = {"pmx-q1", "onnx-b1", "gptq", "gptq-act", "awq",
               "ct",     "bnb-nf4", "q4_0", "q4_k",     "fp8-block"};
  }
  std::vector<int> thread_counts;
  for (const int th : opt.threads) {
    const int t = th == 0 ? AllThreads() : th;
    if (std::find(thread_counts.begin(), thread_counts.end(), t) == thread_counts.end()) {
      thread_counts.push_back(t);
    }
  }
  struct MmRow {
    std::string layout, gemm;
    int64_t m, n, k;
    int threads;
    double seconds, read_seconds;
    size_t bytes;
    double dense_seconds;  // 0: no BLAS in the build
  };
  const bool dense = BlasAvailable();
  for (const std::string& g : opt.matmul_gemm) {
    if (g == "blas" && !dense) {
      err << "nibble bench: --matmul-gemm blas: this nibble was built without its BLAS (the "
             "OpenMP build of OpenBLAS, Debian's libopenblas-openmp-dev)\n";
      return 2;
    }
  }
  std::vector<MmRow> rows;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const std::string& shape : opt.matmul_shapes) {
    int64_t n = 0, k = 0;
    if (std::sscanf(shape.c_str(), "%ldx%ld", &n, &k) != 2 || n <= 0 || k <= 0) {
      err << "nibble bench: --matmul-shapes takes NxK shapes (got '" << shape << "')\n";
      return 2;
    }
    // The stored matrix: [N, K], or [K, N] for --matmul-weight in_out.
    const bool in_out = opt.matmul_weight == "in_out";
    const int64_t w_rows = in_out ? k : n, w_cols = in_out ? n : k;
    const std::vector<float> w = MakeLlmLikeWeight(w_rows, w_cols, opt.seed);
    for (const std::string& lname : layouts) {
      BenchLayout layout;
      if (!FindLayout(lname, &layout)) {
        err << "nibble bench: unknown layout '" << lname << "'\n";
        return 2;
      }
      BenchWeight bw;
      Status st = QuantizeFor(layout, w.data(), w_rows, w_cols, 128, &bw);
      auto d = st.ok() ? bw.Prepare(DType::kFloat32, lname) : StatusOr<Dequantizer>(st);
      if (!d.ok()) {
        err << "nibble bench: " << lname << " " << shape << ": " << d.status().message() << "\n";
        return 1;
      }
      const size_t bytes = bw.InputBytes();
      // The dense yardstick's float32 W: the layout's output dequantized
      // once, its first N x K values ([N, K], or [K, N] for in_out; of a
      // 3-D expert tensor, the same count of its values).
      std::vector<float> wf;
      if (dense) {
        wf.resize(static_cast<size_t>(d->rows() * d->cols()));
        const Status ds = d->Run({DType::kFloat32, d->output().shape, wf.data(), wf.size() * 4});
        if (!ds.ok()) {
          err << "nibble bench: " << lname << ": " << ds.message() << "\n";
          return 1;
        }
        wf.resize(static_cast<size_t>(n * k));
      }
      for (const int64_t m : opt.matmul) {
        std::vector<float> x(static_cast<size_t>(m * k)), y(static_cast<size_t>(m * n));
        for (float& v : x) v = normal(rng);
        const TensorView xv{DType::kFloat32, {m, k}, x.data(), x.size() * 4};
        const MutableTensorView yv{DType::kFloat32, {m, n}, y.data(), y.size() * 4};
        for (const int t : thread_counts) {
          for (const std::string& gemm : opt.matmul_gemm) {
            MatMulOptions mo;
            if (gemm == "blas") mo.gemm = MatMulOptions::Gemm::kBlas;
            mo.threads = t;
            if (in_out) mo.weight = MatMulOptions::Weight::kInOut;
            if (d->output().shape.size() == 3) {
              // A MoE expert tensor (gptoss-mxfp4: one expert of the [N, K]
              // weight, stored as gpt-oss stores experts): its expert 0,
              // oriented so that X [M, K] gives Y [M, N].
              mo.expert = 0;
              mo.weight = d->output().shape[2] == k ? MatMulOptions::Weight::kOutIn
                                                    : MatMulOptions::Weight::kInOut;
            }
            Status run = Status::Ok();
            std::vector<std::function<void()>> runs{
                [&] {
                  const Status s1 = MatMul(*d, xv, yv, nullptr, mo);
                  if (!s1.ok()) run = s1;
                },
                [&] {
                  bw.ForEachInput([&](const void* p, size_t b) {
                    Parallel(t, b, [&](size_t a, size_t e) {
                      rw_sink ^=
                          StreamReadWrite(static_cast<const char*>(p) + a, e - a, nullptr, 0);
                    });
                  });
                }};
            if (dense) {
              // sgemm on the float32 weight W (the view's [N, K], or its
              // [K, N] for in_out): t equal blocks of features, one call each.
              const bool w_nk = mo.weight == MatMulOptions::Weight::kOutIn;
              const int64_t ldw = w_nk ? k : n;
              runs.push_back([&, w_nk, ldw] {
#ifdef _OPENMP
#pragma omp parallel for schedule(static) num_threads(t)
#endif
                for (int i = 0; i < t; ++i) {
                  const int64_t n0 = n * i / t, n1 = n * (i + 1) / t;
                  BlasGemm(x.data(), m, k, wf.data() + (w_nk ? n0 * ldw : n0), w_nk, ldw, n1 - n0,
                           k, false, y.data() + n0, n);
                }
              });
            }
            const auto times = InterleavedSeconds(opt.reps, runs, [&](size_t) {
              if (opt.matmul_warm) return;
              bw.ForEachInput([](const void* p, size_t b) { FlushFromCaches(p, b); });
              if (dense) FlushFromCaches(wf.data(), wf.size() * 4);
            });
            if (!run.ok()) {
              err << "nibble bench: matmul " << lname << ": " << run.message() << "\n";
              return 1;
            }
            rows.push_back({lname, gemm, m, n, k, t, Median(times[0]), Median(times[1]), bytes,
                            dense ? Median(times[2]) : 0.0});
            err << "." << std::flush;
          }
        }
      }
    }
  }
  err << "\n";
  auto gbs = [](size_t b, double s) { return static_cast<double>(b) / s / 1e9; };
  if (opt.format == "json") {
    for (const MmRow& r : rows) {
      out << "{\"m\": " << r.m << ", \"n\": " << r.n << ", \"k\": " << r.k << ", \"layout\": \""
          << r.layout << "\", \"weight\": \"" << opt.matmul_weight
          << "\", \"dtype\": \"f32\", \"threads\": " << r.threads
          << ", \"seconds\": " << Num("%.6g", r.seconds) << ", \"packed_bytes\": " << r.bytes
          << ", \"packed_gb_s\": " << Num("%.4g", gbs(r.bytes, r.seconds))
          << ", \"read_gb_s\": " << Num("%.4g", gbs(r.bytes, r.read_seconds))
          << ", \"ratio_read\": " << Num("%.4g", r.read_seconds / r.seconds) << ", \"cache\": \""
          << (opt.matmul_warm ? "warm" : "cold") << "\", \"gemm\": \"" << r.gemm
          << "\", \"target\": \"" << ActiveTarget() << "\"";
      if (r.dense_seconds > 0) {
        out << ", \"dense_seconds\": " << Num("%.6g", r.dense_seconds)
            << ", \"ratio_dense\": " << Num("%.4g", r.dense_seconds / r.seconds) << ", \"blas\": \""
            << BlasName() << "\"";
      }
      out << "}\n";
    }
  } else if (opt.format == "csv") {
    out << "m,n,k,layout,weight,dtype,threads,seconds,packed_bytes,packed_gb_s,read_gb_s,"
           "ratio_read,cache,gemm,dense_seconds,ratio_dense\n";
    for (const MmRow& r : rows) {
      out << r.m << "," << r.n << "," << r.k << "," << r.layout << "," << opt.matmul_weight
          << ",f32," << r.threads << "," << Num("%.6g", r.seconds) << "," << r.bytes << ","
          << Num("%.4g", gbs(r.bytes, r.seconds)) << ","
          << Num("%.4g", gbs(r.bytes, r.read_seconds)) << ","
          << Num("%.4g", r.read_seconds / r.seconds) << "," << (opt.matmul_warm ? "warm" : "cold")
          << "," << r.gemm << ","
          << (r.dense_seconds > 0 ? Num("%.6g", r.dense_seconds) : std::string()) << ","
          << (r.dense_seconds > 0 ? Num("%.4g", r.dense_seconds / r.seconds) : std::string())
          << "\n";
    }
  } else {
    out << (opt.matmul_weight == "in_out" ? "matmul Y[M, N] = X[M, K] · W (W stored [K, N])"
                                          : "matmul Y[M, N] = X[M, K] · Wᵀ (W stored [N, K])")
        << ", X and Y float32; x read = time / time to read the "
           "packed weight once (same threads, interleaved; 1 = the memory limit at M = 1)"
        << (opt.matmul_warm ? "; weight left in the caches (--matmul-warm): both from the caches"
                            : "; weight flushed from the caches before each run")
        << (dense ? std::string("; dense ms = ") + BlasName() +
                        " sgemm on the dequantized float32 weight, x dense = dense ms / ms"
                  : std::string())
        << "\n";
    char line[200];
    std::snprintf(line, sizeof line, "%-10s %-5s %12s %5s %4s %10s %11s %9s %8s %10s %8s\n",
                  "layout", "gemm", "N,K", "M", "thr", "ms", "packed GB/s", "read GB/s", "x read",
                  "dense ms", "x dense");
    out << line;
    for (const MmRow& r : rows) {
      const std::string nk = std::to_string(r.n) + "," + std::to_string(r.k);
      std::snprintf(line, sizeof line,
                    "%-10s %-5s %12s %5ld %4d %10.3f %11.2f %9.2f %8.2f %10.3f %8.2f\n",
                    r.layout.c_str(), r.gemm.c_str(), nk.c_str(), static_cast<long>(r.m), r.threads,
                    r.seconds * 1e3, gbs(r.bytes, r.seconds), gbs(r.bytes, r.read_seconds),
                    r.seconds / r.read_seconds, r.dense_seconds * 1e3,
                    r.dense_seconds > 0 ? r.dense_seconds / r.seconds : 0.0);
      out << line;
    }
  }
  return 0;
}

int RunGroupSizeBench(const BenchOptions& opt, std::ostream& out, std::ostream& err) {
  // --target: every run below on that kernel target, the best one again
  // on return.
  struct TargetReset {
    bool set = false;
    ~TargetReset() {
      if (set) SelectTarget("");
    }
  } target_reset;
  if (!opt.target.empty()) {
    if (!SelectTarget(opt.target)) {
      std::string names;
      for (const std::string& t : AvailableTargets()) names += (names.empty() ? "" : ", ") + t;
      err << "nibble bench: --target " << opt.target
          << " is not a kernel target this build and CPU run (available: " << names << ")\n";
      return 2;
    }
    target_reset.set = true;
  }
  if (!opt.matmul.empty()) return RunMatMulBench(opt, out, err);
  // --out: checked (and its two files opened) before minutes of runs.
  std::vector<std::unique_ptr<AtomicFile>> out_files;
  if (!opt.out.empty()) {
    auto files = OpenBenchOut(opt);
    if (!files.ok()) {
      err << "nibble bench: " << files.status().message() << "\n";
      return 1;
    }
    out_files = std::move(*files);
  }
  if (opt.store_sweep) return RunStoreSweep(opt, out, err);
  int64_t n = 0, k = 0;
  {
    const auto comma = opt.shape.find(',');
    char* end = nullptr;
    if (comma != std::string::npos) {
      n = std::strtoll(opt.shape.c_str(), &end, 10);
      if (end != opt.shape.c_str() + comma) n = 0;
      k = std::strtoll(opt.shape.c_str() + comma + 1, &end, 10);
      if (*end != '\0') k = 0;
    }
    if (n <= 0 || k <= 0) {
      err << "nibble bench: --shape must be N,K with positive integers (got '" << opt.shape
          << "')\n";
      return 2;
    }
  }
  const bool tty = isatty(STDERR_FILENO);
  std::vector<float> w;
  std::vector<std::string> layouts = opt.layouts;
  if (!opt.weights.empty()) {
    BenchOptions::LoadedWeight lw;
    std::string error;
    if (!opt.load_weights || !opt.load_weights(opt.weights, opt.weights_tensor, &lw, &error)) {
      err << "nibble bench: --weights: " << (opt.load_weights ? error : "not available here")
          << "\n";
      return 1;
    }
    err << "weights: " << lw.name << " [" << lw.rows << ", " << lw.cols << "] from " << opt.weights
        << "\n";
    n = lw.rows;
    k = lw.cols;
    w = std::move(lw.values);
    if (!opt.layouts_given && !lw.layout.empty()) {
      layouts = {lw.layout};
      if (lw.layout != "pmx-q1") layouts.push_back("pmx-q1");
      err << "layouts: " << lw.layout << " (the weight's own) and pmx-q1 (--layout for others)\n";
    }
  } else {
    w = MakeLlmLikeWeight(n, k, opt.seed);
  }
  // Thread counts as run (0 = all cores), each once, in the order given.
  std::vector<int> thread_counts;
  for (const int th : opt.threads) {
    const int t = th == 0 ? AllThreads() : th;
    if (std::find(thread_counts.begin(), thread_counts.end(), t) == thread_counts.end()) {
      thread_counts.push_back(t);
    }
  }
  std::vector<Row> rows;
  // GGUF layouts have their own block, bitsandbytes, FP8 and MXFP4 their
  // format's: those run once (at the first G).
  const auto fixed_block = [](const BenchLayout& l) {
    return l.family == "gguf" || l.family == "bnb" || l.family == "fp8" || l.family == "mxfp4";
  };
  size_t total = 0;
  for (const auto& lname : layouts) {
    BenchLayout layout;
    if (!FindLayout(lname, &layout)) {
      err << "nibble bench: unknown layout '" << lname << "'\n";
      return 2;
    }
    total += (fixed_block(layout) ? 1 : opt.group_sizes.size()) * opt.dtypes.size() *
             thread_counts.size();
  }
  err << total << " timed runs (" << opt.reps << " repetitions each"
      << (opt.in_cache ? ", plus as many in-cache tile rows" : "") << ") on a " << n << " x " << k
      << " weight; the time left is estimated as they go\n";
  const auto started = std::chrono::steady_clock::now();
  size_t done = 0;
  int failures = 0;
  for (const auto& lname : layouts) {
    BenchLayout layout;
    (void)FindLayout(lname, &layout);
    for (int64_t g : opt.group_sizes) {
      if (fixed_block(layout) && g != opt.group_sizes.front()) continue;
      BenchWeight bw;
      const Status qs = QuantizeFor(layout, w.data(), n, k, g, &bw);
      if (!qs.ok()) {
        err << "nibble bench: " << lname << " G=" << g << ": " << qs.message() << "\n";
        ++failures;
        done += opt.dtypes.size() * thread_counts.size();
        continue;
      }
      for (const auto& dname : opt.dtypes) {
        auto prep = bw.Prepare(ParseOutputDType(dname), lname);
        if (!prep.ok()) {
          err << "nibble bench: " << prep.status().message() << "\n";
          ++failures;
          continue;
        }
        auto y = Tensor::Allocate(prep->output().dtype, prep->output().shape);
        if (!y.ok()) {
          err << "nibble bench: " << y.status().message() << "\n";
          return 1;
        }
        const size_t bytes = y->size_bytes();
        Buffer src(bytes), dst(bytes);
        std::memset(src.data.get(), 1, bytes);
        std::memset(dst.data.get(), 0, bytes);
        // The read + write yardstick's own input (the same size as the
        // layout's, never the kernel's: reading that would warm the cache
        // for the kernel's next run).
        const size_t in_bytes = bw.InputBytes();
        Buffer rw_in(std::max<size_t>(in_bytes, 1));
        std::memset(rw_in.data.get(), 1, in_bytes);
        (void)bw.Run(*prep, &*y, 1);
        const auto acc = MeasureError(w.data(), ToFloat(*y).data(), n * k);
        for (const int t : thread_counts) {
          ++done;
          const double elapsed =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
          const double left = done > 1 ? elapsed / static_cast<double>(done - 1) *
                                             static_cast<double>(total - done + 1)
                                       : 0.0;
          err << (tty ? "\r" : "") << "[" << done << "/" << total << "] " << lname << " G=" << g
              << " " << dname << " threads=" << t;
          if (done > 1) err << " (about " << static_cast<int>(left + 0.5) << " s left)";
          err << (tty ? "   " : "\n") << std::flush;
          Row r;
          r.layout = lname;
          if (layout.family == "gguf") {
            const int64_t block = GgmlTypeTraits(layout.ggml_type)->block;
            r.group_size = block;
            r.note = GgmlBlockDescription(layout.ggml_type) + " (fixed by the format)";
            if (bw.synthetic) {
              r.accuracy = false;
              r.note += "; synthetic codes (no quantizer in nibble): speed only";
            }
          } else if (layout.family == "bnb") {
            r.group_size = kBnbBlock;
            r.note = "NF4, blocksize 64 (bitsandbytes' default; fixed here)";
          } else if (layout.family == "fp8") {
            r.group_size = kFp8Block;
            r.note = "e4m3, 128 x 128 blocks of float32 scales (DeepSeek-V3's layout)";
          } else if (layout.family == "mxfp4") {
            r.group_size = 32;
            r.note = "e2m1, e8m0 scale per 32, stored [K, N] and written transposed (gpt-oss)";
          } else {
            r.group_size = g;
          }
          r.dtype = dname;
          r.threads = t;
          r.elements = n * k;
          char* d = dst.data.get();
          const char* s = src.data.get();
          // The whole path from the stored bytes to floats: preparing the
          // request (validation, lowering, any scale / zero-point
          // widening) and running it, as a loader does per tensor. Timed
          // interleaved with the yardsticks (fill, kernel, memcpy, fill,
          // kernel, ...) on the same buffers with the same threads, so a
          // neighbour's load hits all of them alike.
          const DType want = ParseOutputDType(dname);
          std::vector<double> prepare_times;
          const auto times = InterleavedSeconds(
              opt.reps,
              {[&] { Parallel(t, bytes, [&](size_t a, size_t b) { StreamFill(d + a, b - a); }); },
               [&] {
                 // As a loader prepares (Checkpoint::Read): on the run's threads.
                 ScopedPrepareThreads prepare_threads(t);
                 const auto p0 = std::chrono::steady_clock::now();
                 auto p = bw.Prepare(want, lname);
                 prepare_times.push_back(
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count());
                 if (p.ok()) (void)bw.Run(*p, &*y, t);
               },
               [&] {
                 Parallel(t, bytes, [&](size_t a, size_t b) { std::memcpy(d + a, s + a, b - a); });
               },
               [&] {
                 // Each thread reads the share of the input that goes with
                 // its share of the output.
                 const auto at = [&](size_t o) {
                   return static_cast<size_t>(static_cast<double>(in_bytes) *
                                              static_cast<double>(o) / static_cast<double>(bytes));
                 };
                 Parallel(t, bytes, [&](size_t a, size_t b) {
                   rw_sink.fetch_xor(
                       StreamReadWrite(rw_in.data.get() + at(a), at(b) - at(a), d + a, b - a),
                       std::memory_order_relaxed);
                 });
               }},
              // Every run starts with the bytes it reads and writes out
              // of the caches, as a loader meets a tensor it has not
              // touched (a large last-level cache would otherwise keep
              // the kernel's codes from one run to the next).
              [&](size_t i) {
                if (i == 1) {  // the kernel: its stored tensors and output
                  bw.ForEachInput(FlushFromCaches);
                  FlushFromCaches(y->data(), bytes);
                  return;
                }
                FlushFromCaches(d, bytes);  // the yardsticks' output
                if (i == 2) FlushFromCaches(s, bytes);
                if (i == 3) FlushFromCaches(rw_in.data.get(), in_bytes);
              });
          const double fill = Median(times[0]), cpy = Median(times[2]);
          r.seconds = Median(times[1]);
          prepare_times.erase(prepare_times.begin());  // the warm-up run
          std::sort(prepare_times.begin(), prepare_times.end());
          r.prepare_seconds = Median(prepare_times);
          const double gb = static_cast<double>(bytes) / 1e9;
          r.out_gbps = gb / r.seconds;
          r.out_gbps_min = gb / times[1].back();
          r.out_gbps_max = gb / times[1].front();
          r.gelems = static_cast<double>(r.elements) / r.seconds / 1e9;
          r.stream_gbps = gb / fill;
          r.stream_gbps_min = gb / times[0].back();
          r.stream_gbps_max = gb / times[0].front();
          r.yardstick_spread = Spread(times[0]);
          r.memcpy_gbps = gb / cpy;
          r.ratio_stream = r.out_gbps / r.stream_gbps;
          r.ratio_memcpy = r.out_gbps / r.memcpy_gbps;
          r.in_bytes = static_cast<int64_t>(in_bytes);
          r.rw_gbps = gb / Median(times[3]);
          r.rw_spread = Spread(times[3]);
          r.ratio_rw = r.out_gbps / r.rw_gbps;
          r.ratio_rw_valid = r.rw_spread <= kMaxYardstickSpread;
          if (!r.ratio_rw_valid) {
            char why[96];
            std::snprintf(why, sizeof why, "read+write spread +-%.0f%% > 10%%: no ratio_rw",
                          r.rw_spread * 100);
            r.note += (r.note.empty() ? "" : "; ") + std::string(why);
          }
          if (r.yardstick_spread > kMaxYardstickSpread) {
            r.ratio_valid = false;
            char why[96];
            std::snprintf(why, sizeof why, "fill spread +-%.0f%% > 10%%: no ratio",
                          r.yardstick_spread * 100);
            r.note += (r.note.empty() ? "" : "; ") + std::string(why);
          }
          r.rmse = acc.rmse;
          r.max_abs = acc.max_abs;
          r.sqnr_db = acc.sqnr_db;
          rows.push_back(r);
        }
        if (opt.in_cache) {
          InCacheRows(*prep, lname, rows.back().group_size, dname, opt.reps, thread_counts, &rows);
        }
      }
    }
  }

  if (tty) err << "\r" << std::string(60, ' ') << "\r" << std::flush;
  err << "kernel target: " << ActiveTarget() << ", threads available: " << AllThreads()
      << "; every timed run starts with its bytes flushed from the caches\n";
  PrintRows(rows, opt.format, out);
  if (opt.format == "table") {
    out << "\n";
    PrintVerdicts(rows, out);
    out << "\n" << kBenchColumns << "\n";
  }
  for (size_t i = 0; i < out_files.size(); ++i) {
    AtomicFile& f = *out_files[i];
    std::ostringstream text;
    PrintRows(rows, kBenchOutFormats[i], text);
    const std::string data = text.str();
    Status st = f.Write(data.data(), data.size());
    if (st.ok()) st = f.Publish();
    if (!st.ok()) {
      err << "nibble bench: " << st.message() << "\n";
      return 1;
    }
    err << "wrote " << f.dest() << "\n";
  }
  return failures ? 1 : 0;
}

}  // namespace nibble
