// The GLPK ILP against exhaustive enumeration on small random instances (per layer, per role,
// ties, pins, stages, BF16 as a third choice), the exact budget guard, and infeasible requests
// reported with their cause.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "planner_test_util.h"
#include "snip/error.h"
#include "snip/planner.h"

namespace snip {
namespace {

using test::random_table;

// Asserts the ILP reaches the brute-force optimum and both plans meet the request.
void expect_matches_brute_force(const CostTable& t, const PlanRequest& req, const std::string& what) {
  const PlanResult ilp = solve_ilp(t, req);
  const PlanResult ref = solve_exhaustive_ref(t, req);
  EXPECT_NEAR(ilp.objective, ref.objective, 1e-9 * std::max(1.0, std::abs(ref.objective))) << what;
  EXPECT_EQ(ilp.status, "optimal") << what;
  EXPECT_EQ(ilp.mip_gap, 0.0) << what;
  EXPECT_GE(ilp.achieved_fraction, req.budget) << what;
  EXPECT_GE(ref.achieved_fraction, req.budget) << what;
  // The objective is the sum of the chosen costs, and the plan file says the same.
  double obj = 0;
  for (size_t i = 0; i < t.layers.size(); ++i) {
    const auto& c = ilp.choice[i];
    obj +=
        req.per_role ? t.layers[i].cost[0][int(c[0])] + t.layers[i].cost[1][int(c[1])] : t.layers[i].total_cost(c[0]);
    if (!req.per_role) {
      EXPECT_EQ(c[0], c[1]) << what;
    }
    const auto& lp = ilp.plan.layers.at(t.layers[i].name);
    EXPECT_EQ(lp.fprop, c[0]);
    EXPECT_EQ(lp.dgrad, c[1]);
    EXPECT_EQ(lp.wgrad, c[1]);
  }
  EXPECT_NEAR(obj, ilp.objective, 1e-9 * std::max(1.0, obj)) << what;
  EXPECT_DOUBLE_EQ(ilp.plan.achieved_fp4_fraction, ilp.achieved_fraction);
}

TEST(Ilp, EqualsBruteForcePerLayer) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    const CostTable t = random_table(2, seed, seed % 2 == 0);  // 14 layers
    for (double rho : {0.0, 0.17, 0.5, 0.63, 0.9, 1.0}) {
      PlanRequest req;
      req.budget = rho;
      expect_matches_brute_force(t, req, "seed " + std::to_string(seed) + " rho " + std::to_string(rho));
    }
  }
}

TEST(Ilp, EqualsBruteForcePerRole) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const CostTable t = random_table(1, seed, seed % 2 == 1);  // 7 layers × 2 roles
    for (double rho : {0.2, 0.5, 0.8}) {
      PlanRequest req;
      req.budget = rho;
      req.per_role = true;
      expect_matches_brute_force(t, req, "per-role seed " + std::to_string(seed));
    }
  }
}

