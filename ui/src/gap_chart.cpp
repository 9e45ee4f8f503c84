// GapChart: a forest plot of the compare arms' gaps to BF16 with 95% error bars.
#include "gap_chart.h"

#include <QPainter>
#include <QPainterPath>
#include <algorithm>
#include <cmath>

namespace snip::ui {

namespace {
const QColor kSnipShade(31, 119, 180, 45);  // SNIP's train interval, in the legend and the plot

// The interval's ends, or its mean twice without one (K = 1, or a run's single value).
std::pair<double, double> ends(const snip::Interval& iv) {
  if (iv.has_interval() && std::isfinite(iv.ci95)) return {iv.lo(), iv.hi()};
  return {iv.mean, iv.mean};
}
// Ticks every 1/2/2.5/5·10^k giving 3–6 labels over [lo, hi].
std::vector<double> nice_ticks(double lo, double hi) {
  const double raw = (hi - lo) / 4.0;
  if (!(raw > 0) || !std::isfinite(raw)) return {lo};
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + 1e-12; t += step)
    ticks.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return ticks;
}
}  // namespace

GapChart::GapChart(QWidget* parent) : QWidget(parent) {
  setToolTip(
      tr("Each arm's loss gap to uniform BF16: the point is the mean over the replicates, the bar its 95% "
         "Student-t interval (filled: train, hollow: validation). Shaded: SNIP's train interval; the line: "
         "0 (BF16)."));
}

void GapChart::set_bars(std::vector<GapBar> bars) {
  bars_ = std::move(bars);
  double lo = 0, hi = 0;  // 0 (BF16) is always in view
  for (const GapBar& b : bars_)
    for (const snip::Interval* iv : {&b.train, &b.val}) {
      const auto [a, z] = ends(*iv);
      if (std::isfinite(a)) lo = std::min(lo, a);
      if (std::isfinite(z)) hi = std::max(hi, z);
    }
  if (!(hi > lo)) hi = lo + 1e-3;
  const double pad = 0.06 * (hi - lo);
  x_min_ = lo - pad;
  x_max_ = hi + pad;
  update();
}

QString GapChart::row_label(size_t i) const {
  const GapBar& b = bars_.at(i);
  return b.incomplete() ? QStringLiteral("%1 %2/%3").arg(b.label).arg(b.finished).arg(b.asked) : b.label;
}

int GapChart::label_width() const {
  const QFontMetrics fm(font());
  int w = 0;
  for (size_t i = 0; i < bars_.size(); ++i) w = std::max(w, fm.horizontalAdvance(row_label(i)) + 18);
  return std::min(w, width() * 2 / 5);
}

GapChart::Legend GapChart::legend() const {
  const QFontMetrics fm(font());
  const int fixed = 16 + fm.horizontalAdvance(tr("train")) + 10 + 16 + fm.horizontalAdvance(tr("val")) + 10 + 18;
  Legend l{0, 0, tr("SNIP (train)")};
  if (fixed + fm.horizontalAdvance(l.snip_label) > width() - 8) l.snip_label = tr("SNIP");
  const int total = fixed + fm.horizontalAdvance(l.snip_label);
  l.left = std::max(4, std::min(label_width() + 4, width() - total - 4));
  l.right = l.left + total;
  return l;
}

QString GapChart::title() const {
  QFont bold = font();
  bold.setBold(true);
  const QString full = tr("Gap to BF16, mean ± 95% interval");
  return QFontMetrics(bold).horizontalAdvance(full) <= width() - 4 ? full : tr("Gap to BF16 (± 95%)");
}

double GapChart::x_at(const QRect& plot, double v) const {
  return plot.left() + (v - x_min_) / (x_max_ - x_min_) * plot.width();
}

// The legend at legend_y: train (filled point), val (hollow point), SNIP's interval (shade).
void GapChart::draw_legend(QPainter& p, int legend_y) const {
  const QFontMetrics fm(font());
  const int line = fm.height();
  const Legend legend_box = legend();
  int lx = legend_box.left;
  p.setBrush(palette().color(QPalette::Text));
  p.drawEllipse(QPointF(lx + 4, legend_y + line / 2.0), 3.5, 3.5);
  p.drawText(QPoint(lx + 12, legend_y + fm.ascent()), tr("train"));
  lx += 16 + fm.horizontalAdvance(tr("train")) + 10;
  p.setBrush(Qt::NoBrush);
  p.drawEllipse(QPointF(lx + 4, legend_y + line / 2.0), 3.5, 3.5);
  p.drawText(QPoint(lx + 12, legend_y + fm.ascent()), tr("val"));
  lx += 16 + fm.horizontalAdvance(tr("val")) + 10;
  p.fillRect(QRectF(lx, legend_y + 2, 14, line - 4), kSnipShade);
  p.drawText(QPoint(lx + 18, legend_y + fm.ascent()), legend_box.snip_label);
}

