#include "op/dequantizer.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>
#include <numeric>
#include <vector>

#include "kernels/dequantize.h"
#include "kernels/transpose.h"
#include "op/lowering.h"

#if NIBBLE_HAVE_OPENMP
#include <omp.h>
#endif
#ifdef __linux__
#include <sys/mman.h>
#endif

namespace nibble {

namespace {
// Each thread of a parallel region gets at least this many output elements
// (tens of microseconds of work), so a small tensor runs on the calling
// thread alone: an OpenMP region costs more than that to start, and after
// it ends its worker threads spin-wait (libgomp's default) — on a 16-core
// machine a small file's conversion burned 0.45 s of CPU that way.
constexpr int64_t kMinElementsPerThread = int64_t{1} << 18;

// The threads worth using for `elements` output elements, of `t`.
int64_t ThreadsFor(int64_t elements, int64_t t) {
  return std::max<int64_t>(1, std::min<int64_t>(t, elements / kMinElementsPerThread));
}
// Outputs of at least this many bytes are written with non-temporal stores
// (see README "Stores" for the measurement behind the threshold).
constexpr int64_t kMinBytesForStreaming = int64_t{4} << 20;

int ResolveThreads(int threads) {
#if NIBBLE_HAVE_OPENMP
  if (threads <= 0) return std::clamp(omp_get_max_threads(), 1, kMaxThreads);
  return threads;
#else
  (void)threads;
  return 1;
#endif
}
}  // namespace

#ifdef __linux__
namespace {
// A parameter block of at least kPopulateBytes is one anonymous mapping:
// a header page that records the mapping's size, then the data (page
// aligned). The size lets a block be reused for a smaller request and
// still be unmapped whole.
constexpr size_t kBlockHeader = 4096;

size_t MappedSize(void* data) {
  size_t mapped;
  std::memcpy(&mapped, static_cast<char*>(data) - kBlockHeader, sizeof(mapped));
  return mapped;
}

void UnmapBlock(void* data) { munmap(static_cast<char*>(data) - kBlockHeader, MappedSize(data)); }

// Freed parameter blocks kept by one thread for its next preparations (see
// PopulatedAllocator in dequantizer.h): at most kMaxBlocks blocks and
// kMaxBytes mapped bytes; a block is reused only for a request of at least
// half its size; the oldest block is unmapped first. Blocks go back to the
// system when the thread exits or calls ReleaseCachedParameterBlocks().
// Trivially destructible, so that a block freed during the thread's exit
// after the cache was emptied (a thread_local or static vector destroyed
// late) is still safe to hand to Put: it is unmapped, not kept.
class ParamBlockCache {
 public:
  static constexpr int kMaxBlocks = 8;
  static constexpr size_t kMaxBytes = size_t{32} << 20;

  // The data of a cached block whose mapping holds `mapped` bytes or more
  // and at most 2 * mapped (the smallest such), or nullptr.
  void* Take(size_t mapped) {
    int best = -1;
    for (int i = 0; i < count_; ++i) {
      const size_t m = MappedSize(blocks_[i]);
      if (m >= mapped && m / 2 <= mapped && (best < 0 || m < MappedSize(blocks_[best]))) best = i;
    }
    return best < 0 ? nullptr : RemoveAt(best);
  }

  // Keeps `data` for reuse, unmapping the oldest blocks to stay within
  // the limits (or `data` itself when it is larger than kMaxBytes).
  void Put(void* data);

  void Release() {
    for (int i = 0; i < count_; ++i) UnmapBlock(blocks_[i]);
    count_ = 0;
    total_ = 0;
  }
  void set_exited() { exited_ = true; }

 private:
  // Takes block i out of the cache (the older blocks keep their order).
  void* RemoveAt(int i) {
    void* data = blocks_[i];
    total_ -= MappedSize(data);
    for (; i + 1 < count_; ++i) blocks_[i] = blocks_[i + 1];
    --count_;
    return data;
  }

