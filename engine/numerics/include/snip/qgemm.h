// Block-scaled E2M1 × E2M1 GEMM on exact integer block sums (docs/FORMATS.md section 6.4).
//
// Every E2M1 value times 2 is an integer in [-12, 12], so the dot product of two operands over
// a run of K that shares one scale per operand (a "chunk") is an exact int32 sum of products of
// int8 codes. The GEMM computes those sums (AVX512-VNNI vpdpbusd, AVX2 vpmaddubsw or a portable
// scalar loop, by instruction-set tier: snip/isa.h; the same integers either way), scales each by the two
// operands' block scales and accumulates the chunks of K in FP32 in increasing order:
//     C[m,n] = (…((0 + S₀·p₀) + S₁·p₁) + …),  p_c = fl(sa[m,c] · fl(sb[n,c]·0.25)),
// every product and sum rounded to FP32, no FMA. The same operations in the same order on every
// CPU and for every thread count, so the result is bit-identical everywhere.
#pragma once
#include <cstdint>
#include <string>

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

// qgemm_e2m1 in stages, for callers that quantize straight into the layout its kernels read
// (packed codes, block scales and column sums) instead of into row-major codes that are then
// packed: one pass over the FP32 operand instead of three over its codes.
class E2M1Gemm {
 public:
  E2M1Gemm();
  ~E2M1Gemm();
  E2M1Gemm(const E2M1Gemm&) = delete;
  E2M1Gemm& operator=(const E2M1Gemm&) = delete;

  // Fixes the layout for C(M,N) = A·Bᵀ over K from the operands' views (their code and scale
  // pointers are not read). Requires M, N, K > 0 and qgemm_e2m1_chunk(A, B, K) > 0.
  void prepare(int64_t M, int64_t N, int64_t K, const E2M1Operand& A, const E2M1Operand& B);
  // Packs an operand from quantize_e2m1_code2's codes and scales (what qgemm_e2m1 does).
  void pack_a(const E2M1Operand& A);
  void pack_b(const E2M1Operand& B);
  // Quantizes x (rows, cols, as stored) with `spec` straight into the packed layout: the same
  // bytes and scales pack_a / pack_b produce from quantize_e2m1_code2's output for x, whose
  // view (e2m1_operand with reduce_along_cols) must be the one given to prepare. Throws
  // snip::Error naming `tensor_name` for non-finite input.
  void quantize_a(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                  const char* tensor_name, bool reduce_along_cols);
  void quantize_b(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                  const char* tensor_name, bool reduce_along_cols);
  // C (row stride ldc) = the product of the packed operands.
  void run(float* C, int64_t ldc);
  // Empty when this and `other` hold the same layout and bytes, else the first difference (tests).
  std::string packing_difference(const E2M1Gemm& other) const;

  struct Impl;

 private:
  Impl* impl_;
};

// The calling thread's E2M1Gemm (its buffers grow to the largest GEMM and are reused).
E2M1Gemm& e2m1_gemm_workspace();

// ---------------------------------------------------------------------------------------------
// BF16-element GEMM for FP8 and BF16 operands (docs/FORMATS.md section 6.5).
//
// Every E4M3/E5M2 value and every BF16 value is a BF16 value, so the products of two elements
// are exact in FP32. For output (m, n) and each K chunk j (a run of K inside one scale block of
// each operand; the whole of K when neither operand is scaled) the GEMM computes
//     S_j = the sequential FP32 sum over k pairs (2t, 2t+1) of the chunk:
//           s ← fma(a[2t+1], b[2t+1], s); s ← fma(a[2t], b[2t], s),   s starting at +0
// (exactly the order of AVX512-BF16 vdpbf16ps), then C ← fl(C + fl(S_j · fl(sa_j · sb_j))) for
// j = 0, 1, … with C starting at +0. Four kernels compute these same IEEE operations:
// vdpbf16ps (tier avx512bf16, where its flushing of subnormal inputs and results cannot change
// a result, see qgemm_bf16_dpbf16_safe), AVX-512F FMAs on the widened operands (tier avx512),
// AVX2 FMAs (tier avx2) and a portable scalar loop (std::fma). The result is bit-identical on every CPU and for every
// thread count.

// One operand as a logical (i, k) matrix, k the reduction dimension. Element (i, k) is the BF16
// value with bits bits[i·rs + k·cs], or (when bits is null) the FP32 value values[i·rs + k·cs],
// which must be a BF16 value (its low 16 bits zero; qgemm_bf16 checks). Scaled operands (FP8
// codes) multiply the element by scales[(i / block_i)·scale_rs + (k / block_k)·scale_cs];
// scales null means unscaled.
struct Bf16Operand {
  const uint16_t* bits = nullptr;
  const float* values = nullptr;
  int64_t rs = 0, cs = 1;
  const float* scales = nullptr;
  int64_t scale_rs = 0, scale_cs = 0;
  int64_t block_i = 1, block_k = 1;
};

// The operand view of a stored (rows, cols) matrix (bits or values, row-major), with block
// scales laid out as quantize_bf16_codes writes them for `spec` (scales null: unscaled).
Bf16Operand bf16_operand(const uint16_t* bits, const float* values, const float* scales, int64_t rows, int64_t cols,
                         const QuantSpec& spec, bool reduce_along_cols);

