// The Compare view's compare experiments, end to end on the real engine (`tiny` preset) and a
// real database: a run trained in the window, a `snip compare --db` launched from the view in
// the background (through the library, on a worker thread) with progress, its stored table
// listed and shown as a sortable table that exports as CSV with the arms' loss curves on one
// chart; a cancelled experiment is kept as interrupted and Resume completes it; a deleted
// checkpoint gives a clear message.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFile>
#include <QListWidget>
#include <QProgressBar>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <filesystem>
#include <functional>

#include "compare_view.h"
#include "curve_chart.h"
#include "main_window.h"
#include "qt_wait.h"
#include "run_view.h"
#include "snip/compare_recorder.h"
#include "snip/store.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

using snip_test::wait_for;

class CompareExperimentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("workbench.db");
    w_ = snip_test::open_test_window(db_);
  }
  void TearDown() override {
    if (w_) w_->close();
  }
  // Trains a 3-step tiny run in the window; it saves a checkpoint when it finishes.
  int64_t train_tiny_run() {
    RunView* rv = w_->run_view();
    snip_test::edit_run_form(
        rv, [](snip::RunSettings& s) { s.preset = "tiny", s.steps = 3, s.batch_size = 2, s.seq_len = 32; });
    QSignalSpy ended(w_.get(), &MainWindow::run_ended);
    w_->start_training();
    EXPECT_TRUE(wait_for([&] { return ended.count() == 1; }, 60000)) << w_->message_text().toStdString();
    if (ended.count() != 1) return 0;
    EXPECT_EQ(ended.at(0).at(1).toString(), "finished") << ended.at(0).at(2).toString().toStdString();
    return ended.at(0).at(0).toLongLong();
  }
  QTemporaryDir dir_;
  QString db_;
  std::unique_ptr<MainWindow> w_;
};

double cell_value(QTableWidget* t, int row, int col) {
  const QVariant v = t->item(row, col)->data(Qt::UserRole);
  return v.isValid() ? v.toDouble() : NAN;
}

