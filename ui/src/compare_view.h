// The Compare view: pick stored plans, runs and compare experiments; plan grids side by side
// with the layers that differ from the first plan highlighted, the train-loss curves of the runs
// and of the experiments' arms overlaid on one chart (each arm's replicates as a band that can be
// toggled), every arm's gap to BF16 with its 95% error bars, and one sortable table (method,
// budget, achieved FP4 fraction, train loss over the stored window, validation loss, gaps to
// BF16 as mean ± 95% half-width, the paired difference to SNIP and the verdict against it) that
// exports as CSV, under plain-language notes (how many replicates, whether uniform FP4 can be
// told from BF16 at all, SNIP's regret to the oracle). The statistics are the library's
// (compare_report.h). Compare experiments (METHOD.md section 6: continue a run's checkpoint
// under every method's plan) are launched from here through the library on a worker thread
// (CompareWorker: the recorder `snip compare` uses, so each finished training is stored at once)
// with progress and Cancel; a cancelled compare stays interrupted and Resume continues it.
#pragma once
#include <QWidget>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "compare_worker.h"
#include "snip/store_types.h"

class QCheckBox;
class QComboBox;
class QLineEdit;
class QDoubleSpinBox;
class QGroupBox;
class QHBoxLayout;
class QLabel;
class QListWidget;
class QThread;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;
class QVBoxLayout;

namespace snip::ui {

class CompareWorker;
class CurveChart;
class GapChart;
class PlanGrid;
struct CompareModel;
class Workbench;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  // Table columns, in order.
  enum Column {
    col_source,
    col_method,
    col_budget,
    col_achieved,
    col_train,
    col_val,
    col_gap_train,
    col_gap_val,
    col_vs_snip,
    col_verdict,
    col_predicted,
    num_columns
  };

  CompareView(Workbench* workbench, QWidget* parent = nullptr);
  ~CompareView() override;

  // Checks exactly these plans / runs / compare experiments (tests and the screenshot mode).
  void select(const std::vector<int64_t>& plan_ids, const std::vector<int64_t>& run_ids,
              const std::vector<int64_t>& compare_ids = {});
  const std::vector<PlanGrid*>& grids() const { return grids_; }
  QTableWidget* table() const { return table_; }
  CurveChart* loss_chart() const { return loss_; }
  GapChart* gap_chart() const { return gap_chart_; }
  // The plain-language notes above the table (HTML).
  QString notes_text() const;
  QListWidget* compare_list() const { return compare_list_; }
  QListWidget* plan_list() const { return plan_list_; }
  QDoubleSpinBox* experiment_budget_spin() const { return experiment_budget_; }
  QSpinBox* experiment_steps_spin() const { return experiment_steps_; }
  QSpinBox* experiment_replicates_spin() const { return experiment_replicates_; }
  // Trainings run at once (`snip compare --jobs`); speed only, never the results.
  QSpinBox* experiment_jobs_spin() const { return experiment_jobs_; }
  QCheckBox* experiment_oracle_check() const { return experiment_oracle_; }
  QProgressBar* experiment_progress() const { return experiment_progress_; }
  // The table as CSV in the order shown (sorted or not); numbers at full precision. Throws
  // snip::Error when the file cannot be written.
  void export_table_csv(const QString& path) const;
  // Starts a compare experiment on the worker thread on the newest existing checkpoint of the
  // first checked run, stored in this database as it runs; progress in the view, the stored
  // result is shown when it ends.
  void launch_compare_experiment();
  // Continues the first checked compare experiment that is interrupted (or failed) with its
  // stored options: only the trainings it has not stored are run.
  void resume_compare_experiment();
  // Stops after the current training step; the compare stays interrupted, resumable.
  void cancel_compare_experiment();
  bool experiment_running() const;
  // Stops the next launched or resumed compare as if Cancel were pressed once this many
  // trainings have finished (0: never; tests and scripts stop at a known point this way).
  void set_stop_after_trainings(int n) { stop_after_trainings_ = n; }
  // Blocks until the running experiment ends (tests); returns false on timeout.
  bool wait_for_experiment(int timeout_ms);

