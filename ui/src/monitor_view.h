// The Monitor view: live and stored training curves of one run — train and validation loss,
// learning rate, gradient norm, achieved FP4 FLOP fraction and the BF16-probe loss gap. The
// live run's curves come from the worker's LiveMetrics buffer on a 100 ms timer (bulk, never
// per step) and are appended to the charts, so a refresh costs the new steps, not the run's
// length; any other run's curves come from the store, downsampled to 2,000 points per metric.
// On a second page: the gradient noise monitor (METHOD.md 10), a layer × step heatmap of each
// statistics round's ‖∇W‖/‖∇W_q − ∇W‖ at FP4 or FP8 on a log scale, the region below √3 outlined.
#pragma once
#include <QElapsedTimer>
#include <QHash>
#include <QTimer>
#include <QWidget>
#include <memory>
#include <vector>

#include "curve_chart.h"
#include "live_metrics.h"

class QComboBox;
class QLabel;
class QTabWidget;

namespace snip::ui {

class HeatmapWidget;
class Workbench;

class MonitorView : public QWidget {
  Q_OBJECT
 public:
  MonitorView(Workbench* workbench, std::shared_ptr<LiveMetrics> live, QWidget* parent = nullptr);

  void show_run(int64_t run_id);
  int64_t shown_run() const { return run_id_; }
  CurveChart* loss_chart() const { return loss_; }
  QComboBox* run_combo() const { return run_combo_; }
  QString summary_text() const;
  std::vector<CurveChart*> charts() const { return {loss_, lr_, grad_norm_, fp4_, bf16_gap_}; }
  QTabWidget* pages() const { return pages_; }  // "Curves", "Gradient noise"
  HeatmapWidget* noise_heatmap() const { return noise_; }
  QComboBox* noise_precision_combo() const { return noise_precision_; }
  // Points of the loss chart's train curve (what is shown, before display downsampling).
  size_t train_points() const { return loss_->curves().empty() ? 0 : loss_->curves().front().points.size(); }

 public slots:
  void refresh_runs();
  void reload_from_store();
  // Another database was opened: no run is shown until one is chosen (or starts).
  void forget_run();

 private:
  void poll_live();
  void set_empty_curves();
  void reload_noise();  // the heatmap from the store's rounds of the shown run

  Workbench* workbench_;
  std::shared_ptr<LiveMetrics> live_;
  // Whether the live buffer's run belongs to the open database and is still training.
  bool live_run_is_here() const;

  int64_t run_id_ = 0;
  bool live_mode_ = false;
  uint64_t adopted_generation_ = 0;  // the live run adopted last: adopted once, never forced back
  QHash<qlonglong, QString> run_names_;
  size_t live_taken_ = 0;
  QTimer live_timer_;

  QComboBox* run_combo_ = nullptr;
  QLabel* summary_ = nullptr;
  CurveChart* loss_ = nullptr;
  CurveChart* lr_ = nullptr;
  CurveChart* grad_norm_ = nullptr;
  CurveChart* fp4_ = nullptr;
  CurveChart* bf16_gap_ = nullptr;
  QTabWidget* pages_ = nullptr;
  HeatmapWidget* noise_ = nullptr;
  QComboBox* noise_precision_ = nullptr;
  QLabel* noise_summary_ = nullptr;
  QElapsedTimer noise_clock_;  // a live run's rounds are re-read at most every few seconds
};

}  // namespace snip::ui
