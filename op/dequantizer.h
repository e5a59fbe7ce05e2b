// Dequantizer: a validated, lowered request (one Plan) ready to run any
// number of times, whole-tensor or by tiles. Built by the front ends
// (op/pmx.h; the ONNX and DirectML adapters lower to the same object).
//
// Lifetime: the Dequantizer references the caller's X codes (not copied) and,
// when they are already aligned float32 / int32, the scale and zero point;
// those buffers must outlive it. Other scale/zero-point types are widened
// into storage the Dequantizer owns (exactly: every such value is a float32).
//
// The output must not overlap a buffer the Dequantizer reads in place (X's
// codes; a scale or zero point it did not widen): every output entry point
// refuses such an output with an error naming the input, instead of
// overwriting codes it has yet to read.
//
// Threading: Run() may use OpenMP threads (see `threads`); RunTile() always
// runs on the caller's thread and never allocates. A Dequantizer is
// immutable after construction and safe to use from several threads at once.
#ifndef NIBBLE_OP_DEQUANTIZER_H_
#define NIBBLE_OP_DEQUANTIZER_H_

#include <cstdint>
#include <new>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cancel.h"
#include "base/status.h"
#include "base/tensor.h"
#include "kernels/plan.h"

namespace nibble {

// Allocator of a dequantizer's widened parameter arrays. On Linux, blocks
// of at least kPopulateBytes are mapped with their pages populated in one
// system call (MAP_POPULATE) instead of one page fault per 4 KiB when
// first written, and a freed block is kept by the freeing thread for its
// next preparation (at most 8 blocks and 32 MiB of mappings per thread;
// reused for requests of at least half its size). Fresh pages are what a
// whole-path dequantization of a GPTQ / AWQ layer mostly paid for its
// parameters: on a virtual machine 0.5-0.7 ms of a 4096 x 4096 GPTQ f16
// layer, 0.08 ms with the block reused (bench/HISTORY.md, "Parameter blocks").
// ReleaseCachedParameterBlocks() unmaps the calling thread's blocks now;
// a thread's blocks are unmapped when it exits. Smaller blocks and other
// systems: operator new. Out of memory: std::bad_alloc. Elements are
// default-initialized (resize(n) writes nothing: every lowering overwrites
// what it sizes; resize(n, v) and assign still fill).
template <class T>
struct PopulatedAllocator {
  using value_type = T;
  static constexpr size_t kPopulateBytes = size_t{256} << 10;
  PopulatedAllocator() = default;
  template <class U>
  PopulatedAllocator(const PopulatedAllocator<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(AllocatePopulated(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { FreePopulated(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible<U>::value) {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const PopulatedAllocator<U>&) const {
    return true;
  }
  template <class U>
  bool operator!=(const PopulatedAllocator<U>&) const {
    return false;
  }
  // Throws std::bad_alloc when out of memory; `bytes` decides the kind of
  // block, so FreePopulated must get the same count.
  static void* AllocatePopulated(size_t bytes);
  static void FreePopulated(void* p, size_t bytes);
};
template <class T>
using ParamVector = std::vector<T, PopulatedAllocator<T>>;

// Unmaps the parameter blocks the calling thread keeps for reuse (see
// PopulatedAllocator). Dequantizers that still exist are not affected.
void ReleaseCachedParameterBlocks();

// Preparing a request (Prepare*, a checkpoint method's lowering) widens
// and checks its scales and zero points in passes over them: one thread by
// default, so that a runtime preparing on its own threads never fans out.
// While a ScopedPrepareThreads lives, the requests prepared on the thread
// that made it run those passes on up to `threads` threads (0: all cores)
// where the parameters are large enough to pay for it. The whole-tensor
// runners that are given a thread count (Checkpoint::Read and PrepareRows,
// DequantizePmx / DequantizeOnnx) open one with it: at 16 threads a serial
// pass over a 4096 x 4096 layer's parameters is a tenth of its time.
// Scopes nest; the innermost one counts. Same values at any count.
class ScopedPrepareThreads {
 public:
  explicit ScopedPrepareThreads(int threads);
  ~ScopedPrepareThreads();
  ScopedPrepareThreads(const ScopedPrepareThreads&) = delete;
  ScopedPrepareThreads& operator=(const ScopedPrepareThreads&) = delete;

 private:
  int saved_;
};

// The output of a dequantize request: its element type and logical shape.
struct OutputInfo {
  DType dtype = DType::kFloat32;
  Shape shape;
};

class Dequantizer {
 public:
  Dequantizer(Dequantizer&&) noexcept = default;
  Dequantizer& operator=(Dequantizer&&) noexcept = default;
  Dequantizer(const Dequantizer&) = delete;
  Dequantizer& operator=(const Dequantizer&) = delete;

  const OutputInfo& output() const { return output_; }
  const Plan& plan() const { return plan_; }
  // The 2-D view the tile API addresses: element (r, c) is logical flat
  // element r * cols() + c of the output. For a rank-2 weight this is the
  // weight itself.
  int64_t rows() const { return plan_.rows(); }
  int64_t cols() const { return cols_; }

  // True when output() is the transpose of the 2-D view (e.g. a GPTQ
  // act-order checkpoint without AVX-512 or AVX2 kernels: its codes are dequantized
  // in their [K, N] order and written as the [N, K] weight). Run() handles
  // it; tiles address the view.
  bool output_transposed() const { return output_transposed_; }
  // With output_transposed(): how many equal blocks of view rows are each
  // transposed into one output matrix (TransposeOutputBatches; 1: the
  // whole view).
  int64_t transpose_batches() const { return transpose_batches_; }

  // Dequantizes the whole tensor into `y`, which must have output().dtype,
  // output().shape and enough bytes. threads: 0 = OpenMP's default, 1 = the
  // caller's thread only, n = n threads (at most kMaxThreads; negative or
  // larger counts are an error, see CheckThreads). Results are identical
  // for every thread count.
  Status Run(const MutableTensorView& y, int threads = 0) const;
  // Same, asking `cancelled` (base/cancel.h) before each piece of whole
  // rows of the first dimension (at least one) of at most `check_bytes` of
  // output — 0: kCancelCheckBytes, or 4 MiB per thread of the run when
  // that is more (each piece is one threaded run: its threads wait for
  // each other at its end). When it says stop, returns an error whose
  // message ends in kInterrupted, y's contents then unspecified. An empty
  // `cancelled`: Run(y, threads). The same bits.
  Status Run(const MutableTensorView& y, int threads, const CancelCallback& cancelled,
             uint64_t check_bytes = 0) const;
  // Same, into a newly allocated tensor.
  StatusOr<Tensor> Run(int threads = 0) const;

  // Writes the transpose of the 2-D view: element (r, c) at
  // y[c * rows() + r]; `y` has shape (cols(), rows()) of output().dtype
  // (e.g. a MatMulNBits [N, K] weight as the [K, N] MatMul operand).
  // Same bits as Run(); threads as for Run().
  Status RunTransposed(const MutableTensorView& y, int threads = 0) const;

  // Dequantizes rows [r0, r1) x cols [c0, c1) of the 2-D view into `out`,
  // element (r, c) at out[(r - r0) * ld + (c - c0)] in the output type.
  // Single-threaded, allocation-free (it uses up to about 64 KiB of the
  // calling thread's stack: GPTQ tiles stage their rows there), any offsets
  // (mid-group, mid-word); the same bits as Run(). Errors only for
  // out-of-range arguments and an output overlapping an input read in
  // place.
  Status RunTile(int64_t r0, int64_t r1, int64_t c0, int64_t c1, void* out, int64_t ld) const;

  // Writes rows [r0, r1) of the output along its first dimension (a rank-0
  // output has one row) into `y`: (r1 - r0) * (elements / shape[0])
  // elements of output().dtype, contiguous, exactly the bytes Run() writes
  // there. `y_bytes` must be at least that; threads as for Run(). Any
  // range, any layout (act-order GPTQ included).
  Status RunRows(int64_t r0, int64_t r1, void* y, size_t y_bytes, int threads = 0) const;
  // Same, asking `cancelled` between pieces as Run(y, threads, cancelled).
  Status RunRows(int64_t r0, int64_t r1, void* y, size_t y_bytes, int threads,
                 const CancelCallback& cancelled, uint64_t check_bytes = 0) const;

  // --- For front ends (op/): build from a Plan whose pointers are set. ---
  struct Storage {
    ParamVector<float> scale;
    ParamVector<int32_t> zp_int;
    ParamVector<float> zp_float;
    ParamVector<int32_t> axis_group;
    ParamVector<float> code_values;  // kTable4 codes read from the checkpoint
    // Set by WidenScale (for bfloat16 outputs; else both false).
    struct ScaleFacts {
      bool normal = false;  // no scale is a float32 subnormal (Plan::normal_values)
      bool finite = false;  // no scale is NaN or infinite (Plan::finite_values)
    };
    ScaleFacts scale_facts;
  };
  // `cols`: columns of the view that are output (default: all of the
  // plan's; fewer when rows are padded in memory, as MatMulNBits blocks).
  Dequantizer(const Plan& plan, Storage storage, OutputInfo output, std::string name,
              int64_t cols = -1);
  // A caller's buffer given to the front end, for the overlap check: its
  // name in messages ("input X") and its bytes.
  struct Input {
    std::string name;
    const void* data = nullptr;
    size_t size_bytes = 0;
  };
  // Records the inputs whose bytes the plan reads in place (those holding
  // one of its pointers); the others were copied, and the caller may free
  // and reuse their memory. Front ends list every caller buffer.
  void set_inputs(const std::vector<Input>& inputs);
  // The Input of view `v` (none when v is null).
  static Input InputOf(std::string name, const TensorView* v) {
    return v ? Input{std::move(name), v->data, v->size_bytes} : Input{};
  }
  // Marks output() as the transpose of the view (see output_transposed()).
  void set_output_transposed(bool t) { output_transposed_ = t; }
  // Makes output() the transpose of the 2-D view, shape (cols(), rows()):
  // e.g. a MatMulNBits [N, K] weight as its [K, N] MatMul operand.
  // Precondition: !output_transposed().
  void TransposeOutput() {
    output_.shape = {cols_, plan_.rows()};
    output_transposed_ = true;
  }
  // Makes output() [batches, cols(), rows() / batches]: the transpose of
  // each of `batches` equal blocks of view rows (gpt-oss MXFP4 experts:
  // codes [E * R, K] stored, weight [E, K, R] loaded). Run() and RunRows()
  // (whole batches) handle it; tiles address the view. Preconditions:
  // !output_transposed(), batches >= 1 divides rows().
  void TransposeOutputBatches(int64_t batches) {
    output_.shape = {batches, cols_, plan_.rows() / batches};
    output_transposed_ = true;
    transpose_batches_ = batches;
  }

 private:
  // Batches [b_begin, b_end) (see TransposeOutputBatches; 0, 1 when not
  // batched), view columns [c_begin, c_end) of each, written as output rows.
  void WriteTransposed(void* dst, int threads, int64_t b_begin, int64_t b_end, int64_t c_begin,
                       int64_t c_end) const;
  // One batch: view rows [row_base, row_base + rows) on t threads.
  // stream: the output is far larger than the caches (non-temporal stores).
  void WriteTransposedBatch(uint8_t* dst, int t, int64_t row_base, int64_t rows, int64_t c_begin,
                            int64_t cols, bool stream) const;
  // View rows [row_base, row_base + rows) x columns [c_begin, c_begin +
  // cols) through tiles, on t threads: view column c_begin + j's values to
  // dst + j * ld elements (an output row ld elements long).
  void WriteTransposedTiles(uint8_t* dst, int64_t ld, int t, int64_t row_base, int64_t rows,
                            int64_t c_begin, int64_t cols, bool stream) const;
  // Whether view columns [c0, c0 + nc) can be written transposed by
  // WriteCodesTransposed: dense 4-bit codes with groups along the view
  // row (no group map, no staged roundings), every view row starting on
  // a 32-bit word of codes, c0 on a word and a group boundary, nc whole
  // words.
  bool CodesTransposable(int64_t c0, int64_t nc) const;
  // View rows [r0, r0 + nr) x columns [c0, c0 + nc).
  struct CodeTile {
    int64_t r0 = 0, nr = 0, c0 = 0, nc = 0;
  };
  // The tile's (CodesTransposable) written transposed to `dst` (element
  // (r, c) at dst[(c - c0) * ld + (r - r0)]), without transposing the
  // output: its code words (8 codes each) are transposed into `words`
  // (nc / 8 x nr words) and its scales and zero points into `params`
  // (2 * ceil(nc / group) * nr floats), which then form a PMX int4x8 plan
  // over [nc, nr] — the transposed tile — that the kernels write row by
  // row, streamed with `stream`. Same values: the same codes, parameters
  // and arithmetic.
  void WriteCodesTransposed(const CodeTile& tile, uint32_t* words, float* params, uint8_t* dst,
                            int64_t ld, bool stream) const;
  // An error prefixed by `who` when an output of `rows` runs of
  // `row_bytes` bytes, `pitch` bytes apart from `out` (pitch >= row_bytes),
  // meets an input the plan reads in place.
  Status CheckNoOverlap(const void* out, uint64_t rows, uint64_t row_bytes, uint64_t pitch,
                        const std::string& who) const;
  bool output_transposed_ = false;
  int64_t transpose_batches_ = 1;
  std::vector<Input> inputs_;  // read in place (set_inputs)
  Plan plan_;
  int64_t cols_ = 0;
  Storage storage_;
  OutputInfo output_;
  // "DequantizeLinear 'name'": how messages name this request.
  std::string Who() const { return "DequantizeLinear" + (name_.empty() ? "" : " '" + name_ + "'"); }
  std::string name_;  // for messages
};

// The largest thread count accepted anywhere (C++, C, Python, CLI): more
// than any machine nibble targets, few enough that the OpenMP runtime can
// always create them.
inline constexpr int kMaxThreads = 1024;
// An error naming `who` unless 0 <= threads <= kMaxThreads.
Status CheckThreads(int64_t threads, const std::string& who = "threads");

// Runs a Plan over rows [row_begin, row_end) (-1 = all) of its 2-D view,
// columns [0, cols) (cols <= plan.cols(); -1 = all), into `out` (row-major,
// `cols` per row, starting with row_begin), splitting rows (or
// column pieces of few rows) statically over `threads` OpenMP threads
// (0 = default; precondition: CheckThreads(threads) is ok); tensors below a
// threshold run on the caller's thread. The single place where threads are
// created.
void RunPlanThreaded(const Plan& plan, void* out, int threads, int64_t cols = -1,
                     int64_t row_begin = 0, int64_t row_end = -1);

}  // namespace nibble

#endif  // NIBBLE_OP_DEQUANTIZER_H_