// Grid, ticks, 0 and SNIP's interval.
void GapChart::draw_grid(QPainter& p, const QRect& plot) const {
  const QPalette pal = palette();
  const QColor ink = pal.color(QPalette::Text);
  const int line = QFontMetrics(font()).height();
  p.setPen(QPen(pal.color(QPalette::Mid), 1));
  p.drawRect(plot);
  for (double t : nice_ticks(x_min_, x_max_)) {
    const double x = x_at(plot, t);
    p.setPen(QPen(pal.color(QPalette::Midlight), 1, Qt::DotLine));
    p.drawLine(QPointF(x, plot.top()), QPointF(x, plot.bottom()));
    p.setPen(ink);
    const QString label = QString::number(t, 'g', 3);
    p.drawText(QRectF(x - 40, plot.bottom() + 2, 80, line), Qt::AlignHCenter, label);
  }
  for (const GapBar& b : bars_)
    if (b.reference) {
      const auto [a, z] = ends(b.train);
      if (std::isfinite(a) && std::isfinite(z))
        p.fillRect(QRectF(x_at(plot, a), plot.top(), std::max(1.0, x_at(plot, z) - x_at(plot, a)), plot.height()),
                   kSnipShade);
    }
  p.setPen(QPen(ink, 1.2));
  p.drawLine(QPointF(x_at(plot, 0), plot.top()), QPointF(x_at(plot, 0), plot.bottom()));
}

// Arm i's row: label, train bar (filled point), val bar (hollow point) just below it.
void GapChart::draw_row(QPainter& p, const QRect& plot, size_t i, int label_w) const {
  const QPalette pal = palette();
  const QFontMetrics fm(font());
  const int line = fm.height();
  const double row_h = double(plot.height()) / double(bars_.size());
  const GapBar& b = bars_[i];
  const double y = plot.top() + (double(i) + 0.5) * row_h;
  p.setPen(pal.color(QPalette::Text));
  QFont f = font();
  f.setBold(b.reference);
  p.setFont(f);
  // An incomplete arm: its label ends in "k/K" (the count is kept whole when the name is cut).
  const QString count = b.incomplete() ? QStringLiteral(" %1/%2").arg(b.finished).arg(b.asked) : QString();
  p.drawText(QRectF(2, y - line / 2.0, label_w - 4, line), Qt::AlignRight | Qt::AlignVCenter,
             fm.elidedText(b.label, Qt::ElideRight, label_w - 4 - fm.horizontalAdvance(count)) + count);
  const double off = std::min(3.0, row_h / 5.0);
  for (int which = 0; which < 2; ++which) {
    const snip::Interval& iv = which == 0 ? b.train : b.val;
    if (!std::isfinite(iv.mean)) continue;
    const double yy = y + (which == 0 ? -off : off);
    const auto [a, z] = ends(iv);
    p.setPen(QPen(b.colour, 1.5, b.incomplete() ? Qt::DashLine : Qt::SolidLine));
    p.drawLine(QPointF(x_at(plot, a), yy), QPointF(x_at(plot, z), yy));
    if (z > a) {
      p.drawLine(QPointF(x_at(plot, a), yy - 2.5), QPointF(x_at(plot, a), yy + 2.5));
      p.drawLine(QPointF(x_at(plot, z), yy - 2.5), QPointF(x_at(plot, z), yy + 2.5));
    }
    p.setBrush(which == 0 ? QBrush(b.colour) : QBrush(pal.color(QPalette::Base)));
    p.drawEllipse(QPointF(x_at(plot, iv.mean), yy), 3.2, 3.2);
    p.setBrush(Qt::NoBrush);
  }
}

void GapChart::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const QPalette pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  const QFontMetrics fm(font());
  const int line = fm.height();
  p.setPen(pal.color(QPalette::Text));
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.drawText(QRect(0, 2, width(), line), Qt::AlignHCenter, title());
  p.setFont(font());
  if (bars_.empty()) {
    p.drawText(rect(), Qt::AlignCenter, tr("No compare experiment checked"));
    return;
  }
  // Layout: title, legend, rows, axis labels.
  const int legend_y = 4 + line;
  const int label_w = label_width();
  const QRect plot(label_w + 4, legend_y + line + 4, std::max(10, width() - label_w - 14),
                   std::max(10, height() - (legend_y + line + 4) - line - 8));
  draw_legend(p, legend_y);
  draw_grid(p, plot);
  for (size_t i = 0; i < bars_.size(); ++i) draw_row(p, plot, i, label_w);
}

}  // namespace snip::ui
