// CompareRecorder: a plan comparison stored as it runs (compare_recorder.h).
#include "snip/compare_recorder.h"

#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/files_in_use.h"
#include "snip/paired_stats.h"
#include "snip/recorded_training.h"
#include "snip/store_export.h"

namespace snip {
namespace {

namespace fs = std::filesystem;

// The files of a checkpoint (checkpoint.cpp writes them all).
constexpr const char* kCheckpointFiles[] = {"config.json", "model.safetensors", "optimizer.safetensors",
                                            "trainer_state.json"};

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  const fs::path abs = fs::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

CompareReplicateRecord to_record(const CompareReplicate& x) {
  return {x.train_loss_last, x.val_loss_plan, x.val_loss_bf16, x.train_curve};
}

CompareReplicate from_record(const CompareReplicateRecord& x) {
  CompareReplicate r;
  r.train_loss_last = x.train_loss_last;
  r.val_loss_plan = x.val_loss_plan;
  r.val_loss_bf16 = x.val_loss_bf16;
  r.train_curve = x.train_curve;
  return r;
}

std::string resume_hint(const Store& store, int64_t id) {
  return "continue it with: " + compare_resume_command(store, id);
}

}  // namespace

std::string checkpoint_fingerprint(const std::string& dir) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const char* p, size_t n) {
    for (size_t i = 0; i < n; ++i) h = (h ^ uint8_t(p[i])) * 0x100000001b3ull;
  };
  std::vector<char> buf(1 << 20);
  const auto hold = hold_files_in_use();  // opened raw: never a database this process holds
  for (const char* name : kCheckpointFiles) {
    const std::string path = dir + "/" + name;
    if (const std::string what = file_in_use(path); !what.empty())
      throw Error("cannot read " + path + ": it is " + what + ", which this program has open (is " + dir +
                  " a snip checkpoint?)");
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error("cannot read " + path + " (is " + dir + " a snip checkpoint?)");
    mix(name, std::char_traits<char>::length(name) + 1);
    while (in) {
      in.read(buf.data(), std::streamsize(buf.size()));
      mix(buf.data(), size_t(in.gcount()));
    }
    if (in.bad()) throw Error("reading " + path + " failed");
  }
  char hex[32];
  std::snprintf(hex, sizeof hex, "%016" PRIx64, h);
  return std::string("fnv1a64 ") + hex;
}

nlohmann::json compare_settings_to_json(const CompareOptions& o) {
  return {{"budget", o.budget},
          {"steps", o.steps},
          {"recipe", o.recipe},
          {"seeds", o.random_seeds},
          {"lambdas", o.lambdas},
          {"baselines", o.baselines},
          {"cooldown", o.cooldown_steps},
          {"eval-batches", o.eval_batches},
          {"last-window", o.last_window},
          {"replicates", o.replicates},
          {"replicate-rel", o.replicate_rel},
          {"oracle", o.oracle},
          {"oracle-batches", o.oracle_batches},
          {"oracle-disjoint", o.oracle_disjoint},
          {"per-role", o.per_role}};
}

CompareOptions compare_options_from_record(const CompareRecord& c) {
  const std::string name = "compare " + std::to_string(c.id);
  if (!c.options.contains("resume") || !c.options["resume"].is_object())
    throw Error(name +
                " was stored without the settings a resume needs (by an older snip, or finished before "
                "it could be interrupted); start a new compare instead");
  const nlohmann::json& j = c.options["resume"];
  CompareOptions o;
  try {
    o.budget = j.at("budget").get<double>();
    o.steps = j.at("steps").get<int64_t>();
    o.recipe = j.at("recipe").get<std::string>();
    o.random_seeds = j.at("seeds").get<int>();
    o.lambdas = j.at("lambdas").get<std::vector<double>>();
    if (j.contains("baselines")) o.baselines = j.at("baselines").get<std::vector<std::string>>();
    o.cooldown_steps = j.at("cooldown").get<int>();
    o.eval_batches = j.at("eval-batches").get<int>();
    o.last_window = j.at("last-window").get<int>();
    o.replicates = j.at("replicates").get<int>();
    o.replicate_rel = j.at("replicate-rel").get<double>();
    o.oracle = j.at("oracle").get<bool>();
    o.oracle_batches = j.at("oracle-batches").get<int>();
    // stored before the oracle moved off the evaluation's batches: keep the old rule
    o.oracle_disjoint = j.contains("oracle-disjoint") && j.at("oracle-disjoint").get<bool>();
    o.per_role = j.contains("per-role") && j.at("per-role").get<bool>();  // stored before it existed: false
  } catch (const nlohmann::json::exception& e) {
    throw Error(name + ": its stored settings are damaged (" + std::string(e.what()) + "); start a new compare");
  }
  return o;
}

