// `snip validate`: the ablation truth of METHOD.md section 6 — quantize one layer at a time, measure
// the loss and weight-update divergences, and print how well SNIP's estimates and the local-error
// baselines rank the layers (Spearman per precision and for the FP4−FP8 difference).
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "compare_table.h"
#include "measurement.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/experiment_setup.h"
#include "snip/qlinear.h"
#include "snip/store.h"
#include "snip/validate.h"

namespace {

using snip::cli::num_or_null;

struct ValidateCliOptions {
  std::string checkpoint, data, db, recipe, dw_mode = "approx";
  int batches = 8, batch_size = 0, seq_len = 0, noise_passes = 3;
  double lambda = snip::defaults::kLambda;
  uint64_t seed = 1;
  bool no_weights = false, json = false;
};

snip::ValidateOptions validate_options(const ValidateCliOptions& o) {
  snip::ValidateOptions vo;
  vo.batches = o.batches;
  vo.stats.noise_passes = o.noise_passes;
  vo.stats.seed = o.seed;
  vo.estimator.lambda = o.lambda;
  vo.estimator.dw_mode = snip::parse_dw_mode(o.dw_mode);
  vo.stats.exact_weight_divergence = vo.estimator.dw_mode == snip::DwMode::exact;
  vo.weight_truth = !o.no_weights;
  return vo;
}

// The report's round and its validation, in one transaction; returns the validation's id.
int64_t store_validation(snip::Store& store, const snip::ValidationReport& rep, std::optional<int64_t> run_id) {
  snip::Store::Transaction tx(store);
  snip::ValidationResult r;
  r.stats_round_id = store.add_stats_round(rep.rounds.front(), run_id);
  r.run_id = run_id;  // with its round: `snip show --run` and the Plan view find it
  r.step = rep.step;
  r.options = rep.options;
  for (const auto& c : rep.correlations)
    if (std::isfinite(c.spearman))
      r.summary["spearman." + c.predictor + "." + c.truth + "." + c.precision] = c.spearman;
  for (const auto& e : rep.entries) r.entries.push_back({e.layer, snip::precision_name(e.precision), e.values});
  const int64_t id = store.add_validation(r);
  tx.commit();
  return id;
}

void print_validation_json(const ValidateCliOptions& o, const snip::ValidationReport& rep, std::optional<int64_t> id) {
  nlohmann::json j = {{"checkpoint", o.checkpoint}, {"step", rep.step}, {"options", rep.options}};
  j["validation_id"] = id ? nlohmann::json(*id) : nlohmann::json(nullptr);
  for (const auto& c : rep.correlations)
    j["correlations"].push_back({{"predictor", c.predictor},
                                 {"truth", c.truth},
                                 {"precision", c.precision},
                                 {"spearman", num_or_null(c.spearman)},
                                 {"n", c.n}});
  for (const auto& e : rep.entries) {
    nlohmann::json v;
    for (const auto& [k, x] : e.values) v[k] = num_or_null(x);
    j["entries"].push_back({{"layer", e.layer}, {"precision", snip::precision_name(e.precision)}, {"values", v}});
  }
  std::cout << snip::cli::json_text(j, 2) << "\n";
}

// One line per (layer, precision): the measured and the predicted divergences.
void print_validation_entries(const ValidateCliOptions& o, const snip::ValidationReport& rep) {
  std::printf("ablation validation: %s, step %lld, %d batches, recipe %s\n", o.checkpoint.c_str(), (long long)rep.step,
              rep.batches, rep.options.value("recipe", "").c_str());
  std::printf("  %-34s %-4s %11s %11s %11s %11s %11s %11s\n", "layer", "prec", "dL_true", "dL_true(2)", "dL_pred",
              "dW_bwd_true", "dW_pred", "dW_full");
  for (const auto& e : rep.entries) {
    auto v = [&](const char* k) { return e.values.count(k) ? e.values.at(k) : NAN; };
    std::printf("  %-34s %-4s %11.3g %11.3g %11.3g %11.3g %11.3g %11.3g\n", e.layer.c_str(),
                snip::precision_name(e.precision), v("dl_true"), v("dl_true2"), v("snip_dl"), v("dw_true_bwd"),
                v("snip_dw"), v("dw_true_full"));
  }
}

// Predictors by truths: Spearman per precision and for the FP4-FP8 difference.
void print_spearman_table(const snip::ValidationReport& rep, const snip::ValidateOptions& vo) {
  std::printf("\nSpearman rank correlation (per precision and for the FP4-FP8 difference; never pooled)\n");
  const std::vector<std::string> truths =
      vo.weight_truth ? std::vector<std::string>{"dl_true", "dl_true2", "dw_true_bwd", "dw_true_full"}
                      : std::vector<std::string>{"dl_true", "dl_true2"};
  std::printf("  %-13s", "predictor");
  for (const auto& t : truths) std::printf(" | %-25s", t.c_str());
  std::printf("\n  %-13s", "");
  for (size_t i = 0; i < truths.size(); ++i) std::printf(" | %7s %7s %9s", "fp8", "fp4", "fp4-fp8");
  std::printf("\n");
  const bool exact = vo.estimator.dw_mode == snip::DwMode::exact;
  std::vector<std::string> predictors = {"snip_dl", "snip_dw", "snip_q", "min_err", "min_rel_err", "dy_err_sq"};
  if (exact) predictors.insert(predictors.begin() + 2, "snip_dw_exact");
  for (const auto& prs : predictors) {
    const char* pr = prs.c_str();
    std::printf("  %-13s", pr);
    for (const auto& t : truths)
      std::printf(" | %7.3f %7.3f %9.3f", rep.spearman(pr, t, "fp8"), rep.spearman(pr, t, "fp4"),
                  rep.spearman(pr, t, "fp4-fp8"));
    std::printf("\n");
  }
}

// METHOD.md 5.2: the ΔW estimator against backward-only truth, approx beside exact
void print_dw_summary(const snip::ValidationReport& rep, const snip::ValidateOptions& vo) {
  const bool exact = vo.estimator.dw_mode == snip::DwMode::exact;
  auto trio = [&](const char* pr) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.3f / %.3f / %.3f", rep.spearman(pr, "dw_true_bwd", "fp8"),
                  rep.spearman(pr, "dw_true_bwd", "fp4"), rep.spearman(pr, "dw_true_bwd", "fp4-fp8"));
    return std::string(buf);
  };
  std::printf("\ndW vs backward-only truth (Spearman fp8 / fp4 / fp4-fp8): approx %s", trio("snip_dw").c_str());
  if (exact)
    std::printf("   exact %s", trio("snip_dw_exact").c_str());
  else
    std::printf("   (exact: --dw-mode exact)");
  std::printf("\n");
}

