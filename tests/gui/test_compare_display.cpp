// The Compare view shows the evidence of a replicated compare: a real database holding compares
// inserted through the Store API with known replicate values, opened in the real window. The
// table's cells (gap to BF16 and difference to SNIP as mean ± 95% half-width, recomputed here
// from the values with t_{0.975, 2} written out), the verdicts and their colours, the notes
// (uniform FP4 indistinguishable from BF16, SNIP's regret to the oracle, one replicate), the
// stored train window, uniform arms without a budget, stable colours whatever else is checked,
// the replicate bands and the gap error bars; screenshots at 1280×800 and 1024×700.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QCoreApplication>
#include <QDir>
#include <QFile>
#include <QGroupBox>
#include <QHeaderView>
#include <QListWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "compare_report.h"
#include "compare_view.h"
#include "curve_chart.h"
#include "gap_chart.h"
#include "interrupted_compare.h"
#include "main_window.h"
#include "snip/model_config.h"
#include "snip/plan.h"
#include "snip/store.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

constexpr double kT975Dof2 = 4.302652729911275;  // Student t, 97.5% quantile, 2 degrees of freedom

QString shot_path(const QString& name) {
  const QString dir = QStringLiteral(SNIP_SCREENSHOT_DIR "/compare");
  QDir().mkpath(dir);
  return dir + "/" + name + ".png";
}

// An arm: method, λ, and per replicate r the train and validation loss offsets from BF16's.
struct Arm {
  std::string method;
  std::optional<double> lambda;
  std::vector<double> train, val;  // loss of replicate r
};

const std::vector<double> kBf16Train = {3.000, 3.010, 3.020}, kBf16Val = {3.100, 3.110, 3.125};

std::vector<double> plus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] + b[i];
  return out;
}

// The six arms: SNIP; min-err clearly worse; random clearly better; uniform FP4 whose gaps straddle
// 0 (precision does not matter); the oracle; BF16.
std::vector<Arm> replicated_arms() {
  const std::vector<double> snip_t = plus(kBf16Train, {0.010, 0.012, 0.011}),
                            snip_v = plus(kBf16Val, {0.011, 0.013, 0.012});
  return {
      Arm{"uniform-bf16", std::nullopt, kBf16Train, kBf16Val},
      Arm{"snip λ=0.1", 0.1, snip_t, snip_v},
      Arm{"min-err", std::nullopt, plus(snip_t, {0.0050, 0.0060, 0.0055}), plus(snip_v, {0.004, 0.005, 0.006})},
      Arm{"random s1", std::nullopt, plus(snip_t, {-0.0040, -0.0042, -0.0041}),
          plus(snip_v, {-0.002, -0.003, -0.0025})},
      Arm{"uniform-fp4", std::nullopt, plus(kBf16Train, {0.010, -0.010, 0.002}),
          plus(kBf16Val, {0.008, -0.009, 0.001})},
      Arm{"oracle", std::nullopt, plus(snip_t, {-0.002, -0.003, -0.0025}), plus(snip_v, {-0.001, -0.002, -0.0015})}};
}

// Stores a compare of `arms` (K = the arms' replicate count), 5 steps per arm; `plans`: the
// stored plan of an arm, by method.
int64_t insert_compare(snip::Store& store, const std::vector<Arm>& arms,
                       const std::map<std::string, int64_t>& plans = {}) {
  snip::CompareRecord c;
  c.checkpoint = "/tmp/ck";
  c.start_step = 100;
  c.budget = 0.75;
  c.recipe = "snip";
  c.steps = 5;
  c.last_window = 50;  // longer than the arms: the train loss is the mean of their 5 steps
  c.replicates = int64_t(arms.front().train.size());
  c.options = {{"snip_reference", "snip λ=0.1"}};
  for (const Arm& a : arms) {
    snip::CompareRowRecord row;
    row.method = a.method;
    row.lambda = a.lambda;
    row.achieved_fraction = a.method == "uniform-fp4" ? 1.0 : a.method == "uniform-bf16" ? 0.0 : 0.75;
    if (plans.count(a.method)) row.plan_id = plans.at(a.method);
    double t = 0, v = 0;
    for (size_t r = 0; r < a.train.size(); ++r) {
      snip::CompareReplicateRecord x;
      x.train_loss_last = a.train[r];
      x.val_loss_plan = a.val[r];
      x.val_loss_bf16 = a.val[r];
      for (int s = 0; s < 5; ++s) x.train_curve.push_back(a.train[r] + 0.01 * (4 - s));
      row.replicates.push_back(x);
      t += a.train[r] / double(a.train.size());
      v += a.val[r] / double(a.val.size());
    }
    row.train_loss_last = t;
    row.val_loss_plan = v;
    for (int s = 0; s < 5; ++s) row.train_curve.push_back(t + 0.01 * (4 - s));
    c.rows.push_back(row);
  }
  return store.insert_compare(c);
}