  void* blocks_[kMaxBlocks];
  int count_;
  size_t total_;  // mapped bytes of the cached blocks
  bool exited_;   // the thread is exiting: keep nothing
};

// Zero-initialized per thread; Guard empties it when the thread exits.
thread_local ParamBlockCache t_param_blocks;
struct ParamBlockCacheGuard {
  bool armed = false;
  ~ParamBlockCacheGuard() {
    t_param_blocks.Release();
    t_param_blocks.set_exited();
  }
};
thread_local ParamBlockCacheGuard t_param_blocks_guard;

void ParamBlockCache::Put(void* data) {
  const size_t m = MappedSize(data);
  if (exited_ || m > kMaxBytes) {
    UnmapBlock(data);
    return;
  }
  while (count_ == kMaxBlocks || total_ + m > kMaxBytes) UnmapBlock(RemoveAt(0));
  t_param_blocks_guard.armed = true;  // registers the exit clean-up
  blocks_[count_++] = data;
  total_ += m;
}
}  // namespace
#endif

void ReleaseCachedParameterBlocks() {
#ifdef __linux__
  t_param_blocks.Release();
#endif
}

template <class T>
void* PopulatedAllocator<T>::AllocatePopulated(size_t bytes) {
#ifdef __linux__
  if (bytes >= kPopulateBytes) {
    if (bytes > std::numeric_limits<size_t>::max() / 2) throw std::bad_alloc();
    const size_t mapped = kBlockHeader + (bytes + 4095) / 4096 * 4096;
    if (void* data = t_param_blocks.Take(mapped)) return data;
    void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    std::memcpy(p, &mapped, sizeof(mapped));
    return static_cast<char*>(p) + kBlockHeader;
  }
#endif
  return ::operator new(bytes);
}

template <class T>
void PopulatedAllocator<T>::FreePopulated(void* p, size_t bytes) {
  if (p == nullptr) return;
#ifdef __linux__
  if (bytes >= kPopulateBytes) {
    t_param_blocks.Put(p);
    return;
  }
#endif
  ::operator delete(p);
}

template struct PopulatedAllocator<float>;
template struct PopulatedAllocator<int32_t>;

namespace {
// The calling thread's prepare threads (ScopedPrepareThreads): 1 outside
// any scope, 0 for all cores.
thread_local int t_prepare_threads = 1;
// A parameter pass goes parallel from twice this many parameters (a pass
// over them takes microseconds; starting a parallel region costs a few).
constexpr int64_t kMinParamsPerThread = int64_t{1} << 14;
}  // namespace

ScopedPrepareThreads::ScopedPrepareThreads(int threads) : saved_(t_prepare_threads) {
  t_prepare_threads = std::clamp(threads, 0, kMaxThreads);
}

ScopedPrepareThreads::~ScopedPrepareThreads() { t_prepare_threads = saved_; }

namespace internal {
void ForParamRanges(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t per_unit) {
  if (n <= 0) return;
  const int64_t unit = std::max<int64_t>(1, per_unit);
  const bool few = n < 2 * kMinParamsPerThread / unit + (2 * kMinParamsPerThread % unit != 0);
  const int team = ResolveThreads(t_prepare_threads);
  if (few || team <= 1) {
    fn(0, n);
    return;
  }
  // The whole team, as large as the run's that follows (RunPlanThreaded):
  // OpenMP regions of changing sizes are slow to start. Measured on a
  // 16-core Xeon (bench/HISTORY.md, "Preparing on the run's threads"): a
  // team of 8 here, then the run's 16, and a 4096 x 4096 layer's whole path
  // took about 1.8 times as long as with the whole team here.
#if NIBBLE_HAVE_OPENMP
#pragma omp parallel num_threads(team)
  {
    // The team may be smaller than asked (nested regions): split by its size.
    const int64_t k = omp_get_thread_num(), m = omp_get_num_threads();
    const int64_t b = n * k / m, e = n * (k + 1) / m;
    if (b < e) fn(b, e);
  }
#endif
}
}  // namespace internal

Status CheckThreads(int64_t threads, const std::string& who) {
  if (threads < 0 || threads > kMaxThreads) {
    return Status::Error(who + " must be between 0 (all cores) and " + std::to_string(kMaxThreads) +
                         " (got " + std::to_string(threads) + ")");
  }
  return Status::Ok();
}

void RunPlanThreaded(const Plan& plan_in, void* out, int threads, int64_t cols_limit,
                     int64_t row_begin, int64_t row_end) {
  Plan plan = plan_in;
  const int64_t cols = cols_limit < 0 ? plan.cols() : cols_limit;
  const int64_t r_begin = row_begin, r_end = row_end < 0 ? plan.rows() : row_end;
  const int64_t rows = r_end - r_begin;
  if (rows <= 0 || cols == 0) return;
  const int64_t elements = rows * cols;
  const int64_t out_bytes = OutBytes(plan.out);
  plan.nontemporal = elements * out_bytes >= kMinBytesForStreaming;
  char* const y = static_cast<char*>(out);
  const int64_t t = ThreadsFor(elements, ResolveThreads(threads));
  if (t == 1) {
    DequantizeTile(plan, r_begin, r_end, 0, cols, y, cols);
    return;
  }
  // Work items: whole row ranges when there are enough rows, otherwise each
  // row cut into column pieces (multiples of 64 elements). Static schedule:
  // item k always goes to the same thread, so first-touch pages stay local.
  const int64_t pieces = rows >= t ? 1 : (t + rows - 1) / rows;
  const int64_t piece_cols = ((cols + pieces - 1) / pieces + 63) / 64 * 64;
  const int64_t items = rows >= t ? t : rows * pieces;
#if NIBBLE_HAVE_OPENMP
#pragma omp parallel for schedule(static) num_threads(static_cast <int>(t))
#endif
  for (int64_t k = 0; k < items; ++k) {
    int64_t r0, r1, c0, c1;
    if (pieces == 1) {
      r0 = rows * k / items;
      r1 = rows * (k + 1) / items;
      c0 = 0;
      c1 = cols;
    } else {
      r0 = k / pieces;
      r1 = r0 + 1;
      c0 = std::min(cols, (k % pieces) * piece_cols);
      c1 = std::min(cols, c0 + piece_cols);
    }
    if (r0 < r1 && c0 < c1) {
      DequantizeTile(plan, r_begin + r0, r_begin + r1, c0, c1, y + (r0 * cols + c0) * out_bytes,
                     cols);
    }
  }
}

Dequantizer::Dequantizer(const Plan& plan, Storage storage, OutputInfo output, std::string name,
                         int64_t cols)
    : plan_(plan),
      cols_(cols < 0 ? plan.cols() : cols),
      storage_(std::move(storage)),
      output_(std::move(output)),
      name_(std::move(name)) {
  // Point the plan at owned storage where the front end widened the inputs
  // (vector moves keep their buffers, but re-point to be explicit).
  if (!storage_.scale.empty()) plan_.scale = storage_.scale.data();
  if (!storage_.zp_int.empty()) plan_.zp_int = storage_.zp_int.data();
  if (!storage_.zp_float.empty()) plan_.zp_float = storage_.zp_float.data();
  if (!storage_.axis_group.empty()) plan_.axis_group = storage_.axis_group.data();
  if (!storage_.code_values.empty()) plan_.code_values = storage_.code_values.data();
  plan_.normal_values = storage_.scale_facts.normal && plan_.ValuesFollowScales();
  plan_.finite_values = storage_.scale_facts.finite && plan_.ValuesFollowScales();
}

void Dequantizer::set_inputs(const std::vector<Input>& inputs) {
  inputs_.clear();
  const void* const read[] = {plan_.codes,    plan_.scale,      plan_.zp_int,
                              plan_.zp_float, plan_.axis_group, plan_.code_values};
  for (const Input& in : inputs) {
    if (in.data == nullptr || in.size_bytes == 0) continue;
    const uintptr_t b = reinterpret_cast<uintptr_t>(in.data), e = b + in.size_bytes;
    const bool in_place = std::any_of(std::begin(read), std::end(read), [&](const void* p) {
      const uintptr_t q = reinterpret_cast<uintptr_t>(p);
      return p != nullptr && q >= b && q < e;
    });
    if (in_place) inputs_.push_back(in);
  }
}

Status Dequantizer::CheckNoOverlap(const void* out, uint64_t rows, uint64_t row_bytes,
                                   uint64_t pitch, const std::string& who) const {
  if (out == nullptr || rows == 0 || row_bytes == 0) return Status::Ok();
  const uint64_t b = reinterpret_cast<uintptr_t>(out);
  for (const Input& in : inputs_) {
    const uint64_t ib = reinterpret_cast<uintptr_t>(in.data), ie = ib + in.size_bytes;
    // The first run that ends after ib (run i is [b + i * pitch, + row_bytes)):
    // it meets the input iff it starts before ie; later runs start later.
    const uint64_t i = ib < b + row_bytes ? 0 : (ib - b - row_bytes) / pitch + 1;
    if (i < rows && b + i * pitch < ie) {
      return Status::Error(who + ": the output overlaps " + in.name +
                           ", which is read while the output is written (use a separate "
                           "output buffer)");
    }
  }
  return Status::Ok();
}

Status Dequantizer::Run(const MutableTensorView& y, int threads) const {
  return Run(y, threads, CancelCallback());
}

Status Dequantizer::Run(const MutableTensorView& y, int threads, const CancelCallback& cancelled,
                        uint64_t check_bytes) const {
  if (y.dtype != output_.dtype) {
    return Status::Error(Who() + ": output Y must be " + DTypeName(output_.dtype) + " (got " +
                         DTypeName(y.dtype) + ")");
  }
  if (y.shape != output_.shape) {
    return Status::Error(Who() + ": output Y shape " + ShapeToString(y.shape) +
                         " does not match the expected " + ShapeToString(output_.shape));
  }
  const size_t need =
      static_cast<size_t>(rows() * cols()) * static_cast<size_t>(OutBytes(plan_.out));
  if (y.size_bytes < need) {
    return Status::Error(Who() + ": output Y has " + std::to_string(y.size_bytes) +
                         " bytes, needs " + std::to_string(need));
  }
  if (need > 0 && y.data == nullptr) return Status::Error(Who() + ": output Y data is null");
  NIBBLE_RETURN_IF_ERROR(CheckNoOverlap(y.data, 1, need, need, Who()));
  NIBBLE_RETURN_IF_ERROR(CheckThreads(threads).WithPrefix(Who()));
  if (cancelled) {
    return RunRows(0, output_.shape.empty() ? 1 : output_.shape[0], y.data, y.size_bytes, threads,
                   cancelled, check_bytes);
  }
  if (output_transposed_) {
    WriteTransposed(y.data, threads, 0, transpose_batches_, 0, cols());
  } else {
    RunPlanThreaded(plan_, y.data, threads, cols_);
  }
  return Status::Ok();
}

Status Dequantizer::RunTransposed(const MutableTensorView& y, int threads) const {
  const int64_t rows = this->rows(), cols = this->cols();
  const Shape want{cols, rows};
  if (y.dtype != output_.dtype || y.shape != want) {
    return Status::Error(Who() + ": transposed output must be " + DTypeName(output_.dtype) + " " +
                         ShapeToString(want) + " (got " + DTypeName(y.dtype) + " " +
                         ShapeToString(y.shape) + ")");
  }
  const size_t eb = static_cast<size_t>(OutBytes(plan_.out));
  if (y.size_bytes < static_cast<size_t>(rows * cols) * eb || (rows * cols > 0 && !y.data)) {
    return Status::Error(Who() + ": transposed output buffer is too small");
  }
  const uint64_t bytes = static_cast<uint64_t>(rows * cols) * eb;
  NIBBLE_RETURN_IF_ERROR(CheckNoOverlap(y.data, 1, bytes, bytes, Who()));
  NIBBLE_RETURN_IF_ERROR(CheckThreads(threads).WithPrefix(Who()));
  WriteTransposed(y.data, threads, 0, 1, 0, this->cols());
  return Status::Ok();
}

void Dequantizer::WriteTransposed(void* y, int threads, int64_t b_begin, int64_t b_end,
                                  int64_t c_begin, int64_t c_end) const {
  const int64_t rows = this->rows() / transpose_batches_;
  const int64_t cols = c_end - c_begin;
  const size_t eb = static_cast<size_t>(OutBytes(plan_.out));
  if (rows == 0 || cols <= 0) return;
  const int t = static_cast<int>(ThreadsFor(rows * cols, ResolveThreads(threads)));
  const size_t row_bytes = static_cast<size_t>(rows) * eb;
  const bool stream =
      (b_end - b_begin) * cols * static_cast<int64_t>(row_bytes) >= kMinBytesForStreaming;
  for (int64_t b = b_begin; b < b_end; ++b) {
    WriteTransposedBatch(
        static_cast<uint8_t*>(y) + static_cast<size_t>((b - b_begin) * cols) * row_bytes, t,
        b * rows, rows, c_begin, cols, stream);
  }
}

void Dequantizer::WriteTransposedBatch(uint8_t* dst, int t, int64_t row_base, int64_t rows,
                                       int64_t c_begin, int64_t cols, bool stream) const {
  // Power-of-two scales (gpt-oss MXFP4): DequantizeTransposedPow2 reads the
  // codes once, in panels of 128 whole view rows. Each thread takes a
  // share of the view rows (multiples of 128) across all columns, in
  // chunks of up to 4096 columns, so that a panel's codes are one span per
  // row (one span in all when a chunk is a whole row), which the kernel
  // fetches ahead in address order (TileSource::FetchRows). Before, bands
  // of 512 columns (WriteTransposedTiles below: 128 rows x 256 bytes of
  // codes a panel, fetched a column of words at a time): 16-bit outputs
  // 1.26-1.32x and float32 1.04-1.07x slower on an Intel Xeon guest
  // (bench/HISTORY.md, "gpt-oss in whole view rows"). What the kernel
  // leaves (other scales, other targets, rows past its blocks) goes the
  // tiles' way, where WriteCodesTransposed tries the kernel again per tile
  // (the panels after one it refused). A plan whose scales are not powers
  // of two costs one refused panel per thread and chunk here, then one
  // pass over the whole batch as before.
  const size_t eb = static_cast<size_t>(OutBytes(plan_.out));
  struct Rest {
    int64_t r0, nr, c0, nc;  // relative to this batch
  };
  std::vector<Rest> rest;
  if (CodesTransposable(c_begin, cols)) {
    constexpr int64_t kPanel = 128, kChunkCols = 4096;
    const int64_t step = std::lcm<int64_t>(8, plan_.group);
    const int64_t chunk = std::max<int64_t>(1, kChunkCols / step) * step;
    const int64_t chunks = (cols + chunk - 1) / chunk, panels = (rows + kPanel - 1) / kPanel;
    std::vector<std::vector<Rest>> left(static_cast<size_t>(t));
    (void)t;  // unused without OpenMP
#if NIBBLE_HAVE_OPENMP
#pragma omp parallel num_threads(t) if (t > 1)
#endif
    {
#if NIBBLE_HAVE_OPENMP
      const int k = omp_get_thread_num(), m = omp_get_num_threads();
#else
      const int k = 0, m = 1;
#endif
      const int64_t r0 = std::min(rows, panels * k / m * kPanel);
      const int64_t r1 = std::min(rows, panels * (k + 1) / m * kPanel);
      ParamVector<int32_t> scratch(
          static_cast<size_t>(2 * (std::min(chunk, cols) / plan_.group + 2) * kPanel));
      for (int64_t q = 0; q < chunks && r0 < r1; ++q) {
        const int64_t c0 = q * chunk, nc = std::min(chunk, cols - c0);
        const int64_t done = DequantizeTransposedPow2(
            plan_, row_base + r0, r1 - r0, c_begin + c0, nc, scratch.data(),
            dst + static_cast<size_t>(c0 * rows + r0) * eb, rows, stream);
        if (done < r1 - r0) {
          left[static_cast<size_t>(k)].push_back({r0 + done, r1 - r0 - done, c0, nc});
        }
      }
      StreamFence();
    }
    for (const auto& l : left) rest.insert(rest.end(), l.begin(), l.end());
    // Nothing written (a target or plan the kernel does not take): one
    // pass over the whole batch, as if it had not been tried.
    int64_t undone = 0;
    for (const Rest& r : rest) undone += r.nr * r.nc;
    if (undone == rows * cols) rest = {{0, rows, 0, cols}};
  } else {
    rest = {{0, rows, 0, cols}};
  }
  for (const Rest& r : rest) {
    WriteTransposedTiles(dst + static_cast<size_t>(r.c0 * rows + r.r0) * eb, rows, t,
                         row_base + r.r0, r.nr, c_begin + r.c0, r.nc, stream);
  }
}

void Dequantizer::WriteTransposedTiles(uint8_t* dst, int64_t ld, int t, int64_t row_base,
                                       int64_t rows, int64_t c_begin, int64_t cols,
                                       bool stream) const {
  const size_t eb = static_cast<size_t>(OutBytes(plan_.out));
  const size_t row_bytes = static_cast<size_t>(ld) * eb;
  // Tiles of tile_rows view rows x tile_cols view columns (output rows):
  // each is dequantized into a per-thread buffer (256 KiB, in L2) and
  // written by TransposeTile as one run of tile_rows elements in each of
  // its tile_cols output rows, row after row. A thread owns whole bands
  // of tile_cols output rows and walks them from the first view row to
  // the last.
  const int64_t line = static_cast<int64_t>(64 / eb);  // elements per 64-byte line
  // 512 columns, fewer when that leaves under two bands per thread.
  int64_t tile_cols = 512;
  while (tile_cols > 32 && (cols + tile_cols - 1) / tile_cols < 2 * t) tile_cols /= 2;
  const int64_t tile_rows = std::max(
      line, static_cast<int64_t>((size_t{256} << 10) / (static_cast<size_t>(tile_cols) * eb)) /
                line * line);
  const int64_t bands = (cols + tile_cols - 1) / tile_cols;
  // WriteCodesTransposed's tiles: 256 KiB of code words (in L2).
  const int64_t code_rows = std::max<int64_t>(16, (int64_t{1} << 19) / tile_cols / 16 * 16);
  const int64_t tile_groups = (tile_cols + plan_.group - 1) / plan_.group + 1;
  (void)t;  // unused without OpenMP
#if NIBBLE_HAVE_OPENMP
#pragma omp parallel num_threads(t) if (t > 1)
#endif
  {
    // (ParamVectors: the thread's blocks are reused call after call, no
    // fresh pages or zeroing per call.)
    ParamVector<float> tile((static_cast<size_t>(tile_rows * tile_cols) * eb + 3) / 4);
    auto* const buf = reinterpret_cast<uint8_t*>(tile.data());
    ParamVector<uint32_t> words;
    ParamVector<float> params;
#if NIBBLE_HAVE_OPENMP
#pragma omp for schedule(static)
#endif
    for (int64_t band = 0; band < bands; ++band) {
      const int64_t b0 = band * tile_cols, nc = std::min(cols, b0 + tile_cols) - b0;
      uint8_t* const band_dst = dst + static_cast<size_t>(b0) * row_bytes;
      if (CodesTransposable(c_begin + b0, nc)) {
        if (words.empty()) {
          words.resize(static_cast<size_t>(code_rows * tile_cols / 8));
          params.resize(static_cast<size_t>(2 * tile_groups * code_rows));
        }
        for (int64_t r0 = 0; r0 < rows; r0 += code_rows) {
          WriteCodesTransposed({row_base + r0, std::min(code_rows, rows - r0), c_begin + b0, nc},
                               words.data(), params.data(), band_dst + static_cast<size_t>(r0) * eb,
                               static_cast<int64_t>(row_bytes / eb), stream);
        }
        continue;
      }
      for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
        const int64_t r1 = std::min(rows, r0 + tile_rows);
        DequantizeTile(plan_, row_base + r0, row_base + r1, c_begin + b0, c_begin + b0 + nc, buf,
                       nc);
        TransposeTile(buf, static_cast<size_t>(nc) * eb, r1 - r0, nc, eb,
                      band_dst + static_cast<size_t>(r0) * eb, row_bytes, stream);
      }
    }
    StreamFence();
  }
}