TEST(Ilp, EqualsBruteForceWithTiesPinsStagesAndBf16) {
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    const CostTable t2 = random_table(2, seed, true);
    PlanRequest ties;
    ties.budget = 0.55;
    ties.ties = true;
    expect_matches_brute_force(t2, ties, "ties");
    const PlanResult r = solve_ilp(t2, ties);
    for (int b = 0; b < 2; ++b) {
      const auto& L = r.plan.layers;
      EXPECT_EQ(L.at(layer_module_name(b, LayerType::q)), L.at(layer_module_name(b, LayerType::k)));
      EXPECT_EQ(L.at(layer_module_name(b, LayerType::q)), L.at(layer_module_name(b, LayerType::v)));
      EXPECT_EQ(L.at(layer_module_name(b, LayerType::gate)), L.at(layer_module_name(b, LayerType::up)));
    }

    PlanRequest pins;
    pins.budget = 0.4;
    pins.pins[layer_module_name(0, LayerType::down)] = Precision::fp8;
    pins.pins[layer_module_name(1, LayerType::q)] = Precision::fp4;
    expect_matches_brute_force(t2, pins, "pins");
    const PlanResult rp = solve_ilp(t2, pins);
    EXPECT_EQ(rp.plan.layers.at(layer_module_name(0, LayerType::down)), LinearPrecision::uniform(Precision::fp8));
    EXPECT_EQ(rp.plan.layers.at(layer_module_name(1, LayerType::q)), LinearPrecision::uniform(Precision::fp4));

    PlanRequest stages;
    stages.budget = 0.45;
    stages.stages = 2;
    expect_matches_brute_force(t2, stages, "stages");
    const PlanResult rs = solve_ilp(t2, stages);
    const auto stage_of = stage_of_layers(t2, 2);
    for (int s = 0; s < 2; ++s) {  // each stage meets ρ on its own FLOPs
      double fp4 = 0, all = 0;
      for (size_t i = 0; i < t2.layers.size(); ++i)
        if (stage_of[i] == s) {
          all += t2.layers[i].flops;
          if (rs.choice[i][0] == Precision::fp4) fp4 += t2.layers[i].flops;
        }
      EXPECT_GE(fp4 / all, 0.45 - 1e-12) << "stage " << s;
    }

    const CostTable t1 = random_table(1, seed, false);
    PlanRequest bf;
    bf.budget = 0.3;
    bf.allow_bf16 = true;
    bf.bf16_max_fraction = 0.25;
    expect_matches_brute_force(t1, bf, "bf16");
    PlanRequest bfr = bf;
    bfr.per_role = true;
    bfr.ties = true;  // 5 units × 2 roles × 3 choices = 59049 assignments
    expect_matches_brute_force(t1, bfr, "bf16 per-role ties");
  }
}

TEST(Ilp, BudgetHoldsExactlyWhenRecomputed) {
  // Regression guard: budgets equal to an achievable fraction up to rounding (ρ = subset/total)
  // must hold exactly on the returned plan, not just within GLPK's tolerance.
  std::mt19937_64 rng(77);
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const CostTable t = random_table(2, seed, true);
    double total = 0, subset = 0;
    for (const auto& c : t.layers) total += c.flops;
    for (const auto& c : t.layers)
      if (rng() % 2) subset += c.flops;
    for (double rho : {subset / total, std::nextafter(subset / total, 1.0), std::nextafter(subset / total, 0.0)}) {
      PlanRequest req;
      req.budget = rho;
      const PlanResult r = solve_ilp(t, req);
      EXPECT_GE(r.achieved_fraction, rho) << "seed " << seed;
      EXPECT_GE(achieved_fp4_fraction(t, r.choice), rho);
    }
  }
}

TEST(Ilp, EdgesAllFp4AndCheapest) {
  const CostTable t = random_table(2, 3);
  PlanRequest req;
  req.budget = 1.0;
  const PlanResult all = solve_ilp(t, req);
  for (const auto& c : all.choice) EXPECT_EQ(c[0], Precision::fp4);
  EXPECT_EQ(all.achieved_fraction, 1.0);
  req.budget = 0.0;
  const PlanResult none = solve_ilp(t, req);  // fp4 always costs more here
  for (const auto& c : none.choice) EXPECT_EQ(c[0], Precision::fp8);
  EXPECT_EQ(none.plan.method, "snip");
  EXPECT_EQ(none.plan.provenance["status"], "optimal");
}

// Expects make_plan/solve to throw an Error containing every fragment.
void expect_infeasible(const CostTable& t, const PlanRequest& req, std::initializer_list<const char*> fragments) {
  try {
    solve_ilp(t, req);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "missing '" << f << "' in: " << e.what();
  }
}

