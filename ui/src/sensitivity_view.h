// The Sensitivity view: a per-layer divergence heatmap (rows = blocks, columns = q/k/v/o/gate/
// up/down) of ΔL, ΔW, Q, or the absolute / relative quantization error, for FP8, FP4 or the
// FP4 − FP8 difference the ILP trades on, from any statistics round; a step slider moves
// through the rounds of a run, and a layer × step mode shows all of them at once. The numbers
// come from snip::estimate_divergences on the stored raw statistics (imported costs show cost).
#pragma once
#include <QWidget>
#include <optional>
#include <vector>

#include "snip/defaults.h"
#include "snip/estimator.h"
#include "snip/store_types.h"

class QComboBox;
class QLabel;
class QSlider;

namespace snip::ui {

class HeatmapWidget;
class Workbench;
struct HeatmapData;
struct PlanningSource;

enum class SensitivityMetric { dl, dw, q, min_err, min_rel_err };

class SensitivityView : public QWidget {
  Q_OBJECT
 public:
  SensitivityView(Workbench* workbench, QWidget* parent = nullptr);
  HeatmapWidget* heatmap() const { return heatmap_; }
  QComboBox* round_combo() const { return round_combo_; }
  QComboBox* mode_combo() const { return mode_combo_; }
  QSlider* step_slider() const { return step_slider_; }
  void set_lambda(double lambda);

 signals:
  void layer_clicked(int layer);  // block-view cell clicked (the main window pins it in the Plan view)

 public slots:
  void refresh_rounds();
  void redraw();

 private:
  double value_of(const snip::LayerEstimate& e) const;
  // redraw's three sources: the plan timeline of the round's run (mode 2), the estimates of a
  // statistics round (blocks × types, or layer × step), imported costs.
  void fill_plan_timeline(HeatmapData& data, const PlanningSource& src);
  void fill_estimates(HeatmapData& data, const PlanningSource& src);
  void fill_costs(HeatmapData& data, const PlanningSource& src, bool diff);
  QString detail(int layer) const;

  Workbench* workbench_;
  std::vector<snip::StatsRoundInfo> rounds_;      // all rounds in the store
  std::vector<snip::StatsRoundInfo> run_rounds_;  // rounds of the selected round's run, by step
  std::optional<snip::Estimates> estimates_;      // of the shown round
  double lambda_ = snip::defaults::kLambda;

  QComboBox* round_combo_ = nullptr;
  QComboBox* metric_combo_ = nullptr;
  QComboBox* precision_combo_ = nullptr;
  QComboBox* mode_combo_ = nullptr;
  QComboBox* scale_combo_ = nullptr;
  QSlider* step_slider_ = nullptr;
  QLabel* step_label_ = nullptr;
  QLabel* info_label_ = nullptr;
  HeatmapWidget* heatmap_ = nullptr;
};

}  // namespace snip::ui
