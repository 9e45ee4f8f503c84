// Adaptive SNIP training tests (METHOD.md section 9): plans switch at step boundaries, every
// plan meets the budget, the timeline covers the run, BF16 probes measure a gap.
#include <gtest/gtest.h>

#include <algorithm>

#include "exp_test_util.h"
#include "snip/adaptive.h"
#include "snip/stats_round.h"

namespace {

// The gradient noise monitor (METHOD.md 10) in the loop. A noise floor between the layers' FP4
// ratios keeps exactly the layers below it out of FP4; with replan_when noise a round whose
// below-threshold set is unchanged keeps the plan (and says so), one whose set changed re-solves.
TEST(Adaptive, TheNoiseFloorKeepsNoisyLayersOutOfFp4AndReplanWhenNoiseKeepsThePlan) {
  auto cfg = exptest::tiny_config("bf16", 6);
  snip::Trainer t(cfg);
  snip::AdaptiveOptions ao;
  ao.request.budget = 0.3;
  ao.replan_every = 2;
  ao.bf16_probe_every = 0;
  ao.stats.seed = 5;
  // The first round's FP4 ratios (the controller's own first round is this one: same state, same options).
  const snip::StatsRound first = snip::collect_stats_round(t, ao.stats);
  std::vector<double> ratios;
  for (const auto& ls : first.layers) ratios.push_back(ls.per_precision.at("fp4").at("grad_noise_ratio"));
  std::vector<double> sorted = ratios;
  std::sort(sorted.begin(), sorted.end());
  ao.noise_floor = 0.5 * (sorted[2] + sorted[3]);  // the three noisiest layers are below it
  ao.replan_when = snip::ReplanWhen::noise;
  snip::AdaptiveController ctl(t, ao);
  std::vector<snip::PlanEvent> events;
  ctl.on_plan([&](const snip::PlanEvent& e) { events.push_back(e); });
  ctl.run({});
  ASSERT_EQ(events.size(), 3u);
  const snip::Plan& plan = events[0].result.plan;
  int held_out = 0;
  for (size_t l = 0; l < first.layers.size(); ++l) {
    const snip::LinearPrecision lp = plan.layers.at(first.layers[l].name);
    if (ratios[l] < ao.noise_floor) {
      ++held_out;
      EXPECT_NE(lp.fprop, snip::Precision::fp4) << first.layers[l].name << " is below the floor";
      EXPECT_NE(lp.wgrad, snip::Precision::fp4) << first.layers[l].name << " is below the floor";
    }
  }
  EXPECT_EQ(held_out, 3);
  EXPECT_EQ(plan.provenance.at("noise_below").size(), 3u);
  EXPECT_TRUE(events[0].replanned);
  for (size_t i = 1; i < events.size(); ++i) {
    // Re-solved exactly when the set of layers below the threshold changed.
    const bool set_changed =
        events[i].result.plan.provenance.at("noise_below") != events[i - 1].result.plan.provenance.at("noise_below");
    EXPECT_EQ(events[i].replanned, set_changed) << "round " << i;
    if (!events[i].replanned) {
      EXPECT_EQ(events[i].result.plan.layers, events[i - 1].result.plan.layers);
    }
  }
}

TEST(Adaptive, SwitchesPlansAtStepBoundariesAndMeetsTheBudget) {
  auto cfg = exptest::tiny_config("bf16", 7);
  snip::Trainer t(cfg);
  snip::AdaptiveOptions ao;
  ao.request.budget = 0.6;
  ao.replan_every = 3;
  ao.bf16_probe_every = 2;
  snip::AdaptiveController ctl(t, ao);
  std::vector<int64_t> plan_steps;
  ctl.on_plan([&](const snip::PlanEvent& e) {
    plan_steps.push_back(e.first_step);
    EXPECT_EQ(e.first_step, t.step_count() + 1);
    EXPECT_TRUE(e.result.meets_budget());
    EXPECT_EQ(e.round.step, t.step_count());
  });
  std::vector<double> fractions;
  ctl.run([&](const snip::StepMetrics& m) {
    fractions.push_back(m.fp4_fraction);
    // the plan in effect during step m.step is the last one whose first_step ≤ m.step
    size_t i = 0;
    while (i + 1 < ctl.timeline().size() && ctl.timeline()[i + 1].first_step <= m.step) ++i;
    EXPECT_DOUBLE_EQ(m.fp4_fraction, ctl.plans()[ctl.timeline()[i].plan].achieved_fraction) << "step " << m.step;
    return true;
  });
  EXPECT_EQ(plan_steps, (std::vector<int64_t>{1, 4, 7}));
  ASSERT_EQ(ctl.timeline().size(), 3u);
  EXPECT_EQ(ctl.timeline()[0].last_step, 3);
  EXPECT_EQ(ctl.timeline()[1].first_step, 4);
  EXPECT_EQ(ctl.timeline()[2].last_step, 7);
  for (double f : fractions) EXPECT_GE(f, 0.6);
  // probes before steps 1, 3, 5, 7 (step counts 0, 2, 4, 6)
  ASSERT_EQ(ctl.probes().size(), 4u);
  for (const auto& p : ctl.probes()) EXPECT_NE(p.quantized_loss, p.bf16_loss);
}

}  // namespace
