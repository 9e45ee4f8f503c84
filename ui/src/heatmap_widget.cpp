// HeatmapWidget: painted grid with a viridis colour scale, tooltips and click-to-pin.
#include "heatmap_widget.h"

#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "snip/layers.h"

namespace snip::ui {

QStringList layer_short_labels(int layers) {
  QStringList out;
  for (int l = 0; l < layers; ++l)
    out << QStringLiteral("%1.%2")
               .arg(l / snip::kLayersPerBlock)
               .arg(QString::fromLatin1(
                   snip::layer_type_short_name(snip::kAllLayerTypes[size_t(l % snip::kLayersPerBlock)])));
  return out;
}

QColor viridis(double t) {
  // 9 control points of matplotlib's viridis, linearly interpolated.
  static const double kStops[9][3] = {{68, 1, 84},    {71, 44, 122}, {59, 81, 139},  {44, 113, 142}, {33, 144, 141},
                                      {39, 173, 129}, {92, 200, 99}, {170, 220, 50}, {253, 231, 37}};
  if (!std::isfinite(t)) t = 0.0;
  t = std::clamp(t, 0.0, 1.0) * 8.0;
  const int i = std::min(7, int(t));
  const double f = t - i;
  return QColor::fromRgbF(float((kStops[i][0] * (1 - f) + kStops[i + 1][0] * f) / 255.0),
                          float((kStops[i][1] * (1 - f) + kStops[i + 1][1] * f) / 255.0),
                          float((kStops[i][2] * (1 - f) + kStops[i + 1][2] * f) / 255.0));
}

QColor diverging_colour(double t) {
  static const double kStops[7][3] = {{33, 102, 172},  {103, 169, 207}, {209, 229, 240}, {247, 247, 247},
                                      {253, 219, 199}, {239, 138, 98},  {178, 24, 43}};
  if (!std::isfinite(t)) t = 0.5;
  t = std::clamp(t, 0.0, 1.0) * 6.0;
  const int i = std::min(5, int(t));
  const double f = t - i;
  return QColor::fromRgbF(float((kStops[i][0] * (1 - f) + kStops[i + 1][0] * f) / 255.0),
                          float((kStops[i][1] * (1 - f) + kStops[i + 1][1] * f) / 255.0),
                          float((kStops[i][2] * (1 - f) + kStops[i + 1][2] * f) / 255.0));
}

namespace {
// Symmetric log: |v| below max·10⁻³ is nearly linear, above it logarithmic (three decades shown).
constexpr double kSymlogDecades = 1e-3;
}  // namespace

HeatmapWidget::HeatmapWidget(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);  // reachable with Tab; arrows move the selection
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void HeatmapWidget::set_data(HeatmapData data) {
  data_ = std::move(data);
  // A signed quantity (or any negative value, which a log scale cannot show) gets the diverging
  // scale: symmetric around 0, so the sign reads from the hue and one colour means one value.
  diverging_ = data_.diverging;
  max_abs_ = 0.0;
  for (double v : data_.values)
    if (std::isfinite(v)) {
      diverging_ = diverging_ || v < 0;
      max_abs_ = std::max(max_abs_, std::fabs(v));
    }
  if (!(max_abs_ > 0)) max_abs_ = 1.0;
  // Colour range from the finite values (log space when asked).
  lo_ = std::numeric_limits<double>::infinity();
  hi_ = -std::numeric_limits<double>::infinity();
  for (double v : data_.values) {
    if (!std::isfinite(v)) continue;
    if (data_.log_colour) {
      if (v <= 0) continue;
      v = std::log10(v);
    }
    lo_ = std::min(lo_, v);
    hi_ = std::max(hi_, v);
  }
  if (!(lo_ <= hi_)) lo_ = 0.0, hi_ = 1.0;
  if (hi_ == lo_) hi_ = lo_ + 1.0;
  hover_ = -1;
  if (selected_ >= data_.rows * data_.cols) selected_ = -1;
  update();
}

double HeatmapWidget::normalized(double v) const {
  if (!std::isfinite(v)) return std::nan("");
  if (diverging_) {
    if (!data_.log_colour) return 0.5 + 0.5 * v / max_abs_;
    const double lt = kSymlogDecades * max_abs_;
    const double f = std::log10(1.0 + std::fabs(v) / lt) / std::log10(1.0 + max_abs_ / lt);
    return 0.5 + 0.5 * std::copysign(f, v);
  }
  if (data_.log_colour) v = v > 0 ? std::log10(v) : lo_;
  return (v - lo_) / (hi_ - lo_);
}

double HeatmapWidget::value_at(double t) const {
  if (diverging_) {
    const double f = 2.0 * t - 1.0;
    if (!data_.log_colour) return f * max_abs_;
    const double lt = kSymlogDecades * max_abs_;
    return std::copysign(lt * (std::pow(1.0 + max_abs_ / lt, std::fabs(f)) - 1.0), f);
  }
  return data_.log_colour ? std::pow(10.0, lo_ + t * (hi_ - lo_)) : lo_ + t * (hi_ - lo_);
}

QString HeatmapWidget::scale_caption() const {
  if (diverging_) return data_.log_colour ? tr("diverging · log") : tr("diverging · linear");
  return data_.log_colour ? tr("log") : tr("linear");
}

QColor HeatmapWidget::colour_of(double value) const {
  const double t = normalized(value);
  return diverging_ ? diverging_colour(t) : viridis(t);
}

QStringList HeatmapWidget::legend_labels() const {
  auto label = [this](double t) {
    const double v = value_at(t);
    // The diverging scale's centre is exactly 0 (not a rounding residue), its ends ±max.
    if (diverging_ && t == 0.5) return QStringLiteral("0");
    return (diverging_ && v > 0 ? QStringLiteral("+") : QString()) + QString::number(v, 'g', 3);
  };
  return {label(1.0), label(0.5), label(0.0)};
}

HeatmapWidget::Geometry HeatmapWidget::geometry() const {
  const QFontMetrics fm(font());
  int label_w = 0;
  for (const QString& s : data_.row_labels) label_w = std::max(label_w, fm.horizontalAdvance(s));
  label_w = std::max(label_w, fm.horizontalAdvance(QStringLiteral("00"))) + 8;
  const int header_h = fm.height() + 8;
  const int bar_w = std::max(16 + 8 + fm.horizontalAdvance(QStringLiteral("-0.00e-00")) + 8,
                             fm.horizontalAdvance(scale_caption()) + 12);
  Geometry g;
  g.grid = QRect(label_w, header_h, std::max(1, width() - label_w - bar_w - 8), std::max(1, height() - header_h - 4));
  g.colorbar = QRect(g.grid.right() + 12, header_h, 16, g.grid.height());
  if (data_.rows > 0 && data_.cols > 0) {
    g.cell_w = double(g.grid.width()) / data_.cols;
    g.cell_h = double(g.grid.height()) / data_.rows;
  }
  return g;
}

QRect HeatmapWidget::cell_rect(int cell) const {
  const Geometry g = geometry();
  if (data_.cols <= 0 || cell < 0 || cell >= data_.rows * data_.cols) return {};
  const int r = cell / data_.cols, c = cell % data_.cols;
  const int x0 = g.grid.left() + int(std::floor(c * g.cell_w));
  const int x1 = g.grid.left() + int(std::floor((c + 1) * g.cell_w));
  const int y0 = g.grid.top() + int(std::floor(r * g.cell_h));
  const int y1 = g.grid.top() + int(std::floor((r + 1) * g.cell_h));
  return QRect(x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0));
}

