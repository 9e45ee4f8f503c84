// Ablation validation of SNIP's estimators (METHOD.md section 6): quantize one layer at a time
// (all others BF16), measure the true loss and weight-update divergences, and rank-correlate
// them with SNIP's predictions and the local-error baselines — per precision and for the
// FP4−FP8 difference the ILP uses, never pooled over precisions.
//
// Truths per layer l and precision p, averaged over the batches:
//   dl_true      = L(l at p, forward only) − L₀
//   dl_true2     = dl_true − ⟨G_l, δY_l(p)⟩           (its second-order part)
//   dw_true_full = Σ_k ‖u_k' − u_k‖² / ‖u_k‖²  with all three GEMMs of l at p, u the next
//                  AdamW update of every linear layer k (clipping as the trainer does)
//   dw_true_fwd  = the same with only fprop of l at p;  dw_true_bwd: only dgrad + wgrad
// Predictions from a statistics round on the same batch (averaged the same way): snip_dl,
// snip_dw (approx mode, validated against dw_true_bwd), snip_q, min_err, min_rel_err, dy_err_sq
// (‖δY‖²); with the exact ΔW mode (estimator.dw_mode = exact, or stats.exact_weight_divergence)
// also snip_dw_exact, and snip_q then uses the estimator's mode.
#pragma once
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "snip/estimator.h"
#include "snip/experiment_setup.h"
#include "snip/stats_round.h"

namespace snip {

struct ValidateOptions {
  int batches = 8;      // sequential validation batches
  int first_batch = 0;  // ... starting at this one
  std::vector<Precision> precisions = {Precision::fp8, Precision::fp4};
  StatsRoundOptions stats;     // noise passes, seed (lr/step/clip come from the checkpoint)
  EstimatorOptions estimator;  // λ for snip_q
  bool weight_truth = true;    // measure dw_true_* (3 forward+backward per layer × precision)
};

// One layer × precision, averaged over the batches. Keys as in the file comment.
struct AblationEntry {
  std::string layer;
  Precision precision = Precision::fp4;
  std::map<std::string, double> values;
};

struct Correlation {
  std::string predictor;  // snip_dl, snip_dw, snip_dw_exact, snip_q, min_err, min_rel_err, dy_err_sq
  std::string truth;      // dl_true, dl_true2, dw_true_full, dw_true_fwd, dw_true_bwd
  std::string precision;  // "fp8", "fp4" or "fp4-fp8" (the difference per layer)
  double spearman = 0;    // NaN when fewer than 3 layers or a constant column
  int n = 0;
};

struct ValidationReport {
  int64_t step = 0;
  int batches = 0;
  std::vector<AblationEntry> entries;  // layer-major, precisions in option order
  std::vector<Correlation> correlations;
  nlohmann::json options = nlohmann::json::object();
  std::vector<StatsRound> rounds;  // one per batch
  // The correlation for (predictor, truth, precision), NaN when absent.
  double spearman(const std::string& predictor, const std::string& truth, const std::string& precision) const;
};

// Runs the ablation on `setup` (its model's precisions are restored afterwards; weights and
// optimizer are never written). Throws snip::Error when the validation stream is too short.
ValidationReport run_validation(ExperimentSetup& setup, const ValidateOptions& options);

// Spearman rank correlation with average ranks for ties; NaN for n < 3 or a constant input.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace snip
