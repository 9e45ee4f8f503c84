// Helpers shared by the ILP (planner.cpp) and the rule baselines (baselines.cpp); not public API.
#pragma once
#include <array>
#include <vector>

#include "snip/cost_table.h"
#include "snip/planner.h"

namespace snip::detail {

// Indices of table layers that must share a precision: q/k/v and gate/up of a block with
// ties, and with a pipeline layout every block's layer at one stage-local position (the
// layout's chunks name them alike); singletons otherwise. Groups appear in table order of
// their first member.
std::vector<std::vector<int>> tie_groups(const CostTable& costs, const PlanRequest& req);

// FLOPs of each role of a layer: fprop 1/3, (dgrad, wgrad) the rest, so the two add up to F.
inline double role_flops(double f, int role) {
  return role == 0 ? f / 3.0 : f - f / 3.0;
}

// The budget check as the user sees it: the exact FP4 fraction of the whole plan and of every
// pipeline stage is ≥ ρ, recomputed from the per-layer choice.
bool budget_holds(const CostTable& costs, const std::vector<std::array<Precision, 2>>& choice,
                  const std::vector<int>& stage_of, int stages, double budget);

}  // namespace snip::detail
