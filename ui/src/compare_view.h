// The Compare view: pick two or more stored plans and runs; plan grids side by side with the
// cells that differ from the first plan highlighted, the runs' loss curves overlaid on one
// chart, and a table (method, budget, achieved FP4 fraction, final train/val loss, gap to
// BF16) that exports as CSV.
#pragma once
#include <QWidget>
#include <vector>

class QDoubleSpinBox;
class QHBoxLayout;
class QListWidget;
class QPlainTextEdit;
class QProcess;
class QProgressBar;
class QPushButton;
class QSpinBox;
class QTableWidget;

namespace snip::ui {

class CurveChart;
class PlanGrid;
class Workbench;

class CompareView : public QWidget {
  Q_OBJECT
 public:
  CompareView(Workbench* workbench, QWidget* parent = nullptr);

  // Checks exactly these plans / runs (tests and the screenshot mode use this).
  void select(const std::vector<int64_t>& plan_ids, const std::vector<int64_t>& run_ids);
  const std::vector<PlanGrid*>& grids() const { return grids_; }
  QTableWidget* table() const { return table_; }
  CurveChart* loss_chart() const { return loss_; }
  void export_table_csv(const QString& path) const;
  // The `snip` command-line tool next to this executable (build tree) or on PATH; empty if none.
  static QString snip_executable();
  // Starts `snip compare` in the background on the newest checkpoint of the first checked run.
  void launch_compare_experiment();
  bool experiment_running() const;

 public slots:
  void refresh_lists();
  void rebuild();

 private:
  Workbench* workbench_;
  QListWidget* plan_list_ = nullptr;
  QListWidget* run_list_ = nullptr;
  QWidget* grids_host_ = nullptr;
  QHBoxLayout* grids_layout_ = nullptr;
  std::vector<PlanGrid*> grids_;
  PlanGrid* hint_ = nullptr;  // "No plan" when nothing is checked
  CurveChart* loss_ = nullptr;
  QTableWidget* table_ = nullptr;
  QDoubleSpinBox* experiment_budget_ = nullptr;
  QSpinBox* experiment_steps_ = nullptr;
  QPushButton* experiment_button_ = nullptr;
  QProgressBar* experiment_progress_ = nullptr;
  QPlainTextEdit* experiment_output_ = nullptr;
  QProcess* experiment_ = nullptr;
};

}  // namespace snip::ui
