// Widget-level tests: curve smoothing/downsampling math, bulk chart refresh, heatmap hover and
// click, plan grid differences and pins.
#include <gtest/gtest.h>

#include <QApplication>
#include <QFile>
#include <QImage>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

#include "curve_chart.h"
#include "heatmap_widget.h"
#include "plan_grid.h"
#include "snip/error.h"
#include "snip/layers.h"

using namespace snip::ui;

TEST(CurveMath, EmaWithBiasCorrectionMatchesTheRecurrence) {
  std::vector<QPointF> pts = {{1, 4.0}, {2, 2.0}, {3, 3.0}};
  const double w = 0.5;
  const auto s = smooth_ema(pts, w);
  // s1 = 0.5·4 = 2 → /(1−0.5) = 4; s2 = 0.5·2 + 0.5·2 = 2 → /(1−0.25) = 2.6667; s3 = 0.5·2 + 0.5·3 = 2.5 → /(0.875)
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0].y(), 4.0);
  EXPECT_NEAR(s[1].y(), 2.0 / 0.75, 1e-12);
  EXPECT_NEAR(s[2].y(), 2.5 / 0.875, 1e-12);
  EXPECT_EQ(smooth_ema(pts, 0.0), pts);  // no smoothing = the raw curve
}

TEST(CurveMath, MinMaxDownsamplingKeepsSpikesAndBoundsSize) {
  std::vector<QPointF> pts;
  for (int i = 0; i < 100000; ++i) pts.emplace_back(i, std::sin(i * 0.001));
  pts[54321].setY(50.0);  // a loss spike must survive
  pts[777].setY(-50.0);
  const auto d = downsample_minmax(pts, 2000);
  EXPECT_LE(d.size(), 2000u);
  EXPECT_GE(d.size(), 1000u);
  bool spike = false, dip = false;
  for (const QPointF& p : d) {
    spike |= p.y() == 50.0 && p.x() == 54321;
    dip |= p.y() == -50.0 && p.x() == 777;
  }
  EXPECT_TRUE(spike);
  EXPECT_TRUE(dip);
  for (size_t i = 1; i < d.size(); ++i) EXPECT_LT(d[i - 1].x(), d[i].x());  // still in step order
}

// A gap chart on a log axis dropped the negative gaps (an arm better than BF16) without a word.
TEST(CurveChart, ALogScaleSaysHowManyPointsItCannotDraw) {
  CurveChart chart("gap", "gap to BF16");
  chart.set_curves({Curve{"a", {{1, 0.5}, {2, -0.1}, {3, 0.2}, {4, 0.0}}, {}}});
  chart.redraw_now();
  EXPECT_EQ(chart.points_not_drawn(), 0u);
  EXPECT_EQ(chart.log_scale_text(), QStringLiteral("Log scale"));
  chart.set_log_scale(true);
  chart.redraw_now();
  EXPECT_EQ(chart.points_not_drawn(), 2u);
  EXPECT_TRUE(chart.log_scale_text().contains(QStringLiteral("2 point(s) ≤ 0 not drawn")))
      << chart.log_scale_text().toStdString();
  chart.set_log_scale(false);
  chart.redraw_now();
  EXPECT_EQ(chart.points_not_drawn(), 0u);
}

