// The workbench as a newcomer meets it, on real widgets, a real SQLite file in a temp dir and the
// real executable: --help/--version without a display, every view following File › New/Open
// database, the first statistics round shown without a second click, the sequence-length box
// that says what it did, honest colour scales, About/docs/export confirmations in GUI words,
// keyboard navigation, agreeing numbers, the remembered run form and a message bar that moves
// nothing. Screenshots of the changed views go to the build tree (tests/screenshots/usability/).
#include <gtest/gtest.h>

#include <QApplication>
#include <QCheckBox>
#include <QComboBox>
#include <QDir>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QHeaderView>
#include <QImage>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QProcess>
#include <QPushButton>
#include <QSettings>
#include <QSignalSpy>
#include <QSpinBox>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>
#include <QToolTip>
#include <QUrl>
#include <functional>

#include "compare_view.h"
#include "heatmap_widget.h"
#include "main_window.h"
#include "monitor_view.h"
#include "plan_grid.h"
#include "plan_view.h"
#include "qt_wait.h"
#include "run_view.h"
#include "sensitivity_view.h"
#include "snip/atomic_file.h"
#include "snip/layers.h"
#include "snip/model_config.h"
#include "snip/plan_export.h"
#include "snip/store.h"
#include "synthetic_stats.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

using snip_test::wait_for;

QString shot_path(const QString& name) {
  const QString dir = QStringLiteral(SNIP_SCREENSHOT_DIR "/usability");
  QDir().mkpath(dir);
  return dir + "/" + name + ".png";
}

// A database with one finished run (curves), one statistics round of `preset`'s shape and one plan.
struct Seeded {
  int64_t run = 0, round = 0, plan = 0;
};
Seeded seed_database(const QString& path, const std::string& preset, const std::string& run_name, uint64_t seed) {
  snip::Store store(path.toStdString());
  Seeded out;
  snip::RunSpec spec;
  spec.name = run_name;
  spec.dims = snip::preset_config(preset).dims();
  spec.method = "uniform-fp4";
  out.run = store.create_run(spec);
  std::vector<snip::MetricRow> rows;
  for (int s = 1; s <= 40; ++s)
    rows.push_back(snip::MetricRow{s, 5.0 / s, std::nullopt, 1e-3, 1.0, 1000, 1.0, std::nullopt});
  store.append_metrics(out.run, rows);
  store.set_run_status(out.run, snip::RunStatus::finished);
  out.round = store.add_stats_round(snip::test::synthetic_stats_round(spec.dims, 2048, 40, seed), out.run);
  snip::Plan plan;
  plan.method = "uniform-fp8";
  out.plan = store.add_plan(plan);
  return out;
}

class UsabilityTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.isValid()); }
  std::unique_ptr<MainWindow> open_window(const QString& db, QSize size = {1280, 800}) {
    return snip_test::open_test_window(db, size);
  }
  QTemporaryDir dir_;
};

// ---- 1. --help and --version without a display ---------------------------------------------

TEST(CommandLine, HelpAndVersionWorkWithoutADisplay) {
  QTemporaryDir home;
  for (const QString& arg : {QStringLiteral("--help"), QStringLiteral("--version"), QStringLiteral("-h")}) {
    QProcess p;
    QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
    for (const char* var : {"DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM"}) env.remove(QString::fromLatin1(var));
    env.insert("XDG_CONFIG_HOME", home.path() + "/config");
    env.insert("XDG_DATA_HOME", home.path() + "/data");
    env.insert("XDG_RUNTIME_DIR", home.path());
    p.setProcessEnvironment(env);
    p.start(QStringLiteral(SNIP_WORKBENCH_EXE), {arg});
    ASSERT_TRUE(p.waitForFinished(60000)) << arg.toStdString();
    const QString out = QString::fromUtf8(p.readAllStandardOutput()), err = QString::fromUtf8(p.readAllStandardError());
    EXPECT_EQ(p.exitStatus(), QProcess::NormalExit) << arg.toStdString() << ": " << err.toStdString();
    EXPECT_EQ(p.exitCode(), 0) << arg.toStdString() << ": " << err.toStdString();
    EXPECT_FALSE(err.contains("display")) << err.toStdString();
    if (arg == QLatin1String("--version")) {
      EXPECT_EQ(out.trimmed(), QStringLiteral("snip-workbench " SNIP_VERSION));
    } else {
      EXPECT_TRUE(out.contains("Usage:")) << out.toStdString();
      EXPECT_TRUE(out.contains("--db <FILE>")) << out.toStdString();
      EXPECT_TRUE(out.contains("--screenshot-dir")) << out.toStdString();
    }
  }
}