// mean ± t·sd/√n of the values, formatted as the table shows it (computed here, not by the library).
QString expected_pm(const std::vector<double>& x) {
  double sum = 0;
  for (double v : x) sum += v;
  const double mean = sum / double(x.size());
  if (x.size() < 2) return QString::asprintf("%+.4f", mean);
  double ss = 0;
  for (double v : x) ss += (v - mean) * (v - mean);
  const double half = kT975Dof2 * std::sqrt(ss / double(x.size() - 1)) / std::sqrt(double(x.size()));
  return QString::asprintf("%+.4f ± %.4f", mean, half);
}
std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] - b[i];
  return out;
}

class CompareDisplayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("w.db");
  }
  std::unique_ptr<MainWindow> open_window(QSize size = {1280, 800}) {
    auto w = snip_test::open_test_window(db_, size);
    w->show_view("compare");
    QCoreApplication::processEvents();
    return w;
  }
  // method -> table row of compare #id
  static std::map<std::string, int> rows_of(QTableWidget* t, int64_t id) {
    std::map<std::string, int> out;
    for (int r = 0; r < t->rowCount(); ++r)
      if (t->item(r, CompareView::col_source)->text() == QStringLiteral("compare #%1").arg(id))
        out[t->item(r, CompareView::col_method)->text().toStdString()] = r;
    return out;
  }
  QTemporaryDir dir_;
  QString db_;
};

