// The scaling-recipe names `--recipe` accepts (docs/FORMATS.md section 7): the four named
// recipes and the parameterised family that spans the scaling granularity between them.
//
//   snip | mx | nvfp4 | tensor          the named recipes (METHOD.md section 2)
//   block:<N>[:sr]                      FP32 scale per 1×N block along the GEMM's reduction
//                                       dimension, every operand (weights too), 2 ≤ N ≤ 4096
//   block:row[:sr]                      one FP32 scale per whole line along the reduction
//                                       (per token for X and dY in fprop/dgrad, per output channel
//                                       for W in fprop)
//   channel[:sr]                        W one scale per line along the reduction, X and dY one
//                                       per tensor (classic per-channel weight quantization)
//   tensor:sr                           per-tensor, with stochastic rounding of FP4 gradients
//
// `:sr` rounds the gradient operand (dY) of FP4 GEMMs stochastically; without it everything
// rounds to nearest-even. `:rne` is accepted as the explicit "no SR". Parsing lives in snip_core
// (no numerics dependency) so a plan file's "recipe" is checked with the same grammar the GEMMs use.
#pragma once
#include <string>
#include <string_view>

namespace snip {

struct RecipeName {
  // How the FP4/FP8 operands are scaled.
  enum class Kind { snip, mx, nvfp4, tensor, block, channel };
  Kind kind = Kind::snip;
  int block = 0;             // Kind::block: elements per scale along the reduction; 0 = the whole line
  bool gradient_sr = false;  // block/channel/tensor: stochastic rounding of FP4 dY (named recipes: their own rule)
  std::string canonical;     // the name written back (runs, plans, tables): e.g. "block:32:sr"
};

inline constexpr int kMinRecipeBlock = 2;
inline constexpr int kMaxRecipeBlock = 4096;

// Parses a --recipe value; throws snip::Error naming the accepted forms for anything else.
RecipeName parse_recipe_name(std::string_view name);

// The accepted forms, for error messages and --help: "snip, mx, nvfp4, tensor, block:N, ...".
const char* recipe_name_forms();

}  // namespace snip
