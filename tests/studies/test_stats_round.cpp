// Statistics-round tests (METHOD.md section 4): the round leaves a training trajectory
// bit-identical, the curvature does not depend on σ_η, Hutchinson at Y_l matches ‖J_l‖_F²
// computed exactly with one-hot backward passes, the local residual maps are the model's own
// backward, the exact ΔW mode's backward equals a brute-force model backward with one layer's
// dgrad quantized, the round's GEMM errors equal qlinear_*'s bit for bit, and the planner accepts
// the round.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "exp_test_util.h"
#include "isa_tiers.h"
#include "snip/blas_threads.h"
#include "snip/error.h"
#include "snip/estimator.h"
#include "snip/hadamard.h"
#include "snip/isa.h"
#include "snip/planner.h"
#include "snip/qlinear.h"
#include "snip/stats_keys.h"
#include "snip/stats_round.h"
#include "snip/stats_sums.h"
#include "snip/thread_pool.h"

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
    if (o) {
      EXPECT_TRUE(l.per_precision.at("fp4").count(k::sibling_dg_sq_key("v")));
    }
    if (down) {
      EXPECT_TRUE(l.per_precision.at("fp4").count(k::sibling_dg_sq_key("gate")));
    }
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
    const int li = b * snip::kLayersPerBlock;
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

// A tiny FP32 model with every intermediate kept, after forward + backward of a random batch.
struct TinyFp32 {
  snip::ModelConfig c = snip::preset_config("tiny");
  int B = 2, T = 16;
  snip::Llama m{c, B, T};
  std::vector<int32_t> in, tgt;
  TinyFp32() {
    m.init_weights(11);
    m.set_retain_intermediates(true);
    std::mt19937 rng(5);
    in.resize(size_t(B * T)), tgt.resize(in.size());
    for (auto& x : in) x = int32_t(rng() % 256);
    for (auto& x : tgt) x = int32_t(rng() % 256);
  }
  void run(const std::vector<snip::LinearPrecision>& plan) {
    m.set_precisions(plan);
    m.forward(in.data(), tgt.data());
    m.zero_grads();
    m.backward(1.0);
  }
};

// METHOD.md 5.2 exact mode: δdX_m propagated through the frozen graph gives each upstream
// layer's weight-gradient change. Brute force: the model's own backward with only layer m's
// dgrad in FP4 (forward unchanged, backward linear), minus the all-FP32 backward.
TEST(StatsRound, ExactModeBackwardEqualsTheModelsBackwardWithOneQuantizedDgrad) {
  TinyFp32 t;
  const int NL = t.m.num_linear_layers();
  const std::vector<snip::LinearPrecision> fp32(size_t(NL), snip::LinearPrecision::uniform(snip::Precision::fp32));
  t.run(fp32);
  std::vector<std::vector<float>> g0(static_cast<size_t>(NL)), dx0(static_cast<size_t>(NL));
  auto grads = [&](std::vector<std::vector<float>>& g) {
    for (int l = 0; l < NL; ++l) {
      const auto v = t.m.linear(l);
      g[size_t(l)].assign(v.dW, v.dW + v.N * v.K);
    }
  };
  grads(g0);
  for (int l = 0; l < NL; ++l) {
    const auto v = t.m.linear(l);
    dx0[size_t(l)].assign(v.dX, v.dX + v.rows * v.K);
  }
  int checked_upstream = 0;
  for (int mi = 0; mi < NL; ++mi) {
    std::vector<snip::LinearPrecision> plan = fp32;
    plan[size_t(mi)].dgrad = snip::Precision::fp4;
    t.run(plan);
    std::vector<std::vector<float>> g1(static_cast<size_t>(NL));
    grads(g1);
    const auto vm = t.m.linear(mi);
    std::vector<float> ddx(size_t(vm.rows * vm.K));
    for (size_t i = 0; i < ddx.size(); ++i) ddx[i] = vm.dX[i] - dx0[size_t(mi)][i];
    const auto prop = snip::propagate_dgrad_error(t.m, mi, ddx.data());
    ASSERT_EQ(prop.size(), size_t(NL));
    for (int l = 0; l < NL; ++l) {
      const snip::LayerId il{l / 7, snip::LayerType(l % 7)}, im{mi / 7, snip::LayerType(mi % 7)};
      const auto& a = g0[size_t(l)];
      const auto& b = g1[size_t(l)];
      if (!snip::is_upstream(il, im)) {
        EXPECT_TRUE(prop[size_t(l)].empty()) << "layer " << l << " is not upstream of " << mi;
        EXPECT_EQ(0, std::memcmp(a.data(), b.data(), sizeof(float) * a.size())) << "layer " << l << " m " << mi;
        continue;
      }
      ASSERT_EQ(prop[size_t(l)].size(), a.size()) << "layer " << l << " m " << mi;
      double d = 0, ref = 0;
      for (size_t i = 0; i < a.size(); ++i) {
        const double e = double(b[i]) - double(a[i]);
        d += (prop[size_t(l)][i] - e) * (prop[size_t(l)][i] - e), ref += e * e;
      }
      ASSERT_GT(ref, 0.0) << "layer " << l << " m " << mi;
      EXPECT_LT(std::sqrt(d / ref), 1e-3) << "layer " << l << " m " << mi;
      ++checked_upstream;
    }
  }
  // per block: o has 3 upstream layers, gate/up 4 each, down 6 (17); every layer of block 0 is
  // upstream of every layer of block 1 (49)
  EXPECT_EQ(checked_upstream, 2 * 17 + 49);
}

