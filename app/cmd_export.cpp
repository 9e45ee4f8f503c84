// `snip export`: writes a run's metrics (CSV: one row per step; JSON: the run with its
// metrics and plan timeline) or a plan (snip-plan/1 JSON, or CSV: one row per layer × role).
#include <iostream>

#include "command.h"
#include "option_rules.h"
#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/store.h"
#include "snip/store_export.h"

namespace {

struct ExportOptions {
  std::string db;
  std::optional<int64_t> run;
  std::optional<int64_t> plan;
  std::string format = "json";
  std::string out;
};

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
  return j.dump(2) + "\n";
}

void run_export(const ExportOptions& o) {
  if (o.format != "json" && o.format != "csv")
    throw snip::Error("--format " + o.format + " is not supported (use json or csv)");
  // An explicit --db must exist (a typo must not silently show an empty new database).
  snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db,
                    {.create = o.db.empty(), .read_only_if_unwritable = true});
  std::string text;
  if (o.run) {
    text = export_run(store, *o.run, o.format);
  } else {
    const auto p = store.plan(*o.plan);
    text = o.format == "csv" ? snip::plan_to_csv(p.plan) : snip::plan_to_json(p.plan);
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
      "Export a run's per-step metrics (CSV/JSON) or a plan (snip-plan/1 JSON or CSV per layer and GEMM role)");
  cmd->add_option("--db", opts->db, "Experiment database (SQLite); default: the user's data directory");
  auto* run = cmd->add_option("--run", opts->run, "Run id to export (see `snip runs`)");
  auto* plan = cmd->add_option("--plan", opts->plan, "Plan id to export (see `snip show --run ID`)");
  run->excludes(plan);
  cmd->add_option("--format", opts->format, "json or csv")->check(CLI::IsMember({"json", "csv"}));
  cmd->add_option("--out", opts->out, "Output file (written atomically); default: standard output");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->writes("--out", opts->out);
  rules->at_least<int64_t>("--run", opts->run, 1, "run ids start at 1 (see `snip runs`)")
      .at_least<int64_t>("--plan", opts->plan, 1, "plan ids start at 1 (see `snip show --run ID`)");
  snip::cli::run_checked(cmd, rules, [opts] {
    if (!opts->run && !opts->plan) throw CLI::RequiredError("--run or --plan");
    run_export(*opts);
  });
}

SNIP_REGISTER_COMMAND("export", setup_export);

}  // namespace
