// `snip runs`: lists the runs of an experiment database as a table (or JSON); with
// --compares, the stored `snip compare` tables instead.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/error.h"
#include "snip/store.h"
#include "snip/store_export.h"

namespace {

struct RunsOptions {
  std::string db;
  std::string status;
  bool json = false, compares = false;
};

// A column of printable text, cut and padded by characters (a UTF-8 name never misaligns a row).
std::string fit(const std::string& s, size_t width) {
  return snip::fit_column(snip::printable_text(s), width);
}

// The stored comparisons: one line (or JSON object) each, newest first.
void list_compares(const snip::Store& store, bool json) {
  nlohmann::json out = nlohmann::json::array();
  if (!json)
    std::printf("%5s  %5s  %-8s  %6s  %7s  %6s  %5s  %11s  %-20s  %s\n", "ID", "RUN", "RECIPE", "BUDGET", "FROM",
                "STEPS", "ROWS", "NOISE FLOOR", "CREATED (UTC)", "CHECKPOINT");
  for (const auto& c : store.list_compares()) {
    if (json) {
      out.push_back({{"id", c.id},
                     {"status", snip::run_status_name(c.status)},
                     {"run_id", c.run_id ? nlohmann::json(*c.run_id) : nlohmann::json(nullptr)},
                     {"checkpoint", c.checkpoint},
                     {"start_step", c.start_step},
                     {"budget", c.budget},
                     {"recipe", c.recipe},
                     {"steps", c.steps},
                     {"rows", c.row_count},
                     {"noise_floor_train", std::isfinite(c.noise_floor_train) ? nlohmann::json(c.noise_floor_train)
                                                                              : nlohmann::json(nullptr)},
                     {"created", snip::format_utc_ms(c.created_ms)}});
      continue;
    }
    std::printf("%5lld  %5s  %s  %6.3f  %7lld  %6lld  %5lld  %11.4f  %-20s  %s\n", (long long)c.id,
                c.run_id ? std::to_string(*c.run_id).c_str() : "-", fit(c.recipe, 8).c_str(), c.budget,
                (long long)c.start_step, (long long)c.steps, (long long)c.row_count, c.noise_floor_train,
                snip::format_utc_ms(c.created_ms).c_str(), snip::printable_text(c.checkpoint).c_str());
  }
  if (json) std::cout << snip::cli::json_text(out, 2) << "\n";
}

void run_runs(const RunsOptions& o) {
  // An explicit --db must exist (a typo must not silently show an empty new database).
  snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db,
                    {.create = o.db.empty(), .read_only_if_unwritable = true});
  if (o.compares) {
    list_compares(store, o.json);
    return;
  }
  std::optional<snip::RunStatus> only;
  if (!o.status.empty()) only = snip::parse_run_status(o.status);
  auto runs = store.runs();
  nlohmann::json out = nlohmann::json::array();
  if (!o.json)
    std::printf("%5s  %-24s  %-11s  %8s  %10s  %-12s  %-6s  %-20s  %s\n", "ID", "NAME", "STATUS", "STEPS", "LOSS",
                "METHOD", "RECIPE", "STARTED (UTC)", "DURATION");
  for (const auto& r : runs) {
    if (only && r.status != *only) continue;
    std::optional<double> loss;
    if (r.last_step >= 0) {
      const auto last = store.metrics(r.id, r.last_step, r.last_step);
      if (!last.empty()) loss = last.back().train_loss;
    }
    const int64_t end = r.ended_ms ? *r.ended_ms : r.heartbeat_ms;
    if (o.json) {
      auto j = snip::run_record_json(store, r);  // as `snip show --json`, with its checkpoints
      j["train_loss"] = loss ? nlohmann::json(*loss) : nlohmann::json(nullptr);
      out.push_back(j);
      continue;
    }
    char loss_text[32] = "-";
    if (loss) std::snprintf(loss_text, sizeof loss_text, "%.4f", *loss);
    std::printf("%5lld  %s  %-11s  %8lld  %10s  %s  %s  %-20s  %s\n", (long long)r.id, fit(r.spec.name, 24).c_str(),
                snip::run_status_name(r.status), (long long)std::max<int64_t>(r.last_step, 0), loss_text,
                fit(r.spec.method.empty() ? "-" : r.spec.method, 12).c_str(), fit(r.spec.recipe, 6).c_str(),
                snip::format_utc_ms(r.started_ms).c_str(), snip::format_duration_ms(end - r.started_ms).c_str());
  }
  if (o.json) std::cout << snip::cli::json_text(out, 2) << "\n";
}

void setup_runs(CLI::App& app) {
  auto opts = std::make_shared<RunsOptions>();
  auto* cmd = app.add_subcommand("runs", "List the training runs stored in an experiment database");
  cmd->add_option("--db", opts->db, "Experiment database (SQLite); default: the user's data directory");
  cmd->add_option("--status", opts->status, "Only runs with this status: running, finished, failed, interrupted");
  cmd->add_flag(
      "--compares", opts->compares,
      "List the stored plan comparisons (`snip compare`) instead of runs; show one with snip show --compare ID");
  cmd->add_flag("--json", opts->json, "Print a JSON array of runs instead of a table");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->excludes("--status", "--compares", "--status filters runs, and --compares lists compares instead");
  rules->one_of("--status", opts->status, {"running", "finished", "failed", "interrupted"});
  snip::cli::run_checked(cmd, rules, [opts] { run_runs(*opts); });
}

SNIP_REGISTER_COMMAND("runs", setup_runs);

}  // namespace
