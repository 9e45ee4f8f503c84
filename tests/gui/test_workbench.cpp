// Workbench tests on real widgets, a real SQLite database in a temp dir and the real engine on
// the `tiny` preset: training runs and their metrics, the budget slider and pins re-solving the
// ILP, comparing plans, exporting a plan the trainer accepts, engine errors shown without
// breaking the window, runs written by another process, closing during training, screenshots.
#include <gtest/gtest.h>
#include <sys/mount.h>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QImage>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <filesystem>
#include <functional>
#include <set>

#include "compare_view.h"
#include "heatmap_widget.h"
#include "main_window.h"
#include "monitor_view.h"
#include "plan_grid.h"
#include "plan_view.h"
#include "qt_wait.h"
#include "run_command.h"
#include "run_view.h"
#include "sensitivity_view.h"
#include "snip/atomic_file.h"
#include "snip/model_config.h"
#include "snip/plan.h"
#include "snip/plan_export.h"
#include "snip/recorded_training.h"
#include "snip/run_recorder.h"
#include "snip/store.h"
#include "snip/trainer.h"
#include "stored_run.h"
#include "synthetic_stats.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

using snip_test::wait_for;

class WorkbenchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("workbench.db");
  }
  // A database holding one synthetic statistics round of `preset`'s shape (test data only).
  void seed_stats(const std::string& preset, int64_t step = 100) {
    snip::Store store(db_.toStdString());
    store.add_stats_round(snip::test::synthetic_stats_round(snip::preset_config(preset).dims(), 2048, step));
  }
  std::unique_ptr<MainWindow> open_window() { return snip_test::open_test_window(db_); }
  // Waits until the plan view shows a plan for the current controls.
  static bool wait_plan(PlanView* view, QSignalSpy& shown, int count) {
    return wait_for([&] { return shown.count() >= count && !view->solving(); });
  }
  void set_tiny_form(RunView* rv, int steps) {
    snip_test::edit_run_form(rv, [steps](snip::RunSettings& s) {
      s.preset = "tiny", s.steps = steps, s.batch_size = 2, s.seq_len = 32;
      s.precision = "fp4", s.adaptive.reset(), s.plan.reset();  // FP4 everywhere
    });
  }
  QTemporaryDir dir_;
  QString db_;
};

TEST_F(WorkbenchTest, BudgetSliderResolvesAPlanThatMeetsTheTarget) {
  seed_stats("small");
  auto w = open_window();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  ASSERT_TRUE(wait_plan(pv, shown, 1)) << pv->last_error().toStdString();
  for (int target : {250, 620, 830, 100}) {  // per mille
    const int before = shown.count();
    pv->budget_slider()->setValue(target);
    ASSERT_TRUE(wait_plan(pv, shown, before + 1)) << pv->last_error().toStdString();
    ASSERT_TRUE(pv->current());
    const double rho = target / 1000.0;
    EXPECT_NEAR(pv->current()->budget, rho, 1e-9);
    EXPECT_GE(pv->current()->achieved_fraction, rho);
    EXPECT_DOUBLE_EQ(pv->budget_spin()->value(), target / 10.0);  // slider and spin box agree
    // The grid draws the plan that was solved.
    EXPECT_EQ(pv->grid()->plan(), snip::resolve_plan_lenient(pv->current()->plan, 6));
    EXPECT_EQ(pv->current()->plan.layers.size(), 42u);
  }
}