void run_validate(const ValidateCliOptions& o) {
  // The database before the work (minutes with many --batches), checked like every writer's.
  snip::cli::Measurement m =
      snip::cli::open_measurement(o.db, o.checkpoint, o.data, o.batch_size, o.seq_len, "validation");
  std::unique_ptr<snip::Store>& store = m.store;
  const std::optional<int64_t> run_id = m.run_id;
  snip::ExperimentSetup& setup = m.setup;
  if (!o.recipe.empty()) setup.model->set_recipe(snip::Recipe::named(o.recipe));
  const snip::ValidateOptions vo = validate_options(o);
  const snip::ValidationReport rep = snip::run_validation(setup, vo);

  std::optional<int64_t> id;
  if (store) id = store_validation(*store, rep, run_id);

  if (o.json) {
    print_validation_json(o, rep, id);
    return;
  }
  print_validation_entries(o, rep);
  print_spearman_table(rep, vo);
  if (vo.weight_truth) print_dw_summary(rep, vo);
  if (id) std::printf("stored validation %lld in %s\n", (long long)*id, o.db.c_str());
}

void setup_validate(CLI::App& app) {
  auto opts = std::make_shared<ValidateCliOptions>();
  auto* cmd =
      app.add_subcommand("validate",
                         "Ablation truth for SNIP's estimators: quantize one layer at a time and rank-correlate "
                         "measured loss/weight divergence with the predictions (METHOD.md section 6)");
  cmd->add_option("--checkpoint", opts->checkpoint, "Training checkpoint directory (snip train --out)")->required();
  cmd->add_option("--batches", opts->batches, "Sequential validation batches to average over")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--recipe", opts->recipe,
                  "Scaling recipe: snip, mx, nvfp4, tensor, block:N, block:row, channel (+ :sr); default: the run's");
  cmd->add_option("--data", opts->data, "Token data; default: the run's data");
  cmd->add_option("--batch-size", opts->batch_size, "Rows B per batch; default: the run's");
  cmd->add_option("--seq-len", opts->seq_len, "Tokens T per row; default: the run's");
  cmd->add_option("--noise-passes", opts->noise_passes, "Noise passes of each statistics round")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--lambda", opts->lambda, "lambda of SNIP's Q");
  cmd->add_option("--dw-mode", opts->dw_mode,
                  "Weight divergence dW's upstream term (METHOD.md 5.2): approx (dgrad error mapped to its residual "
                  "point and spread by Hutchinson gain ratios) or exact (one extra FP32 backward per layer and "
                  "precision seeded with the real dgrad error; slower). exact reports snip_dw_exact beside snip_dw")
      ->check(CLI::IsMember({"approx", "exact"}))
      ->capture_default_str();
  cmd->add_option("--seed", opts->seed, "Seed of the noise and of stochastic rounding");
  cmd->add_flag("--no-weight-truth", opts->no_weights, "Skip the weight-divergence truth (3 fwd+bwd per layer)");
  cmd->add_option("--db", opts->db, "Store the validation result (and its first statistics round) here");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->at_least("--batch-size", opts->batch_size, 1, "leave it out for the run's batch size")
      .at_least("--seq-len", opts->seq_len, 1, "leave it out for the run's sequence length")
      .at_least("--lambda", opts->lambda, 0.0);
  snip::cli::run_checked(cmd, rules, [opts] { run_validate(*opts); });
}
SNIP_REGISTER_COMMAND("validate", setup_validate);

}  // namespace
