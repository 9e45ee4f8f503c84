// Scaling recipes (METHOD.md section 2 table): the QuantSpec of every GEMM operand at every
// precision. The recipe-name grammar itself is in snip_core (snip/recipe_name.h); this is the
// numerics side that turns a parsed name into element formats, scales and block shapes.
#pragma once
#include <string>

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

}  // namespace snip
