#include "kernels/blas_gemm.h"

#ifdef NIBBLE_HAVE_BLAS
#include <cblas.h>
#include <omp.h>
#endif

namespace nibble {

#ifdef NIBBLE_HAVE_BLAS

bool BlasAvailable() { return true; }

const char* BlasName() {
  // "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH NO_AFFINITY USE_OPENMP SkylakeX ...":
  // the version, and the kernels it picked for this CPU.
  return openblas_get_config();
}

void BlasGemm(const float* x, int64_t m, int64_t ldx, const float* w, bool w_rows_are_features,
              int64_t ldw, int64_t n, int64_t k, bool accumulate, float* y, int64_t ldy) {
  if (m == 0 || n == 0) return;
  // One thread: OpenBLAS's OpenMP build sizes its team by this thread's
  // omp_get_max_threads() outside an active parallel region (nibble's
  // one-thread teams are inactive ones).
  const int saved = omp_get_max_threads();
  if (saved != 1) omp_set_num_threads(1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, w_rows_are_features ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(m), static_cast<blasint>(n), static_cast<blasint>(k), 1.0f, x,
              static_cast<blasint>(ldx), w, static_cast<blasint>(ldw), accumulate ? 1.0f : 0.0f, y,
              static_cast<blasint>(ldy));
  if (saved != 1) omp_set_num_threads(saved);
}

#else

bool BlasAvailable() { return false; }
const char* BlasName() { return "none"; }
void BlasGemm(const float*, int64_t, int64_t, const float*, bool, int64_t, int64_t, int64_t, bool,
              float*, int64_t) {}

#endif

}  // namespace nibble