 signals:
  // A launched experiment ended: its stored id (0 when it failed or was cancelled).
  void experiment_finished(qint64 compare_id);
  // Queued to the worker thread.
  void start_worker(const snip::ui::CompareRequest& request);

 public slots:
  void refresh_lists();
  void rebuild();

 protected:
  void showEvent(QShowEvent* event) override;
  bool eventFilter(QObject* watched, QEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;

 private:
  // The constructor's parts, one per panel or group box.
  QWidget* make_pick_panel();
  QGroupBox* make_experiment_box(QWidget* parent);
  void start_experiment_worker();
  void show_arm_plan(int report_row);
  void fill_plan_filter(const std::vector<snip::CompareRecord>& compares);
  QVBoxLayout* make_executor_row(QWidget* experiment);
  void show_slurm_status(int queued, int running, int finished, const QStringList& trainings);
  QWidget* make_table_box();
  void on_data_changed();
  void start_experiment(const QString& checkpoint, qint64 resume_id);
  void experiment_ended(qint64 compare_id, const QString& status, const QString& message);
  std::vector<int64_t> checked(QListWidget* list) const;
  // What the table would be built from now: the checked ids and the checked runs' states.
  QString selection_key() const;
  // rebuild()'s stages after loading and computing the model (compare_report.h).
  void fill_grids(const CompareModel& model);
  void fill_table(const CompareModel& model);
  void fill_charts(CompareModel& model);
  // Column widths within the table's width: the contents' widths when they fit, else the wide
  // text columns give way first (long cells elide; their tooltips hold the whole text).
  void fit_columns();

  Workbench* workbench_;
  QListWidget* plan_list_ = nullptr;
  QComboBox* plan_filter_ = nullptr;  // all plans, or those of one compare experiment
  QListWidget* run_list_ = nullptr;
  QListWidget* compare_list_ = nullptr;
  QWidget* pick_ = nullptr;  // the lists and the experiment box, left
  QWidget* grids_host_ = nullptr;
  QWidget* grids_scroll_ = nullptr;
  QHBoxLayout* grids_layout_ = nullptr;
  std::vector<PlanGrid*> grids_;
  PlanGrid* hint_ = nullptr;  // "No plan" when nothing is checked
  CurveChart* loss_ = nullptr;
  GapChart* gap_chart_ = nullptr;
  // The table's columns at the width of their header and cells, and of their cells alone.
  std::vector<int> header_widths_, content_widths_;
  std::set<int> unused_columns_;  // empty, or one source for every row: hidden at any width
  QTableWidget* table_ = nullptr;
  QLabel* table_note_ = nullptr;
  QDoubleSpinBox* experiment_budget_ = nullptr;
  QSpinBox* experiment_steps_ = nullptr;
  QSpinBox* experiment_replicates_ = nullptr;
  QSpinBox* experiment_jobs_ = nullptr;
  QComboBox* experiment_executor_ = nullptr;
  QLineEdit* experiment_partition_ = nullptr;
  QLineEdit* experiment_sbatch_ = nullptr;
  QCheckBox* experiment_oracle_ = nullptr;
  QPushButton* experiment_button_ = nullptr;
  QPushButton* resume_button_ = nullptr;
  QPushButton* cancel_button_ = nullptr;
  QProgressBar* experiment_progress_ = nullptr;
  QLabel* experiment_status_ = nullptr;
  QThread* experiment_thread_ = nullptr;
  CompareWorker* experiment_worker_ = nullptr;
  bool experiment_in_flight_ = false;  // from launch until the worker's ended signal
  int stop_after_trainings_ = 0;
  // What the shown table was built from; a data change that leaves it equal skips the rebuild
  // (the 1.5 s poll during training must not re-read every checked run).
  QString built_from_;
  std::map<int64_t, QString> run_state_;      // run id -> "status:last_step" from the last refresh
  std::map<int64_t, QString> compare_state_;  // compare id -> "status:stored trainings"
  bool stale_ = false;                        // data changed while hidden
};

}  // namespace snip::ui