int HeatmapWidget::cell_at(QPoint pos) const {
  const Geometry g = geometry();
  if (data_.rows <= 0 || data_.cols <= 0 || !g.grid.contains(pos)) return -1;
  const int c = std::min(data_.cols - 1, int((pos.x() - g.grid.left()) / g.cell_w));
  const int r = std::min(data_.rows - 1, int((pos.y() - g.grid.top()) / g.cell_h));
  return r * data_.cols + c;
}

QString HeatmapWidget::tooltip_text(int cell) const {
  if (cell < 0 || cell >= data_.rows * data_.cols) return {};
  const int r = cell / data_.cols, c = cell % data_.cols;
  const QString row = r < data_.row_labels.size() ? data_.row_labels[r] : QString::number(r);
  const QString col = c < data_.col_labels.size() ? data_.col_labels[c] : QString::number(c);
  const double v = cell < int(data_.values.size()) ? data_.values[size_t(cell)] : std::nan("");
  QString text = QStringLiteral("<b>%1 · %2</b><br>%3 = %4")
                     .arg(row, col, data_.value_name.toHtmlEscaped(),
                          std::isfinite(v) ? QString::number(v, 'g', 6) : tr("no value"));
  if (detail_) {
    const QString extra = detail_(cell);
    if (!extra.isEmpty()) text += QStringLiteral("<br>") + extra;
  }
  if (data_.contour && std::isfinite(v))
    text += QStringLiteral("<br>") + (v < *data_.contour ? tr("below %1") : tr("at or above %1")).arg(contour_name());
  return text;
}

