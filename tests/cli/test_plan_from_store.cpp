// `snip solve` and `snip sweep` planning from statistics rounds stored in the experiment
// database: --stats ROUND_ID --db FILE and --run RUN_ID (the run's latest round), with the same
// plan as from the round written to a snip-stats/1 file, and errors that name what is missing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "run_command.h"
#include "snip/stats.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = snip_test::CommandResult;

Result run(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_BIN) + " " + args);
}

// One adaptive tiny run (3 statistics rounds) shared by the tests.
class PlanFromStore : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = tmp_.emplace("cli-plan").path;
    db_ = (dir_ / "w.db").string();
    const Result r = run("train --preset tiny --steps 7 --batch-size 4 --seq-len 32 --eval-every 0 --db " + db_ +
                         " --out " + (dir_ / "ck").string() + " --method snip --budget 0.6 --replan-every 3");
    ASSERT_EQ(r.status, 0) << r.out;
  }
  static void TearDownTestSuite() { tmp_.reset(); }
  static inline std::optional<snip_test::TempDir> tmp_;  // owns dir_ for the suite
  static inline fs::path dir_;
  static inline std::string db_;
};

nlohmann::json parse_json(const Result& r) {
  EXPECT_EQ(r.status, 0) << r.out;
  // stderr is mixed in: skip the warning lines (e.g. a round with a negative measured curvature).
  std::string out = r.out;
  while (out.rfind("warning: ", 0) == 0)
    out.erase(0, out.find('\n') == std::string::npos ? out.size() : out.find('\n') + 1);
  try {
    return nlohmann::json::parse(out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << r.out;
    return {};
  }
}

}  // namespace

TEST_F(PlanFromStore, RunPicksTheLatestRoundAndMatchesTheFilePlan) {
  snip::Store store(db_);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  const int64_t run_id = runs[0].id;
  const auto rounds = store.stats_rounds(run_id);
  ASSERT_EQ(rounds.size(), 3u);  // before steps 1, 4, 7
  int64_t latest = rounds[0].id, latest_step = rounds[0].step;
  for (const auto& r : rounds)
    if (r.step > latest_step || (r.step == latest_step && r.id > latest)) latest = r.id, latest_step = r.step;
  ASSERT_EQ(latest_step, 6);  // the round before step 7 sees 6 optimizer steps

  const nlohmann::json by_run =
      parse_json(run("solve --run " + std::to_string(run_id) + " --db " + db_ + " --budget 0.5 --json"));
  EXPECT_EQ(by_run.value("stats_round_id", int64_t(-1)), latest);

  // The same round written to a file gives the same plan.
  const std::string file = (dir_ / "latest.json").string();
  std::ofstream(file) << snip::stats_to_json(store.stats_round(latest));
  const nlohmann::json by_file = parse_json(run("solve --stats " + file + " --budget 0.5 --json"));
  ASSERT_TRUE(by_file.contains("fp4_layers"));
  EXPECT_EQ(by_run["fp4_layers"], by_file["fp4_layers"]);
  EXPECT_DOUBLE_EQ(by_run["predicted_q"].get<double>(), by_file["predicted_q"].get<double>());
  EXPECT_GE(by_run["achieved_fp4_fraction"].get<double>(), 0.5);
}

TEST_F(PlanFromStore, StatsIdPicksThatRoundAndWritesAPlan) {
  snip::Store store(db_);
  const auto rounds = store.stats_rounds();
  ASSERT_FALSE(rounds.empty());
  // the first round (step 0): a different round than the latest, so the id really selects
  int64_t first = rounds[0].id;
  for (const auto& r : rounds) first = std::min(first, r.id);
  const std::string plan = (dir_ / "p.json").string();
  const nlohmann::json j =
      parse_json(run("solve --stats " + std::to_string(first) + " --db " + db_ + " --budget 0.5 --json --out " + plan));
  EXPECT_EQ(j.value("stats_round_id", int64_t(-1)), first);
  EXPECT_NE(j.value("costs", std::string()).find("round " + std::to_string(first)), std::string::npos) << j.dump();
  ASSERT_TRUE(fs::exists(plan));
  std::ifstream in(plan);
  const nlohmann::json p = nlohmann::json::parse(in);
  EXPECT_EQ(p["provenance"]["stats_round_id"].get<int64_t>(), first) << p.dump();

  // plain-text output names the stored source
  const Result text = run("solve --stats " + std::to_string(first) + " --db " + db_ + " --budget 0.5");
  EXPECT_EQ(text.status, 0) << text.out;
  EXPECT_NE(text.out.find(db_ + " round " + std::to_string(first)), std::string::npos) << text.out;
}

TEST_F(PlanFromStore, SweepFromTheLatestRoundOfARun) {
  snip::Store store(db_);
  const int64_t run_id = store.runs()[0].id;
  const nlohmann::json j = parse_json(run("sweep --run " + std::to_string(run_id) + " --db " + db_ +
                                          " --budgets 0.25,0.5 --methods snip,min-err --json"));
  ASSERT_TRUE(j.contains("points"));
  EXPECT_EQ(j["points"].size(), 4u);
  EXPECT_TRUE(j.contains("stats_round_id"));
  for (const auto& p : j["points"]) {
    EXPECT_TRUE(p["ok"].get<bool>()) << p.dump();
    EXPECT_GE(p["achieved_fp4_fraction"].get<double>(), p["budget"].get<double>() - 1e-12);
  }
}

TEST_F(PlanFromStore, MissingRoundRunOrDatabaseIsAnErrorThatSaysSo) {
  Result r = run("solve --stats 9999 --db " + db_ + " --budget 0.5");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("9999"), std::string::npos) << r.out;

  r = run("solve --run 4242 --db " + db_ + " --budget 0.5");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("run 4242"), std::string::npos) << r.out;

  r = run("sweep --run 1 --db " + (dir_ / "nope.db").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("does not exist"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir_ / "nope.db"));  // a typo does not create an empty database

  r = run("solve --run 1 --stats 2 --db " + db_ + " --budget 0.5");
  EXPECT_NE(r.status, 0) << r.out;

  r = run("solve --budget 0.5");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("--run RUN_ID"), std::string::npos) << r.out;
}