TEST_F(CompareExperimentTest, LaunchedExperimentIsStoredAndShownAsASortableExportableTable) {
  const int64_t run_id = train_tiny_run();
  ASSERT_GT(run_id, 0);
  CompareView* cv = w_->compare_view();
  w_->show_view("compare");
  cv->select({}, {run_id});
  cv->experiment_steps_spin()->setValue(2);
  cv->experiment_budget_spin()->setValue(0.5);
  QSignalSpy finished(cv, &CompareView::experiment_finished);
  cv->launch_compare_experiment();
  ASSERT_TRUE(cv->experiment_running()) << w_->message_text().toStdString();
  // The window stays responsive while it runs: events are processed and progress arrives.
  ASSERT_TRUE(cv->wait_for_experiment(600000));
  ASSERT_EQ(finished.count(), 1);
  const int64_t compare_id = finished.at(0).at(0).toLongLong();
  ASSERT_GT(compare_id, 0) << w_->message_text().toStdString();
  EXPECT_EQ(cv->experiment_progress()->value(), cv->experiment_progress()->maximum());

  // Stored through the store's API, and listed.
  snip::Store store(db_.toStdString());
  const auto listed = store.list_compares();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].id, compare_id);
  EXPECT_EQ(listed[0].run_id, std::optional<int64_t>(run_id));
  const snip::CompareRecord rec = store.compare(compare_id);
  EXPECT_DOUBLE_EQ(rec.budget, 0.5);
  EXPECT_EQ(rec.steps, 2);
  ASSERT_GE(rec.rows.size(), 10u);  // BF16, SNIP at several λ, the baselines, uniform
  ASSERT_EQ(cv->compare_list()->count(), 1);
  EXPECT_EQ(cv->compare_list()->item(0)->checkState(), Qt::Checked);

  // The table: one row per arm (plus the checked run), the stored numbers, the verdicts.
  QTableWidget* t = cv->table();
  std::map<QString, int> row_of;
  for (int r = 0; r < t->rowCount(); ++r)
    if (t->item(r, CompareView::col_source)->text() == QStringLiteral("compare #%1").arg(compare_id))
      row_of[t->item(r, CompareView::col_method)->text()] = r;
  ASSERT_EQ(row_of.size(), rec.rows.size());
  int controls = 0;
  for (const snip::CompareRowRecord& arm : rec.rows) {
    const int r = row_of.at(QString::fromStdString(arm.method));
    EXPECT_DOUBLE_EQ(cell_value(t, r, CompareView::col_achieved), arm.achieved_fraction);
    if (std::isfinite(arm.train_loss_last)) {
      EXPECT_DOUBLE_EQ(cell_value(t, r, CompareView::col_train), arm.train_loss_last);
    }
    if (std::isfinite(arm.gap_train)) {  // the mean of the paired gaps: the stored gap up to rounding
      EXPECT_NEAR(cell_value(t, r, CompareView::col_gap_train), arm.gap_train, 1e-9);
    }
    const QString verdict = t->item(r, CompareView::col_verdict)->text();
    if (arm.control) {
      ++controls;
      EXPECT_TRUE(verdict.startsWith("control")) << verdict.toStdString();
    } else if (arm.lambda && std::abs(*arm.lambda - 0.1) < 1e-12) {
      EXPECT_TRUE(verdict.startsWith("SNIP reference")) << verdict.toStdString();
    } else if (arm.differs_from_snip) {
      EXPECT_TRUE(verdict.startsWith("better") || verdict.startsWith("worse")) << verdict.toStdString();
    } else {
      EXPECT_TRUE(verdict.startsWith("indistinguishable")) << verdict.toStdString();
    }
  }
  EXPECT_EQ(controls, 0);  // replicated compares have no control arms: the replicates measure the noise
  EXPECT_DOUBLE_EQ(cell_value(t, row_of.at("uniform-bf16"), CompareView::col_gap_train), 0.0);

  // Sortable by a number column: ascending train loss, unknown values last.
  t->sortItems(CompareView::col_train, Qt::AscendingOrder);
  double previous = -INFINITY;
  bool seen_nan = false;
  for (int r = 0; r < t->rowCount(); ++r) {
    const double v = cell_value(t, r, CompareView::col_train);
    if (std::isnan(v)) {
      seen_nan = true;
      continue;
    }
    EXPECT_FALSE(seen_nan) << "a number after an unknown value at row " << r;
    EXPECT_GE(v, previous) << "row " << r;
    previous = v;
  }

  // CSV in the order shown, numbers at full precision.
  const QString csv_path = dir_.filePath("compare.csv");
  cv->export_table_csv(csv_path);
  QFile csv(csv_path);
  ASSERT_TRUE(csv.open(QIODevice::ReadOnly));
  const QStringList lines = QString::fromUtf8(csv.readAll()).split('\n', Qt::SkipEmptyParts);
  ASSERT_EQ(lines.size(), t->rowCount() + 1);
  EXPECT_TRUE(lines[0].startsWith("Source,Method,Budget ρ,Achieved ρ,Train (last ")) << lines[0].toStdString();
  const double first_train = cell_value(t, 0, CompareView::col_train);
  EXPECT_NEAR(lines[1].split(',')[CompareView::col_train].toDouble(), first_train, 1e-8 * std::abs(first_train));

  // The arms' train-loss curves on one chart, from the checkpoint's step on (duplicates once).
  size_t arm_curves = 0, expected_curves = 0;
  for (const auto& arm : rec.rows) expected_curves += arm.same_plan_as.empty() && !arm.train_curve.empty();
  for (const Curve& c : cv->loss_chart()->curves())
    if (c.name.startsWith(QStringLiteral("#%1 ").arg(compare_id))) {
      ++arm_curves;
      ASSERT_EQ(c.points.size(), 2u);
      EXPECT_EQ(c.points.front().x(), double(rec.start_step + 1));
    }
  EXPECT_EQ(arm_curves, expected_curves);
  EXPECT_GT(arm_curves, 5u);
}