TEST_F(CompareDisplayTest, ReplicatedCompareShowsIntervalsVerdictsAndNotes) {
  const std::vector<Arm> arms = replicated_arms();
  int64_t id = 0;
  {
    snip::Store store(db_.toStdString());
    id = insert_compare(store, arms);
  }
  auto w = open_window();
  CompareView* cv = w->compare_view();
  // The newest compare is shown by default, without the runs that would squeeze its curves.
  ASSERT_EQ(cv->compare_list()->count(), 1);
  EXPECT_EQ(cv->compare_list()->item(0)->checkState(), Qt::Checked);
  QTableWidget* t = cv->table();
  const auto row = rows_of(t, id);
  ASSERT_EQ(row.size(), arms.size());
  const Arm& snip_arm = arms[1];
  for (const Arm& a : arms) {
    const int r = row.at(a.method);
    SCOPED_TRACE(a.method);
    EXPECT_EQ(t->item(r, CompareView::col_gap_train)->text(), expected_pm(minus(a.train, kBf16Train)));
    EXPECT_EQ(t->item(r, CompareView::col_gap_val)->text(), expected_pm(minus(a.val, kBf16Val)));
    if (a.method != snip_arm.method) {
      EXPECT_EQ(t->item(r, CompareView::col_vs_snip)->text(), expected_pm(minus(a.train, snip_arm.train)));
    }
  }
  auto verdict = [&](const char* method) { return t->item(row.at(method), CompareView::col_verdict); };
  EXPECT_EQ(verdict("min-err")->text(), "worse");
  EXPECT_EQ(verdict("random s1")->text(), "better");
  EXPECT_EQ(verdict("uniform-fp4")->text(), "indistinguishable");  // its replicates spread widely
  EXPECT_EQ(verdict("oracle")->text(), "better");
  EXPECT_EQ(verdict("snip λ=0.1")->text(), "SNIP reference");
  EXPECT_TRUE(t->item(row.at("snip λ=0.1"), CompareView::col_vs_snip)->text().isEmpty());
  // Worse is red, better is not.
  const QColor worse = verdict("min-err")->foreground().color(), better = verdict("random s1")->foreground().color();
  EXPECT_GT(worse.red(), worse.green() + 60);
  EXPECT_GT(better.green(), better.red() + 60);
  // A uniform arm has no budget; a planned arm has the compare's.
  EXPECT_TRUE(std::isnan(t->item(row.at("uniform-fp4"), CompareView::col_budget)->data(Qt::UserRole).toDouble()));
  EXPECT_DOUBLE_EQ(t->item(row.at("min-err"), CompareView::col_budget)->data(Qt::UserRole).toDouble(), 0.75);
  // The train loss is the mean over the stored window, here the arms' 5 steps, and says so.
  EXPECT_EQ(t->horizontalHeaderItem(CompareView::col_train)->text(), "Train\n(last 5)");
  // The notes: K, uniform FP4 indistinguishable from BF16 (train and val), SNIP's regret to the oracle.
  const QString notes = cv->notes_text();
  EXPECT_TRUE(notes.contains("3 replicates per arm")) << notes.toStdString();
  EXPECT_TRUE(notes.contains("Precision does not matter in this regime: the plans cannot be told apart"))
      << notes.toStdString();
  const std::vector<double> regret_train = minus(minus(snip_arm.train, kBf16Train), minus(arms[5].train, kBf16Train));
  EXPECT_TRUE(notes.contains("Regret of snip λ=0.1 to the oracle")) << notes.toStdString();
  EXPECT_TRUE(notes.contains(expected_pm(regret_train))) << notes.toStdString();
  // The gap chart: one error bar per arm, SNIP's shaded; the loss chart: one band per arm.
  ASSERT_EQ(cv->gap_chart()->bars().size(), arms.size());
  EXPECT_TRUE(cv->gap_chart()->bars()[1].reference);
  EXPECT_TRUE(cv->gap_chart()->isVisible());
  cv->loss_chart()->redraw_now();
  EXPECT_EQ(cv->loss_chart()->bands_drawn(), int(arms.size()));
  cv->loss_chart()->set_bands_visible(false);
  cv->loss_chart()->redraw_now();
  EXPECT_EQ(cv->loss_chart()->bands_drawn(), 0);
  cv->loss_chart()->set_bands_visible(true);
  cv->loss_chart()->redraw_now();
  ASSERT_TRUE(w->grab().save(shot_path("replicated-1280x800")));

  // CSV: an interval column is followed by its half-width.
  const QString csv_path = dir_.filePath("t.csv");
  cv->export_table_csv(csv_path);
  QFile csv(csv_path);
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  const QString header = QString::fromUtf8(csv.readLine());
  EXPECT_TRUE(header.contains("Gap train,Gap train ±95%,")) << header.toStdString();

  // At 1024×680 every column, up to "Pred. ΔL", is inside the table.
  w->resize(1024, 680);
  QCoreApplication::processEvents();
  cv->loss_chart()->redraw_now();
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->grab().save(shot_path("replicated-1024x680")));
  EXPECT_EQ(w->width(), 1024);
  // The gap chart's legend stays inside the chart (it used to cut "SNIP (train)" at this width).
  const GapChart::Legend legend = cv->gap_chart()->legend();
  EXPECT_GE(legend.left, 0);
  EXPECT_LE(legend.right, cv->gap_chart()->width()) << "legend ends at " << legend.right;
  for (int c = 0; c < CompareView::num_columns; ++c)
    EXPECT_LE(t->horizontalHeader()->sectionViewportPosition(c) + t->horizontalHeader()->sectionSize(c),
              t->viewport()->width())
        << "column " << c;
  // Readable: four arms' verdicts in view without scrolling the page (the window's scroll area
  // showed one row and a half), and every verdict whole (not elided).
  const QWidget* page = cv->parentWidget();  // the tab's scroll area's viewport
  const QRect visible(page->mapTo(w.get(), QPoint(0, 0)), page->size());
  for (int r = 0; r < 4; ++r) {
    const QRect cell = t->visualItemRect(t->item(r, CompareView::col_verdict));
    const QRect in_window(t->viewport()->mapTo(w.get(), cell.topLeft()), cell.size());
    EXPECT_TRUE(visible.contains(in_window)) << "row " << r << "'s verdict is out of view";
  }
  for (int r = 0; r < t->rowCount(); ++r) {
    const QString v = t->item(r, CompareView::col_verdict)->text();
    EXPECT_LE(t->fontMetrics().horizontalAdvance(v) + 8, t->columnWidth(CompareView::col_verdict)) << v.toStdString();
  }
  w->close();
}