TEST(Ilp, InfeasibleRequestsNameTheCause) {
  const CostTable t = random_table(2, 5);
  PlanRequest req;
  req.budget = 1.2;
  expect_infeasible(t, req, {"1.2000", "outside [0, 1]"});
  req.budget = -0.1;
  expect_infeasible(t, req, {"outside [0, 1]"});
  req.budget = NAN;
  expect_infeasible(t, req, {"outside [0, 1]"});

  // Three FP8 pins: the largest reachable fraction is 1 − their FLOP share.
  req.budget = 0.95;
  double total = 0, pinned = 0;
  for (const auto& c : t.layers) total += c.flops;
  for (LayerType ty : {LayerType::q, LayerType::k, LayerType::o}) {
    req.pins[layer_module_name(1, ty)] = Precision::fp8;
    for (const auto& c : t.layers)
      if (c.name == layer_module_name(1, ty)) pinned += c.flops;
  }
  char max_frac[32];
  std::snprintf(max_frac, sizeof max_frac, "%.4f", 1.0 - pinned / total);
  expect_infeasible(t, req, {"budget 0.9500 is unreachable", "3 pinned", max_frac});

  // A stage that cannot reach its budget: pin most of block 1 (stage 1) to FP8.
  PlanRequest st;
  st.budget = 0.5;
  st.stages = 2;
  for (LayerType ty : {LayerType::gate, LayerType::up, LayerType::down})
    st.pins[layer_module_name(1, ty)] = Precision::fp8;
  expect_infeasible(t, st, {"pipeline stage 1", "unreachable"});
  st.pins.clear();
  EXPECT_NO_THROW(solve_ilp(t, st));
  st.stages = 3;
  expect_infeasible(t, st, {"stages 3", "number of blocks (2)"});

  PlanRequest tie;
  tie.ties = true;
  tie.pins[layer_module_name(0, LayerType::q)] = Precision::fp8;
  tie.pins[layer_module_name(0, LayerType::k)] = Precision::fp4;
  expect_infeasible(t, tie, {"conflict", "ties"});

  PlanRequest unknown;
  unknown.pins["model.layers.9.mlp.up_proj"] = Precision::fp4;
  expect_infeasible(t, unknown, {"model.layers.9.mlp.up_proj", "not in the cost table"});

  CostTable no_roles = t;
  no_roles.has_roles = false;
  PlanRequest role;
  role.per_role = true;
  expect_infeasible(no_roles, role, {"per-role"});

  PlanRequest bf;
  bf.allow_bf16 = true;
  bf.bf16_max_fraction = 0.01;
  bf.pins[layer_module_name(0, LayerType::down)] = Precision::bf16;
  expect_infeasible(t, bf, {"BF16 pins", "limit"});
}

// Megatron-LM names the blocks of every pipeline chunk from 0, so a plan it can express gives
// one precision to each (type, stage-local position): block b and block b mod c, c = L/(P·V).
// The ILP finds the best such plan (the brute-force twin over the same tied units agrees), every
// method's plan keeps the tie, and a layout Megatron cannot split evenly, or one combined with
// per-stage budgets, is refused with the reason.
TEST(Ilp, APipelineLayoutGivesEveryChunkTheSamePlanAtItsBestCost) {
  const ModelDims dims = test::small_dims(4);
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const CostTable t = random_table(4, seed, seed % 2 == 0);
    for (const PipelineLayout layout : {PipelineLayout{2, 1}, PipelineLayout{2, 2}, PipelineLayout{4, 1}}) {
      const int chunk = pipeline_chunk_blocks(4, layout);
      for (const bool ties : {false, true}) {
        PlanRequest req;
        req.budget = 0.55;
        req.ties = ties;
        req.pipeline = layout;
        const std::string what =
            "seed " + std::to_string(seed) + " " + pipeline_layout_text(layout) + (ties ? " ties" : "");
        expect_matches_brute_force(t, req, what);
        for (const Method m : kAllMethods) {
          if (m == Method::min_err || m == Method::min_rel_err || m == Method::hawq) continue;  // need statistics
          const PlanResult r = make_plan(planner_input_from_costs(t), m, req);
          std::vector<LinearPrecision> per_layer;
          for (const auto& l : linear_layers(dims)) per_layer.push_back(r.plan.layers.at(l.name));
          EXPECT_FALSE(pipeline_conflict(per_layer, dims, layout)) << what << " " << method_name(m);
          EXPECT_EQ(plan_pipeline_layout(r.plan), layout) << what;
          for (size_t i = 0; i < t.layers.size(); ++i)  // the same as its stage-local twin
            EXPECT_EQ(r.choice[i], r.choice[size_t(t.layers[i].block % chunk) * 7 + size_t(t.layers[i].type)])
                << what << " " << method_name(m) << " " << t.layers[i].name;
        }
      }
    }
    // Without the tie the optimum is at least as good: the tie only removes plans.
    PlanRequest free;
    free.budget = 0.55;
    PlanRequest tied = free;
    tied.pipeline = {2, 1};
    EXPECT_LE(solve_ilp(t, free).objective, solve_ilp(t, tied).objective + 1e-12);
  }
  const CostTable t = random_table(4, 1);
  PlanRequest uneven;
  uneven.budget = 0.5;
  uneven.pipeline = {3, 1};
  try {
    (void)solve_ilp(t, uneven);
    ADD_FAILURE() << "4 blocks over 3 stages were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 chunks do not divide 4"), std::string::npos) << e.what();
  }
  PlanRequest both = uneven;
  both.pipeline = {2, 1};
  both.stages = 2;
  EXPECT_THROW((void)solve_ilp(t, both), Error);
  PlanRequest pinned;
  pinned.budget = 0.3;
  pinned.pipeline = {2, 1};
  pinned.pins[layer_module_name(0, LayerType::o)] = Precision::fp8;
  pinned.pins[layer_module_name(2, LayerType::o)] = Precision::fp4;  // Megatron's decoder.layers.0 on stage 1
  try {
    (void)solve_ilp(t, pinned);
    ADD_FAILURE() << "pins that differ at one stage-local position were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Megatron names both alike"), std::string::npos) << e.what();
  }
}

