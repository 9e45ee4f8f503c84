// `snip compare`: the training truth of METHOD.md section 6 — from one checkpoint, train N steps
// under each plan at the same FP4 budget (SNIP at several λ, random, min-err, min-rel-err,
// e-layer-type, e-layer-id, uniform) plus a noise-floor control, and print the loss gaps to BF16.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "snip/compare.h"
#include "snip/error.h"

namespace {

struct CompareCliOptions {
  std::string checkpoint, recipe;
  double budget = 0.75;
  int64_t steps = 200;
  int seeds = 2, cooldown = 20, eval_batches = 8;
  bool json = false;
};

void run_compare_cmd(const CompareCliOptions& o) {
  snip::CompareOptions co;
  co.budget = o.budget;
  co.steps = o.steps;
  co.recipe = o.recipe;
  co.random_seeds = o.seeds;
  co.cooldown_steps = o.cooldown;
  co.eval_batches = o.eval_batches;
  const snip::CompareReport rep = snip::run_compare(o.checkpoint, co, [&](int done, int total, const std::string& m) {
    if (!o.json) std::fprintf(stderr, "\r[%d/%d] %-60s", done, total, m.c_str());
  });
  if (!o.json) std::fprintf(stderr, "\n");
  if (o.json) {
    nlohmann::json j = {{"checkpoint", o.checkpoint},
                        {"start_step", rep.start_step},
                        {"budget", rep.budget},
                        {"steps", o.steps},
                        {"recipe", rep.recipe},
                        {"noise_floor_train", rep.noise_floor_train},
                        {"noise_floor_val", rep.noise_floor_val}};
    for (const auto& r : rep.rows)
      j["rows"].push_back({{"method", r.method},
                           {"achieved_fraction", r.achieved_fraction},
                           {"train_loss_last", r.train_loss_last},
                           {"val_loss_plan", r.val_loss_plan},
                           {"val_loss_bf16", r.val_loss_bf16},
                           {"gap_train", r.gap_train},
                           {"gap_val_plan", r.gap_val_plan},
                           {"control", r.control},
                           {"same_plan_as", r.same_plan_as},
                           {"differs_from_snip", r.differs_from_snip},
                           {"notes", r.notes}});
    std::cout << j.dump(2) << "\n";
    return;
  }
  std::printf("compare: %s from step %lld, %lld steps per plan, budget %.3f, recipe %s\n", o.checkpoint.c_str(),
              (long long)rep.start_step, (long long)o.steps, rep.budget, rep.recipe.c_str());
  std::printf("  %-30s %8s %10s %10s %10s %10s %10s  %s\n", "method", "rho", "train(50)", "val plan", "val bf16",
              "gap train", "gap val", "vs SNIP");
  for (const auto& r : rep.rows) {
    std::string cmp = r.control ? "control" : (r.differs_from_snip ? "differs" : "no difference");
    if (!r.same_plan_as.empty()) cmp += " (same plan as " + r.same_plan_as + ")";
    std::printf("  %-30s %8.4f %10.4f %10.4f %10.4f %+10.4f %+10.4f  %s\n", r.method.substr(0, 30).c_str(),
                r.achieved_fraction, r.train_loss_last, r.val_loss_plan, r.val_loss_bf16, r.gap_train, r.gap_val_plan,
                cmp.c_str());
  }
  std::printf(
      "noise floor (perturbed-weights control): train %.4f, val %.4f; gaps closer to SNIP's than this are "
      "\"no difference\"\n",
      rep.noise_floor_train, rep.noise_floor_val);
}

void setup_compare(CLI::App& app) {
  auto opts = std::make_shared<CompareCliOptions>();
  auto* cmd = app.add_subcommand("compare",
                                 "Training truth: from one checkpoint train N steps under SNIP and every baseline plan "
                                 "at the same FP4 budget, with a noise-floor control, and report loss gaps to BF16");
  cmd->add_option("--checkpoint", opts->checkpoint, "Training checkpoint directory (snip train --out)")->required();
  cmd->add_option("--budget", opts->budget, "FP4 FLOP fraction rho of every plan")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--steps", opts->steps, "Training steps per plan")->check(CLI::Range(int64_t(1), int64_t(1000000)));
  cmd->add_option("--recipe", opts->recipe,
                  "Scaling recipe: snip (tiles) or tensor (per-tensor, harsh); default: the run's");
  cmd->add_option("--seeds", opts->seeds, "Seeds of the random baseline")->check(CLI::Range(0, 100));
  cmd->add_option("--cooldown", opts->cooldown, "LR cooldown steps before the validation loss")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--eval-batches", opts->eval_batches, "Validation batches")->check(CLI::Range(1, 100000));
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  cmd->callback([opts] { run_compare_cmd(*opts); });
}
SNIP_REGISTER_COMMAND("compare", setup_compare);

}  // namespace