TEST_F(WorkbenchTest, PinnedLayersAreHonoured) {
  seed_stats("small");
  auto w = open_window();
  w->show_view("plan");  // clicks go to the visible grid
  QCoreApplication::processEvents();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  pv->budget_slider()->setValue(700);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  // Find a layer the unpinned plan puts in FP4 and one in FP8, then pin them the other way.
  int fp4_layer = -1, fp8_layer = -1;
  const auto per_layer = snip::resolve_plan_lenient(pv->current()->plan, 6);
  for (int l = 0; l < int(per_layer.size()); ++l) {
    if (per_layer[l].fprop == snip::Precision::fp4 && fp4_layer < 0) fp4_layer = l;
    if (per_layer[l].fprop == snip::Precision::fp8 && fp8_layer < 0) fp8_layer = l;
  }
  ASSERT_GE(fp4_layer, 0);
  ASSERT_GE(fp8_layer, 0);
  int before = shown.count();
  pv->cycle_pin(fp4_layer);  // click 1: pin to FP8
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  before = shown.count();
  QTest::mouseClick(pv->grid(), Qt::LeftButton, {}, pv->grid()->layer_rect(fp8_layer).center());  // FP8 pin
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  before = shown.count();
  QTest::mouseClick(pv->grid(), Qt::LeftButton, {}, pv->grid()->layer_rect(fp8_layer).center());  // → FP4 pin
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  const auto pinned = snip::resolve_plan_lenient(pv->current()->plan, 6);
  EXPECT_EQ(pinned[fp4_layer], snip::LinearPrecision::uniform(snip::Precision::fp8));
  EXPECT_EQ(pinned[fp8_layer], snip::LinearPrecision::uniform(snip::Precision::fp4));
  EXPECT_GE(pv->current()->achieved_fraction, 0.7);
  EXPECT_EQ(pv->pins().size(), 2u);
  // Clicking a heatmap cell in the Sensitivity view pins in the Plan view too.
  SensitivityView* sv = w->sensitivity_view();
  w->show_view("sensitivity");
  before = shown.count();
  QTest::mouseClick(sv->heatmap(), Qt::LeftButton, {}, sv->heatmap()->cell_rect(3).center());
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  EXPECT_EQ(pv->pins().count("model.layers.0.self_attn.o_proj"), fp4_layer == 3 || fp8_layer == 3 ? 0u : 1u);
}

TEST_F(WorkbenchTest, InfeasibleRequestShowsTheCauseAndTheViewRecovers) {
  seed_stats("tiny");
  auto w = open_window();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  QSignalSpy failed(pv, &PlanView::solve_failed);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  pv->cycle_pin(6);                     // model.layers.0.mlp.down_proj pinned to FP8 ...
  pv->budget_slider()->setValue(1000);  // ... makes 100 % FP4 unreachable
  ASSERT_TRUE(wait_for([&] { return failed.count() >= 1 && !pv->solving(); }));
  EXPECT_FALSE(pv->last_error().isEmpty());
  EXPECT_TRUE(pv->last_error().contains("unreachable") || pv->last_error().contains("pin"))
      << pv->last_error().toStdString();
  const int before = shown.count();
  pv->budget_slider()->setValue(400);
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  EXPECT_TRUE(pv->last_error().isEmpty());
  EXPECT_GE(pv->current()->achieved_fraction, 0.4);
}

// The Plan view offers what `snip solve --pipeline-parallel` does: with Megatron's pipeline set,
// the plan is the same on every chunk, its Megatron export is written for that layout (and read
// back as the same plan), per-stage budgets are off, and a layout Megatron cannot split evenly
// says so.
TEST_F(WorkbenchTest, AMegatronPipelineLayoutGivesEveryStageTheSamePlanAndItsExport) {
  seed_stats("small");  // 6 blocks
  auto w = open_window();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  QSignalSpy failed(pv, &PlanView::solve_failed);
  pv->budget_slider()->setValue(700);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  int before = shown.count();
  pv->ties_check()->setChecked(true);  // Megatron fuses q/k/v and gate/up
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  before = shown.count();
  pv->pipeline_spin()->setValue(3);  // chunks of 2 blocks
  ASSERT_TRUE(wait_plan(pv, shown, before + 1)) << pv->last_error().toStdString();
  EXPECT_FALSE(pv->stages_spin()->isEnabled());
  EXPECT_TRUE(pv->virtual_stages_spin()->isEnabled());
  const auto tied = snip::resolve_plan_lenient(pv->current()->plan, 6);
  for (int l = 0; l < 42; ++l) EXPECT_EQ(tied[l], tied[l % 14]) << "layer " << l;
  EXPECT_GE(pv->current()->achieved_fraction, 0.7);
  const QString yaml_path = dir_.filePath("plan.yaml");
  ASSERT_TRUE(pv->export_plan_for(snip::PlanStack::megatron, yaml_path).empty());
  const std::string yaml = snip::read_file(yaml_path.toStdString());
  EXPECT_NE(yaml.find("--pipeline-model-parallel-size 3 only"), std::string::npos) << yaml.substr(0, 1200);
  EXPECT_EQ(yaml.find("decoder.layers.2."), std::string::npos) << "a stage of 2 blocks names blocks 0 and 1 only";
  const snip::Plan back =
      snip::import_plan(yaml, snip::PlanStack::megatron, snip::preset_config("small").dims(), "plan.yaml", nullptr);
  EXPECT_EQ(snip::resolve_plan_lenient(back, 6), tied);
  // 6 blocks over 3 stages × 2 virtual stages: 1 block per chunk, still even.
  before = shown.count();
  pv->virtual_stages_spin()->setValue(2);
  ASSERT_TRUE(wait_plan(pv, shown, before + 1)) << pv->last_error().toStdString();
  const auto one = snip::resolve_plan_lenient(pv->current()->plan, 6);
  for (int l = 0; l < 42; ++l) EXPECT_EQ(one[l], one[l % 7]) << "layer " << l;
  // 6 blocks do not split over 4 stages: the cause, in words.
  pv->virtual_stages_spin()->setValue(1);
  pv->pipeline_spin()->setValue(4);
  ASSERT_TRUE(wait_for([&] { return failed.count() >= 1 && !pv->solving(); }));
  EXPECT_TRUE(pv->last_error().contains("do not divide 6")) << pv->last_error().toStdString();
  before = shown.count();
  pv->pipeline_spin()->setValue(1);
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  EXPECT_TRUE(pv->stages_spin()->isEnabled());
  EXPECT_FALSE(pv->virtual_stages_spin()->isEnabled());
}