TEST_F(CompareDisplayTest, OneReplicateSaysThereIsNoInterval) {
  std::vector<Arm> arms = replicated_arms();
  for (Arm& a : arms) a.train.resize(1), a.val.resize(1);
  int64_t id = 0;
  {
    snip::Store store(db_.toStdString());
    id = insert_compare(store, arms);
  }
  auto w = open_window();
  CompareView* cv = w->compare_view();
  cv->select({}, {}, {id});
  QTableWidget* t = cv->table();
  const auto row = rows_of(t, id);
  ASSERT_EQ(row.size(), arms.size());
  for (const Arm& a : arms) {
    SCOPED_TRACE(a.method);
    const int r = row.at(a.method);
    EXPECT_FALSE(t->item(r, CompareView::col_gap_train)->text().contains("±"));
    EXPECT_EQ(t->item(r, CompareView::col_gap_train)->text(), expected_pm(minus(a.train, kBf16Train)));
    if (a.method != "snip λ=0.1") {
      EXPECT_EQ(t->item(r, CompareView::col_verdict)->text(), "indistinguishable · no interval (1 replicate)");
    }
  }
  EXPECT_TRUE(cv->notes_text().contains("No interval (1 replicate)")) << cv->notes_text().toStdString();
  cv->loss_chart()->redraw_now();
  EXPECT_EQ(cv->loss_chart()->bands_drawn(), 0);  // one replicate: no band
  ASSERT_TRUE(w->grab().save(shot_path("one-replicate-1280x800")));
  w->close();
}

TEST_F(CompareDisplayTest, UnpairedCompareIsNamedAndTheRestShown) {
  int64_t good = 0, bad = 0;
  {
    snip::Store store(db_.toStdString());
    good = insert_compare(store, replicated_arms());
    std::vector<Arm> arms = replicated_arms();
    arms[2].train.resize(2), arms[2].val.resize(2);  // min-err lost a replicate
    bad = insert_compare(store, arms);
  }
  auto w = open_window();
  CompareView* cv = w->compare_view();
  cv->select({}, {}, {good, bad});
  EXPECT_EQ(rows_of(cv->table(), good).size(), 6u);
  EXPECT_TRUE(rows_of(cv->table(), bad).empty());
  const QString notes = cv->notes_text();
  EXPECT_TRUE(notes.contains(QStringLiteral("Compare #%1</b> cannot be shown").arg(bad))) << notes.toStdString();
  EXPECT_TRUE(notes.contains("has 2 replicates")) << notes.toStdString();
  w->close();
}

TEST_F(CompareDisplayTest, ArmColoursAreStableWhateverElseIsChecked) {
  int64_t first = 0, second = 0;
  {
    snip::Store store(db_.toStdString());
    first = insert_compare(store, replicated_arms());
    std::vector<Arm> fewer = replicated_arms();
    fewer.erase(fewer.begin() + 2, fewer.begin() + 4);  // without min-err and random s1: others shift up
    second = insert_compare(store, fewer);
  }
  auto swatches = [](CompareView* cv, int64_t id) {
    std::map<std::string, QRgb> out;
    QTableWidget* t = cv->table();
    for (const auto& [method, r] : rows_of(t, id))
      out[method] = t->item(r, CompareView::col_method)->icon().pixmap(12, 12).toImage().pixel(6, 6);
    return out;
  };
  auto a = open_window();
  a->compare_view()->select({}, {}, {first});
  const auto colours_a = swatches(a->compare_view(), first);
  auto b = open_window();
  b->compare_view()->select({}, {}, {second, first});
  const auto colours_b = swatches(b->compare_view(), second), colours_b_first = swatches(b->compare_view(), first);
  ASSERT_EQ(colours_a.size(), 6u);
  for (const auto& [method, rgb] : colours_b) {
    EXPECT_EQ(rgb, colours_a.at(method)) << method;
    EXPECT_EQ(rgb, method_colour(method).rgb()) << method;
  }
  EXPECT_EQ(colours_b_first, colours_a);
  // The colour depends on the name only: the same on every launch (no per-process hash seed).
  EXPECT_EQ(method_colour("random s7").rgb(), method_colour(std::string("random s") + "7").rgb());
  EXPECT_NE(method_colour("random s1").rgb(), method_colour("random s2").rgb());
  a->close();
  b->close();
}

