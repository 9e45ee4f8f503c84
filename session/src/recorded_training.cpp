// RecordedTraining: a Trainer (and the adaptive controller) recorded step by step in the store.
#include "snip/recorded_training.h"

#include <cmath>
#include <filesystem>
#include <limits>

#include "snip/dataset.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/precision.h"
#include "snip/run_recorder.h"

namespace snip {

namespace {

template <typename T>
void read_key(const nlohmann::json& j, const char* key, T* out, const std::string& source) {
  if (!j.contains(key)) return;
  try {
    *out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(source + ": adaptive setting \"" + key + "\" has the wrong type (" + j.at(key).dump() + ")");
  }
}

std::optional<double> finite(double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; }

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
          {"lambda", o.estimator.lambda},
          {"ties", o.request.ties},
          {"per_role", o.request.per_role},
          {"seed", o.request.seed},
          {"round", {{"noise_passes", o.stats.noise_passes},
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
  read_key(j, "replan_every", &o.replan_every, source);
  read_key(j, "bf16_probe_every", &o.bf16_probe_every, source);
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

std::optional<int64_t> find_run_of_checkpoint(const Store& store, const std::string& checkpoint_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string want = fs::weakly_canonical(checkpoint_dir, ec).string();
  if (ec) return std::nullopt;
  std::optional<int64_t> found;
  for (const RunInfo& r : store.runs())
    for (const Checkpoint& ck : store.checkpoints(r.id))
      if (fs::weakly_canonical(ck.path, ec).string() == want && !ec && (!found || r.id > *found)) found = r.id;
  return found;
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
    if (!fs::exists(fs::symlink_status(candidate, ec)) || (fs::is_directory(candidate, ec) && fs::is_empty(candidate, ec)))
      return candidate;
  }
}

RecordedRun open_recorded_run(Store& store, const Trainer& trainer, const RunDescription& description,
                              const std::optional<AdaptiveOptions>& adaptive, const std::string& resumed_from) {
  const TrainConfig& cfg = trainer.config();
  if (!resumed_from.empty()) {
    if (const std::optional<int64_t> id = find_run_of_checkpoint(store, resumed_from)) {
      store.claim_run(*id, trainer.step_count());
      // The plan in effect at the checkpoint goes on: reopen its timeline entry, closed when the
      // run stopped there.
      const std::vector<PlanTimelineEntry> timeline = store.plan_timeline(*id);
      if (!timeline.empty() && timeline.back().last_step == trainer.step_count())
        store.set_plan_in_effect(*id, timeline.back().plan_id, timeline.back().first_step);
      return {*id, true};
    }
  }
  RunSpec spec;
  spec.name = description.name;
  spec.dims = cfg.model.dims();
  spec.model_config = config_to_json(cfg.model);
  spec.train_config = train_config_to_json(cfg);
  if (adaptive) spec.train_config["adaptive"] = adaptive_options_to_json(*adaptive);
  spec.data_source = cfg.data_path.empty() ? bundled_corpus_path() : cfg.data_path;
  spec.recipe = cfg.recipe;
  spec.seed = int64_t(cfg.seed);
  spec.method = !description.method.empty() ? description.method
                : adaptive                  ? method_name(adaptive->method)
                : cfg.plan.layers.empty()   ? "uniform-" + cfg.precision
                : cfg.plan.method.empty()   ? "manual"
                                            : cfg.plan.method;
  spec.plan_id = description.plan_id;
  spec.notes = description.notes;
  if (!resumed_from.empty() && spec.notes.empty()) spec.notes = "resumed from checkpoint " + resumed_from;
  const int64_t run_id = store.create_run(spec);
  if (description.plan_id) {
    store.set_plan_in_effect(run_id, *description.plan_id, trainer.step_count() + 1);
  } else if (!cfg.plan.layers.empty()) {
    PlanSolveInfo info;
    info.run_id = run_id;
    info.solver_status = "file";
    store.set_plan_in_effect(run_id, store.add_plan(cfg.plan, info), trainer.step_count() + 1);
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

TrainingOutcome RecordedTraining::run() {
  std::optional<RunRecorder> recorder;
  if (store_) recorder.emplace(*store_, run_id_);
  std::optional<AdaptiveController> controller;
  std::optional<ProbeEvent> probe;
  try {
  // A resumed adaptive run leaves the controller alone until the step its next round is due
  // at in the uninterrupted run (the plan in effect came with the checkpoint), so the resumed
  // trajectory is the same. Until then no BF16 probe runs either.
  int64_t controller_from = 0;
  if (options_.adaptive) {
    controller.emplace(trainer_, *options_.adaptive);
    controller->on_probe([&](const ProbeEvent& p) { probe = p; });
    controller->on_plan([&](const PlanEvent& e) {
      int64_t plan_id = 0;
      if (store_) {
        PlanSolveInfo info;
        info.run_id = run_id_;
        info.stats_round_id = store_->add_stats_round(e.round, run_id_);
        info.options = {{"lambda", options_.adaptive->estimator.lambda},
                        {"ties", options_.adaptive->request.ties},
                        {"replan_every", options_.adaptive->replan_every}};
        info.objective = finite(e.result.objective);
        info.predicted_delta_loss = finite(e.result.predicted_dl);
        info.predicted_delta_weight = finite(e.result.predicted_dw);
        info.mip_gap = finite(e.result.mip_gap);
        info.solver_status = e.result.status;
        info.solve_time_s = e.result.solve_ms / 1000.0;
        plan_id = store_->add_plan(e.result.plan, info);
        store_->set_plan_in_effect(run_id_, plan_id, e.first_step);
      }
      if (on_plan) on_plan(e, plan_id);
    });
    if (trainer_.step_count() > 0) {
      if (const std::optional<int64_t> made_at = adaptive_plan_step(trainer_))
        controller_from = options_.adaptive->replan_every > 0 ? *made_at + options_.adaptive->replan_every
                                                              : std::numeric_limits<int64_t>::max();
    }
    }

    const int64_t total = trainer_.config().steps;
    while (trainer_.step_count() < total) {
      if (!wait_while_paused()) break;
      if (controller && trainer_.step_count() >= controller_from) controller->before_step();
      const StepMetrics m = trainer_.step();
      if (controller) controller->after_step(m);
      MetricRow row;
      row.step = m.step;
      row.train_loss = m.train_loss;
      row.val_loss = m.val_loss;
      row.lr = m.lr;
      row.grad_norm = m.grad_norm;
      row.tokens_per_s = m.tokens_per_s;
      row.fp4_fraction = m.fp4_fraction;
      if (probe && probe->step == m.step) row.bf16_gap = probe->gap();
      if (recorder) recorder->record(row);
      const bool go_on = on_step ? on_step(m, row) : true;
      if (options_.save_every > 0 && m.step % options_.save_every == 0) {
        const std::string dir = checkpoint_path(m.step);
        // Rows first: a kill between the two then loses nothing a resume from this
        // checkpoint would not recompute (resume drops rows after the checkpoint's step).
        if (recorder) recorder->flush();
        trainer_.save_checkpoint(dir);
        if (recorder) recorder->add_checkpoint(m.step, dir);
      }
      if (!go_on) break;
    }
    if (controller && store_) store_->end_plan_timeline(run_id_, trainer_.step_count());

    TrainingOutcome out;
    out.step = trainer_.step_count();
    out.finished = out.step >= total;
    out.checkpoint = checkpoint_path(out.step);
    const bool just_saved = options_.save_every > 0 && out.step > 0 && out.step % options_.save_every == 0;
    if (recorder) recorder->flush();
    if (!just_saved) trainer_.save_checkpoint(out.checkpoint);
    if (recorder) {
      recorder->add_checkpoint(out.step, out.checkpoint);
      if (out.finished)
        recorder->finish();
      else
        recorder->interrupt(options_.stop_reason + " at step " + std::to_string(out.step));
    }
    return out;
  } catch (const std::exception& e) {
    try {
      if (recorder) recorder->fail(e.what());
    } catch (const std::exception&) {
      // the store itself failed; the engine's error still reaches the caller
    }
    throw;
  }
}

}  // namespace snip
