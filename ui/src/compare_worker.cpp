// CompareWorker: a recorded plan comparison (snip::CompareRecorder) on a QThread, reporting
// through signals.
#include "compare_worker.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <memory>

#include "snip/compare_recorder.h"
#include "snip/error.h"
#include "snip/store.h"

namespace snip::ui {

namespace {
// The compare yields the cores to the UI and to a training run: this thread, and the job and
// pool threads it starts (new threads inherit it), get a high nice value (Linux: per thread).
constexpr int kCompareNice = 10;
}  // namespace

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

void CompareWorker::run(const CompareRequest& request) {
  busy_.store(true);
  setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), kCompareNice);
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
