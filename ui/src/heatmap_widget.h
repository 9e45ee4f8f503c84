// A heatmap of one number per cell: rows × columns (blocks × q/k/v/o/gate/up/down for the
// per-layer divergence view; rounds × layers for the layer × step view). Viridis colour scale
// (linear or log) for magnitudes; a diverging blue–white–red scale centred at 0 and symmetric
// (linear or symmetric-log) for signed quantities; a colour bar with its range and a caption
// saying which scale is drawn; hover tooltip with the exact numbers, click to pin a cell (emits
// cell_clicked; the owner decides what pinning means). Keyboard: the arrow keys move a visible
// selection (its tooltip shows the cell's numbers), Enter or Space clicks it.
#pragma once
#include <QMouseEvent>
#include <QString>
#include <QStringList>
#include <QWidget>
#include <functional>
#include <optional>
#include <set>
#include <vector>

class QPainter;

namespace snip::ui {

struct HeatmapData {
  int rows = 0;
  int cols = 0;
  std::vector<double> values;  // rows*cols, row-major; NaN = no value (drawn hatched)
  QStringList row_labels;      // may be empty (then "0", "1", ...)
  QStringList col_labels;
  QString value_name;       // e.g. "ΔL (FP4)"
  bool log_colour = false;  // colour by log10(value) (diverging: by sign·log10(1 + |v|/(10⁻³·max|v|)))
  bool diverging = false;   // a signed quantity: diverging scale around 0 (also chosen when any value < 0)
  // A level to outline (e.g. the gradient noise ratio's √3): the cells below it are framed as a
  // region, the level is marked on the colour bar and every tooltip says which side a cell is on.
  std::optional<double> contour;
  QString contour_label;  // how the level is named ("√3"); empty: its number
};

// Short labels of the first `layers` linear layers in index order: "0.q", "0.k", ..., "1.q".
QStringList layer_short_labels(int layers);

// Viridis, t in [0, 1] (perceptually uniform, readable on dark and light backgrounds).
QColor viridis(double t);
// Diverging blue (t = 0) – near-white (t = 0.5) – red (t = 1), after ColorBrewer's RdBu.
QColor diverging_colour(double t);

class HeatmapWidget : public QWidget {
  Q_OBJECT
 public:
  explicit HeatmapWidget(QWidget* parent = nullptr);

  void set_data(HeatmapData data);
  const HeatmapData& data() const { return data_; }
  // Extra lines for a cell's tooltip (e.g. every statistic behind the value).
  void set_detail_provider(std::function<QString(int cell)> provider) { detail_ = std::move(provider); }
  // What an empty map says (default: how to get statistics).
  void set_placeholder(QString text) {
    placeholder_ = std::move(text);
    update();
  }
  QString placeholder() const { return placeholder_; }
  // Tooltip text of a cell (what hovering shows).
  QString tooltip_text(int cell) const;
  // Cell under a widget position, -1 outside the grid.
  int cell_at(QPoint pos) const;
  QRect cell_rect(int cell) const;
  // What the colour bar shows: the caption ("linear", "log", "diverging · linear",
  // "diverging · log"), the colour of a value, and the top / middle / bottom range labels.
  QString scale_caption() const;
  QColor colour_of(double value) const;
  QStringList legend_labels() const;
  // The contour's segments: pairs (cell below the level, neighbour not below it or -1 for the
  // grid's edge), one per side of the region below the level; empty without a contour.
  std::vector<std::pair<int, int>> contour_edges() const;
  // The keyboard selection (-1: none); selecting shows the cell's tooltip.
  int selected() const { return selected_; }
  void select_cell(int cell);

  QSize sizeHint() const override { return {640, 480}; }
  QSize minimumSizeHint() const override { return {240, 160}; }

 signals:
  void cell_clicked(int cell);
  void cell_selected(int cell);

 protected:
  void changeEvent(QEvent* event) override;
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  // A double click is two clicks (each press already counted), not a third.
  void mouseDoubleClickEvent(QMouseEvent* event) override { event->accept(); }
  void leaveEvent(QEvent*) override;
  void keyPressEvent(QKeyEvent*) override;
  void focusInEvent(QFocusEvent*) override;
  void focusOutEvent(QFocusEvent*) override;

 private:
  bool focus_click_pending_ = false;  // the window was just activated: the next press only focuses
  struct Geometry {
    QRect grid;      // cell area
    QRect colorbar;  // colour scale
    double cell_w = 0, cell_h = 0;
  };
  Geometry geometry() const;
  // paintEvent's parts, in drawing order.
  void draw_cells(QPainter& p, const Geometry& g) const;
  void draw_marks(QPainter& p, const Geometry& g) const;
  void draw_labels(QPainter& p, const Geometry& g) const;
  void draw_contour(QPainter& p, const Geometry& g) const;
  void draw_colour_bar(QPainter& p, const Geometry& g) const;
  QString contour_name() const;       // the contour's label, or its number
  double normalized(double v) const;  // value -> [0, 1] for the colour scale
  double value_at(double t) const;    // its inverse, for the colour bar's labels
  bool diverging() const { return diverging_; }

  HeatmapData data_;
  std::function<QString(int)> detail_;
  QString placeholder_ = tr("No statistics yet — run a statistics round, or use File › Import statistics/costs");
  double lo_ = 0.0, hi_ = 1.0;  // colour range in (possibly log) value space
  bool diverging_ = false;
  double max_abs_ = 1.0;  // diverging: the range is [-max_abs_, max_abs_]
  int hover_ = -1;
  int selected_ = -1;
};

}  // namespace snip::ui
