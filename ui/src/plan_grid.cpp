// PlanGrid: painted per-layer, per-GEMM-role precision map with diff and pin marks.
#include "plan_grid.h"

#include <QHelpEvent>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <algorithm>
#include <cmath>

#include "snip/layers.h"

namespace snip::ui {

QColor precision_colour(snip::Precision p) {
  switch (p) {
    case snip::Precision::fp4:
      return QColor(230, 124, 54);  // warm: the cheap, risky choice
    case snip::Precision::fp8:
      return QColor(70, 130, 200);  // cool: the safe choice
    case snip::Precision::bf16:
      return QColor(150, 150, 150);
    case snip::Precision::fp32:
      return QColor(200, 200, 200);
  }
  return QColor(128, 128, 128);
}

QString precision_label(snip::Precision p) {
  return QString::fromLatin1(snip::precision_name(p)).toUpper();
}

namespace {
constexpr int kLegendHeight = 22;
}

PlanGrid::PlanGrid(QWidget* parent) : QWidget(parent) {
  setMouseTracking(true);
  setFocusPolicy(Qt::StrongFocus);  // reachable with Tab; arrows move the selection
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
}

void PlanGrid::set_plan(int num_blocks, std::vector<snip::LinearPrecision> per_layer, const QString& title) {
  num_blocks_ = num_blocks;
  plan_ = std::move(per_layer);
  title_ = title;
  if (selected_ >= int(plan_.size())) selected_ = -1;
  update();
}

void PlanGrid::set_reference(std::vector<snip::LinearPrecision> reference) {
  reference_ = std::move(reference);
  update();
}

void PlanGrid::set_pins(std::map<int, snip::Precision> pins) {
  pins_ = std::move(pins);
  update();
}

void PlanGrid::set_flags(std::map<int, QString> flags, const QString& legend) {
  flags_ = std::move(flags);
  flag_legend_ = legend;
  update();
}

std::vector<int> PlanGrid::differing_layers() const {
  std::vector<int> out;
  if (reference_.size() != plan_.size()) return out;
  for (size_t l = 0; l < plan_.size(); ++l)
    if (!(plan_[l] == reference_[l])) out.push_back(int(l));
  return out;
}

QRect PlanGrid::grid_rect() const {
  const QFontMetrics fm(font());
  const int label_w = fm.horizontalAdvance(QStringLiteral("000")) + 8;
  const int top = (title_.isEmpty() ? 0 : fm.height() + 4) + fm.height() + 6;
  return QRect(label_w, top, std::max(1, width() - label_w - 4), std::max(1, height() - top - kLegendHeight - 6));
}

QRect PlanGrid::layer_rect(int layer) const {
  if (num_blocks_ <= 0 || layer < 0 || layer >= num_blocks_ * snip::kLayersPerBlock) return {};
  const QRect g = grid_rect();
  const double cw = double(g.width()) / snip::kLayersPerBlock, ch = double(g.height()) / num_blocks_;
  const int r = layer / snip::kLayersPerBlock, c = layer % snip::kLayersPerBlock;
  const int x0 = g.left() + int(std::floor(c * cw)), x1 = g.left() + int(std::floor((c + 1) * cw));
  const int y0 = g.top() + int(std::floor(r * ch)), y1 = g.top() + int(std::floor((r + 1) * ch));
  return QRect(x0, y0, std::max(1, x1 - x0), std::max(1, y1 - y0));
}

int PlanGrid::layer_at(QPoint pos) const {
  const QRect g = grid_rect();
  if (num_blocks_ <= 0 || !g.contains(pos)) return -1;
  const int c = std::min(snip::kLayersPerBlock - 1, int((pos.x() - g.left()) * snip::kLayersPerBlock / g.width()));
  const int r = std::min(num_blocks_ - 1, int((pos.y() - g.top()) * num_blocks_ / g.height()));
  return r * snip::kLayersPerBlock + c;
}

// The title in bold, elided to the width; returns the y below it.
int PlanGrid::draw_title(QPainter& p) const {
  const QPalette pal = palette();
  const QFontMetrics fm(font());
  if (title_.isEmpty()) return 0;
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.setPen(pal.color(QPalette::Text));
  p.drawText(QRect(0, 0, width(), fm.height() + 4), Qt::AlignLeft | Qt::AlignVCenter,
             QFontMetrics(bold).elidedText(title_, Qt::ElideRight, width()));
  p.setFont(font());
  return fm.height() + 4;
}

// Layer type names over the columns (from y down to the grid), block numbers left of the rows.
void PlanGrid::draw_axis_labels(QPainter& p, int y) const {
  const QRect g = grid_rect();
  const QFontMetrics fm(font());
  p.setPen(palette().color(QPalette::Text));
  for (int c = 0; c < snip::kLayersPerBlock; ++c) {
    const QRect rc = layer_rect(c);
    p.drawText(QRect(rc.left(), y, rc.width(), g.top() - y - 2), Qt::AlignHCenter | Qt::AlignBottom,
               QString::fromLatin1(snip::layer_type_short_name(snip::kAllLayerTypes[size_t(c)])));
  }
  const double ch = double(g.height()) / num_blocks_;
  const int row_step = std::max(1, int(std::ceil((fm.height() + 1) / std::max(1.0, ch))));
  for (int b = 0; b < num_blocks_; b += row_step) {
    const QRect rc = layer_rect(b * snip::kLayersPerBlock);
    p.drawText(QRect(0, rc.top(), g.left() - 6, std::max(rc.height(), fm.height())), Qt::AlignRight | Qt::AlignTop,
               QString::number(b));
  }
}

// Layer l's cell: one colour (labelled when it fits) or fprop|dgrad|wgrad stripes; a frame when
// it differs from the reference, a corner triangle when pinned.
void PlanGrid::draw_cell(QPainter& p, int l, bool comparing) const {
  const QFontMetrics fm(font());
  const QRect rc = layer_rect(l);
  const snip::LinearPrecision& lp = plan_[size_t(l)];
  const bool uniform = lp.fprop == lp.dgrad && lp.dgrad == lp.wgrad;
  if (uniform) {
    p.fillRect(rc, precision_colour(lp.fprop));
    if (rc.height() >= fm.height() && rc.width() >= fm.horizontalAdvance(QStringLiteral("BF16")) + 4) {
      p.setPen(Qt::white);
      p.drawText(rc, Qt::AlignCenter, precision_label(lp.fprop));
    }
  } else {
    // fprop | dgrad | wgrad stripes
    for (int gi = 0; gi < snip::kNumGemms; ++gi) {
      const int x0 = rc.left() + rc.width() * gi / 3, x1 = rc.left() + rc.width() * (gi + 1) / 3;
      p.fillRect(QRect(x0, rc.top(), x1 - x0, rc.height()), precision_colour(lp[snip::kAllGemms[size_t(gi)]]));
    }
  }
  if (comparing && !(lp == reference_[size_t(l)])) {
    p.setPen(QPen(QColor(220, 30, 120), std::max(2.0, std::min(rc.width(), rc.height()) / 8.0)));
    p.setBrush(Qt::NoBrush);
    p.drawRect(rc.adjusted(2, 2, -2, -2));
  }
  if (pins_.count(l)) {
    const int s = std::max(6, std::min(rc.width(), rc.height()) / 3);
    QPolygon tri;
    tri << rc.topRight() << QPoint(rc.right() - s, rc.top()) << QPoint(rc.right(), rc.top() + s);
    p.setPen(Qt::NoPen);
    p.setBrush(palette().color(QPalette::Text));
    p.drawPolygon(tri);
  }
  if (flags_.count(l)) {  // a yellow warning triangle with "!", lower left, framed so it shows on FP4's orange
    const int s = std::clamp(std::min(rc.width(), rc.height()) / 2, 10, 22);
    const QPoint a(rc.left() + 3, rc.bottom() - 3), b(rc.left() + 3 + s, rc.bottom() - 3),
        c(rc.left() + 3 + s / 2, rc.bottom() - 3 - s);
    QPolygon tri;
    tri << a << b << c;
    p.setPen(QPen(Qt::black, 1.5));
    p.setBrush(QColor(255, 214, 0));
    p.drawPolygon(tri);
    QFont bold = font();
    bold.setBold(true);
    bold.setPixelSize(std::max(7, s * 2 / 3));
    p.setFont(bold);
    p.setPen(Qt::black);
    p.drawText(QRect(c.x() - s / 2, c.y() + s / 4, s, s * 3 / 4), Qt::AlignCenter, QStringLiteral("!"));
    p.setFont(font());
  }
}

// The precision colours, then the marks' meanings: most important first; an entry that does
// not fit the width is left out, not cut (two grids side by side in the Compare view at 1280 px).
void PlanGrid::draw_legend(QPainter& p, bool comparing) const {
  const QPalette pal = palette();
  const QFontMetrics fm(font());
  const QRect g = grid_rect();
  int x = g.left();
  const int ly = g.bottom() + 8;
  p.setPen(pal.color(QPalette::Text));
  for (snip::Precision prec : {snip::Precision::fp4, snip::Precision::fp8, snip::Precision::bf16}) {
    p.fillRect(QRect(x, ly + 3, 14, 14), precision_colour(prec));
    p.drawText(QRect(x + 18, ly, 60, 20), Qt::AlignLeft | Qt::AlignVCenter, precision_label(prec));
    x += 18 + fm.horizontalAdvance(precision_label(prec)) + 14;
  }
  const QString extras[] = {comparing ? tr("□ differs") : QString(),
                            flags_.empty() ? QString() : QStringLiteral("⚠ ") + flag_legend_, tr("▲ pinned"),
                            tr("stripes: fprop|dgrad|wgrad")};
  for (const QString& s : extras) {
    if (s.isEmpty() || x + fm.horizontalAdvance(s) > width()) continue;
    if (s == extras[0]) p.setPen(QColor(220, 30, 120));
    p.drawText(QRect(x, ly, fm.horizontalAdvance(s) + 4, 20), Qt::AlignLeft | Qt::AlignVCenter, s);
    p.setPen(pal.color(QPalette::Text));
    x += fm.horizontalAdvance(s) + 14;
  }
}

void PlanGrid::paintEvent(QPaintEvent*) {
  QPainter p(this);
  const QPalette pal = palette();
  p.fillRect(rect(), pal.color(QPalette::Base));
  const int y = draw_title(p);
  if (num_blocks_ <= 0 || plan_.empty()) {
    p.setPen(pal.color(QPalette::PlaceholderText));
    p.drawText(rect().adjusted(0, y, 0, 0), Qt::AlignCenter | Qt::TextWordWrap, tr("No plan"));
    return;
  }
  draw_axis_labels(p, y);
  const QRect g = grid_rect();
  const double ch = double(g.height()) / num_blocks_;
  const bool comparing = reference_.size() == plan_.size();
  const int layers = std::min<int>(int(plan_.size()), num_blocks_ * snip::kLayersPerBlock);
  for (int l = 0; l < layers; ++l) draw_cell(p, l, comparing);
  if (ch >= 5) {
    p.setPen(QPen(pal.color(QPalette::Base), 1));
    for (int l = 0; l < layers; ++l) {
      p.setBrush(Qt::NoBrush);
      p.drawRect(layer_rect(l));
    }
  }
  if (selected_ >= 0 && selected_ < layers) {
    // Two rings (the text colour, then the base colour) so the selection shows on every precision colour.
    const QRect rc = layer_rect(selected_);
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(pal.color(QPalette::Text), hasFocus() ? 3 : 2));
    p.drawRect(rc.adjusted(1, 1, -2, -2));
    p.setPen(QPen(pal.color(QPalette::Base), 2));
    p.drawRect(rc.adjusted(4, 4, -5, -5));
  }
  draw_legend(p, comparing);
}