// ---- 2. every view follows the open database -----------------------------------------------

TEST_F(UsabilityTest, EveryViewFollowsANewOrOpenedDatabase) {
  const QString first = dir_.filePath("first.db");
  const Seeded a = seed_database(first, "small", "run of the first database", 7);
  auto w = open_window(first);
  PlanView* pv = w->plan_view();
  ASSERT_TRUE(wait_for([&] { return pv->current().has_value() && !pv->solving(); })) << pv->last_error().toStdString();
  w->compare_view()->select({a.plan}, {a.run});
  pv->cycle_pin(3);
  ASSERT_TRUE(wait_for([&] { return !pv->solving() && pv->pins().size() == 1; }));
  // The first database is on every view.
  EXPECT_EQ(w->workbench()->planning_source().round_id, a.round);
  EXPECT_GT(w->sensitivity_view()->heatmap()->data().rows, 0);
  EXPECT_EQ(w->monitor_view()->shown_run(), a.run);
  EXPECT_GT(w->monitor_view()->train_points(), 0u);
  EXPECT_EQ(w->run_view()->listed_runs().size(), 1);
  EXPECT_GT(w->compare_view()->table()->rowCount(), 0);

  // File › New database (what the dialog does once a file name is chosen).
  const QString empty = dir_.filePath("new.db");
  ASSERT_TRUE(w->workbench()->open_database(empty));
  QCoreApplication::processEvents();
  EXPECT_TRUE(w->workbench()->planning_source().empty());
  EXPECT_EQ(w->sensitivity_view()->heatmap()->data().rows, 0);
  EXPECT_EQ(w->sensitivity_view()->round_combo()->count(), 0);
  ASSERT_TRUE(wait_for([&] { return !pv->solving(); }));
  EXPECT_FALSE(pv->current().has_value());
  EXPECT_TRUE(pv->grid()->plan().empty());
  EXPECT_TRUE(pv->pins().empty());
  EXPECT_EQ(w->monitor_view()->shown_run(), 0);
  EXPECT_EQ(w->monitor_view()->train_points(), 0u);
  EXPECT_EQ(w->monitor_view()->run_combo()->count(), 0);
  EXPECT_EQ(w->run_view()->listed_runs().size(), 0);
  w->show_view("compare");
  QCoreApplication::processEvents();
  EXPECT_EQ(w->compare_view()->table()->rowCount(), 0);
  EXPECT_TRUE(w->compare_view()->grids().empty());
  w->show_view("sensitivity");
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->grab().save(shot_path("new-database-sensitivity")));

  // File › Open database on a third one: its own round, run and plan, none of the first's.
  const QString other = dir_.filePath("other.db");
  const Seeded c = seed_database(other, "tiny", "run of the other database", 11);
  ASSERT_TRUE(w->workbench()->open_database(other));
  QCoreApplication::processEvents();
  EXPECT_EQ(w->workbench()->planning_source().round_id, c.round);
  EXPECT_EQ(w->sensitivity_view()->heatmap()->data().rows, snip::preset_config("tiny").dims().num_layers);
  ASSERT_TRUE(wait_for([&] { return pv->current().has_value() && !pv->solving(); }));
  EXPECT_EQ(pv->grid()->num_blocks(), snip::preset_config("tiny").dims().num_layers);
  ASSERT_TRUE(wait_for([&] { return w->monitor_view()->shown_run() == c.run; }));
  EXPECT_TRUE(w->monitor_view()->run_combo()->currentText().contains("other database"));
  w->close();
}

// ---- 3. the first round of a run is shown ---------------------------------------------------

TEST_F(UsabilityTest, TheFirstStatisticsRoundIsShownAsSoonAsItIsListed) {
  const QString db = dir_.filePath("w.db");
  { snip::Store store(db.toStdString()); }
  auto w = open_window(db);
  SensitivityView* sv = w->sensitivity_view();
  EXPECT_EQ(sv->heatmap()->data().rows, 0);
  EXPECT_EQ(sv->round_combo()->currentIndex(), -1);  // nothing listed, nothing pretended
  // An adaptive run (here: another connection, as the training thread and `snip train` write)
  // stores its first round.
  int64_t round = 0;
  {
    snip::Store store(db.toStdString());
    snip::RunSpec spec;
    spec.name = "adaptive";
    spec.dims = snip::preset_config("tiny").dims();
    const int64_t run = store.create_run(spec);
    round = store.add_stats_round(snip::test::synthetic_stats_round(spec.dims, 1024, 1, 3), run);
  }
  w->workbench()->poll_now();
  QCoreApplication::processEvents();
  EXPECT_EQ(sv->round_combo()->currentData().toLongLong(), round);
  EXPECT_EQ(sv->heatmap()->data().rows, snip::preset_config("tiny").dims().num_layers);
  w->close();
}

