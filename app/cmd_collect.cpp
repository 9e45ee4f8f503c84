// `snip collect`: one SNIP statistics round (METHOD.md section 4) on a checkpoint's next training
// batch: writes the raw statistics as a snip-stats/1 file and/or stores them in the database,
// and prints SNIP's per-layer divergence estimates.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "measurement.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/estimator.h"
#include "snip/experiment_setup.h"
#include "snip/stats_round.h"
#include "snip/store.h"

namespace {

struct CollectOptions {
  std::string checkpoint, data, db, out, dw_mode = "approx";
  int batch_size = 0, seq_len = 0, noise_passes = 3, hessian_probes = 0;
  uint64_t seed = 1;
  double lambda = snip::defaults::kLambda;
  bool json = false;
};

double nan_to_null_guard(double v) {
  return std::isfinite(v) ? v : 0.0;
}

void run_collect(const CollectOptions& o) {
  if (!o.out.empty()) snip::checked_write_target(o.out);  // a directory or device: refused before the round
  // The database too, before the round (a damaged or foreign file is refused at once); the round
  // is attached to the run whose checkpoint this is, found from any working directory.
  snip::cli::Measurement m = snip::cli::open_measurement(o.db, o.checkpoint, o.data, o.batch_size, o.seq_len, "round");
  std::unique_ptr<snip::Store>& store = m.store;
  const std::optional<int64_t> run_id = m.run_id;
  snip::ExperimentSetup& setup = m.setup;
  std::vector<int32_t> in, tgt;
  snip::StatsRoundOptions so;
  setup.train_batch(0, in, tgt, &so.batch_id);
  so.noise_passes = o.noise_passes;
  so.hessian_probes = o.hessian_probes;
  so.seed = o.seed;
  so.step = setup.step;
  so.lr = setup.next_lr();
  so.grad_clip = setup.config.grad_clip;
  const snip::DwMode dw_mode = snip::parse_dw_mode(o.dw_mode);
  so.exact_weight_divergence = dw_mode == snip::DwMode::exact;
  const auto t0 = std::chrono::steady_clock::now();
  const snip::StatsRound round = snip::collect_stats_round(*setup.model, *setup.opt, in.data(), tgt.data(), so);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  if (!o.out.empty()) snip::write_file_atomic(o.out, snip::stats_to_json(round));
  std::optional<int64_t> round_id;
  if (store) round_id = store->add_stats_round(round, run_id);
  snip::EstimatorOptions eo;
  eo.lambda = o.lambda;
  eo.dw_mode = dw_mode;
  const snip::Estimates est = snip::estimate_divergences(round, eo);
  const int p8 = int(snip::Precision::fp8), p4 = int(snip::Precision::fp4);

  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const auto& l : est.layers)
      layers.push_back({{"layer", l.name},
                        {"dl_fp8", nan_to_null_guard(l.dl[p8])},
                        {"dl_fp4", nan_to_null_guard(l.dl[p4])},
                        {"dw_fp8", nan_to_null_guard(l.dw[p8])},
                        {"dw_fp4", nan_to_null_guard(l.dw[p4])},
                        {"q_fp8", nan_to_null_guard(l.q[p8])},
                        {"q_fp4", nan_to_null_guard(l.q[p4])}});
    nlohmann::json j = {{"checkpoint", o.checkpoint},
                        {"step", round.step},
                        {"batch_id", round.batch_id},
                        {"tokens", round.tokens},
                        {"seconds", secs},
                        {"dw_mode", o.dw_mode},
                        {"globals", round.globals},
                        {"out", o.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.out)},
                        {"stats_round_id", round_id ? nlohmann::json(*round_id) : nlohmann::json(nullptr)},
                        {"estimates", layers}};
    for (const auto& w : est.warnings) j["warnings"].push_back(w);
    std::cout << snip::cli::json_text(j, 2) << "\n";
    return;
  }
  std::printf("statistics round: %s, step %lld, batch %s (%lld tokens), %.2f s\n", o.checkpoint.c_str(),
              (long long)round.step, round.batch_id.c_str(), (long long)round.tokens, secs);
  std::printf("  L0 %.5f  curvature c %.4g  sigma_eps %.3g  sigma_eta %.3g  k_t %.3g\n", round.globals.at("loss0"),
              round.globals.at("curvature"), round.globals.at("sigma_eps"), round.globals.at("sigma_eta"),
              round.globals.at("k_t"));
  std::printf("  dW mode %s%s\n", o.dw_mode.c_str(),
              dw_mode == snip::DwMode::exact ? " (one extra FP32 backward per layer and precision)" : "");
  std::printf("  %-34s %10s %10s %10s %10s %8s %8s\n", "layer", "dL fp8", "dL fp4", "dW fp8", "dW fp4", "Q fp8",
              "Q fp4");
  for (const auto& l : est.layers)
    std::printf("  %-34s %10.3g %10.3g %10.3g %10.3g %8.4f %8.4f\n", l.name.c_str(), l.dl[p8], l.dl[p4], l.dw[p8],
                l.dw[p4], l.q[p8], l.q[p4]);
  for (const auto& w : est.warnings) std::printf("  note: %s\n", w.c_str());
  if (!o.out.empty()) std::printf("wrote %s (snip-stats/1)\n", o.out.c_str());
  if (round_id) std::printf("stored statistics round %lld in %s\n", (long long)*round_id, o.db.c_str());
}

