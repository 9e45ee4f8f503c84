// `snip solve`: choose FP8/FP4 per linear layer from a statistics round or a cost file with the
// SNIP ILP (or a baseline), write a snip-plan/1 file and print what was chosen and why.
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/planner.h"
#include "snip/text.h"
#include "stats_source.h"

namespace {

struct SolveOptions {
  snip::cli::StatsSourceOptions source;  // --stats, --run, --db, --costs
  std::string out, method = "snip";
  double budget = snip::defaults::kBudget, lambda = snip::defaults::kLambda;
  double bf16_max = snip::defaults::kBf16MaxFraction, mip_gap = 0.0;
  bool ties = false, per_role = false, allow_bf16 = false, json = false, no_normalize = false;
  int stages = 1, time_limit_ms = 20000;
  snip::PipelineLayout pipeline;
  uint64_t seed = 1;
  std::vector<std::string> pins;
};

// One character per GEMM role: 4 = FP4, 8 = FP8, b = BF16; "4/8" when fprop and backward differ.
std::string cell(const snip::RoleChoice& c) {
  auto ch = [](snip::Precision p) {
    return p == snip::Precision::fp4 ? "4" : p == snip::Precision::fp8 ? "8" : p == snip::Precision::bf16 ? "b" : "f";
  };
  return c[0] == c[1] ? std::string(ch(c[0])) : std::string(ch(c[0])) + "/" + ch(c[1]);
}

void print_grid(const snip::CostTable& t, const snip::PlanResult& r) {
  std::map<int, std::map<int, std::string>> grid;
  for (size_t i = 0; i < t.layers.size(); ++i) grid[t.layers[i].block][int(t.layers[i].type)] = cell(r.choice[i]);
  std::printf("  %-6s", "block");
  for (auto ty : snip::kAllLayerTypes) std::printf("%-6s", snip::layer_type_short_name(ty));
  std::printf("   (4 = FP4, 8 = FP8, b = BF16, fprop/backward when they differ)\n");
  for (const auto& [b, row] : grid) {
    std::printf("  %-6d", b);
    for (auto ty : snip::kAllLayerTypes) {
      auto it = row.find(int(ty));
      std::printf("%-6s", it == row.end() ? "-" : it->second.c_str());
    }
    std::printf("\n");
  }
}

// `snip solve --json`: one object with the summary and the plan.
void print_solve_json(const SolveOptions& o, const snip::PlannerInput& in, const snip::cli::StatsSource& src,
                      const snip::PlanResult& r, const std::vector<std::string>& fp4, double untied_q) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
  nlohmann::json j;
  j["method"] = r.method;
  j["status"] = r.status;
  j["budget"] = r.budget;
  j["achieved_fp4_fraction"] = r.achieved_fraction;
  j["meets_budget"] = r.meets_budget();
  j["objective"] = num(r.objective);
  j["predicted_q"] = num(r.predicted_q);
  j["predicted_dl"] = num(r.predicted_dl);
  j["predicted_dw"] = num(r.predicted_dw);
  j["mip_gap"] = num(r.mip_gap);
  j["solve_ms"] = r.solve_ms;
  j["untied_predicted_q"] = num(untied_q);
  j["fp4_layers"] = fp4;
  j["notes"] = r.notes;
  j["costs"] = in.snip.source;
  j["stats_round_id"] = src.round_id ? nlohmann::json(*src.round_id) : nlohmann::json(nullptr);
  j["out"] = o.out.empty() ? nlohmann::json(nullptr) : nlohmann::json(o.out);
  j["plan"] = nlohmann::json::parse(snip::plan_to_json(r.plan));
  std::cout << snip::cli::json_text(j, 2) << "\n";
}

