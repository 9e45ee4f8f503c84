// snip-plan/1 files: round trip, validation, resolution against a model.
#include <gtest/gtest.h>

#include "snip/error.h"
#include "snip/plan.h"

using namespace snip;

namespace {
const ModelDims kDims{64, 176, 2, 4, 2};
}

TEST(Plan, JsonRoundTripPreservesEverything) {
  Plan p = uniform_plan(kDims, Precision::fp8);
  p.layers["model.layers.1.mlp.down_proj"] = {Precision::fp4, Precision::fp8, Precision::bf16};
  p.method = "snip";
  p.budget = 0.25;
  p.achieved_fp4_fraction = 0.2567;
  p.provenance = {{"run", 3}, {"lambda", 0.1}};
  Plan q = plan_from_json(plan_to_json(p));
  EXPECT_EQ(p, q);
}

TEST(Plan, RejectsUnknownPrecisionAndFormat) {
  EXPECT_THROW(plan_from_json(R"({"format":"snip-plan/1","layers":{"model.layers.0.mlp.up_proj":"fp6"}})"), Error);
  EXPECT_THROW(plan_from_json(R"({"format":"snip-plan/2","layers":{}})"), Error);
  EXPECT_THROW(plan_from_json(R"({"format":"snip-plan/1"})"), Error);
  EXPECT_THROW(plan_from_json("{not json"), Error);
  try {
    plan_from_json(R"({"format":"snip-plan/1","layers":{"model.layers.0.mlp.up_proj":{"fprop":"fp4","dgrad":"fp4"}}})",
                   "p.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("wgrad"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("p.json"), std::string::npos) << e.what();
  }
}

TEST(Plan, ResolveNamesMissingLayersAndRejectsForeignOnes) {
  Plan p;
  p.layers["model.layers.0.self_attn.q_proj"] = LinearPrecision::uniform(Precision::fp4);
  std::vector<std::string> warnings;
  auto per_layer = resolve_plan(p, kDims, &warnings);
  ASSERT_EQ(per_layer.size(), 14u);
  EXPECT_EQ(per_layer[0], LinearPrecision::uniform(Precision::fp4));
  EXPECT_EQ(per_layer[1], LinearPrecision::uniform(Precision::bf16));
  EXPECT_EQ(warnings.size(), 13u);

  p.layers["model.layers.2.mlp.up_proj"] = LinearPrecision::uniform(Precision::fp4);
  try {
    resolve_plan(p, kDims, nullptr);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("only 2 blocks"), std::string::npos) << e.what();
  }
  Plan bad;
  bad.layers["lm_head"] = LinearPrecision::uniform(Precision::fp4);
  EXPECT_THROW(resolve_plan(bad, kDims, nullptr), Error);
}

TEST(Plan, ResolveLenientSkipsWhatResolveRejects) {
  Plan p;
  p.layers["model.layers.0.self_attn.q_proj"] = LinearPrecision::uniform(Precision::fp4);
  p.layers["model.layers.2.mlp.up_proj"] = LinearPrecision::uniform(Precision::fp4);  // outside a 2-block model
  p.layers["lm_head"] = LinearPrecision::uniform(Precision::fp4);                     // not a linear layer
  const auto per_layer = resolve_plan_lenient(p, 2);
  ASSERT_EQ(per_layer.size(), 14u);
  EXPECT_EQ(per_layer[0], LinearPrecision::uniform(Precision::fp4));
  for (size_t i = 1; i < per_layer.size(); ++i) EXPECT_EQ(per_layer[i], LinearPrecision::uniform(Precision::bf16));
  EXPECT_TRUE(resolve_plan_lenient(p, -1).empty());
  // Where resolve_plan accepts the plan, the two agree.
  const Plan whole = uniform_plan(kDims, Precision::fp8);
  EXPECT_EQ(resolve_plan_lenient(whole, kDims.num_layers), resolve_plan(whole, kDims, nullptr));
}

TEST(Plan, Fp4FractionCountsFlopsPerGemm) {
  auto all8 = resolve_plan(uniform_plan(kDims, Precision::fp8), kDims, nullptr);
  EXPECT_DOUBLE_EQ(fp4_flop_fraction(all8, kDims), 0.0);
  auto all4 = resolve_plan(uniform_plan(kDims, Precision::fp4), kDims, nullptr);
  EXPECT_DOUBLE_EQ(fp4_flop_fraction(all4, kDims), 1.0);
  // Only fprop of every layer in FP4: exactly one third of the FLOPs.
  auto third = all8;
  for (auto& lp : third) lp.fprop = Precision::fp4;
  EXPECT_NEAR(fp4_flop_fraction(third, kDims), 1.0 / 3.0, 1e-12);
}
