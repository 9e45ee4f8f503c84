// The training worker: a QObject living on its own QThread that runs a snip::RecordedTraining
// (the trainer wired to the store, shared with `snip train`: metric rows, adaptive rounds and
// plans, checkpoints, run status through the worker's own Store connection) and turns its plain
// callbacks into Qt signals carrying value types: each step's row also goes to the LiveMetrics
// buffer (the Monitor view's timer reads it) and a throttled progress signal. Stop/pause come
// from the UI thread through thread-safe calls; the loop checks them at step boundaries.
// Stopping saves a checkpoint; a run resumed from a checkpoint continues its exact trajectory
// in the run that saved it; engine errors become signals.
#pragma once
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>

#include "live_metrics.h"
#include "snip/adaptive.h"
#include "snip/trainer.h"
#include "snip/training_session.h"

namespace snip {
class RecordedTraining;
}

namespace snip::ui {

struct TrainRequest {
  snip::TrainConfig config;  // a new run (unused when resuming)
  QString resume_from;       // continue the run saved in this checkpoint directory
  QString db_path;
  QString run_name;
  QString checkpoint_root;  // checkpoints go to snip::run_checkpoint_folder(<root>, ...)/step-<N>
  // Periodic checkpoints (0: only at the end / on stop); none: 0 for a new run, the checkpoint's
  // own interval on resume.
  std::optional<int64_t> save_every;
  QString method;                  // stored with the run: "uniform-fp4", "plan", ... ("": derived)
  std::optional<int64_t> plan_id;  // stored plan the run starts with
  // Adaptive SNIP (METHOD.md 9): statistics round + ILP every replan_every steps, optional BF16
  // probe; every round, plan and its step range go to the store.
  std::optional<snip::AdaptiveOptions> adaptive;
  // Holds after this step as if Pause had been pressed then (0: never); Stop or Resume go on
  // from there. Lets a script or a test stop a run at a known step whatever the machine's speed.
  int64_t pause_after_step = 0;
};

// The request as the training session takes it (snip/training_session.h): the one entry point
// `snip train` shares.
snip::RunRequest session_request(const TrainRequest& request);

// A step as the UI sees it (throttled: at most one per kProgressIntervalMs).
struct StepUpdate {
  qint64 run_id = 0;
  qint64 step = 0;
  qint64 total_steps = 0;
  double train_loss = 0;
  double tokens_per_s = 0;
  double eta_s = 0;
};

class TrainingWorker : public QObject {
  Q_OBJECT
 public:
  explicit TrainingWorker(std::shared_ptr<LiveMetrics> live);
  ~TrainingWorker() override;

  // Thread-safe, from the UI thread. prepare() is called before a run is queued: it clears an
  // earlier stop request, so a stop made after it (even before run() begins) is kept.
  void prepare(bool paused);
  void request_stop();
  void set_paused(bool paused);
  bool busy() const { return busy_.load(); }
  bool paused() const { return paused_.load(); }

 public slots:
  // Runs a whole training run on the worker's thread; returns when it ends or is stopped.
  void run(const snip::ui::TrainRequest& request);

 signals:
  void run_started(qint64 run_id);
  void progress(const snip::ui::StepUpdate& update);
  // status: "finished", "interrupted" (stopped; resumable from `checkpoint`) or "failed".
  void run_ended(qint64 run_id, const QString& status, const QString& message, const QString& checkpoint);
  void warning(const QString& message);
  // Adaptive SNIP stored a new statistics round and plan (plan_id in effect from first_step).
  void plan_made(qint64 run_id, qint64 plan_id, qint64 first_step, double achieved_fraction);

 private:
  std::shared_ptr<LiveMetrics> live_;
  std::mutex session_mutex_;
  snip::RecordedTraining* session_ = nullptr;  // valid while run() trains; guarded by session_mutex_
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
};

}  // namespace snip::ui

Q_DECLARE_METATYPE(snip::ui::TrainRequest)
Q_DECLARE_METATYPE(snip::ui::StepUpdate)
