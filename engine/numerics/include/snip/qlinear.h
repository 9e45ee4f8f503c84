// Quantized linear-layer GEMMs (METHOD.md section 1, FORMATS.md): every operand is
// fake-quantized along the GEMM's reduction dimension with the recipe's spec for its role
// and precision, the product runs in FP32 (cblas_sgemm), the output optionally rounds to BF16.
// Shapes: X (T,K) activations, W (N,K) weight, Y/dY (T,N), dX (T,K), dW (N,K). Row-major.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "snip/precision.h"
#include "snip/quant.h"
#include "snip/recipe.h"

namespace snip {

// Everything a quantized GEMM needs to know besides its operands.
struct QLinearContext {
  const Recipe* recipe = nullptr;
  uint64_t seed = 0;  // stochastic rounding key
  uint64_t step = 0;
  uint32_t layer = 0;                 // layer index (block*7 + type)
  const char* layer_name = "linear";  // used in error messages ("model.layers.3.mlp.up_proj")
};

// Y(T,N) = Q(X)·Q(W)ᵀ
void qlinear_fprop(float* Y, const float* X, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                   const QLinearContext& ctx);
// dX(T,K) = Q(dY)·Q(W)
void qlinear_dgrad(float* dX, const float* dY, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                   const QLinearContext& ctx);
// dW(N,K) = Q(dY)ᵀ·Q(X), or dW += that when accumulate (gradient accumulation).
void qlinear_wgrad(float* dW, const float* dY, const float* X, int64_t T, int64_t K, int64_t N, Precision p,
                   const QLinearContext& ctx, bool accumulate = false);

// Scalar twins of the three GEMMs: operands through fake_quantize_ref (and hadamard16_rows_ref),
// the product as a plain triple loop in double, rounded to FP32 (then BF16 when the recipe
// says so). Equal to the fast GEMMs up to FP32 summation order; slow (tests only).
void qlinear_fprop_ref(float* Y, const float* X, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                       const QLinearContext& ctx);
void qlinear_dgrad_ref(float* dX, const float* dY, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                       const QLinearContext& ctx);
void qlinear_wgrad_ref(float* dW, const float* dY, const float* X, int64_t T, int64_t K, int64_t N, Precision p,
                       const QLinearContext& ctx, bool accumulate = false);

// The stochastic-rounding key the GEMMs use for operand `op` of GEMM `g` (role = 4·g + op).
RngKey qlinear_rng_key(const QLinearContext& ctx, Gemm g, Operand op);

// Exactly the operand the quantized GEMM `g` multiplies: `src` (rows, cols) as stored,
// fake-quantized with ctx.recipe->spec(p, g, op) and qlinear_rng_key, after the nvfp4
// Hadamard rotation along T when that option is on for an fp4 wgrad (the rotation is
// orthogonal, so error norms are the same in either coordinates). For the statistics
// rounds' ‖e_p(·)‖ (pass `stats`). `out` must not alias `src` when the rotation applies.
void qlinear_quantize_operand(float* out, const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                              const QLinearContext& ctx, QuantStats* stats = nullptr);

// ‖y − x‖² of n floats in double, in the statistics rounds' documented order (docs/METHOD.md
// 4.4): element e into partial sum e mod 8, the partials combined as ((s0+s1)+(s2+s3))+((s4+s5)+
// (s6+s7)); on AVX-512 the eight partials are the lanes of one vector, with the same bits.
double sum_sq_diff(const float* y, const float* x, int64_t n);

// One GEMM operand quantized once for both its quantization error and its quantized GEMMs (the
// statistics rounds measure ‖e_p‖ of every operand and multiply the same quantized operands):
// held in the form the GEMM reads -- E2M1 codes and block scales (FP4 on the integer GEMM), BF16
// codes and FP32 block scales (FP8 with FP32 scales on the BF16-element GEMM) or fake-quantized
// FP32 values (E8M0-scaled FP8, BF16, FP32, SNIP_QGEMM=sgemm). The quantization is the GEMMs'
// own, bit for bit: the qlinear_* overloads below give qlinear_*'s results on the source tensors.
class QLinearOperand {
 public:
  // Quantizes src (rows, cols, as stored) as operand `op` of GEMM `g` at precision `p` (after
  // the nvfp4 Hadamard rotation along T where qlinear_wgrad applies it) and returns
  // ‖Q(x) − x‖² (x the rotated source when rotated; the rotation is orthogonal). The sum runs
  // per row in eight partial sums (element c of a row into partial c mod 8), combined as
  // ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)), and the row sums are added in row order: the same
  // bits for every thread count. Buffers are reused by later calls. Throws snip::Error for
  // non-finite input, as the GEMMs do.
  double quantize(const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                  const QLinearContext& ctx);

  enum class Form : uint8_t { values, e2m1_codes, bf16_codes };
  Form form() const { return form_; }
  Precision precision() const { return p_; }
  Gemm gemm() const { return g_; }
  Operand operand() const { return op_; }
  const QuantSpec& spec() const { return spec_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Row r of the quantized values (FP32; decoded for the code forms, where a −0 of
  // fake_quantize comes out as +0: E2M1 codes have no sign of zero) into `out` (cols values).
  void decode_row(float* out, int64_t r) const;

 private:
  friend struct QLinearOperandAccess;
  double error_sq(const float* x) const;

  Form form_ = Form::values;
  Precision p_ = Precision::fp32;
  Gemm g_ = Gemm::fprop;
  Operand op_ = Operand::activation;
  QuantSpec spec_;
  int64_t rows_ = 0, cols_ = 0;
  std::vector<float> values_, scales_, rotated_;
  std::vector<int8_t> code2_;
  std::vector<uint16_t> bits_;
};

// qlinear_fprop / qlinear_dgrad / qlinear_wgrad (not accumulating) on operands quantized by
// QLinearOperand::quantize for their GEMM (the role's spec and stochastic-rounding key):
// bit-identical to the source-tensor versions. A weight quantized for fprop may serve dgrad
// when the recipe quantizes W alike for both without stochastic rounding (snip's 128×128
// blocks). Shapes come from the operands: X (T,K), W (N,K), dY (T,N). (Only where FP4 blocks
// do not nest along K, which no recipe has, the product runs on decoded values, and an output
// that is exactly zero may differ from qlinear_*'s in its sign.)
void qlinear_fprop(float* Y, const QLinearOperand& X, const QLinearOperand& W, const QLinearContext& ctx);
void qlinear_dgrad(float* dX, const QLinearOperand& dY, const QLinearOperand& W, const QLinearContext& ctx);
void qlinear_wgrad(float* dW, const QLinearOperand& dY, const QLinearOperand& X, const QLinearContext& ctx);

}  // namespace snip
