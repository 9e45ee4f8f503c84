// The Monitor shows what is so at every moment: a run trained in the window is adopted once and
// then left when the user picks another (never forced back), a finished run is not "training",
// the run list follows the live step, and another database shows none of the old one's curves.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QDialog>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTemporaryDir>
#include <QTest>
#include <QTextBrowser>
#include <QtCharts/QChart>
#include <QtCharts/QLogValueAxis>
#include <cmath>

#include "curve_chart.h"
#include "heatmap_widget.h"
#include "main_window.h"
#include "monitor_view.h"
#include "qt_wait.h"
#include "run_view.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "stored_run.h"
#include "test_window.h"
#include "workbench.h"

using namespace snip::ui;
using snip_test::wait_for;

namespace {

using snip_test::stored_finished_run;

TEST(MonitorTruth, ALiveRunIsAdoptedOnceEndsFinishedAndANewDatabaseShowsNoneOfIt) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString db = dir.filePath("workbench.db");
  const int64_t old_run = stored_finished_run(db, "older");
  auto w = snip_test::open_test_window(db);
  MonitorView* mv = w->monitor_view();
  RunView* rv = w->run_view();
  snip_test::edit_run_form(
      rv, [](snip::RunSettings& s) { s.preset = "tiny", s.steps = 12, s.batch_size = 2, s.seq_len = 32; });
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  QTest::mouseClick(snip_test::control<QPushButton>(rv, "start"), Qt::LeftButton);
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 60000));
  ASSERT_EQ(ended.at(0).at(1).toString(), "finished") << ended.at(0).at(2).toString().toStdString();
  const int64_t live_run = ended.at(0).at(0).toLongLong();
  // Adopted, then shown from the store with its final status: finished, all 12 steps.
  ASSERT_TRUE(wait_for([&] { return mv->shown_run() == live_run && mv->train_points() == 12; }, 5000));
  ASSERT_TRUE(wait_for([&] { return mv->summary_text().startsWith("finished"); }, 5000))
      << mv->summary_text().toStdString();
  EXPECT_FALSE(mv->summary_text().contains("training"));
  const int i = mv->run_combo()->findData(qlonglong(live_run));
  ASSERT_GE(i, 0);
  EXPECT_TRUE(mv->run_combo()->itemText(i).contains("finished · 12 steps"))
      << mv->run_combo()->itemText(i).toStdString();
  // The user picks the older run: it stays shown through many refresh ticks and a data change.
  const int old_index = mv->run_combo()->findData(qlonglong(old_run));
  ASSERT_GE(old_index, 0);
  mv->run_combo()->setCurrentIndex(old_index);
  emit mv->run_combo()->activated(old_index);
  ASSERT_EQ(mv->shown_run(), old_run);
  w->workbench()->poll_now();
  for (int k = 0; k < 5; ++k) QTest::qWait(120);  // more than the 100 ms live timer, five times
  EXPECT_EQ(mv->shown_run(), old_run);
  EXPECT_EQ(mv->train_points(), 200u);
  // A new, empty database: none of the old database's curves or runs.
  const QString fresh = dir.filePath("fresh.db");
  ASSERT_TRUE(w->workbench()->open_database(fresh));
  for (int k = 0; k < 3; ++k) QTest::qWait(120);
  EXPECT_EQ(mv->shown_run(), 0);
  EXPECT_EQ(mv->train_points(), 0u);
  EXPECT_EQ(mv->run_combo()->count(), 0);
}

