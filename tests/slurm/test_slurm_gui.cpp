// The Compare view's "run on: Slurm" goes through the code `snip compare --executor slurm` uses:
// the view hands the compare worker a Slurm request with the sbatch arguments, and the worker,
// run on a real one-node cluster (slurm_fixture.h), stores the local compare's table bit for bit
// while it reports each training's Slurm state.
#include <gtest/gtest.h>

#include <QComboBox>
#include <QDir>
#include <QLineEdit>
#include <QSpinBox>
#include <QTemporaryDir>
#include <vector>

#include "compare_view.h"
#include "compare_worker.h"
#include "main_window.h"
#include "slurm_fixture.h"
#include "test_window.h"

using namespace snip::ui;
using snip_test::SlurmCluster;

namespace {

// A finished run whose checkpoint row points at `checkpoint`.
int64_t store_run(const QString& db, const QString& checkpoint) {
  snip::Store store(db.toStdString());
  snip::RunSpec spec;
  spec.name = "a run";
  spec.dims = snip::preset_config("tiny").dims();
  spec.method = "uniform-bf16";
  const int64_t run = store.create_run(spec);
  store.add_checkpoint(run, 6, checkpoint.toStdString());
  store.set_run_status(run, snip::RunStatus::finished);
  return run;
}

TEST_F(SlurmCluster, TheCompareViewRunsACompareOnSlurmThroughTheSameCode) {
  // The view's request: an empty checkpoint folder, so the compare it starts fails at once.
  QTemporaryDir tmp;
  const QString db = tmp.filePath("w.db"), empty = tmp.filePath("empty");
  ASSERT_TRUE(QDir().mkpath(empty));
  const int64_t run = store_run(db, empty);
  auto w = snip_test::open_test_window(db);
  w->show_view("compare");
  CompareView* cv = w->compare_view();
  auto* executor = cv->findChild<QComboBox*>(QStringLiteral("compareExecutor"));
  auto* sbatch = cv->findChild<QLineEdit*>(QStringLiteral("compareSbatchArgs"));
  auto* partition = cv->findChild<QLineEdit*>(QStringLiteral("comparePartition"));
  ASSERT_TRUE(executor && sbatch && partition);
  EXPECT_FALSE(sbatch->isEnabled());  // this machine by default
  executor->setCurrentIndex(executor->findData(QStringLiteral("slurm")));
  EXPECT_TRUE(sbatch->isEnabled());
  EXPECT_FALSE(cv->experiment_jobs_spin()->isEnabled());  // Slurm decides how many run at once
  sbatch->setText(QStringLiteral("--time=10"));
  partition->setText(QStringLiteral("debug"));  // the fixture's one partition
  std::vector<CompareRequest> received;
  QObject::connect(
      cv, &CompareView::start_worker, cv, [&](const CompareRequest& r) { received.push_back(r); },
      Qt::DirectConnection);
  cv->select({}, {run});
  cv->launch_compare_experiment();
  ASSERT_EQ(received.size(), 1u) << w->message_text().toStdString();
  EXPECT_TRUE(received[0].on_slurm);
  EXPECT_EQ(received[0].sbatch_args, QStringLiteral("--partition=debug --time=10"));
  ASSERT_TRUE(cv->wait_for_experiment(60000));

  // That request, with the fixture's checkpoint and its small compare, run by the worker.
  CompareRequest request = received[0];
  request.db_path = QString::fromStdString((dir() / "gui.db").string());
  request.checkpoint = QString::fromStdString(ck());
  request.options.budget = 0.5;
  request.options.steps = 3;
  request.options.cooldown_steps = 1;
  request.options.eval_batches = 1;
  request.options.replicates = 2;
  request.options.lambdas = {0.1};
  request.options.baselines = {"uniform-fp4"};
  qputenv("SNIP_PROGRAM", QByteArray(SNIP_BIN));
  CompareWorker worker;
  QString status;
  int polls_with_trainings = 0;
  QObject::connect(&worker, &CompareWorker::ended, [&](qint64, const QString& s, const QString& m) { status = s + m; });
  QObject::connect(&worker, &CompareWorker::slurm_status, [&](int, int, int, const QStringList& t) {
    if (!t.isEmpty() && t.front().contains(QStringLiteral("replicate"))) ++polls_with_trainings;
  });
  worker.prepare();
  worker.run(request);
  EXPECT_EQ(status, QStringLiteral("finished")) << status.toStdString();
  EXPECT_GT(polls_with_trainings, 0);
  EXPECT_EQ(table(request.db_path.toStdString()), table(local_db()));
}

}  // namespace
