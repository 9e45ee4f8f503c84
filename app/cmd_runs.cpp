// `snip runs`: lists the runs of an experiment database as a table (or JSON).
#include <algorithm>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "snip/error.h"
#include "snip/store.h"
#include "snip/store_export.h"

namespace {

struct RunsOptions {
  std::string db;
  std::string status;
  bool json = false;
};

std::string fit(std::string s, size_t width) {
  if (s.size() > width) s = s.substr(0, width - 1) + "~";
  return s;
}

void run_runs(const RunsOptions& o) {
  // An explicit --db must exist (a typo must not silently show an empty new database).
  snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db, {.create = o.db.empty()});
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
      auto j = snip::run_to_json(r);
      j["train_loss"] = loss ? nlohmann::json(*loss) : nlohmann::json(nullptr);
      out.push_back(j);
      continue;
    }
    char loss_text[32] = "-";
    if (loss) std::snprintf(loss_text, sizeof loss_text, "%.4f", *loss);
    std::printf("%5lld  %-24s  %-11s  %8lld  %10s  %-12s  %-6s  %-20s  %s\n", (long long)r.id,
                fit(r.spec.name, 24).c_str(), snip::run_status_name(r.status), (long long)std::max<int64_t>(r.last_step, 0), loss_text,
                fit(r.spec.method.empty() ? "-" : r.spec.method, 12).c_str(), fit(r.spec.recipe, 6).c_str(),
                snip::format_utc_ms(r.started_ms).c_str(), snip::format_duration_ms(end - r.started_ms).c_str());
  }
  if (o.json) std::cout << out.dump(2) << "\n";
}

void setup_runs(CLI::App& app) {
  auto opts = std::make_shared<RunsOptions>();
  auto* cmd = app.add_subcommand("runs", "List the training runs stored in an experiment database");
  cmd->add_option("--db", opts->db, "Experiment database (SQLite); default: the user's data directory");
  cmd->add_option("--status", opts->status, "Only runs with this status: running, finished, failed, interrupted");
  cmd->add_flag("--json", opts->json, "Print a JSON array of runs instead of a table");
  cmd->callback([opts] { run_runs(*opts); });
}

SNIP_REGISTER_COMMAND("runs", setup_runs);

}  // namespace