// Every cell in its colour (its value written in when the cells are big enough); hatched when it has none.
void HeatmapWidget::draw_cells(QPainter& p, const Geometry& g) const {
  const QFontMetrics fm(font());
  const bool show_numbers =
      g.cell_h >= fm.height() + 2 && g.cell_w >= fm.horizontalAdvance(QStringLiteral("0.00e-00")) + 4;
  for (int cell = 0; cell < data_.rows * data_.cols; ++cell) {
    const QRect rc = cell_rect(cell);
    const double v = cell < int(data_.values.size()) ? data_.values[size_t(cell)] : std::nan("");
    const double t = normalized(v);
    if (std::isfinite(t)) {
      const QColor colour = colour_of(v);
      p.fillRect(rc, colour);
      if (show_numbers) {
        p.setPen(colour.lightnessF() > 0.55 ? Qt::black : Qt::white);
        p.drawText(rc, Qt::AlignCenter, QString::number(v, 'g', 3));
      }
    } else {
      p.fillRect(rc, QBrush(palette().color(QPalette::Mid), Qt::BDiagPattern));
    }
  }
}

// Grid lines between cells when they are big enough to see; the pinned, selected and hovered cells.
void HeatmapWidget::draw_marks(QPainter& p, const Geometry& g) const {
  const QPalette pal = palette();
  if (g.cell_w >= 6 && g.cell_h >= 6) {
    p.setPen(QPen(pal.color(QPalette::Base), 1));
    for (int c = 1; c < data_.cols; ++c) {
      const int x = g.grid.left() + int(std::floor(c * g.cell_w));
      p.drawLine(x, g.grid.top(), x, g.grid.bottom());
    }
    for (int r = 1; r < data_.rows; ++r) {
      const int y = g.grid.top() + int(std::floor(r * g.cell_h));
      p.drawLine(g.grid.left(), y, g.grid.right(), y);
    }
  }
  if (selected_ >= 0) {
    // Two rings, the text colour outside and the base colour inside, so it shows on every cell colour.
    const QRect rc = cell_rect(selected_);
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(pal.color(QPalette::Text), hasFocus() ? 3 : 2));
    p.drawRect(rc.adjusted(1, 1, -2, -2));
    p.setPen(QPen(pal.color(QPalette::Base), 2));
    p.drawRect(rc.adjusted(4, 4, -5, -5));
  }
  if (hover_ >= 0) {
    p.setPen(QPen(pal.color(QPalette::Text), 1, Qt::DashLine));
    p.setBrush(Qt::NoBrush);
    p.drawRect(cell_rect(hover_).adjusted(0, 0, -1, -1));
  }
}

QString HeatmapWidget::contour_name() const {
  if (!data_.contour) return {};
  return data_.contour_label.isEmpty() ? QString::number(*data_.contour, 'g', 4) : data_.contour_label;
}

std::vector<std::pair<int, int>> HeatmapWidget::contour_edges() const {
  std::vector<std::pair<int, int>> out;
  if (!data_.contour || data_.rows <= 0 || data_.cols <= 0) return out;
  auto below = [this](int cell) {
    const double v = cell < int(data_.values.size()) ? data_.values[size_t(cell)] : std::nan("");
    return std::isfinite(v) && v < *data_.contour;
  };
  for (int cell = 0; cell < data_.rows * data_.cols; ++cell) {
    if (!below(cell)) continue;
    const int r = cell / data_.cols, c = cell % data_.cols;
    const int neighbours[4] = {r > 0 ? cell - data_.cols : -1, r + 1 < data_.rows ? cell + data_.cols : -1,
                               c > 0 ? cell - 1 : -1, c + 1 < data_.cols ? cell + 1 : -1};
    for (int n : neighbours)
      if (n < 0 || !below(n)) out.emplace_back(cell, n);
  }
  return out;
}