// Cancel keeps what was trained: a replicated compare stopped after its first finished training
// (the view's test hook, as if Cancel were pressed then) stays in the database as interrupted,
// with that training; Resume on it trains only the rest and ends with every arm's replicates.
TEST_F(CompareExperimentTest, CancelledExperimentIsKeptAndResumeCompletesIt) {
  const int64_t run_id = train_tiny_run();
  ASSERT_GT(run_id, 0);
  CompareView* cv = w_->compare_view();
  cv->select({}, {run_id});
  const auto checkpoints = snip::Store(db_.toStdString()).checkpoints(run_id);
  ASSERT_FALSE(checkpoints.empty());
  EXPECT_EQ(cv->experiment_replicates_spin()->value(), 3);  // the default K
  cv->experiment_replicates_spin()->setValue(2);
  cv->experiment_steps_spin()->setValue(2);
  cv->experiment_budget_spin()->setValue(0.5);
  cv->experiment_oracle_check()->setChecked(false);
  cv->set_stop_after_trainings(1);
  QSignalSpy finished(cv, &CompareView::experiment_finished);
  cv->launch_compare_experiment();
  ASSERT_TRUE(cv->experiment_running()) << w_->message_text().toStdString();
  ASSERT_TRUE(cv->wait_for_experiment(600000));
  ASSERT_EQ(finished.count(), 1);
  EXPECT_EQ(finished.at(0).at(0).toLongLong(), 0);
  EXPECT_TRUE(w_->message_text().contains("cancelled")) << w_->message_text().toStdString();
  EXPECT_EQ(w_->message_text().count(QStringLiteral("ancel")), 1) << "said twice: " << w_->message_text().toStdString();
  int64_t id = 0;
  size_t distinct = 0;
  {
    snip::Store store(db_.toStdString());
    const auto listed = store.list_compares();
    ASSERT_EQ(listed.size(), 1u);
    id = listed[0].id;
    EXPECT_EQ(listed[0].status, snip::RunStatus::interrupted);
    const snip::CompareRecord c = store.compare(id);
    EXPECT_EQ(c.replicates, 2);
    for (const auto& r : c.rows) distinct += r.same_plan_as.empty();
    const size_t kept = store.compare_replicates(id).size();
    EXPECT_GE(kept, 1u);
    EXPECT_LT(kept, 2 * distinct);
  }
  ASSERT_EQ(cv->compare_list()->count(), 1);
  EXPECT_TRUE(cv->compare_list()->item(0)->text().contains("interrupted"))
      << cv->compare_list()->item(0)->text().toStdString();

  // Resume the checked interrupted compare.
  cv->set_stop_after_trainings(0);
  cv->select({}, {run_id}, {id});
  cv->resume_compare_experiment();
  ASSERT_TRUE(cv->experiment_running()) << w_->message_text().toStdString();
  EXPECT_FALSE(w_->message_text().contains("cancelled")) << "while the resumed compare runs";
  ASSERT_TRUE(cv->wait_for_experiment(600000));
  ASSERT_EQ(finished.count(), 2);
  EXPECT_EQ(finished.at(1).at(0).toLongLong(), id) << w_->message_text().toStdString();
  {
    snip::Store store(db_.toStdString());
    ASSERT_EQ(store.list_compares().size(), 1u);
    const snip::CompareRecord c = store.compare(id);
    EXPECT_EQ(c.status, snip::RunStatus::finished);
    EXPECT_EQ(store.compare_replicates(id).size(), 2 * c.rows.size());  // arms with a shared plan: copies
    for (const auto& r : c.rows) {
      ASSERT_EQ(r.replicates.size(), 2u) << r.method;
      EXPECT_EQ(r.train_curve.size(), 2u) << r.method;
      EXPECT_TRUE(std::isfinite(r.train_loss_last)) << r.method;
      EXPECT_DOUBLE_EQ(r.train_loss_last, (r.replicates[0].train_loss_last + r.replicates[1].train_loss_last) / 2)
          << r.method;
    }
  }
  EXPECT_FALSE(cv->compare_list()->item(0)->text().contains("interrupted"));

  // The checkpoint directory deleted behind the workbench's back: named in the message.
  for (const auto& c : checkpoints) std::filesystem::remove_all(c.path);
  cv->launch_compare_experiment();
  EXPECT_FALSE(cv->experiment_running());
  EXPECT_TRUE(w_->message_text().contains("no longer exists")) << w_->message_text().toStdString();
  EXPECT_TRUE(w_->message_text().contains(QString::fromStdString(checkpoints.back().path)))
      << w_->message_text().toStdString();
  // The window is still usable: the table still shows the run and the compare's arms.
  EXPECT_GT(cv->table()->rowCount(), 1);
}

// The table of a checked compare follows the trainings it stores, whoever stores them (it froze
// at "1 of 8 finished" while the progress bar moved on): the workbench's poll sees each
// compare's stored trainings and status, and the view rebuilds what changed.
TEST_F(CompareExperimentTest, TheTableOfACheckedCompareFollowsItsStoredTrainings) {
  const int64_t run_id = train_tiny_run();
  ASSERT_GT(run_id, 0);
  CompareView* cv = w_->compare_view();
  w_->show_view(QStringLiteral("compare"));
  cv->select({}, {run_id});
  cv->experiment_replicates_spin()->setValue(2);
  cv->experiment_steps_spin()->setValue(2);
  cv->experiment_budget_spin()->setValue(0.5);
  cv->experiment_oracle_check()->setChecked(false);
  cv->set_stop_after_trainings(1);
  cv->launch_compare_experiment();
  ASSERT_TRUE(cv->wait_for_experiment(600000));
  const int64_t id = snip::Store(db_.toStdString()).list_compares().at(0).id;
  cv->select({}, {}, {id});
  ASSERT_TRUE(cv->notes_text().contains("Incomplete")) << cv->notes_text().toStdString();
  // The rest is trained by another process (here, another connection of this one), as a
  // `snip compare --resume` in a terminal or the experiment's own worker would store it.
  w_->workbench()->poll_now();  // the workbench has seen the database as it is now
  ASSERT_TRUE(cv->notes_text().contains("Incomplete")) << cv->notes_text().toStdString();
  {
    snip::Store other(db_.toStdString());
    auto recorder = snip::CompareRecorder::resume(other, id, 1);
    recorder->run(snip::CompareHooks{});
  }
  w_->workbench()->poll_now();
  EXPECT_FALSE(cv->notes_text().contains("Incomplete")) << cv->notes_text().toStdString();
  EXPECT_FALSE(cv->compare_list()->item(0)->text().contains("interrupted"))
      << cv->compare_list()->item(0)->text().toStdString();
}

}  // namespace
