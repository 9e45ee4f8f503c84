// `snip compare`: the training truth of METHOD.md section 6 — from one checkpoint, train N steps
// under each plan at the same FP4 budget (SNIP at several λ, random, min-err, min-rel-err,
// e-layer-type, e-layer-id, uniform), every arm K times paired by replicate, and print the loss
// gaps to BF16 with 95% intervals and each arm's verdict against SNIP (snip/paired_stats.h).
// The table (with each arm's train-loss curve, its plan and the statistics round the plans came
// from) is stored in the experiment database unless --no-db.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "command.h"
#include "compare_table.h"
#include "option_rules.h"
#include "snip/compare.h"
#include "snip/error.h"
#include "snip/store.h"

namespace {

struct CompareCliOptions {
  std::string checkpoint, recipe, db;
  double budget = 0.75;
  int64_t steps = 200;
  int seeds = 2, cooldown = 20, eval_batches = 8, replicates = 3;
  bool json = false, no_db = false, oracle = false;
  int oracle_batches = 32;
  std::vector<double> lambdas = snip::CompareOptions{}.lambdas;
  std::vector<std::string> baselines;
};

// The stored run one of whose checkpoints is this directory, if any (newest run first).
std::optional<int64_t> run_of_checkpoint(const snip::Store& store, const std::string& checkpoint) {
  std::error_code ec;
  const auto want = std::filesystem::weakly_canonical(checkpoint, ec);
  if (ec) return std::nullopt;
  for (const auto& r : store.runs())
    for (const auto& c : store.checkpoints(r.id)) {
      std::error_code ec2;
      if (std::filesystem::weakly_canonical(c.path, ec2) == want && !ec2) return r.id;
    }
  return std::nullopt;
}

// Stores the report: its statistics round, one plan per arm, and the comparison with every row,
// replicate and curve. One transaction.
int64_t store_report(snip::Store& store, const CompareCliOptions& o, const snip::CompareOptions& co,
                     const snip::CompareReport& rep, const std::vector<snip::ArmStatistics>& stats) {
  snip::Store::Transaction tx(store);
  snip::CompareRecord c;
  c.run_id = run_of_checkpoint(store, o.checkpoint);
  c.stats_round_id = store.add_stats_round(rep.round, c.run_id);
  std::error_code ec;
  const auto abs = std::filesystem::absolute(o.checkpoint, ec);
  c.checkpoint = ec ? o.checkpoint : abs.lexically_normal().string();
  c.start_step = rep.start_step;
  c.budget = rep.budget;
  c.recipe = rep.recipe;
  c.steps = co.steps;
  c.cooldown_steps = co.cooldown_steps;
  c.eval_batches = co.eval_batches;
  c.last_window = co.last_window;
  c.control_rel = co.replicate_rel;
  c.replicates = rep.replicates;
  c.noise_floor_train = rep.noise_floor_train;
  c.noise_floor_val = rep.noise_floor_val;
  c.options = {{"random_seeds", co.random_seeds},
               {"lambdas", co.lambdas},
               {"baselines", co.baselines},
               {"snip_reference", rep.rows[rep.snip_row].method},
               {"replicate_rel", co.replicate_rel}};
  if (co.oracle) c.options["oracle_batches"] = co.oracle_batches;
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const snip::CompareRow& r = rep.rows[i];
    snip::CompareRowRecord row;
    row.method = r.method;
    row.lambda = r.lambda;
    if (r.seed) row.seed = int64_t(*r.seed);
    row.achieved_fraction = r.achieved_fraction;
    row.train_loss_last = r.train_loss_last;
    row.val_loss_plan = r.val_loss_plan;
    row.val_loss_bf16 = r.val_loss_bf16;
    row.gap_train = r.gap_train;
    row.gap_val_plan = r.gap_val_plan;
    row.gap_val_bf16 = r.gap_val_bf16;
    const auto& verdict = stats[i].train.verdict;
    row.differs_from_snip = verdict && *verdict != snip::Verdict::indistinguishable;
    row.same_plan_as = r.same_plan_as;
    row.train_curve = r.train_curve;
    for (const snip::CompareReplicate& x : r.replicates)
      row.replicates.push_back({x.train_loss_last, x.val_loss_plan, x.val_loss_bf16, x.train_curve});
    snip::PlanSolveInfo info;
    info.run_id = c.run_id;
    info.stats_round_id = c.stats_round_id;
    info.options = {{"compare", true}};
    if (r.lambda) info.options["lambda"] = *r.lambda;
    if (r.seed) info.options["seed"] = *r.seed;
    info.solver_status = "compare";
    row.plan_id = store.add_plan(r.plan, info);
    c.rows.push_back(std::move(row));
  }
  const int64_t id = store.insert_compare(c);
  tx.commit();
  return id;
}

