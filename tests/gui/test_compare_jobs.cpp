// The Compare view's "jobs" control (`snip compare --jobs`): its default and lower bound are the
// CLI's, its tooltip says it never changes a result, and the value set in it is what the compare
// worker receives, for a new compare and for a resumed one. The worker is real; the checkpoint
// is an empty folder and the resumed compare has no stored settings, so both fail at once
// (the settings are checked on the request the worker was handed, before it fails).
#include <gtest/gtest.h>

#include <QDir>
#include <QSpinBox>
#include <QTemporaryDir>
#include <vector>

#include "compare_view.h"
#include "compare_worker.h"
#include "main_window.h"
#include "snip/compare.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

struct Stored {
  int64_t run = 0, compare = 0;
};

// A run with a checkpoint row pointing at `checkpoint`, and an interrupted compare.
Stored make_store(const QString& db, const QString& checkpoint) {
  snip::Store store(db.toStdString());
  snip::RunSpec spec;
  spec.name = "a run";
  spec.dims = snip::preset_config("tiny").dims();
  spec.method = "uniform-bf16";
  Stored out;
  out.run = store.create_run(spec);
  store.add_checkpoint(out.run, 3, checkpoint.toStdString());
  store.set_run_status(out.run, snip::RunStatus::finished);
  snip::CompareRecord c;
  c.run_id = out.run;
  c.checkpoint = checkpoint.toStdString();
  c.budget = 0.5;
  c.recipe = "snip";
  c.steps = 2;
  c.replicates = 2;
  c.status = snip::RunStatus::running;
  out.compare = store.insert_compare(c);
  store.set_compare_status(out.compare, snip::RunStatus::interrupted, "stopped");
  return out;
}

TEST(CompareJobs, TheJobsControlIsWhatTheWorkerReceivesForANewAndAResumedCompare) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString db = dir.filePath("w.db"), checkpoint = dir.filePath("checkpoint");
  ASSERT_TRUE(QDir().mkpath(checkpoint));
  const Stored stored = make_store(db, checkpoint);
  auto w = snip_test::open_test_window(db);
  w->show_view("compare");
  CompareView* cv = w->compare_view();
  QSpinBox* jobs = cv->experiment_jobs_spin();
  ASSERT_NE(jobs, nullptr);

  // The CLI's default (one job per hardware thread) and its rule (at least 1).
  EXPECT_EQ(jobs->value(), snip::default_compare_jobs());
  EXPECT_EQ(jobs->minimum(), 1);
  jobs->setValue(0);
  EXPECT_EQ(jobs->value(), 1);
  const int other = snip::default_compare_jobs() + 1, another = other + 1;  // neither is the default
  EXPECT_GE(jobs->maximum(), another);
  EXPECT_TRUE(jobs->toolTip().contains("never the results")) << jobs->toolTip().toStdString();
  EXPECT_TRUE(jobs->toolTip().contains("Compare.ParallelJobsGiveTheBitsOfOneJob")) << jobs->toolTip().toStdString();

  std::vector<CompareRequest> received;
  QObject::connect(
      cv, &CompareView::start_worker, cv, [&](const CompareRequest& r) { received.push_back(r); },
      Qt::DirectConnection);

  // A new compare from the checked run's checkpoint.
  jobs->setValue(other);
  cv->experiment_replicates_spin()->setValue(4);
  cv->select({}, {stored.run});
  cv->launch_compare_experiment();
  ASSERT_EQ(received.size(), 1u) << w->message_text().toStdString();
  EXPECT_EQ(received[0].options.jobs, other);
  EXPECT_EQ(received[0].options.replicates, 4);
  EXPECT_EQ(received[0].resume_id, 0);
  EXPECT_EQ(received[0].checkpoint, checkpoint);
  ASSERT_TRUE(cv->wait_for_experiment(60000));

  // Resuming the interrupted compare: its own settings are stored, the jobs are this control's.
  jobs->setValue(another);
  cv->select({}, {}, {stored.compare});
  cv->resume_compare_experiment();
  ASSERT_EQ(received.size(), 2u) << w->message_text().toStdString();
  EXPECT_EQ(received[1].resume_id, stored.compare);
  EXPECT_EQ(received[1].options.jobs, another);
  ASSERT_TRUE(cv->wait_for_experiment(60000));
}

}  // namespace
