// The compare worker: a QObject living on its own QThread that runs a plan comparison through
// the library (snip::CompareRecorder: the same recorder `snip compare` uses, so the compare is
// stored as it runs, each finished training at once, through the worker's own Store connection)
// and turns its plain callbacks into Qt signals. Cancel comes from the UI thread through a
// thread-safe call; the compare stops after the current training step and stays in the
// database as `interrupted`, with its finished trainings, for Resume to continue.
#pragma once
#include <QObject>
#include <QString>
#include <QStringList>
#include <atomic>

#include "snip/compare.h"

namespace snip {
class Store;
class CompareRecorder;
}  // namespace snip

namespace snip::ui {

struct CompareRequest {
  QString db_path;
  QString checkpoint;            // a new compare of this checkpoint (unused when resuming)
  snip::CompareOptions options;  // a new compare's options; a resume uses the stored ones (and options.jobs)
  qint64 resume_id = 0;          // continue this stored compare instead
  // Train on Slurm (snip/slurm_compare.h) instead of this machine; a resumed compare that ran on
  // Slurm stays there. sbatch_args: extra sbatch arguments (a resume: replaces the stored ones).
  bool on_slurm = false;
  QString sbatch_args;
  // Stops as if Cancel were pressed once this many trainings have finished in this session (0:
  // never): lets a script or a test stop a compare at a known point whatever the machine's speed.
  int stop_after_trainings = 0;
};

class CompareWorker : public QObject {
  Q_OBJECT
 public:
  CompareWorker();
  ~CompareWorker() override;

  // Thread-safe, from the UI thread. prepare() is called before a compare is queued: it clears an
  // earlier stop request, so a stop made after it (even before run() begins) is kept.
  void prepare();
  void request_stop();
  bool busy() const { return busy_.load(); }

 public slots:
  // Runs a whole compare on the worker's thread; returns when it ends or is stopped.
  void run(const snip::ui::CompareRequest& request);

 signals:
  // The compare is stored (a new one) or claimed (a resumed one) under this id.
  void started(qint64 compare_id);
  void progress(int done, int total, const QString& what);
  // On Slurm, after every poll: counts, and each training waited for with its Slurm state.
  void slurm_status(int queued, int running, int finished, const QStringList& trainings);
  void slurm_submitted(qint64 job, const QString& work_dir);
  // status: "finished", "interrupted" (cancelled; Resume continues it) or "failed" (compare_id 0
  // when it could not even be stored, e.g. an unreadable checkpoint).
  void ended(qint64 compare_id, const QString& status, const QString& message);

 private:
  snip::CompareExecutor slurm_executor(snip::Store& store, snip::CompareRecorder& rec, const CompareRequest& request);

  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace snip::ui

Q_DECLARE_METATYPE(snip::ui::CompareRequest)

namespace snip::ui {
// The `snip` command-line program the Slurm tasks run: $SNIP_PROGRAM, else the one beside this
// executable, in the build tree's app/ folder, or on PATH; empty when there is none.
QString snip_program_path();
}  // namespace snip::ui
