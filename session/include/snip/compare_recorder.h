// A plan comparison (`snip compare`, METHOD.md section 6) recorded in the experiment store as it
// runs, so that it survives interruption: the one place that wires snip::run_compare to a
// snip::Store, shared by the `snip compare` command and the GUI's compare worker (like
// RecordedTraining for training runs).
//
//   snip::Store store(db);
//   snip::CompareRecorder rec(store, checkpoint, options);        // stored at once, `running`
//   // or: auto rec = snip::CompareRecorder::resume(store, id);    // claims an interrupted one
//   const snip::CompareReport report = rec.run(hooks);            // hooks: progress, stop_requested
//
// The compare is stored when it starts (status `running`, every option a resume needs, the
// checkpoint's path and fingerprint); when its plans are made, its statistics round, one plan
// per arm and the arms are stored; each finished (arm, replicate) training is stored at once;
// at the end the arms' means, gaps and verdicts are filled in and the status is `finished`. A
// stop (CompareStopped) leaves it `interrupted`, an error `failed`; either way the trainings
// that finished are kept, and resume() continues it: only what is missing is trained, and the
// result is bit-identical to an uninterrupted compare. No Qt.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "snip/compare.h"
#include "snip/store.h"

namespace snip {

// The checkpoint's fingerprint: FNV-1a 64 over its files (config, weights, optimizer state,
// trainer state), "fnv1a64 <hex>". Throws snip::Error when a file cannot be read.
std::string checkpoint_fingerprint(const std::string& dir);

// The settings a compare is resumed with, as stored in CompareRecord::options["resume"]: keys
// are the `snip compare` option names without dashes ("budget", "steps", "replicates", ...).
// `jobs` is not among them: it never changes a result.
nlohmann::json compare_settings_to_json(const CompareOptions& o);
// Throws snip::Error naming the compare when it has no stored settings (stored before they were).
CompareOptions compare_options_from_record(const CompareRecord& c);

class CompareRecorder {
 public:
  // A new compare of `checkpoint`, stored at once as `running`. Throws snip::Error for a
  // checkpoint that cannot be read.
  CompareRecorder(Store& store, const std::string& checkpoint, const CompareOptions& options);
  // Continues stored compare `id` with its stored options (`jobs` is the caller's): claims it.
  // Throws snip::Error when it is finished, still trained by a live process, has no stored
  // settings, or its checkpoint is gone or changed since it started.
  static std::unique_ptr<CompareRecorder> resume(Store& store, int64_t id, int jobs);

  int64_t id() const { return id_; }
  const CompareOptions& options() const { return options_; }
  const std::string& checkpoint() const { return checkpoint_; }
  // Trainings already stored (a resume starts from these).
  size_t stored_trainings() const { return kept_.size(); }

  // Runs the compare with the front's hooks (progress, stop_requested; the others are the
  // recorder's). Returns the report with the status `finished`. On CompareStopped the compare
  // is marked `interrupted` with `stop_message` (or a default naming the resume command) and
  // the exception is rethrown; on any other error it is marked `failed` and it is rethrown.
  CompareReport run(const CompareHooks& front, const std::string& stop_message = "");

 private:
  CompareRecorder(Store& store, int64_t id, std::string checkpoint, CompareOptions options);
  void record_plans(const CompareReport& planned);
  void finish(const CompareReport& report);

  Store& store_;
  int64_t id_ = 0;
  std::string checkpoint_;
  CompareOptions options_;
  std::map<std::string, int64_t> position_;                       // arm (method) -> row position
  std::map<std::pair<std::string, int>, CompareReplicate> kept_;  // (arm, replicate) stored before this run
  bool rows_stored_ = false;
};

}  // namespace snip
