// `snip compare --db`: the comparison table lands in the store (every row with its replicates,
// train-loss curves and plan, the statistics round, the link to the run whose checkpoint was
// the start), the stored replicate values reproduce the printed statistics, `snip show
// --compare` and `snip runs --compares` read it back, and --no-db stores nothing.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "run_command.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = snip_test::CommandResult;

// `snip <args>`, stdout only (the --json output); `env` prefixes variable assignments.
Result run_out(const std::string& args, const std::string& env = "") {
  return snip_test::run_stdout(env + std::string(SNIP_BIN) + " " + args);
}

class CompareRecords : public ::testing::Test {
 protected:
  // One tiny checkpoint, trained with --db so its run (and checkpoint path) is in the store.
  static void SetUpTestSuite() {
    dir_ = tmp_.emplace("cli-compare").path;
    const Result r = run_out("train --preset tiny --steps 6 --batch-size 4 --seq-len 32 --db " + db() + " --out " +
                             ck() + " --json");
    ASSERT_EQ(r.status, 0);
  }
  static void TearDownTestSuite() { tmp_.reset(); }
  static std::string db() { return (dir_ / "w.db").string(); }
  static std::string ck() { return (dir_ / "ck").string(); }
  static std::string compare_args() {
    return "compare --checkpoint " + ck() +
           " --budget 0.5 --steps 3 --cooldown 1 --eval-batches 1 --seeds 1 --replicates 2";
  }
  static inline std::optional<snip_test::TempDir> tmp_;
  static inline fs::path dir_;
};