// One run description for both fronts (snip/run_settings.h): every setting, away from its
// default, set in the Run form reads back from it, and `snip train` given the same settings as
// options stores the same training configuration and adaptive settings as the form's request.
TEST_F(WorkbenchTest, EverySettingOfTheRunFormIsASnipTrainOptionAndBothMakeTheSameRun) {
  auto w = open_window();
  RunView* rv = w->run_view();
  snip::RunSettings s;
  s.preset = "tiny";
  s.steps = 4, s.batch_size = 2, s.seq_len = 16, s.grad_accum = 2;
  s.lr = 2e-3, s.lr_min = 1e-4, s.warmup = 2, s.schedule = "cosine";
  s.weight_decay = 0.05, s.beta1 = 0.85, s.beta2 = 0.9, s.clip = 0.5;
  s.seed = 7, s.eval_every = 2, s.eval_batches = 3, s.recipe = "mx";
  snip::AdaptiveSettings a;
  a.method = "snip", a.budget = 0.6, a.replan_every = 2, a.bf16_probe_every = 3, a.lambda = 0.2;
  a.ties = true, a.per_role = true, a.replan_when = "noise", a.noise_floor = 1.5;
  a.noise_passes = 2, a.sigma_eta_rel = 0.02;
  s.adaptive = a;
  rv->set_run_settings(s);  // Adaptive: s.adaptive is set
  snip::RunSettings back = rv->run_settings();
  EXPECT_TRUE(back == s) << "the form does not hold every setting";
  const TrainRequest r = rv->make_request();
  ASSERT_TRUE(r.adaptive);

  const std::string root = dir_.path().toStdString();
  const auto cli = snip_test::run_shell(
      std::string(SNIP_EXE) +
      " train --preset tiny --steps 4 --batch-size 2 --seq-len 16 --grad-accum 2 --lr 2e-3 --lr-min 1e-4 "
      "--warmup 2 --schedule cosine --weight-decay 0.05 --beta1 0.85 --beta2 0.9 --clip 0.5 --seed 7 "
      "--eval-every 2 --eval-batches 3 --recipe mx --method snip --budget 0.6 --replan-every 2 "
      "--bf16-probe-every 3 --lambda 0.2 --ties --per-role --replan-when noise --noise-floor 1.5 --noise-passes 2 "
      "--sigma-eta-rel 0.02 --db " +
      root + "/cli.db --out " + root + "/cli-ck");
  ASSERT_EQ(cli.status, 0) << cli.out;
  snip::Store store(root + "/cli.db");
  nlohmann::json stored = store.runs().at(0).spec.train_config;
  nlohmann::json form = snip::train_config_to_json(r.config);
  nlohmann::json stored_adaptive = stored["adaptive"], form_adaptive = snip::adaptive_options_to_json(*r.adaptive);
  for (nlohmann::json* j : {&stored, &form}) {
    j->erase("adaptive");
    j->erase("checkpoint_dir");
    j->erase("tokenizer_fingerprint");
  }
  for (nlohmann::json* j : {&stored_adaptive, &form_adaptive}) {  // a run's rounds take the run's seed
    j->erase("seed");
    (*j)["round"].erase("seed");
  }
  EXPECT_EQ(form, stored) << form.dump(1) << "\n" << stored.dump(1);
  EXPECT_EQ(form_adaptive, stored_adaptive) << form_adaptive.dump(1) << "\n" << stored_adaptive.dump(1);
}

