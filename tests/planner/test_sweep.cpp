// Budget sweeps: list parsing, every point meets its budget, SNIP's curve is the lower envelope
// of predicted Q, and identical plans at one budget are marked.
#include <gtest/gtest.h>

#include "planner_test_util.h"
#include "snip/error.h"
#include "snip/sweep.h"

namespace snip {
namespace {

TEST(Sweep, ParsesBudgetAndMethodLists) {
  const auto b = parse_budget_list("0:1:0.05");
  ASSERT_EQ(b.size(), 21u);
  EXPECT_EQ(b.front(), 0.0);
  EXPECT_EQ(b[1], 0.05);
  EXPECT_EQ(b[7], 0.35);
  EXPECT_EQ(b.back(), 1.0);
  EXPECT_EQ(parse_budget_list("0.5, 0.75").size(), 2u);
  EXPECT_THROW(parse_budget_list("0.5,1.5"), Error);
  EXPECT_THROW(parse_budget_list("x"), Error);
  EXPECT_THROW(parse_budget_list(""), Error);
  EXPECT_THROW(parse_budget_list("0:1"), Error);
  EXPECT_EQ(parse_method_list("snip,min-err").size(), 2u);
  EXPECT_EQ(parse_method_list("all").size(), kAllMethods.size());
  EXPECT_THROW(parse_method_list("snip,best"), Error);
}

TEST(Sweep, SnipIsTheLowerEnvelopeAndEveryPointMeetsItsBudget) {
  const PlannerInput in = planner_input_from_stats(test::random_round(3, 31));
  SweepOptions opt;
  opt.budgets = parse_budget_list("0:1:0.1");
  opt.methods = {Method::snip,       Method::min_err, Method::min_rel_err, Method::e_layer_type,
                 Method::e_layer_id, Method::random,  Method::uniform_fp4};
  opt.random_seeds = 2;
  const auto pts = run_sweep(in, opt);
  ASSERT_EQ(pts.size(), opt.budgets.size() * 8);
  double prev_snip = -1;
  for (size_t i = 0; i < pts.size(); i += 8) {
    ASSERT_TRUE(pts[i].ok) << pts[i].error;
    ASSERT_EQ(pts[i].method, "snip");
    const double q = pts[i].result.predicted_q;
    EXPECT_GE(q, prev_snip - 1e-12) << "SNIP's Q must not fall as the budget rises";
    prev_snip = q;
    for (size_t j = i; j < i + 8; ++j) {
      ASSERT_TRUE(pts[j].ok) << pts[j].method << ": " << pts[j].error;
      EXPECT_GE(pts[j].result.achieved_fraction, pts[j].budget) << pts[j].method;
      EXPECT_GE(pts[j].result.predicted_q, q - 1e-12) << pts[j].method << " beat SNIP under SNIP's own costs";
    }
  }
  // At ρ = 1 every method is uniform FP4 and each point lists the others.
  const auto& last = pts[pts.size() - 8];
  EXPECT_EQ(last.budget, 1.0);
  EXPECT_EQ(last.same_plan_as.size(), 7u);
  EXPECT_EQ(pts[pts.size() - 2].method, "random");
  EXPECT_EQ(pts[pts.size() - 2].seed, opt.request.seed + 1);  // second random seed
}

TEST(Sweep, InfeasiblePointsAreRecordedNotThrown) {
  const PlannerInput in = planner_input_from_costs(test::random_table(2, 1));
  SweepOptions opt;
  opt.budgets = {0.5};
  opt.methods = {Method::snip, Method::min_err};
  const auto pts = run_sweep(in, opt);
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_TRUE(pts[0].ok);
  EXPECT_FALSE(pts[1].ok);
  EXPECT_NE(pts[1].error.find("statistics"), std::string::npos);
}

}  // namespace
}  // namespace snip