// ---- 4. the sequence-length box ------------------------------------------------------------

TEST_F(UsabilityTest, TypedSequenceLengthIsNeverMangledAndALoweredOneIsExplained) {
  const QString db = dir_.filePath("w.db");
  auto w = open_window(db);
  RunView* rv = w->run_view();
  w->show_view("run");
  snip_test::edit_run_form(rv, [](snip::RunSettings& s) { s.preset = "tiny"; });
  const int cap = snip::preset_config("tiny").max_position_embeddings;
  ASSERT_LT(cap, 128);
  QSpinBox* seq = snip_test::control<QSpinBox>(rv, "seq_len");  // typed into, as a user does
  seq->setFocus();
  seq->selectAll();
  QTest::keyClicks(seq, "128");
  EXPECT_EQ(seq->value(), 128);  // not 12: the box keeps every digit typed
  QTest::keyClick(seq, Qt::Key_Return);
  EXPECT_EQ(seq->value(), cap);
  EXPECT_TRUE(rv->seq_note().contains("128")) << rv->seq_note().toStdString();
  EXPECT_TRUE(rv->seq_note().contains(QString::number(cap))) << rv->seq_note().toStdString();
  EXPECT_TRUE(rv->seq_note().contains("tiny")) << rv->seq_note().toStdString();
  ASSERT_TRUE(rv->grab().save(shot_path("run-seq-lowered")));
  // A value that fits clears the note; switching to a preset with a shorter cap says so too.
  seq->setValue(32);
  EXPECT_TRUE(rv->seq_note().isEmpty());
  snip_test::edit_run_form(rv, [](snip::RunSettings& s) { s.preset = "small"; });
  seq->setValue(4096);
  QTest::keyClick(seq, Qt::Key_Return);
  const int small_cap = snip::preset_config("small").max_position_embeddings;
  EXPECT_EQ(seq->value(), small_cap);
  snip_test::edit_run_form(rv, [](snip::RunSettings& s) { s.preset = "tiny"; });
  EXPECT_EQ(seq->value(), std::min(small_cap, cap));
  EXPECT_TRUE(rv->seq_note().contains("tiny")) << rv->seq_note().toStdString();
  w->close();
}

// ---- 5. colour scales ----------------------------------------------------------------------

TEST(HeatmapScale, SignedValuesGetASymmetricDivergingScaleThatSaysSo) {
  HeatmapWidget map;
  map.resize(700, 300);
  HeatmapData d;
  d.rows = 1;
  d.cols = 6;
  d.values = {-4.0, -0.5, 0.0, 1e-3, 1.0, 2.0};
  d.col_labels = {"a", "b", "c", "d", "e", "f"};
  d.value_name = "ΔL (FP4 − FP8)";
  d.log_colour = true;
  d.diverging = true;
  map.set_data(d);
  map.show();
  EXPECT_EQ(map.scale_caption(), QStringLiteral("diverging · log"));
  // Symmetric around 0: the range is ±max|v|, 0 in the middle.
  EXPECT_EQ(map.legend_labels(), (QStringList{"+4", "0", "-4"}));
  const QColor zero = map.colour_of(0.0), neg = map.colour_of(-4.0), pos = map.colour_of(4.0);
  EXPECT_GT(zero.lightnessF(), 0.9);                    // 0 is near white
  EXPECT_GT(neg.blueF(), neg.redF());                   // negative: blue
  EXPECT_GT(pos.redF(), pos.blueF());                   // positive: red
  EXPECT_NE(map.colour_of(-0.5), map.colour_of(-4.0));  // magnitudes stay apart
  EXPECT_NE(map.colour_of(1.0), map.colour_of(2.0));
  ASSERT_TRUE(map.grab().save(shot_path("heatmap-diverging-log")));

  // Negative ΔL under "Log colour" without the diverging flag: still diverging (a log scale
  // cannot show it), never a made-up 1–10 range with every cell one colour.
  d.diverging = false;
  d.values = {-3e-4, -1e-4, -2e-5, -5e-6, -1e-6, -7e-7};
  map.set_data(d);
  EXPECT_EQ(map.scale_caption(), QStringLiteral("diverging · log"));
  EXPECT_EQ(map.legend_labels(), (QStringList{"+0.0003", "0", "-0.0003"}));
  EXPECT_NE(map.colour_of(-3e-4), map.colour_of(-1e-6));

  // Magnitudes: viridis, the caption names the scale.
  d.values = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1};
  map.set_data(d);
  EXPECT_EQ(map.scale_caption(), QStringLiteral("log"));
  EXPECT_EQ(map.legend_labels().front(), QStringLiteral("0.1"));
  EXPECT_EQ(map.legend_labels().back(), QStringLiteral("1e-06"));
  d.log_colour = false;
  map.set_data(d);
  EXPECT_EQ(map.scale_caption(), QStringLiteral("linear"));
}