TEST(WindowTruth, TheQuickStartOfferOnAnEmptyDatabaseIsWholeAtOnce) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  auto w = snip_test::open_test_window(dir.filePath("empty.db"));
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->message_bar()->isVisible());
  const QPushButton* offer = nullptr;
  for (const QPushButton* b : w->message_bar()->findChildren<QPushButton*>())
    if (b->text() == "Quick start" && b->isVisible()) offer = b;
  ASSERT_NE(offer, nullptr) << w->message_text().toStdString();
  // Laid out inside the bar without a resize: wholly visible.
  const QRect inside = offer->geometry();
  EXPECT_GE(inside.left(), 0);
  EXPECT_LE(inside.right(), w->message_bar()->width());
  EXPECT_GT(inside.width(), 0);
  EXPECT_LE(inside.bottom(), w->message_bar()->height());
}

TEST(WindowTruth, HelpShowsTheReadmeInTheApplication) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  auto w = snip_test::open_test_window(dir.filePath("w.db"));
  w->show_documentation();  // what F1 runs
  QCoreApplication::processEvents();
  ASSERT_NE(w->documentation_window(), nullptr) << w->message_text().toStdString();
  EXPECT_TRUE(w->documentation_window()->isVisible());
  const auto* browser = w->documentation_window()->findChild<QTextBrowser*>("documentation");
  ASSERT_NE(browser, nullptr);
  EXPECT_TRUE(browser->toPlainText().contains("SNIP Workbench"));
  EXPECT_GT(browser->toPlainText().size(), 1000);
}

TEST(WindowTruth, TheWindowFitsASmallScreen) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  auto w = snip_test::open_test_window(dir.filePath("w.db"));
  const QSize least = w->minimumSizeHint().expandedTo(w->minimumSize());
  EXPECT_LE(least.width(), 1000) << least.width() << "x" << least.height();
  EXPECT_LE(least.height(), 600) << least.width() << "x" << least.height();
  w->resize(1000, 600);
  QCoreApplication::processEvents();
  EXPECT_EQ(w->size(), QSize(1000, 600));
}

TEST(WindowTruth, ALogScaleKeepsItsAxisLabels) {
  CurveChart chart(QStringLiteral("Loss"), QStringLiteral("nats"));
  std::vector<QPointF> points;
  for (int s = 1; s <= 100; ++s) points.emplace_back(s, 3.0 + 3.0 / s);  // 3.03 .. 6: no power of ten inside
  chart.set_curves({Curve{QStringLiteral("train"), points, {}}});
  chart.set_log_scale(true);
  chart.redraw_now();
  QLogValueAxis* axis = nullptr;
  for (QAbstractAxis* a : chart.chart()->axes(Qt::Vertical)) axis = qobject_cast<QLogValueAxis*>(a);
  ASSERT_NE(axis, nullptr);
  // Labelled ticks are the powers of the base inside the range.
  const double b = axis->base();
  const int labels =
      int(std::floor(std::log(axis->max()) / std::log(b)) - std::ceil(std::log(axis->min()) / std::log(b))) + 1;
  EXPECT_GE(labels, 3) << "base " << b << " range " << axis->min() << ".." << axis->max();
}

TEST(WindowTruth, TheClickThatActivatesTheWindowDoesNotPinALayer) {
  HeatmapWidget map;
  HeatmapData d;
  d.rows = 2;
  d.cols = 7;
  d.values.assign(14, 1.0);
  map.set_data(d);
  map.resize(400, 200);
  map.show();
  QSignalSpy clicked(&map, &HeatmapWidget::cell_clicked);
  // The window comes to the front with this click (activation, then the press, no move between).
  QApplication::setActiveWindow(&map);
  QEvent activation(QEvent::ActivationChange);
  QCoreApplication::sendEvent(&map, &activation);
  if (!map.isActiveWindow()) GTEST_SKIP() << "this platform does not activate windows";
  QTest::mouseClick(&map, Qt::LeftButton, {}, map.cell_rect(3).center());
  EXPECT_EQ(clicked.count(), 0) << "the focusing click acted on a cell";
  // The next click is meant.
  QTest::mouseClick(&map, Qt::LeftButton, {}, map.cell_rect(3).center());
  EXPECT_EQ(clicked.count(), 1);
}

}  // namespace
