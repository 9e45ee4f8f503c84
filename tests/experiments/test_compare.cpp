// Plan-comparison tests (METHOD.md section 6, training truth) on a tiny checkpoint with a few
// steps: every method appears, identical plans are trained once and flagged, BF16 is the zero
// of the gaps, the controls define a noise floor, and the checkpoint is never written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "exp_test_util.h"
#include "snip/compare.h"
#include "snip/error.h"

namespace fs = std::filesystem;

namespace {

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Compare, TrainsEveryPlanFromOneCheckpoint) {
  const std::string dir = (fs::temp_directory_path() / ("snip-exp-compare-" + std::to_string(::getpid()))).string();
  fs::remove_all(dir);
  {
    snip::Trainer t(exptest::tiny_config("bf16", 20));
    t.run();
    t.save_checkpoint(dir);
  }
  const std::string weights_before = slurp(dir + "/model.safetensors");
  snip::CompareOptions o;
  o.budget = 0.6;
  o.steps = 4;
  o.cooldown_steps = 2;
  o.eval_batches = 2;
  o.last_window = 3;
  o.random_seeds = 2;
  int calls = 0;
  const snip::CompareReport rep = snip::run_compare(dir, o, [&](int done, int total, const std::string&) {
    ++calls;
    EXPECT_LE(done, total);
  });
  EXPECT_EQ(weights_before, slurp(dir + "/model.safetensors"));
  fs::remove_all(dir);

  EXPECT_EQ(rep.start_step, 20);
  // bf16 + 4 λ + 2 random + min-err, min-rel-err, e-layer-type, e-layer-id + fp8, fp4 + 2 controls
  ASSERT_EQ(rep.rows.size(), 15u);
  EXPECT_EQ(calls, 15);
  EXPECT_EQ(rep.rows.front().method, "uniform-bf16");
  EXPECT_EQ(rep.rows.front().gap_train, 0.0);
  for (const auto& r : rep.rows) {
    EXPECT_TRUE(std::isfinite(r.train_loss_last) && std::isfinite(r.val_loss_plan) && std::isfinite(r.val_loss_bf16))
        << r.method;
    const bool uniform = r.method.rfind("uniform", 0) == 0;
    if (!uniform) {
      EXPECT_GE(r.achieved_fraction, 0.6) << r.method;
    }
    if (!r.same_plan_as.empty()) {
      // copied from the earlier row with the identical plan, which must exist
      bool found = false;
      for (const auto& q : rep.rows)
        if (q.method == r.same_plan_as) found = q.plan.layers == r.plan.layers;
      EXPECT_TRUE(found) << r.method << " claims the plan of " << r.same_plan_as;
    }
  }
  // uniform FP4 trains a different model than BF16
  EXPECT_NE(rep.rows[12].train_loss_last, rep.rows[0].train_loss_last);
  EXPECT_EQ(rep.rows[12].method, "uniform-fp4");
  // the controls start from perturbed weights: a non-zero floor
  EXPECT_TRUE(rep.rows[13].control && rep.rows[14].control);
  EXPECT_GT(rep.noise_floor_train, 0.0);
  // What the store keeps: each row's per-step curve (the table's value is the mean of its last
  // `last_window` steps), λ and seed, the BF16-forward gap, and the round the plans came from.
  EXPECT_EQ(rep.round.layers.size(), 14u);
  for (const auto& r : rep.rows) {
    ASSERT_EQ(r.train_curve.size(), 4u) << r.method;
    const double last3 = (r.train_curve[1] + r.train_curve[2] + r.train_curve[3]) / 3.0;
    EXPECT_NEAR(r.train_loss_last, last3, 1e-12) << r.method;
    EXPECT_EQ(r.gap_val_bf16, r.val_loss_bf16 - rep.rows[0].val_loss_bf16) << r.method;
  }
  EXPECT_NE(rep.rows[13].train_curve, rep.rows[2].train_curve);  // perturbed weights, another trajectory
  EXPECT_EQ(rep.rows[1].lambda, 0.0);
  EXPECT_EQ(rep.rows[4].lambda, 1.0);
  EXPECT_FALSE(rep.rows[0].lambda.has_value());
  EXPECT_EQ(rep.rows[5].seed, 1u);  // random s1
  EXPECT_EQ(rep.rows[6].seed, 2u);  // random s2
  EXPECT_FALSE(rep.rows[7].seed.has_value());
  EXPECT_EQ(rep.rows[13].seed, 1001u);
  EXPECT_EQ(rep.rows[14].lambda, 0.1);
}

TEST(Compare, RejectsBadOptions) {
  snip::CompareOptions o;
  o.steps = 0;
  EXPECT_THROW(snip::run_compare("/nonexistent", o), snip::Error);
}

}  // namespace
