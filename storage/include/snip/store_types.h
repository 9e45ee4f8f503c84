// Value types of the experiment store: what a run, a metrics row, a stored plan, a plan
// timeline entry, a validation result and a plan comparison look like to callers (CLI, GUI, trainer). Plain
// structs only: no SQLite types cross this boundary. Times are Unix milliseconds (UTC).
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snip/layers.h"
#include "snip/plan.h"

namespace snip {

// running: a live process owns the run. interrupted: its process died (kill -9, power loss)
// or stopped on request before the end; it can be resumed from its last checkpoint.
enum class RunStatus { running = 0, finished = 1, failed = 2, interrupted = 3 };
const char* run_status_name(RunStatus s);        // "running" "finished" "failed" "interrupted"
RunStatus parse_run_status(std::string_view s);  // throws snip::Error naming the accepted values

// What the caller says about a run when it creates it.
struct RunSpec {
  std::string name;
  ModelDims dims;                                          // fixes every linear layer's shape
  nlohmann::json model_config = nlohmann::json::object();  // full HF-style config.json (vocab, seq len, ...)
  nlohmann::json train_config = nlohmann::json::object();  // lr schedule, steps, batch, replan_every, ...
  std::string data_source;                                 // corpus path or dataset id
  std::string recipe = "snip";                             // scaling recipe (METHOD.md section 2)
  int64_t seed = 0;
  std::string method;                    // "snip", "uniform-fp4", "manual", ...
  std::optional<int64_t> plan_id;        // initial plan (plans table), when there is one
  std::optional<int64_t> parent_run_id;  // branched from this run ...
  std::optional<int64_t> parent_step;    // ... at this step's checkpoint
  std::string notes;
};

struct Checkpoint {
  int64_t step = 0;
  std::string path;
  int64_t created_ms = 0;
  bool operator==(const Checkpoint&) const = default;
};

// A run as stored.
struct RunInfo {
  int64_t id = 0;
  RunSpec spec;
  RunStatus status = RunStatus::running;
  std::string status_message;  // why it failed / was interrupted (empty otherwise)
  int64_t started_ms = 0;
  std::optional<int64_t> ended_ms;
  int64_t last_step = -1;   // highest committed metrics step, -1 before the first
  int64_t metric_rows = 0;  // committed metrics rows
  // The process that owns a running run (used to detect runs left behind by a dead process).
  int64_t owner_pid = 0;
  std::string owner_host;
  int64_t heartbeat_ms = 0;             // last write by the owner
  std::vector<Checkpoint> checkpoints;  // ascending step
};

// One training step's metrics (one row of the narrow metrics table, keyed by (run, step)).
// Optional values are NULL in the database when absent.
struct MetricRow {
  int64_t step = 0;
  double train_loss = 0.0;
  std::optional<double> val_loss;  // when evaluated this step
  double lr = 0.0;
  double grad_norm = 0.0;
  double tokens_per_s = 0.0;
  double fp4_fraction = 0.0;       // achieved FP4 FLOP fraction ρ of the plan in effect
  std::optional<double> bf16_gap;  // live loss gap to a BF16 probe, when probed this step
  bool operator==(const MetricRow&) const = default;
};

// The metrics one can draw as a curve.
enum class Metric { train_loss, val_loss, lr, grad_norm, tokens_per_s, fp4_fraction, bf16_gap };
const char* metric_name(Metric m);           // the column name: "train_loss", "val_loss", ...
Metric parse_metric(std::string_view name);  // throws snip::Error naming the accepted values

struct CurvePoint {
  int64_t step = 0;
  double value = 0.0;
  bool operator==(const CurvePoint&) const = default;
};

// Everything the planner knows about how a plan was made (the Plan itself carries method,
// budget, achieved fraction, recipe and free-form provenance).
struct PlanSolveInfo {
  std::optional<int64_t> run_id;                      // run the plan was made for / in
  std::optional<int64_t> stats_round_id;              // statistics round it was computed from
  nlohmann::json options = nlohmann::json::object();  // λ, ties, pins, per-role, stages, ...
  std::optional<double> objective;                    // ILP objective Σ Q·x
  std::optional<double> predicted_delta_loss;         // Σ ΔL of the chosen precisions
  std::optional<double> predicted_delta_weight;       // Σ ΔW of the chosen precisions
  std::string solver_status;                          // "optimal", "feasible", "heuristic", ...
  std::optional<double> solve_time_s;
  std::optional<double> mip_gap;
  bool operator==(const PlanSolveInfo&) const = default;
};

struct PlanRecord {
  int64_t id = 0;
  Plan plan;
  PlanSolveInfo solve;
  int64_t created_ms = 0;
};

// The step range during which a plan was in effect in a run (last_step empty while it still is).
struct PlanTimelineEntry {
  int64_t plan_id = 0;
  int64_t first_step = 0;
  std::optional<int64_t> last_step;
  bool operator==(const PlanTimelineEntry&) const = default;
};

// Summary of a stored statistics round (the full round comes from Store::stats_round).
struct StatsRoundInfo {
  int64_t id = 0;
  std::optional<int64_t> run_id;
  int64_t step = 0;
  std::string batch_id;
  std::string recipe;
  int64_t tokens = 0;
  int num_layers = 0;  // stored layers
  int64_t created_ms = 0;
};

// One per-layer value of a stored statistics round (Store::stats_value_series).
struct StatsValuePoint {
  int64_t round_id = 0;
  int64_t step = 0;
  int position = 0;       // the layer's index in the round
  std::string layer;      // its HF module name
  std::string precision;  // "fp8", "fp4", ...
  double value = 0;
};

// METHOD.md section 6: per layer and precision, predicted vs measured divergences as named
// values (key names are defined by engine/planner, e.g. "dl_pred", "dl_true", "dw_true_bwd").
struct ValidationEntry {
  std::string layer;      // HF module name
  std::string precision;  // "fp8", "fp4", ...
  std::map<std::string, double> values;
  bool operator==(const ValidationEntry&) const = default;
};

struct ValidationResult {
  int64_t id = 0;  // set by the store
  std::optional<int64_t> run_id;
  std::optional<int64_t> stats_round_id;
  int64_t step = 0;
  nlohmann::json options = nlohmann::json::object();
  std::map<std::string, double> summary;  // round-wide values, e.g. Spearman per precision
  std::vector<ValidationEntry> entries;
  int64_t created_ms = 0;
};

// One training of one compare arm (replicate r: weights perturbed with seed r, its own
// stochastic-rounding seed; replicate r of every arm starts from the same weights).
struct CompareReplicateRecord {
  double train_loss_last = 0.0;     // mean train loss over the last `last_window` steps
  double val_loss_plan = 0.0;       // after the LR cooldown, forward under the plan
  double val_loss_bf16 = 0.0;       // after the LR cooldown, forward in BF16
  std::vector<double> train_curve;  // train loss of each step
  // false: a placeholder for a training of an unfinished compare that has not run (its losses
  // are NaN); compare_rows gives such a compare every arm's K replicates in replicate order.
  bool finished = true;
  bool operator==(const CompareReplicateRecord&) const = default;
};

// METHOD.md section 6, training truth (`snip compare`): one row of the comparison table, i.e.
// one arm trained from the common checkpoint under one plan. Losses are NaN when unknown
// (e.g. a diverged arm); NaN is stored as NULL and read back as NaN.
struct CompareRowRecord {
  std::string method;              // "uniform-bf16", "snip λ=0.1", "random s1", "control s1 ...", ...
  std::optional<double> lambda;    // SNIP's λ (SNIP arms and the controls)
  std::optional<int64_t> seed;     // random baseline seed, or the control's perturbation seed
  double achieved_fraction = 0.0;  // achieved FP4 FLOP fraction of the arm's plan
  double train_loss_last = 0.0;    // mean train loss over the last `last_window` steps
  double val_loss_plan = 0.0;      // after the LR cooldown, forward under the plan
  double val_loss_bf16 = 0.0;      // after the LR cooldown, forward in BF16
  double gap_train = 0.0;          // train_loss_last − uniform-bf16's
  double gap_val_plan = 0.0;       // val_loss_plan − uniform-bf16's
  double gap_val_bf16 = 0.0;       // val_loss_bf16 − uniform-bf16's
  bool control = false;            // a noise-floor control arm
  // Version 3 compares: |gap_train − SNIP's| > the noise floor; since version 4: the verdict
  // against SNIP (paired_stats.h) is `better` or `worse`. Recompute from `replicates` instead.
  bool differs_from_snip = false;
  std::string same_plan_as;         // earlier row with the identical plan (not trained again), or ""
  std::optional<int64_t> plan_id;   // the arm's plan in the plans table, when stored
  std::vector<double> train_curve;  // train loss of each step, start_step+1 ... start_step+steps
  // The K replicates in order (replicate r at index r − 1); the loss fields above are their
  // means. Empty for compares stored before schema version 4 (one unreplicated run).
  std::vector<CompareReplicateRecord> replicates;
  bool operator==(const CompareRowRecord&) const = default;
};

// One stored training of a compare arm: row `position`, replicate r (from 1). A compare that
// is still running or was interrupted may have some replicates of an arm and not others.
struct StoredCompareReplicate {
  int64_t position = 0;
  int64_t replicate = 0;
  CompareReplicateRecord result;
};

// One `snip compare` experiment: the common setup, the noise floor and (from Store::compare or
// Store::compare_rows) its rows in report order.
struct CompareRecord {
  int64_t id = 0;                         // set by the store
  std::optional<int64_t> run_id;          // the run whose checkpoint was the start, when stored
  std::optional<int64_t> stats_round_id;  // the statistics round the cost-based plans came from
  std::string checkpoint;                 // checkpoint directory
  int64_t start_step = 0;                 // the checkpoint's step
  double budget = 0.0;                    // ρ of every plan
  std::string recipe;                     // "snip" (tiles) or "tensor" (per-tensor FP4), ...
  int64_t steps = 0;                      // training steps per arm
  int64_t cooldown_steps = 0;             // LR cooldown steps before the validation losses
  int64_t eval_batches = 0;
  int64_t last_window = 0;   // train-loss mean window
  double control_rel = 0.0;  // relative weight perturbation of the controls
  double noise_floor_train = 0.0;
  double noise_floor_val = 0.0;
  int64_t replicates = 1;  // K: trainings per arm (1 for compares before version 4)
  // Since version 5: `running` while a process trains it, `interrupted` when stopped (resumable
  // with `snip compare --resume ID`), `failed`, or `finished` (every compare stored before).
  RunStatus status = RunStatus::finished;
  std::string status_message;          // why it failed or stopped
  std::string checkpoint_fingerprint;  // of the checkpoint's files, checked on resume ("" before version 5)
  nlohmann::json options = nlohmann::json::object();  // anything else (seeds, λ list, ...)
  int64_t created_ms = 0;                             // set by the store
  int64_t row_count = 0;                              // set by the store (list_compares leaves rows empty)
  int64_t stored_trainings = 0;                       // set by the store: (arm, replicate) trainings stored
  std::vector<CompareRowRecord> rows;
};

}  // namespace snip
