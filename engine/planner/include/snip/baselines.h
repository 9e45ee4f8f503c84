// The rule-based baselines of METHOD.md section 8. All meet the same FP4 FLOP target ρ as
// SNIP (per pipeline stage when stages > 1, each stage treated as a model of its own), honour
// pins and ties (a tie group moves as one unit), and assign one precision to all roles of a
// layer. Cost-based baselines (min-err, min-rel-err) are the ILP on other costs (planner.h).
#pragma once
#include <cstdint>

#include "snip/cost_table.h"
#include "snip/planner.h"

namespace snip {

// e-layer-type: FP4 by layer type in the fixed order gate, up, down (the MLP), then o, v, k, q;
// within a type by block index; one layer (tie group) at a time until ρ is met.
PlanResult plan_e_layer_type(const CostTable& costs, const PlanRequest& request);

// e-layer-id: fill FP4 by flattened layer index from the middle outwards (ties broken towards
// the lower index), so the first and last blocks come last; when the middle blocks cannot reach
// ρ the fill spills into the outer blocks in the same order, and a note says so.
PlanResult plan_e_layer_id(const CostTable& costs, const PlanRequest& request);

// random: a uniformly random order of layers (tie groups) filled into FP4 until ρ is met;
// redrawn when ρ_achieved > ρ + 0.01, keeping the closest of at most `max_draws` draws.
// Reproducible by seed on every platform (mt19937_64 + an explicit Fisher–Yates shuffle).
PlanResult plan_random(const CostTable& costs, const PlanRequest& request, uint64_t seed, int max_draws = 1000);

// uniform-*: one precision everywhere (pins still honoured). A note says when ρ is not met.
PlanResult plan_uniform(const CostTable& costs, const PlanRequest& request, Precision p);

// fp4-<role>-only: FP4 in GEMM role `role` of every layer, FP8 in the other two (pinned layers
// keep their pin on every GEMM). A note says when ρ is not met.
PlanResult plan_fp4_in_role(const CostTable& costs, const PlanRequest& request, Gemm role);

}  // namespace snip
