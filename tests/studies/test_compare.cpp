// Plan-comparison tests (METHOD.md section 6, training truth) on a tiny checkpoint with a few
// steps: every method appears, identical plans are trained once and flagged, BF16 is the zero
// of the gaps, every arm is replicated with paired perturbations, and the checkpoint is never written.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "exp_test_util.h"
#include "snip/compare.h"
#include "snip/error.h"
#include "snip/planner.h"

namespace fs = std::filesystem;

namespace {

// A small compare (3 steps, one λ, one random seed) with two replicates per arm.
snip::CompareOptions two_replicate_options() {
  snip::CompareOptions o;
  o.budget = 0.5;
  o.steps = 3;
  o.cooldown_steps = 1;
  o.eval_batches = 1;
  o.last_window = 2;
  o.random_seeds = 1;
  o.lambdas = {0.1};
  o.replicates = 2;
  return o;
}

// The shortest compare: 2 steps, no cooldown, one evaluation batch, one λ, one replicate.
snip::CompareOptions two_step_options(double budget, const std::string& recipe) {
  snip::CompareOptions o;
  o.budget = budget;
  o.steps = 2;
  o.cooldown_steps = 0;
  o.eval_batches = 1;
  o.last_window = 2;
  o.lambdas = {0.1};
  o.replicates = 1;
  o.recipe = recipe;
  return o;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(Compare, TrainsEveryPlanFromOneCheckpoint) {
  const exptest::TinyCheckpoint ck(20);
  const std::string& dir = ck.dir;
  const std::string weights_before = slurp(dir + "/model.safetensors");
  snip::CompareOptions o;
  o.budget = 0.6;
  o.steps = 4;
  o.cooldown_steps = 2;
  o.eval_batches = 2;
  o.last_window = 3;
  o.random_seeds = 2;
  o.replicates = 2;
  int calls = 0;
  const snip::CompareReport rep = snip::run_compare(dir, o, [&](int done, int total, const std::string&) {
    ++calls;
    EXPECT_LE(done, total);
  });
  EXPECT_EQ(weights_before, slurp(dir + "/model.safetensors"));

  EXPECT_EQ(rep.start_step, 20);
  // bf16 + 4 λ + 2 random + min-err, min-rel-err, hawq, e-layer-type, e-layer-id + fp8, fp4
  ASSERT_EQ(rep.rows.size(), 14u);
  int distinct = 0;
  for (const auto& r : rep.rows) distinct += r.same_plan_as.empty();
  EXPECT_EQ(calls, 2 * distinct);  // every distinct plan trained once per replicate
  EXPECT_EQ(rep.replicates, 2);
  EXPECT_EQ(rep.bf16_row, 0u);
  EXPECT_EQ(rep.snip_row, 2u);  // λ = 0.1
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
  EXPECT_NE(rep.rows[13].train_loss_last, rep.rows[0].train_loss_last);
  EXPECT_EQ(rep.rows[13].method, "uniform-fp4");
  EXPECT_EQ(rep.rows[9].method, "hawq");  // the round carries the weight-Hessian traces
  for (const auto& l : rep.round.layers) EXPECT_TRUE(l.scalars.count("hessian_trace_w")) << l.name;
  // the replicates start from differently perturbed weights: different trajectories, a non-zero spread
  for (const auto& r : rep.rows) {
    ASSERT_EQ(r.replicates.size(), 2u) << r.method;
    EXPECT_NE(r.replicates[0].train_curve, r.replicates[1].train_curve) << r.method;
    // the row's values are the replicate means
    EXPECT_NEAR(r.train_loss_last, (r.replicates[0].train_loss_last + r.replicates[1].train_loss_last) / 2, 1e-12);
    EXPECT_NEAR(r.gap_train, r.train_loss_last - rep.rows[0].train_loss_last, 1e-12);
  }
  EXPECT_GT(rep.noise_floor_train, 0.0);
  // What the store keeps: each row's per-step curve (the table's value is the mean of its last
  // `last_window` steps), λ and seed, the BF16-forward gap, and the round the plans came from.
  EXPECT_EQ(rep.round.layers.size(), 14u);
  for (const auto& r : rep.rows) {
    ASSERT_EQ(r.train_curve.size(), 4u) << r.method;
    const double last3 = (r.train_curve[1] + r.train_curve[2] + r.train_curve[3]) / 3.0;
    EXPECT_NEAR(r.train_loss_last, last3, 1e-12) << r.method;
    for (const auto& x : r.replicates) {
      ASSERT_EQ(x.train_curve.size(), 4u) << r.method;
      EXPECT_NEAR(x.train_loss_last, (x.train_curve[1] + x.train_curve[2] + x.train_curve[3]) / 3.0, 1e-12);
    }
    EXPECT_NEAR(r.gap_val_bf16, r.val_loss_bf16 - rep.rows[0].val_loss_bf16, 1e-12) << r.method;
  }
  EXPECT_EQ(rep.rows[1].lambda, 0.0);
  EXPECT_EQ(rep.rows[4].lambda, 1.0);
  EXPECT_FALSE(rep.rows[0].lambda.has_value());
  EXPECT_EQ(rep.rows[5].seed, 1u);  // random s1
  EXPECT_EQ(rep.rows[6].seed, 2u);  // random s2
  EXPECT_FALSE(rep.rows[7].seed.has_value());
}

// Replicate r of every arm starts from the same perturbed weights: the BF16 arm (no stochastic
// rounding) is the same whether it is run alone or in a full compare, and one replicate is a
// valid (interval-free) compare.
TEST(Compare, OneReplicateIsPairedAndRepeatable) {
  const exptest::TinyCheckpoint ck(10);
  const std::string& dir = ck.dir;
  snip::CompareOptions o;
  o.budget = 0.5;
  o.steps = 2;
  o.cooldown_steps = 0;
  o.eval_batches = 1;
  o.last_window = 2;
  o.random_seeds = 0;
  o.lambdas = {0.1};
  o.replicates = 1;
  const snip::CompareReport a = snip::run_compare(dir, o);
  o.lambdas = {0, 0.1, 1};  // more arms before the same ones: replicate 1 must not depend on the order
  o.oracle = true;          // and an oracle arm after them
  o.oracle_batches = 2;
  const snip::CompareReport b = snip::run_compare(dir, o);
  for (const auto& r : a.rows) ASSERT_EQ(r.replicates.size(), 1u) << r.method;
  EXPECT_EQ(a.rows.front().method, "uniform-bf16");
  EXPECT_EQ(a.rows.front().replicates[0].train_curve, b.rows.front().replicates[0].train_curve);
  EXPECT_EQ(a.rows.back().method, "uniform-fp4");
  ASSERT_TRUE(b.oracle_row.has_value());
  EXPECT_EQ(b.rows[*b.oracle_row].method, "oracle");
  EXPECT_GE(b.rows[*b.oracle_row].achieved_fraction, 0.5);
  // the oracle measured on the batches after the one the arms are evaluated on
  const std::vector<std::string>& notes = b.rows[*b.oracle_row].notes;
  EXPECT_NE(std::find(notes.begin(), notes.end(),
                      "oracle: ILP on the measured ΔL of validation batches 1–2 (after the evaluation's)"),
            notes.end());
  EXPECT_EQ(b.rows[*b.oracle_row].replicates.size(), 1u);
  EXPECT_FALSE(a.oracle_row.has_value());
  const auto& fp4_b = b.rows[*b.oracle_row - 1];
  EXPECT_EQ(fp4_b.method, "uniform-fp4");
  EXPECT_EQ(a.rows.back().replicates[0].train_curve, fp4_b.replicates[0].train_curve);
  EXPECT_EQ(a.rows[a.snip_row].method, "snip λ=0.1");
  EXPECT_EQ(b.rows[b.snip_row].method, "snip λ=0.1");
  EXPECT_TRUE(std::isnan(a.noise_floor_train));  // no spread with one replicate
}

// --baselines trains only the named baseline arms (plus BF16 and SNIP); an arm's replicate does
// not depend on which other arms run, and a granularity-family recipe is kept canonically.
TEST(Compare, BaselinesSelectArmsWithoutChangingThem) {
  const exptest::TinyCheckpoint ck(10);
  const std::string& dir = ck.dir;
  snip::CompareOptions o = two_step_options(0.5, "block:0016:sr");
  o.baselines = {"uniform-fp4"};
  const snip::CompareReport a = snip::run_compare(dir, o);
  o.baselines = {"random", "min-err", "uniform-fp4"};
  o.random_seeds = 2;
  const snip::CompareReport b = snip::run_compare(dir, o);
  // A per-role arm runs only when named: uniform FP4 in dgrad, FP8 in fprop and wgrad.
  o.baselines = {"fp4-dgrad-only", "uniform-fp4"};
  const snip::CompareReport c = snip::run_compare(dir, o);
  ASSERT_EQ(c.rows.size(), 4u);
  EXPECT_EQ(c.rows[3].method, "fp4-dgrad-only");
  for (const auto& [name, lp] : c.rows[3].plan.layers)
    EXPECT_EQ(lp, (snip::LinearPrecision{snip::Precision::fp8, snip::Precision::fp4, snip::Precision::fp8})) << name;
  EXPECT_NEAR(c.rows[3].achieved_fraction, 1.0 / 3.0, 1e-12);
  EXPECT_EQ(c.rows[2].replicates[0].train_curve, a.rows[2].replicates[0].train_curve);  // uniform FP4 unchanged
  EXPECT_NE(c.rows[3].replicates[0].train_curve, c.rows[2].replicates[0].train_curve);
  o.baselines = {"uniform-fp4", "fp4-everywhere"};
  try {
    snip::run_compare(dir, o);
    ADD_FAILURE() << "unknown baseline accepted";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown baseline 'fp4-everywhere'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(a.recipe, "block:16:sr");
  std::vector<std::string> ma, mb;
  for (const auto& r : a.rows) ma.push_back(r.method);
  for (const auto& r : b.rows) mb.push_back(r.method);
  EXPECT_EQ(ma, (std::vector<std::string>{"uniform-bf16", "snip λ=0.1", "uniform-fp4"}));
  EXPECT_EQ(
      mb, (std::vector<std::string>{"uniform-bf16", "snip λ=0.1", "random s1", "random s2", "min-err", "uniform-fp4"}));
  EXPECT_EQ(a.rows[2].replicates[0].train_curve, b.rows[5].replicates[0].train_curve);
  EXPECT_EQ(a.rows[1].replicates[0].train_curve, b.rows[1].replicates[0].train_curve);
}

// A stop request during the compare's statistics round (minutes on a large model) stops it
// there: no plan is made and nothing is trained.
TEST(Compare, AStopDuringTheStatisticsRoundStopsBeforeAnyPlan) {
  const exptest::TinyCheckpoint ck(10);
  snip::CompareOptions o = two_replicate_options();
  snip::CompareHooks hooks;
  int asked = 0;
  hooks.stop_requested = [&] { return ++asked >= 2; };  // the round asks between its passes
  bool planned = false;
  hooks.planned = [&](const snip::CompareReport&) { planned = true; };
  EXPECT_THROW(snip::run_compare(ck.dir, o, hooks), snip::CompareStopped);
  EXPECT_FALSE(planned) << "the round ran to its end and the plans were made before the stop";
  EXPECT_GE(asked, 2);
}

// --per-role: the SNIP arm's plan is the solver's per-role plan on the compare's own round (fprop
// and the backward GEMMs chosen apart), and without it the whole-layer plan; the fixed arms are
// the same either way.
TEST(Compare, PerRolePlansSnipsArmByRoleAndLeavesTheFixedArmsAlone) {
  const exptest::TinyCheckpoint ck(10);
  snip::CompareOptions o = two_step_options(1.0 / 3.0, "tensor");
  o.baselines = {"fp4-fprop-only"};
  const snip::CompareReport whole = snip::run_compare(ck.dir, o);
  o.per_role = true;
  const snip::CompareReport by_role = snip::run_compare(ck.dir, o);
  ASSERT_EQ(by_role.rows.size(), 3u);
  ASSERT_EQ(by_role.rows[1].method, "snip λ=0.1");
  snip::EstimatorOptions eo;
  eo.lambda = 0.1;
  snip::PlanRequest req;
  req.budget = o.budget;
  req.per_role = true;
  const snip::PlanResult expected =
      snip::make_plan(snip::planner_input_from_stats(by_role.round, eo), snip::Method::snip, req);
  EXPECT_EQ(by_role.rows[1].plan.layers, expected.plan.layers);
  req.per_role = false;
  const snip::PlanResult expected_whole =
      snip::make_plan(snip::planner_input_from_stats(whole.round, eo), snip::Method::snip, req);
  EXPECT_EQ(whole.rows[1].plan.layers, expected_whole.plan.layers);
  // On this checkpoint the two solves differ, so the option reached the planner: some layer of
  // the per-role plan has its fprop and backward GEMMs in different precisions.
  bool split = false;
  for (const auto& [name, lp] : by_role.rows[1].plan.layers) split |= lp.fprop != lp.wgrad;
  EXPECT_TRUE(split);
  EXPECT_NE(by_role.rows[1].plan.layers, whole.rows[1].plan.layers);
  EXPECT_EQ(by_role.rows[2].plan.layers, whole.rows[2].plan.layers);  // fp4-fprop-only is fixed
  EXPECT_EQ(by_role.rows[2].replicates[0].train_curve, whole.rows[2].replicates[0].train_curve);
}

// The oracle's costs are the measured ΔL per layer and precision; the ILP on them puts FP4 where
// the measured damage is smallest.
TEST(Compare, OracleCostsAreTheMeasuredDamage) {
  snip::CostTable like;
  like.kind = "snip";
  for (int i = 0; i < 3; ++i) {
    snip::CostLayer c;
    c.name = "model.layers.0.self_attn." + std::string(i == 0 ? "q" : i == 1 ? "k" : "v") + "_proj";
    c.type = snip::LayerType(i);
    c.flops = 100;
    c.cost[0] = {0, 0, 5, 9};  // SNIP would choose differently
    c.cost[1] = {0, 0, 1, 1};
    like.layers.push_back(c);
  }
  like.has_roles = true;
  snip::ValidationReport truth;
  truth.batches = 32;
  const double fp4_damage[3] = {0.3, 0.01, 0.2};
  for (int i = 0; i < 3; ++i) {
    truth.entries.push_back({like.layers[size_t(i)].name, snip::Precision::fp8, {{"dl_true", 0.001}}});
    truth.entries.push_back({like.layers[size_t(i)].name, snip::Precision::fp4, {{"dl_true", fp4_damage[i]}}});
  }
  const snip::CostTable t = snip::oracle_cost_table(truth, like);
  EXPECT_FALSE(t.has_roles);
  EXPECT_EQ(t.layers[2].total_cost(snip::Precision::fp4), 0.2);
  EXPECT_EQ(t.layers[0].total_cost(snip::Precision::fp8), 0.001);
  EXPECT_EQ(t.layers[1].total_cost(snip::Precision::bf16), 0.0);
  snip::PlanRequest req;
  req.budget = 0.3;  // one layer of three in FP4: the one with the least measured damage
  const snip::PlanResult p = snip::solve_ilp(t, req, &like);
  EXPECT_EQ(p.choice[1][0], snip::Precision::fp4);
  EXPECT_EQ(p.choice[0][0], snip::Precision::fp8);
  EXPECT_EQ(p.choice[2][0], snip::Precision::fp8);
  truth.entries.pop_back();
  EXPECT_THROW(snip::oracle_cost_table(truth, like), snip::Error);
}

TEST(Compare, RejectsBadOptions) {
  snip::CompareOptions o;
  o.steps = 0;
  EXPECT_THROW(snip::run_compare("/nonexistent", o), snip::Error);
  o.steps = 1;
  o.replicates = 0;
  try {
    snip::run_compare("/nonexistent", o);
    FAIL() << "replicates = 0 accepted";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--replicates must be at least 1"), std::string::npos) << e.what();
  }
  o.replicates = 1;
  o.oracle = true;
  o.oracle_batches = 0;
  try {
    snip::run_compare("/nonexistent", o);
    FAIL() << "oracle_batches = 0 accepted";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("--oracle-batches must be at least 1"), std::string::npos) << e.what();
  }
}

}  // namespace

namespace {

// A compare stopped after some trainings reports each finished one; resumed with those as
// stored results it trains only the rest and ends with the uninterrupted compare's numbers.
TEST(Compare, StoppedAndResumedWithStoredResultsEqualsAnUninterruptedCompare) {
  const exptest::TinyCheckpoint ck(10);
  const std::string& dir = ck.dir;
  snip::CompareOptions o = two_replicate_options();
  const snip::CompareReport straight = snip::run_compare(dir, o);

  std::map<std::pair<std::string, int>, snip::CompareReplicate> kept;
  snip::CompareHooks stop_after_3;
  stop_after_3.on_replicate = [&](const snip::CompareRow& row, int r, const snip::CompareReplicate& x) {
    kept[{row.method, r}] = x;
  };
  stop_after_3.stop_requested = [&] { return kept.size() >= 3; };
  EXPECT_THROW(snip::run_compare(dir, o, stop_after_3), snip::CompareStopped);
  ASSERT_EQ(kept.size(), 3u);

  int trained = 0;
  snip::CompareHooks resume;
  resume.stored = [&](const snip::CompareRow& row, int r) -> std::optional<snip::CompareReplicate> {
    const auto it = kept.find({row.method, r});
    if (it == kept.end()) return std::nullopt;
    return it->second;
  };
  resume.on_replicate = [&](const snip::CompareRow&, int, const snip::CompareReplicate&) { ++trained; };
  const snip::CompareReport resumed = snip::run_compare(dir, o, resume);
  int distinct = 0;
  for (const auto& r : straight.rows) distinct += r.same_plan_as.empty();
  EXPECT_EQ(trained, 2 * distinct - 3);
  ASSERT_EQ(resumed.rows.size(), straight.rows.size());
  for (size_t i = 0; i < straight.rows.size(); ++i) {
    ASSERT_EQ(resumed.rows[i].replicates.size(), 2u) << straight.rows[i].method;
    for (size_t r = 0; r < 2; ++r) {
      EXPECT_EQ(resumed.rows[i].replicates[r].train_curve, straight.rows[i].replicates[r].train_curve);
      EXPECT_EQ(resumed.rows[i].replicates[r].val_loss_plan, straight.rows[i].replicates[r].val_loss_plan);
    }
    EXPECT_EQ(resumed.rows[i].gap_train, straight.rows[i].gap_train) << straight.rows[i].method;
  }
}

}  // namespace

namespace {

// --jobs: independent (arm, replicate) trainings at once give the bits of one job at a time,
// and a stop in the middle of a parallel compare still reports every training that finished.
TEST(Compare, ParallelJobsGiveTheBitsOfOneJob) {
  const exptest::TinyCheckpoint ck(10);
  const std::string& dir = ck.dir;
  snip::CompareOptions o = two_replicate_options();
  o.jobs = 1;
  const snip::CompareReport serial = snip::run_compare(dir, o);
  o.jobs = 3;
  int reported = 0;
  snip::CompareHooks hooks;
  hooks.on_replicate = [&](const snip::CompareRow&, int, const snip::CompareReplicate&) { ++reported; };
  const snip::CompareReport parallel = snip::run_compare(dir, o, hooks);
  ASSERT_EQ(parallel.rows.size(), serial.rows.size());
  int distinct = 0;
  for (size_t i = 0; i < serial.rows.size(); ++i) {
    distinct += serial.rows[i].same_plan_as.empty();
    ASSERT_EQ(parallel.rows[i].replicates.size(), 2u) << serial.rows[i].method;
    for (size_t r = 0; r < 2; ++r) {
      const auto &a = serial.rows[i].replicates[r], &b = parallel.rows[i].replicates[r];
      EXPECT_EQ(a.train_curve, b.train_curve) << serial.rows[i].method << " replicate " << r + 1;
      EXPECT_EQ(a.val_loss_plan, b.val_loss_plan) << serial.rows[i].method;
      EXPECT_EQ(a.val_loss_bf16, b.val_loss_bf16) << serial.rows[i].method;
    }
    EXPECT_EQ(parallel.rows[i].gap_train, serial.rows[i].gap_train) << serial.rows[i].method;
  }
  EXPECT_EQ(reported, 2 * distinct);

  // Stopped once two trainings are reported: everything finished by then is reported (the
  // trainings in flight are dropped), then CompareStopped.
  std::atomic<int> seen{0};
  snip::CompareHooks stop;
  stop.on_replicate = [&](const snip::CompareRow& row, int r, const snip::CompareReplicate& x) {
    ++seen;
    for (const auto& s : serial.rows)
      if (s.method == row.method) {
        EXPECT_EQ(x.train_curve, s.replicates[size_t(r - 1)].train_curve);
      }
  };
  stop.stop_requested = [&] { return seen.load() >= 2; };
  EXPECT_THROW(snip::run_compare(dir, o, stop), snip::CompareStopped);
  EXPECT_GE(seen.load(), 2);
  EXPECT_LT(seen.load(), 2 * distinct);
  o.jobs = 0;
  EXPECT_THROW(snip::run_compare(dir, o), snip::Error);
}

}  // namespace
