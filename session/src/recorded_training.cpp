// RecordedTraining: a Trainer (and the adaptive controller) recorded step by step in the store.
#include "snip/recorded_training.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "snip/checkpoint.h"
#include "snip/dataset.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/precision.h"
#include "snip/run_recorder.h"

namespace snip {

namespace {

std::string canonical_path(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path : p.string();
}

template <typename T>
void read_key(const nlohmann::json& j, const char* key, T* out, const std::string& source) {
  if (!j.contains(key)) return;
  try {
    *out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(source + ": adaptive setting \"" + key + "\" has the wrong type (" + j.at(key).dump() + ")");
  }
}

std::optional<double> finite(double v) {
  return std::isfinite(v) ? std::optional<double>(v) : std::nullopt;
}

// The trainer step at which an adaptive run made the plan a resumed trainer continues with
// (its provenance), when there is one.
std::optional<int64_t> adaptive_plan_step(const Trainer& trainer) {
  const nlohmann::json& p = trainer.config().plan.provenance;
  if (!p.is_object() || p.value("source", "") != "adaptive" || !p.contains("step") || !p["step"].is_number_integer())
    return std::nullopt;
  return p["step"].get<int64_t>();
}

}  // namespace

nlohmann::json adaptive_options_to_json(const AdaptiveOptions& o) {
  nlohmann::json precisions = nlohmann::json::array();
  for (Precision p : o.stats.precisions) precisions.push_back(precision_name(p));
  return {{"method", method_name(o.method)},
          {"budget", o.request.budget},
          {"replan_every", o.replan_every},
          {"bf16_probe_every", o.bf16_probe_every},
          {"replan_when", replan_when_name(o.replan_when)},
          {"noise_floor", o.noise_floor},
          {"lambda", o.estimator.lambda},
          {"ties", o.request.ties},
          {"per_role", o.request.per_role},
          {"seed", o.request.seed},
          {"round",
           {{"noise_passes", o.stats.noise_passes},
            {"sigma_eta_rel", o.stats.sigma_eta_rel},
            {"seed", o.stats.seed},
            {"precisions", precisions}}}};
}

AdaptiveOptions adaptive_options_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": the adaptive settings are not a JSON object");
  AdaptiveOptions o;
  std::string method = method_name(o.method);
  read_key(j, "method", &method, source);
  o.method = parse_method(method);
  read_key(j, "budget", &o.request.budget, source);
  // A key missing from what an older run stored had the defaults of its time: re-plan every 100
  // steps, no probe (not today's defaults).
  o.replan_every = 100;
  o.bf16_probe_every = 0;
  read_key(j, "replan_every", &o.replan_every, source);
  read_key(j, "bf16_probe_every", &o.bf16_probe_every, source);
  std::string replan_when = replan_when_name(o.replan_when);  // missing in older runs: always
  read_key(j, "replan_when", &replan_when, source);
  o.replan_when = parse_replan_when(replan_when);
  read_key(j, "noise_floor", &o.noise_floor, source);
  read_key(j, "lambda", &o.estimator.lambda, source);
  read_key(j, "ties", &o.request.ties, source);
  read_key(j, "per_role", &o.request.per_role, source);
  read_key(j, "seed", &o.request.seed, source);
  if (j.contains("round")) {
    const nlohmann::json& r = j["round"];
    read_key(r, "noise_passes", &o.stats.noise_passes, source);
    read_key(r, "sigma_eta_rel", &o.stats.sigma_eta_rel, source);
    read_key(r, "seed", &o.stats.seed, source);
    if (r.contains("precisions")) {
      std::vector<std::string> names;
      read_key(r, "precisions", &names, source);
      o.stats.precisions.clear();
      for (const std::string& n : names) o.stats.precisions.push_back(parse_precision(n));
    }
  }
  return o;
}

StoredAdaptive stored_adaptive_options(const Trainer& trainer, const std::string& source) {
  const nlohmann::json& extra = trainer.state_extra();
  StoredAdaptive out;
  if (!extra.is_object() || !extra.contains("adaptive")) return out;
  out.known = true;
  if (!extra["adaptive"].is_null()) out.adaptive = adaptive_options_from_json(extra["adaptive"], source);
  return out;
}