// Σ_e term(e) in the order the round's double sums document (METHOD.md section 4): element e
// into partial sum e mod 8, the partials combined as ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)).
template <class Term>
double lane_sum(int64_t n, Term&& term) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t e = 0; e < n; ++e) s[e % 8] += term(e);
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

// The gradient noise monitor's ratio (METHOD.md 10), against a direct computation on a small
// model: ‖∇W‖ / ‖∇W_q − ∇W‖ with ∇W the BF16 wgrad of the layer's own dY and X, ∇W_q the same
// GEMM with the precision's quantized operands; FP8 quantizes more finely than FP4, so its ratio
// is the larger on every layer.
TEST(StatsRound, GradNoiseRatioIsTheGradientOverItsQuantizationNoise) {
  const snip::ModelConfig c = snip::preset_config("tiny");
  snip::Llama m(c, 2, 32);
  m.init_weights(6);
  m.set_retain_intermediates(true);
  snip::AdamW<float> opt(m.num_params(), {});
  std::mt19937 rng(11);
  std::vector<int32_t> in(64), tgt(64);
  for (auto& x : in) x = int32_t(rng() % 256);
  for (auto& x : tgt) x = int32_t(rng() % 256);
  snip::StatsRoundOptions o;
  o.lr = 1e-3, o.seed = 2, o.step = 4;
  const snip::StatsRound r = snip::collect_stats_round(m, opt, in.data(), tgt.data(), o);
  const snip::Recipe& recipe = m.recipe();
  for (int li = 0; li < m.num_linear_layers(); ++li) {
    const auto v = m.linear(li);
    const int64_t T = v.rows, K = v.K, N = v.N;
    snip::QLinearContext ctx{&recipe, o.seed, uint64_t(o.step), uint32_t(li), v.name.c_str()};
    std::vector<float> dw0(size_t(N * K)), dw(dw0.size());
    snip::qlinear_wgrad(dw0.data(), v.dY, v.X, T, K, N, snip::Precision::bf16, ctx);
    double clean = 0;
    for (float x : dw0) clean += double(x) * double(x);
    std::map<snip::Precision, double> ratio;
    for (snip::Precision p : {snip::Precision::fp8, snip::Precision::fp4}) {
      snip::qlinear_wgrad(dw.data(), v.dY, v.X, T, K, N, p, ctx);
      double noise = 0;
      for (size_t e = 0; e < dw.size(); ++e)
        noise += (double(dw[e]) - double(dw0[e])) * (double(dw[e]) - double(dw0[e]));
      const double direct = std::sqrt(clean) / std::sqrt(noise);
      const auto& pp = r.layers[size_t(li)].per_precision.at(snip::precision_name(p));
      ASSERT_TRUE(pp.count(k::kPrecGradNoiseRatio)) << v.name;
      // 1e-4 relative: the round's ‖∇W‖ is the model's FP32 gradient summed by its own GEMM, the
      // direct one a double sum over the BF16 wgrad; both norms and the noise norm are sums of
      // squares of like-signed terms (no cancellation), so they differ by FP32 rounding of the
      // operands' products (~1e-6 relative on any machine), far inside the bound.
      EXPECT_NEAR(pp.at(k::kPrecGradNoiseRatio), direct, 1e-4 * direct) << v.name << " " << snip::precision_name(p);
      ratio[p] = pp.at(k::kPrecGradNoiseRatio);
    }
    EXPECT_GT(ratio[snip::Precision::fp8], ratio[snip::Precision::fp4]) << v.name;
  }
  // In the file format too.
  const snip::StatsRound back = snip::stats_from_json(snip::stats_to_json(r), "round");
  EXPECT_EQ(back.layers[0].per_precision.at("fp4").at(k::kPrecGradNoiseRatio),
            r.layers[0].per_precision.at("fp4").at(k::kPrecGradNoiseRatio));
}