bool Dequantizer::CodesTransposable(int64_t c0, int64_t nc) const {
  const Plan& p = plan_;
  return p.layout == Layout::kDense && CodeBits(p.code) == 4 && p.inner == 1 &&
         p.axis_group == nullptr && !p.Staged() && p.dot == nullptr && p.scale != nullptr &&
         p.axis % 8 == 0 && c0 % 8 == 0 && nc % 8 == 0 && c0 % p.group == 0;
}

void Dequantizer::WriteCodesTransposed(const CodeTile& tile, uint32_t* words, float* params,
                                       uint8_t* dst, int64_t ld, bool stream) const {
  const Plan& p = plan_;
  const size_t eb = static_cast<size_t>(OutBytes(p.out));
  // Power-of-two scales (gpt-oss): the rows the kernel takes, straight
  // from the codes; the rest as below.
  const int64_t done = DequantizeTransposedPow2(
      p, tile.r0, tile.nr, tile.c0, tile.nc, reinterpret_cast<int32_t*>(params), dst, ld, stream);
  dst += static_cast<size_t>(done) * eb;
  const int64_t r0 = tile.r0 + done, nr = tile.nr - done, c0 = tile.c0, nc = tile.nc;
  if (nr == 0) return;
  // Code words: view row r's words lie (p.axis / 8) words apart, read in
  // strips of 16 rows. No software prefetch: each strip's rows fetched two
  // strips ahead measured 0.92-0.98x on a Zen 3 guest (AVX2, gpt-oss
  // float32, 2026-12-06; GCC had dropped that fetch lambda's
  // __builtin_prefetch calls before, so it never ran).
  const size_t pitch = static_cast<size_t>(p.axis / 2);
  const uint8_t* const src = p.codes + (r0 * p.axis + c0) / 2;
  constexpr int64_t kStrip = 16;
  for (int64_t j = 0; j < nr; j += kStrip) {
    TransposeTile(src + static_cast<size_t>(j) * pitch, pitch, std::min(kStrip, nr - j), nc / 8, 4,
                  reinterpret_cast<uint8_t*>(words + j), static_cast<size_t>(nr) * 4, false);
  }
  // Scales and zero points of groups g0 .. g0 + ng - 1: row r's group g at
  // r * s_outer + g * s_axis, to [g - g0][r - r0].
  const int64_t g0 = c0 / p.group, ng = (nc + p.group - 1) / p.group;
  auto grid = [&](const void* from, float* to) {
    const auto* at = static_cast<const uint8_t*>(from) + 4 * (r0 * p.s_outer + g0 * p.s_axis);
    if (p.s_axis == 1) {
      TransposeTile(at, static_cast<size_t>(4 * p.s_outer), nr, ng, 4,
                    reinterpret_cast<uint8_t*>(to), static_cast<size_t>(nr) * 4, false);
      return;
    }
    for (int64_t g = 0; g < ng; ++g) {
      for (int64_t r = 0; r < nr; ++r) {
        std::memcpy(to + g * nr + r, at + 4 * (r * p.s_outer + g * p.s_axis), 4);
      }
    }
  };
  Plan t = p;
  grid(p.scale, params);
  t.scale = params;
  if (p.zp_int != nullptr) {
    grid(p.zp_int, params + ng * nr);
    t.zp_int = reinterpret_cast<const int32_t*>(params + ng * nr);
  } else if (p.zp_float != nullptr) {
    grid(p.zp_float, params + ng * nr);
    t.zp_float = params + ng * nr;
  }
  // The transposed tile [nc, nr]: element (c, r) is field c % 8 of word
  // (c / 8) * nr + r, its parameters at (c / group) * nr + r.
  internal::SetWordsAlongAxis0(&t, 8, nc, nr);
  t.codes = reinterpret_cast<const uint8_t*>(words);
  t.nontemporal = stream;
  if (nr > 1) {
    DequantizeTile(t, 0, nc, 0, nr, dst, ld);
    return;
  }
  // One view row (a tensor of one row, or the last tile of rows = 1 mod
  // the tile's rows): that plan's view is then [1, nc] (inner 1), not [nc,
  // 1]; its row written in pieces through a scratch row, each transposed.
  alignas(64) uint8_t row[256 * 4];
  for (int64_t c = 0; c < nc; c += 256) {
    const int64_t n = std::min<int64_t>(256, nc - c);
    DequantizeTile(t, 0, 1, c, c + n, row, n);
    TransposeTile(row, static_cast<size_t>(n) * eb, 1, n, eb,
                  dst + static_cast<size_t>(c * ld) * eb, static_cast<size_t>(ld) * eb, false);
  }
}

