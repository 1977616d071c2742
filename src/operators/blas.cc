// Row-major GEMM through OpenBLAS's CBLAS interface.
#include <cblas.h>

#include <cstdlib>
#include <mutex>

#include "operators/op_common.h"

namespace depengine::op {

void UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Once, and races only with a setenv elsewhere, which would be the caller's.
    const char* env = std::getenv("OPENBLAS_NUM_THREADS");  // NOLINT(concurrency-mt-unsafe)
    if (env == nullptr || *env == '\0') openblas_set_num_threads(1);
  });
}

void Gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void Gemm(bool trans_a, bool trans_b, int m, int n, int k, double alpha, const double* a, int lda,
          const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace depengine::op