TEST(Ilp, StagesAreContiguousAndBalanced) {
  const CostTable t = random_table(5, 1);
  const auto s = stage_of_layers(t, 2);  // blocks 0-2 | 3-4
  for (size_t i = 0; i < t.layers.size(); ++i) EXPECT_EQ(s[i], t.layers[i].block <= 2 ? 0 : 1);
}

TEST(MakePlan, MinErrNeedsStatistics) {
  const PlannerInput in = planner_input_from_costs(random_table(1, 1));
  PlanRequest req;
  EXPECT_THROW(make_plan(in, Method::min_err, req), Error);
  EXPECT_NO_THROW(make_plan(in, Method::snip, req));
  EXPECT_EQ(parse_method("e-layer-id"), Method::e_layer_id);
  EXPECT_THROW(parse_method("greedy"), Error);
}

TEST(MakePlan, MinErrUsesItsOwnCostsButIsRatedUnderSnip) {
  const StatsRound r = test::random_round(2, 21);
  const PlannerInput in = planner_input_from_stats(r);
  PlanRequest req;
  req.budget = 0.5;
  const PlanResult snip = make_plan(in, Method::snip, req);
  const PlanResult me = make_plan(in, Method::min_err, req);
  EXPECT_EQ(me.method, "min-err");
  // SNIP minimises Q, so any other plan meeting ρ has Q at least as large.
  EXPECT_LE(snip.predicted_q, me.predicted_q + 1e-12);
  EXPECT_NEAR(snip.objective, snip.predicted_q, 1e-12);
  double err = 0;
  for (size_t i = 0; i < me.choice.size(); ++i) err += in.min_err->layers[i].total_cost(me.choice[i][0]);
  EXPECT_NEAR(me.objective, err, 1e-9 * err);
  EXPECT_TRUE(std::isfinite(snip.predicted_dl));
  EXPECT_TRUE(std::isfinite(snip.predicted_dw));
}

}  // namespace
}  // namespace snip

