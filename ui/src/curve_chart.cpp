// CurveChart: bulk-updated, timer-refreshed line chart with EMA smoothing and log scale.
#include "curve_chart.h"

#include <QCheckBox>
#include <QFile>
#include <QHBoxLayout>
#include <QLabel>
#include <QPainter>
#include <QPen>
#include <QSlider>
#include <QSvgGenerator>
#include <QTextStream>
#include <QVBoxLayout>
#include <QtCharts/QAreaSeries>
#include <QtCharts/QChart>
#include <QtCharts/QChartView>
#include <QtCharts/QLegend>
#include <QtCharts/QLegendMarker>
#include <QtCharts/QLineSeries>
#include <QtCharts/QLogValueAxis>
#include <QtCharts/QValueAxis>
#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

#include "export_file.h"
#include "snip/atomic_file.h"
#include "snip/error.h"

namespace snip::ui {

namespace {
constexpr int kRedrawDelayMs = 60;  // 40–100 ms: smooth to the eye, bounded redraw cost

// Axis range with a little headroom; for log axes only positive values count.
struct Range {
  double lo = std::numeric_limits<double>::infinity();
  double hi = -std::numeric_limits<double>::infinity();
  void add(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  bool valid() const { return lo <= hi; }
};

// Range widened to multiples of a 1/2/5·10^k step giving 4–6 ticks.
void set_nice_range(QValueAxis* axis, double lo, double hi) {
  if (!(hi > lo)) hi = lo + 1.0;
  const double raw = (hi - lo) / 4.0;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  const double nlo = std::floor(lo / step + 1e-9) * step, nhi = std::ceil(hi / step - 1e-9) * step;
  axis->setRange(nlo, nhi);
  axis->setTickCount(int(std::lround((nhi - nlo) / step)) + 1);
}
}  // namespace

std::vector<QPointF> smooth_ema(const std::vector<QPointF>& points, double weight) {
  if (weight <= 0.0) return points;
  weight = std::min(weight, 0.999);
  std::vector<QPointF> out;
  out.reserve(points.size());
  double s = 0.0;
  double debias = 1.0;  // w^i
  for (const QPointF& p : points) {
    if (!std::isfinite(p.y())) {  // a NaN step does not poison every later point
      out.push_back(p);
      continue;
    }
    s = weight * s + (1.0 - weight) * p.y();
    debias *= weight;
    out.emplace_back(p.x(), s / (1.0 - debias));
  }
  return out;
}

std::vector<QPointF> downsample_minmax(const std::vector<QPointF>& points, int max_points) {
  const size_t n = points.size();
  if (max_points < 4 || n <= size_t(max_points)) return points;
  const size_t buckets = size_t(max_points) / 2;
  std::vector<QPointF> out;
  out.reserve(buckets * 2);
  for (size_t b = 0; b < buckets; ++b) {
    const size_t begin = b * n / buckets;
    const size_t end = (b + 1) * n / buckets;
    if (begin >= end) continue;
    size_t imin = begin, imax = begin;
    for (size_t i = begin + 1; i < end; ++i) {
      if (points[i].y() < points[imin].y()) imin = i;
      if (points[i].y() > points[imax].y()) imax = i;
    }
    out.push_back(points[std::min(imin, imax)]);
    if (imin != imax) out.push_back(points[std::max(imin, imax)]);
  }
  return out;
}

BandPoints replicate_band(const std::vector<std::vector<QPointF>>& replicates, double weight, int max_points) {
  BandPoints band;
  if (replicates.size() < 2) return band;
  size_t n = replicates.front().size();
  for (const auto& r : replicates) n = std::min(n, r.size());
  std::vector<std::vector<QPointF>> smoothed;
  for (const auto& r : replicates) smoothed.push_back(smooth_ema(r, weight));
  const size_t width = std::max<size_t>(1, (n + size_t(std::max(2, max_points)) - 1) / size_t(std::max(2, max_points)));
  for (size_t begin = 0; begin < n; begin += width) {
    double lo = std::numeric_limits<double>::infinity(), hi = -lo;
    for (size_t i = begin; i < std::min(n, begin + width); ++i)
      for (const auto& r : smoothed)
        if (std::isfinite(r[i].y())) lo = std::min(lo, r[i].y()), hi = std::max(hi, r[i].y());
    if (lo > hi) continue;  // every replicate non-finite here: a gap in the band
    const double x = smoothed.front()[begin].x();
    band.lo.emplace_back(x, lo);
    band.hi.emplace_back(x, hi);
  }
  return band;
}

MinMaxDecimator::MinMaxDecimator(int max_points)
    : max_buckets_(std::max<size_t>(2, size_t(std::max(4, max_points)) / 2 / 2 * 2)) {}

void MinMaxDecimator::clear() {
  width_ = 1;
  added_ = 0;
  full_.clear();
  partial_ = Bucket{};
}

void MinMaxDecimator::Bucket::add(const QPointF& p, size_t i) {
  if (count == 0 || p.y() < min.y()) min = p, min_i = i;
  if (count == 0 || p.y() > max.y()) max = p, max_i = i;
  ++count;
}

void MinMaxDecimator::Bucket::merge(const Bucket& later) {
  if (later.count == 0) return;
  if (count == 0 || later.min.y() < min.y()) min = later.min, min_i = later.min_i;
  if (count == 0 || later.max.y() > max.y()) max = later.max, max_i = later.max_i;
  count += later.count;
}

void MinMaxDecimator::add(const QPointF& p) {
  if (!std::isfinite(p.x()) || !std::isfinite(p.y())) return;
  partial_.add(p, added_++);
  if (partial_.count < width_) return;
  full_.push_back(partial_);
  partial_ = Bucket{};
  if (full_.size() < max_buckets_) return;
  // Halve the resolution: merge neighbours (max_buckets_ is even), double the width.
  for (size_t i = 0; i < full_.size() / 2; ++i) {
    Bucket b = full_[2 * i];
    b.merge(full_[2 * i + 1]);
    full_[i] = b;
  }
  full_.resize(full_.size() / 2);
  width_ *= 2;
}

void MinMaxDecimator::append_to(QList<QPointF>& out) const {
  out.reserve(out.size() + qsizetype(2 * (full_.size() + 1)));
  auto emit_bucket = [&out](const Bucket& b) {
    if (b.count == 0) return;
    if (b.min_i == b.max_i) {
      out.push_back(b.min);
    } else if (b.min_i < b.max_i) {
      out.push_back(b.min);
      out.push_back(b.max);
    } else {
      out.push_back(b.max);
      out.push_back(b.min);
    }
  };
  for (const Bucket& b : full_) emit_bucket(b);
  emit_bucket(partial_);
}

CurveChart::CurveChart(const QString& title, const QString& y_label, QWidget* parent)
    : QWidget(parent), title_(title), y_label_(y_label), x_label_(tr("step")), marker_x_(std::nan("")) {
  chart_ = new QChart();
  chart_->setTitle(title);
  chart_->legend()->setAlignment(Qt::AlignBottom);
  chart_->setMargins(QMargins(4, 4, 4, 4));
  chart_->setBackgroundRoundness(0);
  // Follow the platform palette (dark or light) instead of the chart's own theme colours.
  const QPalette pal = palette();
  chart_->setBackgroundBrush(pal.color(QPalette::Base));
  chart_->setTitleBrush(pal.color(QPalette::Text));
  chart_->legend()->setLabelColor(pal.color(QPalette::Text));
  view_ = new QChartView(chart_, this);
  view_->setRenderHint(QPainter::Antialiasing);
  view_->setMinimumHeight(160);

  controls_ = new QWidget(this);
  auto* controls_layout = new QHBoxLayout(controls_);
  controls_layout->setContentsMargins(4, 0, 4, 0);
  smoothing_label_ = new QLabel(controls_);
  smoothing_slider_ = new QSlider(Qt::Horizontal, controls_);
  smoothing_slider_->setRange(0, 99);
  smoothing_slider_->setValue(int(std::lround(smoothing_ * 100)));
  smoothing_slider_->setToolTip(
      tr("EMA smoothing weight; the raw curve stays visible, faint, behind the smoothed one"));
  smoothing_slider_->setMaximumWidth(220);
  log_check_ = new QCheckBox(tr("Log scale"), controls_);
  bands_check_ = new QCheckBox(tr("Replicate bands"), controls_);
  bands_check_->setChecked(bands_visible_);
  bands_check_->setToolTip(
      tr("Shade each curve's range over its replicates (min–max per step of the smoothed replicate curves)"));
  bands_check_->setVisible(false);
  controls_layout->addWidget(new QLabel(tr("Smoothing"), controls_));
  controls_layout->addWidget(smoothing_slider_);
  controls_layout->addWidget(smoothing_label_);
  controls_layout->addStretch();
  controls_layout->addWidget(bands_check_);
  controls_layout->addWidget(log_check_);
  smoothing_label_->setText(QString::number(smoothing_, 'f', 2));

  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);
  layout->addWidget(view_, 1);
  layout->addWidget(controls_);