TEST_F(WorkbenchTest, CompareViewShowsTwoPlansWithTheirDifferences) {
  seed_stats("small");
  auto w = open_window();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  pv->budget_slider()->setValue(300);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  int before = shown.count();
  pv->budget_slider()->setValue(300);  // no change: no new solve needed, but the plan is current
  const int64_t low = pv->save_plan_to_store();
  const auto low_layers = snip::resolve_plan_lenient(pv->current()->plan, 6);
  pv->budget_slider()->setValue(800);
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  const int64_t high = pv->save_plan_to_store();
  const auto high_layers = snip::resolve_plan_lenient(pv->current()->plan, 6);
  w->compare_view()->select({low, high}, {});
  w->show_view("compare");
  ASSERT_EQ(w->compare_view()->grids().size(), 2u);
  std::vector<int> expected;
  for (int l = 0; l < 42; ++l)
    if (!(low_layers[l] == high_layers[l])) expected.push_back(l);
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(w->compare_view()->grids()[1]->differing_layers(), expected);
  EXPECT_GE(w->compare_view()->table()->rowCount(), 2);
  // A compare experiment needs a checked run with a checkpoint: without one, a clear message.
  w->compare_view()->launch_compare_experiment();
  EXPECT_FALSE(w->compare_view()->experiment_running());
  EXPECT_TRUE(w->message_text().contains("checkpoint")) << w->message_text().toStdString();
  const QString csv = dir_.filePath("compare.csv");
  w->compare_view()->export_table_csv(csv);
  EXPECT_GT(QFileInfo(csv).size(), 40);
}

TEST_F(WorkbenchTest, ExportedPlanReadsBackAndTrainsTheTinyModel) {
  seed_stats("tiny");
  auto w = open_window();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  pv->budget_slider()->setValue(600);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  const QString path = dir_.filePath("plan.json");
  pv->export_plan_json(path);
  const snip::Plan back = snip::read_plan_file(path.toStdString());
  EXPECT_EQ(back, pv->current()->plan);
  EXPECT_GE(back.achieved_fp4_fraction, 0.6);
  // What `snip train --plan` does with it: the trainer accepts the plan for the tiny model.
  snip::TrainConfig config;
  config.model = snip::preset_config("tiny");
  config.batch_size = 2;
  config.seq_len = 16;
  config.steps = 1;
  config.eval_every = 0;
  config.plan = back;
  snip::Trainer trainer(config);
  EXPECT_TRUE(trainer.plan_warnings().empty());
  EXPECT_EQ(trainer.precisions(), snip::resolve_plan_lenient(back, 2));
  const snip::StepMetrics m = trainer.step();
  EXPECT_NEAR(m.fp4_fraction, back.achieved_fp4_fraction, 1e-9);
  // The CSV export lists every layer.
  const QString csv = dir_.filePath("plan.csv");
  pv->export_plan_csv(csv);
  QFile f(csv);
  ASSERT_TRUE(f.open(QIODevice::ReadOnly));
  EXPECT_EQ(f.readAll().count('\n'), 15);  // header + 14 layers
}

