// `snip train --db`: the run, its per-step metrics, checkpoints and (adaptive SNIP) statistics
// rounds, plans and plan timeline land in the store; a bad budget fails the run, not the process.
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

int run(const std::string& args) {
  const std::string cmd = std::string(SNIP_BIN) + " " + args + " >/dev/null 2>&1";
  const int rc = std::system(cmd.c_str());
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

}  // namespace

TEST(TrainRecords, AdaptiveSnipRunStoresRoundsPlansAndTimeline) {
  TempDir dir;
  const std::string db = (dir.path / "w.db").string();
  ASSERT_EQ(run("train --preset tiny --steps 12 --batch-size 4 --seq-len 32 --eval-every 6 --db " + db + " --out " +
                (dir.path / "ck").string() + " --method snip --budget 0.6 --replan-every 5 --bf16-probe-every 4"),
            0);
  snip::Store store(db);
  auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto& r = runs[0];
  EXPECT_EQ(r.status, snip::RunStatus::finished);
  EXPECT_EQ(r.spec.method, "snip");
  EXPECT_EQ(r.last_step, 12);
  auto rows = store.metrics(r.id);
  ASSERT_EQ(rows.size(), 12u);
  int probes = 0;
  for (const auto& row : rows) {
    EXPECT_GE(row.fp4_fraction, 0.6 - 1e-12) << "step " << row.step;  // every plan in effect meets ρ
    if (row.bf16_gap) ++probes;
  }
  EXPECT_EQ(probes, 3);                        // steps 1, 5, 9
  EXPECT_EQ(store.stats_rounds().size(), 3u);  // before steps 1, 6, 11
  auto timeline = store.plan_timeline(r.id);
  ASSERT_EQ(timeline.size(), 3u);
  EXPECT_EQ(timeline[0].first_step, 1);
  EXPECT_EQ(timeline[1].first_step, 6);
  EXPECT_EQ(timeline[2].first_step, 11);
  EXPECT_EQ(store.checkpoints(r.id).size(), 1u);
}

// A budget outside [0, 1] is an option error (app/option_rules.h): refused before anything is
// recorded or trained, instead of a run that fails at its first statistics round.
TEST(TrainRecords, OutOfRangeBudgetIsRefusedBeforeARunIsRecorded) {
  TempDir dir;
  const std::string db = (dir.path / "w.db").string();
  EXPECT_EQ(run("train --preset tiny --steps 3 --db " + db + " --out " + (dir.path / "ck").string() +
                " --method snip --budget 1.5 --replan-every 2"),
            1);
  EXPECT_FALSE(fs::exists(db));
  EXPECT_FALSE(fs::exists(dir.path / "ck"));
}

TEST(TrainRecords, NoDbLeavesNoDatabase) {
  TempDir dir;
  const std::string env = "XDG_DATA_HOME=" + (dir.path / "xdg").string() + " ";
  const std::string cmd = env + SNIP_BIN + " train --preset tiny --steps 2 --no-db --out " +
                          (dir.path / "ck").string() + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_FALSE(fs::exists(dir.path / "xdg" / "snip-workbench" / "workbench.db"));
  EXPECT_TRUE(fs::exists(dir.path / "ck" / "model.safetensors"));
}
