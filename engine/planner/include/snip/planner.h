// The SNIP planner: the ILP of METHOD.md section 7 solved with GLPK, the baselines of
// section 8 behind one entry point (make_plan), and a brute-force reference twin.
//
//   variables  x_{l,p} ∈ {0,1}  (x_{l,r,p} per GEMM role r with per_role)
//   minimize   Σ cost_l(p)·x_{l,p}
//   subject to Σ_p x_{l,p} = 1                        every layer (and role)
//              Σ_l F_l·x_{l,fp4} ≥ ρ·Σ_l F_l            FP4 FLOP fraction (per stage with stages > 1)
//              Σ_l F_l·x_{l,bf16} ≤ β·Σ_l F_l           with allow_bf16 (β = bf16_max_fraction)
//              x_q = x_k = x_v, x_gate = x_up           with ties (solved as one merged variable)
//              x_{b,t} = x_{b mod c,t}                  with a pipeline layout of c-block chunks (merged too)
//              x_{l,p} fixed                            for user pins
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snip/cost_table.h"
#include "snip/defaults.h"
#include "snip/estimator.h"
#include "snip/plan.h"

namespace snip {

// hawq: HAWQ-V3 (Yao et al. 2021), the ILP on tr(H_W)/|W|·‖Q(W) − W‖²; needs a statistics round
// with the weight-Hessian trace (hessian_probes > 0).
// fp4-<role>-only: uniform FP4 in one GEMM role of every layer, FP8 in the other two: which role
// carries FP4's damage (a third of the FLOPs each; a reference point, not a budget solution).
enum class Method {
  snip,
  min_err,
  min_rel_err,
  e_layer_type,
  e_layer_id,
  random,
  uniform_bf16,
  uniform_fp8,
  uniform_fp4,
  hawq,
  fp4_fprop_only,
  fp4_dgrad_only,
  fp4_wgrad_only
};
inline constexpr std::array<Method, 13> kAllMethods = {
    Method::snip,           Method::min_err,        Method::min_rel_err,   Method::e_layer_type, Method::e_layer_id,
    Method::random,         Method::uniform_bf16,   Method::uniform_fp8,   Method::uniform_fp4,  Method::hawq,
    Method::fp4_fprop_only, Method::fp4_dgrad_only, Method::fp4_wgrad_only};
const char* method_name(Method m);                            // "snip" "min-err" ... "uniform-fp4" "hawq"
Method parse_method(std::string_view s);                      // throws snip::Error listing the accepted names
std::string method_names(std::string_view separator = ", ");  // every method's name, in kAllMethods order
bool method_uses_ilp(Method m);                               // snip, min-err, min-rel-err, hawq

struct PlanRequest {
  double budget = defaults::kBudget;  // ρ: required FP4 fraction of the selectable linear FLOPs, in [0, 1]
  bool per_role = false;              // choose fprop and (dgrad, wgrad) separately (FLOPs 1/3 : 2/3)
  bool ties = false;                  // q/k/v and gate/up of a block share one precision (fused kernels)
  int stages = 1;                     // pipeline stages (contiguous blocks); each meets ρ on its own FLOPs
  PipelineLayout pipeline;            // Megatron's layout: one precision per type and stage-local position
  bool allow_bf16 = false;            // BF16 as a third choice ...
  double bf16_max_fraction = defaults::kBf16MaxFraction;  // ... on at most this fraction of the FLOPs (its budget term)
  std::map<std::string, Precision> pins;                  // HF module name -> precision (all roles)
  uint64_t seed = 1;                                      // `random` baseline
  double mip_gap = 0.0;       // relative MIP gap at which GLPK may stop (0: prove optimality)
  int time_limit_ms = 20000;  // GLPK time limit; on expiry the best plan found is returned with its gap
};

// What a plan puts on one layer of the table: the fprop role and the backward (dgrad, wgrad) role.
using RoleChoice = std::array<Precision, kNumRoles>;

struct PlanResult {
  std::string method;              // method_name(...)
  Plan plan;                       // the snip-plan/1 plan (budget, achieved fraction, provenance filled)
  std::vector<RoleChoice> choice;  // aligned with CostTable::layers
  std::string status;              // "optimal", "feasible" (gap > 0 or time limit), "rule" (non-ILP baselines)
  double objective = kNaN;         // Σ of the method's own costs over the chosen precisions (ILP methods)
  double predicted_q = kNaN;       // Σ SNIP Q of the plan (the imported cost for imported tables)
  double predicted_dl = kNaN;      // Σ ΔL of the plan (raw, unnormalised; NaN for imported costs)
  double predicted_dw = kNaN;      // Σ ΔW of the plan
  double budget = 0;               // requested ρ
  double achieved_fraction = 0;    // exact FP4 FLOP fraction of the plan
  double mip_gap = kNaN;           // relative gap |best bound − objective| / |objective| (0 = proven optimal)
  double solve_ms = 0;             // wall time of the solve (ILP) or rule
  std::vector<std::string> notes;  // e.g. e-layer-id spill, random draws, "does not meet the budget"
  bool meets_budget() const { return achieved_fraction >= budget; }
};

// Planner input: SNIP's costs and, when the statistics allow, the local-error baselines' costs.
struct PlannerInput {
  CostTable snip;                        // SNIP's Q (or the imported costs)
  std::optional<CostTable> min_err;      // only from statistics
  std::optional<CostTable> min_rel_err;  // only from statistics
  std::optional<CostTable> hawq;         // only from statistics with the weight-Hessian trace
};
PlannerInput planner_input_from_stats(const StatsRound& round, const EstimatorOptions& options = {});
PlannerInput planner_input_from_costs(CostTable imported);
// From files: exactly one of a snip-stats/1 JSON file and a cost CSV (the other empty).
PlannerInput read_planner_input(const std::string& stats_path, const std::string& costs_path,
                                const EstimatorOptions& options = {});

// "model.layers.3.mlp.down_proj=fp8" -> (name, precision); throws snip::Error on bad syntax.
std::pair<std::string, Precision> parse_pin(const std::string& text);
// Adds one --pin to a request's pins; pinning a layer twice to different precisions is an error
// (a std::map insert would silently keep the first).
void add_pin(std::map<std::string, Precision>& pins, const std::string& text);

// One plan by any method. Every result is rated under SNIP's costs (predicted_*). Throws
// snip::Error for infeasible requests naming the cause (ρ outside [0, 1], pins or ties that make
// ρ unreachable, a stage that cannot reach its budget, min-err on imported costs, ...).
PlanResult make_plan(const PlannerInput& input, Method method, const PlanRequest& request);

// The ILP on one cost table with GLPK (glp_intopt, presolve on, messages off). The budget
// constraint is re-checked in double precision on the integral solution and tightened when
// GLPK's tolerances let it slip. `prediction` (default: `costs` itself) rates the plan.
PlanResult solve_ilp(const CostTable& costs, const PlanRequest& request, const CostTable* prediction = nullptr);

// Reference twin of solve_ilp: enumerates every assignment (≤ 20 decision units after ties,
// per role counting twice). Same result contract; status "optimal"; the test oracle.
PlanResult solve_exhaustive_ref(const CostTable& costs, const PlanRequest& request);

// Checks a request against a table before solving: ρ in [0, 1], pins name table layers and are
// consistent with ties, and the largest reachable FP4 fraction (globally and per stage) is ≥ ρ.
// Throws snip::Error naming the cause, e.g. "budget 0.95 is unreachable: with the 3 pinned
// FP8 layers the largest possible FP4 fraction is 0.9100".
void check_feasible(const CostTable& costs, const PlanRequest& request);

// Contiguous pipeline stages: stage index per table layer (blocks split as evenly as possible,
// earlier stages taking the extra block). Throws snip::Error when stages < 1 or > blocks.
std::vector<int> stage_of_layers(const CostTable& costs, int stages);

// Exact FP4 FLOP fraction of a choice on a table (fprop role 1/3, backward role 2/3 of F_l).
double achieved_fp4_fraction(const CostTable& costs, const std::vector<RoleChoice>& choice);

// Fills result.plan (snip-plan/1) and the predicted_* fields from a choice.
void finish_result(PlanResult& result, const CostTable& prediction, const PlanRequest& request);

// Groups results whose plans assign the same precisions to every layer (indices into
// `results`; singleton groups included, in first-appearance order). When two methods produce
// the same plan they are one piece of evidence, not two (METHOD.md section 8).
std::vector<std::vector<size_t>> group_identical_plans(const std::vector<PlanResult>& results);

}  // namespace snip
