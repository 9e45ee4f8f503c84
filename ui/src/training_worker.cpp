// TrainingWorker: snip::Trainer on a QThread, reporting through signals and the store.
#include "training_worker.h"

#include <QDir>
#include <QElapsedTimer>
#include <QThread>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "snip/error.h"
#include "snip/run_recorder.h"
#include "snip/store.h"
#include "snip/trainer.h"

namespace snip::ui {

namespace {
constexpr qint64 kProgressIntervalMs = 100;
constexpr int kTrainingNice = 5;

// Training yields the CPU to the UI thread: every thread of the process except the main (UI)
// thread gets a higher nice value — this worker, the engine's pool threads it creates (new
// threads inherit it) and the BLAS threads that already exist. Linux applies nice per thread.
// Best effort: a thread that refuses (or has exited) is skipped.
void yield_cpu_to_ui_thread() {
  const pid_t ui_thread = getpid();  // the main thread's tid is the process id
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(tasks)) {
      const long tid = std::strtol(entry->d_name, nullptr, 10);
      if (tid <= 0 || tid == ui_thread) continue;
      if (getpriority(PRIO_PROCESS, id_t(tid)) < kTrainingNice) setpriority(PRIO_PROCESS, id_t(tid), kTrainingNice);
    }
    closedir(tasks);
  }
}
}  // namespace

TrainingWorker::TrainingWorker(std::shared_ptr<LiveMetrics> live) : live_(std::move(live)) {
  qRegisterMetaType<snip::ui::TrainRequest>();
  qRegisterMetaType<snip::ui::StepUpdate>();
}

TrainingWorker::~TrainingWorker() = default;

void TrainingWorker::request_stop() {
  stop_.store(true);
  std::lock_guard lock(trainer_mutex_);
  if (trainer_) trainer_->request_stop();  // also wakes a paused loop
}

void TrainingWorker::set_paused(bool paused) {
  paused_.store(paused);
  std::lock_guard lock(trainer_mutex_);
  if (trainer_) trainer_->set_paused(paused);
}