void run_solve(const SolveOptions& o) {
  if (!o.out.empty()) snip::checked_write_target(o.out);  // before the solve (up to --time-limit-ms)
  snip::EstimatorOptions est;
  est.lambda = o.lambda;
  est.normalize = !o.no_normalize;
  snip::cli::StatsSource src = o.source.source();
  const snip::PlannerInput in = snip::cli::load_planner_input(src, est, "solve");
  const bool from_stats = !o.source.stats.empty() || src.round_id.has_value();
  snip::PlanRequest req;
  req.budget = o.budget;
  req.per_role = o.per_role;
  req.ties = o.ties;
  req.stages = o.stages;
  req.pipeline = o.pipeline;
  req.allow_bf16 = o.allow_bf16;
  req.bf16_max_fraction = o.bf16_max;
  req.seed = o.seed;
  req.mip_gap = o.mip_gap;
  req.time_limit_ms = o.time_limit_ms;
  for (const auto& p : o.pins) snip::add_pin(req.pins, p);
  const snip::Method method = snip::parse_method(o.method);
  snip::PlanResult r = snip::make_plan(in, method, req);
  // What the pipeline tie costs: the same request without it, rated under the same costs.
  double untied_q = snip::kNaN;
  if (o.pipeline.split()) {
    snip::PlanRequest untied = req;
    untied.pipeline = {};
    untied_q = snip::make_plan(in, method, untied).predicted_q;
  }
  if (from_stats) r.plan.provenance["lambda"] = o.lambda;
  r.plan.provenance["source"] = in.snip.source;
  if (src.round_id) r.plan.provenance["stats_round_id"] = *src.round_id;
  if (!o.out.empty()) snip::write_plan_file(o.out, r.plan);

  std::vector<std::string> fp4;
  for (size_t i = 0; i < in.snip.layers.size(); ++i)
    if (r.choice[i][0] == snip::Precision::fp4 || r.choice[i][1] == snip::Precision::fp4)
      fp4.push_back(in.snip.layers[i].name +
                    (r.choice[i][0] != r.choice[i][1] ? std::string(" (") + cell(r.choice[i]) + ")" : ""));
  if (o.json) {
    print_solve_json(o, in, src, r, fp4, untied_q);
    return;
  }
  std::printf("method      %s (costs: %s%s)\n", r.method.c_str(), in.snip.source.c_str(),
              from_stats ? (", lambda " + snip::format_g(o.lambda)).c_str() : "");
  if (std::isnan(r.mip_gap))
    std::printf("status      %s (no solver), %.2f ms\n", r.status.c_str(), r.solve_ms);
  else
    std::printf("status      %s, MIP gap %.3g, %.2f ms\n", r.status.c_str(), r.mip_gap, r.solve_ms);
  std::printf("budget      %.4f  achieved FP4 FLOP fraction %.6f%s\n", r.budget, r.achieved_fraction,
              r.meets_budget() ? "" : "  (below the budget)");
  if (std::isfinite(r.objective)) std::printf("objective   %.6g (the method's own costs)\n", r.objective);
  std::printf("predicted   Q %.6g", r.predicted_q);
  if (std::isfinite(r.predicted_dl)) std::printf("  dL %.6g  dW %.6g", r.predicted_dl, r.predicted_dw);
  std::printf("  (under SNIP's costs)\n");
  if (o.pipeline.split())
    std::printf("pipeline    the same plan on every chunk of %s (Megatron: %s); without that tie Q %.6g (%+.2f%%)\n",
                snip::pipeline_layout_text(o.pipeline).c_str(),
                snip::pipeline_layout_megatron_flags(o.pipeline).c_str(), untied_q,
                100.0 * (r.predicted_q - untied_q) / std::fabs(untied_q));
  std::printf("FP4 layers  %zu of %zu\n", fp4.size(), in.snip.layers.size());
  print_grid(in.snip, r);
  for (const auto& n : r.notes) std::printf("note        %s\n", n.c_str());
  if (!o.out.empty()) std::printf("plan        written to %s\n", o.out.c_str());
}

