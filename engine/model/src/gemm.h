// The model's one GEMM wrapper, for its fp32 linear layers and attention (llama.cpp,
// llama_ops.cpp): C(M,N) = alpha·op(A)·op(B) + beta·C, row-major, on OpenBLAS; float for
// training, double for the reference twin LlamaRef. Quantized GEMMs go through qlinear.h.
#pragma once
#include <cblas.h>

#include <cstdint>

namespace snip {

inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                 const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}
inline void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
                 const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}

}  // namespace snip