Status Dequantizer::RunRows(int64_t r0, int64_t r1, void* y, size_t y_bytes, int threads) const
    try {
  const int64_t n0 = output_.shape.empty() ? 1 : output_.shape[0];
  if (r0 < 0 || r0 > r1 || r1 > n0) {
    return Status::Error(Who() + ": rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                         ") are outside the first dimension (" + std::to_string(n0) + " rows)");
  }
  NIBBLE_RETURN_IF_ERROR(CheckThreads(threads).WithPrefix(Who()));
  const int64_t per_row = n0 == 0 ? 0 : rows() * cols() / n0;
  const int64_t eb = OutBytes(plan_.out);
  const int64_t n = (r1 - r0) * per_row;
  if (y_bytes < static_cast<size_t>(n * eb)) {
    return Status::Error(Who() + ": output has " + std::to_string(y_bytes) + " bytes, rows [" +
                         std::to_string(r0) + ", " + std::to_string(r1) + ") need " +
                         std::to_string(n * eb));
  }
  if (n == 0) return Status::Ok();
  if (y == nullptr) return Status::Error(Who() + ": output data is null");
  const auto bytes = static_cast<uint64_t>(n * eb);
  NIBBLE_RETURN_IF_ERROR(CheckNoOverlap(y, 1, bytes, bytes, Who()));
  if (output_transposed_) {
    // Output rows are columns of the view, or whole transposed batches.
    if (transpose_batches_ > 1) {
      WriteTransposed(y, threads, r0, r1, 0, cols());
    } else {
      WriteTransposed(y, threads, 0, 1, r0, r1);
    }
    return Status::Ok();
  }
  // Output rows [r0, r1) are flat elements [f, f1) of the view: a partial
  // view row, whole view rows (threaded), a partial view row.
  const int64_t c = cols();
  int64_t f = r0 * per_row;
  const int64_t f1 = r1 * per_row;
  char* out = static_cast<char*>(y);
  if (f % c != 0) {
    const int64_t row = f / c, c0 = f % c, c1 = std::min(c, c0 + (f1 - f));
    DequantizeTile(plan_, row, row + 1, c0, c1, out, c1 - c0);
    out += (c1 - c0) * eb;
    f += c1 - c0;
  }
  if (f < f1) {
    const int64_t rb = f / c, re = f1 / c;
    if (rb < re) {
      RunPlanThreaded(plan_, out, threads, c, rb, re);
      out += (re - rb) * c * eb;
      f = re * c;
    }
    if (f < f1) DequantizeTile(plan_, re, re + 1, 0, f1 - f, out, f1 - f);
  }
  return Status::Ok();
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Dequantizer::RunRows");
}