TEST_F(WorkbenchTest, TrainingRunStreamsMetricsIntoMonitorAndStore) {
  auto w = open_window();
  RunView* rv = w->run_view();
  set_tiny_form(rv, 12);
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  QPushButton* start = snip_test::control<QPushButton>(rv, "start");
  QTest::mouseClick(start, Qt::LeftButton);
  ASSERT_TRUE(wait_for([&] { return w->training() || ended.count() > 0; }, 5000));
  EXPECT_FALSE(start->isEnabled());
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 60000));
  EXPECT_EQ(ended.at(0).at(1).toString(), "finished") << ended.at(0).at(2).toString().toStdString();
  const qint64 run_id = ended.at(0).at(0).toLongLong();
  // Live metrics reached the monitor through the buffer (bulk, on its timer).
  ASSERT_TRUE(wait_for([&] { return w->monitor_view()->train_points() == 12; }, 3000));
  EXPECT_EQ(w->monitor_view()->shown_run(), run_id);
  // And the store has every step, the run is finished with a checkpoint.
  snip::Store store(db_.toStdString());
  const snip::RunInfo run = store.run(run_id);
  EXPECT_EQ(run.status, snip::RunStatus::finished);
  EXPECT_EQ(store.metrics(run_id).size(), 12u);
  ASSERT_FALSE(store.checkpoints(run_id).empty());
  EXPECT_TRUE(std::filesystem::exists(store.checkpoints(run_id).back().path + "/model.safetensors"));
  EXPECT_EQ(snip_test::control<QProgressBar>(rv, "progress")->value(), 12);
  EXPECT_TRUE(start->isEnabled());
  EXPECT_GE(rv->listed_runs().size(), 1);
}

TEST_F(WorkbenchTest, AdaptiveSnipRunStoresRoundsPlansAndProbes) {
  auto w = open_window();
  RunView* rv = w->run_view();
  set_tiny_form(rv, 6);
  snip_test::edit_run_form(rv, [&](snip::RunSettings& s) {  // adaptive SNIP
    s.adaptive = rv->adaptive_settings();
    s.adaptive->budget = 0.5, s.adaptive->replan_every = 3, s.adaptive->bf16_probe_every = 2;
  });
  QSignalSpy plans(w->worker(), &TrainingWorker::plan_made);
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  w->start_training();
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 120000));
  ASSERT_EQ(ended.at(0).at(1).toString(), "finished") << ended.at(0).at(2).toString().toStdString();
  const qint64 run_id = ended.at(0).at(0).toLongLong();
  EXPECT_EQ(plans.count(), 2);  // before step 1 and before step 4
  snip::Store store(db_.toStdString());
  EXPECT_EQ(store.stats_rounds(run_id).size(), 2u);
  const auto timeline = store.plan_timeline(run_id);
  ASSERT_EQ(timeline.size(), 2u);
  EXPECT_EQ(timeline[0].first_step, 1);
  EXPECT_EQ(timeline[1].first_step, 4);
  int probed = 0;
  for (const snip::MetricRow& m : store.metrics(run_id)) {
    EXPECT_GE(m.fp4_fraction, 0.5) << "step " << m.step;
    probed += m.bf16_gap.has_value();
  }
  EXPECT_EQ(probed, 3);  // steps 1, 3, 5
  // The run's first round was shown as soon as it was listed, without picking it (the combo
  // names the round drawn).
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->workbench()->planning_source().round_id.has_value());
  EXPECT_EQ(w->sensitivity_view()->round_combo()->currentData().toLongLong(),
            *w->workbench()->planning_source().round_id);
  EXPECT_EQ(w->sensitivity_view()->heatmap()->data().rows, 2);
  // The Sensitivity view can walk through this run's rounds.
  w->workbench()->poll_now();
  w->workbench()->use_stats_round(store.stats_rounds(run_id).front().id);
  EXPECT_EQ(w->sensitivity_view()->step_slider()->maximum(), 1);
  EXPECT_GT(w->sensitivity_view()->heatmap()->data().values.size(), 0u);
  // The plan timeline mode: one row per plan in effect, each layer's FP4 share matching the plan.
  w->sensitivity_view()->mode_combo()->setCurrentIndex(2);
  const HeatmapData& tl = w->sensitivity_view()->heatmap()->data();
  ASSERT_EQ(tl.rows, 2);
  ASSERT_EQ(tl.cols, 14);
  const auto first_plan = snip::resolve_plan_lenient(store.plan(timeline[0].plan_id).plan, 2);
  for (int l = 0; l < 14; ++l)
    EXPECT_EQ(tl.values[l], first_plan[l].fprop == snip::Precision::fp4 ? 1.0 : 0.0) << "layer " << l;
}

