// A training run recorded in the experiment store: the one place that wires a snip::Trainer
// (and, for adaptive SNIP, an AdaptiveController) to a snip::Store. Every step becomes a metric
// row (with the BF16-probe gap when one ran), every statistics round and plan of an adaptive
// run is stored with its place in the plan timeline, checkpoints are saved and listed with the
// run, and the run ends `finished`, `interrupted` (stopped; resumable) or `failed`.
//
// The `snip train` command and the GUI's training worker both sit on it; they only add their
// own front (a progress bar and Ctrl-C; Qt signals and the live chart buffer):
//
//   snip::Store store(db);
//   auto trainer = std::make_unique<snip::Trainer>(config);     // or Trainer::resume(dir)
//   const snip::RecordedRun run = snip::open_recorded_run(store, *trainer, description, adaptive, resumed_from);
//   snip::RecordedTraining training(*trainer, &store, run.id, options);
//   training.on_step = [&](const snip::StepMetrics& m, const snip::MetricRow&) { return !stop; };
//   const snip::TrainingOutcome out = training.run();            // throws (run marked failed)
//
// Resuming continues the exact trajectory: the run a checkpoint belongs to is claimed again
// (its rows after the checkpoint's step are dropped: those steps are trained again), and an
// adaptive run makes its next statistics round at the step the uninterrupted run would have.
// No Qt.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "snip/adaptive.h"
#include "snip/run_recorder.h"
#include "snip/store.h"
#include "snip/trainer.h"

namespace snip {

// The adaptive settings as stored with a run (RunSpec::train_config["adaptive"]): method,
// budget, re-plan and probe intervals, λ, ties, per-role, seeds and the statistics round's
// options. from_json takes what an older run stored (missing keys keep their defaults) and
// throws snip::Error naming `source` for a value of the wrong type or an unknown method.
nlohmann::json adaptive_options_to_json(const AdaptiveOptions& o);
AdaptiveOptions adaptive_options_from_json(const nlohmann::json& j, const std::string& source);

// The adaptive settings a resumed trainer's checkpoint carries (trainer_state.json "extra"
// ["adaptive"], written by RecordedTraining). `known` is false for a checkpoint saved before
// they were stored; else `adaptive` is set for an adaptive run and empty for a fixed-plan one.
struct StoredAdaptive {
  bool known = false;
  std::optional<AdaptiveOptions> adaptive;
};
StoredAdaptive stored_adaptive_options(const Trainer& trainer, const std::string& source);

// A setting given again on the command line of a resume: the option as the user typed it, the
// JSON pointer of the stored value it would set, and the value it asks for.
struct GivenSetting {
  std::string option;   // "--budget"
  std::string pointer;  // "/budget"
  nlohmann::json value;
};
// A resumed run is the same run: every given setting must equal the stored one. Throws
// snip::Error listing each contradiction ("--budget 0.6 but the checkpoint's run has 0.5") and
// saying how to continue (drop the option, or start a new run).
void check_given_settings(const nlohmann::json& stored, const std::vector<GivenSetting>& given,
                          const std::string& checkpoint);

// The adaptive settings a run resumed from `checkpoint` continues with: the checkpoint's own,
// checked against what the user gave again (`given`, pointers into adaptive_options_to_json;
// `requested` is what the given options build). A fixed-plan checkpoint may turn adaptive from
// here (`requested`); an older checkpoint without stored settings takes `requested` and adds a
// warning to `warnings`.
std::optional<AdaptiveOptions> resumed_adaptive_options(const Trainer& trainer, const std::string& checkpoint,
                                                        const std::optional<AdaptiveOptions>& requested,
                                                        const std::vector<GivenSetting>& given,
                                                        std::vector<std::string>* warnings);

// What a recorded run says about itself beyond the trainer's configuration.
struct RunDescription {
  std::string name;
  std::string method;              // "": the adaptive method, "uniform-<precision>", the plan's method or "manual"
  std::optional<int64_t> plan_id;  // stored plan the run starts with (else the config's plan is stored)
  std::string notes;
};

// The run in `store` one of whose checkpoints is `checkpoint_dir` (paths compared canonically).
std::optional<int64_t> find_run_of_checkpoint(const Store& store, const std::string& checkpoint_dir);

// The run a measurement on a checkpoint (`snip collect`, `snip validate`) is stored with: the
// checkpoint's run when the measurement read the run's own corpus; none when it read other data
// (--data), since its round says nothing about the run's training. Then `note` says so.
std::optional<int64_t> run_of_measurement(std::optional<int64_t> checkpoint_run, bool own_data, const std::string& data,
                                          std::string* note);

// The GUI's checkpoint layout. A database's runs keep their checkpoints in
// <db folder>/<db file name>.checkpoints (unique per database file: two databases in one folder
// never share one), run `run_id`'s in run_checkpoint_folder(root, ...)/step-<N>.
std::string checkpoint_root_of_database(const std::string& db_path);
// <root>/run-<id>; a run resumed (claimed again, `resumed`) from one of its own step-<N>
// checkpoints goes on in that checkpoint's folder; a <root>/run-<id> that already holds
// something (left by an earlier database file of the same name) gets a suffix -2, -3, ...
std::string run_checkpoint_folder(const std::string& root, int64_t run_id, const std::string& resumed_from,
                                  bool resumed);

struct RecordedRun {
  int64_t id = 0;
  bool resumed = false;  // an existing run claimed again (else a new run)
};

// The run `trainer` records into. With `resumed_from` (the checkpoint the trainer was resumed
// from) belonging to a run of `store`, that run is claimed again at the trainer's step; else a
// new run is created from the trainer's configuration (a resumed one noting its checkpoint),
// with its starting plan (description.plan_id, or the config's plan stored as a "file" plan)
// in effect from the trainer's next step. Throws snip::Error when another live process still
// writes the claimed run.
// A resume that starts a branch may not write its checkpoints into `checkpoint_dir` when that is
// the checkpoint it branches from (it would replace the parent's checkpoint): snip::Error, nothing
// recorded.
RecordedRun open_recorded_run(Store& store, const Trainer& trainer, const RunDescription& description,
                              const std::optional<AdaptiveOptions>& adaptive, const std::string& resumed_from = "",
                              const std::string& checkpoint_dir = "");

struct RecordedTrainingOptions {
  int64_t save_every = 0;                   // also a checkpoint every N steps (0: only at the end / on stop)
  std::string checkpoint_dir;               // where checkpoints go
  bool checkpoint_per_step = false;         // true: <dir>/step-<N> each (all kept); false: <dir> rewritten
  std::optional<AdaptiveOptions> adaptive;  // adaptive SNIP: rounds + re-solves during training
  std::string stop_reason = "stopped";      // an interrupted run's message: "<reason> at step N"
  RecorderOptions recorder;                 // metric-row buffering and busy-database behaviour
};

struct TrainingOutcome {
  bool finished = false;   // reached the total step count (else stopped)
  int64_t step = 0;        // steps done
  std::string checkpoint;  // the final checkpoint's directory
};

class RecordedTraining {
 public:
  // `store` may be null: nothing is recorded (run_id is then unused). Both must outlive this.
  RecordedTraining(Trainer& trainer, Store* store, int64_t run_id, RecordedTrainingOptions options);
  ~RecordedTraining();
  RecordedTraining(const RecordedTraining&) = delete;
  RecordedTraining& operator=(const RecordedTraining&) = delete;

