// nibble: command-line front end. Parses arguments and calls the library;
// no dequantization logic lives here.
#include <unistd.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <regex>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "bench/group_size_bench.h"
#include "bench/synthetic_weights.h"
#include "checkpoint/checkpoint.h"
#include "checkpoint/convert.h"
#include "formats/files.h"
#include "kernels/dequantize.h"
#include "onnx/fold.h"
#include "onnx/onnx_checkpoint.h"
#include "op/dequantizer.h"
#include "op/pmx.h"
#include "op/quantize.h"
#include "op/version.h"
#include "tools/bench_options.h"
#include "tools/cli_checks.h"
#include "tools/dtype_option.h"
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

std::string HumanBytes(uint64_t b);

// SIGINT / SIGTERM / SIGHUP during dequant and fold: the handler records
// the signal; the library, asked between tensors and row chunks, stops and
// removes its temporaries; the command then says so and dies of the same
// signal (exit status 128 + n, as shells expect). The handler is one-shot
// (SA_RESETHAND): a second Ctrl-C kills at once, like SIGKILL, leaving at
// most the temporaries the next run removes.
volatile std::sig_atomic_t g_signal = 0;

extern "C" void OnStopSignal(int sig) { g_signal = sig; }

void CatchStopSignals() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sa.sa_flags = static_cast<int>(SA_RESETHAND | SA_RESTART);
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

bool StopRequested() { return g_signal != 0; }

// After a command stopped by a signal: says so and dies of that signal.
// `message`: the command's error, which says when completed shards were
// kept for a later run to resume ("... run the same command again ...").
int DieOfSignal(const char* command, const std::string& message = "") {
  const int sig = g_signal;
  const size_t kept = message.find(" shards are kept in ");
  std::cerr << "nibble " << command << ": interrupted (" << strsignal(sig) << "): ";
  if (kept != std::string::npos) {
    // "(N of M shards are kept in '...': run the same command again ...)"
    std::string tail = message.substr(message.rfind('(', kept) + 1);
    if (!tail.empty() && tail.back() == ')') tail.pop_back();
    std::cerr << "nothing was published; " << tail;
  } else {
    std::cerr << "nothing was written, temporaries removed";
  }
  std::cerr << "\n";
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  return 128 + sig;
}