TEST_F(WorkbenchTest, StopSavesAResumableCheckpoint) {
  auto w = open_window();
  RunView* rv = w->run_view();
  set_tiny_form(rv, 100000);
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  // The worker holds after step 3 by itself (as the Pause button makes it hold): event-driven,
  // however fast or loaded the machine is, instead of pausing from here and sleeping.
  TrainRequest request = rv->make_request();
  request.pause_after_step = 3;
  w->start_request(request);
  ASSERT_TRUE(wait_for([&] { return w->live_metrics()->size() >= 3; }, 30000));
  w->stop_training();  // also wakes the paused loop
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 30000));
  EXPECT_EQ(ended.at(0).at(1).toString(), "interrupted");
  EXPECT_EQ(w->live_metrics()->size(), 3u);  // held: no step ran between the pause and the stop
  snip::Store store(db_.toStdString());
  const auto cps = store.checkpoints(ended.at(0).at(0).toLongLong());
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_TRUE(std::filesystem::exists(cps[0].path + "/trainer_state.json"));
  EXPECT_EQ(cps[0].step, 3);
}

// The recipe box takes the granularity family as typed; a name the engine does not know is
// refused before anything starts, with the accepted forms.
TEST_F(WorkbenchTest, RecipeBoxTakesTheGranularityFamilyAndRefusesUnknownNames) {
  auto w = open_window();
  RunView* rv = w->run_view();
  set_tiny_form(rv, 3);
  QComboBox* box = nullptr;
  for (QComboBox* c : rv->findChildren<QComboBox*>())
    if (c->findText(QStringLiteral("block:row")) >= 0) box = c;
  ASSERT_NE(box, nullptr) << "no recipe box offering block:row";
  ASSERT_TRUE(box->isEditable());
  box->setCurrentText(QStringLiteral("block:64:sr"));
  EXPECT_EQ(rv->make_request().config.recipe, "block:64:sr");
  box->setCurrentText(QStringLiteral("block:1"));
  w->start_training();
  EXPECT_FALSE(w->training());
  EXPECT_TRUE(w->message_text().contains("Cannot start")) << w->message_text().toStdString();
  EXPECT_TRUE(w->message_text().contains("block:")) << w->message_text().toStdString();
  // The next start is accepted: the failed start's message no longer describes what is so.
  box->setCurrentText(QStringLiteral("snip"));
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  w->start_training();
  EXPECT_TRUE(w->training());
  EXPECT_FALSE(w->message_text().contains("Cannot start")) << w->message_text().toStdString();
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 60000));
}

TEST_F(WorkbenchTest, EngineErrorsShowAMessageAndLeaveTheWindowUsable) {
  auto w = open_window();
  RunView* rv = w->run_view();
  set_tiny_form(rv, 3);
  // 1. A config the engine rejects (heads do not divide the hidden size).
  const QString bad_config = dir_.filePath("config.json");
  {
    QFile f(bad_config);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write(R"({"hidden_size": 100, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 3,
               "vocab_size": 256, "max_position_embeddings": 64})");
  }
  snip_test::edit_run_form(rv, [&](snip::RunSettings& s) { s.config_path = bad_config.toStdString(); });
  w->start_training();
  EXPECT_FALSE(w->training());
  EXPECT_TRUE(w->message_text().contains("Cannot start")) << w->message_text().toStdString();
  EXPECT_TRUE(w->message_text().contains("config.json")) << w->message_text().toStdString();
  // 2. Data the trainer cannot load: the failure arrives from the worker thread.
  snip_test::edit_run_form(rv, [&](snip::RunSettings& s) {
    s.config_path.clear();
    s.data = dir_.filePath("no-such-corpus.txt").toStdString();
  });
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  w->start_training();
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 30000));
  EXPECT_EQ(ended.at(0).at(1).toString(), "failed");
  EXPECT_TRUE(w->message_text().contains("no-such-corpus")) << w->message_text().toStdString();
  // 3. The window still works: a good run after the errors finishes.
  snip_test::edit_run_form(rv, [](snip::RunSettings& s) { s.data.clear(); });
  w->start_training();
  ASSERT_TRUE(wait_for([&] { return ended.count() == 2; }, 60000));
  EXPECT_EQ(ended.at(1).at(1).toString(), "finished") << ended.at(1).at(2).toString().toStdString();
  // 4. A broken import is reported, not fatal.
  const QString junk = dir_.filePath("junk.csv");
  {
    QFile f(junk);
    ASSERT_TRUE(f.open(QIODevice::WriteOnly));
    f.write("layer,precision,cost,flops\nmodel.layers.0.self_attn.q_proj,fp9,1,1\n");
  }
  EXPECT_FALSE(w->workbench()->import_statistics_or_costs(junk));
  EXPECT_TRUE(w->message_text().contains("fp9")) << w->message_text().toStdString();
}

