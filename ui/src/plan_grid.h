// The plan grid: one cell per selectable linear layer (rows = blocks, columns = q/k/v/o/gate/
// up/down), coloured by precision (FP4 / FP8 / BF16 / FP32). When the three GEMM roles of a
// layer differ, the cell splits into fprop | dgrad | wgrad stripes. Cells that differ from a
// reference plan (compare mode) are outlined; pinned layers carry a corner mark, flagged layers
// (the Plan view: FP4 gradient noise below √3) a warning mark. Keyboard: the
// arrow keys move a visible selection whose tooltip names the layer and its precisions; Enter or
// Space clicks it (pins it, in the Plan view).
#pragma once
#include <QMouseEvent>
#include <QString>
#include <QWidget>
#include <map>
#include <vector>

#include "snip/precision.h"

class QPainter;

namespace snip::ui {

QColor precision_colour(snip::Precision p);
QString precision_label(snip::Precision p);  // "FP4", "FP8", "BF16", "FP32"

class PlanGrid : public QWidget {
  Q_OBJECT
 public:
  explicit PlanGrid(QWidget* parent = nullptr);

  // per_layer in layer index order (block * 7 + type); empty = no plan.
  void set_plan(int num_blocks, std::vector<snip::LinearPrecision> per_layer, const QString& title = {});
  // Cells differing from `reference` are outlined; empty = no comparison.
  void set_reference(std::vector<snip::LinearPrecision> reference);
  void set_pins(std::map<int, snip::Precision> pins);
  // Flagged layers (e.g. FP4 gradient noise ratio below √3) carry a warning mark in the lower
  // left corner; the text is added to the layer's tooltip. `legend` names the mark in the legend.
  void set_flags(std::map<int, QString> flags, const QString& legend = {});
  const std::map<int, QString>& flags() const { return flags_; }

  const std::vector<snip::LinearPrecision>& plan() const { return plan_; }
  int num_blocks() const { return num_blocks_; }
  // Layers whose precision differs from the reference (any GEMM role).
  std::vector<int> differing_layers() const;
  int layer_at(QPoint pos) const;
  QRect layer_rect(int layer) const;
  // What hovering or selecting a layer shows (empty outside the plan).
  QString tooltip_text(int layer) const;
  int selected() const { return selected_; }
  void select_layer(int layer);

  QSize sizeHint() const override { return {420, 360}; }
  QSize minimumSizeHint() const override { return {200, 140}; }

 signals:
  void layer_clicked(int layer);
  void layer_selected(int layer);

 protected:
  void paintEvent(QPaintEvent*) override;
  void mousePressEvent(QMouseEvent*) override;
  // A double click is two clicks (each press already counted), not a third.
  void mouseDoubleClickEvent(QMouseEvent* event) override { event->accept(); }
  bool event(QEvent*) override;  // tooltips
  void keyPressEvent(QKeyEvent*) override;
  void focusInEvent(QFocusEvent*) override;
  void focusOutEvent(QFocusEvent*) override;

 private:
  QRect grid_rect() const;
  // paintEvent's parts, in drawing order.
  int draw_title(QPainter& p) const;
  void draw_axis_labels(QPainter& p, int y) const;
  void draw_cell(QPainter& p, int l, bool comparing) const;
  void draw_legend(QPainter& p, bool comparing) const;

  int num_blocks_ = 0;
  std::vector<snip::LinearPrecision> plan_;
  std::vector<snip::LinearPrecision> reference_;
  std::map<int, snip::Precision> pins_;
  std::map<int, QString> flags_;
  QString flag_legend_;
  QString title_;
  int selected_ = -1;
};

}  // namespace snip::ui