TEST_F(CompareDisplayTest, AClickOnAnArmShowsItsPlanGridAndThePlanListFiltersByCompare) {
  int64_t id = 0, snip_plan = 0, fp4_plan = 0, other_plan = 0;
  {
    snip::Store store(db_.toStdString());
    const snip::ModelDims dims = snip::preset_config("tiny").dims();
    snip::Plan p = snip::uniform_plan(dims, snip::Precision::fp8);
    p.method = "snip";
    snip_plan = store.add_plan(p);
    p = snip::uniform_plan(dims, snip::Precision::fp4);
    p.method = "uniform-fp4";
    fp4_plan = store.add_plan(p);
    p.method = "solved elsewhere";
    other_plan = store.add_plan(p);
    id = insert_compare(store, replicated_arms(), {{"snip λ=0.1", snip_plan}, {"uniform-fp4", fp4_plan}});
  }
  auto w = open_window();
  CompareView* cv = w->compare_view();
  cv->select({}, {}, {id});
  ASSERT_TRUE(cv->grids().empty());  // no plan checked yet
  QTableWidget* t = cv->table();
  const std::map<std::string, int> rows = rows_of(t, id);
  ASSERT_TRUE(rows.count("snip λ=0.1"));
  auto click = [&](const std::string& method) {
    const QRect cell = t->visualItemRect(t->item(rows_of(t, id).at(method), CompareView::col_method));
    QTest::mouseClick(t->viewport(), Qt::LeftButton, {}, cell.center());
    QCoreApplication::processEvents();
  };
  // The plan list's plans: every one, or only the checked ones.
  auto plans = [&](bool only_checked) {
    std::set<int64_t> ids;
    for (int i = 0; i < cv->plan_list()->count(); ++i)
      if (!only_checked || cv->plan_list()->item(i)->checkState() == Qt::Checked)
        ids.insert(cv->plan_list()->item(i)->data(Qt::UserRole).toLongLong());
    return ids;
  };
  click("snip λ=0.1");
  ASSERT_EQ(cv->grids().size(), 1u);  // the arm's plan, drawn
  EXPECT_EQ(plans(true), std::set<int64_t>{snip_plan});
  click("uniform-fp4");
  EXPECT_EQ(cv->grids().size(), 2u);  // beside the first, compared with it
  click("min-err");                   // an arm without a stored plan: nothing changes
  EXPECT_EQ(cv->grids().size(), 2u);

  // The plan list shows every plan, or only the compare's arms' plans.
  auto* filter = cv->findChild<QComboBox*>(QStringLiteral("planFilter"));
  ASSERT_NE(filter, nullptr);
  EXPECT_EQ(plans(false), (std::set<int64_t>{snip_plan, fp4_plan, other_plan}));
  filter->setCurrentIndex(filter->findData(qlonglong(id)));
  EXPECT_EQ(plans(false), (std::set<int64_t>{snip_plan, fp4_plan}));
  EXPECT_EQ(cv->grids().size(), 2u);  // the checked plans stay checked and drawn
}