TEST_F(WorkbenchTest, RunsWrittenByAnotherProcessAppear) {
  auto w = open_window();
  const qsizetype rows_before = w->run_view()->listed_runs().size();
  // What the headless `snip train` does: its own connection, a run and committed metrics.
  snip_test::stored_finished_run(db_, "from the CLI", 40);
  w->workbench()->poll_now();  // the timer does this every 1.5 s
  const QList<RunView::ListedRun> runs = w->run_view()->listed_runs();
  EXPECT_EQ(runs.size(), rows_before + 1);
  ASSERT_FALSE(runs.isEmpty());
  EXPECT_EQ(runs.front().name, "from the CLI");
}

TEST_F(WorkbenchTest, ClosingDuringTrainingStopsCleanlyAndSavesACheckpoint) {
  auto w = open_window();
  set_tiny_form(w->run_view(), 100000);
  int asked = 0;
  w->set_close_confirmation([&] {
    ++asked;
    return true;
  });
  w->start_training();
  ASSERT_TRUE(wait_for([&] { return w->live_metrics()->size() >= 2; }, 30000));
  const int64_t run_id = w->live_metrics()->run_id();
  EXPECT_TRUE(w->close());
  EXPECT_EQ(asked, 1);
  EXPECT_FALSE(w->training());
  snip::Store store(db_.toStdString());
  EXPECT_EQ(store.run(run_id).status, snip::RunStatus::interrupted);
  EXPECT_EQ(store.checkpoints(run_id).size(), 1u);
}

TEST_F(WorkbenchTest, ScreenshotsOfAPopulatedWorkbench) {
  // Populated: a finished tiny run, statistics rounds at three steps, two stored plans.
  {
    snip::Store store(db_.toStdString());
    snip::RunSpec spec;
    spec.name = "small · uniform-fp4 (synthetic curve for the screenshot)";
    spec.dims = snip::preset_config("small").dims();
    spec.method = "uniform-fp4";
    const int64_t id = store.create_run(spec);
    std::vector<snip::MetricRow> rows;
    for (int s = 1; s <= 600; ++s) {
      snip::MetricRow r{s,
                        2.0 + 3.5 * std::exp(-s / 120.0) + 0.08 * std::sin(s * 1.7),
                        std::nullopt,
                        3e-3 * std::min(1.0, s / 20.0),
                        1.5 * std::exp(-s / 300.0) + 0.3,
                        9000,
                        1.0,
                        std::nullopt};
      if (s % 50 == 0) r.val_loss = 2.1 + 3.5 * std::exp(-s / 120.0);
      rows.push_back(r);
    }
    store.append_metrics(id, rows);
    store.set_run_status(id, snip::RunStatus::finished);
    for (int step : {100, 300, 500})
      store.add_stats_round(snip::test::synthetic_stats_round(spec.dims, 2048, step, 7 + step), id);
  }
  auto w = open_window();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  QSignalSpy swept(pv, &PlanView::sweep_shown);
  pv->budget_slider()->setValue(500);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  pv->save_plan_to_store();
  const int before = shown.count();
  pv->budget_slider()->setValue(750);
  ASSERT_TRUE(wait_plan(pv, shown, before + 1));
  pv->cycle_pin(13);
  ASSERT_TRUE(wait_plan(pv, shown, before + 2));
  pv->save_plan_to_store();
  ASSERT_TRUE(wait_for([&] { return swept.count() >= 1; }, 30000));
  ASSERT_TRUE(wait_for([&] { return !pv->solving() && !pv->sweeping(); }));  // the saves' re-solves have settled
  w->workbench()->poll_now();
  w->compare_view()->refresh_lists();
  {
    snip::Store store(db_.toStdString());
    const auto plans = store.plans();
    ASSERT_EQ(plans.size(), 2u);
    w->compare_view()->select({plans[1].id, plans[0].id}, {store.runs().front().id});
  }
  // What the screenshots must show: the plan grid with every layer of the small model and the
  // Compare table with both stored plans.
  EXPECT_EQ(pv->grid()->plan().size(), 42u);
  EXPECT_GE(w->compare_view()->table()->rowCount(), 2);
  const QStringList files = w->render_screenshots(SNIP_SCREENSHOT_DIR);
  // One file per view, named after it, and one per page of a view with pages (the Monitor's noise page).
  QStringList expected;
  for (const QString& view : MainWindow::view_names()) {
    expected << view;
    if (view == QStringLiteral("monitor")) expected << QStringLiteral("monitor-noise");
  }
  ASSERT_EQ(files.size(), expected.size());
  for (int i = 0; i < files.size(); ++i) {
    const QString& f = files[i];
    EXPECT_EQ(QFileInfo(f).completeBaseName(), expected[i]);
    const QImage image(f);
    ASSERT_FALSE(image.isNull()) << f.toStdString();
    EXPECT_EQ(image.width(), 1280);
    EXPECT_EQ(image.height(), 800);
    // Not blank: a view with its widgets drawn has many colours (text, charts, cells); an empty
    // or unpainted capture has a handful.
    std::set<QRgb> colours;
    for (int y = 0; y < image.height(); y += 4)
      for (int x = 0; x < image.width(); x += 4) colours.insert(image.pixel(x, y));
    EXPECT_GE(colours.size(), 20u) << f.toStdString();
  }
}