// FP8 quantization of x (rows, cols) with `spec` into BF16 codes: bits[i] = the BF16 bits of
// the signed rounded element value q[i] (the value before its block scale, exactly a BF16
// value), scales[block] = the block's decode scale, [block row][block col] as e2m1_scale_count
// counts them. fl(q[i] · scale) equals fake_quantize's output bit for bit. spec.format must
// have at most 7 mantissa bits and a scale (e4m3, e5m2, e3m2, e2m3, e2m1).
void quantize_bf16_codes(uint16_t* bits, float* scales, const float* x, int64_t rows, int64_t cols,
                         const QuantSpec& spec, const RngKey& key, const char* tensor_name);

// Length of the K chunks (the smaller scale block along K of the scaled operands, K when
// neither is blocked along K), or 0 when the two operands' blocks along K do not nest.
int64_t qgemm_bf16_chunk(const Bf16Operand& A, const Bf16Operand& B, int64_t K);

// C(M,N) (row stride ldc) = Σ_k A(m,k)·B(n,k) as described above; C is overwritten.
// Returns false, leaving C unspecified, when an element given as an FP32 value is not a BF16
// value (only FP32 subnormals that BF16 cannot hold, e.g. an E8M0-scaled FP8 value below
// 2^-126): the caller multiplies those in FP32 instead. Requires qgemm_bf16_chunk > 0.
bool qgemm_bf16(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const Bf16Operand& A, const Bf16Operand& B);

// qgemm_bf16 in stages, as E2M1Gemm: operands quantized straight into the packed layout (FP8
// with FP32 block scales as BF16 codes and scales, BF16 as its bits) or packed from codes or
// values.
class Bf16Gemm {
 public:
  Bf16Gemm();
  ~Bf16Gemm();
  Bf16Gemm(const Bf16Gemm&) = delete;
  Bf16Gemm& operator=(const Bf16Gemm&) = delete;

  // Fixes the layout from the operands' views (pointers not read; scales non-null marks a
  // scaled operand). Requires M, N, K > 0 and qgemm_bf16_chunk(A, B, K) > 0.
  void prepare(int64_t M, int64_t N, int64_t K, const Bf16Operand& A, const Bf16Operand& B);
  void pack_a(const Bf16Operand& A);
  void pack_b(const Bf16Operand& B);
  // Quantizes x (rows, cols, as stored) with `spec` straight into the packed layout: the bytes
  // pack_a / pack_b produce from quantize_bf16_codes's output (spec scaled with FP32 scales
  // and at most 7 mantissa bits) or from fake_quantize's BF16 values (spec.format bf16).
  void quantize_a(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                  const char* tensor_name, bool reduce_along_cols);
  void quantize_b(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                  const char* tensor_name, bool reduce_along_cols);
  // As qgemm_bf16: false (C unspecified) when a packed FP32 value was not a BF16 value.
  bool run(float* C, int64_t ldc);
  std::string packing_difference(const Bf16Gemm& other) const;

  struct Impl;

 private:
  Impl* impl_;
};

// The calling thread's Bf16Gemm.
Bf16Gemm& bf16_gemm_workspace();

// Which kernel the last qgemm_bf16 call on this thread ran (for tests).
enum class Bf16Kernel : uint8_t { dpbf16, fma, avx2, scalar };
Bf16Kernel qgemm_bf16_last_kernel();

// Whether vdpbf16ps (which treats subnormal inputs and results as zero) gives the IEEE result
// for operands whose smallest non-zero elements have BF16 biased exponents ea_min, eb_min
// (255: no non-zero element) and which have no subnormal element: every partial sum is a
// multiple of 2^(ea_min−134)·2^(eb_min−134), so it is 0 or at least 2^−126 when
// ea_min + eb_min ≥ 142 (FORMATS.md 6.5).
bool qgemm_bf16_dpbf16_safe(int ea_min, int eb_min, bool any_subnormal);

// Whether every product of an element of A and one of B is exact in FP32, so fma(a, b, s) =
// fl(fl(a·b) + s) and the portable kernel may multiply, then add. The operands' non-zero
// elements have "exponents" ea_min … ea_max, eb_min … eb_max (BF16 biased exponents, a subnormal
// counting as 1; min 255: no non-zero element). A BF16 element is a multiple of 2^(e−134), so a
// product is a multiple of 2^(ea+eb−268): representable (normal or subnormal, a multiple of
// 2^−149) when ea_min + eb_min ≥ 119; it is below 2^(ea_max+eb_max−252), finite when
// ea_max + eb_max ≤ 380; infinities and NaNs (exponent 255) never qualify (FORMATS.md 6.5).
bool qgemm_bf16_products_exact(int ea_min, int ea_max, int eb_min, int eb_max);

// Which GEMM the quantized linear layers use for FP4, FP8 and BF16 operands:
//  automatic: FP4 on the integer GEMM, FP8 and BF16 on qgemm_bf16, each on the kernel of the
//             instruction-set tier (snip/isa.h: SNIP_ISA, else the CPU's best);
//  fma:       as automatic, with the tier at most avx512vnni (qgemm_bf16 never uses vdpbf16ps);
//  scalar:    the portable kernels, as SNIP_ISA=portable (same bits, slow; for tests);
//  sgemm:     the previous path: dequantize to FP32 and cblas_sgemm (different summation order).
// The default is read once from SNIP_QGEMM=auto|fma|scalar|sgemm (unset: automatic).
enum class QGemmMode : uint8_t { automatic, scalar, sgemm, fma };
void set_qgemm_mode(QGemmMode m);
// SNIP_QGEMM's value as a mode (null or empty: automatic); anything else throws snip::Error.
QGemmMode parse_qgemm_mode(const char* value);
QGemmMode qgemm_mode();

}  // namespace snip
