// The planner's input: per selectable layer its FLOPs and a cost per precision (and per GEMM
// role), built from a statistics round's estimates or imported from a CSV file so plans can be
// made for models trained elsewhere (a real TinyLlama-1.1B, a 70B shape with 560 layers).
//
// CSV format (header required, columns in any order, '#' starts a comment line):
//   layer,precision,cost,flops[,role]
//   model.layers.0.self_attn.q_proj,fp8,0.0012,3.4e9
//   model.layers.0.self_attn.q_proj,fp4,0.0310,3.4e9
// layer: HF module name; precision: fp8 | fp4 | bf16 (optional third choice); cost: ≥ 0, finite;
// flops: the layer's FLOPs per step, all three GEMMs (only ratios matter; the same on every
// row of a layer). With a `role` column (fprop | backward) every layer × precision needs both
// roles; that enables per-role planning, whose FLOPs split 1/3 : 2/3.
#pragma once
#include <array>
#include <string>
#include <vector>

#include "snip/estimator.h"
#include "snip/layers.h"
#include "snip/precision.h"

namespace snip {

struct CostLayer {
  std::string name;  // HF module name
  int block = 0;
  LayerType type = LayerType::q;
  double flops = 0;  // FLOPs of the layer per step, all three GEMMs (fprop 1/3, backward 2/3)
  // The method's cost per role and precision; the whole-layer cost is the sum of the roles.
  // Tables without role information keep the whole cost in Role::fprop and 0 in Role::backward.
  std::array<PerPrecision, kNumRoles> cost{};
  // SNIP's prediction for reporting a plan's quality (NaN when unknown, e.g. imported costs):
  // ΔL depends on the fprop precision, ΔW on the backward precision (raw, unnormalised), and
  // Q per role (Q_fprop = ΔL̂, Q_backward = λ·ΔŴ).
  PerPrecision pred_dl{kNaN, kNaN, kNaN, kNaN};
  PerPrecision pred_dw{kNaN, kNaN, kNaN, kNaN};
  std::array<PerPrecision, kNumRoles> pred_q{};

  double total_cost(Precision p) const { return cost[0][int(p)] + cost[1][int(p)]; }
  bool has(Precision p) const { return !std::isnan(cost[0][int(p)]); }
};

// The largest FLOP count or cost a planner input may hold: far beyond any real layer, and small
// enough that the sums over every layer (the budget, the objective) stay finite.
inline constexpr double kMaxCostValue = 1e30;

// Refuses a table whose FLOPs or costs are not finite and within kMaxCostValue, naming the layer,
// the field and `table.source`. Every planner input passes through it.
struct CostTable;
void check_cost_values(const CostTable& table);

struct CostTable {
  std::string kind;               // "snip", "min-err", "min-rel-err", "imported"
  std::string source;             // where the costs came from (file name, statistics round)
  std::string recipe;             // the scaling recipe the costs were measured under ("": not known)
  bool has_roles = false;         // costs split by role: per-role planning possible
  bool has_divergences = false;   // pred_dl / pred_dw are known
  std::vector<CostLayer> layers;  // sorted by (block, type)
};

// Kind of costs to take from estimates (METHOD.md section 8).
enum class CostKind { snip, min_err, min_rel_err, hawq };
const char* cost_kind_name(CostKind k);  // "snip" "min-err" "min-rel-err" "hawq"

// From a statistics round's estimates. BF16 costs that the round did not measure are 0 (BF16 is
// the reference the divergences are measured against). The SNIP prediction fields are filled
// from the same estimates whatever the kind, so every plan can be rated under SNIP's costs.
CostTable cost_table_from_estimates(const Estimates& est, CostKind kind);

// CSV import. Throws snip::Error with `source` and the line number for: a missing column, an
// unknown layer name, an unknown precision or role, a negative/NaN/infinite cost or flops, a
// duplicate row, flops that differ between rows of one layer, and a layer lacking fp8 or fp4
// rows (or one role of a precision when the role column is used).
CostTable cost_table_from_csv(const std::string& text, const std::string& source = "costs.csv");
CostTable read_cost_csv(const std::string& path);
// Writes the table in the format above (with the role column when has_roles).
std::string cost_table_to_csv(const CostTable& table);

}  // namespace snip