void check_given_settings(const nlohmann::json& stored, const std::vector<GivenSetting>& given,
                          const std::string& checkpoint) {
  std::string clashes;
  for (const GivenSetting& g : given) {
    const nlohmann::json::json_pointer ptr(g.pointer);
    const nlohmann::json have = stored.contains(ptr) ? stored.at(ptr) : nlohmann::json();
    if (have == g.value) continue;
    // 0.1 given for a stored 0.1 compares equal; a float stored as an integer does not: compare numerically.
    if (have.is_number() && g.value.is_number() && have.get<double>() == g.value.get<double>()) continue;
    clashes += (clashes.empty() ? "" : "; ") + g.option + " " + g.value.dump() + " but the run has " +
               (have.is_null() ? std::string("none") : have.dump());
  }
  if (!clashes.empty())
    throw Error("--resume " + checkpoint +
                " continues the saved run with its own settings, and the command line "
                "contradicts them: " +
                clashes +
                ". Drop these options to continue the run as it was, or start a new run (--preset/--config) "
                "with the settings you want");
}

std::optional<AdaptiveOptions> resumed_adaptive_options(const Trainer& trainer, const std::string& checkpoint,
                                                        const std::optional<AdaptiveOptions>& requested,
                                                        const std::vector<GivenSetting>& given,
                                                        std::vector<std::string>* warnings) {
  const StoredAdaptive stored = stored_adaptive_options(trainer, checkpoint + "/trainer_state.json");
  if (!stored.known) {
    if (warnings && trainer.step_count() > 0)
      warnings->push_back(checkpoint + " was saved without its adaptive settings (by an older snip): " +
                          (requested ? "continuing with the --method/--budget/... given now"
                                     : "it continues with a fixed plan; if the run was adaptive, give its "
                                       "--method/--budget/--replan-every/... again"));
    return requested;
  }
  if (!stored.adaptive) return requested;  // a fixed-plan run may turn adaptive from here on
  check_given_settings(adaptive_options_to_json(*stored.adaptive), given, checkpoint);
  return stored.adaptive;
}

std::optional<int64_t> run_of_measurement(std::optional<int64_t> checkpoint_run, bool own_data, const std::string& data,
                                          std::string* note) {
  if (!checkpoint_run || own_data) return checkpoint_run;
  if (note)
    *note = "measured on " + data + ", not on the corpus run " + std::to_string(*checkpoint_run) +
            " trains on: stored on its own, not as a round of run " + std::to_string(*checkpoint_run);
  return std::nullopt;
}

std::optional<int64_t> find_run_of_checkpoint(const Store& store, const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string want = fs::weakly_canonical(checkpoint_dir, ec).string();
  if (ec) return std::nullopt;
  std::optional<int64_t> found;
  for (const RunInfo& r : store.runs())
    for (const Checkpoint& ck : store.checkpoints(r.id))
      if (fs::weakly_canonical(ck.path, ec).string() == want && !ec && (!found || r.id > *found)) found = r.id;
  if (found) return found;
  // Not recorded (saved, then killed or the disk full before the row was written): the run the
  // checkpoint names, when it names a run of this database.
  try {
    const nlohmann::json run =
        read_run_state(checkpoint_dir).value("extra", nlohmann::json::object()).value("run", nlohmann::json());
    if (run.is_object() && run.value("database", "") == canonical_path(store.path()) && run["id"].is_number_integer()) {
      const int64_t id = run["id"].get<int64_t>();
      for (const RunInfo& r : store.runs())
        if (r.id == id) return id;
    }
  } catch (const std::exception&) {
    // an unreadable checkpoint names no run; the resume itself says what is wrong with it
  }
  return std::nullopt;
}

std::string checkpoint_root_of_database(const std::string& db_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path db = fs::absolute(db_path, ec);
  if (ec) db = db_path;
  return (db.parent_path() / (db.filename().string() + ".checkpoints")).string();
}

std::string run_checkpoint_folder(const std::string& root, int64_t run_id, const std::string& resumed_from,
                                  bool resumed) {
  namespace fs = std::filesystem;
  std::string from = resumed_from;
  while (from.size() > 1 && from.back() == '/') from.pop_back();
  const fs::path ck(from);
  const std::string leaf = ck.filename().string();
  if (resumed && leaf.rfind("step-", 0) == 0 && leaf.size() > 5 &&
      leaf.find_first_not_of("0123456789", 5) == std::string::npos && ck.has_parent_path())
    return ck.parent_path().string();
  const std::string base = (fs::path(root) / ("run-" + std::to_string(run_id))).string();
  std::error_code ec;
  for (int k = 1;; ++k) {
    const std::string candidate = k == 1 ? base : base + "-" + std::to_string(k);
    if (!fs::exists(fs::symlink_status(candidate, ec)) ||
        (fs::is_directory(candidate, ec) && fs::is_empty(candidate, ec)))
      return candidate;
  }
}