// The round quantizes each operand once (for its error norm and its GEMM; q/k/v share one
// quantized input, and so do gate/up) and reuses the clean pass's BF16 outputs as references.
// Its operand errors must be those of the GEMMs' own quantized operands, bit for bit in the
// documented summation order, and its GEMM errors must equal a plain recomputation with
// qlinear_* bit for bit (summed in the documented order): the snip recipe
// (one W quantization for fprop and dgrad), mx (two) and nvfp4 with the wgrad Hadamard option.
TEST(StatsRound, GemmErrorsEqualARecomputationWithQlinearBitForBit) {
  snip::RecipeOptions snip_r, mx_r, nv_r;
  mx_r.name = "mx";
  nv_r.name = "nvfp4", nv_r.hadamard_wgrad = true;
  for (const snip::RecipeOptions& ro : {snip_r, mx_r, nv_r}) {
    const snip::ModelConfig c = snip::preset_config("tiny");
    snip::Llama m(c, 2, 32);
    m.init_weights(4);
    m.set_recipe(snip::Recipe(ro));
    m.set_retain_intermediates(true);
    snip::AdamW<float> opt(m.num_params(), {});
    std::mt19937 rng(9);
    std::vector<int32_t> in(64), tgt(64);
    for (auto& x : in) x = int32_t(rng() % 256);
    for (auto& x : tgt) x = int32_t(rng() % 256);
    snip::StatsRoundOptions o;
    o.lr = 1e-3, o.seed = 3, o.step = 5;
    const snip::StatsRound r = snip::collect_stats_round(m, opt, in.data(), tgt.data(), o);
    const snip::Recipe& recipe = m.recipe();
    for (int li = 0; li < m.num_linear_layers(); ++li) {
      const auto v = m.linear(li);
      const int64_t T = v.rows, K = v.K, N = v.N;
      snip::QLinearContext ctx{&recipe, o.seed, uint64_t(o.step), uint32_t(li), v.name.c_str()};
      std::vector<float> y0(size_t(T * N)), dx0(size_t(T * K)), dw0(size_t(N * K)), q(size_t(std::max(T * K, N * K)));
      snip::qlinear_fprop(y0.data(), v.X, v.W, T, K, N, snip::Precision::bf16, ctx);
      snip::qlinear_dgrad(dx0.data(), v.dY, v.W, T, K, N, snip::Precision::bf16, ctx);
      snip::qlinear_wgrad(dw0.data(), v.dY, v.X, T, K, N, snip::Precision::bf16, ctx);
      for (snip::Precision p : {snip::Precision::fp8, snip::Precision::fp4}) {
        const auto& pp = r.layers[size_t(li)].per_precision.at(snip::precision_name(p));
        const std::string where = ro.name + " " + v.name + " " + snip::precision_name(p);
        std::vector<float> y(y0.size()), dx(dx0.size()), dw(dw0.size());
        snip::qlinear_fprop(y.data(), v.X, v.W, T, K, N, p, ctx);
        snip::qlinear_dgrad(dx.data(), v.dY, v.W, T, K, N, p, ctx);
        snip::qlinear_wgrad(dw.data(), v.dY, v.X, T, K, N, p, ctx);
        auto diff = [](const std::vector<float>& a, const std::vector<float>& b, int64_t e) {
          return double(a[size_t(e)]) - double(b[size_t(e)]);
        };
        const double dy_sq = lane_sum(T * N, [&](int64_t e) { return diff(y, y0, e) * diff(y, y0, e); });
        const double g_dot = lane_sum(T * N, [&](int64_t e) { return double(v.dY[e]) * diff(y, y0, e); });
        const double ddx_sq = lane_sum(T * K, [&](int64_t e) { return diff(dx, dx0, e) * diff(dx, dx0, e); });
        const double ddw_sq = lane_sum(N * K, [&](int64_t e) { return diff(dw, dw0, e) * diff(dw, dw0, e); });
        EXPECT_EQ(pp.at(k::kPrecDyErr), std::sqrt(dy_sq)) << where;
        EXPECT_EQ(pp.at(k::kPrecGDotDy), g_dot) << where;
        EXPECT_EQ(pp.at(k::kPrecDdxErr), std::sqrt(ddx_sq)) << where;
        EXPECT_EQ(pp.at(k::kPrecDdwErr), std::sqrt(ddw_sq)) << where;
        EXPECT_GT(ddw_sq, 0.0) << where;
        // ‖e_p‖ of the GEMM's own quantized operand (in the rotated coordinates where nvfp4's
        // Hadamard option rotates), summed in the order QLinearOperand::quantize documents
        auto err = [&](const float* src, int64_t rows, int64_t cols, snip::Gemm g, snip::Operand op) {
          snip::qlinear_quantize_operand(q.data(), src, rows, cols, p, g, op, ctx);
          std::vector<float> x(src, src + rows * cols);
          if (g == snip::Gemm::wgrad && p == snip::Precision::fp4 && ro.hadamard_wgrad)
            snip::hadamard16_rows(x.data(), rows, cols);
          double total = 0;
          for (int64_t r = 0; r < rows; ++r) {
            double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int64_t c = 0; c < cols; ++c) {
              const double d = double(q[size_t(r * cols + c)]) - double(x[size_t(r * cols + c)]);
              s[c % 8] += d * d;
            }
            total += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
          }
          return std::sqrt(total);
        };
        EXPECT_EQ(pp.at(k::kPrecErrFpropX), err(v.X, T, K, snip::Gemm::fprop, snip::Operand::activation)) << where;
        EXPECT_EQ(pp.at(k::kPrecErrFpropW), err(v.W, N, K, snip::Gemm::fprop, snip::Operand::weight)) << where;
        EXPECT_EQ(pp.at(k::kPrecErrDgradG), err(v.dY, T, N, snip::Gemm::dgrad, snip::Operand::gradient)) << where;
        EXPECT_EQ(pp.at(k::kPrecErrDgradW), err(v.W, N, K, snip::Gemm::dgrad, snip::Operand::weight)) << where;
        EXPECT_EQ(pp.at(k::kPrecErrWgradG), err(v.dY, T, N, snip::Gemm::wgrad, snip::Operand::gradient)) << where;
        EXPECT_EQ(pp.at(k::kPrecErrWgradX), err(v.X, T, K, snip::Gemm::wgrad, snip::Operand::activation)) << where;
      }
    }
  }
}