  // Called on the training thread. on_step: after each step's row is recorded and before a
  // periodic checkpoint; returning false stops after this step. on_plan: after an adaptive
  // round and its plan are stored (plan_id 0 without a store).
  std::function<bool(const StepMetrics&, const MetricRow&)> on_step;
  std::function<void(const PlanEvent&, int64_t plan_id)> on_plan;
  // Called on the training thread between micro-batches (and between steps): true stops at once,
  // abandoning a step in progress (the state before it is the one saved), like request_stop().
  std::function<bool()> stop_requested;

  // Trains to the total step count or until stopped, saves the final checkpoint and marks the
  // run finished or interrupted. What would fail at the first evaluation fails before step 1.
  // An error after step 1 (NaN loss, a failed round, ...) saves the last good state as a
  // checkpoint, marks the run failed with the reason and is rethrown naming the checkpoint.
  // A busy database never stops the training: rows wait in memory (RunRecorder).
  TrainingOutcome run();

  // From any thread: stop after the current step; hold between steps.
  void request_stop();
  void set_paused(bool paused);
  // On the training thread (e.g. from on_step): the interrupted run's message ("<reason> at step N").
  void set_stop_reason(std::string reason) { options_.stop_reason = std::move(reason); }

 private:
  std::string checkpoint_path(int64_t step) const;
  std::string save_after_failure(RunRecorder* recorder, int64_t first_step, int64_t last_saved) noexcept;
  bool wait_while_paused();  // false when stopped
  // run()'s steps: the adaptive controller, the periodic checkpoint, the end of the run.
  void start_controller(std::optional<AdaptiveController>& controller, std::optional<ProbeEvent>& probe,
                        std::optional<RunRecorder>& recorder);
  void save_scheduled_checkpoint(RunRecorder* recorder, int64_t step, int64_t& last_saved);
  TrainingOutcome finish_run(RunRecorder* recorder, bool adaptive, int64_t last_saved, int64_t total);

  Trainer& trainer_;
  Store* store_;
  int64_t run_id_;
  RecordedTrainingOptions options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::mutex pause_mutex_;
  std::condition_variable pause_cv_;
};

}  // namespace snip