void run_compare_cmd(const CompareCliOptions& o) {
  snip::CompareOptions co;
  co.budget = o.budget;
  co.steps = o.steps;
  co.recipe = o.recipe;
  co.random_seeds = o.seeds;
  co.lambdas = o.lambdas;
  co.baselines = o.baselines;
  co.cooldown_steps = o.cooldown;
  co.eval_batches = o.eval_batches;
  co.replicates = o.replicates;
  co.oracle = o.oracle;
  co.oracle_batches = o.oracle_batches;
  const snip::CompareReport rep = snip::run_compare(o.checkpoint, co, [&](int done, int total, const std::string& m) {
    if (!o.json) std::fprintf(stderr, "\r[%d/%d] %-60s", done, total, m.c_str());
    std::fflush(stderr);
  });
  if (!o.json) std::fprintf(stderr, "\n");
  const std::vector<snip::ArmStatistics> stats =
      snip::cli::compare_row_statistics(rep.rows, rep.bf16_row, rep.snip_row);
  std::optional<int64_t> compare_id;
  std::string db_path;
  if (!o.no_db) {
    snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db);
    db_path = store.path();
    compare_id = store_report(store, o, co, rep, stats);
  }
  if (o.json) {
    nlohmann::json j = {{"checkpoint", o.checkpoint},
                        {"start_step", rep.start_step},
                        {"budget", rep.budget},
                        {"steps", o.steps},
                        {"recipe", rep.recipe},
                        {"replicates", rep.replicates},
                        {"snip_reference", rep.rows[rep.snip_row].method},
                        {"noise_floor_train", snip::cli::num_or_null(rep.noise_floor_train)},
                        {"noise_floor_val", snip::cli::num_or_null(rep.noise_floor_val)}};
    j["compare_id"] = compare_id ? nlohmann::json(*compare_id) : nlohmann::json(nullptr);
    j["regret_vs_oracle"] = snip::cli::regret_json(rep.rows, stats, rep.snip_row);
    j["rows"] = nlohmann::json::array();
    for (size_t i = 0; i < rep.rows.size(); ++i) {
      j["rows"].push_back(snip::cli::compare_row_json(rep.rows[i], stats[i], i == rep.snip_row));
      j["rows"].back()["notes"] = rep.rows[i].notes;
    }
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("compare: %s from step %lld, %lld steps per plan, %d replicate%s, budget %.3f, recipe %s\n",
              o.checkpoint.c_str(), (long long)rep.start_step, (long long)o.steps, rep.replicates,
              rep.replicates == 1 ? "" : "s", rep.budget, rep.recipe.c_str());
  snip::cli::print_compare_rows(rep.rows, stats, rep.snip_row);
  snip::cli::print_compare_notes(rep.rows, stats, rep.snip_row);
  if (compare_id)
    std::printf("stored compare %lld in %s (snip show --compare %lld)\n", (long long)*compare_id, db_path.c_str(),
                (long long)*compare_id);
}

void setup_compare(CLI::App& app) {
  auto opts = std::make_shared<CompareCliOptions>();
  auto* cmd = app.add_subcommand("compare",
                                 "Training truth: from one checkpoint train N steps under SNIP and every baseline plan "
                                 "at the same FP4 budget, every arm K times (paired replicates), and report loss gaps "
                                 "to BF16 with 95% intervals and each plan's verdict against SNIP");
  cmd->add_option("--checkpoint", opts->checkpoint, "Training checkpoint directory (snip train --out)")->required();
  cmd->add_option("--budget", opts->budget, "FP4 FLOP fraction rho of every plan")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--steps", opts->steps, "Training steps per plan")->check(CLI::Range(int64_t(1), int64_t(1000000)));
  cmd->add_option("--recipe", opts->recipe,
                  "Scaling recipe: snip (tiles), mx (E8M0 1x32), nvfp4, tensor (per-tensor, harsh), or a granularity "
                  "between them: block:N (FP32 scale per 1xN block along the reduction), block:row, channel; "
                  "append :sr for stochastic rounding of FP4 gradients; default: the run's");
  cmd->add_option("--replicates", opts->replicates,
                  "Trainings per arm (K): replicate r of every arm starts from the checkpoint's weights perturbed "
                  "by a relative 1e-4 (seed r) with its own stochastic-rounding seed, so arms are paired by r; "
                  "K >= 2 gives 95% Student-t intervals and verdicts, K = 1 no interval");
  cmd->add_flag("--oracle", opts->oracle,
                "Add an oracle arm: the same ILP on the measured per-layer loss damage (snip validate's dl_true) "
                "on this checkpoint, and report SNIP's regret to it (paired, with interval)");
  cmd->add_option("--oracle-batches", opts->oracle_batches,
                  "Validation batches the oracle's measured damage is averaged over (default 32: one batch's "
                  "damage is dominated by a first-order term whose sign varies by batch; n batches shrink it "
                  "by sqrt(n))");
  cmd->add_option("--lambdas", opts->lambdas,
                  "SNIP's quality weights lambda, one arm each, comma-separated (default 0,0.1,0.3,1); the "
                  "reference every verdict is against is lambda 0.1 when listed, else the first")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--baselines", opts->baselines,
                  "Baseline arms to train, comma-separated, from random, min-err, min-rel-err, hawq, e-layer-type, "
                  "e-layer-id, uniform-fp8, uniform-fp4 (default: all); uniform-bf16 and SNIP always run")
      ->delimiter(',');
  cmd->add_option("--seeds", opts->seeds, "Seeds of the random baseline")->check(CLI::Range(0, 100));
  cmd->add_option("--cooldown", opts->cooldown, "LR cooldown steps before the validation loss")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--eval-batches", opts->eval_batches, "Validation batches")->check(CLI::Range(1, 100000));
  cmd->add_option("--db", opts->db,
                  "Experiment database to store the table in (default: the user's workbench database)");
  cmd->add_flag("--no-db", opts->no_db, "Do not store the table in a database");
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->excludes("--db", "--no-db", "--no-db stores nothing; drop one of them");
  snip::cli::run_checked(cmd, rules, [opts] { run_compare_cmd(*opts); });
}
SNIP_REGISTER_COMMAND("compare", setup_compare);

}  // namespace