// The per-layer stage keeps its buffers from one round to the next (per thread). A round after
// a training step, on reused buffers, must equal the same round on a fresh thread's new buffers
// (the model's tensors keep their addresses, so nothing cached by address may survive a round).
TEST(StatsRound, BuffersKeptFromAnEarlierRoundGiveTheSameStatistics) {
  auto cfg = exptest::tiny_config("bf16", 6);
  snip::Trainer t(cfg), twin(cfg);
  for (int s = 0; s < 2; ++s) t.step(), twin.step();
  (void)snip::collect_stats_round(t);  // fills this thread's buffers
  t.step(), twin.step();
  const snip::StatsRound reused = snip::collect_stats_round(t);
  snip::StatsRound fresh;
  std::thread([&] { fresh = snip::collect_stats_round(twin); }).join();
  ASSERT_EQ(reused.layers.size(), fresh.layers.size());
  for (size_t l = 0; l < reused.layers.size(); ++l) {
    EXPECT_EQ(reused.layers[l].scalars, fresh.layers[l].scalars) << reused.layers[l].name;
    EXPECT_EQ(reused.layers[l].per_precision, fresh.layers[l].per_precision) << reused.layers[l].name;
  }
}

// Every recorded number, bit for bit (NaN-safe, and −0 ≠ +0).
void expect_same_bits(const std::map<std::string, double>& a, const std::map<std::string, double>& b,
                      const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  for (const auto& [key, x] : a) {
    const auto it = b.find(key);
    ASSERT_NE(it, b.end()) << where << " " << key;
    EXPECT_EQ(0, std::memcmp(&x, &it->second, sizeof(double)))
        << where << " " << key << ": " << x << " vs " << it->second;
  }
}

