// Block-scaled E2M1 × E2M1 GEMM on exact integer block sums (docs/FORMATS.md section 6.4).
//
// Every E2M1 value times 2 is an integer in [-12, 12], so the dot product of two operands over
// a run of K that shares one scale per operand (a "chunk") is an exact int32 sum of products of
// int8 codes. The GEMM computes those sums (AVX512-VNNI vpdpbusd where the CPU has it, a
// portable scalar loop otherwise, the same integers either way), scales each by the two
// operands' block scales and accumulates the chunks of K in FP32 in increasing order:
//     C[m,n] = (…((0 + S₀·p₀) + S₁·p₁) + …),  p_c = fl(sa[m,c] · fl(sb[n,c]·0.25)),
// every product and sum rounded to FP32, no FMA. The same operations in the same order on every
// CPU and for every thread count, so the result is bit-identical everywhere.
#pragma once
#include <cstdint>

#include "snip/quant.h"

namespace snip {

// Number of block scales quantize_e2m1_code2 writes for a (rows, cols) operand: one per
// (block_rows × block_cols) block, [block row][block col].
int64_t e2m1_scale_count(int64_t rows, int64_t cols, const QuantSpec& spec);

// E2M1 quantization of x (rows, cols) with `spec` straight into what the GEMM reads: code2[i] =
// 2·q[i] (int8 in [-12, 12], row-major like x) and each block's decode scale. Exactly the
// quantization of fake_quantize (same scales, same rounding, same stochastic-rounding bits):
// fl((code2[i] / 2) · scale(block of i)) equals fake_quantize's output bit for bit. Non-finite
// input throws snip::Error naming `tensor_name`. spec.format must be e2m1 with a scale.
void quantize_e2m1_code2(int8_t* code2, float* scales, const float* x, int64_t rows, int64_t cols,
                         const QuantSpec& spec, const RngKey& key, const char* tensor_name);

// One GEMM operand as a logical (i, k) matrix, k the reduction dimension, over the output of
// quantize_e2m1_code2: code of (i, k) at code2[i·code_rs + k·code_cs], scale of the block of
// (i, k) at scales[(i / block_i)·scale_rs + (k / block_k)·scale_cs].
struct E2M1Operand {
  const int8_t* code2 = nullptr;
  int64_t code_rs = 0, code_cs = 1;
  const float* scales = nullptr;
  int64_t scale_rs = 0, scale_cs = 0;
  int64_t block_i = 1, block_k = 1;
};

// The operand view of a stored (rows, cols) matrix quantized with `spec`; the reduction runs
// along its columns (reduce_along_cols, e.g. fprop's X and W) or down its rows (wgrad's dY, X).
E2M1Operand e2m1_operand(const int8_t* code2, const float* scales, int64_t rows, int64_t cols, const QuantSpec& spec,
                         bool reduce_along_cols);

// Length of the K chunks the GEMM sums exactly, or 0 when the two operands' blocks along K do
// not nest (every chunk must lie inside one block of each operand): the smaller block length
// along K, or min(K, 4096) when both operands have one block along K.
int64_t qgemm_e2m1_chunk(const E2M1Operand& A, const E2M1Operand& B, int64_t K);

// C(M,N) (row stride ldc) = Σ_k A(m,k)·B(n,k) as described above; C is overwritten.
// Requires qgemm_e2m1_chunk(A, B, K) > 0. Runs on the shared thread pool (quant_threads()).
void qgemm_e2m1(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const E2M1Operand& A, const E2M1Operand& B);

// Which GEMM the quantized linear layers use for FP4 operands:
//  automatic: the integer GEMM with the VNNI kernel when the CPU has AVX512-VNNI, else scalar;
//  scalar:    the integer GEMM with the portable scalar kernel (same bits, slow; for tests);
//  sgemm:     the previous path: dequantize to FP32 and cblas_sgemm (different summation order).
// The default is read once from SNIP_QGEMM=auto|scalar|sgemm (unset: automatic).
enum class QGemmMode : uint8_t { automatic, scalar, sgemm };
void set_qgemm_mode(QGemmMode m);
// SNIP_QGEMM's value as a mode (null or empty: automatic); anything else throws snip::Error.
QGemmMode parse_qgemm_mode(const char* value);
QGemmMode qgemm_mode();
bool qgemm_cpu_has_vnni();

}  // namespace snip