// The region below the contour level, outlined (a dark line under a light one, visible on every colour).
void HeatmapWidget::draw_contour(QPainter& p, const Geometry& g) const {
  const std::vector<std::pair<int, int>> edges = contour_edges();
  if (edges.empty()) return;
  std::vector<QLine> lines;
  lines.reserve(edges.size());
  for (const auto& [cell, n] : edges) {
    const QRect rc = cell_rect(cell);
    const int r = cell / data_.cols, c = cell % data_.cols;
    const QPoint tl(rc.left(), rc.top()), tr_(rc.left() + rc.width(), rc.top());
    const QPoint bl(rc.left(), rc.top() + rc.height()), br(rc.left() + rc.width(), rc.top() + rc.height());
    if (n < 0) {  // the grid's edge: whichever sides of the cell lie on it
      if (r == 0) lines.emplace_back(tl, tr_);
      if (r == data_.rows - 1) lines.emplace_back(bl, br);
      if (c == 0) lines.emplace_back(tl, bl);
      if (c == data_.cols - 1) lines.emplace_back(tr_, br);
    } else if (n == cell - data_.cols) {
      lines.emplace_back(tl, tr_);
    } else if (n == cell + data_.cols) {
      lines.emplace_back(bl, br);
    } else if (n == cell - 1) {
      lines.emplace_back(tl, bl);
    } else {
      lines.emplace_back(tr_, br);
    }
  }
  const double w = std::clamp(std::min(g.cell_w, g.cell_h) / 6.0, 2.0, 4.0);
  p.setBrush(Qt::NoBrush);
  p.setPen(QPen(Qt::black, w + 2, Qt::SolidLine, Qt::SquareCap));
  p.drawLines(lines.data(), int(lines.size()));
  p.setPen(QPen(QColor(255, 255, 255), w, Qt::SolidLine, Qt::SquareCap));
  p.drawLines(lines.data(), int(lines.size()));
}

// Labels: column header; row labels thinned so they never overlap.
void HeatmapWidget::draw_labels(QPainter& p, const Geometry& g) const {
  const QFontMetrics fm(font());
  p.setPen(palette().color(QPalette::Text));
  // Every shown label fits its share of the width ("step 1200" needs more than "gate").
  int label_w = fm.horizontalAdvance(QStringLiteral("gate_"));
  for (const QString& label : data_.col_labels) label_w = std::max(label_w, fm.horizontalAdvance(label) + 6);
  const int col_step = std::max(1, int(std::ceil(label_w / std::max(1.0, g.cell_w))));
  for (int c = 0; c < data_.cols; c += col_step) {
    const QString label = c < data_.col_labels.size() ? data_.col_labels[c] : QString::number(c);
    const int centre = g.grid.left() + int((c + 0.5) * g.cell_w);  // over its own column
    const QRect rc(centre - label_w / 2 - 20, 0, label_w + 40, g.grid.top() - 2);
    p.drawText(rc, Qt::AlignHCenter | Qt::AlignBottom, label);
  }
  const int row_step = std::max(1, int(std::ceil((fm.height() + 1) / std::max(1.0, g.cell_h))));
  for (int r = 0; r < data_.rows; r += row_step) {
    const QString label = r < data_.row_labels.size() ? data_.row_labels[r] : QString::number(r);
    const QRect rc(0, g.grid.top() + int(r * g.cell_h), g.grid.left() - 6, std::max(int(g.cell_h), fm.height()));
    p.drawText(rc, Qt::AlignRight | Qt::AlignTop, label);
  }
}

// Colour bar with its range (values in the data's own units) and the scale's caption.
void HeatmapWidget::draw_colour_bar(QPainter& p, const Geometry& g) const {
  const QFontMetrics fm(font());
  const QRect bar = g.colorbar;
  for (int y = 0; y < bar.height(); ++y) {
    const double t = double(y) / std::max(1, bar.height() - 1);
    p.fillRect(QRect(bar.left(), bar.bottom() - y, bar.width(), 1), diverging_ ? diverging_colour(t) : viridis(t));
  }
  p.setPen(palette().color(QPalette::Text));
  p.drawRect(bar.adjusted(0, 0, -1, -1));
  const QStringList labels = legend_labels();
  const QRect top_label(bar.right() + 4, bar.top() - 2, width() - bar.right() - 4, fm.height());
  const QRect bottom_label(bar.right() + 4, bar.bottom() - fm.height(), width() - bar.right() - 4, fm.height());
  const QRect mid_label(bar.right() + 4, bar.center().y() - fm.height() / 2, width() - bar.right() - 4, fm.height());
  p.drawText(top_label, Qt::AlignLeft | Qt::AlignTop, labels[0]);
  p.drawText(mid_label, Qt::AlignLeft | Qt::AlignVCenter, labels[1]);
  p.drawText(bottom_label, Qt::AlignLeft | Qt::AlignBottom, labels[2]);
  if (data_.contour && !diverging_) {  // the contour's level on the bar, where it falls in the range
    const double t = normalized(*data_.contour);
    if (t >= 0.0 && t <= 1.0) {
      const int y = bar.bottom() - int(std::lround(t * (bar.height() - 1)));
      p.setPen(QPen(palette().color(QPalette::Text), 2));
      p.drawLine(bar.left() - 4, y, bar.right() + 4, y);
      p.drawText(QRect(bar.right() + 4, y - fm.height() / 2, width() - bar.right() - 4, fm.height()),
                 Qt::AlignLeft | Qt::AlignVCenter, QStringLiteral("— ") + contour_name());
    }
  }
  // Which scale this is, always: a reader must not take a log scale for a linear one.
  const QRect caption(bar.left() - 4, 0, width() - bar.left() + 4, g.grid.top() - 2);
  p.drawText(caption, Qt::AlignLeft | Qt::AlignBottom, scale_caption());
}

