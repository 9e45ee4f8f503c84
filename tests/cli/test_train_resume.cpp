// `snip train --resume` of an adaptive SNIP run recorded in the store: the resumed run is the
// same run in the database, its losses equal an uninterrupted run's bit for bit, and its
// statistics rounds and plan timeline fall on the same steps (the next round comes when the
// uninterrupted run's would, not at the resume step).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using snip_test::TempDir;

int snip_train(const std::string& args) {
  const std::string cmd = std::string(SNIP_BIN) + " train " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(TrainResume, AdaptiveRunResumesIntoTheSameRunOnTheUninterruptedTrajectory) {
  TempDir dir;
  const std::string db_straight = (dir.path / "straight.db").string(), db_split = (dir.path / "split.db").string();
  const std::string ck_straight = (dir.path / "ck_straight").string(), ck_split = (dir.path / "ck_split").string();
  // A constant schedule, so a 7-step run extended to 12 has the 12-step run's learning rates.
  const std::string model = "--preset tiny --batch-size 2 --seq-len 32 --schedule constant --warmup 0 --eval-every 4 ";
  const std::string adaptive = " --method snip --budget 0.5 --lambda 0.3 --replan-every 3 --bf16-probe-every 2";
  ASSERT_EQ(snip_train(model + "--steps 12 --db " + db_straight + " --out " + ck_straight + adaptive), 0);
  ASSERT_EQ(snip_train(model + "--steps 7 --db " + db_split + " --out " + ck_split + adaptive), 0);
  ASSERT_EQ(snip_train("--resume " + ck_split + " --steps 12 --db " + db_split + adaptive), 0);

  snip::Store straight(db_straight), split(db_split);
  ASSERT_EQ(straight.runs().size(), 1u);
  ASSERT_EQ(split.runs().size(), 1u) << "the resumed run is recorded into the run that saved the checkpoint";
  const snip::RunInfo a = straight.runs()[0], b = split.runs()[0];
  EXPECT_EQ(b.status, snip::RunStatus::finished);
  const auto rows_a = straight.metrics(a.id), rows_b = split.metrics(b.id);
  ASSERT_EQ(rows_a.size(), 12u);
  ASSERT_EQ(rows_b.size(), 12u);
  for (size_t i = 0; i < rows_a.size(); ++i) {
    EXPECT_EQ(rows_b[i].step, rows_a[i].step);
    EXPECT_EQ(rows_b[i].train_loss, rows_a[i].train_loss) << "step " << rows_a[i].step;  // bit-identical
    // (the 7-step part also evaluated at its last step, as every run does at its end)
    if (rows_a[i].step != 7) {
      EXPECT_EQ(rows_b[i].val_loss, rows_a[i].val_loss) << "step " << rows_a[i].step;
    }
    EXPECT_EQ(rows_b[i].fp4_fraction, rows_a[i].fp4_fraction) << "step " << rows_a[i].step;
  }
  // Rounds before steps 1, 4, 7, 10 in both; the timeline continues the plan in effect at step 7.
  EXPECT_EQ(split.stats_rounds(b.id).size(), straight.stats_rounds(a.id).size());
  const auto tl_a = straight.plan_timeline(a.id), tl_b = split.plan_timeline(b.id);
  ASSERT_EQ(tl_a.size(), 4u);
  ASSERT_EQ(tl_b.size(), 4u);
  for (size_t i = 0; i < tl_a.size(); ++i) {
    EXPECT_EQ(tl_b[i].first_step, tl_a[i].first_step);
    EXPECT_EQ(tl_b[i].last_step, tl_a[i].last_step);
    EXPECT_EQ(split.plan(tl_b[i].plan_id).plan.layers, straight.plan(tl_a[i].plan_id).plan.layers) << "plan " << i;
    EXPECT_DOUBLE_EQ(split.plan(tl_b[i].plan_id).solve.options.value("lambda", 0.0), 0.3);
  }
  // The newest checkpoint listed with the run is the resumed run's end.
  const auto cps = split.checkpoints(b.id);
  ASSERT_FALSE(cps.empty());
  EXPECT_EQ(cps.back().step, 12);
}
