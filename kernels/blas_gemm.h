// The BLAS behind MatMulOptions::Gemm::kBlas (op/matmul.h): the prefill
// path multiplies dequantized float32 tiles with the library's sgemm
// instead of nibble's fixed-order dot. Built when CMake finds Debian's
// single-threaded OpenBLAS (libopenblas-serial-dev; NIBBLE_BLAS): nibble's
// own threads each call it on their own tiles, so a library that started
// threads of its own inside each of them would oversubscribe the cores.
// Concurrent calls are safe there: Debian builds it with its allocator
// locked (USE_LOCKING; `objdump -d` shows blas_memory_alloc spinning on its
// lock), and the tests call it from 2-3 threads at once on every layout.
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
// Single-threaded (the serial library), safe to call from several threads
// at once on disjoint y; every dimension at most kBlasMaxDim; y overlaps
// neither x nor w.
void BlasGemm(const float* x, int64_t m, int64_t ldx, const float* w, bool w_rows_are_features,
              int64_t ldw, int64_t n, int64_t k, bool accumulate, float* y, int64_t ldy);

}  // namespace nibble

#endif  // NIBBLE_KERNELS_BLAS_GEMM_H_