namespace {

// Stores `plan` (given as a file, not solved here) for `run_id`, in effect from `first_step`.
void record_file_plan(Store& store, int64_t run_id, const Plan& plan, int64_t first_step) {
  PlanSolveInfo info;
  info.run_id = run_id;
  info.solver_status = "file";
  store.set_plan_in_effect(run_id, store.add_plan(plan, info), first_step);
}

// Whether two stored training configurations plan adaptively the same way; settings an older run
// did not store count as their defaults of its time (adaptive_options_from_json).
bool same_adaptive(const nlohmann::json& a, const nlohmann::json& b) {
  const auto normal = [](const nlohmann::json& config) -> nlohmann::json {
    if (!config.contains("adaptive")) return nullptr;
    try {
      return adaptive_options_to_json(adaptive_options_from_json(config["adaptive"], "the stored run"));
    } catch (const Error&) {
      return config["adaptive"];
    }
  };
  return normal(a) == normal(b);
}

// The plan's layers in a stored training configuration (null when it has none).
nlohmann::json plan_layers(const nlohmann::json& config) {
  return config.contains("plan") && config["plan"].is_object() && config["plan"].contains("layers")
             ? config["plan"]["layers"]
             : nlohmann::json();
}

// Run id, resumed from its checkpoint resumed_from: its id when the resume is a branch of it.
// From an earlier checkpoint than the run's latest, the run is claimed again only when it
// retrains its own trajectory: the same rows, bit for bit, as after a kill. That needs the
// resume's total steps to equal both what the checkpoint was training under and what the run
// has gone on with since, and its plan and adaptive options to equal the run's (a takeover from the same checkpoint
// with another --steps or --plan changed the latter). Any other resume from there (e.g. a second
// resume from one checkpoint) would overwrite the later rows with different ones: that is a
// branch, a new run naming its parent, and the parent keeps everything.
std::optional<int64_t> branch_parent(Store& store, const Trainer& trainer, int64_t id, int64_t steps,
                                     const nlohmann::json& train_config, bool plan_changed,
                                     const std::string& resumed_from, const std::string& checkpoint_dir) {
  std::optional<int64_t> parent;
  int64_t latest = -1;
  for (const Checkpoint& ck : store.checkpoints(id)) latest = std::max(latest, ck.step);
  const nlohmann::json& stored = store.run(id).spec.train_config;
  const auto total_is = [steps](const nlohmann::json& config) {
    return config.contains("steps") && config["steps"].is_number_integer() && config["steps"].get<int64_t>() == steps;
  };
  if (latest > trainer.step_count()) {
    // What the checkpoint itself was training under (its own total, before --steps).
    const nlohmann::json own = trainer.resumed_state().value("config", nlohmann::json::object());
    const bool same_total = total_is(stored) && total_is(own);
    // An adaptive run's plan moves with its rounds (the checkpoint carries the one in effect); a
    // fixed plan is the run's stored one.
    const bool same_plan =
        !plan_changed && (train_config.contains("adaptive") || plan_layers(stored) == plan_layers(train_config));
    // Adaptive planning turned on, off or changed is another trajectory too.
    if (!(same_total && same_plan && same_adaptive(stored, train_config))) parent = id;
  }
  if (parent && !checkpoint_dir.empty() && canonical_path(checkpoint_dir) == canonical_path(resumed_from))
    throw Error("resuming " + resumed_from + " at step " + std::to_string(trainer.step_count()) +
                " with other settings starts a branch of run " + std::to_string(id) + " (which has gone on to step " +
                std::to_string(latest) + "), and its checkpoints written into " + resumed_from + " would replace run " +
                std::to_string(id) + "'s checkpoint there; give the branch a folder of its own with --out");
  return parent;
}

// Run id goes on from the trainer's step with this configuration (e.g. more --steps, another
// plan, adaptive from here), its plan timeline continued or the next plan recorded.
void claim_resumed_run(Store& store, const Trainer& trainer, int64_t id, const nlohmann::json& train_config,
                       bool plan_changed, const std::string& method, const Plan& next_plan) {
  const int64_t next_step = trainer.step_count() + 1;
  const RunInfo claimed = store.run(id);
  const bool adaptive_changed = !same_adaptive(claimed.spec.train_config, train_config);
  store.claim_run(id, trainer.step_count());
  store.set_run_config(id, train_config, plan_changed || adaptive_changed ? method : claimed.spec.method);
  const std::vector<PlanTimelineEntry> timeline = store.plan_timeline(id);
  if (plan_changed) {
    if (!timeline.empty()) store.end_plan_timeline(id, trainer.step_count());
    if (!next_plan.layers.empty()) record_file_plan(store, id, next_plan, next_step);
  } else if (!timeline.empty() && timeline.back().last_step == trainer.step_count()) {
    // The plan in effect at the checkpoint goes on: reopen its timeline entry, closed when
    // the run stopped there.
    store.set_plan_in_effect(id, timeline.back().plan_id, timeline.back().first_step);
  }
}

}  // namespace

