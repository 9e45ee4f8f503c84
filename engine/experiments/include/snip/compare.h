// Training truth (METHOD.md section 6): from one checkpoint and with a fixed data order, train N
// steps under each plan at the same FP4 budget — SNIP at several λ, random ×k, min-err,
// min-rel-err, e-layer-type, e-layer-id, uniform BF16/FP8/FP4 — plus the noise-floor control
// (the SNIP λ=0.1 plan rerun from weights perturbed by a relative 1e-4, two seeds). Per plan:
// the mean train loss over the last 50 steps, the validation loss under the plan and under
// BF16 after a short LR cooldown, the gaps to uniform BF16, and whether the gap differs from
// SNIP's by more than the noise floor. Methods that produce the same plan are trained once and
// reported as the same plan.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "snip/planner.h"
#include "snip/stats_round.h"

namespace snip {

struct CompareOptions {
  double budget = 0.75;  // ρ
  int64_t steps = 200;   // training steps per plan
  std::string recipe;    // "" = the checkpoint's recipe; "tensor" = the harsh regime
  int random_seeds = 2;  // random ×k
  std::vector<double> lambdas = {0, 0.1, 0.3, 1};
  int cooldown_steps = 20;    // LR decays linearly to 0 over these extra steps before val
  int eval_batches = 8;       // sequential validation batches
  int last_window = 50;       // train-loss mean over the last this-many steps
  double control_rel = 1e-4;  // weight perturbation of the noise-floor control
  int control_seeds = 2;
  StatsRoundOptions stats;  // the round the cost-based plans come from
};

struct CompareRow {
  std::string method;  // "snip λ=0.1", "random s1", "uniform-fp4", "control s1", ...
  std::optional<double> lambda;  // SNIP's λ (SNIP rows and the controls)
  std::optional<uint64_t> seed;  // the random baseline's seed, or the control's perturbation seed
  Plan plan;
  double achieved_fraction = 0;
  double train_loss_last = 0;      // mean over the last `last_window` steps
  double val_loss_plan = 0;        // after the cooldown, forward under the plan
  double val_loss_bf16 = 0;        // after the cooldown, forward in BF16
  double gap_train = 0;            // train_loss_last − uniform-bf16's
  double gap_val_plan = 0;         // val_loss_plan − uniform-bf16's
  double gap_val_bf16 = 0;         // val_loss_bf16 − uniform-bf16's
  bool control = false;            // a noise-floor control run
  std::string same_plan_as;        // earlier row with the identical plan (not trained again), or ""
  bool differs_from_snip = false;  // |gap_train − SNIP(λ=0.1)'s| > noise floor
  std::vector<std::string> notes;
  std::vector<double> train_curve;  // train loss of each step (a copy of the earlier row's when same_plan_as)
};

struct CompareReport {
  int64_t start_step = 0;
  double budget = 0;
  std::string recipe;
  std::vector<CompareRow> rows;
  double noise_floor_train = 0;  // max |train_loss_last(control) − train_loss_last(SNIP λ=0.1)|
  double noise_floor_val = 0;    // the same for val_loss_plan
  StatsRound round;              // the statistics round the cost-based plans were made from
};

// Progress: (rows done, rows total, method name).
using CompareProgress = std::function<void(int, int, const std::string&)>;

// Runs the comparison from the checkpoint directory (never written). Throws snip::Error for a
// budget no plan can meet, steps < 1, or a bad checkpoint.
CompareReport run_compare(const std::string& checkpoint, const CompareOptions& options,
                          const CompareProgress& progress = {});

}  // namespace snip