TEST_F(UsabilityTest, SensitivityDifferenceUsesTheDivergingScaleTheMenuNames) {
  const QString db = dir_.filePath("w.db");
  seed_database(db, "tiny", "r", 5);
  auto w = open_window(db, {1024, 700});
  SensitivityView* sv = w->sensitivity_view();
  w->show_view("sensitivity");
  ASSERT_GT(sv->heatmap()->data().rows, 0);
  EXPECT_EQ(sv->heatmap()->scale_caption(), QStringLiteral("log"));  // FP4 ΔL, "Log colour"
  QComboBox* precision = nullptr;
  QComboBox* scale = nullptr;
  for (QComboBox* c : sv->findChildren<QComboBox*>()) {
    if (c->findText(QStringLiteral("FP4 − FP8")) >= 0) precision = c;
    if (c->findText(QStringLiteral("Log colour")) >= 0) scale = c;
  }
  ASSERT_TRUE(precision && scale);
  precision->setCurrentText(QStringLiteral("FP4 − FP8"));
  EXPECT_TRUE(sv->heatmap()->data().diverging);
  EXPECT_EQ(sv->heatmap()->scale_caption(), QStringLiteral("diverging · log"));
  scale->setCurrentText(QStringLiteral("Linear colour"));
  EXPECT_EQ(sv->heatmap()->scale_caption(), QStringLiteral("diverging · linear"));
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->grab().save(shot_path("sensitivity-fp4-minus-fp8")));
  w->close();
}

// ---- 6. About, docs, exports, GUI words, keyboard ------------------------------------------

TEST_F(UsabilityTest, AboutNamesTheVersionAndLinksTheDocs) {
  auto w = open_window(dir_.filePath("w.db"));
  const QString about = w->about_text();
  EXPECT_TRUE(about.contains(QStringLiteral(SNIP_VERSION))) << about.toStdString();
  const QString readme = MainWindow::readme_path();
  ASSERT_FALSE(readme.isEmpty());
  EXPECT_TRUE(QFileInfo::exists(readme));
  EXPECT_TRUE(about.contains(QUrl::fromLocalFile(readme).toString())) << about.toStdString();
  EXPECT_TRUE(about.contains("docs folder")) << about.toStdString();
  // The CPU and the kernel each precision runs on, as `snip info` prints them.
  EXPECT_TRUE(about.contains(QStringLiteral("instruction-set tier: "))) << about.toStdString();
  EXPECT_TRUE(about.contains(QStringLiteral("FP4 GEMMs: "))) << about.toStdString();
  QMessageBox box(QMessageBox::Information, QStringLiteral("About SNIP Workbench"), about, QMessageBox::Ok, w.get());
  box.show();
  QApplication::processEvents();
  ASSERT_TRUE(box.grab().save(shot_path("about")));
  w->close();
}

TEST_F(UsabilityTest, ExportsConfirmNamingTheFile) {
  const QString db = dir_.filePath("w.db");
  seed_database(db, "tiny", "r", 5);
  auto w = open_window(db);
  PlanView* pv = w->plan_view();
  ASSERT_TRUE(wait_for([&] { return pv->current().has_value() && !pv->solving(); }));
  const QString json = dir_.filePath("exported-plan.json");
  ASSERT_TRUE(w->export_to(ExportKind::plan_json, json));
  EXPECT_TRUE(QFileInfo::exists(json));
  EXPECT_TRUE(w->message_text().contains(json)) << w->message_text().toStdString();
  const QString metrics = dir_.filePath("metrics.csv");
  ASSERT_TRUE(w->export_to(ExportKind::metrics_csv, metrics));
  EXPECT_TRUE(w->message_text().contains(metrics)) << w->message_text().toStdString();
  // A failed export says so, and why.
  EXPECT_FALSE(w->export_to(ExportKind::plan_csv, dir_.filePath("no/such/folder/plan.csv")));
  EXPECT_TRUE(w->message_text().contains("failed")) << w->message_text().toStdString();
  w->close();
}

