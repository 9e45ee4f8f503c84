// A heatmap of one number per cell: rows × columns (blocks × q/k/v/o/gate/up/down for the
// per-layer divergence view; rounds × layers for the layer × step view). Viridis colour scale
// (linear or log), a colour bar with its range, hover tooltip with the exact numbers, click to
// pin a cell (emits cell_clicked; the owner decides what pinning means).
#pragma once
#include <QString>
#include <QStringList>
#include <QMouseEvent>
#include <QWidget>
#include <functional>
#include <set>
#include <vector>

namespace snip::ui {

struct HeatmapData {
  int rows = 0;
  int cols = 0;
  std::vector<double> values;  // rows*cols, row-major; NaN = no value (drawn hatched)
  QStringList row_labels;      // may be empty (then "0", "1", ...)
  QStringList col_labels;
  QString value_name;          // e.g. "ΔL (FP4)"
  bool log_colour = false;     // colour by log10(value); values <= 0 drawn as the lowest colour
};

// Viridis, t in [0, 1] (perceptually uniform, readable on dark and light backgrounds).
QColor viridis(double t);

class HeatmapWidget : public QWidget {
  Q_OBJECT
 public:
  explicit HeatmapWidget(QWidget* parent = nullptr);

  void set_data(HeatmapData data);
  const HeatmapData& data() const { return data_; }
  // Cells drawn with a pin mark (cell index = row*cols + col).
  void set_marked(std::set<int> cells);
  const std::set<int>& marked() const { return marked_; }
  // Extra lines for a cell's tooltip (e.g. every statistic behind the value).
  void set_detail_provider(std::function<QString(int cell)> provider) { detail_ = std::move(provider); }
  // Tooltip text of a cell (what hovering shows).
  QString tooltip_text(int cell) const;
  // Cell under a widget position, -1 outside the grid.
  int cell_at(QPoint pos) const;
  QRect cell_rect(int cell) const;

  QSize sizeHint() const override { return {640, 480}; }
  QSize minimumSizeHint() const override { return {240, 160}; }

 signals:
  void cell_clicked(int cell);
  void cell_hovered(int cell);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mouseMoveEvent(QMouseEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  // A double click is two clicks (each press already counted), not a third.
  void mouseDoubleClickEvent(QMouseEvent* event) override { event->accept(); }
  void leaveEvent(QEvent*) override;

 private:
  struct Geometry {
    QRect grid;      // cell area
    QRect colorbar;  // colour scale
    double cell_w = 0, cell_h = 0;
  };
  Geometry geometry() const;
  double normalized(double v) const;  // value -> [0, 1] for the colour scale

  HeatmapData data_;
  std::set<int> marked_;
  std::function<QString(int)> detail_;
  double lo_ = 0.0, hi_ = 1.0;  // colour range in (possibly log) value space
  int hover_ = -1;
};

}  // namespace snip::ui