void setup_solve(CLI::App& app) {
  auto o = std::make_shared<SolveOptions>();
  auto* cmd = app.add_subcommand(
      "solve",
      "Choose FP8 or FP4 for every linear layer: the SNIP ILP minimising Q = dL^ + lambda*dW^ so that at least "
      "the budget fraction of linear-layer FLOPs runs in FP4 (or a baseline method), and write a snip-plan/1 file");
  snip::cli::add_stats_source_options(cmd, o->source);
  cmd->add_option("--budget", o->budget, "Efficiency target rho: the FP4 fraction of linear-layer FLOPs, 0..1")
      ->required();
  cmd->add_option("--method", o->method,
                  snip::method_names(" | ") +
                      " (min-err, min-rel-err: the ILP on local quantization error; hawq: on HAWQ-V3's "
                      "Hessian-weighted weight error, from a round collected with --hessian-probes)")
      ->capture_default_str();
  cmd->add_option("--lambda", o->lambda,
                  "Weight of the backward weight divergence dW in Q (small: dW breaks ties; 1 is not neutral)")
      ->capture_default_str();
  cmd->add_flag("--no-normalize", o->no_normalize, "Use raw dL and dW instead of dividing each by its FP4 sum");
  cmd->add_flag("--ties", o->ties, "Keep q/k/v and gate/up of a block in one precision (fused kernels)");
  cmd->add_option("--pin", o->pins,
                  "Force a layer's precision, LAYER=PREC (repeatable), e.g. "
                  "model.layers.0.mlp.down_proj=fp8");
  cmd->add_flag("--per-role", o->per_role,
                "Choose fprop and the backward GEMMs (dgrad, wgrad) separately; FLOPs split 1/3 : 2/3");
  cmd->add_option("--stages", o->stages,
                  "Pipeline stages (contiguous blocks); every stage must meet the budget on its own")
      ->capture_default_str();
  cmd->add_flag("--allow-bf16", o->allow_bf16, "Allow BF16 as a third choice (limited by --bf16-max)");
  cmd->add_option("--bf16-max", o->bf16_max, "With --allow-bf16: the largest FLOP fraction that may run in BF16")
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the random baseline (reproducible)")->capture_default_str();
  cmd->add_option("--mip-gap", o->mip_gap, "Relative MIP gap at which the solver may stop (0: prove optimality)")
      ->capture_default_str();
  cmd->add_option("--time-limit-ms", o->time_limit_ms,
                  "Solver time limit; the best plan so far is returned with its gap")
      ->capture_default_str();
  cmd->add_option("--out", o->out, "Write the plan here (snip-plan/1 JSON, for snip train --plan)");
  cmd->add_flag("--json", o->json, "Print one JSON object (summary and plan)");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  snip::cli::add_pipeline_options(cmd, o->pipeline, *rules,
                                  "the best plan Megatron can express at that layout, with the budget met");
  rules->excludes("--stages", "--pipeline-parallel",
                  "a pipeline layout gives every stage the same plan, so each stage meets the budget when the whole "
                  "model does");
  rules->reads("--stats", o->source.stats).reads("--costs", o->source.costs).writes("--out", o->out);
  rules->at_least("--lambda", o->lambda, 0.0)
      .between("--bf16-max", o->bf16_max, 0.0, 1.0)
      .at_least("--stages", o->stages, 1)
      .between("--mip-gap", o->mip_gap, 0.0, 0.999, "0 proves optimality, 0.01 accepts a plan within 1% of it")
      .at_least("--time-limit-ms", o->time_limit_ms, 1)
      .ignored_unless("--bf16-max", {"--allow-bf16"}, "it limits BF16, which only --allow-bf16 lets the planner use")
      .add([o, r = rules.get()] {
        if (!o->source.costs.empty() && (r->given("--lambda") || r->given("--no-normalize")))
          snip::cli::OptionRules::warn("--lambda and --no-normalize are ignored with --costs (the costs are given)");
        if (r->given("--seed") && o->method != "random")
          snip::cli::OptionRules::warn(
              "--seed is ignored unless --method random (the other methods are deterministic)");
        if (!o->method.empty() && !snip::method_uses_ilp(snip::parse_method(o->method)))
          for (const char* opt : {"--allow-bf16", "--bf16-max", "--mip-gap", "--time-limit-ms", "--per-role"})
            if (r->given(opt))
              snip::cli::OptionRules::warn(std::string(opt) + " is ignored with --method " + o->method +
                                           " (a rule, not the ILP: only snip, min-err, min-rel-err and hawq use it)");
      });
  snip::cli::run_checked(cmd, rules, [o] { run_solve(*o); });
}

SNIP_REGISTER_COMMAND("solve", setup_solve);

}  // namespace