// File › Export plan for Megatron-LM / Transformer Engine / torchao writes what `snip export --to`
// writes, which reads back to the plan shown; an untied plan is refused for Megatron with the
// Plan view's own words for the fix.
TEST_F(UsabilityTest, ThePlanGoesToTheGpuStacksFromThePlanView) {
  const QString db = dir_.filePath("w.db");
  seed_database(db, "tiny", "r", 5);
  auto w = open_window(db);
  PlanView* pv = w->plan_view();
  ASSERT_TRUE(wait_for([&] { return pv->current().has_value() && !pv->solving(); }));
  const snip::ModelDims dims = snip::preset_config("tiny").dims();
  for (const auto& [kind, stack, file] :
       {std::tuple{ExportKind::plan_te, snip::PlanStack::te, "plan.te.json"},
        std::tuple{ExportKind::plan_torchao, snip::PlanStack::torchao, "plan.torchao.json"}}) {
    const QString path = dir_.filePath(file);
    ASSERT_TRUE(w->export_to(kind, path)) << w->message_text().toStdString();
    EXPECT_TRUE(w->message_text().contains(path)) << w->message_text().toStdString();
    const snip::Plan back = snip::import_plan(snip::read_file(path.toStdString()), stack, dims, file, nullptr);
    EXPECT_EQ(back.layers, pv->current()->plan.layers) << file;
  }
  bool tied = true;
  for (int b = 0; b < dims.num_layers; ++b) {
    const auto& l = pv->current()->plan.layers;
    const auto at = [&](const char* m) { return l.at("model.layers." + std::to_string(b) + "." + m); };
    tied = tied && at("self_attn.q_proj") == at("self_attn.k_proj") &&
           at("self_attn.k_proj") == at("self_attn.v_proj") && at("mlp.gate_proj") == at("mlp.up_proj");
  }
  const QString yaml = dir_.filePath("snip-precision.yaml");
  if (tied) {
    EXPECT_TRUE(w->export_to(ExportKind::plan_megatron, yaml));
  } else {
    EXPECT_FALSE(w->export_to(ExportKind::plan_megatron, yaml));
    EXPECT_TRUE(w->message_text().contains("Tie q/k/v and gate/up")) << w->message_text().toStdString();
    EXPECT_FALSE(QFileInfo::exists(yaml));
  }
  w->close();
}

TEST_F(UsabilityTest, MessagesSpeakOfMenusAndFieldsNotCommandLineFlags) {
  auto w = open_window(dir_.filePath("w.db"));
  // A folder chosen as the database and a file that is not one.
  w->workbench()->open_database(dir_.path());
  QString msg = w->message_text();
  EXPECT_FALSE(msg.contains("--db")) << msg.toStdString();
  EXPECT_TRUE(msg.contains("not a folder")) << msg.toStdString();
  QFile junk(dir_.filePath("junk.db"));
  ASSERT_TRUE(junk.open(QIODevice::WriteOnly));
  junk.write(QByteArray(4096, 'x'));
  junk.close();
  w->workbench()->open_database(junk.fileName());
  msg = w->message_text();
  EXPECT_FALSE(msg.contains("--db")) << msg.toStdString();
  // A missing corpus in the Data field: the message points at the field, not at --data.
  RunView* rv = w->run_view();
  snip_test::edit_run_form(rv, [&](snip::RunSettings& s) {
    s.preset = "tiny", s.seq_len = 32, s.steps = 2;
    s.data = dir_.filePath("no-such-corpus.txt").toStdString();
  });
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  w->start_training();
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 60000));
  msg = w->message_text();
  EXPECT_FALSE(msg.contains("--data")) << msg.toStdString();
  EXPECT_TRUE(msg.contains("Data field")) << msg.toStdString();
  EXPECT_EQ(gui_wording("pass --db with a writable path"),
            "choose a database in a writable folder (File › New database…)");
  w->close();
}

TEST_F(UsabilityTest, CtrlTabCyclesTheViews) {
  auto w = open_window(dir_.filePath("w.db"));
  QApplication::setActiveWindow(w.get());
  ASSERT_TRUE(QTest::qWaitForWindowActive(w.get()));
  w->show_view("run");
  snip_test::control<QSpinBox>(w->run_view(), "steps")->setFocus();  // focus inside a form: the shortcut still switches
  QTest::keyClick(QApplication::focusWidget(), Qt::Key_Tab, Qt::ControlModifier);
  EXPECT_EQ(w->tabs()->currentIndex(), 1);
  QTest::keyClick(QApplication::focusWidget() ? QApplication::focusWidget() : w.get(), Qt::Key_Tab,
                  Qt::ControlModifier);
  EXPECT_EQ(w->tabs()->currentIndex(), 2);
  QTest::keyClick(QApplication::focusWidget() ? QApplication::focusWidget() : w.get(), Qt::Key_Backtab,
                  Qt::ControlModifier | Qt::ShiftModifier);
  EXPECT_EQ(w->tabs()->currentIndex(), 1);
  w->show_view("run");
  QTest::keyClick(w.get(), Qt::Key_Backtab, Qt::ControlModifier | Qt::ShiftModifier);
  EXPECT_EQ(w->tabs()->currentIndex(), 4);  // wraps around
  w->close();
}

