// Scaling recipes (METHOD.md section 2 table): each operand's QuantSpec along the GEMM's
// reduction dimension (snip/recipe.h).
#include "snip/recipe.h"

#include <string>
#include <utility>

#include "snip/error.h"

namespace snip {

Recipe::Recipe(RecipeOptions options) : options_(std::move(options)), parsed_(parse_recipe_name(options_.name)) {
  options_.name = parsed_.canonical;
  if (options_.hadamard_wgrad && parsed_.kind != RecipeName::Kind::nvfp4)
    throw Error("the random Hadamard transform on wgrad operands is an nvfp4 option; recipe '" + options_.name +
                "' does not support it (use --recipe nvfp4 or turn the Hadamard option off)");
}

QuantSpec Recipe::spec(Precision p, Gemm g, Operand op) const {
  QuantSpec s;
  s.e8m0_mode = options_.scale_mode;
  if (p == Precision::fp32) return s;  // identity
  if (p == Precision::bf16) {          // BF16 is never scaled
    s.format = ElemFormat::bf16;
    return s;
  }
  const bool fp4 = p == Precision::fp4;
  s.format = fp4 ? ElemFormat::e2m1
                 : (op == Operand::gradient && options_.fp8_gradients_e5m2 ? ElemFormat::e5m2 : ElemFormat::e4m3);

  // Does the reduction dimension run down the rows of the operand as stored? fprop Y = X·Wᵀ
  // reduces over K (columns of X and W); dgrad dX = dY·W over N (columns of dY, rows of W);
  // wgrad dW = dYᵀ·X over T (rows of dY and X).
  const bool down_rows = g == Gemm::wgrad || (g == Gemm::dgrad && op == Operand::weight);
  auto tile = [&](int b) {  // 1×b along the reduction dimension
    s.block_rows = down_rows ? b : 1;
    s.block_cols = down_rows ? 1 : b;
  };
  using Kind = RecipeName::Kind;
  const Kind kind = parsed_.kind;
  const bool nvfp4_fp4 = kind == Kind::nvfp4 && fp4;
  if (kind == Kind::snip) {
    s.scale = ScaleKind::fp32;
    if (op == Operand::weight) {
      s.block_rows = s.block_cols = 128;  // 2D: the row- and column-wise copies of W agree
    } else {
      tile(128);
    }
    if (fp4 && op == Operand::gradient) s.rounding = Rounding::stochastic;
  } else if (kind == Kind::mx || (kind == Kind::nvfp4 && !fp4)) {
    s.scale = ScaleKind::e8m0;
    tile(32);
  } else if (nvfp4_fp4) {
    s.scale = ScaleKind::nvfp4;
    if (op == Operand::weight) {
      s.block_rows = s.block_cols = 16;
    } else {
      tile(16);
    }
    if (op == Operand::gradient) s.rounding = Rounding::stochastic;
  } else {  // the granularity family: block:N / block:row, channel, tensor (FP32 scales)
    s.scale = ScaleKind::fp32;
    if (kind == Kind::block || (kind == Kind::channel && op == Operand::weight)) {
      tile(kind == Kind::block ? parsed_.block : 0);  // 0: the whole line along the reduction
    } else {
      s.block_rows = s.block_cols = 0;  // per tensor
    }
    if (fp4 && op == Operand::gradient && parsed_.gradient_sr) s.rounding = Rounding::stochastic;
  }
  return s;
}

}  // namespace snip