  connect(smoothing_slider_, &QSlider::valueChanged, this, [this](int v) { set_smoothing(v / 100.0); });
  connect(log_check_, &QCheckBox::toggled, this, [this](bool on) { set_log_scale(on); });
  connect(bands_check_, &QCheckBox::toggled, this, [this](bool on) { set_bands_visible(on); });

  redraw_timer_.setSingleShot(true);
  redraw_timer_.setInterval(kRedrawDelayMs);
  connect(&redraw_timer_, &QTimer::timeout, this, &CurveChart::redraw_now);
  rebuild_axes();
}

void CurveChart::set_curves(std::vector<Curve> curves) {
  curves_ = std::move(curves);
  bool any_replicates = false;
  for (const Curve& c : curves_) any_replicates |= c.replicates.size() >= 2;
  bands_check_->setVisible(any_replicates);
  reset_tracks();
  schedule_redraw();
}

void CurveChart::append_points(const std::vector<std::vector<QPointF>>& new_points) {
  SNIP_ASSERT(new_points.size() <= curves_.size());
  bool any = false;
  for (size_t i = 0; i < new_points.size(); ++i) {
    curves_[i].points.insert(curves_[i].points.end(), new_points[i].begin(), new_points[i].end());
    any |= !new_points[i].empty();
  }
  if (any) schedule_redraw();
}

void CurveChart::reset_tracks() {
  tracks_.clear();
  for (size_t i = 0; i < curves_.size(); ++i)
    tracks_.push_back(Track{0, 0.0, 1.0, MinMaxDecimator(max_display_points_), MinMaxDecimator(max_display_points_)});
}

void CurveChart::set_smoothing(double weight) {
  smoothing_ = std::clamp(weight, 0.0, 0.99);
  smoothing_label_->setText(QString::number(smoothing_, 'f', 2));
  reset_tracks();
  const int slider_value = int(std::lround(smoothing_ * 100));
  if (smoothing_slider_->value() != slider_value) smoothing_slider_->setValue(slider_value);
  schedule_redraw();
}

QString CurveChart::log_scale_text() const {
  return log_check_->text();
}

void CurveChart::set_log_scale(bool on) {
  if (log_check_->isChecked() != on) log_check_->setChecked(on);
  if (log_scale_ == on) return;
  log_scale_ = on;
  reset_tracks();
  rebuild_axes();
  schedule_redraw();
}

void CurveChart::set_smoothing_visible(bool visible) {
  controls_->setVisible(visible);
}

void CurveChart::set_bands_visible(bool visible) {
  if (bands_check_->isChecked() != visible) bands_check_->setChecked(visible);
  if (bands_visible_ == visible) return;
  bands_visible_ = visible;
  schedule_redraw();
}

std::vector<BandPoints> CurveChart::compute_bands() const {
  std::vector<BandPoints> bands(curves_.size());
  if (!bands_visible_) return bands;
  for (size_t i = 0; i < curves_.size(); ++i) {
    bands[i] = replicate_band(curves_[i].replicates, smoothing_, max_display_points_);
    if (log_scale_ && !bands[i].lo.empty() &&
        std::any_of(bands[i].lo.begin(), bands[i].lo.end(), [](const QPointF& p) { return !(p.y() > 0.0); }))
      bands[i] = {};  // a log axis cannot draw down to a non-positive value
  }
  return bands;
}

// The bands are recreated on every redraw (they belong to finished compare arms, not to live
// curves) and drawn translucent over the curves' series, in the curves' colours.
void CurveChart::replace_band_series(const std::vector<BandPoints>& bands) {
  for (QAbstractSeries* s : chart_->series())
    if (s->type() == QAbstractSeries::SeriesTypeArea) {
      chart_->removeSeries(s);
      delete s;
    }
  bands_drawn_ = 0;
  static const QColor kFallback(31, 119, 180);
  const QList<QAbstractAxis*> axes = chart_->axes();
  for (size_t i = 0; i < bands.size(); ++i) {
    if (bands[i].lo.empty()) continue;
    auto* area = new QAreaSeries();
    auto* upper = new QLineSeries(area);
    auto* lower = new QLineSeries(area);
    upper->replace(QList<QPointF>(bands[i].hi.begin(), bands[i].hi.end()));
    lower->replace(QList<QPointF>(bands[i].lo.begin(), bands[i].lo.end()));
    area->setUpperSeries(upper);
    area->setLowerSeries(lower);
    QColor fill = curves_[i].colour.isValid() ? curves_[i].colour : kFallback;
    fill.setAlphaF(0.18);
    area->setBrush(fill);
    area->setPen(Qt::NoPen);
    area->setName(curves_[i].name + tr(" (replicates)"));
    chart_->addSeries(area);
    for (QAbstractAxis* a : axes) area->attachAxis(a);
    chart_->legend()->markers(area).first()->setVisible(false);
    ++bands_drawn_;
  }
}

void CurveChart::set_x_label(const QString& label) {
  x_label_ = label;
  QList<QAbstractAxis*> x_axes = chart_->axes(Qt::Horizontal);
  if (!x_axes.isEmpty()) x_axes.first()->setTitleText(label);
}

void CurveChart::set_marker_x(double x, const QString& label) {
  marker_x_ = x;
  marker_label_ = label;
  schedule_redraw();
}

void CurveChart::schedule_redraw() {
  if (!redraw_timer_.isActive()) redraw_timer_.start();
}

QAbstractAxis* CurveChart::make_y_axis() {
  if (log_scale_) {
    auto* axis = new QLogValueAxis();
    axis->setBase(10.0);
    axis->setLabelFormat("%.3g");
    axis->setMinorTickCount(-1);
    return axis;
  }
  auto* axis = new QValueAxis();
  axis->setLabelFormat("%.4g");
  return axis;
}

void CurveChart::rebuild_axes() {
  for (QAbstractAxis* axis : chart_->axes()) {
    chart_->removeAxis(axis);
    delete axis;
  }
  auto* x_axis = new QValueAxis();
  x_axis->setTitleText(x_label_);
  x_axis->setLabelFormat("%.6g");
  QAbstractAxis* y_axis = make_y_axis();
  y_axis->setTitleText(y_label_);
  const QPalette pal = palette();
  for (QAbstractAxis* axis : {static_cast<QAbstractAxis*>(x_axis), y_axis}) {
    axis->setLabelsBrush(pal.color(QPalette::Text));
    axis->setTitleBrush(pal.color(QPalette::Text));
    axis->setGridLineColor(pal.color(QPalette::Mid));
  }
  chart_->addAxis(x_axis, Qt::AlignBottom);
  chart_->addAxis(y_axis, Qt::AlignLeft);
  for (QAbstractSeries* s : chart_->series()) {
    s->attachAxis(x_axis);
    s->attachAxis(y_axis);
  }
}

// One (raw, smoothed) series pair per curve, plus the marker: recreated only when the set changes.
QList<QAbstractSeries*> CurveChart::curve_series() {
  const size_t wanted = curves_.size() * 2 + 1;
  QList<QAbstractSeries*> series = chart_->series();
  bool same = size_t(series.size()) == wanted;
  for (size_t i = 0; same && i < curves_.size(); ++i) same = series[int(2 * i + 1)]->name() == curves_[i].name;
  if (same) return series;
  chart_->removeAllSeries();
  static const QColor kPalette[] = {QColor(31, 119, 180),  QColor(255, 127, 14),  QColor(44, 160, 44),
                                    QColor(214, 39, 40),   QColor(148, 103, 189), QColor(140, 86, 75),
                                    QColor(227, 119, 194), QColor(23, 190, 207)};
  for (size_t i = 0; i < curves_.size(); ++i) {
    const QColor colour = curves_[i].colour.isValid() ? curves_[i].colour : kPalette[i % 8];
    auto* raw = new QLineSeries();
    auto* smooth = new QLineSeries();
    QColor faint = colour;
    faint.setAlphaF(0.25);
    raw->setPen(QPen(faint, 1.0));
    smooth->setPen(QPen(colour, 2.0));
    smooth->setName(curves_[i].name);
    chart_->addSeries(raw);
    chart_->addSeries(smooth);
    chart_->legend()->markers(raw).first()->setVisible(false);
  }
  auto* marker = new QLineSeries();
  marker->setName(QStringLiteral("marker"));
  QPen pen(palette().color(QPalette::Text), 1.5, Qt::DashLine);
  marker->setPen(pen);
  chart_->addSeries(marker);
  chart_->legend()->markers(marker).first()->setVisible(false);
  QList<QAbstractAxis*> axes = chart_->axes();
  for (QAbstractSeries* s : chart_->series())
    for (QAbstractAxis* a : axes) s->attachAxis(a);
  return chart_->series();
}

// Feeds curve i's points not seen yet into its EMA and decimators (O(new points)) and fills
// raw and smooth with what the chart shows.
void CurveChart::feed_track(size_t i, QList<QPointF>& raw, QList<QPointF>& smooth) {
  const bool smoothing_on = smoothing_ > 0.0;
  const double w = std::min(smoothing_, 0.999);
  Track& t = tracks_[i];
  const std::vector<QPointF>& pts = curves_[i].points;
  for (; t.fed < pts.size(); ++t.fed) {
    const QPointF& p = pts[t.fed];
    if (log_scale_ && !(p.y() > 0.0)) {
      ++t.not_drawn;
      continue;
    }
    t.raw.add(p);
    if (!smoothing_on || !std::isfinite(p.y())) continue;
    // smooth_ema's recurrence, continued from the last point.
    t.ema = w * t.ema + (1.0 - w) * p.y();
    t.debias *= w;
    t.smooth.add(QPointF(p.x(), t.ema / (1.0 - t.debias)));
  }
  raw.clear();
  smooth.clear();
  t.raw.append_to(raw);
  if (smoothing_on) t.smooth.append_to(smooth);
}

namespace {

// The vertical dashed marker line from y_lo to y_hi at x, hidden when x is not finite.
void place_marker(QLineSeries* marker, double x, double y_lo, double y_hi) {
  if (std::isfinite(x)) {
    marker->replace(QList<QPointF>{{x, y_lo}, {x, y_hi}});
    marker->setVisible(true);
  } else {
    marker->clear();
    marker->setVisible(false);
  }
}

// Round tick values (0, 100, 200 rather than 1, 150.75, 300.5) on the x axis and the y axis.
void set_axis_ranges(QChart* chart, const Range& xr, double y_lo, double y_hi) {
  QList<QAbstractAxis*> x_axes = chart->axes(Qt::Horizontal);
  QList<QAbstractAxis*> y_axes = chart->axes(Qt::Vertical);
  if (!x_axes.isEmpty()) {
    if (auto* axis = qobject_cast<QValueAxis*>(x_axes.first()))
      set_nice_range(axis, xr.lo, xr.hi > xr.lo ? xr.hi : xr.lo + 1.0);
  }
  if (y_axes.isEmpty()) return;
  if (auto* axis = qobject_cast<QValueAxis*>(y_axes.first())) {
    set_nice_range(axis, y_lo, y_hi);
  } else if (auto* log_axis = qobject_cast<QLogValueAxis*>(y_axes.first())) {
    // A log axis labels the powers of its base inside the range: base 10 over a decade or more,
    // else a base that puts about four labelled ticks in the range (a loss from 3 to 6 showed
    // no label at all with base 10).
    const double ratio = y_hi / y_lo;
    const bool decades = ratio >= 10.0;
    log_axis->setBase(decades ? 10.0 : std::pow(ratio, 0.25));
    log_axis->setMinorTickCount(decades ? -1 : 0);
    log_axis->setRange(y_lo, y_hi);
  } else {
    y_axes.first()->setRange(y_lo, y_hi);
  }
}

}  // namespace

void CurveChart::redraw_now() {
  redraw_timer_.stop();
  ++redraw_count_;
  replace_band_series({});  // the curves' series below are indexed without the bands
  const bool smoothing_on = smoothing_ > 0.0;
  const QList<QAbstractSeries*> series = curve_series();
  if (tracks_.size() != curves_.size()) reset_tracks();
  Range xr, yr;
  QList<QPointF> raw, smooth;
  for (size_t i = 0; i < curves_.size(); ++i) {
    feed_track(i, raw, smooth);
    for (const QPointF& p : raw) {
      xr.add(p.x());
      yr.add(p.y());
    }
    auto* raw_series = static_cast<QLineSeries*>(series[int(2 * i)]);
    auto* smooth_series = static_cast<QLineSeries*>(series[int(2 * i + 1)]);
    raw_series->replace(raw);
    raw_series->setVisible(smoothing_on);
    smooth_series->replace(smoothing_on ? smooth : raw);
  }
  points_not_drawn_ = 0;
  for (const Track& t : tracks_) points_not_drawn_ += t.not_drawn;
  log_check_->setText(points_not_drawn_ > 0 ? tr("Log scale (%n point(s) ≤ 0 not drawn)", "",
                                                 int(std::min<size_t>(points_not_drawn_, INT_MAX)))
                                            : tr("Log scale"));
  log_check_->setToolTip(points_not_drawn_ > 0 ? tr("A log axis cannot show values at or below 0; turn it off to see "
                                                    "every point")
                                               : QString());
  const std::vector<BandPoints> bands = compute_bands();
  for (const BandPoints& b : bands) {
    for (const QPointF& p : b.lo) yr.add(p.y());
    for (const QPointF& p : b.hi) yr.add(p.y());
  }
  if (!xr.valid()) xr = Range{0.0, 1.0};
  if (!yr.valid()) yr = log_scale_ ? Range{0.1, 1.0} : Range{0.0, 1.0};
  if (std::isfinite(marker_x_)) xr.add(marker_x_);
  double y_lo = yr.lo, y_hi = yr.hi;
  if (log_scale_) {
    y_lo /= 1.2;
    y_hi *= 1.2;
  } else {
    const double pad = y_hi > y_lo ? 0.05 * (y_hi - y_lo) : std::max(1e-12, 0.05 * std::abs(y_hi) + 1e-3);
    y_lo -= pad;
    y_hi += pad;
  }
  place_marker(static_cast<QLineSeries*>(series.back()), marker_x_, y_lo, y_hi);
  if (!log_scale_ && yr.lo >= 0.0 && y_lo < 0.0) y_lo = 0.0;  // a non-negative quantity keeps its zero
  set_axis_ranges(chart_, xr, y_lo, y_hi);
  replace_band_series(bands);
  bool any_points = false;
  for (const Curve& c : curves_) any_points |= !c.points.empty();
  chart_->setTitle(any_points ? title_ : title_ + tr(" — no data"));
  emit redrawn();
}

void CurveChart::export_png(const QString& path) {
  redraw_now();
  write_png_file(view_->grab(), path);
}

void CurveChart::export_svg(const QString& path) {
  redraw_now();
  write_svg_file(
      view_->size(), title_, [&](QPainter& painter) { view_->render(&painter); }, path);
}

void CurveChart::export_csv(const QString& path) const {
  QString text;
  QTextStream out(&text);
  out << "curve,step,value\n";
  for (const Curve& c : curves_)
    for (const QPointF& p : c.points)
      out << c.name << ',' << QString::number(p.x(), 'g', 17) << ',' << QString::number(p.y(), 'g', 9) << '\n';
  out.flush();
  snip::write_file_atomic(path.toStdString(), text.toStdString());
}

}  // namespace snip::ui