TEST_F(UsabilityTest, HeatmapAndPlanGridTakeKeyboardFocusAndShowTheSelectedCell) {
  const QString db = dir_.filePath("w.db");
  seed_database(db, "small", "r", 5);
  auto w = open_window(db);
  QApplication::setActiveWindow(w.get());
  ASSERT_TRUE(QTest::qWaitForWindowActive(w.get()));
  w->show_view("sensitivity");
  HeatmapWidget* map = w->sensitivity_view()->heatmap();
  EXPECT_NE(map->focusPolicy() & Qt::TabFocus, 0);
  map->setFocus();
  ASSERT_TRUE(map->hasFocus());
  QTest::keyClick(map, Qt::Key_Right);  // the first key selects the first cell
  QTest::keyClick(map, Qt::Key_Right);
  QTest::keyClick(map, Qt::Key_Down);
  const int cols = map->data().cols;
  EXPECT_EQ(map->selected(), cols + 1);
  EXPECT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains("block 1")) << QToolTip::text().toStdString();
  EXPECT_TRUE(QToolTip::text().contains("k")) << QToolTip::text().toStdString();
  ASSERT_TRUE(w->grab().save(shot_path("sensitivity-keyboard-selection")));
  // Enter pins the selected layer in the Plan view, as a click does.
  QTest::keyClick(map, Qt::Key_Return);
  EXPECT_EQ(w->plan_view()->pins().count("model.layers.1.self_attn.k_proj"), 1u);

  w->show_view("plan");
  PlanView* pv = w->plan_view();
  ASSERT_TRUE(wait_for([&] { return pv->current().has_value() && !pv->solving(); }));
  PlanGrid* grid = pv->grid();
  grid->setFocus();
  ASSERT_TRUE(grid->hasFocus());
  QTest::keyClick(grid, Qt::Key_Down);
  QTest::keyClick(grid, Qt::Key_Down);
  QTest::keyClick(grid, Qt::Key_End);
  EXPECT_EQ(grid->selected(), 1 * snip::kLayersPerBlock + 6);
  EXPECT_TRUE(QToolTip::isVisible());
  EXPECT_TRUE(QToolTip::text().contains("model.layers.1.mlp.down_proj")) << QToolTip::text().toStdString();
  ASSERT_TRUE(w->grab().save(shot_path("plan-keyboard-selection")));
  w->close();
}

// ---- 7. numbers that agree, the remembered form --------------------------------------------

TEST_F(UsabilityTest, FinishedRunIsLabelledByItsStatusWithItsStepCount) {
  const QString db = dir_.filePath("w.db");
  auto w = open_window(db);
  RunView* rv = w->run_view();
  snip_test::edit_run_form(rv, [](snip::RunSettings& s) {
    s.preset = "tiny", s.steps = 3, s.batch_size = 2, s.seq_len = 16, s.eval_every = 0;
    s.precision = "fp8", s.adaptive.reset(), s.plan.reset();  // FP8 everywhere
  });
  QSignalSpy progress(w->worker(), &TrainingWorker::progress);
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  w->start_training();
  ASSERT_TRUE(wait_for([&] { return ended.count() == 1; }, 120000));
  ASSERT_EQ(ended.at(0).at(1).toString(), "finished");
  QCoreApplication::processEvents();
  // The status bar counts steps; the throughput is said once, in the views.
  for (const QLabel* l : w->statusBar()->findChildren<QLabel*>()) EXPECT_FALSE(l->text().contains("tok/s"));
  MonitorView* mv = w->monitor_view();
  ASSERT_TRUE(wait_for([&] { return mv->summary_text().contains("finished"); }, 10000))
      << mv->summary_text().toStdString();
  EXPECT_FALSE(mv->summary_text().contains("live"));
  EXPECT_TRUE(mv->run_combo()->currentText().contains("3 steps")) << mv->run_combo()->currentText().toStdString();
  w->close();
}

