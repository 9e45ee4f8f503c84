// Resuming runs in the GUI and the adaptive run options, on real widgets, a real SQLite
// database in a temp dir and the real engine on the `tiny` preset: a run stopped from the window
// and resumed from the runs table continues in the same run with losses bit-identical to an
// uninterrupted run's; a deleted or corrupt checkpoint gives an error message and leaves the
// window usable; an adaptive run with a non-default method and λ stores plans made that way; a
// stopped adaptive run resumes with its stored settings on the same trajectory.
#include <gtest/gtest.h>

#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFile>
#include <QPushButton>
#include <QSignalSpy>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <functional>

#include "main_window.h"
#include "monitor_view.h"
#include "qt_wait.h"
#include "run_view.h"
#include "snip/store.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

using snip_test::wait_for;

class ResumeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("workbench.db");
    window_ = snip_test::open_test_window(db_);
    ended_ = std::make_unique<QSignalSpy>(window_.get(), &MainWindow::run_ended);
  }
  void TearDown() override {
    ended_.reset();
    window_.reset();
  }
  // A quantized tiny run (FP4 everywhere) of `steps` steps, validation every 8.
  void set_form(int steps) {
    snip_test::edit_run_form(window_->run_view(), [steps](snip::RunSettings& s) {
      s.preset = "tiny", s.steps = steps, s.batch_size = 2, s.seq_len = 32, s.eval_every = 8;
      s.precision = "fp4", s.adaptive.reset(), s.plan.reset();  // FP4 everywhere
    });
  }
  // Waits for the next run_ended; returns (run id, status, message).
  std::tuple<qint64, QString, QString> wait_ended(int timeout_ms = 120000) {
    const int before = int(ended_->count());
    EXPECT_TRUE(wait_for([&] { return ended_->count() > before; }, timeout_ms)) << "no run_ended";
    if (ended_->count() <= before) return {0, {}, {}};
    const QList<QVariant> e = ended_->at(before);
    return {e.at(0).toLongLong(), e.at(1).toString(), e.at(2).toString()};
  }
  // Starts the form's run, which holds after step 3, and stops it there: returns the run id
  // (status interrupted). Event-driven: the worker pauses itself at that step, so how fast the
  // machine trains does not matter.
  qint64 start_and_stop() {
    const int64_t previous = window_->live_metrics()->run_id();
    TrainRequest request = window_->run_view()->make_request();
    request.pause_after_step = 3;
    window_->start_request(request);
    const auto live = window_->live_metrics();
    EXPECT_TRUE(wait_for([&] { return live->run_id() != previous && live->size() >= 3; }, 120000));
    window_->stop_training();  // stops where it holds, saving a checkpoint
    const auto [id, status, message] = wait_ended();
    EXPECT_EQ(status, "interrupted") << message.toStdString();
    return id;
  }
  void select_run(qint64 run_id) {
    if (!window_->run_view()->select_run(run_id)) ADD_FAILURE() << "run " << run_id << " is not in the runs table";
  }

  QTemporaryDir dir_;
  QString db_;
  std::unique_ptr<MainWindow> window_;
  std::unique_ptr<QSignalSpy> ended_;
};