Status Dequantizer::RunRows(int64_t r0, int64_t r1, void* y, size_t y_bytes, int threads,
                            const CancelCallback& cancelled, uint64_t check_bytes) const {
  const int64_t n0 = output_.shape.empty() ? 1 : output_.shape[0];
  const uint64_t row_bytes = n0 == 0 ? 0
                                     : static_cast<uint64_t>(rows() * cols() / n0) *
                                           static_cast<uint64_t>(OutBytes(plan_.out));
  // Requests RunRows refuses (or that write nothing): its own answer.
  if (!cancelled || r0 < 0 || r0 >= r1 || r1 > n0 || y == nullptr || row_bytes == 0 ||
      y_bytes / row_bytes < static_cast<uint64_t>(r1 - r0)) {
    return RunRows(r0, r1, y, y_bytes, threads);
  }
  if (check_bytes == 0) {
    check_bytes = std::max(kCancelCheckBytes,
                           static_cast<uint64_t>(ResolveThreads(threads)) * (uint64_t{4} << 20));
  }
  const int64_t step = static_cast<int64_t>(
      std::clamp<uint64_t>(check_bytes / row_bytes, 1, static_cast<uint64_t>(r1 - r0)));
  char* const out = static_cast<char*>(y);
  for (int64_t r = r0; r < r1; r += step) {
    NIBBLE_RETURN_IF_ERROR(CheckCancelled(cancelled).WithPrefix(Who()));
    const int64_t e = std::min(r1, r + step);
    const uint64_t at = static_cast<uint64_t>(r - r0) * row_bytes;
    NIBBLE_RETURN_IF_ERROR(RunRows(r, e, out + at, static_cast<size_t>(y_bytes - at), threads));
  }
  return Status::Ok();
}

