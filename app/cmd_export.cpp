// `snip export`: writes a run's metrics (CSV: one row per step; JSON: the run with its
// metrics and plan timeline) or a plan (snip-plan/1 JSON, CSV: one row per layer × role, or with
// --to the per-module format of Megatron-LM, Transformer Engine or torchao: plan_export.h).
#include <cctype>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/estimator.h"
#include "snip/model_config.h"
#include "snip/plan_export.h"
#include "snip/store.h"
#include "snip/store_export.h"
#include "snip/tensorboard.h"

namespace {

struct ExportOptions {
  std::string db;
  std::optional<int64_t> run;
  std::string plan;  // a plan id of the database, or a snip-plan/1 file
  std::string format = "json";
  std::string to;      // megatron, te, torchao
  std::string preset;  // the model the plan is for (--to); default: its blocks at the plan's count
  std::string config;
  std::string out;
  snip::PipelineLayout pipeline;  // --to megatron: default the plan's own layout
  bool pipeline_given = false;
};

bool is_id(const std::string& s) {
  if (s.empty() || s.size() > 18) return false;
  for (const char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string export_run(snip::Store& store, int64_t run_id, const std::string& format) {
  const auto r = store.run(run_id);
  const auto rows = store.metrics(run_id);
  if (format == "csv") return snip::metrics_to_csv(rows);
  nlohmann::json j = snip::run_to_json(r);
  j["format"] = "snip-run/1";
  nlohmann::json m = nlohmann::json::array();
  for (const auto& row : rows) m.push_back(snip::metric_row_to_json(row));
  j["metrics"] = m;
  nlohmann::json tl = nlohmann::json::array();
  for (const auto& e : store.plan_timeline(run_id))
    tl.push_back({{"plan_id", e.plan_id},
                  {"first_step", e.first_step},
                  {"last_step", e.last_step ? nlohmann::json(*e.last_step) : nlohmann::json(nullptr)}});
  j["plan_timeline"] = tl;
  return snip::cli::json_text(j, 2) + "\n";
}

// A run's scalars as TensorBoard event files in `dir`: every metric row, and each statistics
// round's per-layer ΔL and ΔW for FP8 and FP4 at the round's step. Returns the file's path.
std::string export_tensorboard(snip::Store& store, int64_t run_id, const std::string& dir) {
  const snip::RunInfo run = store.run(run_id);
  const std::vector<snip::MetricRow> rows = store.metrics(run_id);
  // Rows carry no time of their own: spread the run's wall time over its steps.
  const double t0 = double(run.started_ms) / 1000.0;
  const double t1 = run.ended_ms ? double(*run.ended_ms) / 1000.0 : t0;
  const int64_t last = std::max<int64_t>(run.last_step, 1);
  const auto wall = [&](int64_t step) { return t0 + (t1 - t0) * double(step) / double(last); };
  snip::TensorBoardWriter w(dir, t0, "snip-run" + std::to_string(run_id));
  for (const snip::MetricRow& r : rows) {
    const double t = wall(r.step);
    w.add_scalar("train/loss", r.step, r.train_loss, t);
    if (r.val_loss) w.add_scalar("eval/loss", r.step, *r.val_loss, t);
    w.add_scalar("train/learning_rate", r.step, r.lr, t);
    w.add_scalar("train/grad_norm", r.step, r.grad_norm, t);
    w.add_scalar("precision/fp4_fraction", r.step, r.fp4_fraction, t);
    if (r.bf16_gap) w.add_scalar("precision/bf16_gap", r.step, *r.bf16_gap, t);
    w.add_scalar("speed/tokens_per_s", r.step, r.tokens_per_s, t);
  }
  for (const snip::StatsRoundInfo& info : store.stats_rounds(run_id)) {
    const snip::Estimates est = snip::estimate_divergences(store.stats_round(info.id));
    for (const snip::LayerEstimate& l : est.layers)
      for (const snip::Precision p : {snip::Precision::fp8, snip::Precision::fp4}) {
        if (!l.has(p)) continue;
        const std::string suffix = std::string(snip::precision_name(p)) + "/" + l.name;
        w.add_scalar("delta_L/" + suffix, info.step, l.dl[int(p)], wall(info.step));
        w.add_scalar("delta_W/" + suffix, info.step, l.dw[int(p)], wall(info.step));
      }
  }
  const std::string path = w.close();
  std::fprintf(stderr, "wrote %lld scalars of run %lld to %s (tensorboard --logdir %s)\n", (long long)w.scalars(),
               (long long)run_id, path.c_str(), dir.c_str());
  return path;
}

void run_export(const ExportOptions& o) {
  if (o.format != "json" && o.format != "csv")
    throw snip::Error("--format " + o.format + " is not supported (use json or csv)");
  if (o.to == "tensorboard") {
    if (!o.run) throw snip::Error("--to tensorboard exports a run's scalars: give --run ID");
    if (o.out.empty() || o.out == "-")
      throw snip::Error("--to tensorboard writes event files into a folder: give --out DIR");
    const snip::CheckpointLock folder = snip::claim_output_folder(o.out);  // held while the files are written
    snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db,
                      snip::StoreOptions{.create = o.db.empty(), .read_only_if_unwritable = true});
    (void)export_tensorboard(store, *o.run, o.out);
    return;
  }
  if (!o.to.empty() && o.run)
    throw snip::Error("--to " + o.to + " writes a plan: give --plan ID|FILE (a run goes --to tensorboard)");
  const bool to_stack = !o.to.empty();
  const snip::PlanStack stack = to_stack ? snip::parse_plan_stack(o.to) : snip::PlanStack::megatron;
  std::optional<snip::Plan> file_plan;
  if (!o.plan.empty() && !is_id(o.plan)) file_plan = snip::read_plan_file(o.plan);
  if (file_plan && !o.db.empty())
    std::fprintf(stderr, "warning: --db is ignored: --plan %s is a plan file, not a plan of the database\n",
                 o.plan.c_str());
  std::optional<snip::Store> store;
  // An explicit --db must exist (a typo must not silently show an empty new database).
  if (!file_plan)
    store.emplace(o.db.empty() ? snip::cli::default_db_path() : o.db,
                  snip::StoreOptions{.create = o.db.empty(), .read_only_if_unwritable = true});
  std::string text;
  if (o.run) {
    text = export_run(*store, *o.run, o.format);
  } else {
    const snip::Plan plan = file_plan ? *file_plan : store->plan(std::stoll(o.plan)).plan;
    if (to_stack) {
      std::vector<std::string> warnings;
      const auto layout = o.pipeline_given ? std::optional(o.pipeline) : std::nullopt;
      text = !o.preset.empty() ? snip::export_plan(plan, snip::preset_config(o.preset).dims(), stack, &warnings, layout)
             : !o.config.empty()
                 ? snip::export_plan(plan, snip::read_config_file(o.config).dims(), stack, &warnings, layout)
                 : snip::export_plan(plan, stack, &warnings, layout);
      for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    } else {
      text = o.format == "csv" ? snip::plan_to_csv(plan) : snip::plan_to_json(plan);
    }
  }
  if (o.out.empty() || o.out == "-") {
    std::cout << text;
  } else {
    snip::write_file_atomic(o.out, text);
  }
}

void setup_export(CLI::App& app) {
  auto opts = std::make_shared<ExportOptions>();
  auto* cmd = app.add_subcommand(
      "export",
      "Export a run's per-step metrics (CSV/JSON) or a plan (snip-plan/1 JSON, CSV per layer and GEMM role, or "
      "--to megatron|te|torchao)");
  cmd->add_option("--db", opts->db, "Experiment database (SQLite); default: the user's data directory");
  auto* run = cmd->add_option("--run", opts->run, "Run id to export (see `snip runs`)");
  auto* plan = cmd->add_option(
      "--plan", opts->plan, "Plan to export: an id of the database (see `snip show --run ID`) or a snip-plan/1 file");
  run->excludes(plan);
  auto* format = cmd->add_option("--format", opts->format, "json or csv")->check(CLI::IsMember({"json", "csv"}));
  auto* to = cmd->add_option("--to", opts->to,
                             "A plan in a training stack's per-module format: megatron (--te-precision-config-file "
                             "YAML), te (module -> Transformer Engine recipe JSON), torchao (module lists JSON); or "
                             "a run's scalars as TensorBoard event files: tensorboard (--run ID --out DIR); "
                             "docs/FORMATS.md");
  to->excludes(format);
  cmd->add_option("--preset", opts->preset, "With --to: the model the plan is for (default: the plan's blocks)")
      ->needs(to);
  cmd->add_option("--config", opts->config, "With --to: the model's config.json instead of --preset")->needs(to);
  cmd->add_option("--out", opts->out, "Output file (written atomically); default: standard output");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  snip::cli::add_pipeline_options(cmd, opts->pipeline, *rules,
                                  "with --to megatron, write the plan for that many stages (default: the layout the "
                                  "plan was solved for)",
                                  &opts->pipeline_given);
  rules->writes("--out", opts->out).reads("--plan", opts->plan).reads("--config", opts->config);
  rules->at_least<int64_t>("--run", opts->run, 1, "run ids start at 1 (see `snip runs`)")
      .excludes("--preset", "--config", "both name the model; give one")
      .add([opts] {
        if (!opts->to.empty() && opts->to != "tensorboard") (void)snip::parse_plan_stack(opts->to);
        if (is_id(opts->plan) && std::stoll(opts->plan) < 1)
          throw snip::Error("--plan " + opts->plan + ": plan ids start at 1 (see `snip show --run ID`)");
      });
  // The format follows --out's suffix unless --format says otherwise; the two may not disagree.
  rules->add([opts, r = rules.get()] {
    const auto suffix = [&](const char* ext) {
      const std::string e = ext;
      return opts->out.size() > e.size() && opts->out.compare(opts->out.size() - e.size(), e.size(), e) == 0;
    };
    if (!opts->to.empty()) return;
    const std::string implied = suffix(".csv") ? "csv" : suffix(".json") ? "json" : "";
    if (implied.empty()) return;
    if (r->given("--format") && opts->format != implied)
      throw snip::Error("--format " + opts->format + " contradicts --out " + opts->out + " (a ." + implied +
                        " file); give --out a ." + opts->format + " name or drop --format");
    opts->format = implied;
  });
  snip::cli::run_checked(cmd, rules, [opts] {
    if (!opts->run && opts->plan.empty()) throw CLI::RequiredError("--run or --plan");
    run_export(*opts);
  });
}

SNIP_REGISTER_COMMAND("export", setup_export);

}  // namespace