TEST_F(ResumeTest, StoppedRunResumedFromTheTableMatchesAnUninterruptedRunBitForBit) {
  constexpr int kSteps = 24;
  set_form(kSteps);
  window_->start_training();
  const auto [straight, straight_status, straight_message] = wait_ended();
  ASSERT_EQ(straight_status, "finished") << straight_message.toStdString();

  const qint64 split = start_and_stop();
  snip::Store store(db_.toStdString());
  const auto stopped_at = store.checkpoints(split);
  ASSERT_EQ(stopped_at.size(), 1u);
  ASSERT_EQ(stopped_at[0].step, 3) << "the run holds after step 3 and stops there";

  // Resume from the runs table: the button is enabled for the interrupted run.
  RunView* rv = window_->run_view();
  window_->workbench()->poll_now();
  emit window_->workbench()->data_changed();
  select_run(split);
  QPushButton* resume_run = snip_test::control<QPushButton>(rv, "resume_run");
  ASSERT_TRUE(resume_run->isEnabled());
  QTest::mouseClick(resume_run, Qt::LeftButton);
  EXPECT_FALSE(snip_test::control<QPushButton>(rv, "resume_checkpoint")->isEnabled());  // training again
  const auto [resumed, resumed_status, resumed_message] = wait_ended();
  ASSERT_EQ(resumed_status, "finished") << resumed_message.toStdString();
  EXPECT_EQ(resumed, split) << "a resumed run records into the run that saved the checkpoint";

  EXPECT_EQ(store.runs().size(), 2u);
  EXPECT_EQ(store.run(split).status, snip::RunStatus::finished);
  const auto a = store.metrics(straight), b = store.metrics(split);
  ASSERT_EQ(a.size(), size_t(kSteps));
  ASSERT_EQ(b.size(), size_t(kSteps));
  int evaluated = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].step, a[i].step);
    EXPECT_EQ(b[i].train_loss, a[i].train_loss) << "step " << a[i].step;  // bit-identical
    EXPECT_EQ(b[i].val_loss, a[i].val_loss) << "step " << a[i].step;
    EXPECT_EQ(b[i].lr, a[i].lr) << "step " << a[i].step;
    evaluated += a[i].val_loss.has_value();
  }
  EXPECT_GT(evaluated, 0);
  const auto cps = store.checkpoints(split);
  ASSERT_EQ(cps.size(), 2u);
  EXPECT_EQ(cps.back().step, kSteps);
  EXPECT_TRUE(std::filesystem::exists(cps.back().path + "/model.safetensors"));
  // The Monitor shows the whole run: the steps before the checkpoint and the resumed ones.
  EXPECT_TRUE(wait_for([&] { return window_->monitor_view()->train_points() == kSteps; }, 5000))
      << window_->monitor_view()->train_points();
  EXPECT_TRUE(snip_test::control<QPushButton>(rv, "start")->isEnabled());
}

TEST_F(ResumeTest, DeletedOrCorruptCheckpointShowsAnErrorAndTheWindowStaysUsable) {
  set_form(100000);
  const qint64 run_id = start_and_stop();
  snip::Store store(db_.toStdString());
  const auto cps = store.checkpoints(run_id);
  ASSERT_EQ(cps.size(), 1u);
  std::filesystem::remove_all(cps[0].path);

  // 1. The runs table's newest checkpoint of the run was deleted.
  window_->workbench()->poll_now();
  emit window_->workbench()->data_changed();
  select_run(run_id);
  window_->run_view()->resume_selected_run();
  auto [id, status, message] = wait_ended(30000);
  EXPECT_EQ(status, "failed");
  EXPECT_FALSE(window_->training());
  const QString shown = window_->message_text();
  EXPECT_TRUE(shown.contains(QStringLiteral("cannot resume"))) << shown.toStdString();
  EXPECT_TRUE(shown.contains(QString::fromStdString(cps[0].path))) << shown.toStdString();
  EXPECT_EQ(store.run(run_id).status, snip::RunStatus::interrupted) << "a failed resume leaves the run as it was";

  // 2. A directory that is not a checkpoint (a corrupt config.json), through the picker's path.
  const QString corrupt = dir_.filePath("corrupt");
  ASSERT_TRUE(QDir().mkpath(corrupt));
  {
    QFile f(corrupt + "/config.json");
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("{\"hidden_size\": ");
  }
  window_->run_view()->resume_from_checkpoint(corrupt);
  std::tie(id, status, message) = wait_ended(30000);
  EXPECT_EQ(status, "failed");
  EXPECT_TRUE(window_->message_text().contains(corrupt)) << window_->message_text().toStdString();

  // The window is usable: a new run starts and finishes.
  RunView* rv = window_->run_view();
  QPushButton* start = snip_test::control<QPushButton>(rv, "start");
  EXPECT_TRUE(start->isEnabled());
  EXPECT_TRUE(snip_test::control<QPushButton>(rv, "resume_checkpoint")->isEnabled());
  set_form(3);
  QTest::mouseClick(start, Qt::LeftButton);
  std::tie(id, status, message) = wait_ended();
  EXPECT_EQ(status, "finished") << message.toStdString();
  EXPECT_EQ(store.metrics(id).size(), 3u);
}