TEST(CurveChart, ManyBulkUpdatesCoalesceIntoFewRedraws) {
  CurveChart chart("t", "y");
  chart.resize(600, 400);
  chart.show();
  QSignalSpy redrawn(&chart, &CurveChart::redrawn);
  const int before = chart.redraw_count();
  std::vector<QPointF> pts;
  for (int i = 0; i < 200; ++i) {
    pts.emplace_back(i, 1.0 / (i + 1));
    chart.set_curves({Curve{"train", pts, {}}});  // one call per step, as a naive feed would do
  }
  // Event-driven: the refresh timer's redraw, however long the loaded machine takes to run it.
  ASSERT_TRUE(redrawn.count() > 0 || redrawn.wait(10000));
  QCoreApplication::processEvents();
  EXPECT_EQ(chart.redraw_count() - before, 1);  // 200 updates before the timer fired: one redraw, not 200
  // Log scale: the axis only accepts positive values, and the chart still draws.
  chart.set_log_scale(true);
  chart.set_curves({Curve{"train", {{0, 0.0}, {1, -1.0}, {2, 0.5}, {3, 0.25}}, {}}});
  chart.redraw_now();
  EXPECT_TRUE(chart.log_scale());
  // Exports: PNG decodes at the widget's size, SVG is an SVG document, CSV has every raw point.
  QTemporaryDir dir;
  chart.export_png(dir.filePath("c.png"));
  chart.export_svg(dir.filePath("c.svg"));
  chart.export_csv(dir.filePath("c.csv"));
  EXPECT_FALSE(QImage(dir.filePath("c.png")).isNull());
  QFile svg(dir.filePath("c.svg"));
  ASSERT_TRUE(svg.open(QIODevice::ReadOnly));
  EXPECT_TRUE(svg.readAll().contains("<svg"));
  QFile csv(dir.filePath("c.csv"));
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  EXPECT_EQ(csv.readAll().count('\n'), 5);  // header + 4 points (non-positive ones too: CSV is raw)
  EXPECT_THROW(chart.export_png("/nonexistent-dir/c.png"), snip::Error);
}

TEST(Heatmap, HoverShowsExactValueAndClickReportsTheCell) {
  HeatmapWidget map;
  map.resize(700, 400);
  HeatmapData d;
  d.rows = 3;
  d.cols = 7;
  for (int i = 0; i < 21; ++i) d.values.push_back(1e-4 * (i + 1));
  d.values[10] = NAN;
  d.col_labels = {"q", "k", "v", "o", "gate", "up", "down"};
  d.value_name = "ΔL (FP4)";
  d.log_colour = true;
  map.set_data(d);
  map.show();
  QSignalSpy clicked(&map, &HeatmapWidget::cell_clicked);
  const QRect cell = map.cell_rect(2 * snip::kLayersPerBlock + 6);
  ASSERT_TRUE(cell.isValid());
  QTest::mouseClick(&map, Qt::LeftButton, {}, cell.center());
  ASSERT_EQ(clicked.count(), 1);
  EXPECT_EQ(clicked.at(0).at(0).toInt(), 20);
  EXPECT_EQ(map.cell_at(cell.center()), 20);
  EXPECT_TRUE(map.tooltip_text(20).contains("0.0021"));  // exact value, 6 significant digits
  EXPECT_TRUE(map.tooltip_text(20).contains("down"));
  EXPECT_TRUE(map.tooltip_text(10).contains("no value"));
  EXPECT_EQ(map.cell_at(QPoint(-5, -5)), -1);
}

TEST(PlanGrid, HighlightsExactlyTheDifferingLayersAndReportsClicks) {
  PlanGrid grid;
  grid.resize(500, 400);
  using snip::LinearPrecision;
  using snip::Precision;
  std::vector<LinearPrecision> a(14, LinearPrecision::uniform(Precision::fp8)), b = a;
  b[3] = LinearPrecision::uniform(Precision::fp4);
  b[9].wgrad = Precision::fp4;  // a per-role difference counts too
  grid.set_plan(2, b, "b");
  grid.set_reference(a);
  EXPECT_EQ(grid.differing_layers(), (std::vector<int>{3, 9}));
  grid.show();
  QSignalSpy clicked(&grid, &PlanGrid::layer_clicked);
  QTest::mouseClick(&grid, Qt::LeftButton, {}, grid.layer_rect(12).center());
  ASSERT_EQ(clicked.count(), 1);
  EXPECT_EQ(clicked.at(0).at(0).toInt(), 12);
  // Regression: a double click is two clicks (Qt 6 sends press, release, press, double-click,
  // release; QWidget's default double-click handler would count a third).
  const QPointF at = grid.layer_rect(12).center();
  for (QEvent::Type type : {QEvent::MouseButtonPress, QEvent::MouseButtonRelease, QEvent::MouseButtonPress,
                            QEvent::MouseButtonDblClick, QEvent::MouseButtonRelease}) {
    QMouseEvent event(type, at, grid.mapToGlobal(at), Qt::LeftButton,
                      type == QEvent::MouseButtonRelease ? Qt::NoButton : Qt::LeftButton, Qt::NoModifier);
    QApplication::sendEvent(&grid, &event);
  }
  EXPECT_EQ(clicked.count(), 3);
}