void PlanGrid::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return;
  const int layer = layer_at(event->position().toPoint());
  if (layer >= 0) {
    selected_ = layer;  // the keyboard goes on from the clicked layer
    update();
    emit layer_clicked(layer);
  }
}

QString PlanGrid::tooltip_text(int l) const {
  if (l < 0 || l >= int(plan_.size())) return {};
  const snip::LinearPrecision& lp = plan_[size_t(l)];
  const auto type = snip::kAllLayerTypes[size_t(l % snip::kLayersPerBlock)];
  QString text = QStringLiteral("<b>%1</b><br>fprop %2 · dgrad %3 · wgrad %4")
                     .arg(QString::fromStdString(snip::layer_module_name(l / snip::kLayersPerBlock, type)),
                          precision_label(lp.fprop), precision_label(lp.dgrad), precision_label(lp.wgrad));
  if (reference_.size() == plan_.size() && !(lp == reference_[size_t(l)])) {
    const snip::LinearPrecision& rp = reference_[size_t(l)];
    text += QStringLiteral("<br>reference: %1 · %2 · %3")
                .arg(precision_label(rp.fprop), precision_label(rp.dgrad), precision_label(rp.wgrad));
  }
  if (auto it = flags_.find(l); it != flags_.end()) text += QStringLiteral("<br>⚠ ") + it->second.toHtmlEscaped();
  if (auto it = pins_.find(l); it != pins_.end())
    text += tr("<br><i>pinned to %1 (click to unpin)</i>").arg(precision_label(it->second));
  return text;
}

