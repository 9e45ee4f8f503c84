// The Plan view: an FP4-FLOP budget slider and spin box, method selector, λ, ties, per-role,
// BF16 and pin options. Every change re-solves the ILP (snip::make_plan) on a background
// thread, latest request wins, and redraws the plan grid with the objective, predicted ΔL/ΔW
// and achieved fraction. Beside it: the budget-vs-quality tradeoff curves of every method
// (snip::run_sweep) with the current budget marked, and the stored validation correlations.
#pragma once
#include <QElapsedTimer>
#include <QFutureWatcher>
#include <QWidget>
#include <map>
#include <memory>
#include <optional>

#include "snip/plan_export.h"
#include "snip/planner.h"
#include "snip/sweep.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QFormLayout;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;
class QSplitter;

namespace snip::ui {

class CurveChart;
class PlanGrid;
class Workbench;

// One solve: the result or the error that prevented it.
struct SolveOutcome {
  std::optional<snip::PlanResult> result;
  QString error;
  int generation = 0;
};

class PlanView : public QWidget {
  Q_OBJECT
 public:
  PlanView(Workbench* workbench, QWidget* parent = nullptr);

  // Controls (tests and the bench drive these like a user would).
  QSlider* budget_slider() const { return budget_slider_; }
  QDoubleSpinBox* budget_spin() const { return budget_spin_; }
  QDoubleSpinBox* lambda_spin() const { return lambda_spin_; }
  QCheckBox* ties_check() const { return ties_check_; }
  QSpinBox* stages_spin() const { return stages_spin_; }
  QSpinBox* pipeline_spin() const { return pipeline_spin_; }
  QSpinBox* virtual_stages_spin() const { return virtual_spin_; }
  PlanGrid* grid() const { return grid_; }
  QString notes_text() const;  // the notes under the plan (budget, noisy layers)
  CurveChart* tradeoff_chart() const { return tradeoff_; }

  // Pins: HF module name -> precision; clicking a grid cell cycles none → FP8 → FP4 → none.
  void set_pin(const std::string& layer, std::optional<snip::Precision> p);
  const std::map<std::string, snip::Precision>& pins() const { return pins_; }
  // What clicking a layer does (plan grid or heatmap): none → FP8 → FP4 → none.
  void cycle_pin(int layer);

  const std::optional<snip::PlanResult>& current() const { return current_; }
  QString last_error() const { return last_error_; }
  // Milliseconds from the control change to the redrawn grid of the last shown plan.
  double last_latency_ms() const { return last_latency_ms_; }
  bool solving() const { return solve_running_; }
  // A trade-off sweep is running or queued (its curves are not drawn yet).
  bool sweeping() const { return sweep_watcher_.isRunning() || sweep_dirty_; }

  snip::PlanRequest request() const;
  void export_plan_json(const QString& path);
  void export_plan_csv(const QString& path);
  // The plan in a GPU training stack's format (snip/plan_export.h); returns its warnings (layers
  // the plan leaves out); throws snip::Error saying why a plan cannot be expressed.
  std::vector<std::string> export_plan_for(snip::PlanStack stack, const QString& path);
  // Stores the current plan; returns its id.
  int64_t save_plan_to_store();

 signals:
  void plan_shown();           // a new plan is drawn
  void solve_failed(QString);  // the request had no plan (infeasible, no statistics, ...)
  void sweep_shown();

 public slots:
  void resolve();        // re-solve with the current controls
  void rebuild_input();  // the planning source or λ changed: new costs, new sweep, re-solve

 private:
  // The constructor's parts: the request box, the grid and chart, the connections.
  QGroupBox* make_request_box();
  void add_pipeline_rows(QGroupBox* controls, QFormLayout* form);
  QSplitter* make_grid_and_chart();
  void connect_signals();
  void start_solve();
  void solve_finished();
  void start_sweep();
  void sweep_finished();
  void show_result(const snip::PlanResult& r);
  void refresh_validation();
  void find_noisy_layers();  // noisy_layers_ from the planning source's round, flagged in the grid

  Workbench* workbench_;
  std::shared_ptr<const snip::PlannerInput> input_;
  int num_blocks_ = 0;
  std::map<int, double> noisy_layers_;
  std::map<std::string, snip::Precision> pins_;
  std::optional<snip::PlanResult> current_;
  QString last_error_;

  // Latest request wins: while one solve runs, further changes only mark it dirty.
  QFutureWatcher<SolveOutcome> solve_watcher_;
  bool solve_running_ = false;
  bool solve_dirty_ = false;
  int generation_ = 0;
  QElapsedTimer request_clock_;
  bool request_clock_valid_ = false;
  double last_latency_ms_ = 0;
  QFutureWatcher<std::vector<snip::SweepPoint>> sweep_watcher_;
  bool sweep_dirty_ = false;

  QSlider* budget_slider_ = nullptr;
  QDoubleSpinBox* budget_spin_ = nullptr;
  QComboBox* method_combo_ = nullptr;
  QDoubleSpinBox* lambda_spin_ = nullptr;
  QCheckBox* ties_check_ = nullptr;
  QCheckBox* per_role_check_ = nullptr;
  QCheckBox* bf16_check_ = nullptr;
  QSpinBox* stages_spin_ = nullptr;
  QSpinBox* pipeline_spin_ = nullptr;  // Megatron's --pipeline-model-parallel-size
  QSpinBox* virtual_spin_ = nullptr;   // ... and --num-virtual-stages-per-pipeline-rank
  QSpinBox* seed_spin_ = nullptr;
  QPushButton* clear_pins_button_ = nullptr;
  QLabel* source_label_ = nullptr;
  QLabel* result_label_ = nullptr;
  QLabel* notes_label_ = nullptr;
  QLabel* validation_label_ = nullptr;
  PlanGrid* grid_ = nullptr;
  CurveChart* tradeoff_ = nullptr;
};

}  // namespace snip::ui