RecordedRun open_recorded_run(Store& store, const Trainer& trainer, const RunDescription& description,
                              const std::optional<AdaptiveOptions>& adaptive, const std::string& resumed_from,
                              const std::string& checkpoint_dir) {
  // What is recorded is what the next step trains under: a plan handed to the resumed trainer
  // (snip train --resume ck --plan p.json) replaces the checkpoint's from the next step.
  TrainConfig cfg = trainer.config();
  const Plan next_plan = trainer.next_plan();
  const bool plan_changed = !(next_plan.layers == cfg.plan.layers);
  cfg.plan = next_plan;
  const int64_t next_step = trainer.step_count() + 1;
  nlohmann::json train_config = train_config_to_json(cfg);
  if (adaptive) train_config["adaptive"] = adaptive_options_to_json(*adaptive);
  const std::string method = !description.method.empty() ? description.method
                             : adaptive                  ? method_name(adaptive->method)
                             : cfg.plan.layers.empty()   ? "uniform-" + cfg.precision
                             : cfg.plan.method.empty()   ? "manual"
                                                         : cfg.plan.method;
  std::optional<int64_t> parent;
  if (!resumed_from.empty()) {
    if (const std::optional<int64_t> id = find_run_of_checkpoint(store, resumed_from))
      parent = branch_parent(store, trainer, *id, cfg.steps, train_config, plan_changed, resumed_from, checkpoint_dir);
    if (const std::optional<int64_t> id = parent ? std::nullopt : find_run_of_checkpoint(store, resumed_from)) {
      claim_resumed_run(store, trainer, *id, train_config, plan_changed, method, next_plan);
      return {*id, true};
    }
  }
  RunSpec spec;
  spec.name = description.name;
  spec.dims = cfg.model.dims();
  spec.model_config = config_to_json(cfg.model);
  spec.train_config = train_config;
  spec.data_source = cfg.data_path.empty() ? bundled_corpus_path() : cfg.data_path;
  spec.recipe = cfg.recipe;
  spec.seed = int64_t(cfg.seed);
  spec.method = method;
  spec.plan_id = description.plan_id;
  spec.notes = description.notes;
  if (parent) {
    spec.parent_run_id = parent;
    spec.parent_step = trainer.step_count();
  }
  if (!resumed_from.empty() && spec.notes.empty())
    spec.notes =
        (parent ? "branch of run " + std::to_string(*parent) + " from its checkpoint " : "resumed from checkpoint ") +
        canonical_path(resumed_from);
  const int64_t run_id = store.create_run(spec);
  if (description.plan_id) {
    store.set_plan_in_effect(run_id, *description.plan_id, next_step);
  } else if (!cfg.plan.layers.empty()) {
    record_file_plan(store, run_id, cfg.plan, next_step);
  }
  return {run_id, false};
}

RecordedTraining::RecordedTraining(Trainer& trainer, Store* store, int64_t run_id, RecordedTrainingOptions options)
    : trainer_(trainer), store_(store), run_id_(run_id), options_(std::move(options)) {}

RecordedTraining::~RecordedTraining() = default;

void RecordedTraining::request_stop() {
  {
    std::lock_guard lock(pause_mutex_);
    stop_.store(true);
  }
  pause_cv_.notify_all();
}

void RecordedTraining::set_paused(bool paused) {
  {
    std::lock_guard lock(pause_mutex_);
    paused_.store(paused);
  }
  pause_cv_.notify_all();
}

