// `snip sweep`: the budget-vs-quality tradeoff curves — a plan for every budget × method, each
// rated under SNIP's costs (Σ Q, ΔL, ΔW), with identical plans marked as one piece of evidence.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/planner.h"
#include "snip/sweep.h"
#include "stats_source.h"

namespace {

struct SweepCliOptions {
  snip::cli::StatsSourceOptions source;  // --stats, --run, --db, --costs
  std::string budgets = "0:1:0.05", methods;
  double lambda = snip::defaults::kLambda, bf16_max = snip::defaults::kBf16MaxFraction;
  bool ties = false, per_role = false, allow_bf16 = false, json = false, csv = false, no_normalize = false;
  int stages = 1, seeds = 3;
  snip::PipelineLayout pipeline;
  uint64_t seed = 1;
  std::vector<std::string> pins;
};

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

std::string num(double v) {
  if (!std::isfinite(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

snip::SweepOptions sweep_options(const SweepCliOptions& o, const snip::PlannerInput& in) {
  snip::SweepOptions opt;
  opt.budgets = snip::parse_budget_list(o.budgets);
  // Defaults: every method the input supports (min-err needs statistics, hawq a round with the
  // weight-Hessian traces).
  std::string supported = in.min_err ? "snip,min-err,min-rel-err,e-layer-type,e-layer-id,random,uniform-fp8,uniform-fp4"
                                     : "snip,e-layer-type,e-layer-id,random,uniform-fp8,uniform-fp4";
  if (in.hawq) supported += ",hawq";
  opt.methods = snip::parse_method_list(!o.methods.empty() ? o.methods : supported);
  opt.random_seeds = o.seeds;
  opt.request.per_role = o.per_role;
  opt.request.ties = o.ties;
  opt.request.stages = o.stages;
  opt.request.pipeline = o.pipeline;
  opt.request.allow_bf16 = o.allow_bf16;
  opt.request.bf16_max_fraction = o.bf16_max;
  opt.request.seed = o.seed;
  for (const auto& p : o.pins) snip::add_pin(opt.request.pins, p);
  // Bounded: every budget is one solve per method and per random seed. Refused before the first
  // solve when that is more than a sweep can finish in a sitting.
  constexpr size_t kMaxSolves = 200000;
  size_t per_budget = 0;
  for (snip::Method m : opt.methods) per_budget += m == snip::Method::random ? size_t(opt.random_seeds) : 1;
  const size_t solves = opt.budgets.size() * per_budget;
  if (solves > kMaxSolves)
    throw snip::Error("this sweep asks for " + std::to_string(solves) + " solves (" +
                      std::to_string(opt.budgets.size()) + " budgets x " + std::to_string(per_budget) +
                      " plans each), more than the " + std::to_string(kMaxSolves) +
                      " a sweep may run; give a coarser --budgets step, fewer --seeds or fewer --methods");
  return opt;
}

nlohmann::json sweep_point_json(const snip::SweepPoint& p) {
  auto jnum = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["budget"] = p.budget;
  j["method"] = p.method;
  if (p.method == "random") j["seed"] = p.seed;
  j["ok"] = p.ok;
  if (!p.ok) {
    j["error"] = p.error;
  } else {
    j["status"] = p.result.status;
    j["achieved_fp4_fraction"] = p.result.achieved_fraction;
    j["meets_budget"] = p.result.meets_budget();
    j["predicted_q"] = jnum(p.result.predicted_q);
    j["predicted_dl"] = jnum(p.result.predicted_dl);
    j["predicted_dw"] = jnum(p.result.predicted_dw);
    j["mip_gap"] = jnum(p.result.mip_gap);
    j["solve_ms"] = p.result.solve_ms;
    j["same_plan_as"] = p.same_plan_as;
    j["notes"] = p.result.notes;
  }
  return j;
}

void print_sweep_csv(const std::vector<snip::SweepPoint>& points) {
  std::printf(
      "budget,method,seed,ok,achieved_fp4_fraction,predicted_q,predicted_dl,predicted_dw,mip_gap,same_plan_as,"
      "error\n");
  for (const auto& p : points)
    std::printf("%.6g,%s,%s,%d,%s,%s,%s,%s,%s,%s,\"%s\"\n", p.budget, p.method.c_str(),
                p.method == "random" ? std::to_string(p.seed).c_str() : "", p.ok ? 1 : 0,
                p.ok ? num(p.result.achieved_fraction).c_str() : "", p.ok ? num(p.result.predicted_q).c_str() : "",
                p.ok ? num(p.result.predicted_dl).c_str() : "", p.ok ? num(p.result.predicted_dw).c_str() : "",
                p.ok ? num(p.result.mip_gap).c_str() : "", join(p.same_plan_as, ";").c_str(), p.error.c_str());
}

void print_sweep_table(const snip::PlannerInput& in, const std::vector<snip::SweepPoint>& points) {
  std::printf("tradeoff under SNIP's costs (%s); Q is the predicted quality loss, lower is better\n",
              in.snip.source.c_str());
  std::printf("%-7s %-16s %9s  %12s %12s %12s  %s\n", "budget", "method", "achieved", "Q", "dL", "dW", "same plan as");
  for (const auto& p : points) {
    std::string name = p.method + (p.method == "random" ? "#" + std::to_string(p.seed) : "");
    if (!p.ok) {
      std::printf("%-7.3f %-16s infeasible: %s\n", p.budget, name.c_str(), p.error.c_str());
      continue;
    }
    std::printf("%-7.3f %-16s %9.5f%s %12s %12s %12s  %s\n", p.budget, name.c_str(), p.result.achieved_fraction,
                p.result.meets_budget() ? " " : "*", num(p.result.predicted_q).c_str(),
                num(p.result.predicted_dl).c_str(), num(p.result.predicted_dw).c_str(),
                join(p.same_plan_as, ", ").c_str());
  }
  bool any_below = false;
  for (const auto& p : points) any_below = any_below || (p.ok && !p.result.meets_budget());
  if (any_below) std::printf("(* = below the budget: a uniform reference point, not a solution)\n");
}

void run_sweep_cmd(const SweepCliOptions& o) {
  snip::EstimatorOptions est;
  est.lambda = o.lambda;
  est.normalize = !o.no_normalize;
  snip::cli::StatsSource src = o.source.source();
  const snip::PlannerInput in = snip::cli::load_planner_input(src, est, "sweep");
  const bool from_stats = !o.source.stats.empty() || src.round_id.has_value();
  const auto points = snip::run_sweep(in, sweep_options(o, in));

  if (o.json) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& p : points) rows.push_back(sweep_point_json(p));
    nlohmann::json out;
    out["costs"] = in.snip.source;
    if (from_stats) out["lambda"] = o.lambda;
    if (src.round_id) out["stats_round_id"] = *src.round_id;
    out["points"] = rows;
    std::cout << snip::cli::json_text(out, 2) << "\n";
    return;
  }
  if (o.csv) {
    print_sweep_csv(points);
    return;
  }
  print_sweep_table(in, points);
}

void setup_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepCliOptions>();
  auto* cmd = app.add_subcommand(
      "sweep",
      "Budget-vs-quality tradeoff curves: for every FP4 FLOP budget and method, the plan and its predicted "
      "quality loss under SNIP's costs (sum of Q, dL, dW)");
  snip::cli::add_stats_source_options(cmd, o->source);
  cmd->add_option("--budgets", o->budgets, "FP4 FLOP fractions: a list 0,0.25,0.5 or ranges start:stop:step")
      ->capture_default_str();
  cmd->add_option(
      "--methods", o->methods,
      "Comma-separated methods (" + snip::method_names() + ", or all); default: every method the input supports");
  cmd->add_option("--seeds", o->seeds, "Seeds per budget for the random baseline")->capture_default_str();
  cmd->add_option("--seed", o->seed, "First random seed")->capture_default_str();
  cmd->add_option("--lambda", o->lambda, "Weight of dW in Q = dL^ + lambda*dW^ (statistics input)")
      ->capture_default_str();
  cmd->add_flag("--no-normalize", o->no_normalize, "Use raw dL and dW instead of dividing each by its FP4 sum");
  cmd->add_flag("--ties", o->ties, "Keep q/k/v and gate/up of a block in one precision");
  cmd->add_option("--pin", o->pins, "Force a layer's precision, LAYER=PREC (repeatable)");
  cmd->add_flag("--per-role", o->per_role, "Choose fprop and backward GEMMs separately (ILP methods)");
  cmd->add_option("--stages", o->stages, "Pipeline stages; each meets the budget on its own")->capture_default_str();
  cmd->add_flag("--allow-bf16", o->allow_bf16, "Allow BF16 as a third choice (ILP methods)");
  cmd->add_option("--bf16-max", o->bf16_max, "Largest FLOP fraction in BF16 with --allow-bf16")->capture_default_str();
  auto* json = cmd->add_flag("--json", o->json, "Print one JSON object");
  auto* csv = cmd->add_flag("--csv", o->csv, "Print CSV rows");
  json->excludes(csv);
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  snip::cli::add_pipeline_options(cmd, o->pipeline, *rules, "plans Megatron can express at that layout");
  rules->excludes("--stages", "--pipeline-parallel",
                  "a pipeline layout gives every stage the same plan, so each stage meets the budget when the whole "
                  "model does");
  rules->at_least("--lambda", o->lambda, 0.0)
      .between("--bf16-max", o->bf16_max, 0.0, 1.0)
      .at_least("--stages", o->stages, 1)
      .at_least("--seeds", o->seeds, 1, "the random baseline needs at least one seed per budget")
      .add([o] {
        if (o->seeds > 1000)  // bounded set-up: the sweep compares every budget's points pairwise
          throw snip::Error("--seeds must be at most 1000 (got " + std::to_string(o->seeds) +
                            "): the sweep compares each budget's points pairwise, so 1,000 seeds already take about "
                            "a second per budget and 100,000 about ten minutes");
      })
      .ignored_unless("--bf16-max", {"--allow-bf16"}, "it limits BF16, which only --allow-bf16 lets the planner use")
      .add([o, r = rules.get()] {
        if (!o->source.costs.empty() && (r->given("--lambda") || r->given("--no-normalize")))
          snip::cli::OptionRules::warn("--lambda and --no-normalize are ignored with --costs (the costs are given)");
        if ((r->given("--seeds") || r->given("--seed")) && !o->methods.empty() &&
            o->methods.find("random") == std::string::npos && o->methods != "all")
          snip::cli::OptionRules::warn(
              "--seeds and --seed are ignored unless --methods includes random (the other methods are "
              "deterministic)");
      });
  snip::cli::run_checked(cmd, rules, [o] { run_sweep_cmd(*o); });
}

SNIP_REGISTER_COMMAND("sweep", setup_sweep);

}  // namespace
