#include "op/matmul.h"

#include <algorithm>
#include <atomic>
#include <new>
#include <string>
#include <vector>

#include "kernels/blas_gemm.h"
#include "kernels/convert.h"
#include "kernels/dequantize.h"
#include "kernels/matmul.h"
#include "kernels/out_types.h"

#ifdef NIBBLE_HAVE_OPENMP
#include <omp.h>
#endif

namespace nibble {

namespace {

// The float type of a view, or an error naming it.
Status FloatTypeOf(const std::string& who, const std::string& what, DType d, OutType* t) {
  if (!OutTypeOfDType(d, t)) {
    return Status::Error(who + ": " + what + " must be float32, float16 or bfloat16, not " +
                         DTypeName(d));
  }
  return Status::Ok();
}

// Bytes of `elements` values of float type t.
uint64_t FloatBytes(OutType t, int64_t elements) {
  return static_cast<uint64_t>(elements) * (t == OutType::kF32 ? 4u : 2u);
}

// One thread's buffers, kept for its next call: a runtime calls the matmul
// once per layer per token, and fresh 128 KiB+ buffers were fresh pages
// (page faults and zeroing) on every call. Grow-only; ReleaseMatMulScratch
// frees the calling thread's, thread exit frees them all.
struct Scratch {
  std::vector<float> tile, ytile, sums;
  std::vector<uint8_t> raw;
};
thread_local Scratch t_scratch;

// v with at least n elements (its contents are not kept meaningful).
template <class T>
T* Grow(std::vector<T>* v, size_t n) {
  if (v->size() < n) {
    v->clear();
    v->shrink_to_fit();
    v->resize(n);
  }
  return v->data();
}

// Whether the kernels fuse the dot of m (<= 8) rows of X (x, leading
// dimension ldx) with w's values (Plan::dot): asked on view row `row` (W's
// first), its first 256 values.
bool FusedDotProbe(const Dequantizer& w, int64_t row, const float* x, int64_t m, int64_t ldx) {
  const int64_t n = std::min<int64_t>(256, w.cols());
  alignas(64) float sums[8 * 16] = {}, values[256];
  bool done = false;
  const Plan::Dot dot{x, m, ldx, sums, &done};
  Plan p = w.plan();
  p.dot = &dot;
  DequantizeTile(p, row, row + 1, 0, n, values, n);
  return done;
}

// Whether the kernels decode the [K, N] view by columns (Plan::Dot::columns;
// asked with one row of X, the answer the same for up to 8): asked on its
// first 16 x 16 (view rows from `row`).
bool ColumnsDotProbe(const Dequantizer& w, int64_t row, const float* x, int64_t k, int64_t n) {
  alignas(64) float sums[16 * 16] = {};
  const Plan::Dot dot{x, 1, k, sums, nullptr, true};
  Plan p = w.plan();
  p.dot = &dot;
  return DequantizeDot(p, row, row + std::min<int64_t>(16, k), 0, std::min<int64_t>(16, n));
}

}  // namespace

void ReleaseMatMulScratch() { t_scratch = Scratch(); }

namespace {

// Where W lies in the Dequantizer's 2-D view.
struct MatMulGeometry {
  int64_t n = 0, k = 0;
  // W's output features are view rows (else view columns: tiles are
  // transposed in cache).
  bool rows_are_features = true;
  // The first view row of W (an expert's own rows of a 3-D weight).
  int64_t row_base = 0;
  Shape y;
};

StatusOr<MatMulGeometry> Geometry(const Dequantizer& w, const Shape& x,
                                  const MatMulOptions& options) {
  const std::string who = "matmul";
  const Shape& out = w.output().shape;
  MatMulGeometry g;
  // W's 2-D output matrix [A, B], and whether the view holds it as is.
  int64_t a = 0, b = 0;
  bool view_is_output = !w.output_transposed();
  if (out.size() == 2) {
    if (options.expert != -1) {
      return Status::Error(who + ": expert " + std::to_string(options.expert) +
                           " of a 2-D weight " + ShapeToString(out) +
                           " (an expert is picked from a 3-D weight)");
    }
    a = out[0], b = out[1];
  } else if (out.size() == 3) {
    const int64_t experts = out[0];
    a = out[1], b = out[2];
    if (options.expert < 0 || options.expert >= experts) {
      return Status::Error(who + ": the weight " + ShapeToString(out) + " holds " +
                           std::to_string(experts) + " experts: pick one, 0 <= expert < " +
                           std::to_string(experts) +
                           (options.expert == -1 ? std::string(" (none given)")
                                                 : ", not " + std::to_string(options.expert)));
    }
    // Expert e is view rows [e R, (e + 1) R): its matrix as is (GGUF's
    // [E, N, K]: view [E N, K]) or transposed per expert (gpt-oss: view
    // [E R, K], output [E, K, R]).
    const bool batched = w.output_transposed() && w.transpose_batches() == experts;
    const int64_t r = view_is_output ? a : b, c = view_is_output ? b : a;
    if ((w.output_transposed() && !batched) || w.rows() != experts * r || w.cols() != c) {
      return Status::Error(who + ": the 3-D weight " + ShapeToString(out) +
                           " is not stored expert by expert (view " + std::to_string(w.rows()) +
                           " x " + std::to_string(w.cols()) + ")");
    }
    g.row_base = options.expert * r;
  } else {
    return Status::Error(who + ": the weight must be 2-D (or 3-D experts), not " +
                         ShapeToString(out));
  }
  const bool in_out = options.weight == MatMulOptions::Weight::kInOut;
  g.k = in_out ? a : b;
  g.n = in_out ? b : a;
  g.rows_are_features = view_is_output != in_out;
  if (x.empty() || x.back() != g.k) {
    return Status::Error(who + ": X " + ShapeToString(x) +
                         " must end in K = " + std::to_string(g.k) + " (the weight " +
                         ShapeToString(out) + (out.size() == 3 ? "'s experts are " : " is ") +
                         (in_out ? "[K, N]" : "[N, K]") + ")");
  }
  g.y.assign(x.begin(), x.end() - 1);
  g.y.push_back(g.n);
  auto elements = CheckedNumElements(g.y, "Y");
  if (!elements.ok()) return elements.status();
  return g;
}

}  // namespace

StatusOr<Shape> MatMulOutputShape(const Dequantizer& w, const Shape& x,
                                  const MatMulOptions& options) {
  auto g = Geometry(w, x, options);
  if (!g.ok()) return g.status();
  return g->y;
}

Status MatMul(const Dequantizer& w, const TensorView& x, const MutableTensorView& y,
              const TensorView* bias, const MatMulOptions& options) try {
  const std::string who = "matmul";
  NIBBLE_RETURN_IF_ERROR(CheckThreads(options.threads, who + " threads"));
  auto geometry = Geometry(w, x.shape, options);
  if (!geometry.ok()) return geometry.status();
  const int64_t n = geometry->n, k = geometry->k, row_base = geometry->row_base;
  const Shape* want_y = &geometry->y;
  const bool rows_are_features = geometry->rows_are_features;

  OutType xt, yt, wt = OutType::kF32, bt = OutType::kF32;
  NIBBLE_RETURN_IF_ERROR(FloatTypeOf(who, "X", x.dtype, &xt));
  NIBBLE_RETURN_IF_ERROR(FloatTypeOf(who, "Y", y.dtype, &yt));
  NIBBLE_RETURN_IF_ERROR(FloatTypeOf(who, "the weight's output type", w.output().dtype, &wt));
  if (yt != OutType::kF32 && yt != xt) {
    return Status::Error(who + ": Y must be float32 or X's type (" + DTypeName(x.dtype) +
                         "), not " + DTypeName(y.dtype));
  }
  auto xm = CheckedNumElements(x.shape, "X");
  if (!xm.ok()) return xm.status();
  const int64_t m = k == 0 ? 0 : *xm / k;
  if (y.shape != *want_y) {
    return Status::Error(who + ": Y is " + ShapeToString(y.shape) + ", X " +
                         ShapeToString(x.shape) + " times the weight gives " +
                         ShapeToString(*want_y));
  }
  if (x.size_bytes < FloatBytes(xt, m * k) || (x.data == nullptr && m * k > 0)) {
    return Status::Error(who + ": X holds " + std::to_string(x.size_bytes) + " bytes, " +
                         ShapeToString(x.shape) + " needs " +
                         std::to_string(FloatBytes(xt, m * k)));
  }
  if (y.size_bytes < FloatBytes(yt, m * n) || (y.data == nullptr && m * n > 0)) {
    return Status::Error(who + ": Y holds " + std::to_string(y.size_bytes) + " bytes, " +
                         ShapeToString(y.shape) + " needs " +
                         std::to_string(FloatBytes(yt, m * n)));
  }
  if (bias != nullptr) {
    NIBBLE_RETURN_IF_ERROR(FloatTypeOf(who, "bias", bias->dtype, &bt));
    auto bn = CheckedNumElements(bias->shape, "bias");
    if (!bn.ok()) return bn.status();
    if (*bn != n || bias->shape.size() != 1 || bias->size_bytes < FloatBytes(bt, n) ||
        bias->data == nullptr) {
      return Status::Error(who + ": bias " + ShapeToString(bias->shape) + " must be [N] = [" +
                           std::to_string(n) + "] with its bytes");
    }
  }
  const auto* yb = static_cast<const uint8_t*>(y.data);
  const uint64_t y_bytes = FloatBytes(yt, m * n);
  for (const TensorView* in : {&x, bias}) {
    if (in == nullptr || y_bytes == 0) continue;
    const auto* ib = static_cast<const uint8_t*>(in->data);
    if (yb < ib + in->size_bytes && ib < yb + y_bytes) {
      return Status::Error(who + ": Y overlaps " + (in == &x ? "X" : "bias"));
    }
  }
  const bool want_blas = options.gemm == MatMulOptions::Gemm::kBlas;
  if (want_blas && !BlasAvailable()) {
    return Status::Error(who +
                         ": gemm=blas, but this nibble was built without its BLAS (OpenBLAS's "
                         "OpenMP build: Debian's libopenblas-openmp-dev, cmake -DNIBBLE_BLAS=ON)");
  }
  if (m == 0 || n == 0) return Status::Ok();
  // The BLAS path (MatMulOptions::Gemm::kBlas) at M >= kBlasMinRows, in
  // the BLAS's 32-bit dimensions (X goes in blocks of kBlasMaxRowsPerCall
  // rows).
  constexpr int64_t kBlasMaxRowsPerCall = int64_t{1} << 20;
  const bool blas = want_blas && m >= kBlasMinRows && n <= kBlasMaxDim && k <= kBlasMaxDim;

  // X and the bias as float32 (exact).
  std::vector<float> x32, b32;
  const float* xf = static_cast<const float*>(x.data);
  if (xt != OutType::kF32) {
    x32.resize(static_cast<size_t>(m * k));
    ConvertFloats(xt, x.data, OutType::kF32, x32.data(), m * k);
    xf = x32.data();
  }
  if (bias != nullptr) {
    b32.resize(static_cast<size_t>(n));
    ConvertFloats(bt, bias->data, OutType::kF32, b32.data(), n);
  }

  // Blocks of output features whose float32 weight rows fit a tile of
  // 512 KiB up to M = 4, 256 KiB above (X is read once per tile). Measured
  // on the VM (`nibble bench --matmul`, tiles of 128 / 256 / 512 KiB
  // interleaved, 4096 x 4096 and 4096 x 14336): at M = 1 and 4, 512 KiB
  // ran AWQ 1.7-2.4x and GPTQ up to 1.6x faster than 128 KiB (their column
  // tiles decode more rows per pass) and the row layouts 1.0-1.2x; at M =
  // 16 the row layouts were no faster than with 256 KiB; 1 MiB tiles
  // crowded the 1 MiB L2 (M = 16 1.7x slower).
  // Long rows with several rows of X (fewer than 8 rows would fit 256
  // KiB): tiles of kChunkRows rows x a chunk of K, the partial sums kept
  // between chunks (AccumulateDotRows; the same bits), X in blocks of at
  // most kChunkM rows so that the sums stay in cache: X is then streamed
  // once per kChunkRows features instead of once per 2-4 (4096 x 14336 at
  // M = 512 took 2-3x the arithmetic). Measured: chunks of 2048 below M =
  // 64 and 4096 from it (GPTQ at M = 4-16 1.2x slower with 4096, M = 512
  // 1.25x slower with 2048); chunking from 16 rows per tile made K = 4096,
  // M = 4-16 of Q4_0 1.2x slower.
  // GPTQ / AWQ [N, K] columns (kGptqColumns / kAwqColumns) take the chunks
  // from M = 1 too: their tiles decode blocks of 16 rows from words that
  // span K, and a 512 KiB tile of a long row holds fewer (K = 14336: 9).
  // Measured (VM, one thread, 4096 x 14336, M = 1, interleaved): AWQ 150-177
  // -> 22 ms, GPTQ 23.5-24 -> 10.3-11.1, GPTQ act-order 33-41 -> 13; the
  // row layouts were slower chunked at M = 1 (Q4_0 6.8 -> 9.3, PMX 6.8-8.9
  // -> 11 ms), and chunking the columns at K = 4096 gained nothing (AWQ
  // 4.0 -> 5.4-6.0 ms).
  // AWQ (up to M = 128) at every K: tiles of 128 rows x a chunk of K. Its
  // column kernel reads whole 64-byte lines of words, 8 rows a word, in
  // bands of up to 256 rows: a 16-row tile used 8 bytes of each line, a
  // 32-row one 16. Measured (one thread): 4096 x 4096 M = 1 / 4 / 16 3.8-4.2
  // / 4.3-4.8 / 8.7-9.4 -> 2.4 / 3.1 / 7.3-7.5 ms, 4096 x 14336 M = 1 / 4 / 16
  // / 128 22 / 24-26 / 38-41 / 175 -> 9.7 / 11.3-12.3 / 26-27 / 150-154;
  // 64 rows were slower at M = 1 - 4, 256 no faster; at M = 512 (sums of
  // 256 rows of X x 128 features: 2 MiB) not better. GPTQ's 16-row tiles
  // gave as much as 64-row ones.
  // W's rows as view columns (an ONNX MatMul's [K, N] B from a
  // DequantizeLinear, `weight="in_out"` on an [N, K] output, act-order GPTQ
  // without AVX-512): tiles of `across_rows` features x a chunk of K kept
  // as the view holds them, [chunk, features] (rows padded by a line, so
  // that a column strip spreads over the L1's sets), multiplied by
  // AccumulateDotCols (per element of K, the partial sums of a vector of
  // features: the same order, no transpose). Features 512 / 256 / 128 up
  // to M = 2 / 4 / beyond (the sums of a row of X: 32 KiB at most), the
  // tile 256 KiB. Measured (VM, one thread, 4096 x 4096 [K, N], `nibble
  // bench --matmul 1,4,16,64,128,512 --matmul-weight in_out`, interleaved;
  // bench/results/2026-11-28-matmul-cols/): against the tiles of 128 x 64
  // transposed in cache (scalar), ONNX int4 axis-0 blocks M = 1 / 16 / 128
  // / 512 13.8-15.4 / 27.7-28.3 / 134-138 / 547-599 -> 4.6-4.8 / 14.1-14.2
  // / 88-91 / 441-473 ms; without the padding M = 16 26 ms against 15;
  // tiles 128 x 512 / 1024 x 128 / 256 x 256 within 1.3x of the chosen ones
  // at every M.
  // W's rows as view columns at M <= 8: the kernels' dot by columns where
  // they have one (ONNX int4 / uint4 [K, N] blocked along K: kernels/
  // dequantize_columns_dot.cc ColumnsDot, all the rows of X in one pass), asked per block of
  // columns_rows features over the whole of K (DequantizeDot); a block it declines takes the tiles
  // below. Measured (Intel Xeon guest, 4096 x 4096 / 4096 x 14336, one thread, 2 rounds): 512
  // features x 128 of K per call 3.0-3.4 / 10.4-10.9 ms, 256 x 512 2.1-2.2 / 8.6-10.8, 1024 x
  // 512 2.2-2.3 / 7.1-7.5, 256 x 4096 2.0-2.4 / 6.7-6.8. The threads the blocks below go to
  // (OpenMP's default where 0).
  int pool = options.threads;
#ifdef NIBBLE_HAVE_OPENMP
  if (pool == 0) pool = omp_get_max_threads();
#endif
  pool = std::max(pool, 1);
  // Blocks of the dot by columns (below): 512 rows where that leaves each
  // thread 4 or more, else 256. Each block reads a slice of every page of
  // its weight (AWQ: of every row of K), so 512 halves the page walks:
  // measured (Intel Xeon guest, one thread, weight flushed, 4096 x 4096 /
  // 14336, 2 rounds each way; bench/results/2026-12-07-columns-rows-of-x/
  // block512-*.jsonl) M = 1 AWQ 1.13-1.21x, ONNX [K, N] 1.08-1.24x, the
  // others 0.92-1.10x.
  const int64_t columns_rows = n >= 512 * 4 * pool ? 512 : 256;
  const bool across_fused = !blas && !rows_are_features && m <= 8 && wt == OutType::kF32 &&
                            !w.plan().Staged() && ColumnsDotProbe(w, row_base, xf, k, n);
  const int64_t across_rows = across_fused ? columns_rows : m <= 2 ? 512 : m <= 4 ? 256 : 128;
  const int64_t across_chunk = (int64_t{64} << 10) / across_rows;
  constexpr int64_t kChunkRows = 16, kChunkM = 256;
  const int64_t chunk_tile = m >= 64 ? int64_t{256} << 10 : int64_t{128} << 10;
  const int64_t tile_bytes = m <= 4 ? int64_t{512} << 10 : int64_t{256} << 10;
  const Layout layout = w.plan().layout;
  const bool columns = layout == Layout::kGptqColumns || layout == Layout::kAwqColumns;
  const bool awq = layout == Layout::kAwqColumns && m <= 128;
  const bool across = !rows_are_features;
  // Long rows (K > 8192) of the row layouts (no column words, no group
  // map) up to M = 4, on Intel: tiles of 4 rows x 1024 of K (16 KiB: the
  // L1) instead of a 512 KiB tile of 9 whole rows. Measured (Intel Xeon
  // guest, one thread, 4096 x 14336, interleaved, 3 rounds;
  // bench/results/2026-11-28-matmul-cols/l1-tiles-intel*.jsonl): M = 1
  // q4_0 10.5-12.4 -> 7.5-8.4 ms, pmx-q1 13.2-15.6 -> 9.9-12.4, q4_k
  // 12.0-14.2 -> 8.4-9.6, ct 9.3-13.2 -> 6.7-8.0, onnx-b1 9.4-12.5 ->
  // 6.8-9.6, q6_k 11.4-17.4 -> 8.4-13.9, fp8-block 14.7-17.9 -> 13.3-14.9;
  // M = 4 1.0-1.4x; at K = 4096 within the noise; GPTQ / AWQ / act-order
  // 1.4-9x slower (not taken). The AMD EPYC guest measured small tiles
  // slower (16 x 2048 at M = 1: Q4_0 4096 x 14336 6.8 -> 9.3 ms).
  // Up to 8 rows of X times the weight's own float32 values: the kernels' fused
  // dot (kernels/plan.h Plan::dot) where they have one — the values are
  // decoded in registers and never stored (AVX-512, 4-bit codes looked up
  // in a group's table: PMX / ONNX / MatMulNBits int4, compressed-tensors,
  // bitsandbytes, GGUF Q4_0 / Q4_1 / Q4_K / IQ4_NL / IQ4_XS / MXFP4; whole
  // byte / 16-bit codes (int8, FP8) by arithmetic; GPTQ /
  // AWQ [N, K] words, act-order too, by columns of 16 rows, up to 8 rows
  // of X in one pass (kernels/dequantize_columns_dot.cc ColumnsDot); AVX2: the row layouts'
  // 4-bit and whole byte / 16-bit codes by arithmetic; FP8 up to M = 4; the
  // columns as on AVX-512, 5-8 rows of X in two passes (act-order rows up
  // to M = 4); rows whose K is a multiple of 32). Asked on the first row's first 256 values; a tile
  // the kernels decline later is written and multiplied as below. Tiles of 64 rows (the columns:
  // columns_rows, ColumnsDot's blocks) x the whole of K (the kernels fetch ahead while they run; at
  // 4096 x 14336, M = 1 / 4, whole rows measured 1.0-1.1x the speed of chunks of 4096,
  // `bench/results/2026-11-28-dot-order/`).
  // Measured (Intel Xeon guest, one thread, 4096 x 4096, M = 1): see
  // docs/embedding.md.
  // 5 - 8 rows of X: one call, the kernel taking them in passes of four
  // (AVX-512 arithmetic: one of eight), each decoding the rows again (from
  // L1), the same bits (by columns: one pass). Measured (Intel Xeon guest,
  // one thread, 4096 x 4096, pmx-q1 / q4_0 / q4_k / ct / nf4): see
  // bench/results/2026-12-01-blas-prefill/fused-8.txt; since in one call:
  // bench/results/2026-12-07-arith-rows-of-x/.
  constexpr int64_t kFusedMaxRows = 8;
  const bool fused = !blas && m <= kFusedMaxRows && !across && wt == OutType::kF32 &&
                     !w.plan().Staged() && k % 32 == 0 &&
                     FusedDotProbe(w, row_base, xf, std::min(m, kFusedMaxRows), k);
  const bool l1_rows = !blas && !fused && !across && !columns && w.plan().axis_group == nullptr &&
                       m <= 4 && k > 8192 && CpuIsIntel();
  // The word layouts and group maps decode by columns (DequantizeDot:
  // the dot or nothing) in blocks of columns_rows over the whole of K; a
  // block it declines takes tiles of those rows x 256 of K.
  const bool columns_fused = fused && (columns || w.plan().axis_group != nullptr);
  const int64_t columns_chunk = 256;
  const int64_t chunk_rows = fused     ? (columns_fused ? columns_rows : 64)
                             : l1_rows ? 4
                             : across  ? across_rows
                             : awq     ? 128
                                       : kChunkRows;
  const bool chunked = !blas && (fused || l1_rows || across || awq ||
                                 ((m >= 2 || columns) && k * 4 * 8 > (int64_t{256} << 10)));
  const int64_t block = blas ? kBlasRows
                        : chunked
                            ? chunk_rows
                            : std::clamp<int64_t>(tile_bytes / std::max<int64_t>(1, k * 4), 1, 256);
  const int64_t chunk = blas      ? std::min(k, kBlasChunk)
                        : fused   ? k
                        : l1_rows ? 1024
                        : across  ? (across_fused ? k : across_chunk)
                        : chunked
                            ? std::max<int64_t>(256, chunk_tile / (4 * chunk_rows) / 256 * 256)
                            : k;
  const int64_t m_block = fused || across_fused ? std::min(m, kFusedMaxRows)
                          : chunked             ? std::min(m, kChunkM)
                                                : m;
  const int64_t blocks = (n + block - 1) / block;
  // Across: the tile's rows padded by a line (16 floats).
  const int64_t tile_ld = across ? block + 16 : chunk;
  const size_t tile_elems = static_cast<size_t>(across ? tile_ld * (blas ? chunk : across_chunk)
                                                : columns_fused ? block * columns_chunk
                                                                : block * chunk);
  const bool y_f32 = yt == OutType::kF32;
  Status failed = Status::Ok();
  // Set once options.cancelled says stop (asked by the calling thread,
  // OpenMP's thread 0, before each of its tiles): the blocks not begun are
  // skipped.
  std::atomic<bool> stop{false};
  int threads = options.threads;
  (void)threads;
#ifdef NIBBLE_HAVE_OPENMP
  if (threads == 0) threads = omp_get_max_threads();
  threads = static_cast<int>(std::min<int64_t>(threads, blocks));
#pragma omp parallel num_threads(threads)
#endif
  {
    // Per thread: the float32 tile [block, chunk] (across: [chunk, block
    // + 16]); the raw tile when the weight is not float32; Y's block when Y is not
    // float32 or has a bias; the partial sums when chunked.
    float *tile = nullptr, *ytile = nullptr, *sums = nullptr;
    uint8_t* raw = nullptr;
    bool ok = true;
    try {
      Scratch& s = t_scratch;
      tile = Grow(&s.tile, tile_elems);
      if (wt != OutType::kF32) {
        raw = Grow(&s.raw, static_cast<size_t>(FloatBytes(wt, block * chunk)));
      }
      if (!y_f32 || bias != nullptr) ytile = Grow(&s.ytile, static_cast<size_t>(m * block));
      if (chunked) sums = Grow(&s.sums, static_cast<size_t>(m_block * block * kDotLanes));
    } catch (const std::bad_alloc&) {
      ok = false;
    }
    // W's rows [n0, n0 + nb), columns [c0, c0 + cw) as float32 at tile
    // (leading dimension cw; across: transposed, leading dimension tile_ld).
    auto make_tile = [&](int64_t n0, int64_t nb, int64_t c0, int64_t cw) -> Status {
      if (rows_are_features) {
        void* dst = wt == OutType::kF32 ? static_cast<void*>(tile) : raw;
        NIBBLE_RETURN_IF_ERROR(w.RunTile(row_base + n0, row_base + n0 + nb, c0, c0 + cw, dst, cw));
        if (wt != OutType::kF32) ConvertFloats(wt, raw, OutType::kF32, tile, nb * cw);
        return Status::Ok();
      }
      // The view is [K, N]: its columns n0.. are W's rows, kept as the
      // view holds them ([cw, nb] at tile, leading dimension tile_ld).
      if (wt == OutType::kF32) {
        return w.RunTile(row_base + c0, row_base + c0 + cw, n0, n0 + nb, tile, tile_ld);
      }
      NIBBLE_RETURN_IF_ERROR(w.RunTile(row_base + c0, row_base + c0 + cw, n0, n0 + nb, raw, nb));
      for (int64_t r = 0; r < cw; ++r) {
        ConvertFloats(wt, raw + FloatBytes(wt, r * nb), OutType::kF32, tile + r * tile_ld, nb);
      }
      return Status::Ok();
    };
    // W's tile [n0, n0 + nb) x [t0, t0 + tw) (make_tile) multiplied into
    // the partial sums of X's rows [i0, i0 + mi).
    auto tile_dot = [&](int64_t n0, int64_t nb, int64_t i0, int64_t mi, int64_t t0,
                        int64_t tw) -> Status {
      NIBBLE_RETURN_IF_ERROR(make_tile(n0, nb, t0, tw));
      if (across) {
        AccumulateDotCols(xf + i0 * k + t0, mi, k, tile, nb, tile_ld, tw, sums);
      } else {
        AccumulateDotRows(xf + i0 * k + t0, mi, k, tile, nb, tw, tw, sums);
      }
      return Status::Ok();
    };
#ifdef NIBBLE_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t b = 0; b < blocks; ++b) {
      if (!ok || stop.load(std::memory_order_relaxed)) continue;
#ifdef NIBBLE_HAVE_OPENMP
      const bool caller = omp_get_thread_num() == 0;
#else
      const bool caller = true;
#endif
      if (caller && !CheckCancelled(options.cancelled).ok()) {
        stop.store(true, std::memory_order_relaxed);
        continue;
      }
      const int64_t n0 = b * block, nb = std::min(block, n - n0);
      // Y's block: straight into Y (float32, no bias), else into ytile.
      float* yb = y_f32 && bias == nullptr ? static_cast<float*>(y.data) + n0 : ytile;
      const int64_t ldy = y_f32 && bias == nullptr ? n : nb;
      Status st;
      if (blas) {
        // W's tiles [nb, chunk] (across: [chunk, nb]) in order of K, each
        // multiplied into Y's block by the BLAS (the first one sets it).
        for (int64_t c0 = 0; c0 < k && st.ok(); c0 += chunk) {
          const int64_t cw = std::min(chunk, k - c0);
          st = make_tile(n0, nb, c0, cw);
          for (int64_t i0 = 0; i0 < m && st.ok(); i0 += kBlasMaxRowsPerCall) {
            BlasGemm(xf + i0 * k + c0, std::min(kBlasMaxRowsPerCall, m - i0), k, tile,
                     rows_are_features, rows_are_features ? cw : tile_ld, nb, cw, c0 > 0,
                     yb + i0 * ldy, ldy);
          }
        }
      } else if (!chunked) {
        st = make_tile(n0, nb, 0, k);
        if (st.ok()) DotRows(xf, m, k, tile, nb, k, k, yb, ldy);
      } else {
        for (int64_t i0 = 0; i0 < m && st.ok(); i0 += m_block) {
          const int64_t mi = std::min(m_block, m - i0);
          std::fill(sums, sums + mi * nb * kDotLanes, 0.0f);
          for (int64_t c0 = 0; c0 < k && st.ok(); c0 += chunk) {
            const int64_t cw = std::min(chunk, k - c0);
            if (columns_fused || across_fused) {
              // (up to 8 rows of X, float32 values, the whole of K:
              // decoded by columns without a tile where a kernel can,
              // DequantizeDot; else by tiles)
              const Plan::Dot dot{xf + i0 * k + c0, mi, k, sums, nullptr, across};
              Plan p = w.plan();
              p.dot = &dot;
              if (across ? DequantizeDot(p, row_base + c0, row_base + c0 + cw, n0, n0 + nb)
                         : DequantizeDot(p, row_base + n0, row_base + n0 + nb, c0, c0 + cw)) {
                continue;
              }
              const int64_t step = across ? across_chunk : columns_chunk;
              for (int64_t t0 = c0; t0 < c0 + cw && st.ok(); t0 += step) {
                st = tile_dot(n0, nb, i0, mi, t0, std::min(step, c0 + cw - t0));
              }
              continue;
            }
            if (fused) {
              // (fused: blocks of at most kFusedMaxRows rows of X, rows are
              // features, float32 values)
              bool done = false;
              const float* xi = xf + i0 * k + c0;
              const Plan::Dot dot{xi, mi, k, sums, &done};
              Plan p = w.plan();
              p.dot = &dot;
              DequantizeTile(p, row_base + n0, row_base + n0 + nb, c0, c0 + cw, tile, cw);
              if (!done) AccumulateDotRows(xi, mi, k, tile, nb, cw, cw, sums);
              continue;
            }
            st = tile_dot(n0, nb, i0, mi, c0, cw);
          }
          if (st.ok()) {
            if (across) {
              FinishDotCols(sums, mi, nb, yb + i0 * ldy, ldy);
            } else {
              FinishDotRows(sums, mi, nb, yb + i0 * ldy, ldy);
            }
          }
        }
      }
      if (!st.ok()) {
#ifdef NIBBLE_HAVE_OPENMP
#pragma omp critical(nibble_matmul_error)
#endif
        failed = st;
        continue;
      }
      if (yb != ytile) continue;
      for (int64_t i = 0; i < m; ++i) {
        float* row = ytile + i * nb;
        if (bias != nullptr) {
          for (int64_t j = 0; j < nb; ++j) row[j] += b32[static_cast<size_t>(n0 + j)];
        }
        ConvertFloats(OutType::kF32, row, yt,
                      static_cast<uint8_t*>(y.data) + FloatBytes(yt, i * n + n0), nb);
      }
    }
    if (!ok) {
#ifdef NIBBLE_HAVE_OPENMP
#pragma omp critical(nibble_matmul_error)
#endif
      failed = OutOfMemoryError(who);
    }
  }
  if (failed.ok() && stop.load()) return Status::Error(who + ": " + kInterrupted);
  return failed;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("matmul");
}

}  // namespace nibble