void HeatmapWidget::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QPalette pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  if (data_.rows <= 0 || data_.cols <= 0) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, placeholder_);
    return;
  }
  const Geometry g = geometry();
  draw_cells(p, g);
  draw_contour(p, g);
  draw_marks(p, g);
  draw_labels(p, g);
  draw_colour_bar(p, g);
}

void HeatmapWidget::select_cell(int cell) {
  if (cell < 0 || cell >= data_.rows * data_.cols) return;
  selected_ = cell;
  update();
  emit cell_selected(cell);
  const QRect rc = cell_rect(cell);
  QToolTip::showText(mapToGlobal(rc.bottomLeft()), tooltip_text(cell), this, rc);
}

void HeatmapWidget::keyPressEvent(QKeyEvent* event) {
  focus_click_pending_ = false;
  const int cells = data_.rows * data_.cols;
  if (cells <= 0) return QWidget::keyPressEvent(event);
  const int r = selected_ < 0 ? 0 : selected_ / data_.cols, c = selected_ < 0 ? 0 : selected_ % data_.cols;
  int next = -2;
  switch (event->key()) {
    case Qt::Key_Left:
      next = r * data_.cols + std::max(0, c - 1);
      break;
    case Qt::Key_Right:
      next = r * data_.cols + std::min(data_.cols - 1, c + 1);
      break;
    case Qt::Key_Up:
      next = std::max(0, r - 1) * data_.cols + c;
      break;
    case Qt::Key_Down:
      next = std::min(data_.rows - 1, r + 1) * data_.cols + c;
      break;
    case Qt::Key_Home:
      next = r * data_.cols;
      break;
    case Qt::Key_End:
      next = r * data_.cols + data_.cols - 1;
      break;
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space:
      if (selected_ >= 0) emit cell_clicked(selected_);
      return;
    default:
      return QWidget::keyPressEvent(event);
  }
  select_cell(selected_ < 0 ? 0 : next);
}

void HeatmapWidget::focusInEvent(QFocusEvent* event) {
  QWidget::focusInEvent(event);
  update();
}

void HeatmapWidget::focusOutEvent(QFocusEvent* event) {
  QWidget::focusOutEvent(event);
  update();
}

void HeatmapWidget::mouseMoveEvent(QMouseEvent* event) {
  focus_click_pending_ = false;  // the pointer moved in an active window: the next click is meant
  const int cell = cell_at(event->position().toPoint());
  if (cell != hover_) {
    hover_ = cell;
    update();
  }
  if (cell >= 0)
    QToolTip::showText(event->globalPosition().toPoint(), tooltip_text(cell), this, cell_rect(cell));
  else
    QToolTip::hideText();
}

void HeatmapWidget::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return;
  const int cell = cell_at(event->position().toPoint());
  // The click that brought the window to the front only focuses it: it selects the cell but
  // does not act on it (it pinned a layer the user had not meant to touch).
  const bool focus_click = focus_click_pending_;
  focus_click_pending_ = false;
  if (cell >= 0) {
    selected_ = cell;  // the keyboard goes on from the clicked cell
    update();
    if (!focus_click) emit cell_clicked(cell);
  }
}

void HeatmapWidget::changeEvent(QEvent* event) {
  QWidget::changeEvent(event);
  // The window became active: a press that comes before the pointer moves or a key is pressed is
  // the click that activated it.
  if (event->type() == QEvent::ActivationChange) focus_click_pending_ = isActiveWindow();
}

void HeatmapWidget::leaveEvent(QEvent*) {
  hover_ = -1;
  update();
}

}  // namespace snip::ui
