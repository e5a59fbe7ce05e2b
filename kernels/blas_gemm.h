// The BLAS behind MatMulOptions::Gemm::kBlas (op/matmul.h): the prefill
// path multiplies dequantized float32 tiles with the library's sgemm
// instead of nibble's fixed-order dot. Built when CMake finds Debian's
// OpenMP build of OpenBLAS (libopenblas-openmp-dev; NIBBLE_BLAS). nibble's
// own OpenMP threads each call it on their own tiles with their OpenMP
// thread count set to 1 for the call, so it runs single-threaded inside
// each of them. Why that build: Debian's serial one (libopenblas-serial-
// dev, 0.3.21) gave wrong results for 1-3 % of calls made from two threads
// at once (tests/matmul_test.cc "concurrent calls" caught it: whole blocks
// of Y differing, from its shared buffers); the OpenMP build gave none in
// 3000 rounds of two threads, and none from two OpenMP teams of separate
// threads at once; the pthread build would start a pool of its own inside
// each of nibble's threads, its size a process-wide setting.
#ifndef NIBBLE_KERNELS_BLAS_GEMM_H_
#define NIBBLE_KERNELS_BLAS_GEMM_H_

#include <cstdint>

namespace nibble {

// Whether this build has the BLAS (else BlasGemm must not be called).
bool BlasAvailable();

// The BLAS's name, version and the kernels it picked for this CPU (OpenBLAS's
// configuration string); "none" without one.
const char* BlasName();

// The largest m, n, k, ldx, ldw or ldy BlasGemm takes (the BLAS's 32-bit
// integers).
inline constexpr int64_t kBlasMaxDim = int64_t{0x7fffffff};

// y[i * ldy + j] (= when !accumulate, += when accumulate)
//   sum over t < k of x[i * ldx + t] * W(j, t),   i < m, j < n,
// W(j, t) = w[j * ldw + t] when w_rows_are_features ([n, k] rows, PyTorch's
// [out, in]), else w[t * ldw + j] ([k, n], an ONNX MatMul's B). The order
// of the sum (and FMA) is the BLAS's own for this CPU: the same arguments
// give the same bits on the same machine and library, nothing more.
// Single-threaded (the calling thread's OpenMP thread count is 1 during the
// call and restored after), safe to call from several threads at once on
// disjoint y; every dimension at most kBlasMaxDim; y overlaps
// neither x nor w.
void BlasGemm(const float* x, int64_t m, int64_t ldx, const float* w, bool w_rows_are_features,
              int64_t ldw, int64_t n, int64_t k, bool accumulate, float* y, int64_t ldy);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_BLAS_GEMM_H_
