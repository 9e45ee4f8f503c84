// Statistics-round tests (METHOD.md section 4): the round leaves a training trajectory
// bit-identical, the curvature does not depend on σ_η, Hutchinson at Y_l matches ‖J_l‖_F²
// computed exactly with one-hot backward passes, the local residual maps are the model's own
// backward, and the planner accepts the round.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "exp_test_util.h"
#include "snip/error.h"
#include "snip/planner.h"
#include "snip/stats_keys.h"
#include "snip/stats_round.h"

namespace {

namespace k = snip::keys;

// Same parameters and AdamW moments, bit for bit.
void expect_same_state(snip::Trainer& a, snip::Trainer& b) {
  const int64_t n = a.model().num_params();
  ASSERT_EQ(n, b.model().num_params());
  EXPECT_EQ(0, std::memcmp(a.model().param_data(), b.model().param_data(), sizeof(float) * size_t(n)));
  EXPECT_EQ(0, std::memcmp(a.optimizer().m(), b.optimizer().m(), sizeof(float) * size_t(n)));
  EXPECT_EQ(0, std::memcmp(a.optimizer().v(), b.optimizer().v(), sizeof(float) * size_t(n)));
  EXPECT_EQ(a.optimizer().t(), b.optimizer().t());
}

TEST(StatsRound, LeavesTheTrainingTrajectoryBitIdentical) {
  // FP4 with stochastic rounding on dY: the most state-sensitive precision.
  auto cfg = exptest::tiny_config("fp4", 6);
  snip::Trainer plain(cfg), with_round(cfg);
  std::vector<double> loss_plain, loss_round;
  for (int s = 0; s < 6; ++s) {
    if (s == 3) {
      const snip::StatsRound r = snip::collect_stats_round(with_round);
      ASSERT_EQ(r.layers.size(), 14u);
      EXPECT_EQ(r.step, 3);
      // the round ran at BF16 but the trainer's FP4 plan is back in place
      for (const auto& p : with_round.model().precisions())
        EXPECT_EQ(p, snip::LinearPrecision::uniform(snip::Precision::fp4));
    }
    loss_plain.push_back(plain.step().train_loss);
    loss_round.push_back(with_round.step().train_loss);
  }
  EXPECT_EQ(loss_plain, loss_round);
  expect_same_state(plain, with_round);
  EXPECT_EQ(plain.trainer_state()["data"], with_round.trainer_state()["data"]);
}

TEST(StatsRound, RecordsEveryKeyTheEstimatorsNeed) {
  auto cfg = exptest::tiny_config("bf16", 4);
  snip::Trainer t(cfg);
  for (int s = 0; s < 3; ++s) t.step();
  const snip::StatsRound r = snip::collect_stats_round(t);
  for (const char* g : k::kRequiredGlobals) EXPECT_TRUE(r.globals.count(g)) << g;
  EXPECT_GT(r.globals.at(k::kGlobalCurvature), 0.0);
  EXPECT_EQ(r.tokens, 4 * 32);
  for (const auto& l : r.layers) {
    for (const char* s : k::kRequiredLayerScalars) {
      ASSERT_TRUE(l.scalars.count(s)) << l.name << " " << s;
      EXPECT_TRUE(std::isfinite(l.scalars.at(s))) << l.name << " " << s;
    }
    for (const char* p : {"fp8", "fp4"}) {
      ASSERT_TRUE(l.per_precision.count(p));
      for (const char* key : k::kRequiredPrecisionKeys) {
        ASSERT_TRUE(l.per_precision.at(p).count(key)) << l.name << " " << p << " " << key;
        EXPECT_GE(l.per_precision.at(p).at(key), 0.0) << l.name << " " << p << " " << key;
      }
    }
    // FP4 errs more than FP8 on every GEMM output
    EXPECT_GT(l.per_precision.at("fp4").at(k::kPrecDyErr), l.per_precision.at("fp8").at(k::kPrecDyErr)) << l.name;
    EXPECT_GT(l.per_precision.at("fp4").at(k::kPrecDdwErr), l.per_precision.at("fp8").at(k::kPrecDdwErr)) << l.name;
    // Σ_i γ_i is the layer's Hutchinson total
    double gsum = 0;
    for (float g : l.vectors.at(k::kVectorGainY)) gsum += g;
    EXPECT_NEAR(gsum, l.scalars.at(k::kLayerJtEpsSqY), 1e-4 * l.scalars.at(k::kLayerJtEpsSqY));
    // o and down carry the exact sibling gradient errors
    const bool o = l.name.find("o_proj") != std::string::npos, down = l.name.find("down_proj") != std::string::npos;
    if (o) EXPECT_TRUE(l.per_precision.at("fp4").count(k::sibling_dg_sq_key("v")));
    if (down) EXPECT_TRUE(l.per_precision.at("fp4").count(k::sibling_dg_sq_key("gate")));
  }
}

TEST(StatsRound, CurvatureDoesNotDependOnSigmaEta) {
  // METHOD.md 4.3: c agrees within 5% between σ_η = 1e-2 and 3e-2 · RMS(Z).
  auto cfg = exptest::tiny_config("bf16", 12);
  snip::Trainer t(cfg);
  for (int s = 0; s < 10; ++s) t.step();
  snip::StatsRoundOptions a, b;
  a.sigma_eta_rel = 1e-2, b.sigma_eta_rel = 3e-2;
  const double ca = snip::collect_stats_round(t, a).globals.at(k::kGlobalCurvature);
  const double cb = snip::collect_stats_round(t, b).globals.at(k::kGlobalCurvature);
  ASSERT_GT(ca, 0);
  ASSERT_GT(cb, 0);
  EXPECT_LT(std::abs(ca - cb) / ca, 0.05) << "c(1e-2) = " << ca << ", c(3e-2) = " << cb;
}

// A model small enough to compute J_l = ∂Z/∂Y_l exactly: BT·C one-hot backward passes.
TEST(StatsRound, HutchinsonMatchesTheExactJacobianNorm) {
  snip::ModelConfig c;
  c.hidden_size = 8, c.intermediate_size = 16, c.num_hidden_layers = 2, c.num_attention_heads = 2;
  c.num_key_value_heads = 1, c.vocab_size = 32, c.max_position_embeddings = 8;
  const int B = 1, T = 4;
  snip::Llama m(c, B, T);
  m.init_weights(3);
  // scale the weights up so the blocks are far from identity maps
  for (int64_t i = 0; i < m.num_params(); ++i) m.param_data()[i] *= 10.0f;
  snip::AdamW<float> opt(m.num_params(), {});
  std::vector<int32_t> in = {1, 5, 9, 30}, tgt = {5, 9, 30, 2};
  snip::StatsRoundOptions o;
  o.noise_passes = 3000;
  o.lr = 1e-3;
  const snip::StatsRound r = snip::collect_stats_round(m, opt, in.data(), tgt.data(), o);
  const double sigma = r.globals.at(k::kGlobalSigmaEps);

  // exact: ‖J_l‖_F² = Σ_e ‖J_lᵀ e‖² over the one-hot seeds e of Z, at the round's BF16 precisions
  m.set_precisions(std::vector<snip::LinearPrecision>(size_t(m.num_linear_layers()),
                                                      snip::LinearPrecision::uniform(snip::Precision::bf16)));
  // keep every layer's probe buffers (models with set_retain_intermediates drop them by default)
  [](auto& mm) {
    if constexpr (requires { mm.set_retain_intermediates(true); }) mm.set_retain_intermediates(true);
  }(m);
  m.forward(in.data(), tgt.data());
  const int64_t dim = int64_t(B) * T * c.hidden_size;
  std::vector<double> exact(size_t(m.num_linear_layers()), 0.0), exact_r(2, 0.0), exact_m(2, 0.0);
  std::vector<float> e(size_t(dim), 0.0f);
  for (int64_t i = 0; i < dim; ++i) {
    e[size_t(i)] = 1.0f;
    m.backward_from_residual(e.data());
    for (int l = 0; l < m.num_linear_layers(); ++l) {
      const auto v = m.probe_linear(l);
      for (int64_t j = 0; j < v.rows * v.N; ++j) exact[size_t(l)] += double(v.dY[j]) * v.dY[j];
    }
    for (int b = 0; b < 2; ++b)
      for (int64_t j = 0; j < dim; ++j) {
        exact_r[size_t(b)] += double(m.probe_residual_grad(b)[j]) * m.probe_residual_grad(b)[j];
        exact_m[size_t(b)] += double(m.probe_residual_mid_grad(b)[j]) * m.probe_residual_mid_grad(b)[j];
      }
    e[size_t(i)] = 0.0f;
  }
  for (int l = 0; l < m.num_linear_layers(); ++l) {
    const auto& ls = r.layers[size_t(l)];
    const double est = ls.scalars.at(k::kLayerJtEpsSqY) / (sigma * sigma);
    EXPECT_NEAR(est / exact[size_t(l)], 1.0, 0.1) << ls.name << ": Hutchinson " << est << " exact " << exact[size_t(l)];
    const int b = l / 7;
    const double ex_res = (l % 7) <= 3 ? exact_r[size_t(b)] : exact_m[size_t(b)];
    EXPECT_NEAR(ls.scalars.at(k::kLayerJtEpsSqResid) / (sigma * sigma) / ex_res, 1.0, 0.1) << ls.name;
  }
}

TEST(StatsRound, PlannerInputHasFiniteCostsAndFp4CostsMore) {
  auto cfg = exptest::tiny_config("bf16", 12);
  snip::Trainer t(cfg);
  for (int s = 0; s < 10; ++s) t.step();
  const snip::StatsRound r = snip::collect_stats_round(t);
  const snip::PlannerInput in = snip::planner_input_from_stats(r);
  int fp4_more = 0;
  for (const auto& l : in.snip.layers) {
    const double c8 = l.total_cost(snip::Precision::fp8), c4 = l.total_cost(snip::Precision::fp4);
    EXPECT_TRUE(std::isfinite(c8) && std::isfinite(c4)) << l.name;
    fp4_more += c4 > c8;
  }
  EXPECT_GE(fp4_more, int(in.snip.layers.size()) - 1) << "fp4 cost > fp8 cost for nearly every layer";
  snip::PlanRequest req;
  req.budget = 0.5;
  const snip::PlanResult p = snip::make_plan(in, snip::Method::snip, req);
  EXPECT_TRUE(p.meets_budget());
}

TEST(StatsRound, RejectsBadOptions) {
  auto cfg = exptest::tiny_config("bf16", 2);
  snip::Trainer t(cfg);
  snip::StatsRoundOptions o;
  o.noise_passes = 0;
  EXPECT_THROW(snip::collect_stats_round(t, o), snip::Error);
  std::vector<int32_t> in(128, 1), tgt(128, 2);
  snip::StatsRoundOptions z;
  z.lr = 0;
  EXPECT_THROW(snip::collect_stats_round(t.model(), t.optimizer(), in.data(), tgt.data(), z), snip::Error);
}

}  // namespace