TEST_F(UsabilityTest, TheRunFormIsRememberedBetweenLaunches) {
  const QString db = dir_.filePath("w.db");
  {
    auto w = open_window(db);
    RunView* rv = w->run_view();
    EXPECT_EQ(rv->run_settings().preset, "small");  // defaults on a first launch
    snip_test::edit_run_form(rv, [&](snip::RunSettings& s) {
      s.preset = "tiny", s.steps = 123, s.seq_len = 48;
      s.adaptive = rv->adaptive_settings();
      s.adaptive->lambda = 0.35, s.adaptive->ties = true;
    });
    w->close();  // saves
  }
  auto w = open_window(db);
  RunView* rv = w->run_view();
  const snip::RunSettings s = rv->run_settings();
  EXPECT_EQ(s.preset, "tiny");
  EXPECT_EQ(s.steps, 123);
  EXPECT_EQ(s.seq_len, 48);
  ASSERT_TRUE(s.adaptive.has_value());  // the precision choice: Adaptive
  EXPECT_DOUBLE_EQ(s.adaptive->lambda, 0.35);
  EXPECT_TRUE(s.adaptive->ties);
  // The settings are this test's (main() points QSettings at a temporary folder).
  EXPECT_TRUE(QSettings().fileName().startsWith(qEnvironmentVariable("XDG_CONFIG_HOME")))
      << QSettings().fileName().toStdString();
  w->close();
}

// ---- 8. the message bar moves nothing and covers nothing; 1024×700 -------------------------------

TEST_F(UsabilityTest, MessageBarMovesNothingAndCoversNothing) {
  const QString db = dir_.filePath("w.db");
  seed_database(db, "tiny", "r", 5);
  auto w = open_window(db, {1024, 700});
  QCoreApplication::processEvents();
  w->show_view("run");
  const QRect tabs_before = w->tabs()->geometry();
  const QPoint button_before = snip_test::control<QPushButton>(w->run_view(), "start")->mapTo(w.get(), QPoint(0, 0));
  const QString long_text = "A long warning that wraps: " + QString("word ").repeated(60);
  w->show_message(MessageLevel::warning, long_text);
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->message_bar()->isVisible());
  EXPECT_EQ(w->tabs()->geometry(), tabs_before);
  EXPECT_EQ(snip_test::control<QPushButton>(w->run_view(), "start")->mapTo(w.get(), QPoint(0, 0)), button_before);
  // Below the views, the whole width: no control under it.
  const QRect bar(w->message_bar()->mapTo(w.get(), QPoint(0, 0)), w->message_bar()->size());
  const QRect tabs(w->tabs()->mapTo(w.get(), QPoint(0, 0)), w->tabs()->size());
  EXPECT_FALSE(bar.intersects(tabs)) << "bar " << bar.y() << "+" << bar.height() << ", tabs end " << tabs.bottom();
  EXPECT_EQ(bar.width(), w->centralWidget()->width());
  // The whole text is one click away (and in the tooltip).
  const QLabel* label = w->message_bar()->findChild<QLabel*>();
  ASSERT_TRUE(label);
  EXPECT_EQ(label->toolTip(), long_text);
  bool more = false;
  for (const QPushButton* b : w->message_bar()->findChildren<QPushButton*>())
    more = more || (b->text() == "More…" && b->isVisible());
  EXPECT_TRUE(more);
  ASSERT_TRUE(w->grab().save(shot_path("message-bar-1024x700")));
  // A one-line message has no More… button; the strip's height does not change either way.
  w->show_message(MessageLevel::warning, "short");
  QCoreApplication::processEvents();
  EXPECT_EQ(w->tabs()->geometry(), tabs_before);
  bool more_now = false;
  for (const QPushButton* b : w->message_bar()->findChildren<QPushButton*>())
    more_now = more_now || (b->text() == "More…" && b->isVisible());
  EXPECT_FALSE(more_now);
  w->message_bar()->hide();
  QCoreApplication::processEvents();
  EXPECT_EQ(snip_test::control<QPushButton>(w->run_view(), "start")->mapTo(w.get(), QPoint(0, 0)), button_before);
  EXPECT_EQ(w->tabs()->geometry(), tabs_before);
  w->close();
}

}  // namespace