bool PlanGrid::event(QEvent* e) {
  if (e->type() == QEvent::ToolTip) {
    auto* help = static_cast<QHelpEvent*>(e);
    const int l = layer_at(help->pos());
    if (l >= 0 && l < int(plan_.size()))
      QToolTip::showText(help->globalPos(), tooltip_text(l), this, layer_rect(l));
    else
      QToolTip::hideText();
    return true;
  }
  return QWidget::event(e);
}

void PlanGrid::select_layer(int layer) {
  if (layer < 0 || layer >= int(plan_.size()) || layer >= num_blocks_ * snip::kLayersPerBlock) return;
  selected_ = layer;
  update();
  emit layer_selected(layer);
  const QRect rc = layer_rect(layer);
  QToolTip::showText(mapToGlobal(rc.bottomLeft()), tooltip_text(layer), this, rc);
}

void PlanGrid::keyPressEvent(QKeyEvent* event) {
  const int cols = snip::kLayersPerBlock, rows = num_blocks_;
  if (rows <= 0 || plan_.empty()) return QWidget::keyPressEvent(event);
  const int r = selected_ < 0 ? 0 : selected_ / cols, c = selected_ < 0 ? 0 : selected_ % cols;
  int next = 0;
  switch (event->key()) {
    case Qt::Key_Left:
      next = r * cols + std::max(0, c - 1);
      break;
    case Qt::Key_Right:
      next = r * cols + std::min(cols - 1, c + 1);
      break;
    case Qt::Key_Up:
      next = std::max(0, r - 1) * cols + c;
      break;
    case Qt::Key_Down:
      next = std::min(rows - 1, r + 1) * cols + c;
      break;
    case Qt::Key_Home:
      next = r * cols;
      break;
    case Qt::Key_End:
      next = r * cols + cols - 1;
      break;
    case Qt::Key_Return:
    case Qt::Key_Enter:
    case Qt::Key_Space:
      if (selected_ >= 0) emit layer_clicked(selected_);
      return;
    default:
      return QWidget::keyPressEvent(event);
  }
  select_layer(selected_ < 0 ? 0 : next);
}

void PlanGrid::focusInEvent(QFocusEvent* event) {
  QWidget::focusInEvent(event);
  update();
}

void PlanGrid::focusOutEvent(QFocusEvent* event) {
  QWidget::focusOutEvent(event);
  update();
}

}  // namespace snip::ui
