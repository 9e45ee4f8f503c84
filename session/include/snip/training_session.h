// The one way a training run starts, from either front: `snip train` and the GUI's training
// worker describe the run as a RunRequest and hand it to a TrainingSession, which does every
// set-up step in one order with one set of defaults (snip/defaults.h):
//
//   1. the database is opened (integrity-checked) and, for a fixed checkpoint folder, that folder
//      is checked and held: both before the corpus is read or the model allocated;
//   2. the trainer is built (a new run) or resumed from its checkpoint, whose trainer state is read
//      once: the settings given again must agree with it, the new total must be beyond it, and
//      the corpus may be elsewhere now and a plan given from the next step; warnings are reported;
//   3. adaptive planning is settled: a new run's rounds take the run's seed; a resumed run goes on
//      with the settings its checkpoint carries, and settings given again must agree with them;
//   4. in one store transaction, the run is recorded (a new run, a branch naming its parent, or
//      the checkpoint's own run claimed again) and its checkpoint folder checked and held, so a
//      folder that cannot be used leaves nothing recorded;
//   5. the RecordedTraining is made: a resumed run keeps its checkpoint interval unless one is
//      given.
//
// Each front then adds only its own part: a progress bar and stop signals (app/cmd_train.cpp), or
// Qt signals and the live chart (ui/src/training_worker.cpp). No Qt.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "snip/adaptive.h"
#include "snip/checkpoint.h"
#include "snip/plan.h"
#include "snip/recorded_training.h"
#include "snip/store.h"
#include "snip/trainer.h"

namespace snip {

struct RunRequest {
  // A new run (used when resume_from is empty). schedule.total follows steps, and a warmup longer
  // than the run is shortened to it (with a warning).
  TrainConfig config;

  // Continue the run saved in this checkpoint directory, bit-exact.
  std::string resume_from;
  int64_t resume_total_steps = 0;         // the run's new total (0: its own); must be beyond the checkpoint
  std::string resume_data;                // where the corpus is now ("": where the run read it)
  std::optional<Plan> resume_plan;        // a fixed plan from the next step (not for an adaptive run)
  std::vector<GivenSetting> given_train;  // training settings given again (pointers into its config): each must agree
  std::vector<GivenSetting> given_adaptive;  // adaptive settings given again: each must agree

  // The experiment database ("": nothing is recorded).
  std::string db_path;
  RunDescription description;
  bool rename_on_resume = false;  // a claimed run takes description.name

  // Adaptive SNIP (METHOD.md 9): statistics rounds and re-plans during training.
  std::optional<AdaptiveOptions> adaptive;

  // Where checkpoints go: one folder rewritten at each save (`snip train --out`), or, when
  // checkpoint_root is set, the GUI's layout <root>/run-<id>/step-<N> (run_checkpoint_folder).
  std::string checkpoint_dir;
  std::string checkpoint_root;
  bool overwrite = false;               // checkpoint_dir may replace another run's checkpoint
  std::optional<int64_t> save_every;    // none: 0 for a new run, the checkpoint's own on resume
  std::string stop_reason = "stopped";  // an interrupted run's message: "<reason> at step N"
  RecorderOptions recorder;
};

class TrainingSession {
 public:
  // Does set-up steps 1-5; throws snip::Error (nothing recorded when the run could not start).
  // `warn` receives every warning of the set-up (plan, resume, slow instruction-set tier).
  explicit TrainingSession(RunRequest request, std::function<void(const std::string&)> warn = {});
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  Trainer& trainer() { return *trainer_; }
  Store* store() { return store_.get(); }  // null without a database
  int64_t run_id() const { return run_.id; }
  bool resumed() const { return run_.resumed; }  // an existing run claimed again
  const std::string& checkpoint_dir() const { return checkpoint_dir_; }
  const std::optional<AdaptiveOptions>& adaptive() const { return adaptive_; }
  const RunRequest& request() const { return request_; }

  // The training itself: set its callbacks (on_step, on_plan, stop_requested), then run().
  RecordedTraining& training() { return *training_; }

 private:
  void open_places();
  void build_trainer();
  void settle_adaptive();
  void record_run();
  void warn(const std::string& message) const;

  RunRequest request_;
  std::function<void(const std::string&)> warn_;
  std::unique_ptr<Store> store_;
  CheckpointLock checkpoint_lock_;
  nlohmann::json resume_state_;  // the checkpoint's trainer_state.json, read once
  std::unique_ptr<Trainer> trainer_;
  std::optional<AdaptiveOptions> adaptive_;
  RecordedRun run_;
  std::string checkpoint_dir_;
  std::unique_ptr<RecordedTraining> training_;
};

}  // namespace snip
