// A line chart of training curves (loss, learning rate, gradient norm, ...) that stays smooth
// for 100k-step runs: curves are handed over in bulk, the chart redraws on a single-shot
// timer with QXYSeries::replace(), each curve is EMA-smoothed with the raw curve drawn faintly
// behind it, downsampled for display (min/max per bucket keeps spikes), with a log-scale toggle.
// A live run appends: smoothing and downsampling then continue from where they stopped, so a
// redraw costs the new points plus the ≤ 2,000 shown ones, not the run's length.
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
class QAbstractSeries;

namespace snip::ui {

// One named curve: x = step, y = value.
struct Curve {
  QString name;
  std::vector<QPointF> points;
  QColor colour;  // invalid = next colour of the chart's palette
  // Repeated measurements of the same curve (a compare arm's replicates, same x): drawn as a
  // translucent min–max band around the curve when bands are shown.
  std::vector<std::vector<QPointF>> replicates = {};
};

// The band of a curve's replicates: per x (the replicates share their x values, index by index)
// the minimum and maximum over the replicates of their EMA-smoothed values (smooth_ema with
// `weight`; the mean curve drawn over it is smoothed the same way), at most max_points points
// (consecutive points merged, keeping the extremes). Empty with fewer than 2 replicates.
struct BandPoints {
  std::vector<QPointF> lo, hi;
};
BandPoints replicate_band(const std::vector<std::vector<QPointF>>& replicates, double weight, int max_points);

// EMA smoothing with bias correction (TensorBoard's rule): s_i = w·s_{i-1} + (1−w)·y_i, divided
// by 1 − w^i so the start is not pulled toward zero. weight in [0, 1).
std::vector<QPointF> smooth_ema(const std::vector<QPointF>& points, double weight);

// At most `max_points` points: the points split into max_points/2 buckets by index and each
// bucket keeps its minimum and maximum in x order, so spikes survive downsampling.
std::vector<QPointF> downsample_minmax(const std::vector<QPointF>& points, int max_points);

// Min/max downsampling that takes points as they arrive: buckets of `width` consecutive points
// keep their minimum and maximum; when max_points/2 buckets are full, neighbours merge and the
// width doubles. add() is O(1) amortised and the output holds at most max_points + 2 points,
// in x order, with every spike. Non-finite values are skipped (they cannot be drawn).
class MinMaxDecimator {
 public:
  explicit MinMaxDecimator(int max_points = 2000);
  void clear();
  void add(const QPointF& p);
  void append_to(QList<QPointF>& out) const;

 private:
  struct Bucket {
    QPointF min, max;
    size_t min_i = 0, max_i = 0, count = 0;
    void add(const QPointF& p, size_t i);
    void merge(const Bucket& later);
  };
  size_t max_buckets_;
  size_t width_ = 1;
  size_t added_ = 0;
  std::vector<Bucket> full_;
  Bucket partial_;
};

class CurveChart : public QWidget {
  Q_OBJECT
 public:
  explicit CurveChart(const QString& title, const QString& y_label, QWidget* parent = nullptr);

  // Replaces every curve; the redraw happens on the refresh timer (never per call).
  void set_curves(std::vector<Curve> curves);
  // Appends points to the existing curves (new_points[i] to curve i, in step order): a live
  // run's bulk update. The redraw's cost does not grow with the curves' length.
  void append_points(const std::vector<std::vector<QPointF>>& new_points);
  const std::vector<Curve>& curves() const { return curves_; }

  void set_smoothing(double weight);  // 0 = none
  double smoothing() const { return smoothing_; }
  void set_log_scale(bool on);
  bool log_scale() const { return log_scale_; }
  // Points a log axis cannot draw (≤ 0: a gap below BF16's loss, say) at the last redraw; the
  // "Log scale" box says how many, so none is dropped without a word.
  size_t points_not_drawn() const { return points_not_drawn_; }
  QString log_scale_text() const;
  void set_smoothing_visible(bool visible);
  void set_x_label(const QString& label);
  // Replicate bands (Curve::replicates) on or off; the "Replicate bands" box shows while a curve
  // has replicates.
  void set_bands_visible(bool visible);
  // Bands drawn at the last redraw (tests).
  int bands_drawn() const { return bands_drawn_; }

  // Vertical marker (e.g. the current budget); NaN hides it.
  void set_marker_x(double x, const QString& label = {});

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
  void reset_tracks();
  QAbstractAxis* make_y_axis();
  // The band of every curve with replicates (empty entries for the others), and their series.
  std::vector<BandPoints> compute_bands() const;
  void replace_band_series(const std::vector<BandPoints>& bands);
  // redraw_now's steps: the series (created when the curve set changes) and one curve's feed.
  QList<QAbstractSeries*> curve_series();
  void feed_track(size_t i, QList<QPointF>& raw, QList<QPointF>& smooth);

  QString title_;
  QString y_label_;
  QString x_label_;
  std::vector<Curve> curves_;
  double smoothing_ = 0.6;
  bool log_scale_ = false;
  bool bands_visible_ = true;
  int bands_drawn_ = 0;
  double marker_x_;
  QString marker_label_;
  int max_display_points_ = 2000;
  int redraw_count_ = 0;
  size_t points_not_drawn_ = 0;
  QTimer redraw_timer_;
  // Per curve: how many points the display state has consumed, the EMA state and the two
  // decimators (raw and smoothed). Reset when curves are replaced or smoothing/log scale change.
  struct Track {
    size_t fed = 0;
    double ema = 0.0, debias = 1.0;
    MinMaxDecimator raw, smooth;
    size_t not_drawn = 0;  // points ≤ 0 skipped on a log axis
  };
  std::vector<Track> tracks_;

  QChart* chart_ = nullptr;
  QChartView* view_ = nullptr;
  QSlider* smoothing_slider_ = nullptr;
  QLabel* smoothing_label_ = nullptr;
  QCheckBox* log_check_ = nullptr;
  QCheckBox* bands_check_ = nullptr;
  QWidget* controls_ = nullptr;
};

}  // namespace snip::ui