// Ctrl+S on a database the user cannot write (a read-only mount: root can write any file) showed
// SQLite's statement error. The store refuses the write before any statement, in words that name
// what to do in the workbench; nothing is written. Needs a tmpfs mount (root), else skipped.
TEST_F(WorkbenchTest, SavingAPlanIntoAReadOnlyDatabaseSaysSoInWords) {
  seed_stats("tiny");
  const QString mnt = dir_.filePath("ro");
  ASSERT_TRUE(QDir().mkpath(mnt));
  if (::mount("tmpfs", mnt.toLocal8Bit().constData(), "tmpfs", 0, "size=16m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (not root?); test_storage's StoreBadInput covers the store";
  struct Unmount {
    QString path;
    ~Unmount() { ::umount2(path.toLocal8Bit().constData(), MNT_DETACH); }
  } unmount{mnt};
  const QString db = mnt + "/workbench.db";
  ASSERT_TRUE(QFile::copy(db_, db));
  ASSERT_EQ(::mount("tmpfs", mnt.toLocal8Bit().constData(), "tmpfs", MS_REMOUNT | MS_RDONLY, nullptr), 0);
  const auto before = snip::Store(db.toStdString(), {.read_only_if_unwritable = true}).plans().size();
  auto w = snip_test::open_test_window(db);
  EXPECT_TRUE(w->message_text().contains("read-only")) << w->message_text().toStdString();
  PlanView* pv = w->plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  pv->budget_slider()->setValue(500);
  ASSERT_TRUE(wait_plan(pv, shown, 1));
  QAction* save = nullptr;
  for (QAction* a : w->findChildren<QAction*>())
    if (a->shortcut() == QKeySequence(QKeySequence::Save)) save = a;
  ASSERT_NE(save, nullptr);
  save->trigger();
  const std::string said = w->message_text().toStdString();
  EXPECT_TRUE(w->message_text().contains("Saving the plan failed")) << said;
  EXPECT_TRUE(w->message_text().contains("read-only")) << said;
  EXPECT_TRUE(w->message_text().contains("nothing was saved")) << said;
  for (const char* raw : {"INSERT", "BEGIN", "SQL", "attempt to write"})
    EXPECT_FALSE(w->message_text().contains(raw)) << said;
  w->close();
  w.reset();
  EXPECT_EQ(snip::Store(db.toStdString(), {.read_only_if_unwritable = true}).plans().size(), before);
}

}  // namespace
