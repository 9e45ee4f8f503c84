// TrainingSession: every set-up step of a training run, in one order, for both fronts.
#include "snip/training_session.h"

#include <algorithm>
#include <filesystem>
#include <utility>

#include "snip/error.h"
#include "snip/isa.h"

namespace snip {

TrainingSession::TrainingSession(RunRequest request, std::function<void(const std::string&)> warn)
    : request_(std::move(request)), warn_(std::move(warn)) {
  open_places();
  build_trainer();
  settle_adaptive();
  record_run();
  RecordedTrainingOptions options;
  options.save_every = request_.save_every.value_or(0);
  if (!request_.resume_from.empty() && !request_.save_every) {  // the resumed run keeps its interval
    const nlohmann::json& extra = trainer_->state_extra();
    if (extra.contains("save_every") && extra["save_every"].is_number_integer() &&
        extra["save_every"].get<int64_t>() > 0)
      options.save_every = extra["save_every"].get<int64_t>();
  }
  options.checkpoint_dir = checkpoint_dir_;
  options.checkpoint_per_step = !request_.checkpoint_root.empty();
  options.adaptive = adaptive_;
  options.stop_reason = request_.stop_reason;
  options.recorder = request_.recorder;
  training_ = std::make_unique<RecordedTraining>(*trainer_, store_.get(), run_.id, std::move(options));
}

TrainingSession::~TrainingSession() = default;

void TrainingSession::warn(const std::string& message) const {
  if (warn_) warn_(message);
}

// Step 1: before the corpus is read and the model allocated, a damaged database or an unusable
// fixed checkpoint folder is refused.
void TrainingSession::open_places() {
  if (request_.checkpoint_dir.empty() == request_.checkpoint_root.empty())
    throw Error("a training run needs exactly one checkpoint place: a folder, or a root for per-run folders");
  if (!request_.resume_from.empty()) {  // a broken checkpoint says so first; its state is read once
    try {
      resume_state_ = read_run_state(request_.resume_from);
    } catch (const std::exception& e) {
      throw Error("cannot resume from " + request_.resume_from + ": " + e.what() +
                  " — choose another checkpoint, or start a new run");
    }
  }
  if (!request_.db_path.empty())
    store_ = std::make_unique<Store>(request_.db_path, StoreOptions{.check_integrity = true});
  if (!request_.checkpoint_dir.empty()) {
    checkpoint_dir_ = request_.checkpoint_dir;
    // What is there may be replaced, the location is writable, and it is held by this run until
    // its last checkpoint is saved.
    CheckpointTargetOptions target;
    target.overwrite = request_.overwrite;
    target.resumed_from = request_.resume_from;
    target.resumed_state = request_.resume_from.empty() ? nullptr : &resume_state_;
    target.db_path = request_.db_path;
    checkpoint_lock_ = check_checkpoint_target(checkpoint_dir_, target);
  }
}

// Step 2.
void TrainingSession::build_trainer() {
  if (const std::string slow = slow_tier_notice_once(); !slow.empty()) warn(slow);
  if (request_.resume_from.empty()) {
    TrainConfig c = request_.config;
    c.schedule.total = c.steps;
    if (c.schedule.warmup > c.steps) {
      warn("--warmup " + std::to_string(c.schedule.warmup) + " is longer than the run; warming up over all " +
           std::to_string(c.steps) + " steps");
      c.schedule.warmup = c.steps;
    }
    trainer_ = std::make_unique<Trainer>(std::move(c));  // bad config or data throws here
  } else {
    const nlohmann::json& state = resume_state_;
    const nlohmann::json& config = state["config"];
    std::vector<GivenSetting> given = request_.given_train;
    for (GivenSetting& g : given)  // a warmup longer than the run was stored as the run's length
      if (g.pointer == "/schedule/warmup" && g.value.is_number_integer() && config["steps"].is_number_integer())
        g.value = std::min(g.value.get<int64_t>(), config["steps"].get<int64_t>());
    check_given_settings(config, given, request_.resume_from);
    if (request_.resume_total_steps > 0 && state["step"].is_number_integer() &&
        request_.resume_total_steps <= state["step"].get<int64_t>())
      throw Error("a new total of " + std::to_string(request_.resume_total_steps) +
                  " steps is not beyond the checkpoint's step " + std::to_string(state["step"].get<int64_t>()) +
                  ": the total counts from the run's start; give a larger one, or none for the run's own (" +
                  std::to_string(config.value("steps", int64_t(0))) + ")");
    trainer_ = Trainer::resume(request_.resume_from, request_.resume_total_steps, request_.resume_data, &resume_state_);
    for (const std::string& w : trainer_->resume_warnings()) warn(w);
    if (request_.resume_plan) trainer_->set_plan(*request_.resume_plan);
  }
  for (const std::string& w : trainer_->data_warnings()) warn(w);
  for (const std::string& w : trainer_->plan_warnings()) warn(w);
  const TrainConfig& c = trainer_->config();
  const Plan next = trainer_->next_plan();
  if (!next.layers.empty() && !next.recipe.empty() && next.recipe != c.recipe)
    warn("the plan was made for recipe " + next.recipe + "; training uses recipe " + c.recipe + " (set the recipe to " +
         next.recipe + " to match it)");
}

// Step 3.
void TrainingSession::settle_adaptive() {
  adaptive_ = request_.adaptive;
  if (request_.resume_from.empty()) {
    // One seed for the whole run: the plans' tie-breaking and the rounds' noise follow the run's.
    if (adaptive_) adaptive_->request.seed = adaptive_->stats.seed = trainer_->config().seed;
    return;
  }
  std::vector<std::string> warnings;
  adaptive_ =
      resumed_adaptive_options(*trainer_, request_.resume_from, request_.adaptive, request_.given_adaptive, &warnings);
  for (const std::string& w : warnings) warn(w);
  if (!adaptive_ && !request_.given_adaptive.empty())
    throw Error(request_.resume_from + " is not an adaptive run, so " + request_.given_adaptive.front().option +
                " has nothing to change; give --method too to re-plan it from here on");
  if (adaptive_ && request_.resume_plan)
    throw Error(
        "--plan with --resume of an adaptive run: its plans come from its statistics rounds, so the plan "
        "would be replaced at the next round; resume without --plan, or start a new run with --plan");
}

// Step 4: the run and its checkpoint folder, as one step: a folder that cannot be used rolls the
// recording back.
void TrainingSession::record_run() {
  if (!store_) {
    if (checkpoint_dir_.empty()) throw Error("per-run checkpoint folders need a database (they are named by run)");
    return;
  }
  Store::Transaction txn(*store_);
  run_ = open_recorded_run(*store_, *trainer_, request_.description, adaptive_, request_.resume_from, checkpoint_dir_);
  if (run_.resumed && request_.rename_on_resume && !request_.description.name.empty())
    store_->set_run_name(run_.id, request_.description.name);
  if (!request_.checkpoint_root.empty()) {
    checkpoint_dir_ = run_checkpoint_folder(request_.checkpoint_root, run_.id, request_.resume_from, run_.resumed);
    CheckpointTargetOptions target;
    target.per_step = true;
    target.resumed_from = request_.resume_from;
    target.db_path = request_.db_path;
    checkpoint_lock_ = check_checkpoint_target(checkpoint_dir_, target);
    std::filesystem::create_directories(checkpoint_dir_);
  }
  txn.commit();
}

}  // namespace snip