namespace {

// The local residual maps (METHOD.md 5.2 step 1) are the model's own backward: fed the clean
// backward's input gradients, they must reproduce the residual-gradient increments of the
// main backward (all GEMMs in FP32, so the model's dgrads and the maps' FP32 dgrads agree):
//   map(dX_o) = map(dX_q) + map(dX_k) + map(dX_v) = ∂L/∂R_b − ∂L/∂M_b
//   map(dX_down) = map(dX_gate) + map(dX_up)     = ∂L/∂M_b − ∂L/∂R_{b+1}
// and the sibling ‖δG‖² of o / down are the model's ‖dY‖² at q, k, v / gate, up.
TEST(StatsRound, LocalResidualMapsAreTheModelsOwnBackward) {
  const snip::ModelConfig c = snip::preset_config("tiny");
  const int B = 2, T = 16;
  snip::Llama m(c, B, T);
  m.init_weights(11);
  [](auto& mm) {
    if constexpr (requires { mm.set_retain_intermediates(true); }) mm.set_retain_intermediates(true);
  }(m);
  m.set_precisions(std::vector<snip::LinearPrecision>(size_t(m.num_linear_layers()),
                                                      snip::LinearPrecision::uniform(snip::Precision::fp32)));
  std::mt19937 rng(5);
  std::vector<int32_t> in(size_t(B * T)), tgt(in.size());
  for (auto& x : in) x = int32_t(rng() % 256);
  for (auto& x : tgt) x = int32_t(rng() % 256);
  m.forward(in.data(), tgt.data());
  m.zero_grads();
  m.backward(1.0);
  const int64_t n = int64_t(B) * T * c.hidden_size;
  auto rel_diff = [n](const std::vector<float>& a, const float* hi, const float* lo) {
    double d = 0, ref = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double e = double(hi[i]) - double(lo[i]);
      d += (a[size_t(i)] - e) * (a[size_t(i)] - e), ref += e * e;
    }
    return std::sqrt(d / ref);
  };
  for (int b = 0; b < c.num_hidden_layers; ++b) {
    const int li = b * 7;
    std::vector<float> r_o, r_q, r_k, r_v, r_down, r_gate, r_up;
    std::map<std::string, double> sib_o, sib_down;
    const double sq_o = snip::map_dgrad_to_residual(m, li + 3, m.linear(li + 3).dX, &r_o, &sib_o);
    snip::map_dgrad_to_residual(m, li + 0, m.linear(li + 0).dX, &r_q);
    snip::map_dgrad_to_residual(m, li + 1, m.linear(li + 1).dX, &r_k);
    snip::map_dgrad_to_residual(m, li + 2, m.linear(li + 2).dX, &r_v);
    snip::map_dgrad_to_residual(m, li + 6, m.linear(li + 6).dX, &r_down, &sib_down);
    snip::map_dgrad_to_residual(m, li + 4, m.linear(li + 4).dX, &r_gate);
    snip::map_dgrad_to_residual(m, li + 5, m.linear(li + 5).dX, &r_up);
    EXPECT_LT(rel_diff(r_o, m.residual_grad(b), m.residual_mid_grad(b)), 1e-4) << "block " << b;
    std::vector<float> qkv(r_q.size()), gu(r_gate.size());
    for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = r_q[i] + r_k[i] + r_v[i], gu[i] = r_gate[i] + r_up[i];
    EXPECT_LT(rel_diff(qkv, m.residual_grad(b), m.residual_mid_grad(b)), 1e-4) << "block " << b;
    EXPECT_LT(rel_diff(r_down, m.residual_mid_grad(b), m.residual_grad(b + 1)), 1e-4) << "block " << b;
    EXPECT_LT(rel_diff(gu, m.residual_mid_grad(b), m.residual_grad(b + 1)), 1e-4) << "block " << b;
    double r_o_sq = 0;
    for (float x : r_o) r_o_sq += double(x) * x;
    EXPECT_NEAR(sq_o, r_o_sq, 1e-9 * r_o_sq);
    const char* sib_names[] = {"q", "k", "v", "o", "gate", "up", "down"};
    for (int t : {0, 1, 2, 4, 5}) {
      const auto v = m.linear(li + t);
      double dy_sq = 0;
      for (int64_t i = 0; i < v.rows * v.N; ++i) dy_sq += double(v.dY[i]) * v.dY[i];
      const double got = t <= 2 ? sib_o.at(sib_names[t]) : sib_down.at(sib_names[t]);
      EXPECT_NEAR(got / dy_sq, 1.0, 1e-4) << "block " << b << " " << sib_names[t];
    }
  }
}

}  // namespace
