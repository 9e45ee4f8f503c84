// A line chart of training curves (loss, learning rate, gradient norm, ...) that stays smooth
// for 100k-step runs: curves are handed over in bulk, the chart redraws on a single-shot
// timer with QXYSeries::replace(), each curve is EMA-smoothed with the raw curve drawn faintly
// behind it, downsampled for display (min/max per bucket keeps spikes), with a log-scale toggle.
#pragma once
#include <QColor>
#include <QPointF>
#include <QString>
#include <QTimer>
#include <QWidget>
#include <vector>

class QChart;
class QChartView;
class QCheckBox;
class QLabel;
class QSlider;
class QLineSeries;
class QAbstractAxis;

namespace snip::ui {

// One named curve: x = step, y = value.
struct Curve {
  QString name;
  std::vector<QPointF> points;
  QColor colour;  // invalid = next colour of the chart's palette
};

// EMA smoothing with bias correction (TensorBoard's rule): s_i = w·s_{i-1} + (1−w)·y_i, divided
// by 1 − w^i so the start is not pulled toward zero. weight in [0, 1).
std::vector<QPointF> smooth_ema(const std::vector<QPointF>& points, double weight);

// At most `max_points` points: the points split into max_points/2 buckets by index and each
// bucket keeps its minimum and maximum in x order, so spikes survive downsampling.
std::vector<QPointF> downsample_minmax(const std::vector<QPointF>& points, int max_points);

class CurveChart : public QWidget {
  Q_OBJECT
 public:
  explicit CurveChart(const QString& title, const QString& y_label, QWidget* parent = nullptr);

  // Replaces every curve; the redraw happens on the refresh timer (never per call).
  void set_curves(std::vector<Curve> curves);
  const std::vector<Curve>& curves() const { return curves_; }

  void set_smoothing(double weight);  // 0 = none
  double smoothing() const { return smoothing_; }
  void set_log_scale(bool on);
  bool log_scale() const { return log_scale_; }
  void set_smoothing_visible(bool visible);
  void set_x_label(const QString& label);

  // Vertical marker (e.g. the current budget); NaN hides it.
  void set_marker_x(double x, const QString& label = {});

  int max_display_points() const { return max_display_points_; }
  // Number of redraws so far (tests check that bulk updates coalesce).
  int redraw_count() const { return redraw_count_; }
  // Redraws now instead of waiting for the timer.
  void redraw_now();

  QChart* chart() const { return chart_; }
  void export_png(const QString& path);
  void export_svg(const QString& path);
  // Curves as CSV: name,x,y per row.
  void export_csv(const QString& path) const;

 signals:
  void redrawn();

 private:
  void schedule_redraw();
  void rebuild_axes();
  QAbstractAxis* make_y_axis();

  QString title_;
  QString y_label_;
  QString x_label_;
  std::vector<Curve> curves_;
  double smoothing_ = 0.6;
  bool log_scale_ = false;
  double marker_x_;
  QString marker_label_;
  int max_display_points_ = 2000;
  int redraw_count_ = 0;
  QTimer redraw_timer_;

  QChart* chart_ = nullptr;
  QChartView* view_ = nullptr;
  QSlider* smoothing_slider_ = nullptr;
  QLabel* smoothing_label_ = nullptr;
  QCheckBox* log_check_ = nullptr;
  QWidget* controls_ = nullptr;
};

}  // namespace snip::ui