namespace {

// ---- 10. the quick start --------------------------------------------------------------------

TEST_F(UsabilityTest, QuickStartRunsTheWholeLoopAndSaysWhatToLookAtNext) {
  const QString db = dir_.filePath("w.db");
  auto w = open_window(db);
  // An empty database offers it.
  EXPECT_TRUE(w->message_text().contains("Quick start")) << w->message_text().toStdString();
  ASSERT_EQ(w->message_actions().size(), 1);
  EXPECT_EQ(w->message_actions()[0]->text(), "Quick start");
  const int64_t form_steps = w->run_view()->run_settings().steps;

  QuickStartOptions o;  // the real loop, shortened: 6 steps, a round and a plan every 3
  o.steps = 6;
  o.replan_every = 3;
  o.batch = 2;
  o.seq_len = 16;
  QSignalSpy ended(w.get(), &MainWindow::run_ended);
  QSignalSpy plans(w->worker(), &TrainingWorker::plan_made);
  w->start_quick_start(o);
  EXPECT_TRUE(w->quick_start_running());
  EXPECT_EQ(w->tabs()->currentIndex(), 1);  // Monitor first, the loss as it trains
  EXPECT_TRUE(w->message_text().contains("1/2")) << w->message_text().toStdString();
  // Each round fills Sensitivity and Plan while the first run still trains.
  ASSERT_TRUE(wait_for([&] { return plans.count() >= 1; }, 120000));
  QCoreApplication::processEvents();
  EXPECT_GT(w->sensitivity_view()->heatmap()->data().rows, 0);
  ASSERT_TRUE(wait_for([&] { return ended.count() == 2 && !w->quick_start_running(); }, 240000));
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(ended.at(i).at(1).toString(), "finished") << ended.at(i).at(2).toString().toStdString();
  snip::Store store(db.toStdString());
  const qint64 snip_run = ended.at(0).at(0).toLongLong(), fp4_run = ended.at(1).at(0).toLongLong();
  EXPECT_EQ(store.run(snip_run).spec.method, "snip");
  EXPECT_EQ(store.run(fp4_run).spec.method, "uniform-fp4");
  EXPECT_EQ(store.stats_rounds(snip_run).size(), 2u);
  // The end: Compare with both runs and SNIP's plans, and a message saying where to look next.
  EXPECT_EQ(w->tabs()->currentIndex(), 4);
  ASSERT_TRUE(wait_for([&] { return w->plan_view()->current().has_value() && !w->plan_view()->solving(); }));
  int run_rows = 0, plan_rows = 0;
  QTableWidget* t = w->compare_view()->table();
  for (int r = 0; r < t->rowCount(); ++r) {
    const QString source = t->item(r, CompareView::col_source)->text();
    run_rows += source.startsWith("run #");
    plan_rows += source.startsWith("plan #");
  }
  EXPECT_EQ(run_rows, 2);
  EXPECT_EQ(plan_rows, 2);
  const QString msg = w->message_text();
  EXPECT_TRUE(msg.contains("Quick start done")) << msg.toStdString();
  EXPECT_TRUE(msg.contains("Sensitivity")) << msg.toStdString();
  EXPECT_TRUE(msg.contains("Plan")) << msg.toStdString();
  EXPECT_EQ(w->run_view()->run_settings().steps, form_steps);  // the user's form is untouched
  EXPECT_TRUE(w->message_actions().isEmpty());                 // the offer's button went with the offer
  w->compare_view()->loss_chart()->redraw_now();
  ASSERT_TRUE(w->grab().save(shot_path("quick-start-done")));
  w->close();
}

}  // namespace

namespace {

TEST_F(UsabilityTest, At1024x700PlanLegendsAndTheCompareTableFit) {
  const QString db = dir_.filePath("w.db");
  const Seeded s = seed_database(db, "small", "r", 5);
  auto w = open_window(db, {1024, 700});
  PlanView* pv = w->plan_view();
  QSignalSpy swept(pv, &PlanView::sweep_shown);
  ASSERT_TRUE(wait_for([&] { return pv->current().has_value() && !pv->solving() && swept.count() > 0; }));
  const int64_t snip_plan = pv->save_plan_to_store();
  w->show_view("plan");
  QCoreApplication::processEvents();
  pv->tradeoff_chart()->redraw_now();
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->grab().save(shot_path("plan-1024x700")));
  EXPECT_EQ(w->width(), 1024);
  w->show_view("compare");
  w->compare_view()->refresh_lists();
  w->compare_view()->select({s.plan, snip_plan}, {s.run});
  QCoreApplication::processEvents();
  w->compare_view()->loss_chart()->redraw_now();
  QCoreApplication::processEvents();
  ASSERT_TRUE(w->grab().save(shot_path("compare-1024x700")));
  // The window is really 1024 wide (no view's minimum forces it wider), and every column up to
  // "Pred. ΔL" is inside the view.
  EXPECT_EQ(w->width(), 1024);
  QTableWidget* t = w->compare_view()->table();
  auto right_edge = [t] {
    const int last = CompareView::num_columns - 1;
    return t->horizontalHeader()->sectionViewportPosition(last) + t->horizontalHeader()->sectionSize(last);
  };
  wait_for([&] { return right_edge() <= t->viewport()->width(); }, 3000);  // the header lays out on events
  for (int c = 0; c < CompareView::num_columns; ++c)
    EXPECT_LE(t->horizontalHeader()->sectionViewportPosition(c) + t->horizontalHeader()->sectionSize(c),
              t->viewport()->width())
        << "column " << c;
  w->close();
}

}  // namespace
