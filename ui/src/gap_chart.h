// The gap chart of the Compare view: every compare arm's loss gap to BF16 as a point with its
// 95% error bar (a forest plot: one row per arm, train filled, validation hollow), a line at 0
// (BF16) and the SNIP reference's train interval shaded across the rows, so an arm whose bar
// clears the shading differs from SNIP at a glance. Painted with QPainter; the numbers come
// from the report model (compare_report.h), which computes them with snip/paired_stats.h.
#pragma once
#include <QString>
#include <QWidget>
#include <vector>

#include "compare_report.h"

class QPainter;

namespace snip::ui {

class GapChart : public QWidget {
  Q_OBJECT
 public:
  explicit GapChart(QWidget* parent = nullptr);
  void set_bars(std::vector<GapBar> bars);
  const std::vector<GapBar>& bars() const { return bars_; }
  // Row i's label as drawn before eliding: the arm's name, and "k/K" when only k of its K
  // replicates finished (its bars are then dashed).
  QString row_label(size_t i) const;
  // The legend's extent at the current size: it starts above the plot when it fits there and
  // moves left (then shortens "SNIP (train)" to "SNIP") so it never runs past the right edge.
  struct Legend {
    int left, right;
    QString snip_label;
  };
  Legend legend() const;
  // The title at the current width: "Gap to BF16, mean ± 95% interval", or a shorter one when
  // that would be cut at the chart's edges.
  QString title() const;
  QSize minimumSizeHint() const override { return {220, 140}; }
  QSize sizeHint() const override { return {380, 300}; }

 protected:
  void paintEvent(QPaintEvent* event) override;

 private:
  int label_width() const;
  // paintEvent's parts: the x of value v in plot, the legend, the grid, one arm's row.
  double x_at(const QRect& plot, double v) const;
  void draw_legend(QPainter& p, int legend_y) const;
  void draw_grid(QPainter& p, const QRect& plot) const;
  void draw_row(QPainter& p, const QRect& plot, size_t i, int label_w) const;
  std::vector<GapBar> bars_;
  double x_min_ = -1, x_max_ = 1;
};

}  // namespace snip::ui