TEST(CompareReport, PlansOfOneRunHaveLabelsThatTellThemApart) {
  std::vector<snip::StatsRoundInfo> rounds(2);
  rounds[0].id = 7, rounds[0].step = 150;
  rounds[1].id = 8, rounds[1].step = 300;
  snip::PlanRecord a, b;
  a.id = 40, b.id = 41;
  a.plan.method = b.plan.method = "snip";
  a.plan.budget = b.plan.budget = 0.75;
  a.plan.achieved_fp4_fraction = b.plan.achieved_fp4_fraction = 0.767;
  a.solve.run_id = b.solve.run_id = 3;
  a.solve.stats_round_id = 7;
  b.solve.stats_round_id = 8;
  EXPECT_TRUE(plan_label(a, rounds).contains("run #3, step 150")) << plan_label(a, rounds).toStdString();
  EXPECT_TRUE(plan_label(b, rounds).contains("run #3, step 300")) << plan_label(b, rounds).toStdString();
  snip::PlanRecord arm = a;
  arm.solve.options = {{"compare", true}};
  EXPECT_TRUE(plan_label(arm, rounds).contains("compare arm")) << plan_label(arm, rounds).toStdString();
}

// The gap chart's title fits at every width down to its minimum (the full title was cut at both
// edges when two checked plans' grids left the chart narrow, as in the 1280 × 800 window).
TEST(GapChartTitle, FitsDownToTheMinimumWidth) {
  GapChart chart;
  QFont bold = chart.font();
  bold.setBold(true);
  for (int w : {380, 300, 260, chart.minimumSizeHint().width()}) {
    chart.resize(w, 300);
    EXPECT_LE(QFontMetrics(bold).horizontalAdvance(chart.title()), w) << chart.title().toStdString();
  }
  chart.resize(600, 300);
  EXPECT_EQ(chart.title(), QString("Gap to BF16, mean ± 95% interval"));
}

}  // namespace

namespace {

// An interrupted compare (two jobs stopped after five trainings): bf16 and SNIP have all three
// replicates, min-err only one, uniform FP4 two. The gap chart marks the incomplete arms (dashed
// bars, "k/K" after the name) and draws the complete ones as before.
TEST(IncompleteCompareChart, ArmsWithUnfinishedReplicatesAreMarked) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString db = dir.filePath("partial.db");
  int64_t id = 0;
  {
    snip::Store store(db.toStdString());
    id = snip_test::insert_interrupted_compare(store, "/tmp/ck", {{2, 2}, {3, 1}, {3, 3}});
  }
  auto w = snip_test::open_test_window(db);
  w->show_view("compare");
  QCoreApplication::processEvents();
  CompareView* cv = w->compare_view();
  cv->select({}, {}, {id});
  GapChart* chart = cv->gap_chart();
  std::map<QString, size_t> at;
  for (size_t i = 0; i < chart->bars().size(); ++i) at[chart->bars()[i].label] = i;
  ASSERT_TRUE(at.count("snip λ=0.1") && at.count("min-err") && at.count("uniform-fp4"));
  const GapBar& snip_bar = chart->bars()[at["snip λ=0.1"]];
  EXPECT_FALSE(snip_bar.incomplete());
  EXPECT_EQ(chart->row_label(at["snip λ=0.1"]), "snip λ=0.1");
  const GapBar& min_err = chart->bars()[at["min-err"]];
  EXPECT_TRUE(min_err.incomplete());
  EXPECT_EQ(min_err.finished, 1);
  EXPECT_EQ(min_err.asked, 3);
  EXPECT_EQ(chart->row_label(at["min-err"]), "min-err 1/3");
  EXPECT_EQ(chart->row_label(at["uniform-fp4"]), "uniform-fp4 2/3");
  // The table's losses of an arm are the mean of its finished replicates, not "—".
  QTableWidget* t = cv->table();
  for (int r = 0; r < t->rowCount(); ++r)
    if (t->item(r, CompareView::col_method)->text() == "snip λ=0.1") {
      const double mean = (3.1 + 0.012 + 3.1 + 0.024 + 3.1 + 0.036) / 3.0;
      EXPECT_EQ(t->item(r, CompareView::col_train)->text(), QString::number(mean, 'f', 4));
    }
  ASSERT_TRUE(w->grab().save(shot_path("incomplete-compare-1280x800")));
}

}  // namespace