TEST_F(CompareRecords, StoresEveryRowCurvePlanAndTheRound) {
  const Result r = run_out(compare_args() + " --db " + db() + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
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
  EXPECT_EQ(c.replicates, 2);
  EXPECT_EQ(j["replicates"], 2);
  // bf16 + 4 λ + 1 random + min-err, min-rel-err, hawq, e-layer-type, e-layer-id + fp8, fp4
  ASSERT_EQ(c.rows.size(), 13u);
  ASSERT_EQ(j["rows"].size(), 13u);
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const auto& row = c.rows[i];
    const auto& jr = j["rows"][i];
    EXPECT_EQ(row.method, jr["method"]);
    EXPECT_EQ(row.train_loss_last, jr["train_loss_last"].get<double>()) << row.method;
    EXPECT_EQ(row.val_loss_plan, jr["val_loss_plan"].get<double>()) << row.method;
    EXPECT_EQ(row.gap_train, jr["gap_train"].get<double>()) << row.method;
    EXPECT_FALSE(row.control) << row.method;
    // each replicate's curve is its per-step train loss; its value is the mean of its last steps
    ASSERT_EQ(row.replicates.size(), 2u) << row.method;
    for (const auto& x : row.replicates) {
      ASSERT_EQ(x.train_curve.size(), 3u) << row.method;
      double mean = 0;
      for (double v : x.train_curve) mean += v / 3.0;
      EXPECT_NEAR(x.train_loss_last, mean, 1e-12) << row.method;
    }
    EXPECT_NEAR(row.train_loss_last, (row.replicates[0].train_loss_last + row.replicates[1].train_loss_last) / 2,
                1e-12);
    ASSERT_TRUE(row.plan_id.has_value()) << row.method;
    const snip::PlanRecord plan = store.plan(*row.plan_id);
    EXPECT_EQ(plan.plan.layers.size(), 14u) << row.method;
    EXPECT_NEAR(plan.plan.achieved_fp4_fraction, row.achieved_fraction, 1e-12) << row.method;
  }
  EXPECT_EQ(c.rows[0].method, "uniform-bf16");
  EXPECT_EQ(c.rows[0].gap_train, 0.0);
  EXPECT_EQ(c.rows[2].lambda, 0.1);  // "snip λ=0.1", the reference
  EXPECT_EQ(j["snip_reference"], "snip λ=0.1");
  EXPECT_EQ(c.rows[5].seed, 1);                              // "random s1"
  EXPECT_NE(c.rows[0].train_curve, c.rows[12].train_curve);  // BF16 and uniform FP4 trained differently
  EXPECT_EQ(c.rows[8].method, "hawq");

  // The stored replicate values reproduce every printed statistic (recomputed here by hand from
  // the stored numbers, not by the table code): gaps paired by replicate, means, 95% half-widths
  // with t_{0.975,1} = 12.7062, paired differences to SNIP and verdicts.
  const double t1 = 12.706204736174707;
  auto half_width = [&](double a, double b) { return t1 * std::abs(a - b) / 2.0; };  // sd of 2 = |a−b|/√2
  const auto& bf = c.rows[0].replicates;
  const auto& sn = c.rows[2].replicates;
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const auto& x = c.rows[i].replicates;
    const auto& jr = j["rows"][i];
    const double g0 = x[0].train_loss_last - bf[0].train_loss_last, g1 = x[1].train_loss_last - bf[1].train_loss_last;
    ASSERT_EQ(jr["replicate_gaps_train"].size(), 2u);
    EXPECT_NEAR(jr["replicate_gaps_train"][0].get<double>(), g0, 1e-12) << c.rows[i].method;
    EXPECT_NEAR(jr["replicate_gaps_train"][1].get<double>(), g1, 1e-12) << c.rows[i].method;
    EXPECT_NEAR(jr["gap_train_mean"].get<double>(), (g0 + g1) / 2, 1e-12) << c.rows[i].method;
    EXPECT_NEAR(jr["gap_train_ci95"].get<double>(), half_width(g0, g1), 1e-9) << c.rows[i].method;
    const double v0 = x[0].val_loss_plan - bf[0].val_loss_plan, v1 = x[1].val_loss_plan - bf[1].val_loss_plan;
    EXPECT_NEAR(jr["gap_val_mean"].get<double>(), (v0 + v1) / 2, 1e-12) << c.rows[i].method;
    EXPECT_NEAR(jr["gap_val_ci95"].get<double>(), half_width(v0, v1), 1e-9) << c.rows[i].method;
    if (i == 2) {
      EXPECT_TRUE(jr["verdict"].is_null());
      EXPECT_TRUE(jr["diff_vs_snip_mean"].is_null());
      EXPECT_TRUE(jr["snip_reference"].get<bool>());
      continue;
    }
    const double d0 = x[0].train_loss_last - sn[0].train_loss_last, d1 = x[1].train_loss_last - sn[1].train_loss_last;
    const double dm = (d0 + d1) / 2, dh = half_width(d0, d1);
    EXPECT_NEAR(jr["diff_vs_snip_mean"].get<double>(), dm, 1e-12) << c.rows[i].method;
    EXPECT_NEAR(jr["diff_vs_snip_ci95"].get<double>(), dh, 1e-9) << c.rows[i].method;
    const std::string verdict = dm - dh > 0 ? "worse" : dm + dh < 0 ? "better" : "indistinguishable";
    EXPECT_EQ(jr["verdict"], verdict) << c.rows[i].method;
    EXPECT_EQ(c.rows[i].differs_from_snip, verdict != "indistinguishable") << c.rows[i].method;
    const double e0 = x[0].val_loss_plan - sn[0].val_loss_plan, e1 = x[1].val_loss_plan - sn[1].val_loss_plan;
    EXPECT_NEAR(jr["diff_vs_snip_mean_val"].get<double>(), (e0 + e1) / 2, 1e-12) << c.rows[i].method;
    EXPECT_NEAR(jr["diff_vs_snip_ci95_val"].get<double>(), half_width(e0, e1), 1e-9) << c.rows[i].method;
    EXPECT_TRUE(jr["verdict_val"].is_string()) << c.rows[i].method;
  }

  // snip show --compare prints the stored table; snip runs --compares lists it; snip show --run names it.
  const Result show = run_out("show --db " + db() + " --compare " + std::to_string(id) + " --json");
  ASSERT_EQ(show.status, 0);
  const nlohmann::json js = nlohmann::json::parse(show.out);
  ASSERT_EQ(js["rows"].size(), 13u);
  EXPECT_EQ(js["rows"][3]["train_curve"].size(), 3u);
  EXPECT_EQ(js["rows"][3]["replicate_train_curves"].size(), 2u);
  EXPECT_EQ(js["rows"][12]["method"], "uniform-fp4");
  // the stored table's statistics are the ones printed when it ran
  for (size_t i = 0; i < 13; ++i)
    for (const char* key : {"replicate_gaps_train", "gap_train_mean", "gap_train_ci95", "diff_vs_snip_mean",
                            "diff_vs_snip_ci95", "verdict", "replicate_gaps_val", "gap_val_mean", "gap_val_ci95",
                            "diff_vs_snip_mean_val", "diff_vs_snip_ci95_val", "verdict_val"})
      EXPECT_EQ(js["rows"][i][key], j["rows"][i][key]) << i << " " << key;
  const Result list = run_out("runs --db " + db() + " --compares --json");
  ASSERT_EQ(list.status, 0);
  const nlohmann::json jl = nlohmann::json::parse(list.out);
  ASSERT_GE(jl.size(), 1u);
  EXPECT_EQ(jl[0]["id"], id);
  EXPECT_EQ(jl[0]["rows"], 13);
  const Result run_view = run_out("show --db " + db() + " --run " + std::to_string(runs[0].id) + " --json");
  ASSERT_EQ(run_view.status, 0);
  const nlohmann::json jr = nlohmann::json::parse(run_view.out);
  bool listed = false;
  for (const auto& x : jr["compares"]) listed = listed || x["id"] == id;
  EXPECT_TRUE(listed) << jr["compares"].dump();
  // The text table names the stored id.
  const Result text = run_out("show --db " + db() + " --compare " + std::to_string(id));
  EXPECT_NE(text.out.find("uniform-fp4"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("2 replicates per arm"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("verdict"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(" ± "), std::string::npos) << text.out;
}

TEST_F(CompareRecords, OneReplicateSaysThereIsNoIntervalAndBadReplicatesAreRefused) {
  const std::string base = "compare --checkpoint " + ck() +
                           " --budget 0.5 --steps 2 --cooldown 0 --eval-batches 1 "
                           "--seeds 0 --no-db --replicates ";
  const Result one = run_out(base + "1");
  ASSERT_EQ(one.status, 0) << one.out;
  EXPECT_NE(one.out.find("one replicate: no interval"), std::string::npos) << one.out;
  // no interval is no evidence: nothing is concluded about precision either
  EXPECT_EQ(one.out.find("precision does not matter in this regime"), std::string::npos) << one.out;
  const Result json = run_out(base + "1 --json");
  ASSERT_EQ(json.status, 0);
  const nlohmann::json j = nlohmann::json::parse(json.out);
  for (const auto& r : j["rows"]) {
    EXPECT_TRUE(r["gap_train_ci95"].is_null()) << r.dump();
    if (!r["snip_reference"].get<bool>()) {
      EXPECT_EQ(r["verdict"], "indistinguishable") << r.dump();
    }
  }
  EXPECT_EQ(run_out(base + "0").status, 1);
  EXPECT_EQ(run_out(base + "1 --oracle --oracle-batches 99999").status,
            1);  // more than the validation stream  // "error: compare: --replicates must be at least 1 ..."
}

TEST_F(CompareRecords, NoDbStoresNothingAndAMissingCompareIsAnError) {
  const std::string env = "XDG_DATA_HOME=" + (dir_ / "xdg").string() + " ";
  const Result r = run_out(compare_args() + " --no-db --json", env);
  ASSERT_EQ(r.status, 0);
  EXPECT_TRUE(nlohmann::json::parse(r.out)["compare_id"].is_null());
  EXPECT_FALSE(fs::exists(dir_ / "xdg" / "snip-workbench" / "workbench.db"));
  EXPECT_EQ(run_out("show --db " + db() + " --compare 999").status, 1);
  EXPECT_NE(run_out("show --db " + db()).status, 0);  // neither --run nor --compare
}

}  // namespace
