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
#include "snip/recipe_name.h"

namespace snip {

// A scaling recipe (METHOD.md section 2): `snip` (default), `mx`, `nvfp4`, `tensor`, or a point of
// the scaling-granularity family between them: `block:N`, `block:row`, `channel`, each with an
// optional `:sr` (snip/recipe_name.h has the grammar, docs/FORMATS.md section 7 the layouts).
struct RecipeOptions {
  std::string name = "snip";              // any form parse_recipe_name accepts; Recipe keeps its canonical spelling
  E8M0Mode scale_mode = E8M0Mode::rceil;  // mx (and nvfp4's fp8 layers)
  bool fp8_gradients_e5m2 = false;        // fp8 dY in E5M2 instead of E4M3
  bool hadamard_wgrad = false;            // nvfp4 only: 16×16 RHT on wgrad operands
  bool bf16_output = true;                // round GEMM outputs to BF16
};

class Recipe {
 public:
  explicit Recipe(RecipeOptions options = {});  // throws snip::Error for a name parse_recipe_name rejects
  static Recipe named(const std::string& name) { return Recipe(RecipeOptions{name}); }
  const RecipeOptions& options() const { return options_; }
  const std::string& name() const { return options_.name; }
  const RecipeName& parsed() const { return parsed_; }

  // Spec for operand `op` of GEMM `g` at precision `p`, for the operand as stored
  // (X, W, dY in their row-major shapes above): the block runs along the GEMM's reduction
  // dimension (fprop: K, dgrad: N, wgrad: T), 2D blocks for weights where the recipe says so.
  QuantSpec spec(Precision p, Gemm g, Operand op) const;

 private:
  RecipeOptions options_;
  RecipeName parsed_;
};

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

}  // namespace snip
