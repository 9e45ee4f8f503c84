// Budget sweeps: for every budget × method, the plan and its predicted quality under SNIP's
// costs (Σ Q, ΔL, ΔW) — the budget-vs-quality tradeoff curves the CLI and the GUI draw.
#pragma once
#include <string>
#include <vector>

#include "snip/planner.h"

namespace snip {

struct SweepOptions {
  std::vector<double> budgets;  // ρ values, each in [0, 1]
  std::vector<Method> methods;  // in output order
  int random_seeds = 3;         // `random` runs with seeds request.seed .. request.seed + k − 1
  PlanRequest request;          // everything but budget and seed is shared by all points
};

struct SweepPoint {
  double budget = 0;
  std::string method;  // method name; "random" rows also carry their seed
  uint64_t seed = 0;
  bool ok = false;  // false: `error` says why this point has no plan (e.g. infeasible)
  std::string error;
  PlanResult result;
  // Other methods (names) that produced exactly this plan at the same budget: one piece of
  // evidence, not several.
  std::vector<std::string> same_plan_as;
};

// Runs every point; an infeasible point is recorded with its error, not thrown. Throws
// snip::Error only for a bad option (empty lists, a budget outside [0, 1]).
std::vector<SweepPoint> run_sweep(const PlannerInput& input, const SweepOptions& options);

// "0,0.05,...,1" style lists: either explicit values or "a:b:step" ranges, comma separated.
std::vector<double> parse_budget_list(const std::string& text);
std::vector<Method> parse_method_list(const std::string& text);

}  // namespace snip