// The built-in example: an LLM-like weight quantized int4 (PMX int4x4,
// G = 128, quant_axis 1), dequantized by the operator.
int RunDemo(const std::string& shape_text, int64_t group, int threads) {
  int64_t n, k;
  if (!ParseShape(shape_text, &n, &k)) {
    std::cerr << "nibble demo: --shape must be N,K with positive integers (got '" << shape_text
              << "')\n";
    return 2;
  }
  {
    auto elems = nibble::CheckedNumElements({n, k}, "demo weight");
    if (!elems.ok()) {
      std::cerr << "nibble demo: --shape " << shape_text << ": " << elems.status().message()
                << "\n";
      return 2;
    }
    auto bytes = nibble::CheckedPackedBytes(*elems, nibble::DType::kFloat32, "demo weight");
    if (!bytes.ok()) {
      std::cerr << "nibble demo: --shape " << shape_text << ": " << bytes.status().message()
                << "\n";
      return 2;
    }
  }
  // A weight larger than the machine's memory is refused up front (a
  // clear message, and no reliance on the allocator failing).
  const double need = static_cast<double>(n) * static_cast<double>(k) * 4.0;
  const double phys =
      static_cast<double>(sysconf(_SC_PHYS_PAGES)) * static_cast<double>(sysconf(_SC_PAGESIZE));
  if (phys > 0 && need > phys) {
    std::cerr << "nibble demo: out of memory: a " << shape_text << " float32 weight needs "
              << HumanBytes(static_cast<uint64_t>(need)) << ", more than this machine's "
              << HumanBytes(static_cast<uint64_t>(phys)) << "\n";
    return 1;
  }
  std::vector<float> w;
  try {
    w = nibble::MakeLlmLikeWeight(n, k, 42);
  } catch (const std::bad_alloc&) {
    std::cerr << "nibble demo: out of memory: a " << shape_text
              << " float32 weight does not fit in this machine's memory\n";
    return 1;
  }
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

// A shape as a JSON array of numbers.
std::string JsonShape(const nibble::Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// A duration for people: "850 us", "54.9 ms", "1.82 s", "3 min 07 s".
std::string HumanSeconds(double s) {
  char buf[64];
  if (s < 1e-3) {
    std::snprintf(buf, sizeof buf, "%.0f us", s * 1e6);
  } else if (s < 1.0) {
    std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  } else if (s < 60.0) {
    std::snprintf(buf, sizeof buf, "%.3g s", s);
  } else {
    const auto whole = static_cast<long long>(s + 0.5);
    std::snprintf(buf, sizeof buf, "%lld min %02lld s", whole / 60, whole % 60);
  }
  return buf;
}

std::string HumanBytes(uint64_t b) {
  char buf[32];
  if (b >= (uint64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
  else if (b >= (uint64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  return buf;
}

int RunInspect(const std::string& path, const std::string& format) {
  auto ws = nibble::InspectModel(path);
  if (!ws.ok()) {
    std::cerr << "nibble inspect: " << ws.status().message() << "\n";
    return 1;
  }
  uint64_t packed = 0, deq = 0;
  for (const auto& w : *ws) packed += w.packed_bytes, deq += w.dequantized_bytes;
  if (format == "json") {
    std::cout << "{\"model\": \"" << nibble::JsonEscape(path) << "\", \"weights\": [";
    for (size_t i = 0; i < ws->size(); ++i) {
      const auto& w = (*ws)[i];
      std::cout << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << nibble::JsonEscape(w.name)
                << "\", \"node\": \"" << nibble::JsonEscape(w.node) << "\", \"kind\": \"" << w.kind
                << "\", \"element_type\": \"" << w.element_type
                << "\", \"shape\": " << JsonShape(w.shape) << ", \"bits\": " << w.bits
                << ", \"granularity\": \"" << w.granularity << "\", \"axis\": \"" << w.axis
                << "\", \"zero_point\": \"" << w.zero_point << "\", \"output_type\": \""
                << w.output_type << "\", \"packed_bytes\": " << w.packed_bytes
                << ", \"dequantized_bytes\": " << w.dequantized_bytes << "}";
    }
    std::cout << "\n], \"count\": " << ws->size() << ", \"packed_bytes\": " << packed
              << ", \"dequantized_bytes\": " << deq << "}\n";
    return 0;
  }
  std::printf("%-40s %-22s %-20s %-14s %4s %-11s %-4s %-16s %-8s %s\n", "weight", "kind",
              "element type", "shape", "bits", "granularity", "axis", "zero point", "output",
              "packed -> dequantized");
  for (const auto& w : *ws) {
    std::printf("%-40s %-22s %-20s %-14s %4d %-11s %-4s %-16s %-8s %s -> %s\n",
                nibble::EscapeBytes(w.name).c_str(), w.kind.c_str(), w.element_type.c_str(),
                w.logical_shape.c_str(), w.bits, w.granularity.c_str(), w.axis.c_str(),
                w.zero_point.c_str(), w.output_type.c_str(), HumanBytes(w.packed_bytes).c_str(),
                HumanBytes(w.dequantized_bytes).c_str());
  }
  std::printf("%zu quantized weights, %s packed -> %s dequantized\n", ws->size(),
              HumanBytes(packed).c_str(), HumanBytes(deq).c_str());
  return 0;
}

// --gptq-format / --gptq-v1-zeros of inspect and dequant.
void AddCheckpointOptions(CLI::App* app, nibble::CheckpointOptions* o) {
  app->add_option("--gptq-format", o->gptq_format,
                  "GPTQ: read qzeros as v1 (z - 1) or v2 (z), overriding what the config or "
                  "metadata state (required when nothing states it)")
      ->check(CLI::IsMember({"v1", "v2"}));
  app->add_option("--gptq-v1-zeros", o->gptq_v1_zeros,
                  "GPTQ v1: decode zero points as AutoGPTQ's default loader does ((stored + 1) "
                  "mod 2^bits), as its qlinear_cuda path does (autogptq-cuda: stored + 1, no "
                  "wrap) or as GPTQModel's (word + 0x11111111 with carries); default: by the "
                  "producer named in the config's meta.quantizer (unnamed: autogptq)")
      ->check(CLI::IsMember({"autogptq", "autogptq-cuda", "gptqmodel"}));
}

// `nibble inspect` of a GGUF file or a safetensors checkpoint.
int RunInspectCheckpoint(const std::string& path, const std::string& format,
                         const nibble::CheckpointOptions& options) {
  auto ck = nibble::Checkpoint::Open(path, options);
  if (!ck.ok()) {
    std::cerr << "nibble inspect: " << ck.status().message() << "\n";
    return 1;
  }
  uint64_t stored = 0, deq = 0;
  int quantized = 0, unsupported = 0;
  // Bytes `dequant` writes for t: none for an unsupported tensor (it is
  // refused, or left out with --skip-unsupported).
  auto out_bytes = [&](const nibble::CheckpointTensor& t) -> uint64_t {
    if (!t.supported) return 0;
    const auto n = nibble::CheckedNumElements(t.shape, t.name);
    if (!n.ok()) return 0;
    const int bits = nibble::DTypeBits(ck->OutputDType(t, nibble::DType::kUndefined));
    return static_cast<uint64_t>(*n) * static_cast<uint64_t>(bits) / 8;
  };
  for (const auto& t : ck->tensors()) {
    stored += t.stored_bytes;
    deq += out_bytes(t);
    quantized += t.quantized ? 1 : 0;
    unsupported += t.supported ? 0 : 1;
  }
  if (format == "json") {
    std::cout << "{\"path\": \"" << nibble::JsonEscape(path) << "\", \"format\": \""
              << nibble::JsonEscape(ck->description()) << "\", \"properties\": {";
    for (size_t i = 0; i < ck->properties().size(); ++i) {
      const auto& [k, v] = ck->properties()[i];
      std::cout << (i ? ", " : "") << "\"" << nibble::JsonEscape(k) << "\": \""
                << nibble::JsonEscape(v) << "\"";
    }
    std::cout << "}, \"tensors\": [";
    for (size_t i = 0; i < ck->tensors().size(); ++i) {
      const auto& t = ck->tensors()[i];
      std::cout << (i ? ",\n  " : "\n  ") << "{\"name\": \"" << nibble::JsonEscape(t.name)
                << "\", \"kind\": \"" << nibble::JsonEscape(t.kind) << "\", \"detail\": \""
                << nibble::JsonEscape(t.detail) << "\", \"source\": \""
                << nibble::JsonEscape(t.source) << "\", \"shape\": " << JsonShape(t.shape)
                << ", \"dtype\": \""
                << nibble::DTypeName(ck->OutputDType(t, nibble::DType::kUndefined))
                << "\", \"quantized\": " << (t.quantized ? "true" : "false")
                << ", \"supported\": " << (t.supported ? "true" : "false")
                << ", \"stored_bytes\": " << t.stored_bytes
                << ", \"output_bytes\": " << out_bytes(t)
                << (t.supported ? "" : ", \"why_not\": \"" + nibble::JsonEscape(t.why_not) + "\"")
                << "}";
    }
    std::cout << "\n], \"count\": " << ck->tensors().size() << ", \"quantized\": " << quantized
              << ", \"unsupported\": " << unsupported << "}\n";
    return 0;
  }
  std::printf("%s: %s\n", nibble::EscapeBytes(path).c_str(), ck->description().c_str());
  for (const auto& [k, v] : ck->properties()) {
    std::printf("  %-36s %s\n", nibble::EscapeBytes(k).c_str(), nibble::EscapeBytes(v).c_str());
  }
  std::printf("\n%-48s %-8s %-18s %-40s %s\n", "tensor", "kind", "shape", "detail",
              "stored -> output");
  for (const auto& t : ck->tensors()) {
    std::printf("%-48s %-8s %-18s %-40s %s -> %s%s\n", nibble::EscapeBytes(t.name).c_str(),
                t.kind.c_str(), nibble::ShapeToString(t.shape).c_str(), t.detail.c_str(),
                HumanBytes(t.stored_bytes).c_str(),
                t.supported ? HumanBytes(out_bytes(t)).c_str() : "-",
                t.supported ? "" : ("  UNSUPPORTED: " + nibble::EscapeBytes(t.why_not)).c_str());
  }
  std::printf(
      "%zu tensors (%d quantized, %d unsupported), %s stored -> %s written (default output "
      "types%s)\n",
      ck->tensors().size(), quantized, unsupported, HumanBytes(stored).c_str(),
      HumanBytes(deq).c_str(),
      unsupported > 0 ? "; unsupported tensors are not written: dequant refuses them, or leaves "
                        "them out with --skip-unsupported"
                      : "");
  return 0;
}

// Draws nibble::Progress on stderr: on a terminal a bar with rate and ETA,
// redrawn at most 10 times a second and erased at the end; otherwise a
// plain line every 5 seconds (logs, CI).
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string what)
      : what_(std::move(what)),
        tty_(isatty(STDERR_FILENO) != 0),
        t0_(std::chrono::steady_clock::now()),
        last_(t0_) {}
  ~ProgressPrinter() { Finish(); }
  // Erases the bar (before the summary line is printed).
  void Finish() {
    if (tty_ && drawn_) std::fprintf(stderr, "\r%*s\r", 120, "");
    drawn_ = false;
  }
  ProgressPrinter(const ProgressPrinter&) = delete;
  ProgressPrinter& operator=(const ProgressPrinter&) = delete;

  void operator()(const nibble::Progress& p) {
    const auto now = std::chrono::steady_clock::now();
    const double since = std::chrono::duration<double>(now - last_).count();
    const bool done = p.tensors_done == p.tensors_total;
    if (done || since < (tty_ ? 0.1 : 5.0)) return;
    last_ = now;
    const double sec = std::chrono::duration<double>(now - t0_).count();
    const double frac = p.bytes_total > 0
                            ? static_cast<double>(p.bytes_done) / static_cast<double>(p.bytes_total)
                            : static_cast<double>(p.tensors_done) /
                                  static_cast<double>(std::max<size_t>(1, p.tensors_total));
    const double rate = sec > 0 ? static_cast<double>(p.bytes_done) / sec : 0.0;
    std::string eta = "?";
    if (frac > 0.0 && frac < 1.0) eta = HumanSeconds(sec * (1.0 - frac) / frac);
    const std::string amount =
        HumanBytes(p.bytes_done) +
        (p.bytes_total > 0 ? " of " + HumanBytes(p.bytes_total) : std::string());
    if (tty_) {
      constexpr int kWidth = 24;
      const int fill = static_cast<int>(frac * kWidth);
      std::fprintf(stderr, "\r%s [%s%s] %3.0f%% %zu/%zu tensors, %s, %s/s, ETA %s   ",
                   what_.c_str(), std::string(static_cast<size_t>(fill), '#').c_str(),
                   std::string(static_cast<size_t>(kWidth - fill), '.').c_str(), frac * 100,
                   p.tensors_done, p.tensors_total, amount.c_str(),
                   HumanBytes(static_cast<uint64_t>(rate)).c_str(), eta.c_str());
      drawn_ = true;
    } else {
      std::fprintf(stderr, "%s: %.0f%%, %zu/%zu tensors, %s, %s/s, ETA %s\n", what_.c_str(),
                   frac * 100, p.tensors_done, p.tensors_total, amount.c_str(),
                   HumanBytes(static_cast<uint64_t>(rate)).c_str(), eta.c_str());
    }
  }

 private:
  std::string what_;
  bool tty_;
  std::chrono::steady_clock::time_point t0_, last_;
  bool drawn_ = false;
};

int RunDequant(const std::string& in, const std::string& out, const std::string& dtype,
               nibble::DequantOptions options, bool quiet) {
  options.dtype = nibble::ParseOutputDType(dtype);
  ProgressPrinter printer("nibble dequant");
  if (!quiet) options.progress = [&printer](const nibble::Progress& p) { printer(p); };
  options.cancelled = StopRequested;
  CatchStopSignals();
  nibble::DequantReport r;
  const auto t0 = std::chrono::steady_clock::now();
  const nibble::Status st = nibble::DequantAnyCheckpoint(in, out, options, &r);
  printer.Finish();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& n : r.notes) std::cerr << "nibble dequant: note: " << n << "\n";
  if (!st.ok() && StopRequested()) return DieOfSignal("dequant", st.message());
  if (!st.ok()) {
    std::cerr << "nibble dequant: " << st.message() << "\n";
    return 1;
  }
  for (const std::string& s : r.skipped) std::cerr << "skipped (unsupported) " << s << "\n";
  if (!quiet) {
    std::cerr << "dequantized " << r.dequantized
              << (r.dtype == nibble::DType::kUndefined
                      ? std::string()
                      : std::string(" (to ") + nibble::DTypeName(r.dtype) + ")")
              << " and copied " << r.copied << " tensors, wrote " << HumanBytes(r.bytes) << " to "
              << out << " in " << HumanSeconds(sec) << "\n";
  }
  return 0;
}

// `nibble bench --weights`: one weight of a checkpoint as float32 [N, K].
bool LoadBenchWeight(const std::string& path, const std::string& regex,
                     nibble::BenchOptions::LoadedWeight* out, std::string* error) {
  auto ck = nibble::Checkpoint::Open(path);
  if (!ck.ok()) {
    *error = ck.status().message();
    return false;
  }
  std::regex re;
  try {
    re = std::regex(regex.empty() ? std::string(".") : regex);
  } catch (const std::regex_error& e) {
    *error = "--weights-tensor '" + regex + "' is not a valid regex";
    return false;
  }
  const nibble::CheckpointTensor* best = nullptr;
  int64_t best_n = 0;
  for (const auto& t : ck->tensors()) {
    const bool floaty = t.quantized || nibble::IsFloat16Or32(t.stored_dtype);
    if (!t.supported || !floaty || t.shape.size() < 2 || !std::regex_search(t.name, re)) continue;
    auto n = nibble::CheckedNumElements(t.shape, t.name);
    if (n.ok() && *n > best_n) best = &t, best_n = *n;
  }
  if (best == nullptr) {
    *error = "no 2-D float or supported quantized tensor" +
             (regex.empty() ? std::string() : " matching '" + regex + "'") + " in '" + path + "'";
    return false;
  }
  auto v = ck->LoadFloat(*best, 0);
  if (!v.ok()) {
    *error = v.status().message();
    return false;
  }
  out->name = best->name;
  // The bench layout of the tensor's own format.
  const std::string kind = best->kind;
  if (kind == "GPTQ")
    out->layout = best->detail.find("act") != std::string::npos ? "gptq-act" : "gptq";
  if (kind == "AWQ") out->layout = "awq";
  if (kind == "compressed-tensors") out->layout = "ct";
  if (kind == "bitsandbytes") out->layout = "bnb-nf4";
  if (kind == "FP8") out->layout = "fp8-block";
  if (kind == "MXFP4") out->layout = "gptoss-mxfp4";
  if (best->quantized && out->layout.empty()) {
    for (const std::string& l : nibble::BenchLayoutNames()) {
      if (l == kind) out->layout = l;  // a GGUF type ("q4_k")
    }
  }
  out->cols = best->shape.back();
  out->rows = best_n / std::max<int64_t>(1, out->cols);
  out->values = std::move(*v);
  return true;
}

int RunFold(const std::string& in, const std::string& out, nibble::FoldOptions options,
            bool quiet) {
  ProgressPrinter printer("nibble fold");
  if (!quiet) options.progress = [&printer](const nibble::Progress& p) { printer(p); };
  options.cancelled = StopRequested;
  CatchStopSignals();
  nibble::FoldReport r;
  const auto t0 = std::chrono::steady_clock::now();
  const nibble::Status st = nibble::FoldModel(in, out, options, &r);
  printer.Finish();
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const std::string& n : r.notes) std::cerr << "nibble fold: note: " << n << "\n";
  if (!st.ok() && StopRequested()) return DieOfSignal("fold");
  if (!st.ok()) {
    std::cerr << "nibble fold: " << st.message() << "\n";
    return 1;
  }
  if (!quiet) {
    if (!r.note.empty()) std::cerr << "nibble fold: note: " << r.note << "\n";
    std::cerr << "folded " << r.dequantize_nodes << " DequantizeLinear and " << r.matmulnbits_nodes
              << " MatMulNBits nodes, removed " << r.removed_initializers << " initializers, wrote "
              << HumanBytes(r.dequantized_bytes) << " of dequantized weights"
              << (r.external ? " (external data)" : "") << " in " << HumanSeconds(sec) << "\n";
  }
  return 0;
}

}  // namespace

int Main(int argc, char** argv) {
  const CLI::Validator kThreadRange = nibble::InRange(
      0, nibble::kMaxThreads,
      "must be 0 (all cores) or a count from 1 to " + std::to_string(nibble::kMaxThreads),
      "THREADS");
  // A file-size limit (ulimit -f) then makes write() fail with EFBIG, which
  // is reported like any other write error, instead of killing the process.
  std::signal(SIGXFSZ, SIG_IGN);
  CLI::App app{
      "nibble: quantized LLM weights back to float32 / float16 / bfloat16, exactly as each "
      "format's producer defines them.\n"
      "  nibble dequant ./Llama-3-8B-GPTQ/ ./Llama-3-8B-bf16/ --dtype bf16   # a model folder\n"
      "  nibble dequant model.Q4_K_M.gguf ./model-bf16/ --hf --dtype bf16     # GGUF -> HF folder\n"
      "Reads GPTQ, AWQ, compressed-tensors, bitsandbytes, GGUF and ONNX; the core operator is "
      "PMX / ONNX DequantizeLinear."};
  app.set_version_flag("--version", std::string("nibble ") + NIBBLE_VERSION);
  app.require_subcommand(1);

  auto* demo =
      app.add_subcommand("demo", "Quantize a built-in LLM-like weight to int4 and dequantize it");
  std::string demo_shape = "4096,4096";
  int64_t demo_group = 128;
  int demo_threads = 0;
  demo->add_option("--shape", demo_shape, "Logical weight shape N,K")->capture_default_str();
  demo->add_option("--group-size", demo_group, "Group size along K")
      ->capture_default_str()
      ->check(nibble::AtLeast(1, "must be a positive integer", "POSITIVE"));
  demo->add_option("--threads", demo_threads, "0 = all cores, 1 = this thread, n = n threads")
      ->capture_default_str()
      ->check(kThreadRange);

  auto* test = app.add_subcommand("test", "Run ONNX node-test directories through the library");
  std::vector<std::string> test_dirs;
  nibble::NodeTestOptions test_opts;
  test->add_option("dirs", test_dirs, "Test directories (or folders of them)")->required();
  test->add_option("--rtol", test_opts.rtol, "Relative tolerance (default: per output type)");
  test->add_option("--atol", test_opts.atol, "Absolute tolerance (default: per output type)");
  test->add_option("--threads", test_opts.threads, "Threads for the operator")->check(kThreadRange);

  auto* inspect = app.add_subcommand(
      "inspect",
      "List the quantized weights of an ONNX model, a GGUF file or a safetensors checkpoint");
  std::string inspect_path, inspect_format = "table";
  inspect->add_option("model", inspect_path, "MODEL.onnx, FILE.gguf, FILE.safetensors or a folder")
      ->required();
  nibble::CheckpointOptions inspect_ck;
  AddCheckpointOptions(inspect, &inspect_ck);
  inspect->add_option("--format", inspect_format, "table or json")
      ->capture_default_str()
      ->check(CLI::IsMember({"table", "json"}));

  auto* fold =
      app.add_subcommand("fold",
                         "Replace quantized weights (DequantizeLinear, opmx DequantizeLinear, "
                         "MatMulNBits) by dequantized float initializers");
  std::string fold_in, fold_out;
  nibble::FoldOptions fold_opts;
  bool fold_quiet = false;
  fold->add_option("input", fold_in, "IN.onnx")->required();
  fold->add_option("output", fold_out, "OUT.onnx")->required();
  fold->add_option("--threads", fold_opts.threads, "0 = all cores")->check(kThreadRange);
  fold->add_flag("--quiet", fold_quiet, "No progress or summary");
  fold->add_option("--external-data", fold_opts.external_name,
                   "Write tensors to an external data file (optional name; default "
                   "OUT.onnx.data; automatic above 2 GB)")
      ->expected(0, 1);

  auto* dequant = app.add_subcommand(
      "dequant",
      "Dequantize a Hugging Face checkpoint (GPTQ, AWQ, compressed-tensors, FP8, MXFP4, "
      "bitsandbytes; a folder or a .safetensors file) or a GGUF file. OUT.safetensors: one "
      "float safetensors file; any other OUT (Hugging Face input, or GGUF with --hf): a new "
      "model folder with shards, index, config.json (quantization_config removed) and the "
      "tokenizer files (from a GGUF: tokenizer.json rebuilt from its vocabulary). Quantized layers "
      "become '<module>.weight' [N, K]; float tensors follow "
      "--dtype. An interrupted conversion into a sharded folder keeps its finished shards: "
      "the same command resumes it");
  std::string dq_in, dq_out, dq_dtype;
  nibble::DequantOptions dq_opts;
  dq_opts.resumable = true;  // an interrupted sharded folder resumes on the next run
  bool dq_quiet = false;
  dequant
      ->add_option("input", dq_in, "checkpoint folder, FILE.safetensors, FILE.gguf or MODEL.onnx")
      ->required();
  dequant
      ->add_option("output", dq_out,
                   "OUT.safetensors, or a new (or empty) folder OUT/ for a model folder")
      ->required();
  dequant->add_flag(
      "--hf", dq_opts.hf,
      "GGUF (llama, mistral, Mixtral, qwen2, qwen3, phi3): write a Hugging Face style folder: "
      "transformers names, llama.cpp's Q/K row permutation undone, config.json, "
      "safetensors shards with an index");
  dequant
      ->add_option("--max-shard-size", dq_opts.max_shard_bytes,
                   "Model folders: largest shard, in bytes or with a unit as transformers and "
                   "llama.cpp write it (5GB, 500MB, 5G, 4GiB; default 5GB)")
      ->transform(nibble::ByteSizeOption("--max-shard-size"));
  dequant
      ->add_option("--dtype", dq_dtype,
                   "Output type of every float tensor: f32, f16 or bf16; auto (the default): "
                   "each format's own — the scales' type (bitsandbytes: the model's) for Hugging "
                   "Face checkpoints, f32 for GGUF, float copies keep theirs; the closing line "
                   "names the type written")
      ->transform(nibble::DTypeOption());
  dequant->add_option("--tensors", dq_opts.tensors,
                      "Only tensors whose input name (GGUF name, '<prefix>.qweight', ...) "
                      "matches this regex");
  dequant->add_option("--exclude", dq_opts.exclude,
                      "Leave out tensors whose input name matches this regex");
  dequant->add_flag("--skip-unsupported", dq_opts.skip_unsupported,
                    "Write every other tensor and list the ones nibble cannot dequantize "
                    "(without it, any such tensor fails the whole conversion)");
  AddCheckpointOptions(dequant, &dq_opts.open);
  dequant->add_option("--threads", dq_opts.threads, "0 = all cores")->check(kThreadRange);
  dequant->add_flag("--quiet", dq_quiet, "No progress or summary");

  auto* bench = app.add_subcommand("bench", "Group-size benchmark: speed and accuracy");
  nibble::BenchOptions bench_opts;
  nibble::AddBenchOptions(bench, &bench_opts);
  bench_opts.load_weights = LoadBenchWeight;

  // A first word that is not a command: say which one was meant.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> commands;
    for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
    if (std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
      const std::string near = nibble::Nearest(argv[1], commands);
      std::cerr << "nibble: '" << argv[1] << "' is not a command"
                << (near.empty() ? std::string() : "; did you mean '" + near + "'?")
                << "\nRun with --help for the commands.\n";
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // An option that is not one of the command's: name the nearest.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && argc > 1) {
      const CLI::App* sub = nullptr;
      for (const CLI::App* s : app.get_subcommands({})) {
        if (s->get_name() == argv[1]) sub = s;
      }
      if (sub != nullptr) {
        std::vector<std::string> names;
        for (const CLI::Option* o : sub->get_options({})) {
          for (const std::string& l : o->get_lnames()) names.push_back("--" + l);
        }
        for (int i = 2; i < argc; ++i) {
          std::string arg = argv[i];
          if (arg.rfind("--", 0) != 0) continue;
          arg = arg.substr(0, arg.find('='));
          if (std::find(names.begin(), names.end(), arg) != names.end()) continue;
          const std::string near = nibble::Nearest(arg, names);
          std::cerr << "nibble " << argv[1] << ": unknown option '" << arg << "'"
                    << (near.empty() ? std::string() : "; did you mean '" + near + "'?")
                    << "\nRun with --help for the options.\n";
          return 2;
        }
      }
    }
    // --help / --version: 0; any usage error: 2 (CLI11's own codes are
    // 100+, which scripts read as crashes).
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*demo) return RunDemo(demo_shape, demo_group, demo_threads);
  if (*test) {
    const auto sum = nibble::RunNodeTests(test_dirs, test_opts, std::cout);
    return sum.failed == 0 && sum.passed + sum.skipped > 0 ? 0 : 1;
  }
  if (*bench) {
    bench_opts.layouts_given = bench->count("--layout") > 0;
    return nibble::RunGroupSizeBench(bench_opts, std::cout, std::cerr);
  }
  if (*inspect) {
    const bool onnx =
        inspect_path.size() >= 5 && inspect_path.compare(inspect_path.size() - 5, 5, ".onnx") == 0;
    if (!onnx && nibble::Checkpoint::Recognizes(inspect_path)) {
      return RunInspectCheckpoint(inspect_path, inspect_format, inspect_ck);
    }
    if (!onnx && !nibble::IsDirectory(inspect_path) && !nibble::InspectModel(inspect_path).ok()) {
      // Not named .onnx and not an ONNX model either.
      // (A missing file, a FIFO, ...: the ONNX reader's message names it.)
      if (!nibble::ReadOnlyFile::Open(inspect_path).ok()) {
        return RunInspect(inspect_path, inspect_format);
      }
      std::cerr << "nibble inspect: '" << nibble::EscapeBytes(inspect_path)
                << "' is not a GGUF, safetensors or ONNX file (or a model folder)\n";
      return 1;
    }
    return RunInspect(inspect_path, inspect_format);
  }
  if (*dequant) return RunDequant(dq_in, dq_out, dq_dtype, dq_opts, dq_quiet);
  if (*fold) {
    fold_opts.external = fold->count("--external-data") > 0;
    return RunFold(fold_in, fold_out, fold_opts, fold_quiet);
  }
  return 2;
}

// Any exception escaping a command (the library reports errors as Status;
// this is the last line of defence) is a clear error, never an abort.
int main(int argc, char** argv) {
#ifdef __GLIBC__
  // Buffers of 1 MiB and more (tensors, their packed inputs) come straight
  // from mmap and go back to the system when freed. glibc's default raises
  // this threshold after the first large free, after which freed tensors
  // stay in a fragmenting heap and `fold`'s peak RSS grew with the number
  // of layers (measured: +15 MiB per 4096x4096 layer).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
#endif
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::cerr << "nibble: out of memory\n";
  } catch (const std::exception& e) {
    std::cerr << "nibble: internal error: " << e.what() << "\n";
  }
  return 1;
}