// Every global, layer scalar, per-precision statistic and per-layer vector of a and b, bit for bit.
void expect_same_round_bits(const snip::StatsRound& a, const snip::StatsRound& b) {
  expect_same_bits(a.globals, b.globals, "globals");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t l = 0; l < a.layers.size(); ++l) {
    const std::string& name = a.layers[l].name;
    expect_same_bits(a.layers[l].scalars, b.layers[l].scalars, name);
    ASSERT_EQ(a.layers[l].per_precision.size(), b.layers[l].per_precision.size()) << name;
    for (const auto& [p, pp] : a.layers[l].per_precision)
      expect_same_bits(pp, b.layers[l].per_precision.at(p), name + " " + p);
    ASSERT_EQ(a.layers[l].vectors.size(), b.layers[l].vectors.size()) << name;
    for (const auto& [key, xs] : a.layers[l].vectors) {
      const std::vector<float>& ys = b.layers[l].vectors.at(key);
      ASSERT_EQ(xs.size(), ys.size()) << name << " " << key;
      EXPECT_EQ(0, std::memcmp(xs.data(), ys.data(), xs.size() * sizeof(float))) << name << " " << key;
    }
  }
}

// The round's double sums on AVX-512 and on AVX2 (eight partials = the eight lanes of one
// AVX-512 vector or of two AVX vectors) give the bits of the scalar terms (AdamW::preview per
// element, the portable path), for every statistic; a round with weight decay, clipping and both
// candidate precisions (recipe snip). AVX2 and AVX-512, each forced where the CPU runs it.
TEST(StatsRound, VectorSumsGiveTheScalarTermsBits) {
  auto cfg = exptest::tiny_config("bf16", 6);
  snip::Trainer t(cfg);
  for (int s = 0; s < 3; ++s) t.step();
  snip::test::IsaGuard isa;
  int tiers = 0;
  for (snip::IsaTier tier : snip::test::runnable_tiers()) {
    if (tier != snip::IsaTier::avx2 && tier != snip::IsaTier::avx512) continue;  // the two kernel sets
    snip::set_isa_tier(tier);
    ASSERT_TRUE(snip::stats_sums::vector_sums()) << snip::isa_tier_name(tier);
    const snip::StatsRound vec = snip::collect_stats_round(t);
    snip::detail::set_stats_round_vector_sums(false);
    const snip::StatsRound scalar = snip::collect_stats_round(t);
    snip::detail::set_stats_round_vector_sums(true);
    SCOPED_TRACE(snip::isa_tier_name(tier));
    expect_same_round_bits(vec, scalar);
    for (const snip::LayerStats& ls : vec.layers) {
      EXPECT_GT(ls.scalars.at(k::kLayerUpdateNorm), 0) << ls.name;
      EXPECT_EQ(ls.vectors.size(), 2u) << ls.name;  // per-channel gains, column norms of X
    }
    ++tiers;
  }
  if (tiers == 0) GTEST_SKIP() << "no vector-sum tier on this CPU";
}

// A layer's residual maps, one per candidate precision, run concurrently on the shared pool give
// the bits they have run one after the other on the calling thread (OpenBLAS on one thread in
// both, as the round runs them, whatever this process's OpenBLAS thread count): every
// per-precision statistic, with the exact ΔW mode's upstream errors too (those run after the
// maps, on the same per-precision block gradients).
TEST(StatsRound, ConcurrentResidualMapsGiveTheSerialBits) {
  auto cfg = exptest::tiny_config("bf16", 6);
  snip::Trainer t(cfg);
  for (int s = 0; s < 3; ++s) t.step();
  snip::StatsRoundOptions o;
  o.exact_weight_divergence = true;
  ASSERT_GE(o.precisions.size(), 2u);
  const snip::StatsRound concurrent = snip::collect_stats_round(t, o);
  snip::detail::set_stats_round_concurrent_maps(false);
  const snip::StatsRound serial = snip::collect_stats_round(t, o);
  snip::detail::set_stats_round_concurrent_maps(true);
  expect_same_round_bits(concurrent, serial);
  for (const snip::LayerStats& ls : concurrent.layers) {
    ASSERT_EQ(ls.per_precision.size(), o.precisions.size()) << ls.name;
    for (const auto& [p, pp] : ls.per_precision) EXPECT_GT(pp.at(k::kPrecResidErrSq), 0) << ls.name << " " << p;
  }
}

