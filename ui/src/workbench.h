// The workbench's shared state, owned by the main window and read by every view: the open
// experiment store (the UI thread's own connection), the planning source (a statistics round
// from the store or an imported statistics/costs file) and user-facing messages. Views talk to
// the engine, planner and store only through their public APIs; this class holds no method logic.
#pragma once
#include <QObject>
#include <QString>
#include <QTimer>
#include <memory>
#include <optional>

#include "snip/cost_table.h"
#include "snip/planner.h"
#include "snip/stats.h"
#include "snip/store.h"

namespace snip::ui {

enum class MessageLevel { info, warning, error };

// What a message is about. A message about training or a compare experiment describes one
// attempt: the next start of the same kind settles it (the bar no longer shows a failed start
// while the next run trains, or "cancelled" while the resumed compare runs).
enum class MessageSubject { other, training, compare };

// Where the planner's costs come from.
struct PlanningSource {
  QString label;                          // shown in the views, e.g. "round #3 (run 2, step 400)"
  std::optional<snip::StatsRound> round;  // statistics: SNIP's ΔL/ΔW/Q and the local-error baselines
  std::optional<int64_t> round_id;        // the round's id in the store, when stored
  std::optional<snip::CostTable> costs;   // imported costs (layer,precision,cost,flops)
  int num_blocks() const;
  bool empty() const { return !round && !costs; }
};

class Workbench : public QObject {
  Q_OBJECT
 public:
  explicit Workbench(QObject* parent = nullptr);
  ~Workbench() override;

  // Opens (or creates) the database; on failure reports the error (what is wrong with the file
  // and how to go on), emits database_open_failed and keeps the previous database — or none,
  // when the first open fails. The file is never modified by a failed open.
  bool open_database(const QString& path);
  QString database_path() const;
  // The error of the last failed open_database (empty after a successful one).
  QString last_open_error() const { return last_open_error_; }
  snip::Store* store() { return store_.get(); }

  const PlanningSource& planning_source() const { return source_; }
  void set_planning_source(PlanningSource source);
  // Planner input for the current source under the estimator options (λ, normalisation).
  // Throws snip::Error when the source is empty or the statistics lack a key.
  snip::PlannerInput planner_input(const snip::EstimatorOptions& options) const;

  // File › Import: snip-stats/1 JSON (stored as a round) or a layer,precision,cost,flops CSV, or
  // a snip-plan/1 plan (stored). Errors are reported as messages; returns success.
  bool import_statistics_or_costs(const QString& path);
  bool import_plan(const QString& path);
  // Uses stored statistics round `round_id` as the planning source.
  bool use_stats_round(int64_t round_id);
  // When nothing is chosen to plan from, the newest stored statistics round becomes the source
  // (a new database, or the first round of an adaptive run); an existing choice is kept.
  void adopt_newest_round_if_none();

  // A message for the message bar (non-blocking; never a modal dialog).
  void report(MessageLevel level, const QString& text, MessageSubject subject = MessageSubject::other);
  // A new attempt of `subject` began: its earlier message no longer describes what is so.
  void settle(MessageSubject subject);

  // Polls the database for changes made by other processes (the headless `snip` CLI).
  void poll_now();

 signals:
  void database_changed();  // a new file was opened
  void database_open_failed(const QString& path, const QString& error);
  void data_changed();  // runs, metrics, plans or rounds may have changed
  void planning_source_changed();
  void message(snip::ui::MessageLevel level, const QString& text, snip::ui::MessageSubject subject);
  void settled(snip::ui::MessageSubject subject);

 private:
  std::unique_ptr<snip::Store> store_;
  PlanningSource source_;
  QTimer poll_timer_;
  QString last_fingerprint_;
  std::optional<uint64_t> last_counter_;  // store_->change_counter() at the last fingerprint
  QString last_open_error_;
};

// An exception's text as the GUI shows it: the CLI's message with its command-line advice
// ("pass another --db", "point --data at ...") said in the GUI's words (the menu or field that
// does it), since a GUI user never typed a flag.
QString error_text(const std::exception& e);
QString gui_wording(QString text);

}  // namespace snip::ui
