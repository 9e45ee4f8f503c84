// Divergence estimators (METHOD.md 5.1–5.3, section 8) on hand-built statistics rounds whose
// answers are computed by hand, and the fast ΔW against its literal double-sum reference.
#include <gtest/gtest.h>

#include <cmath>

#include "planner_test_util.h"
#include "snip/error.h"
#include "snip/estimator.h"
#include "snip/planner.h"

namespace snip {
namespace {

namespace k = keys;
using test::random_round;

constexpr double kTight = 1e-12;

LayerStats* find(StatsRound& r, int block, LayerType t) {
  for (auto& ls : r.layers)
    if (ls.name == layer_module_name(block, t)) return &ls;
  return nullptr;
}

// A 2-block round in which only the named quantities are non-zero, so ΔL/ΔW follow by hand.
StatsRound sparse_round() {
  StatsRound r = random_round(2, 7);
  r.tokens = 10;
  r.globals[k::kGlobalCurvature] = 0.5;
  r.globals[k::kGlobalSigmaEps] = 2.0;
  r.globals[k::kGlobalKt] = 0.1;
  for (auto& ls : r.layers) {
    ls.scalars[k::kLayerAdamAGain] = 0.0;  // switch every upstream contribution off ...
    ls.scalars[k::kLayerUpdateNorm] = 1.0;
    for (auto& [p, m] : ls.per_precision) m[k::kPrecOwnUpdateSq] = 0.0;
  }
  return r;
}

TEST(Upstream, FollowsTheBackwardPathOfMethod52) {
  auto id = [](int b, LayerType t) { return LayerId{b, t}; };
  using T = LayerType;
  // inside a block: q,k,v -> o -> gate,up -> down
  EXPECT_TRUE(is_upstream(id(0, T::q), id(0, T::o)));
  EXPECT_TRUE(is_upstream(id(0, T::v), id(0, T::down)));
  EXPECT_TRUE(is_upstream(id(0, T::o), id(0, T::gate)));
  EXPECT_TRUE(is_upstream(id(0, T::up), id(0, T::down)));
  EXPECT_FALSE(is_upstream(id(0, T::o), id(0, T::q)));
  // siblings and self are not upstream of each other
  EXPECT_FALSE(is_upstream(id(0, T::q), id(0, T::k)));
  EXPECT_FALSE(is_upstream(id(0, T::k), id(0, T::q)));
  EXPECT_FALSE(is_upstream(id(0, T::gate), id(0, T::up)));
  EXPECT_FALSE(is_upstream(id(0, T::down), id(0, T::down)));
  // every layer of an earlier block is upstream of every layer of a later block
  EXPECT_TRUE(is_upstream(id(0, T::down), id(1, T::q)));
  EXPECT_TRUE(is_upstream(id(0, T::q), id(3, T::q)));
  EXPECT_FALSE(is_upstream(id(1, T::q), id(0, T::down)));
}

TEST(Estimator, LossDivergenceByHand) {
  StatsRound r = sparse_round();
  LayerStats* q1 = find(r, 1, LayerType::q);  // N = 64
  q1->scalars[k::kLayerJtEpsSqY] = 8.0;       // ‖J‖_F² = 8 / σ² = 2
  q1->per_precision["fp4"][k::kPrecDyErr] = 3.0;
  // ΔL = c·‖J‖²·‖δY‖²/(T·N) = 0.5 · 2 · 9 / (10 · 64)
  const Estimates est = estimate_divergences(r);
  EXPECT_NEAR(est.layers[7].dl[int(Precision::fp4)], 0.5 * 2 * 9 / 640.0, kTight);
  EXPECT_EQ(est.layers[7].name, "model.layers.1.self_attn.q_proj");
}

TEST(Estimator, WeightDivergenceGainRatioTermByHand) {
  StatsRound r = sparse_round();
  LayerStats* m = find(r, 1, LayerType::q);     // the layer whose dgrad errs
  LayerStats* l = find(r, 0, LayerType::down);  // an upstream layer of an earlier block
  l->scalars[k::kLayerAdamAGain] = 4.0;
  l->scalars[k::kLayerXNorm] = 5.0;
  l->scalars[k::kLayerUpdateNorm] = 0.5;
  l->scalars[k::kLayerJtEpsSqY] = 3.0;
  m->scalars[k::kLayerJtEpsSqResid] = 6.0;
  m->per_precision["fp8"][k::kPrecResidErrSq] = 2.0;
  m->per_precision["fp8"][k::kPrecOwnUpdateSq] = 50.0;
  // own: k_t²·50/‖u_m‖² = 0.01·50 = 0.5
  // upstream: ‖δG_l‖² = 2·3/6 = 1; k_t²·a^w·‖δG‖²·‖X‖²/T/‖u_l‖² = 0.01·4·1·25/10/0.25 = 0.4
  const Estimates est = estimate_divergences(r);
  const auto& e = est.layers[7];
  EXPECT_NEAR(e.dw_own[int(Precision::fp8)], 0.5, kTight);
  EXPECT_NEAR(e.dw_upstream[int(Precision::fp8)], 0.4, kTight);
  EXPECT_NEAR(e.dw[int(Precision::fp8)], 0.9, kTight);
  EXPECT_NEAR(weight_divergence_ref(r, 7, Precision::fp8), 0.9, kTight);
  // l itself (block 0 down_proj): its own upstream layers have a^w = 0, so nothing reaches it.
  EXPECT_NEAR(est.layers[6].dw_upstream[int(Precision::fp8)], 0.0, kTight);
}

TEST(Estimator, SiblingGradientErrorsAreUsedExactly) {
  // o's local backward (attention) gives δG at q/k/v exactly: no gain ratio for them.
  StatsRound r = sparse_round();
  LayerStats* o = find(r, 0, LayerType::o);
  LayerStats* q = find(r, 0, LayerType::q);
  q->scalars[k::kLayerAdamAGain] = 2.0;
  q->scalars[k::kLayerXNorm] = 1.0;
  q->scalars[k::kLayerUpdateNorm] = 1.0;
  o->per_precision["fp4"][k::sibling_dg_sq_key("q")] = 5.0;
  o->per_precision["fp4"][k::kPrecResidErrSq] = 1000.0;  // must not reach q
  // 0.01 · 2 · 5 · 1 / 10 / 1 = 0.01
  const Estimates est = estimate_divergences(r);
  EXPECT_NEAR(est.layers[3].dw_upstream[int(Precision::fp4)], 0.01, kTight);
}

TEST(Estimator, FastWeightDivergenceEqualsLiteralDoubleSum) {
  const StatsRound r = random_round(3, 11);
  const Estimates est = estimate_divergences(r);
  for (const auto& e : est.layers)
    for (Precision p : {Precision::fp8, Precision::fp4}) {
      const int idx = e.block * kLayersPerBlock + int(e.type);
      const double ref = weight_divergence_ref(r, idx, p);
      EXPECT_NEAR(e.dw[int(p)], ref, 1e-12 * std::abs(ref)) << e.name << " " << precision_name(p);
    }
}

TEST(Estimator, NormalisationAndLambda) {
  const StatsRound r = random_round(2, 5);
  EstimatorOptions opt;
  opt.lambda = 0.3;
  const Estimates est = estimate_divergences(r, opt);
  double sdl = 0, sdw = 0;
  for (const auto& e : est.layers) {
    sdl += e.dl_hat[int(Precision::fp4)];
    sdw += e.dw_hat[int(Precision::fp4)];
    for (Precision p : {Precision::fp8, Precision::fp4}) {
      EXPECT_NEAR(e.q[int(p)], e.dl_hat[int(p)] + 0.3 * e.dw_hat[int(p)], kTight);
      EXPECT_NEAR(e.q_role[0][int(p)] + e.q_role[1][int(p)], e.q[int(p)], kTight);
    }
    EXPECT_EQ(e.dl[int(Precision::bf16)], 0.0);  // unmeasured BF16 is the zero-error reference
  }
  EXPECT_NEAR(sdl, 1.0, 1e-12);
  EXPECT_NEAR(sdw, 1.0, 1e-12);
  opt.normalize = false;
  const Estimates raw = estimate_divergences(r, opt);
  for (const auto& e : raw.layers) EXPECT_EQ(e.dl_hat[int(Precision::fp4)], e.dl[int(Precision::fp4)]);
}

TEST(Estimator, LocalErrorCostsByHand) {
  StatsRound r = sparse_round();
  LayerStats* ls = find(r, 0, LayerType::k);
  ls->scalars[k::kLayerXNorm] = 2.0;
  ls->scalars[k::kLayerWNorm] = 4.0;
  ls->scalars[k::kLayerGNorm] = 8.0;
  auto& m = ls->per_precision["fp4"];
  m[k::kPrecErrFpropX] = 1;
  m[k::kPrecErrFpropW] = 2;
  m[k::kPrecErrDgradG] = 3;
  m[k::kPrecErrDgradW] = 4;
  m[k::kPrecErrWgradG] = 5;
  m[k::kPrecErrWgradX] = 6;
  const auto est = estimate_divergences(r);  // keep the owner alive: layers[1] refers into it
  const auto& e = est.layers[1];
  EXPECT_DOUBLE_EQ(e.min_err[int(Precision::fp4)], 21.0);
  EXPECT_DOUBLE_EQ(e.min_err_role[0][int(Precision::fp4)], 3.0);
  // 1/2 + 2/4 + 3/8 + 4/4 + 5/8 + 6/2
  EXPECT_DOUBLE_EQ(e.min_rel_err[int(Precision::fp4)], 0.5 + 0.5 + 0.375 + 1.0 + 0.625 + 3.0);
}

TEST(Estimator, MissingStatisticNamesLayerAndKey) {
  StatsRound r = random_round(1, 3);
  find(r, 0, LayerType::up)->per_precision["fp4"].erase(k::kPrecDyErr);
  try {
    estimate_divergences(r);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("dy_err"), std::string::npos) << e.what();
  }
  StatsRound g = random_round(1, 3);
  g.globals.erase(k::kGlobalCurvature);
  EXPECT_THROW(estimate_divergences(g), Error);
  StatsRound z = random_round(1, 3);
  find(z, 0, LayerType::q)->scalars[k::kLayerUpdateNorm] = 0.0;
  EXPECT_THROW(estimate_divergences(z), Error);
  EXPECT_THROW(estimate_divergences(random_round(1, 3), EstimatorOptions{-1.0, true}), Error);
}

TEST(Estimator, PlannerInputFromStatsJsonRoundTrip) {
  const StatsRound r = random_round(2, 9);
  const StatsRound back = stats_from_json(stats_to_json(r), "test");
  const PlannerInput in = planner_input_from_stats(back);
  ASSERT_EQ(in.snip.layers.size(), 14u);
  ASSERT_TRUE(in.min_err.has_value());
  const Estimates est = estimate_divergences(r);
  for (size_t i = 0; i < 14; ++i) {
    EXPECT_NEAR(in.snip.layers[i].total_cost(Precision::fp4), est.layers[i].q[int(Precision::fp4)], 1e-6);
    EXPECT_NEAR(in.min_err->layers[i].total_cost(Precision::fp8), est.layers[i].min_err[int(Precision::fp8)], 1e-6);
    EXPECT_DOUBLE_EQ(in.snip.layers[i].flops, 3.0 * est.layers[i].gemm_flops);
  }
}

// hawq (HAWQ-V3): Ω_l(p) = tr(H_W)/(N·K)·‖Q_p(W) − W‖², planned by the same ILP; without the
// weight-Hessian trace in the round the method says how to get it.
TEST(Estimator, HawqSensitivityIsTraceOverSizeTimesWeightErrorSquared) {
  StatsRound r = random_round(2, 9);
  PlanRequest req;
  req.budget = 0.5;
  EXPECT_FALSE(planner_input_from_stats(r).hawq.has_value());
  try {
    make_plan(planner_input_from_stats(r), Method::hawq, req);
    FAIL() << "hawq planned without Hessian traces";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--hessian-probes"), std::string::npos) << e.what();
  }
  for (size_t l = 0; l < r.layers.size(); ++l) r.layers[l].scalars[k::kLayerHessianTraceW] = 10.0 * double(l + 1);
  const Estimates est = estimate_divergences(r);
  for (size_t l = 0; l < est.layers.size(); ++l) {
    const LayerEstimate& e = est.layers[l];
    for (Precision p : {Precision::fp8, Precision::fp4}) {
      const double ew = r.layers[l].per_precision.at(precision_name(p)).at(k::kPrecErrFpropW);
      EXPECT_NEAR(e.hawq[int(p)], 10.0 * double(l + 1) / double(e.in_features * e.out_features) * ew * ew,
                  1e-12 * e.hawq[int(p)]);
    }
  }
  const PlannerInput in = planner_input_from_stats(r);
  ASSERT_TRUE(in.hawq.has_value());
  const PlanResult p = make_plan(in, Method::hawq, req);
  EXPECT_EQ(p.method, "hawq");
  EXPECT_GE(p.achieved_fraction, 0.5);
  EXPECT_EQ(parse_method("hawq"), Method::hawq);
  // the ILP on Ω: the same plan as solving the hawq table directly
  EXPECT_EQ(p.plan.layers, solve_ilp(*in.hawq, req, &in.snip).plan.layers);
}

}  // namespace
}  // namespace snip