bool RecordedTraining::wait_while_paused() {
  std::unique_lock lock(pause_mutex_);
  pause_cv_.wait(lock, [&] { return !paused_.load() || stop_.load(); });
  return !stop_.load();
}

std::string RecordedTraining::checkpoint_path(int64_t step) const {
  if (!options_.checkpoint_per_step) return options_.checkpoint_dir;
  return (std::filesystem::path(options_.checkpoint_dir) / ("step-" + std::to_string(step))).string();
}

// After a failure past step 1: the trainer holds the last good state (a failed step leaves
// weights, moments and data position as they were), so save it unless it is already saved.
// Returns what the error message should add ("" when nothing was saved).
std::string RecordedTraining::save_after_failure(RunRecorder* recorder, int64_t first_step,
                                                 int64_t last_saved) noexcept {
  try {
    const int64_t step = trainer_.step_count();
    if (step <= first_step || step == last_saved || options_.checkpoint_dir.empty()) return "";
    if (recorder) {
      // A checkpoint ahead of the database's rows would resume past them and lose them for good:
      // the state is saved only when every row up to it is written.
      try {
        recorder->flush();
      } catch (const std::exception&) {
      }
      if (recorder->rows_buffered() > 0)
        return " (the state of step " + std::to_string(step) +
               " was not saved: its metrics rows could not be written to the database, and a checkpoint ahead of "
               "them would resume without them; " +
               (last_saved > 0   ? "the checkpoint of step " + std::to_string(last_saved) + " is kept"
                : first_step > 0 ? "the checkpoint this run resumed from is kept"
                                 : std::string("no checkpoint was written")) +
               ")";
    }
    const std::string dir = checkpoint_path(step);
    trainer_.save_checkpoint(dir);
    if (recorder) recorder->add_checkpoint(step, dir);
    return " (the last good state, step " + std::to_string(step) + ", is saved in " + dir + ")";
  } catch (const std::exception& e) {
    return std::string(" (saving the last good state failed too: ") + e.what() + ")";
  }
}

namespace {

// The metric row of step m; the bf16 gap when a probe measured it at this step.
MetricRow metric_row(const StepMetrics& m, const std::optional<ProbeEvent>& probe) {
  MetricRow row;
  row.step = m.step;
  row.train_loss = m.train_loss;
  row.val_loss = m.val_loss;
  row.lr = m.lr;
  row.grad_norm = m.grad_norm;
  row.tokens_per_s = m.tokens_per_s;
  row.fp4_fraction = m.fp4_fraction;
  if (probe && probe->step == m.step) row.bf16_gap = probe->gap();
  return row;
}

}  // namespace

// The adaptive controller: its probes land in probe, its plans in the store (and on_plan).
void RecordedTraining::start_controller(std::optional<AdaptiveController>& controller, std::optional<ProbeEvent>& probe,
                                        std::optional<RunRecorder>& recorder) {
  controller.emplace(trainer_, *options_.adaptive);
  controller->on_probe([&](const ProbeEvent& p) { probe = p; });
  controller->on_plan([&](const PlanEvent& e) {
    int64_t plan_id = 0;
    if (store_) {
      PlanSolveInfo info;
      info.run_id = run_id_;
      info.options = {{"lambda", options_.adaptive->estimator.lambda},
                      {"ties", options_.adaptive->request.ties},
                      {"replan_every", options_.adaptive->replan_every}};
      info.objective = finite(e.result.objective);
      info.predicted_delta_loss = finite(e.result.predicted_dl);
      info.predicted_delta_weight = finite(e.result.predicted_dw);
      info.mip_gap = finite(e.result.mip_gap);
      info.solver_status = e.result.status;
      info.solve_time_s = e.result.solve_ms / 1000.0;
      // One transaction each, so a write retried after a busy lock is never doubled.
      recorder->write([&] { info.stats_round_id = store_->add_stats_round(e.round, run_id_); });
      recorder->write([&] { plan_id = store_->add_plan(e.result.plan, info); });
      recorder->write([&] { store_->set_plan_in_effect(run_id_, plan_id, e.first_step); });
    }
    if (on_plan) on_plan(e, plan_id);
  });
  // A resumed adaptive run goes on with the plan its controller made (it came with the
  // checkpoint); its next round and probes fall on the uninterrupted run's steps.
  if (trainer_.step_count() > 0) {
    if (const std::optional<int64_t> made_at = adaptive_plan_step(trainer_))
      controller->continue_from(trainer_.config().plan, *made_at);
  }
}

