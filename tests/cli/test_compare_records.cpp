// `snip compare --db`: the comparison table lands in the store (every row with its train-loss
// curve and plan, the statistics round, the link to the run whose checkpoint was the start),
// `snip show --compare` and `snip runs --compares` read it back, and --no-db stores nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "snip/store.h"

namespace fs = std::filesystem;

namespace {

struct Result {
  int code = -1;
  std::string out;  // stdout only
};

Result run_out(const std::string& args, const std::string& env = "") {
  Result r;
  const std::string cmd = env + std::string(SNIP_BIN) + " " + args + " 2>/dev/null";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class CompareRecords : public ::testing::Test {
 protected:
  // One tiny checkpoint, trained with --db so its run (and checkpoint path) is in the store.
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("snip_cli_compare_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const Result r = run_out("train --preset tiny --steps 6 --batch-size 4 --seq-len 32 --db " + db() + " --out " +
                             ck() + " --json");
    ASSERT_EQ(r.code, 0);
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static std::string db() { return (dir_ / "w.db").string(); }
  static std::string ck() { return (dir_ / "ck").string(); }
  static std::string compare_args() {
    return "compare --checkpoint " + ck() + " --budget 0.5 --steps 3 --cooldown 1 --eval-batches 1 --seeds 1";
  }
  static fs::path dir_;
};
fs::path CompareRecords::dir_;

TEST_F(CompareRecords, StoresEveryRowCurvePlanAndTheRound) {
  const Result r = run_out(compare_args() + " --db " + db() + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j["compare_id"].is_number_integer()) << j.dump();
  const int64_t id = j["compare_id"];

  snip::Store store(db());
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  const snip::CompareRecord c = store.compare(id);
  EXPECT_EQ(c.run_id, runs[0].id);  // found through the checkpoint path
  EXPECT_EQ(c.start_step, 6);
  EXPECT_EQ(c.budget, 0.5);
  EXPECT_EQ(c.steps, 3);
  EXPECT_EQ(c.cooldown_steps, 1);
  EXPECT_EQ(c.eval_batches, 1);
  EXPECT_EQ(c.recipe, "snip");
  EXPECT_EQ(fs::path(c.checkpoint), fs::absolute(ck()).lexically_normal());
  ASSERT_TRUE(c.stats_round_id.has_value());
  EXPECT_EQ(store.stats_round(*c.stats_round_id).layers.size(), 14u);
  EXPECT_EQ(c.noise_floor_train, j["noise_floor_train"].get<double>());
  // bf16 + 4 λ + 1 random + min-err, min-rel-err, e-layer-type, e-layer-id + fp8, fp4 + 2 controls
  ASSERT_EQ(c.rows.size(), 14u);
  ASSERT_EQ(j["rows"].size(), 14u);
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const auto& row = c.rows[i];
    const auto& jr = j["rows"][i];
    EXPECT_EQ(row.method, jr["method"]);
    EXPECT_EQ(row.train_loss_last, jr["train_loss_last"].get<double>()) << row.method;
    EXPECT_EQ(row.val_loss_plan, jr["val_loss_plan"].get<double>()) << row.method;
    EXPECT_EQ(row.gap_train, jr["gap_train"].get<double>()) << row.method;
    EXPECT_EQ(row.differs_from_snip, jr["differs_from_snip"].get<bool>()) << row.method;
    EXPECT_EQ(row.control, jr["control"].get<bool>()) << row.method;
    // the curve is the arm's per-step train loss; the table's value is the mean of its last steps
    ASSERT_EQ(row.train_curve.size(), 3u) << row.method;
    double mean = 0;
    for (double v : row.train_curve) mean += v / 3.0;
    EXPECT_NEAR(row.train_loss_last, mean, 1e-12) << row.method;
    ASSERT_TRUE(row.plan_id.has_value()) << row.method;
    const snip::PlanRecord plan = store.plan(*row.plan_id);
    EXPECT_EQ(plan.plan.layers.size(), 14u) << row.method;
    EXPECT_NEAR(plan.plan.achieved_fp4_fraction, row.achieved_fraction, 1e-12) << row.method;
  }
  EXPECT_EQ(c.rows[0].method, "uniform-bf16");
  EXPECT_EQ(c.rows[0].gap_train, 0.0);
  EXPECT_EQ(c.rows[2].lambda, 0.1);                       // "snip λ=0.1"
  EXPECT_EQ(c.rows[5].seed, 1);                           // "random s1"
  EXPECT_TRUE(c.rows[12].control && c.rows[13].control);  // the controls reuse the SNIP reference plan
  EXPECT_EQ(store.plan(*c.rows[12].plan_id).plan.layers, store.plan(*c.rows[2].plan_id).plan.layers);
  EXPECT_NE(c.rows[0].train_curve, c.rows[11].train_curve);  // BF16 and uniform FP4 trained differently

  // snip show --compare prints the stored table; snip runs --compares lists it; snip show --run names it.
  const Result show = run_out("show --db " + db() + " --compare " + std::to_string(id) + " --json");
  ASSERT_EQ(show.code, 0);
  const nlohmann::json js = nlohmann::json::parse(show.out);
  EXPECT_EQ(js["rows"].size(), 14u);
  EXPECT_EQ(js["rows"][3]["train_curve"].size(), 3u);
  EXPECT_EQ(js["rows"][11]["method"], "uniform-fp4");
  const Result list = run_out("runs --db " + db() + " --compares --json");
  ASSERT_EQ(list.code, 0);
  const nlohmann::json jl = nlohmann::json::parse(list.out);
  ASSERT_GE(jl.size(), 1u);
  EXPECT_EQ(jl[0]["id"], id);
  EXPECT_EQ(jl[0]["rows"], 14);
  const Result run_view = run_out("show --db " + db() + " --run " + std::to_string(runs[0].id) + " --json");
  ASSERT_EQ(run_view.code, 0);
  const nlohmann::json jr = nlohmann::json::parse(run_view.out);
  bool listed = false;
  for (const auto& x : jr["compares"]) listed = listed || x["id"] == id;
  EXPECT_TRUE(listed) << jr["compares"].dump();
  // The text table names the stored id.
  const Result text = run_out("show --db " + db() + " --compare " + std::to_string(id));
  EXPECT_NE(text.out.find("uniform-fp4"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("noise floor"), std::string::npos) << text.out;
}

TEST_F(CompareRecords, NoDbStoresNothingAndAMissingCompareIsAnError) {
  const std::string env = "XDG_DATA_HOME=" + (dir_ / "xdg").string() + " ";
  const Result r = run_out(compare_args() + " --no-db --json", env);
  ASSERT_EQ(r.code, 0);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["compare_id"].is_null());
  EXPECT_FALSE(fs::exists(dir_ / "xdg" / "snip-workbench" / "workbench.db"));
  EXPECT_EQ(run_out("show --db " + db() + " --compare 999").code, 1);
  EXPECT_NE(run_out("show --db " + db()).code, 0);  // neither --run nor --compare
}

}  // namespace