void setup_collect(CLI::App& app) {
  auto opts = std::make_shared<CollectOptions>();
  auto* cmd = app.add_subcommand(
      "collect",
      "Run one SNIP statistics round (clean BF16 pass, 3 backward-noise and 3 forward-noise passes) on a "
      "checkpoint's next training batch and save the raw statistics");
  cmd->add_option("--checkpoint", opts->checkpoint, "Training checkpoint directory (snip train --out)")->required();
  cmd->add_option("--data", opts->data, "Token data (text, folder or llm.c .bin); default: the run's data");
  cmd->add_option("--batch-size", opts->batch_size, "Rows B of the statistics batch; default: the run's");
  cmd->add_option("--seq-len", opts->seq_len, "Tokens T per row; default: the run's");
  cmd->add_option("--db", opts->db, "Also store the round in this experiment database (SQLite)");
  cmd->add_option("--out", opts->out, "Write the raw statistics here (snip-stats/1 JSON)");
  cmd->add_option("--noise-passes", opts->noise_passes, "Backward- and forward-noise passes (each)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--hessian-probes", opts->hessian_probes,
                  "Also record each layer's weight-Hessian trace (Hutchinson, this many Rademacher probes, 2 FP32 "
                  "forward+backward passes each) for the hawq method; 0 = off")
      ->check(CLI::Range(0, 10000));
  cmd->add_option("--seed", opts->seed, "Seed of the noise and of stochastic rounding");
  cmd->add_option("--lambda", opts->lambda, "lambda in Q = dL^ + lambda*dW^ for the printed estimates");
  cmd->add_option("--dw-mode", opts->dw_mode,
                  "Weight divergence dW's upstream term (METHOD.md 5.2): approx (Hutchinson gain ratios; what "
                  "training uses) or exact (also record one extra FP32 backward per layer and precision seeded with "
                  "the real dgrad error, stored raw so either mode can be recomputed; slower, for validation)")
      ->check(CLI::IsMember({"approx", "exact"}))
      ->capture_default_str();
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->reads("--checkpoint", opts->checkpoint).reads("--data", opts->data).writes("--out", opts->out);
  rules->at_least("--batch-size", opts->batch_size, 1, "leave it out for the run's batch size")
      .at_least("--seq-len", opts->seq_len, 1, "leave it out for the run's sequence length")
      .at_least("--lambda", opts->lambda, 0.0);
  snip::cli::run_checked(cmd, rules, [opts] { run_collect(*opts); });
}
SNIP_REGISTER_COMMAND("collect", setup_collect);

}  // namespace
