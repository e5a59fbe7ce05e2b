// Weight-only-quant matmul on a prepared Dequantizer: Y = X · Wᵀ (+ bias),
// straight from the layout's own packing — every layout a Dequantizer
// holds (PMX, ONNX, MatMulNBits, every checkpoint method, the GGUF types).
//
// Values: W is the Dequantizer's output (its type's values, widened exactly
// to float32), X is widened exactly to float32, and
//   y[m, n] = Dot(x[m, :], w[n, :]) (+ bias[n], one more rounding)
// with Dot the fixed-order float32 dot product of kernels/matmul.h (16
// partial sums, each step one fused multiply-add, then a fixed halving
// sum), rounded once more to Y's type when it is float16 / bfloat16. The
// bits are the same for every thread count and on every SIMD target
// (targets without a fused multiply-add compute it in scalar code).
// Against an exact dot product the error is at most
// gamma(ceil(K / 16) + 4) * sum_k |x[m, k] w[n, k]|, gamma(j) = j u / (1 - j u),
// u = 2^-24: each partial sum adds ceil(K / 16) products (one rounding
// each), then 4 halvings.
//
// How: each thread takes blocks of output features, dequantizes the block's
// weight rows into a float32 tile of 256 / 512 KiB with RunTile (its cache)
// and multiplies it with every row of X; rows too long for 8 of them to fit
// 256 KiB go in chunks of K when X has several rows, the partial sums kept
// between chunks (kernels/matmul.h AccumulateDotRows: the same bits). A
// weight whose features are the view's columns ([K, N], weight="in_out" on
// an [N, K] output) is multiplied as the tile holds it, by columns
// (AccumulateDotCols: the same bits). The float weight is never written to
// memory beyond that tile. Up to 8 rows of X (in groups of 4, each group
// decoding the weight's block again from the L2) on a layout whose kernels look
// 4-bit codes up in a group's table (AVX-512: PMX / ONNX / MatMulNBits
// int4, compressed-tensors, bitsandbytes, GGUF Q4_0 / Q4_1 / Q4_K / IQ4_NL
// / IQ4_XS / MXFP4; GPTQ / AWQ [N, K] words and ONNX int4 [K, N] in one
// pass of up to 8 rows of X; AVX2: the same row
// layouts without the GGUF blocks, and int8 / FP8, at M = 1; K a multiple
// of 32, float32 values): no tile at all —
// the kernels decode in registers and accumulate (kernels/plan.h
// Plan::dot), four weight rows at a time, in the same order.
#ifndef NIBBLE_OP_MATMUL_H_
#define NIBBLE_OP_MATMUL_H_

#include "base/cancel.h"
#include "base/status.h"
#include "base/tensor.h"
#include "op/dequantizer.h"

namespace nibble {

struct MatMulOptions {
  // How the Dequantizer's 2-D output holds W: kOutIn, [N, K] (PyTorch's
  // [out_features, in_features], GGUF, every Hugging Face checkpoint):
  // Y = X · OUTᵀ; kInOut, [K, N] (an ONNX MatMul's B, a MatMulNBits
  // weight prepared as its operand): Y = X · OUT.
  enum class Weight { kOutIn, kInOut };
  Weight weight = Weight::kOutIn;
  // 0: OpenMP's default; 1: the caller's thread; n: n threads
  // (CheckThreads). Same bits for every count.
  int threads = 0;
  // A 3-D weight [E, ., .] (the experts of a MoE layer, as a checkpoint
  // holds them: GGUF's ffn_*_exps [E, N, K], gpt-oss MXFP4 [E, K, N]):
  // which expert's 2-D matrix W is, 0 <= expert < E (its own rows of the
  // Dequantizer's view: nothing of the other experts is read). -1: the
  // weight is 2-D.
  int64_t expert = -1;
  // How Y is summed. kExact: the fixed-order dot above (the same bits for
  // every thread count, SIMD target and batch size). kBlas, the prefill
  // path: at M >= kBlasMinRows the dequantized float32 tiles (blocks of
  // kBlasRows features x chunks of kBlasChunk of K, fixed whatever the
  // thread count) go through the BLAS's sgemm (kernels/blas_gemm.h:
  // OpenBLAS, one single-threaded call per tile on each of nibble's threads, the
  // chunks summed into Y's float32 block in order); below kBlasMinRows the
  // exact path, which is faster there; so is an N or K beyond the BLAS's
  // 32-bit integers (kBlasMaxDim). Its bits are the same for every
  // thread count on one machine and library; they differ from kExact's and
  // may differ across CPUs, OpenBLAS versions and batch sizes. Each output
  // is within gamma(K + ceil(K / kBlasChunk)) * sum_k |x[m, k] w[n, k]| of
  // the exact dot (at most that many rounded operations, in any order). A
  // build without the BLAS (BlasAvailable() false) refuses kBlas.
  enum class Gemm { kExact, kBlas };
  Gemm gemm = Gemm::kExact;
  // Asked between tiles on the calling thread (base/cancel.h): when it
  // says stop, the matmul returns an error ending in "interrupted" soon
  // after (the tiles under way finish) and Y's contents are unspecified.
  CancelCallback cancelled;
};

// MatMulOptions::Gemm::kBlas: the smallest M it sends to the BLAS, and its
// tiles (features x K). Measured on the VM (Intel Xeon guest, one thread,
// 4096 x 4096 float32, OpenBLAS 0.3.21): sgemm at M = 16 10 ms
// against the exact path's 7.7, at M = 128 / 512 32 / 106 ms against 58 /
// 236 (bench/results/2026-12-01-blas-prefill/). Tiles of 512 x 1024 (2
// MiB of float32) against 256 x 1024: at 4096 x 14336, M = 512, 0.88-0.90
// of the dense sgemm against 0.80-0.82; at 4096 x 4096 within the noise
// (tile-shapes.txt there).
inline constexpr int64_t kBlasMinRows = 32;
inline constexpr int64_t kBlasRows = 512, kBlasChunk = 1024;

// Y's shape for an X of shape `x`: X's leading dimensions and N; an error
// naming the mismatch when the weight is neither 2-D nor 3-D with an
// expert in range (options.expert), or X does not end in K.
StatusOr<Shape> MatMulOutputShape(const Dequantizer& w, const Shape& x,
                                  const MatMulOptions& options);

// Each thread that runs a matmul (the caller's, OpenMP's workers) keeps
// its scratch for its next call: the float32 tile (128 / 256 KiB), plus a
// raw tile for float16 / bfloat16 or transposed weights and Y's block for
// bias or a 16-bit Y. ReleaseMatMulScratch() frees the calling thread's
// now (nibble_release_cached_memory, nibble.release_cached_memory); a
// thread's exit frees its own.
void ReleaseMatMulScratch();

// Y[..., N] = X[..., K] · W (+ bias[N]). X: float32 / float16 / bfloat16,
// any leading dimensions (M = their product; a 1-D X is one row). Y: the
// same leading dimensions and N; float32 or X's type. bias: null, or N
// values of a float type. The Dequantizer's output must be 2-D, or 3-D
// with options.expert picking the matrix.
// Errors name the mismatch (K, N, types, shapes) and write nothing.
Status MatMul(const Dequantizer& w, const TensorView& x, const MutableTensorView& y,
              const TensorView* bias = nullptr, const MatMulOptions& options = {});

}  // namespace nibble

#endif  // NIBBLE_OP_MATMUL_H_
