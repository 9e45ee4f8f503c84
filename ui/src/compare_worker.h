// The compare worker: a QObject living on its own QThread that runs a plan comparison through
// the library (snip::CompareRecorder: the same recorder `snip compare` uses, so the compare is
// stored as it runs, each finished training at once, through the worker's own Store connection)
// and turns its plain callbacks into Qt signals. Cancel comes from the UI thread through a
// thread-safe call; the compare stops after the current training step and stays in the
// database as `interrupted`, with its finished trainings, for Resume to continue.
#pragma once
#include <QObject>
#include <QString>
#include <atomic>

#include "snip/compare.h"

namespace snip::ui {

struct CompareRequest {
  QString db_path;
  QString checkpoint;            // a new compare of this checkpoint (unused when resuming)
  snip::CompareOptions options;  // a new compare's options; a resume uses the stored ones (and options.jobs)
  qint64 resume_id = 0;          // continue this stored compare instead
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
  // status: "finished", "interrupted" (cancelled; Resume continues it) or "failed" (compare_id 0
  // when it could not even be stored, e.g. an unreadable checkpoint).
  void ended(qint64 compare_id, const QString& status, const QString& message);

 private:
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace snip::ui

Q_DECLARE_METATYPE(snip::ui::CompareRequest)