// The checkpoint every save_every steps.
void RecordedTraining::save_scheduled_checkpoint(RunRecorder* recorder, int64_t step, int64_t& last_saved) {
  const std::string dir = checkpoint_path(step);
  // Rows first: a kill between the two then loses nothing a resume from this
  // checkpoint would not recompute (resume drops rows after the checkpoint's step).
  if (recorder) recorder->flush_now();
  trainer_.save_checkpoint(dir);
  last_saved = step;
  if (recorder) recorder->add_checkpoint(step, dir);
}

// After the loop: the plan timeline closed, the last state saved, the run finished or interrupted.
TrainingOutcome RecordedTraining::finish_run(RunRecorder* recorder, bool adaptive, int64_t last_saved, int64_t total) {
  if (adaptive && store_) recorder->write([&] { store_->end_plan_timeline(run_id_, trainer_.step_count()); });

  TrainingOutcome out;
  out.step = trainer_.step_count();
  out.finished = out.step >= total;
  out.checkpoint = checkpoint_path(out.step);
  if (recorder) recorder->flush_now();
  if (last_saved != out.step) trainer_.save_checkpoint(out.checkpoint);
  if (recorder) {
    recorder->add_checkpoint(out.step, out.checkpoint);
    if (out.finished)
      recorder->finish();
    else
      recorder->interrupt(options_.stop_reason + " at step " + std::to_string(out.step));
  }
  return out;
}

TrainingOutcome RecordedTraining::run() {
  std::optional<RunRecorder> recorder;
  if (store_) recorder.emplace(*store_, run_id_, options_.recorder);
  std::optional<AdaptiveController> controller;
  std::optional<ProbeEvent> probe;
  const int64_t first_step = trainer_.step_count();  // a resumed trainer's state is its checkpoint
  int64_t last_saved = -1;                           // step of the last checkpoint this run wrote
  try {
    const int64_t total = trainer_.config().steps;
    // Everything that would fail at the first evaluation fails now, before any work is done.
    if (trainer_.step_count() < total) trainer_.check_can_evaluate();
    // The checkpoint carries the adaptive settings (null: a fixed-plan run), so `--resume DIR`
    // alone continues the same run.
    trainer_.set_state_extra("adaptive",
                             options_.adaptive ? adaptive_options_to_json(*options_.adaptive) : nlohmann::json());
    trainer_.set_state_extra("save_every", options_.save_every);  // kept by `snip train --resume DIR`
    // The run this checkpoint belongs to, for a resume when the database never learnt of the
    // checkpoint (a kill or a full disk between saving it and recording it).
    trainer_.set_state_extra("run", store_
                                        ? nlohmann::json{{"database", canonical_path(store_->path())}, {"id", run_id_}}
                                        : nlohmann::json());
    if (options_.adaptive) start_controller(controller, probe, recorder);

    // A stop request abandons a long step (many micro-batches) instead of waiting for it.
    struct InterruptGuard {
      Trainer& t;
      ~InterruptGuard() { t.set_interrupt(nullptr); }
    } guard{trainer_};
    trainer_.set_interrupt([this] { return stop_.load() || (stop_requested && stop_requested()); });
    while (trainer_.step_count() < total) {
      if (!wait_while_paused()) break;
      if (stop_requested && stop_requested()) break;
      StepMetrics m;
      try {
        if (controller) controller->before_step();  // a statistics round stops between its passes too
        m = trainer_.step();
      } catch (const StepInterrupted&) {
        break;  // the trainer holds the state before the step: saved below as the last good one
      }
      if (controller) controller->after_step(m);
      MetricRow row = metric_row(m, probe);
      if (recorder) recorder->record(row);
      const bool go_on = on_step ? on_step(m, row) : true;
      if (options_.save_every > 0 && m.step % options_.save_every == 0)
        save_scheduled_checkpoint(recorder ? &*recorder : nullptr, m.step, last_saved);
      if (!go_on) break;
    }
    return finish_run(recorder ? &*recorder : nullptr, controller.has_value(), last_saved, total);
  } catch (const std::exception& e) {
    const std::string saved = save_after_failure(recorder ? &*recorder : nullptr, first_step, last_saved);
    try {
      if (recorder) recorder->fail(e.what() + saved);
    } catch (const std::exception&) {
      // the store itself failed; the engine's error still reaches the caller
    }
    if (saved.empty()) throw;
    throw Error(e.what() + saved);
  }
}

}  // namespace snip
