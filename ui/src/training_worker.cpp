// TrainingWorker: a recorded training run (snip::RecordedTraining) on a QThread, reporting through
// signals and the live buffer.
#include "training_worker.h"

#include <unistd.h>

#include <QDir>
#include <QElapsedTimer>
#include <QThread>
#include <cstdlib>
#include <filesystem>

#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/isa.h"
#include "snip/recorded_training.h"
#include "snip/store.h"
#include "snip/trainer.h"
#include "snip/training_session.h"
#include "thread_priority.h"

namespace snip::ui {

namespace {
constexpr qint64 kProgressIntervalMs = 100;
}  // namespace

snip::RunRequest session_request(const TrainRequest& request) {
  snip::RunRequest r;
  r.config = request.config;
  r.resume_from = request.resume_from.toStdString();
  r.db_path = request.db_path.toStdString();
  r.description.name = request.run_name.toStdString();
  r.description.method = request.method.toStdString();
  r.description.plan_id = request.plan_id;
  r.adaptive = request.adaptive;
  r.checkpoint_root = request.checkpoint_root.toStdString();
  r.save_every = request.save_every;
  r.stop_reason = "stopped by the user";
  return r;
}

TrainingWorker::TrainingWorker(std::shared_ptr<LiveMetrics> live) : live_(std::move(live)) {
  qRegisterMetaType<snip::ui::TrainRequest>();
  qRegisterMetaType<snip::ui::StepUpdate>();
}

TrainingWorker::~TrainingWorker() = default;

void TrainingWorker::request_stop() {
  stop_.store(true);
  std::lock_guard lock(session_mutex_);
  if (session_) session_->request_stop();  // also wakes a paused loop
}

void TrainingWorker::prepare(bool paused) {
  stop_.store(false);
  paused_.store(paused);
}

void TrainingWorker::set_paused(bool paused) {
  paused_.store(paused);
  std::lock_guard lock(session_mutex_);
  if (session_) session_->set_paused(paused);
}

void TrainingWorker::run(const TrainRequest& request) {
  busy_.store(true);
  yield_cpu_to_ui_thread();
  int64_t run_id = 0;
  std::unique_ptr<snip::TrainingSession> session;
  try {
    // The worker's own connection (the session opens it): a Store is used from one thread only.
    snip::RunRequest run_request = session_request(request);
    run_request.recorder.on_busy = [this](const std::string& msg) { emit warning(QString::fromStdString(msg)); };
    session = std::make_unique<snip::TrainingSession>(
        std::move(run_request), [this](const std::string& w) { emit warning(QString::fromStdString(w)); });
    run_id = session->run_id();
    snip::Store& store = *session->store();
    // A resumed run's chart starts with the steps it already has (up to the checkpoint).
    live_->reset(run_id, session->resumed() ? store.metrics(run_id) : std::vector<snip::MetricRow>{}, store.path());
    snip::RecordedTraining& training = session->training();

    QElapsedTimer since_progress;
    since_progress.start();
    QElapsedTimer wall;
    wall.start();
    const int64_t first_step = session->trainer().step_count();
    QThread* thread = QThread::currentThread();
    training.on_step = [&](const snip::StepMetrics& m, const snip::MetricRow& row) {
      live_->append(row);
      if (request.pause_after_step > 0 && m.step == request.pause_after_step) {
        paused_.store(true);
        training.set_paused(true);
      }
      if (since_progress.elapsed() >= kProgressIntervalMs || m.step == m.total_steps) {
        since_progress.restart();
        StepUpdate u;
        u.run_id = run_id;
        u.step = m.step;
        u.total_steps = m.total_steps;
        u.train_loss = m.train_loss;
        u.tokens_per_s = m.tokens_per_s;
        const int64_t done = m.step - first_step;
        const double per_step = done > 0 ? wall.elapsed() / 1000.0 / double(done) : 0.0;
        u.eta_s = per_step * double(m.total_steps - m.step);
        emit progress(u);
      }
      return !stop_.load() && !thread->isInterruptionRequested();
    };
    training.on_plan = [&](const snip::PlanEvent& e, int64_t plan_id) {
      emit plan_made(run_id, plan_id, e.first_step, e.result.achieved_fraction);
    };
    {
      std::lock_guard lock(session_mutex_);
      session_ = &training;
      if (paused_.load()) session_->set_paused(true);
      if (stop_.load()) session_->request_stop();
    }
    emit run_started(run_id);

    snip::TrainingOutcome outcome;
    try {
      outcome = training.run();
    } catch (...) {
      std::lock_guard lock(session_mutex_);
      session_ = nullptr;
      throw;
    }
    {
      std::lock_guard lock(session_mutex_);
      session_ = nullptr;
    }
    const QString checkpoint = QString::fromStdString(outcome.checkpoint);
    if (outcome.finished)
      emit run_ended(run_id, QStringLiteral("finished"), {}, checkpoint);
    else
      emit run_ended(run_id, QStringLiteral("interrupted"), tr("stopped at step %1").arg(outcome.step), checkpoint);
  } catch (const std::exception& e) {
    // RecordedTraining marked the run failed; the last saved checkpoint is kept as it is.
    emit run_ended(run_id, QStringLiteral("failed"), QString::fromStdString(e.what()), {});
  }
  if (run_id != 0) live_->end();  // after the store has the run's final status
  session.reset();
  busy_.store(false);
}

}  // namespace snip::ui
