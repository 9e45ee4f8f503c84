// `snip show`: summarizes one run: configuration, status, progress, metrics, checkpoints,
// plan timeline, statistics rounds, validation results and plan comparisons; or, with
// --compare, prints one stored `snip compare` table.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "compare_table.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/error.h"
#include "snip/layers.h"
#include "snip/store.h"
#include "snip/store_export.h"

namespace {

// A compare's noise floor, or why there is none (one replicate has no spread): never "nan".
std::string noise_floor_text(double v) {
  if (!std::isfinite(v)) return "— (1 replicate)";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

struct ShowOptions {
  std::string db;
  std::optional<int64_t> run, compare;
  bool json = false;
};

struct MetricsSummary {
  int64_t rows = 0;
  std::optional<double> last_train, min_train, last_val, min_val, mean_tokens_per_s, last_fp4, last_gap;
};

MetricsSummary summarize(const std::vector<snip::MetricRow>& rows) {
  MetricsSummary s;
  s.rows = int64_t(rows.size());
  double tps = 0;
  for (const auto& r : rows) {
    if (std::isfinite(r.train_loss)) {
      s.last_train = r.train_loss;
      s.min_train = std::min(s.min_train.value_or(r.train_loss), r.train_loss);
    }
    if (r.val_loss) {
      s.last_val = *r.val_loss;
      s.min_val = std::min(s.min_val.value_or(*r.val_loss), *r.val_loss);
    }
    if (r.bf16_gap) s.last_gap = *r.bf16_gap;
    s.last_fp4 = r.fp4_fraction;
    tps += r.tokens_per_s;
  }
  if (!rows.empty()) s.mean_tokens_per_s = tps / double(rows.size());
  return s;
}

nlohmann::json opt_json(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
std::string opt_text(const std::optional<double>& v, const char* fmt = "%.4f") {
  if (!v) return "-";
  char buf[40];
  std::snprintf(buf, sizeof buf, fmt, *v);
  return buf;
}

using snip::cli::num_or_null;

// One stored `snip compare` table, printed like `snip compare` prints it.
void show_compare(const snip::Store& store, int64_t id, bool json) {
  const snip::CompareRecord c = store.compare(id);
  if (c.rows.empty()) throw snip::Error(store.path() + ": compare " + std::to_string(id) + " has no rows");
  const size_t bf16_row = snip::cli::find_bf16_row(c.rows), snip_row = snip::cli::find_snip_row(c.rows, c.options);
  const std::vector<snip::ArmStatistics> stats = snip::cli::compare_row_statistics(c.rows, bf16_row, snip_row);
  if (json) {
    nlohmann::json j = {
        {"id", c.id},
        {"run_id", c.run_id ? nlohmann::json(*c.run_id) : nlohmann::json(nullptr)},
        {"stats_round_id", c.stats_round_id ? nlohmann::json(*c.stats_round_id) : nlohmann::json(nullptr)},
        {"checkpoint", c.checkpoint},
        {"start_step", c.start_step},
        {"budget", c.budget},
        {"recipe", c.recipe},
        {"steps", c.steps},
        {"cooldown_steps", c.cooldown_steps},
        {"eval_batches", c.eval_batches},
        {"last_window", c.last_window},
        {"control_rel", c.control_rel},
        {"replicates", c.replicates},
        {"snip_reference", c.rows[snip_row].method},
        {"noise_floor_train", num_or_null(c.noise_floor_train)},
        {"noise_floor_val", num_or_null(c.noise_floor_val)},
        {"options", c.options},
        {"created", snip::format_utc_ms(c.created_ms)},
        {"status", snip::run_status_name(c.status)},
        {"status_message", c.status_message}};
    j["regret_vs_oracle"] = snip::cli::regret_json(c.rows, stats, snip_row);
    j["rows"] = nlohmann::json::array();
    for (size_t i = 0; i < c.rows.size(); ++i) {
      const snip::CompareRowRecord& r = c.rows[i];
      nlohmann::json curve = nlohmann::json::array();
      for (double v : r.train_curve) curve.push_back(num_or_null(v));
      nlohmann::json replicate_curves = nlohmann::json::array();
      for (const auto& x : r.replicates) {
        replicate_curves.push_back(nlohmann::json::array());
        for (double v : x.train_curve) replicate_curves.back().push_back(num_or_null(v));
      }
      j["rows"].push_back(snip::cli::compare_row_json(r, stats[i], i == snip_row));
      j["rows"].back()["replicate_train_curves"] = replicate_curves;
      j["rows"].back()["plan_id"] = r.plan_id ? nlohmann::json(*r.plan_id) : nlohmann::json(nullptr);
      j["rows"].back()["train_curve"] = curve;
    }
    std::cout << snip::cli::json_text(j, 2) << "\n";
    return;
  }
  std::printf(
      "compare %lld: %s from step %lld, %lld steps per plan (+%lld cooldown), %lld replicate%s, budget %.3f, "
      "recipe %s\n",
      (long long)c.id, c.checkpoint.c_str(), (long long)c.start_step, (long long)c.steps, (long long)c.cooldown_steps,
      (long long)c.replicates, c.replicates == 1 ? "" : "s", c.budget, c.recipe.c_str());
  std::printf("  created %s%s\n", snip::format_utc_ms(c.created_ms).c_str(),
              c.run_id ? (", run " + std::to_string(*c.run_id)).c_str() : "");
  if (c.status != snip::RunStatus::finished)  // its numbers are those of the trainings stored so far
    std::printf("  %s: %s\n", snip::run_status_name(c.status), c.status_message.c_str());
  snip::cli::print_compare_rows(c.rows, stats, snip_row);
  snip::cli::print_compare_notes(c.rows, stats, snip_row);
}

// Everything `snip show --run` reports about one run.
struct RunRecord {
  snip::RunInfo r;
  MetricsSummary m;
  std::vector<snip::PlanTimelineEntry> timeline;
  std::vector<snip::StatsRoundInfo> rounds;
  std::vector<snip::ValidationResult> validations;
  std::vector<snip::PlanRecord> plans;
  std::vector<snip::CompareRecord> compares;
};

RunRecord read_run(const snip::Store& store, int64_t id) {
  RunRecord rec{store.run(id), {}, {}, {}, {}, {}, {}};
  rec.m = summarize(store.metrics(rec.r.id));
  rec.timeline = store.plan_timeline(rec.r.id);
  rec.rounds = store.stats_rounds(rec.r.id);
  rec.validations = store.validations(rec.r.id);
  rec.plans = store.plans(rec.r.id);
  rec.compares = store.list_compares(rec.r.id);
  return rec;
}

void print_run_json(const snip::Store& store, const RunRecord& rec) {
  const auto& r = rec.r;
  const auto& m = rec.m;
  const auto& timeline = rec.timeline;
  const auto& rounds = rec.rounds;
  const auto& validations = rec.validations;
  const auto& plans = rec.plans;
  const auto& compares = rec.compares;
  nlohmann::json j = snip::run_record_json(store, r);
  j["metrics_summary"] = {{"rows", m.rows},
                          {"last_train_loss", opt_json(m.last_train)},
                          {"min_train_loss", opt_json(m.min_train)},
                          {"last_val_loss", opt_json(m.last_val)},
                          {"min_val_loss", opt_json(m.min_val)},
                          {"mean_tokens_per_s", opt_json(m.mean_tokens_per_s)},
                          {"last_fp4_fraction", opt_json(m.last_fp4)},
                          {"last_bf16_gap", opt_json(m.last_gap)}};
  nlohmann::json tl = nlohmann::json::array();
  for (const auto& e : timeline)
    tl.push_back({{"plan_id", e.plan_id},
                  {"first_step", e.first_step},
                  {"last_step", e.last_step ? nlohmann::json(*e.last_step) : nlohmann::json(nullptr)}});
  j["plan_timeline"] = tl;
  nlohmann::json rj = nlohmann::json::array();
  for (const auto& s : rounds)
    rj.push_back({{"id", s.id}, {"step", s.step}, {"batch_id", s.batch_id}, {"layers", s.num_layers}});
  j["stats_rounds"] = rj;
  nlohmann::json pj = nlohmann::json::array();
  for (const auto& p : plans)
    pj.push_back({{"id", p.id},
                  {"method", p.plan.method},
                  {"budget", p.plan.budget},
                  {"achieved_fp4_fraction", p.plan.achieved_fp4_fraction},
                  {"solve", snip::plan_solve_to_json(p.solve)}});
  j["plans"] = pj;
  nlohmann::json vj = nlohmann::json::array();
  for (const auto& v : validations) vj.push_back(snip::validation_to_json(store.validation(v.id)));
  j["validations"] = vj;
  nlohmann::json cj = nlohmann::json::array();
  for (const auto& c : compares)
    cj.push_back({{"id", c.id},
                  {"start_step", c.start_step},
                  {"budget", c.budget},
                  {"recipe", c.recipe},
                  {"steps", c.steps},
                  {"rows", c.row_count},
                  {"noise_floor_train", num_or_null(c.noise_floor_train)}});
  j["compares"] = cj;
  std::cout << snip::cli::json_text(j, 2) << "\n";
}

// The run's configuration, status and progress.
void print_run_summary(const snip::RunInfo& r, const MetricsSummary& m) {
  const auto& d = r.spec.dims;
  const int64_t end = r.ended_ms ? *r.ended_ms : r.heartbeat_ms;
  std::printf("run %lld: %s\n", (long long)r.id, snip::printable_text(r.spec.name).c_str());
  std::printf("  status      %s%s%s\n", snip::run_status_name(r.status), r.status_message.empty() ? "" : " — ",
              snip::printable_text(r.status_message).c_str());
  std::printf("  started     %s   ended %s   duration %s\n", snip::format_utc_ms(r.started_ms).c_str(),
              r.ended_ms ? snip::format_utc_ms(*r.ended_ms).c_str() : "-",
              snip::format_duration_ms(end - r.started_ms).c_str());
  std::printf("  model       C=%d F=%d L=%d NH=%d KVH=%d (%zu selectable linear layers)\n", d.hidden, d.intermediate,
              d.num_layers, d.num_heads, d.num_kv_heads,
              size_t(snip::kLayersPerBlock) * size_t(std::max(0, d.num_layers)));
  std::printf("  data        %s\n",
              r.spec.data_source.empty() ? "-" : snip::printable_text(r.spec.data_source).c_str());
  std::printf("  method      %s   recipe %s   seed %lld\n",
              r.spec.method.empty() ? "-" : snip::printable_text(r.spec.method).c_str(),
              snip::printable_text(r.spec.recipe).c_str(), (long long)r.spec.seed);
  if (r.spec.parent_run_id)
    std::printf("  branched    from run %lld at step %lld\n", (long long)*r.spec.parent_run_id,
                (long long)r.spec.parent_step.value_or(0));
  if (!r.spec.train_config.empty())
    std::printf("  training    %s\n", snip::cli::json_text(r.spec.train_config).c_str());
  std::printf("  progress    %lld steps recorded, last step %lld\n", (long long)m.rows, (long long)r.last_step);
  std::printf("  train loss  last %s   min %s\n", opt_text(m.last_train).c_str(), opt_text(m.min_train).c_str());
  std::printf("  val loss    last %s   min %s\n", opt_text(m.last_val).c_str(), opt_text(m.min_val).c_str());
  std::printf("  throughput  %s tokens/s (mean)   FP4 FLOP fraction %s   BF16 gap %s\n",
              opt_text(m.mean_tokens_per_s, "%.0f").c_str(), opt_text(m.last_fp4).c_str(),
              opt_text(m.last_gap, "%+.4f").c_str());
  if (!r.spec.notes.empty()) std::printf("  notes       %s\n", snip::printable_text(r.spec.notes).c_str());
}

// What was stored along the run: checkpoints, plans, statistics rounds, validations, compares.
void print_run_history(const snip::Store& store, const RunRecord& rec) {
  const auto& r = rec.r;
  const auto& timeline = rec.timeline;
  const auto& rounds = rec.rounds;
  const auto& validations = rec.validations;
  const auto& plans = rec.plans;
  const auto& compares = rec.compares;
  std::printf("  checkpoints %zu\n", r.checkpoints.size());
  for (const auto& c : r.checkpoints)
    std::printf("    step %-8lld %s\n", (long long)c.step, snip::printable_text(c.path).c_str());
  std::printf("  plan timeline %zu\n", timeline.size());
  for (const auto& e : timeline) {
    const auto p = store.plan(e.plan_id);
    std::printf("    steps %lld..%s  plan %lld (%s, budget %.3f, achieved %.4f)\n", (long long)e.first_step,
                e.last_step ? std::to_string(*e.last_step).c_str() : "", (long long)e.plan_id,
                snip::printable_text(p.plan.method).c_str(), p.plan.budget, p.plan.achieved_fp4_fraction);
  }
  std::printf("  plans       %zu\n", plans.size());
  for (const auto& p : plans)
    std::printf("    plan %lld: %s budget %.3f achieved %.4f objective %s solver %s\n", (long long)p.id,
                snip::printable_text(p.plan.method).c_str(), p.plan.budget, p.plan.achieved_fp4_fraction,
                opt_text(p.solve.objective, "%.6g").c_str(),
                p.solve.solver_status.empty() ? "-" : p.solve.solver_status.c_str());
  std::printf("  statistics rounds %zu\n", rounds.size());
  for (const auto& s : rounds)
    std::printf("    round %lld at step %lld (batch %s, %d layers)\n", (long long)s.id, (long long)s.step,
                snip::printable_text(s.batch_id).c_str(), s.num_layers);
  std::printf("  validations %zu\n", validations.size());
  for (const auto& v : validations) {
    const auto full = store.validation(v.id);
    std::printf("    validation %lld at step %lld: %zu entries", (long long)v.id, (long long)v.step,
                full.entries.size());
    for (const auto& [k, x] : full.summary) std::printf("  %s=%.3f", k.c_str(), x);
    std::printf("\n");
  }
  std::printf("  compares    %zu\n", compares.size());
  for (const auto& c : compares)
    std::printf(
        "    compare %lld from step %lld: budget %.3f recipe %s, %lld steps, %lld rows, noise floor %s "
        "(snip show --compare %lld)\n",
        (long long)c.id, (long long)c.start_step, c.budget, c.recipe.c_str(), (long long)c.steps,
        (long long)c.row_count,
        // One replicate has no spread to measure: say so, never "nan".
        noise_floor_text(c.noise_floor_train).c_str(), (long long)c.id);
}

void run_show(const ShowOptions& o) {
  // An explicit --db must exist (a typo must not silently show an empty new database).
  snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db,
                    {.create = o.db.empty(), .read_only_if_unwritable = true});
  if (o.compare) {
    show_compare(store, *o.compare, o.json);
    return;
  }
  if (!o.run)
    throw snip::Error("snip show: give --run ID (see `snip runs`) or --compare ID (see `snip runs --compares`)");
  const RunRecord rec = read_run(store, *o.run);
  if (o.json) {
    print_run_json(store, rec);
    return;
  }
  print_run_summary(rec.r, rec.m);
  print_run_history(store, rec);
}

void setup_show(CLI::App& app) {
  auto opts = std::make_shared<ShowOptions>();
  auto* cmd = app.add_subcommand(
      "show",
      "Summarize one run (status, progress, losses, plans, statistics rounds, comparisons) or one compare table");
  cmd->add_option("--db", opts->db, "Experiment database (SQLite); default: the user's data directory");
  auto* run = cmd->add_option("--run", opts->run, "Run id (see `snip runs`)");
  cmd->add_option("--compare", opts->compare, "Stored `snip compare` table id (see `snip runs --compares`)")
      ->excludes(run);
  cmd->add_flag("--json", opts->json, "Print one JSON object");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->at_least<int64_t>("--run", opts->run, 1, "run ids start at 1 (see `snip runs`)")
      .at_least<int64_t>("--compare", opts->compare, 1, "compare ids start at 1 (see `snip runs --compares`)");
  snip::cli::run_checked(cmd, rules, [opts] { run_show(*opts); });
}

SNIP_REGISTER_COMMAND("show", setup_show);

}  // namespace
