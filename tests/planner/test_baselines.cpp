// Rule baselines (METHOD.md section 8): each meets the budget and follows its rule; random is
// reproducible by seed; identical plans from different methods are detected.
#include <gtest/gtest.h>

#include <set>

#include "planner_test_util.h"
#include "snip/baselines.h"
#include "snip/error.h"
#include "snip/planner.h"

namespace snip {
namespace {

using test::random_table;

std::set<std::string> fp4_layers(const PlanResult& r) {
  std::set<std::string> out;
  for (const auto& [name, lp] : r.plan.layers)
    if (lp.fprop == Precision::fp4) out.insert(name);
  return out;
}

// The fill stops as soon as ρ is met: dropping the last-filled layer must fall below ρ.
void expect_minimal_fill(const CostTable& t, const PlanResult& r, const std::string& last_filled) {
  std::vector<RoleChoice> less = r.choice;
  for (size_t i = 0; i < t.layers.size(); ++i)
    if (t.layers[i].name == last_filled) less[i] = {Precision::fp8, Precision::fp8};
  EXPECT_LT(achieved_fp4_fraction(t, less), r.budget) << last_filled;
}

TEST(ELayerType, FillsMlpFirstByTypeThenBlock) {
  const CostTable t = random_table(4, 1);
  PlanRequest req;
  // Each gate_proj is 6.1% of the FLOPs: 0.2 needs exactly the gates of blocks 0-3.
  req.budget = 0.2;
  const PlanResult r = plan_e_layer_type(t, req);
  EXPECT_GE(r.achieved_fraction, 0.2);
  std::set<std::string> gates;
  for (int b = 0; b < 4; ++b) gates.insert(layer_module_name(b, LayerType::gate));
  EXPECT_EQ(fp4_layers(r), gates);
  req.budget = 0.79;  // above the MLP share (73%): every MLP layer, then o_proj from block 0
  const PlanResult hi = plan_e_layer_type(t, req);
  const auto fp4h = fp4_layers(hi);
  for (int b = 0; b < 4; ++b)
    for (LayerType ty : {LayerType::gate, LayerType::up, LayerType::down})
      EXPECT_TRUE(fp4h.count(layer_module_name(b, ty)));
  EXPECT_TRUE(fp4h.count(layer_module_name(0, LayerType::o)));
  EXPECT_FALSE(fp4h.count(layer_module_name(0, LayerType::q)));
  EXPECT_EQ(r.status, "rule");
}

TEST(ELayerId, KeepsOuterBlocksFp8UntilItMustSpill) {
  const CostTable t = random_table(4, 2);
  PlanRequest req;
  req.budget = 0.3;
  const PlanResult r = plan_e_layer_id(t, req);
  EXPECT_GE(r.achieved_fraction, 0.3);
  for (const auto& n : fp4_layers(r)) {
    EXPECT_EQ(n.find("model.layers.0."), std::string::npos) << n;
    EXPECT_EQ(n.find("model.layers.3."), std::string::npos) << n;
  }
  // The middle of 28 flattened indices is 13.5: index 13 (block 1 down) goes first.
  EXPECT_TRUE(fp4_layers(r).count(layer_module_name(1, LayerType::down)));
  for (const auto& note : r.notes) EXPECT_EQ(note.find("spill"), std::string::npos) << note;

  req.budget = 0.8;  // the middle two blocks are only half the FLOPs: must spill
  const PlanResult s = plan_e_layer_id(t, req);
  EXPECT_GE(s.achieved_fraction, 0.8);
  bool noted = false;
  for (const auto& note : s.notes) noted = noted || note.find("spill") != std::string::npos;
  EXPECT_TRUE(noted);
  EXPECT_TRUE(s.plan.provenance.contains("spilled_layers"));
  for (LayerType ty : kAllLayerTypes) {  // every middle layer went first
    EXPECT_TRUE(fp4_layers(s).count(layer_module_name(1, ty)));
    EXPECT_TRUE(fp4_layers(s).count(layer_module_name(2, ty)));
  }
}

TEST(Random, ReproducibleBySeedAndCloseToBudget) {
  const CostTable t = random_table(6, 3);
  PlanRequest req;
  req.budget = 0.5;
  const PlanResult a = plan_random(t, req, 11);
  const PlanResult b = plan_random(t, req, 11);
  const PlanResult c = plan_random(t, req, 12);
  EXPECT_EQ(a.plan.layers, b.plan.layers);
  EXPECT_NE(a.plan.layers, c.plan.layers);
  for (const auto* r : {&a, &c}) {
    EXPECT_GE(r->achieved_fraction, 0.5);
    EXPECT_LE(r->achieved_fraction, 0.51);  // the redraw rule
  }
  // Different seeds draw different layers, not just a shifted fill.
  EXPECT_NE(fp4_layers(a), fp4_layers(c));
}

TEST(Baselines, HonourPinsTiesAndStages) {
  const CostTable t = random_table(4, 4);
  PlanRequest req;
  req.budget = 0.6;
  req.ties = true;
  req.stages = 2;
  req.pins[layer_module_name(2, LayerType::down)] = Precision::fp8;
  req.pins[layer_module_name(0, LayerType::q)] = Precision::fp4;
  const auto stage_of = stage_of_layers(t, 2);
  for (const PlanResult& r : {plan_e_layer_type(t, req), plan_e_layer_id(t, req), plan_random(t, req, 5)}) {
    SCOPED_TRACE(r.method);
    const auto& L = r.plan.layers;
    EXPECT_EQ(L.at(layer_module_name(2, LayerType::down)).fprop, Precision::fp8);
    EXPECT_EQ(L.at(layer_module_name(0, LayerType::q)).fprop, Precision::fp4);
    for (int b = 0; b < 4; ++b) {
      EXPECT_EQ(L.at(layer_module_name(b, LayerType::q)), L.at(layer_module_name(b, LayerType::k)));
      EXPECT_EQ(L.at(layer_module_name(b, LayerType::k)), L.at(layer_module_name(b, LayerType::v)));
      EXPECT_EQ(L.at(layer_module_name(b, LayerType::gate)), L.at(layer_module_name(b, LayerType::up)));
    }
    for (int s = 0; s < 2; ++s) {
      double fp4 = 0, all = 0;
      for (size_t i = 0; i < t.layers.size(); ++i)
        if (stage_of[i] == s) {
          all += t.layers[i].flops;
          if (r.choice[i][0] == Precision::fp4) fp4 += t.layers[i].flops;
        }
      EXPECT_GE(fp4 / all, 0.6 - 1e-12) << "stage " << s;
    }
  }
}

TEST(Baselines, FillIsMinimal) {
  const CostTable t = random_table(3, 6);
  PlanRequest req;
  req.budget = 0.42;
  const PlanResult r = plan_e_layer_type(t, req);
  // gate×3 (~24% each... ) then up: the last filled is the highest-ranked FP4 layer in the order.
  std::string last;
  for (LayerType ty : {LayerType::gate, LayerType::up, LayerType::down})
    for (int b = 0; b < 3; ++b)
      if (fp4_layers(r).count(layer_module_name(b, ty))) last = layer_module_name(b, ty);
  expect_minimal_fill(t, r, last);
}

TEST(Uniform, OnePrecisionAndSaysWhenBudgetIsMissed) {
  const CostTable t = random_table(2, 7);
  PlanRequest req;
  req.budget = 0.5;
  const PlanResult u8 = plan_uniform(t, req, Precision::fp8);
  for (const auto& [n, lp] : u8.plan.layers) EXPECT_EQ(lp, LinearPrecision::uniform(Precision::fp8));
  EXPECT_FALSE(u8.meets_budget());
  ASSERT_FALSE(u8.notes.empty());
  EXPECT_NE(u8.notes[0].find("does not meet"), std::string::npos);
  const PlanResult u4 = plan_uniform(t, req, Precision::fp4);
  EXPECT_EQ(u4.achieved_fraction, 1.0);
  EXPECT_TRUE(u4.notes.empty());
}

// fp4-<role>-only: FP4 in exactly that GEMM role of every layer, FP8 in the other two, a third of
// the FLOPs in FP4 (the three roles of a layer have the same FLOPs); a pinned layer keeps its pin
// on every GEMM, and the method names parse back.
TEST(RoleArms, Fp4InOneRoleFp8InTheOthersAndAThirdOfTheFlops) {
  const CostTable t = random_table(3, 11);
  PlanRequest req;
  req.budget = 0.75;
  const std::string pinned = layer_module_name(1, LayerType::up);
  for (Gemm role : {Gemm::fprop, Gemm::dgrad, Gemm::wgrad}) {
    SCOPED_TRACE(gemm_name(role));
    const PlanResult r = plan_fp4_in_role(t, req, role);
    EXPECT_EQ(r.method, std::string("fp4-") + gemm_name(role) + "-only");
    EXPECT_EQ(parse_method(r.method), role == Gemm::fprop   ? Method::fp4_fprop_only
                                      : role == Gemm::dgrad ? Method::fp4_dgrad_only
                                                            : Method::fp4_wgrad_only);
    ASSERT_EQ(r.plan.layers.size(), t.layers.size());
    for (const auto& [name, lp] : r.plan.layers)
      for (Gemm g : {Gemm::fprop, Gemm::dgrad, Gemm::wgrad})
        EXPECT_EQ(lp[g], g == role ? Precision::fp4 : Precision::fp8) << name << " " << gemm_name(g);
    EXPECT_NEAR(r.achieved_fraction, 1.0 / 3.0, 1e-12);
    EXPECT_FALSE(r.meets_budget());  // ρ 0.75 is not a third: a reference point, and it says so
    bool says = false;
    for (const std::string& n : r.notes) says = says || n.find("reference point") != std::string::npos;
    EXPECT_TRUE(says);

    PlanRequest with_pin = req;
    with_pin.pins[pinned] = Precision::fp8;
    const PlanResult p = plan_fp4_in_role(t, with_pin, role);
    EXPECT_EQ(p.plan.layers.at(pinned), LinearPrecision::uniform(Precision::fp8));
    EXPECT_LT(p.achieved_fraction, r.achieved_fraction);
  }
}

TEST(IdenticalPlans, GroupedAsOneEvidence) {
  const PlannerInput in = planner_input_from_stats(test::random_round(2, 8));
  PlanRequest req;
  req.budget = 1.0;  // every method that meets ρ = 1 is uniform FP4
  std::vector<PlanResult> rs;
  for (Method m : {Method::snip, Method::min_err, Method::e_layer_type, Method::uniform_fp4, Method::uniform_fp8})
    rs.push_back(make_plan(in, m, req));
  const auto groups = group_identical_plans(rs);
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0], (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_EQ(groups[1], (std::vector<size_t>{4}));
  req.budget = 0.5;
  const PlanResult a = make_plan(in, Method::random, req);
  PlanRequest other = req;
  other.seed = 99;
  const auto g2 = group_identical_plans({a, make_plan(in, Method::random, other), a});
  EXPECT_EQ(g2.size(), 2u);
  EXPECT_EQ(g2[0], (std::vector<size_t>{0, 2}));
}

}  // namespace
}  // namespace snip