CompareRecorder::CompareRecorder(Store& store, int64_t id, std::string checkpoint, CompareOptions options)
    : store_(store), id_(id), checkpoint_(std::move(checkpoint)), options_(std::move(options)) {}

CompareRecorder::CompareRecorder(Store& store, const std::string& checkpoint, const CompareOptions& o)
    : store_(store), checkpoint_(absolute_path(checkpoint)), options_(o) {
  check_compare_setup(checkpoint, o);  // bad options, a bad checkpoint, a compare that cannot fit: nothing stored
  const nlohmann::json state = read_trainer_state(checkpoint);
  CompareRecord c;
  c.status = RunStatus::running;
  c.run_id = find_run_of_checkpoint(store, checkpoint);
  c.checkpoint = checkpoint_;
  c.checkpoint_fingerprint = checkpoint_fingerprint(checkpoint);
  c.start_step = state.contains("step") && state["step"].is_number_integer() ? state["step"].get<int64_t>() : 0;
  c.budget = o.budget;
  c.recipe = o.recipe;
  c.steps = o.steps;
  c.cooldown_steps = o.cooldown_steps;
  c.eval_batches = o.eval_batches;
  c.last_window = o.last_window;
  c.control_rel = o.replicate_rel;
  c.replicates = o.replicates;
  c.noise_floor_train = c.noise_floor_val = std::numeric_limits<double>::quiet_NaN();
  c.options = {{"random_seeds", o.random_seeds},
               {"lambdas", o.lambdas},
               {"baselines", o.baselines},
               {"replicate_rel", o.replicate_rel}};
  if (o.oracle) {
    c.options["oracle_batches"] = o.oracle_batches;
    c.options["oracle_first_batch"] = oracle_first_batch(o);
  }
  c.options["resume"] = compare_settings_to_json(o);
  id_ = store.insert_compare(c);
}

std::unique_ptr<CompareRecorder> CompareRecorder::resume(Store& store, int64_t id, int jobs) {
  const CompareRecord c = store.compare(id);
  const std::string name = "compare " + std::to_string(id);
  if (c.status == RunStatus::finished)
    throw Error(name + " is finished: there is nothing to resume (show it with snip show --compare " +
                std::to_string(id) + ")");
  CompareOptions o = compare_options_from_record(c);
  o.jobs = jobs;
  std::error_code ec;
  if (!fs::is_directory(c.checkpoint, ec))
    throw Error(name + " started from " + c.checkpoint +
                ", which no longer exists; restore that checkpoint to resume it, or start a new compare");
  const std::string now = checkpoint_fingerprint(c.checkpoint);
  if (now != c.checkpoint_fingerprint)
    throw Error(name + " started from " + c.checkpoint + " (" + c.checkpoint_fingerprint +
                "), which has changed since (now " + now +
                "): its stored trainings would not match new ones; restore that checkpoint, or start a new compare");
  store.claim_compare(id);  // refuses a compare a live process still trains
  std::unique_ptr<CompareRecorder> r(new CompareRecorder(store, id, c.checkpoint, std::move(o)));
  for (size_t i = 0; i < c.rows.size(); ++i) r->position_[c.rows[i].method] = int64_t(i);
  r->rows_stored_ = !c.rows.empty();
  for (const StoredCompareReplicate& x : store.compare_replicates(id))
    if (x.position >= 0 && x.position < int64_t(c.rows.size()))
      r->kept_[{c.rows[size_t(x.position)].method, int(x.replicate)}] = from_record(x.result);
  return r;
}