namespace snip {
namespace {

TEST(Ilp, EveryLayerPinnedNeedsNoSolverAndKeepsThePins) {
  const CostTable t = random_table(1, 2);
  PlanRequest req;
  req.budget = 0.3;
  for (const auto& c : t.layers)
    req.pins[c.name] = c.type == LayerType::gate || c.type == LayerType::up ? Precision::fp4 : Precision::fp8;
  const PlanResult r = solve_ilp(t, req);
  for (size_t i = 0; i < t.layers.size(); ++i) EXPECT_EQ(r.choice[i][0], req.pins.at(t.layers[i].name));
  EXPECT_GE(r.achieved_fraction, 0.3);
  req.budget = 0.6;  // gate + up are ~49% of the FLOPs
  EXPECT_THROW(solve_ilp(t, req), Error);
}

TEST(PlannerInput, PinSyntaxAndSourceChoice) {
  const auto [name, p] = parse_pin("model.layers.2.mlp.down_proj=fp8");
  EXPECT_EQ(name, "model.layers.2.mlp.down_proj");
  EXPECT_EQ(p, Precision::fp8);
  EXPECT_THROW(parse_pin("model.layers.2.mlp.down_proj"), Error);
  EXPECT_THROW(parse_pin("model.layers.2.mlp.down=fp8"), Error);
  EXPECT_THROW(parse_pin("model.layers.2.mlp.down_proj=fp5"), Error);
  EXPECT_THROW(read_planner_input("", ""), Error);
  EXPECT_THROW(read_planner_input("a.json", "b.csv"), Error);
  try {
    read_planner_input("", "/nonexistent/costs.csv");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/costs.csv"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace snip

namespace snip {
namespace {

TEST(Ilp, NonFiniteCostsAreRefusedBeforeGlpkSeesThem) {
  CostTable t = random_table(1, 3);
  t.layers[2].cost[0][int(Precision::fp4)] = INFINITY;
  PlanRequest req;
  try {
    solve_ilp(t, req);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(t.layers[2].name), std::string::npos) << e.what();
  }
  CostTable z = random_table(1, 3);
  z.layers[0].flops = 0;
  EXPECT_THROW(solve_ilp(z, req), Error);
}

}  // namespace
}  // namespace snip

namespace snip {
namespace {

TEST(MakePlan, PlanFileAgreesWithCoreFlopAccounting) {
  // The achieved fraction the planner reports equals snip_core's independent count on the plan
  // file read back, for per-layer and per-role plans of every method.
  const StatsRound r = test::random_round(3, 17);
  const PlannerInput in = planner_input_from_stats(r);
  for (bool per_role : {false, true})
    for (Method m : kAllMethods) {
      if (m == Method::hawq) continue;  // needs Hessian traces this round lacks (Estimator.Hawq* tests it)
      PlanRequest req;
      req.budget = 0.6;
      req.per_role = per_role;
      const PlanResult res = make_plan(in, m, req);
      const Plan back = plan_from_json(plan_to_json(res.plan), "roundtrip");
      EXPECT_EQ(back.layers, res.plan.layers);
      std::vector<std::string> warnings;
      const auto per_layer = resolve_plan(back, r.dims, &warnings);
      EXPECT_TRUE(warnings.empty());
      EXPECT_NEAR(fp4_flop_fraction(per_layer, r.dims), res.achieved_fraction, 1e-12) << method_name(m);
      EXPECT_EQ(back.method, method_name(m));
      EXPECT_DOUBLE_EQ(back.budget, 0.6);
    }
}

}  // namespace
}  // namespace snip

namespace snip {
namespace {

TEST(Ilp, BudgetGuardCatchesAToleranceSlip) {
  // Regression: the cheapest FP4 set misses ρ by a relative 1e-9, inside GLPK's feasibility
  // tolerance (GLPK 5.0 does accept it here). The plan returned must still meet ρ exactly (the
  // guard re-solves) and stay optimal.
  for (double rel : {1e-13, 1e-10, 1e-9, 1e-8}) {
    CostTable t = random_table(2, 1, true);
    double total = 0, cheap = 0;
    for (auto& c : t.layers) {
      total += c.flops;
      const bool in_cheap_set = c.type == LayerType::gate || c.type == LayerType::down;
      for (int r = 0; r < kNumRoles; ++r)
        c.cost[r][int(Precision::fp4)] = c.cost[r][int(Precision::fp8)] + (in_cheap_set ? 0.001 : 10.0);
      if (in_cheap_set) cheap += c.flops;
    }
    PlanRequest req;
    req.budget = cheap / total * (1 + rel);
    const PlanResult r = solve_ilp(t, req);
    EXPECT_GE(r.achieved_fraction, req.budget) << rel;
    EXPECT_GE(achieved_fp4_fraction(t, r.choice), req.budget) << rel;
    const PlanResult ref = solve_exhaustive_ref(t, req);
    EXPECT_NEAR(r.objective, ref.objective, 1e-9 * ref.objective) << rel;
  }
}

// The largest FP4 fraction a request can reach: every layer not pinned to another precision in FP4.
double largest_reachable(const CostTable& t, const PlanRequest& req) {
  double fp4 = 0, all = 0;
  for (const auto& c : t.layers) {
    all += c.flops;
    auto it = req.pins.find(c.name);
    if (it == req.pins.end() || it->second == Precision::fp4) fp4 += c.flops;
  }
  return fp4 / all;
}

// A budget equal to the largest fraction the pins still allow leaves GLPK's presolver
// no free column (`glp_add_cols: ncs = 0`, the process aborted). It has exactly one answer.
TEST(IlpEdge, BudgetAtTheLargestFractionThePinsAllowHasOneAnswer) {
  const CostTable t = random_table(2, 11);
  for (const auto& pinned : std::vector<std::vector<size_t>>{{6}, {6, 8}, {0, 1, 2, 3}, {13}}) {
    PlanRequest req;
    for (size_t i : pinned) req.pins[t.layers[i].name] = Precision::fp8;
    double smallest = 1, all = 0;
    for (const auto& c : t.layers) all += c.flops;
    for (const auto& c : t.layers)
      if (!req.pins.count(c.name)) smallest = std::min(smallest, c.flops / all);
    const double top = largest_reachable(t, req);
    for (double budget : {top, top - 1e-12, top - 0.5 * smallest, top - 0.9 * smallest}) {
      req.budget = budget;
      PlanResult r;
      ASSERT_NO_THROW(r = solve_ilp(t, req)) << pinned.size() << " pins, budget " << budget;
      for (size_t i = 0; i < t.layers.size(); ++i) {
        const bool is_pinned = req.pins.count(t.layers[i].name) > 0;
        EXPECT_EQ(r.choice[i][0], is_pinned ? Precision::fp8 : Precision::fp4) << t.layers[i].name;
      }
      EXPECT_GE(r.achieved_fraction, budget);
    }
    req.budget = std::min(1.0, largest_reachable(t, req) + 1e-3);  // just past it: infeasible, with the cause
    expect_infeasible(t, req, {"unreachable"});
  }
}

// Every pin subset of a one-block model at budgets on and around each reachable fraction: the
// planner returns a plan or a snip::Error, and never takes the process down.
TEST(IlpEdge, EveryPinSubsetAndBoundaryBudgetReturnsOrThrowsAnError) {
  const CostTable t = random_table(1, 4);
  const size_t n = t.layers.size();
  int solved = 0, refused = 0;
  for (unsigned mask = 0; mask < (1u << n); ++mask) {
    PlanRequest req;
    for (size_t i = 0; i < n; ++i)
      if (mask & (1u << i)) req.pins[t.layers[i].name] = (i % 3 == 0) ? Precision::fp4 : Precision::fp8;
    const double top = largest_reachable(t, req);
    // Above top − (smallest free layer) only "every free layer FP4" remains: GLPK's presolver fixed
    // every column and aborted there before the planner caught its failures.
    double smallest = 1, all = 0;
    for (const auto& c : t.layers) all += c.flops;
    for (const auto& c : t.layers)
      if (!req.pins.count(c.name)) smallest = std::min(smallest, c.flops / all);
    for (double budget : {0.0, top - 0.5 * smallest, top, std::nextafter(top, 0.0), std::nextafter(top, 2.0), 1.0}) {
      req.budget = std::clamp(budget, 0.0, 1.0);
      for (bool ties : {false, true}) {
        req.ties = ties;
        try {
          const PlanResult r = solve_ilp(t, req);
          EXPECT_GE(r.achieved_fraction, req.budget);
          ++solved;
        } catch (const Error&) {
          ++refused;
        }
      }
    }
  }
  EXPECT_GT(solved, 0);
  EXPECT_GT(refused, 0);
}

// GLPK aborts on a negative MIP gap or time limit; they are refused with the meaning first.
TEST(IlpEdge, SolverParametersAreCheckedBeforeGlpk) {
  const CostTable t = random_table(1, 3);
  PlanRequest req;
  req.mip_gap = -1;
  expect_infeasible(t, req, {"MIP gap -1 is outside [0, 1)"});
  req.mip_gap = std::nan("");
  expect_infeasible(t, req, {"MIP gap nan"});
  req.mip_gap = 1.5;
  expect_infeasible(t, req, {"MIP gap 1.5"});
  req.mip_gap = 0;
  req.time_limit_ms = -5;
  expect_infeasible(t, req, {"time limit -5 ms must be positive"});
  req.time_limit_ms = 0;
  expect_infeasible(t, req, {"time limit 0 ms"});
  req.time_limit_ms = 1000;
  req.mip_gap = 0.5;
  EXPECT_NO_THROW(solve_ilp(t, req));
}

}  // namespace
}  // namespace snip