StatusOr<Tensor> Dequantizer::Run(int threads) const try {
  auto t = Tensor::Allocate(output_.dtype, output_.shape);
  if (!t.ok()) return t.status();
  NIBBLE_RETURN_IF_ERROR(Run(t->mutable_view(), threads));
  return t;
} catch (const std::bad_alloc&) {
  return OutOfMemoryError("Dequantizer::Run");
}

Status Dequantizer::RunTile(int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out,
                            int64_t ld) const {
  if (r0 < 0 || r0 > r1 || r1 > rows() || c0 < 0 || c0 > c1 || c1 > cols()) {
    return Status::Error("RunTile: tile rows [" + std::to_string(r0) + ", " + std::to_string(r1) +
                         ") x cols [" + std::to_string(c0) + ", " + std::to_string(c1) +
                         ") is outside the " + std::to_string(rows()) + " x " +
                         std::to_string(cols()) + " view");
  }
  if (ld < c1 - c0) {
    return Status::Error("RunTile: leading dimension " + std::to_string(ld) +
                         " is smaller than the tile width " + std::to_string(c1 - c0));
  }
  if (r0 == r1 || c0 == c1) return Status::Ok();
  if (out == nullptr) return Status::Error("RunTile: output pointer is null");
  const auto eb = static_cast<uint64_t>(OutBytes(plan_.out));
  NIBBLE_RETURN_IF_ERROR(CheckNoOverlap(out, static_cast<uint64_t>(r1 - r0),
                                        static_cast<uint64_t>(c1 - c0) * eb,
                                        static_cast<uint64_t>(ld) * eb, "RunTile"));
  DequantizeTile(plan_, r0, r1, c0, c1, out, ld);
  return Status::Ok();
}

}  // namespace nibble