void TrainingWorker::run(const TrainRequest& request) {
  busy_.store(true);
  yield_cpu_to_ui_thread();
  stop_.store(false);
  int64_t run_id = 0;
  std::unique_ptr<snip::Store> store;
  std::unique_ptr<snip::RunRecorder> recorder;
  std::unique_ptr<snip::Trainer> trainer;
  QString checkpoint;
  try {
    // The worker's own connection: a Store is used from one thread only.
    store = std::make_unique<snip::Store>(request.db_path.toStdString());
    trainer = std::make_unique<snip::Trainer>(request.config);  // bad config/data throws here
    for (const std::string& w : trainer->plan_warnings()) emit warning(QString::fromStdString(w));

    snip::RunSpec spec;
    spec.name = request.run_name.toStdString();
    spec.dims = request.config.model.dims();
    spec.model_config = snip::config_to_json(request.config.model);
    spec.train_config = snip::train_config_to_json(request.config);
    spec.data_source = request.config.data_path.empty() ? snip::bundled_corpus_path() : request.config.data_path;
    spec.recipe = request.config.recipe;
    spec.seed = int64_t(request.config.seed);
    spec.method = request.method.toStdString();
    spec.plan_id = request.plan_id;
    run_id = store->create_run(spec);
    if (request.plan_id) store->set_plan_in_effect(run_id, *request.plan_id, 1);
    recorder = std::make_unique<snip::RunRecorder>(*store, run_id);
    live_->reset(run_id);
    {
      std::lock_guard lock(trainer_mutex_);
      trainer_ = trainer.get();
      if (paused_.load()) trainer_->set_paused(true);
      if (stop_.load()) trainer_->request_stop();
    }
    emit run_started(run_id);

    QElapsedTimer since_progress;
    since_progress.start();
    QElapsedTimer wall;
    wall.start();
    QThread* thread = QThread::currentThread();
    trainer_callback_ = [&](const snip::StepMetrics& m) {
      snip::MetricRow row;
      row.step = m.step;
      row.train_loss = m.train_loss;
      row.val_loss = m.val_loss;
      row.lr = m.lr;
      row.grad_norm = m.grad_norm;
      row.tokens_per_s = m.tokens_per_s;
      row.fp4_fraction = m.fp4_fraction;
      row.bf16_gap = pending_gap_;
      recorder->record(row);
      live_->append(row);
      if (since_progress.elapsed() >= kProgressIntervalMs || m.step == m.total_steps) {
        since_progress.restart();
        StepUpdate u;
        u.run_id = run_id;
        u.step = m.step;
        u.total_steps = m.total_steps;
        u.train_loss = m.train_loss;
        u.tokens_per_s = m.tokens_per_s;
        const double per_step = m.step > 0 ? wall.elapsed() / 1000.0 / double(m.step) : 0.0;
        u.eta_s = per_step * double(m.total_steps - m.step);
        emit progress(u);
      }
      return !stop_.load() && !thread->isInterruptionRequested();
    };
    if (!request.adaptive) trainer->set_callback(trainer_callback_);

    const std::string run_dir =
        QDir(request.checkpoint_root).filePath(QStringLiteral("run-%1").arg(run_id)).toStdString();
    std::filesystem::create_directories(run_dir);
    bool complete = false;
    if (request.adaptive) {
      // The controller runs a statistics round and re-solves every N steps; each round, plan and
      // its first step are stored, so the Sensitivity and Compare views can show them.
      snip::AdaptiveController controller(*trainer, *request.adaptive);
      std::optional<snip::ProbeEvent> probe;
      controller.on_plan([&](const snip::PlanEvent& e) {
        const int64_t round_id = store->add_stats_round(e.round, run_id);
        snip::PlanSolveInfo info;
        info.run_id = run_id;
        info.stats_round_id = round_id;
        info.options = {{"lambda", request.adaptive->estimator.lambda}, {"replan_every", request.adaptive->replan_every}};
        if (std::isfinite(e.result.objective)) info.objective = e.result.objective;
        if (std::isfinite(e.result.predicted_dl)) info.predicted_delta_loss = e.result.predicted_dl;
        if (std::isfinite(e.result.predicted_dw)) info.predicted_delta_weight = e.result.predicted_dw;
        info.solver_status = e.result.status;
        info.solve_time_s = e.result.solve_ms / 1000.0;
        const int64_t plan_id = store->add_plan(e.result.plan, info);
        store->set_plan_in_effect(run_id, plan_id, e.first_step);
        emit plan_made(run_id, plan_id, e.first_step, e.result.achieved_fraction);
      });
      controller.on_probe([&](const snip::ProbeEvent& p) { probe = p; });
      const snip::Trainer::Callback step_cb = trainer_callback_;
      complete = controller.run([&](const snip::StepMetrics& m) {
        pending_gap_.reset();
        if (probe && probe->step == m.step) pending_gap_ = probe->gap();
        const bool go_on = step_cb(m);
        // The controller's loop has no pause of its own: hold here between steps.
        while (paused_.load() && !stop_.load() && !QThread::currentThread()->isInterruptionRequested()) QThread::msleep(20);
        if (request.save_every > 0 && m.step % request.save_every == 0 && m.step < m.total_steps) {
          const std::string dir = run_dir + "/step-" + std::to_string(m.step);
          trainer->save_checkpoint(dir);
          recorder->add_checkpoint(m.step, dir);
        }
        return go_on;
      });
      store->end_plan_timeline(run_id, trainer->step_count());
    } else {
      complete = trainer->run(request.save_every, request.save_every > 0 ? run_dir : "");
    }
    // Final checkpoint: the end of the run, or where the user stopped it (resumable).
    const std::string dir = run_dir + "/step-" + std::to_string(trainer->step_count());
    trainer->save_checkpoint(dir);
    recorder->add_checkpoint(trainer->step_count(), dir);
    checkpoint = QString::fromStdString(dir);
    {
      std::lock_guard lock(trainer_mutex_);
      trainer_ = nullptr;
    }
    if (complete) {
      recorder->finish();
      emit run_ended(run_id, QStringLiteral("finished"), {}, checkpoint);
    } else {
      recorder->interrupt("stopped by the user");
      emit run_ended(run_id, QStringLiteral("interrupted"), tr("stopped at step %1").arg(trainer->step_count()),
                     checkpoint);
    }
  } catch (const std::exception& e) {
    {
      std::lock_guard lock(trainer_mutex_);
      trainer_ = nullptr;
    }
    const QString message = QString::fromStdString(e.what());
    try {
      if (recorder) recorder->fail(e.what());
    } catch (const std::exception&) {
      // the store itself failed; the message below still reaches the user
    }
    emit run_ended(run_id, QStringLiteral("failed"), message, checkpoint);
  }
  trainer_callback_ = nullptr;
  recorder.reset();
  trainer.reset();
  store.reset();
  busy_.store(false);
}

}  // namespace snip::ui
