// Where `snip solve` and `snip sweep` take their costs from: a snip-stats/1 file, a cost CSV,
// or a statistics round stored in the experiment database (by round id, or the latest round
// of a run). Header-only; used by cmd_solve.cpp and cmd_sweep.cpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include "command.h"
#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/planner.h"
#include "snip/store.h"

namespace snip::cli {

struct StatsSource {
  std::string stats;           // --stats: a snip-stats/1 file, or a round id in the database
  std::string costs;           // --costs: a cost CSV
  std::string db;              // --db (default: the user's database when a round id or --run is given)
  std::optional<int64_t> run;  // --run: the latest statistics round of this run
  // Filled by load(): the stored round used, when the costs came from the database.
  std::optional<int64_t> round_id;
};

// The options that name the source, as given: --stats, --run, --db, --costs.
struct StatsSourceOptions {
  std::string stats, costs, db;
  int64_t run = -1;  // --run: the latest stored round of this run (-1: not given)
  StatsSource source() const { return {stats, costs, db, run >= 0 ? std::optional<int64_t>(run) : std::nullopt, {}}; }
};

// Declares the source options on `cmd` (snip solve, snip sweep), bound to `o`: --stats, --run and
// --costs exclude one another; --db goes with a stored round.
inline void add_stats_source_options(CLI::App* cmd, StatsSourceOptions& o) {
  auto* stats = cmd->add_option("--stats", o.stats,
                                "Statistics round: a snip-stats/1 JSON file, or the id of a round stored in the "
                                "database (snip collect --db, adaptive snip train); costs are SNIP's divergence "
                                "estimates recomputed from its raw statistics");
  auto* run =
      cmd->add_option("--run", o.run, "Use the latest statistics round stored for this run (instead of --stats)")
          ->check(CLI::NonNegativeNumber);
  cmd->add_option("--db", o.db,
                  "Experiment database holding the round of --stats ID / --run (default: the user's database)");
  auto* costs = cmd->add_option("--costs", o.costs,
                                "Cost CSV (layer,precision,cost,flops[,role]; HF module names) for models trained "
                                "elsewhere");
  stats->excludes(costs);
  costs->excludes(stats);
  run->excludes(stats);
  run->excludes(costs);
}

inline bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A round whose measured curvature is negative gives negative ΔL estimates: quantizing looks like
// it lowers the loss. It can be a real (noisy) measurement, so it is planned on, never silently.
inline void warn_about_round(const StatsRound& round, const std::string& source) {
  auto it = round.globals.find("curvature");
  if (it != round.globals.end() && it->second < 0)
    std::fprintf(stderr,
                 "warning: %s: the measured curvature is negative (%g), so every ΔL estimate is negative and the plan "
                 "rests on ΔW and noise; collect the round again with more --noise-passes\n",
                 source.c_str(), it->second);
}

// Resolves the source and builds the planner input. A --stats value that is a whole number
// names a stored round when --db is given or no file of that name exists; anything else is a
// file. Throws snip::Error naming what is missing and how to find it (snip runs / snip show).
inline PlannerInput load_planner_input(StatsSource& src, const EstimatorOptions& est, const char* command) {
  const bool from_db =
      src.run.has_value() || (all_digits(src.stats) && (!src.db.empty() || !std::filesystem::exists(src.stats)));
  if (!from_db) {
    if (src.stats.empty() && src.costs.empty())
      throw Error(
          std::string("snip ") + command +
          " needs --stats FILE, --stats ROUND_ID (a stored statistics round), --run RUN_ID or --costs FILE.csv");
    if (!src.db.empty())
      throw Error(std::string("--db is used with --stats ROUND_ID or --run RUN_ID; '") + src.stats + src.costs +
                  "' is read as a file (give a round id such as --stats 3)");
    if (!src.stats.empty()) warn_about_round(stats_from_json(read_file(src.stats), src.stats), src.stats);
    return read_planner_input(src.stats, src.costs, est);
  }
  if (!src.costs.empty()) throw Error("--costs cannot be combined with --run or a stored --stats round");
  if (src.run && !src.stats.empty())
    throw Error("give either --stats ROUND_ID or --run RUN_ID (the run's latest round), not both");
  const std::string db = src.db.empty() ? default_db_path() : src.db;
  if (!std::filesystem::exists(db))
    throw Error("experiment database " + db + " does not exist (pass --db FILE, the database snip collect --db or " +
                "snip train --db wrote)");
  StoreOptions so;
  so.create = false;
  so.read_only_if_unwritable = true;  // planning only reads the round: a database the user cannot write will do
  Store store(db, so);
  int64_t id = 0;
  if (src.run) {
    if (!store.find_run(*src.run))
      throw Error("run " + std::to_string(*src.run) + " is not in " + db + " (snip runs --db " + db + " lists them)");
    const auto rounds = store.stats_rounds(*src.run);
    if (rounds.empty())
      throw Error("run " + std::to_string(*src.run) + " in " + db +
                  " has no statistics rounds (adaptive runs, snip train --method snip, record them)");
    // the latest: highest step, then the most recently stored
    const auto it = std::max_element(rounds.begin(), rounds.end(), [](const auto& a, const auto& b) {
      return a.step != b.step ? a.step < b.step : a.id < b.id;
    });
    id = it->id;
  } else {
    try {
      id = std::stoll(src.stats);
    } catch (const std::exception&) {
      throw Error("--stats " + src.stats + " is not a statistics round id");
    }
  }
  const StatsRound round = store.stats_round(id);  // throws naming the id when missing
  warn_about_round(round, db + " round " + std::to_string(id));
  PlannerInput in = planner_input_from_stats(round, est);
  const std::string label = db + " round " + std::to_string(id) + " (step " + std::to_string(round.step) + ")";
  in.snip.source = label;
  if (in.min_err) in.min_err->source = label;
  if (in.min_rel_err) in.min_rel_err->source = label;
  src.round_id = id;
  return in;
}

}  // namespace snip::cli
