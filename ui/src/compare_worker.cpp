// CompareWorker: a recorded plan comparison (snip::CompareRecorder) on a QThread, reporting
// through signals.
#include "compare_worker.h"

#include <unistd.h>

#include <QCoreApplication>
#include <QFileInfo>
#include <QStandardPaths>
#include <memory>

#include "snip/compare_recorder.h"
#include "snip/error.h"
#include "snip/slurm_compare.h"
#include "snip/store.h"
#include "thread_priority.h"

namespace snip::ui {

CompareWorker::CompareWorker() {
  qRegisterMetaType<snip::ui::CompareRequest>();
}

CompareWorker::~CompareWorker() = default;

void CompareWorker::prepare() {
  stop_.store(false);
}

void CompareWorker::request_stop() {
  stop_.store(true);
}

// The compare's trainings on Slurm through the code `snip compare --executor slurm` uses.
snip::CompareExecutor CompareWorker::slurm_executor(snip::Store& store, snip::CompareRecorder& rec,
                                                    const CompareRequest& request) {
  snip::SlurmFront f;
  f.snip_binary = snip_program_path().toStdString();
  if (f.snip_binary.empty())
    throw snip::Error(
        "a compare on Slurm runs the snip command-line program in every task, and there is none "
        "beside snip-workbench or on PATH; install snip there, or run the compare on this machine");
  f.snip_version = SNIP_VERSION;
  if (request.on_slurm) f.sbatch_args = request.sbatch_args.toStdString();
  f.stop_requested = [this] { return stop_.load(); };
  f.on_submitted = [this](int64_t job, const std::string& dir) {
    emit slurm_submitted(qint64(job), QString::fromStdString(dir));
  };
  f.on_status = [this](const snip::SlurmStatus& st) {
    QStringList trainings;
    for (const std::string& t : st.trainings) trainings << QString::fromStdString(t);
    emit slurm_status(st.queued, st.running, st.finished, trainings);
  };
  return snip::stored_slurm_executor(store, rec.id(), rec.options(), std::move(f));
}

QString snip_program_path() {
  if (const QString given = qEnvironmentVariable("SNIP_PROGRAM"); !given.isEmpty()) return given;
  const QString dir = QCoreApplication::applicationDirPath();
  for (const QString& candidate : {dir + QStringLiteral("/snip"), dir + QStringLiteral("/../app/snip")}) {
    const QFileInfo info(candidate);
    if (info.isFile() && info.isExecutable()) return info.canonicalFilePath();
  }
  return QStandardPaths::findExecutable(QStringLiteral("snip"));
}

void CompareWorker::run(const CompareRequest& request) {
  busy_.store(true);
  lower_this_thread(kCompareNice);  // thread_priority.h: yields to the UI and to a training run
  int64_t id = 0;
  try {
    // The worker's own connection: a Store is used from one thread only.
    snip::Store store(request.db_path.toStdString(), {.check_integrity = true});
    std::unique_ptr<snip::CompareRecorder> recorder;
    if (request.resume_id > 0)
      recorder = snip::CompareRecorder::resume(store, request.resume_id, request.options.jobs);
    else
      recorder = std::make_unique<snip::CompareRecorder>(store, request.checkpoint.toStdString(), request.options);
    id = recorder->id();
    emit started(qint64(id));
    std::atomic<int> trained{0};
    snip::CompareHooks hooks;
    hooks.progress = [this](int done, int total, const std::string& what) {
      emit progress(done, total, QString::fromStdString(what));
    };
    hooks.on_replicate = [&](const snip::CompareRow&, int, const snip::CompareReplicate&) {
      if (request.stop_after_trainings > 0 && ++trained >= request.stop_after_trainings) stop_.store(true);
    };
    hooks.stop_requested = [this] { return stop_.load(); };
    if (request.on_slurm || (request.resume_id > 0 && snip::compare_runs_on_slurm(store.compare(id))))
      hooks.executor = slurm_executor(store, *recorder, request);
    recorder->run(
        hooks, "cancelled in the workbench; Resume (or snip compare --resume " + std::to_string(id) + ") continues it");
    emit ended(qint64(id), QStringLiteral("finished"), QString());
  } catch (const snip::CompareStopped&) {
    emit ended(qint64(id), QStringLiteral("interrupted"),
               tr("compare #%1 keeps its finished trainings; Resume continues it").arg(id));
  } catch (const std::exception& e) {
    emit ended(qint64(id), QStringLiteral("failed"), QString::fromUtf8(e.what()));
  }
  busy_.store(false);
}

}  // namespace snip::ui