TEST_F(ResumeTest, AdaptiveRunWithANonDefaultMethodAndLambdaStoresPlansMadeThatWay) {
  set_form(4);
  RunView* rv = window_->run_view();
  snip_test::edit_run_form(rv, [&](snip::RunSettings& s) {
    s.adaptive = rv->adaptive_settings();
    s.adaptive->method = "min-rel-err", s.adaptive->lambda = 0.35, s.adaptive->budget = 0.4;
    s.adaptive->replan_every = 2, s.adaptive->bf16_probe_every = 0, s.adaptive->noise_passes = 2;
    s.adaptive->ties = true;
  });
  ASSERT_EQ(rv->adaptive_settings().method, "min-rel-err");  // a method the form offers
  window_->start_training();
  const auto [run_id, status, message] = wait_ended();
  ASSERT_EQ(status, "finished") << message.toStdString();

  snip::Store store(db_.toStdString());
  const snip::RunInfo run = store.run(run_id);
  EXPECT_EQ(run.spec.method, "min-rel-err");
  const nlohmann::json& adaptive = run.spec.train_config.at("adaptive");
  EXPECT_EQ(adaptive.at("method"), "min-rel-err");
  EXPECT_DOUBLE_EQ(adaptive.at("lambda").get<double>(), 0.35);
  EXPECT_EQ(adaptive.at("round").at("noise_passes"), 2);
  EXPECT_EQ(adaptive.at("ties"), true);
  const auto timeline = store.plan_timeline(run_id);
  ASSERT_EQ(timeline.size(), 2u);  // before steps 1 and 3
  for (const auto& entry : timeline) {
    const snip::PlanRecord p = store.plan(entry.plan_id);
    EXPECT_EQ(p.plan.method, "min-rel-err");
    EXPECT_DOUBLE_EQ(p.solve.options.at("lambda").get<double>(), 0.35);
    EXPECT_EQ(p.solve.options.at("ties"), true);
    EXPECT_GE(p.plan.achieved_fp4_fraction, 0.4 - 1e-12);
    // Tied: q/k/v of every block share one precision.
    for (int l = 0; l < 2; ++l) {
      const std::string b = "model.layers." + std::to_string(l) + ".self_attn.";
      EXPECT_EQ(p.plan.layers.at(b + "q_proj").fprop, p.plan.layers.at(b + "k_proj").fprop);
      EXPECT_EQ(p.plan.layers.at(b + "q_proj").fprop, p.plan.layers.at(b + "v_proj").fprop);
    }
  }
  EXPECT_EQ(store.stats_rounds(run_id).size(), 2u);
}

}  // namespace

TEST_F(ResumeTest, StoppedAdaptiveRunResumesWithItsSettingsOnTheSameTrajectory) {
  constexpr int kSteps = 12;
  set_form(kSteps);
  RunView* rv = window_->run_view();
  snip_test::edit_run_form(rv, [&](snip::RunSettings& s) {
    s.adaptive = rv->adaptive_settings();
    s.adaptive->budget = 0.5, s.adaptive->replan_every = 4, s.adaptive->bf16_probe_every = 0;
    s.adaptive->lambda = 0.2;
  });
  window_->start_training();
  const auto [straight, straight_status, straight_message] = wait_ended();
  ASSERT_EQ(straight_status, "finished") << straight_message.toStdString();
  const qint64 split = start_and_stop();
  snip::Store store(db_.toStdString());
  ASSERT_EQ(store.checkpoints(split).size(), 1u);
  ASSERT_EQ(store.checkpoints(split)[0].step, 3) << "the run holds after step 3 and stops there";

  // The form now says something else: the resumed run keeps its own stored settings.
  snip_test::edit_run_form(rv, [](snip::RunSettings& s) { s.adaptive->replan_every = 1, s.adaptive->lambda = 5.0; });
  window_->workbench()->poll_now();
  emit window_->workbench()->data_changed();
  select_run(split);
  rv->resume_selected_run();
  const auto [resumed, status, message] = wait_ended();
  ASSERT_EQ(status, "finished") << message.toStdString();
  EXPECT_EQ(resumed, split);

  const auto a = store.metrics(straight), b = store.metrics(split);
  ASSERT_EQ(a.size(), size_t(kSteps));
  ASSERT_EQ(b.size(), size_t(kSteps));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(b[i].train_loss, a[i].train_loss) << "step " << a[i].step;  // bit-identical
    EXPECT_EQ(b[i].fp4_fraction, a[i].fp4_fraction) << "step " << a[i].step;
  }
  const auto tl_a = store.plan_timeline(straight), tl_b = store.plan_timeline(split);
  ASSERT_EQ(tl_a.size(), 3u);  // plans before steps 1, 5, 9
  ASSERT_EQ(tl_b.size(), tl_a.size());
  for (size_t i = 0; i < tl_a.size(); ++i) {
    EXPECT_EQ(tl_b[i].first_step, tl_a[i].first_step);
    EXPECT_EQ(tl_b[i].last_step, tl_a[i].last_step);
    EXPECT_DOUBLE_EQ(store.plan(tl_b[i].plan_id).solve.options.at("lambda").get<double>(), 0.2);
  }
}
