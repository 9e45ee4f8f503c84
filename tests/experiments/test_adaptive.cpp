// Adaptive SNIP training tests (METHOD.md section 9): plans switch at step boundaries, every
// plan meets the budget, the timeline covers the run, BF16 probes measure a gap.
#include <gtest/gtest.h>

#include "exp_test_util.h"
#include "snip/adaptive.h"

namespace {

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
