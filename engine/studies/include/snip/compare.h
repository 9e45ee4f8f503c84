// Training truth (METHOD.md section 6): from one checkpoint and with a fixed data order, train N
// steps under each plan at the same FP4 budget — SNIP at several λ, random ×k, min-err,
// min-rel-err, hawq, e-layer-type, e-layer-id, uniform BF16/FP8/FP4 — each K times (replicates).
// Replicate r of every arm starts from the checkpoint's weights perturbed by a relative 1e-4
// (seed r) and uses its own stochastic-rounding seed, so the arms are paired by r. Per plan and
// replicate: the mean train loss over the last 50 steps, the validation loss under the plan and
// under BF16 after a short LR cooldown. The statistics (gaps to BF16 with 95% intervals, paired
// differences to the SNIP reference and verdicts) are computed from these values by
// paired_stats.h. Methods that produce the same plan are trained once and reported as the same plan.
#pragma once
#include <cstdint>
#include <functional>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/planner.h"
#include "snip/stats_round.h"
#include "snip/validate.h"

namespace snip {

struct CompareOptions {
  double budget = defaults::kBudget;                 // ρ
  int64_t steps = defaults::kCompareSteps;           // training steps per plan
  std::string recipe;                                // "" = the checkpoint's recipe; "tensor" = the harsh regime
  int random_seeds = defaults::kCompareRandomSeeds;  // random ×k
  std::vector<double> lambdas{std::begin(defaults::kCompareLambdas), std::end(defaults::kCompareLambdas)};
  int cooldown_steps = defaults::kCompareCooldown;   // LR decays linearly to 0 over these extra steps before val
  int eval_batches = defaults::kCompareEvalBatches;  // sequential validation batches
  int last_window = 50;                              // train-loss mean over the last this-many steps
  int replicates = defaults::kCompareReplicates;     // K: every arm trained K times, paired by replicate
  double replicate_rel = 1e-4;                       // relative weight perturbation of every replicate (seed r)
  StatsRoundOptions stats;                           // the round the cost-based plans come from
  // The oracle arm: the same ILP on the measured per-layer loss damage (the ablation truth
  // dl_true of `snip validate`) on this checkpoint, averaged over `oracle_batches` sequential
  // validation batches. The measured ΔL of one batch is dominated by its first-order term
  // ⟨G_l, δY_l⟩, whose sign changes from batch to batch; averaging n batches shrinks that noise
  // by √n, and 32 batches (8× the 4 that could not rank layers, √8 ≈ 2.8× less noise) is the
  // default that keeps a tiny/small oracle under a few minutes.
  bool oracle = false;
  int oracle_batches = defaults::kCompareOracleBatches;
  // Where the oracle measures: on the validation batches right after the evaluation's
  // (eval_batches .. eval_batches + oracle_batches - 1), so that no arm is judged on the batches
  // its plan was chosen on. Compares stored before this rule measured on batches
  // 0 .. oracle_batches - 1, overlapping the evaluation; resuming one keeps its rule (false).
  bool oracle_disjoint = true;
  // Independent (arm, replicate) trainings run at once, each on its own thread. Never changes a
  // result: while a compare trains, OpenBLAS runs single-threaded (snip/blas_threads.h) whatever
  // `jobs` is, and every training owns its model, optimizer and data loader.
  int jobs = 1;
  // The baseline arms to train (compare_baseline_names(); "random" means every random seed);
  // empty: all but the per-role arms (compare_role_arm_names(), asked for by name). uniform-bf16
  // (the zero of the gaps) and the SNIP arms always run. Fewer arms buy more replicates on a
  // small machine.
  std::vector<std::string> baselines;
  // SNIP and the cost-based baselines plan fprop and the backward GEMMs of each layer separately
  // (PlanRequest::per_role), so their role split can be set against the per-role arms'.
  bool per_role = false;
};

// What the cores allow: one job per hardware thread (each job's GEMMs run on one thread), at
// least 1.
int default_compare_jobs();

// Throws snip::Error for options no compare can run with (an unknown baseline or recipe, steps,
// replicates, jobs or oracle batches < 1, a budget outside [0, 1]): called by run_compare, and by
// a front before it stores anything.
void check_compare_options(const CompareOptions& options);

// check_compare_options, then what needs the checkpoint (it is loaded, with its corpus): that the
// compare fits in memory and that the validation split holds --eval-batches. A front calls it
// before it stores the compare, so a compare that cannot run leaves nothing behind.
void check_compare_setup(const std::string& checkpoint, const CompareOptions& options);

// The first validation batch the oracle measures on (see CompareOptions::oracle_disjoint).
int oracle_first_batch(const CompareOptions& options);

// Every baseline family run_compare knows, in report order.
const std::vector<std::string>& compare_baseline_names();
// The arms with uniform FP4 in one GEMM role and FP8 in the others (fp4-fprop-only,
// fp4-dgrad-only, fp4-wgrad-only): which role carries FP4's damage. Run only when named in
// CompareOptions::baselines.
const std::vector<std::string>& compare_role_arm_names();

// One training of one arm.
struct CompareReplicate {
  double train_loss_last = 0;       // mean over the last `last_window` steps
  double val_loss_plan = 0;         // after the cooldown, forward under the plan
  double val_loss_bf16 = 0;         // after the cooldown, forward in BF16
  std::vector<double> train_curve;  // train loss of each step
};

struct CompareRow {
  std::string method;            // "snip λ=0.1", "random s1", "uniform-fp4", ...
  std::optional<double> lambda;  // SNIP's λ (SNIP rows)
  std::optional<uint64_t> seed;  // the random baseline's seed
  Plan plan;
  double achieved_fraction = 0;
  std::vector<CompareReplicate> replicates;  // K, replicate r at index r − 1
  // Means over the replicates (the gaps are paired by replicate, so also the mean paired gap).
  double train_loss_last = 0;
  double val_loss_plan = 0;
  double val_loss_bf16 = 0;
  double gap_train = 0;      // train_loss_last − uniform-bf16's
  double gap_val_plan = 0;   // val_loss_plan − uniform-bf16's
  double gap_val_bf16 = 0;   // val_loss_bf16 − uniform-bf16's
  std::string same_plan_as;  // earlier row with the identical plan (not trained again), or ""
  std::vector<std::string> notes;
  std::vector<double> train_curve;  // per-step mean over the replicates
};

struct CompareReport {
  int64_t start_step = 0;
  double budget = 0;
  std::string recipe;
  int replicates = 0;                // K
  size_t bf16_row = 0;               // the uniform-bf16 row, the zero of the gaps
  size_t snip_row = 0;               // the SNIP reference row (λ = 0.1, else the first SNIP λ)
  std::optional<size_t> oracle_row;  // with CompareOptions::oracle
  std::vector<CompareRow> rows;
  // Spread (max − min) of the SNIP reference's replicate losses: the old single-number noise
  // floor, kept for the record; NaN with one replicate. The intervals are the evidence.
  double noise_floor_train = 0;
  double noise_floor_val = 0;
  StatsRound round;  // the statistics round the cost-based plans were made from
};

// The oracle's cost table: `like`'s layers (names, FLOPs, SNIP's predictions for rating) with
// every layer's cost the measured ΔL (dl_true) per precision from `truth`, BF16 cost 0, no roles.
// Throws snip::Error when `truth` lacks a layer × precision of the table.
CostTable oracle_cost_table(const ValidationReport& truth, const CostTable& like);

// Progress: (trainings done, trainings total, "method (replicate r/K)").
using CompareProgress = std::function<void(int, int, const std::string&)>;

// Thrown by run_compare when CompareHooks::stop_requested said stop. Every training finished
// before it was reported through on_replicate; the one in flight is dropped.
class CompareStopped : public Error {
 public:
  CompareStopped() : Error("compare: stopped before every arm was trained") {}
};

// One training a compare still needs: its arm (a row of the report) and replicate (from 1).
struct CompareTraining {
  size_t row = 0;
  int replicate = 0;
};

// Runs a compare's trainings somewhere other than this process's threads (a Slurm cluster:
// snip/slurm_compare.h). Called once with the planned report (its plans, start step and recipe)
// and every training still to do; calls `done(i, result)` on the calling thread for each
// finished todo[i], in the order they finish. Throws CompareStopped when the compare's
// stop_requested says stop, snip::Error when a training failed or cannot be run (after handing
// over every training that did finish).
using CompareExecutor = std::function<void(const CompareReport& planned, const std::vector<CompareTraining>& todo,
                                           const std::function<void(size_t, const CompareReplicate&)>& done)>;

// One replicate of one arm, as every compare trains it: resume `checkpoint` (at report step
// `start_step`), perturb every weight by a relative options.replicate_rel (seed = replicate),
// train options.steps steps under `plan` with the recipe, cool down, evaluate. The same bits
// wherever it runs (on any CPU tier for the quantized precisions). Throws CompareStopped when
// stop_requested says stop.
CompareReplicate train_compare_replicate(const std::string& checkpoint, int64_t start_step, const Plan& plan,
                                         const CompareOptions& options, const std::string& recipe, int replicate,
                                         const std::function<bool()>& stop_requested = {});

// Hooks into a running comparison, all optional, all called on the thread that runs it except
// stop_requested, which the job threads also poll (so it must be thread-safe: an atomic flag).
struct CompareHooks {
  CompareProgress progress;
  // Polled before every training step (and between trainings): true stops the comparison,
  // which throws CompareStopped. A GUI's cancel button or a CLI's SIGINT flag.
  std::function<bool()> stop_requested;
  // Every plan is made (report.rows hold the plans, no replicates yet) and training begins: a
  // store records the arms so that each finished training can be stored as it comes.
  std::function<void(const CompareReport& planned)> planned;
  // One (row, replicate) training finished, in the order they finish (replicate-major with one
  // job: every arm's replicate 1, then every arm's replicate 2, ...): a store keeps it so that
  // an interrupted compare can resume. `replicate` counts from 1. With several jobs, trainings
  // that finished before a stop or an error are still reported before run_compare throws.
  std::function<void(const CompareRow& row, int replicate, const CompareReplicate& result)> on_replicate;
  // For a resumed compare: the stored result of (row, replicate), which is then not trained
  // again (and not reported through on_replicate); nullopt trains it.
  std::function<std::optional<CompareReplicate>(const CompareRow& row, int replicate)> stored;
  // Where the trainings run: empty trains them here on options.jobs threads.
  CompareExecutor executor;
};

// Runs the comparison from the checkpoint directory (never written). Throws snip::Error for a
// budget no plan can meet, steps < 1, replicates < 1, or a bad checkpoint; CompareStopped when
// hooks.stop_requested said stop.
CompareReport run_compare(const std::string& checkpoint, const CompareOptions& options, const CompareHooks& hooks);
inline CompareReport run_compare(const std::string& checkpoint, const CompareOptions& options,
                                 const CompareProgress& progress = {}) {
  CompareHooks hooks;
  hooks.progress = progress;
  return run_compare(checkpoint, options, hooks);
}

}  // namespace snip