// The plans are made: store the statistics round, one plan per arm and the arms (no trainings
// yet). A resumed compare already has them: the plans made again must be the stored ones.
void CompareRecorder::record_plans(const CompareReport& rep) {
  const std::string name = "compare " + std::to_string(id_);
  if (rows_stored_) {
    const std::vector<CompareRowRecord> stored = store_.compare_rows(id_);
    bool same = stored.size() == rep.rows.size();
    for (size_t i = 0; same && i < stored.size(); ++i)
      same = stored[i].method == rep.rows[i].method && stored[i].plan_id &&
             store_.plan(*stored[i].plan_id).plan.layers == rep.rows[i].plan.layers;
    if (!same)
      throw Error(name + ": the plans made again from " + checkpoint_ +
                  " differ from the stored ones (another snip version, or changed planner settings), so its "
                  "stored trainings cannot be continued; start a new compare");
    return;
  }
  CompareRecord c = store_.compare(id_);
  Store::Transaction tx(store_);
  c.stats_round_id = store_.add_stats_round(rep.round, c.run_id);
  c.start_step = rep.start_step;
  c.recipe = rep.recipe;
  c.options["snip_reference"] = rep.rows[rep.snip_row].method;
  c.rows.clear();
  for (size_t i = 0; i < rep.rows.size(); ++i) {
    const CompareRow& r = rep.rows[i];
    CompareRowRecord row;
    row.method = r.method;
    row.lambda = r.lambda;
    if (r.seed) row.seed = int64_t(*r.seed);
    row.achieved_fraction = r.achieved_fraction;
    row.train_loss_last = row.val_loss_plan = row.val_loss_bf16 = std::numeric_limits<double>::quiet_NaN();
    row.gap_train = row.gap_val_plan = row.gap_val_bf16 = std::numeric_limits<double>::quiet_NaN();
    row.same_plan_as = r.same_plan_as;
    PlanSolveInfo info;
    info.run_id = c.run_id;
    info.stats_round_id = c.stats_round_id;
    info.options = {{"compare", true}};
    if (r.lambda) info.options["lambda"] = *r.lambda;
    if (r.seed) info.options["seed"] = *r.seed;
    info.solver_status = "compare";
    row.plan_id = store_.add_plan(r.plan, info);
    position_[r.method] = int64_t(i);
    c.rows.push_back(std::move(row));
  }
  store_.update_compare(c);
  tx.commit();
  rows_stored_ = true;
}

// Every arm trained: the means, gaps, verdicts against SNIP and noise floors, as `snip compare`
// stored them when it stored the whole table at the end.
void CompareRecorder::finish(const CompareReport& rep) {
  std::vector<Replicates> train, val;
  for (const CompareRow& r : rep.rows) {
    Replicates t, v;
    for (const CompareReplicate& x : r.replicates) t.push_back(x.train_loss_last), v.push_back(x.val_loss_plan);
    train.push_back(std::move(t));
    val.push_back(std::move(v));
  }
  const std::vector<ArmStatistics> stats = compare_statistics(train, val, rep.bf16_row, rep.snip_row);
  CompareRecord c = store_.compare(id_);
  c.noise_floor_train = rep.noise_floor_train;
  c.noise_floor_val = rep.noise_floor_val;
  for (size_t i = 0; i < rep.rows.size() && i < c.rows.size(); ++i) {
    const CompareRow& r = rep.rows[i];
    CompareRowRecord& row = c.rows[i];
    row.train_loss_last = r.train_loss_last;
    row.val_loss_plan = r.val_loss_plan;
    row.val_loss_bf16 = r.val_loss_bf16;
    row.gap_train = r.gap_train;
    row.gap_val_plan = r.gap_val_plan;
    row.gap_val_bf16 = r.gap_val_bf16;
    const auto& verdict = stats[i].train.verdict;
    row.differs_from_snip = verdict && *verdict != Verdict::indistinguishable;
    row.train_curve = r.train_curve;
    row.replicates.clear();
    for (const CompareReplicate& x : r.replicates) row.replicates.push_back(to_record(x));
  }
  Store::Transaction tx(store_);
  store_.update_compare(c);
  store_.set_compare_status(id_, RunStatus::finished);
  tx.commit();
}

CompareReport CompareRecorder::run(const CompareHooks& front, const std::string& stop_message) {
  CompareHooks hooks;
  hooks.progress = front.progress;
  hooks.stop_requested = front.stop_requested;
  hooks.executor = front.executor;
  hooks.planned = [this](const CompareReport& rep) { record_plans(rep); };
  hooks.on_replicate = [this, &front](const CompareRow& row, int r, const CompareReplicate& x) {
    store_.add_compare_replicate(id_, position_.at(row.method), r, to_record(x));
    if (front.on_replicate) front.on_replicate(row, r, x);
  };
  hooks.stored = [this](const CompareRow& row, int r) -> std::optional<CompareReplicate> {
    const auto it = kept_.find({row.method, r});
    if (it == kept_.end()) return std::nullopt;
    return it->second;
  };
  try {
    CompareReport rep = run_compare(checkpoint_, options_, hooks);
    finish(rep);
    return rep;
  } catch (const CompareStopped&) {
    store_.set_compare_status(
        id_, RunStatus::interrupted,
        stop_message.empty() ? "stopped before every arm was trained; " + resume_hint(store_, id_) : stop_message);
    throw;
  } catch (const std::exception& e) {
    try {
      store_.set_compare_status(id_, RunStatus::failed, e.what());
    } catch (const std::exception&) {
      // the database itself failed: the original error says more
    }
    throw;
  }
}

}  // namespace snip