// A round gives the same bits on one thread as on the shared pool (SNIP_NUM_THREADS=1 runs every
// pool loop on the calling thread): the noise passes' per-layer sums, drawn alongside the next
// pass's noise, the quantizer, the GEMMs and the concurrent residual maps (OpenBLAS on one thread
// in both, whose own thread count changes FP32 low bits).
TEST(StatsRound, SameBitsOnOneThreadAsOnThePool) {
  const snip::BlasSingleThreaded one_blas_thread;
  auto cfg = exptest::tiny_config("bf16", 6);
  snip::Trainer t(cfg);
  for (int s = 0; s < 3; ++s) t.step();
  snip::StatsRoundOptions o;
  o.exact_weight_divergence = true;
  const snip::StatsRound pooled = snip::collect_stats_round(t, o);
  const char* before = std::getenv("SNIP_NUM_THREADS");
  const std::string saved = before ? before : "";
  setenv("SNIP_NUM_THREADS", "1", 1);
  ASSERT_EQ(snip::pool_threads(), 1);
  const snip::StatsRound single = snip::collect_stats_round(t, o);
  if (before)
    setenv("SNIP_NUM_THREADS", saved.c_str(), 1);
  else
    unsetenv("SNIP_NUM_THREADS");
  expect_same_round_bits(pooled, single);
}

// The exact ΔW mode is recorded as raw statistics (one value per upstream layer), leaves every
// other statistic unchanged, survives the snip-stats/1 round trip, and a round without it
// cannot be estimated in exact mode.
TEST(StatsRound, ExactModeIsRecordedRawAndRecomputable) {
  auto cfg = exptest::tiny_config("bf16", 4);
  snip::Trainer t(cfg);
  for (int s = 0; s < 3; ++s) t.step();
  const snip::StatsRound plain = snip::collect_stats_round(t);
  snip::StatsRoundOptions o;
  o.exact_weight_divergence = true;
  const snip::StatsRound r = snip::collect_stats_round(t, o);
  EXPECT_FALSE(snip::has_exact_dw(plain));
  ASSERT_TRUE(snip::has_exact_dw(r));
  EXPECT_EQ(r.options.at("weight_divergence_mode"), "local+exact");
  // one key per upstream layer and precision, nothing else new
  for (size_t m = 0; m < r.layers.size(); ++m) {
    const snip::LayerId im{int(m) / 7, snip::LayerType(m % 7)};
    int upstream = 0;
    for (int l = 0; l < int(r.layers.size()); ++l) upstream += snip::is_upstream({l / 7, snip::LayerType(l % 7)}, im);
    for (const char* p : {"fp8", "fp4"}) {
      const auto& a = plain.layers[m].per_precision.at(p);
      const auto& b = r.layers[m].per_precision.at(p);
      EXPECT_EQ(b.size(), a.size() + size_t(upstream)) << r.layers[m].name;
      for (const auto& [key, val] : a) EXPECT_EQ(b.at(key), val) << r.layers[m].name << " " << key;
    }
  }
  snip::EstimatorOptions ex;
  ex.dw_mode = snip::DwMode::exact;
  EXPECT_THROW(snip::estimate_divergences(plain, ex), snip::Error);
  const snip::Estimates e_approx = snip::estimate_divergences(r), e_exact = snip::estimate_divergences(r, ex);
  const snip::Estimates e_json = snip::estimate_divergences(snip::stats_from_json(snip::stats_to_json(r)), ex);
  const int p4 = int(snip::Precision::fp4);
  std::vector<double> ratio;
  for (size_t m = 0; m < r.layers.size(); ++m) {
    EXPECT_EQ(e_exact.layers[m].dw_own[p4], e_approx.layers[m].dw_own[p4]);
    EXPECT_EQ(e_json.layers[m].dw[p4], e_exact.layers[m].dw[p4]);
    EXPECT_TRUE(std::isfinite(e_exact.layers[m].dw[p4]));
    if (m < 3)
      EXPECT_EQ(e_exact.layers[m].dw_upstream[p4], 0.0);  // q/k/v of block 0: nothing upstream
    else
      ratio.push_back(e_exact.layers[m].dw_upstream[p4] / e_approx.layers[m].dw_upstream[p4]);
  }
  // the two modes estimate the same quantity: the median ratio of their upstream terms is O(1)
  std::sort(ratio.begin(), ratio.end());
  const double median = ratio[ratio.size() / 2];
  std::printf("exact/approx upstream ΔW (fp4), median over layers: %.3f\n", median);
  EXPECT_GT(median, 0.25);
  EXPECT_LT(median, 4.0);
}

}  // namespace
