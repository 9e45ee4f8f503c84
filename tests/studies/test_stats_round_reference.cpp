// The statistics round runs its local residual maps on the model's own block backward
// (Llama::attention_half_backward / mlp_half_backward, on the forward's cached activations) and
// its AdamW linearization on the optimizer's preview (AdamW::preview). This file keeps the
// round's earlier, self-contained derivation of both as a reference path -- the maps recomputed
// the norms' rstd, RoPE and the attention probabilities from the cached inputs and ran their own
// FP32 dgrads and norm backwards; AdamW and the clip factor were re-derived inline -- and checks
// that the round gives the same raw statistics and the same SNIP costs, and still leaves the
// training state and trajectory bit-identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "exp_test_util.h"
#include "snip/blas_threads.h"
#include "snip/estimator.h"
#include "snip/llama_ops.h"
#include "snip/qlinear.h"
#include "snip/stats_keys.h"
#include "snip/stats_round.h"

namespace {

namespace k = snip::keys;
using Buf = std::vector<float>;

double sum_sq(const float* a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(a[i]);
  return s;
}

// The earlier LocalBackward (resid_err_sq only): per block, the forward quantities recomputed.
class ReferenceLocalMaps {
 public:
  ReferenceLocalMaps(const snip::Llama& m, int b) : m_(m), b_(b) {
    const snip::ModelConfig& c = m.config();
    B_ = m.batch_size(), T_ = m.seq_len(), BT_ = int64_t(B_) * T_;
    C_ = c.hidden_size, F_ = c.intermediate_size, NH_ = c.num_attention_heads, KVH_ = c.num_key_value_heads;
    HD_ = c.head_dim(), QD_ = int64_t(NH_) * HD_, KD_ = int64_t(KVH_) * HD_;
    const auto& p = m.params();
    rstd1_.resize(size_t(BT_)), rstd2_.resize(size_t(BT_));
    Buf ln(size_t(BT_ * C_));
    snip::ops::rmsnorm_forward(ln.data(), rstd1_.data(), m.residual(b), p.attn_norm + b * C_, BT_, int(C_),
                               c.rms_norm_eps);
    snip::ops::rmsnorm_forward(ln.data(), rstd2_.data(), m.residual_mid(b), p.mlp_norm + b * C_, BT_, int(C_),
                               c.rms_norm_eps);
    cos_.resize(size_t(T_ * HD_ / 2)), sin_.resize(cos_.size());
    snip::ops::rope_table(cos_.data(), sin_.data(), T_, HD_, c.rope_theta);
    q_rot_.resize(size_t(BT_ * QD_)), k_rot_.resize(size_t(BT_ * KD_));
    snip::ops::rope_forward(q_rot_.data(), m.linear(b * snip::kLayersPerBlock + 0).Y, cos_.data(), sin_.data(), B_, T_,
                            NH_, HD_);
    snip::ops::rope_forward(k_rot_.data(), m.linear(b * snip::kLayersPerBlock + 1).Y, cos_.data(), sin_.data(), B_, T_,
                            KVH_, HD_);
    Buf att(size_t(BT_ * QD_));
    probs_.resize(size_t(B_) * NH_ * T_ * T_);
    snip::ops::attention_forward(att.data(), probs_.data(), q_rot_.data(), k_rot_.data(),
                                 m.linear(b * snip::kLayersPerBlock + 2).Y, B_, T_, NH_, KVH_, HD_);
  }

  // ‖δr‖² of layer type t's dgrad error; sibling ‖δG‖² by short name into *sib
  double resid_err_sq(int t, const float* ddx, std::map<std::string, double>* sib) const {
    const auto& p = m_.params();
    if (t == 0 || t == 1 || t == 2) return norm_back(ddx, false);
    if (t == 4 || t == 5) return norm_back(ddx, true);
    if (t == 3) {
      Buf dq_rot(size_t(BT_ * QD_)), dk_rot(size_t(BT_ * KD_)), dq(dq_rot.size()), dk(dk_rot.size()), dv(dk_rot.size());
      snip::ops::attention_backward(dq_rot.data(), dk_rot.data(), dv.data(), ddx, probs_.data(), q_rot_.data(),
                                    k_rot_.data(), m_.linear(b_ * snip::kLayersPerBlock + 2).Y, B_, T_, NH_, KVH_, HD_);
      snip::ops::rope_backward(dq.data(), dq_rot.data(), cos_.data(), sin_.data(), B_, T_, NH_, HD_);
      snip::ops::rope_backward(dk.data(), dk_rot.data(), cos_.data(), sin_.data(), B_, T_, KVH_, HD_);
      (*sib)["q"] = sum_sq(dq.data(), BT_ * QD_), (*sib)["k"] = sum_sq(dk.data(), BT_ * KD_);
      (*sib)["v"] = sum_sq(dv.data(), BT_ * KD_);
      const Buf dln = dgrad_sum({{dq.data(), p.wq + b_ * QD_ * C_, QD_},
                                 {dk.data(), p.wk + b_ * KD_ * C_, KD_},
                                 {dv.data(), p.wv + b_ * KD_ * C_, KD_}});
      return norm_back(dln.data(), false);
    }
    Buf dg(size_t(BT_ * F_)), du(dg.size());
    snip::ops::swiglu_backward(dg.data(), du.data(), ddx, m_.linear(b_ * snip::kLayersPerBlock + 4).Y,
                               m_.linear(b_ * snip::kLayersPerBlock + 5).Y, BT_ * F_);
    (*sib)["gate"] = sum_sq(dg.data(), BT_ * F_), (*sib)["up"] = sum_sq(du.data(), BT_ * F_);
    const Buf dln = dgrad_sum({{dg.data(), p.wgate + b_ * F_ * C_, F_}, {du.data(), p.wup + b_ * F_ * C_, F_}});
    return norm_back(dln.data(), true);
  }

 private:
  struct Term {
    const float* dy;
    const float* W;
    int64_t N;
  };
  Buf dgrad_sum(std::initializer_list<Term> terms) const {
    snip::Recipe recipe;
    snip::QLinearContext ctx;
    ctx.recipe = &recipe;
    Buf dln(size_t(BT_ * C_), 0.0f), tmp(dln.size());
    for (const Term& t : terms) {
      snip::qlinear_dgrad(tmp.data(), t.dy, t.W, BT_, C_, t.N, snip::Precision::fp32, ctx);
      for (size_t i = 0; i < dln.size(); ++i) dln[i] += tmp[i];
    }
    return dln;
  }
  double norm_back(const float* dy, bool mid) const {
    const auto& p = m_.params();
    Buf dr(size_t(BT_ * C_));
    snip::ops::rmsnorm_backward(dr.data(), static_cast<float*>(nullptr), dy,
                                mid ? m_.residual_mid(b_) : m_.residual(b_), (mid ? p.mlp_norm : p.attn_norm) + b_ * C_,
                                mid ? rstd2_.data() : rstd1_.data(), BT_, int(C_), false);
    return sum_sq(dr.data(), BT_ * C_);
  }

  const snip::Llama& m_;
  int b_, B_, T_, NH_, KVH_, HD_;
  int64_t BT_, C_, F_, QD_, KD_;
  Buf rstd1_, rstd2_, cos_, sin_, q_rot_, k_rot_, probs_;
};

// The earlier inline AdamW linearization of the next step t+1 for one layer: the clip factor as
// clip_grad_global_norm computes it, per element w = 1/(√v̂'+ε)² and the update u. Writes the
// layer's adam_a, adam_a_gain and update_norm and returns w (for the own-update term).
std::vector<double> reference_adam(std::map<std::string, double>& sc, const snip::LinearView<float>& v,
                                   snip::Trainer& t, const snip::StatsRound& r) {
  const snip::AdamW<float>& opt = t.optimizer();
  const snip::AdamWConfig& ac = opt.config();
  const double lr = r.globals.at(k::kGlobalLearningRate);
  const double t1 = double(opt.t() + 1), bc1 = 1 - std::pow(ac.beta1, t1), bc2 = 1 - std::pow(ac.beta2, t1);
  const double gnorm = std::sqrt(sum_sq(t.model().grad_data(), t.model().num_params()));
  const double clip = t.config().grad_clip;
  const double s = (clip > 0 && clip / (gnorm + 1e-6) < 1) ? clip / (gnorm + 1e-6) : 1.0;
  const snip::ParamTensor* pt = t.model().find_param(v.name + ".weight");
  const float* m0 = opt.m() + pt->offset;
  const float* v0 = opt.v() + pt->offset;
  std::vector<double> xcol(size_t(v.K), 0.0), w(size_t(v.N * v.K));
  for (int64_t row = 0; row < v.rows; ++row)
    for (int64_t c = 0; c < v.K; ++c) xcol[size_t(c)] += double(v.X[row * v.K + c]) * double(v.X[row * v.K + c]);
  const auto& gam = r.layers[size_t(v.index)].vectors.at(k::kVectorGainY);
  double a_sum = 0, a_gain = 0, u_sq = 0, gam_sum = 0, x_sum = 0;
  for (double x : xcol) x_sum += x;
  for (double g : gam) gam_sum += g;
  for (int64_t i = 0; i < v.N; ++i)
    for (int64_t j = 0; j < v.K; ++j) {
      const int64_t e = i * v.K + j;
      const double g = s * double(v.dW[e]);
      const double m1 = ac.beta1 * m0[e] + (1 - ac.beta1) * g, v1 = ac.beta2 * v0[e] + (1 - ac.beta2) * g * g;
      const double denom = std::sqrt(v1 / bc2) + ac.eps, we = 1.0 / (denom * denom);
      w[size_t(e)] = we, a_sum += we, a_gain += gam[size_t(i)] * xcol[size_t(j)] * we;
      const double u = lr * ac.weight_decay * double(v.W[e]) + lr / bc1 * m1 / denom;
      u_sq += u * u;
    }
  sc[k::kLayerAdamA] = a_sum / double(v.N * v.K);
  sc[k::kLayerAdamAGain] = gam_sum > 0 && x_sum > 0 ? a_gain / (gam_sum * x_sum) : a_sum / double(v.N * v.K);
  sc[k::kLayerUpdateNorm] = std::sqrt(u_sq);
  return w;
}

// |a − b| ≤ tol·|b| per element, for every precision and estimator output
void expect_close(const snip::PerPrecision& a, const snip::PerPrecision& b, double tol, const std::string& what) {
  for (snip::Precision p : {snip::Precision::fp8, snip::Precision::fp4}) {
    const double x = a[int(p)], y = b[int(p)];
    EXPECT_LE(std::abs(x - y), tol * std::abs(y)) << what << " " << snip::precision_name(p) << ": " << x << " vs " << y;
  }
}

// The reference path run on the model state the round leaves behind (its clean BF16 pass with
// every intermediate kept): the round's statistics with the moved quantities replaced.
snip::StatsRound reference_round(snip::Trainer& t, const snip::StatsRound& r) {
  snip::StatsRound ref = r;
  const snip::Llama& m = t.model();
  const snip::Recipe& recipe = m.recipe();
  const uint64_t seed = snip::StatsRoundOptions{}.seed;
  for (int b = 0; b < m.config().num_hidden_layers; ++b) {
    const ReferenceLocalMaps maps(m, b);
    for (int type = 0; type < 7; ++type) {
      const int li = b * snip::kLayersPerBlock + type;
      const snip::LinearView<float> v = m.linear(li);
      snip::LayerStats& ls = ref.layers[size_t(li)];
      const std::vector<double> w = reference_adam(ls.scalars, v, t, r);
      snip::QLinearContext ctx{&recipe, seed, uint64_t(r.step), uint32_t(li), v.name.c_str()};
      for (snip::Precision p : {snip::Precision::fp8, snip::Precision::fp4}) {
        auto& pp = ls.per_precision.at(snip::precision_name(p));
        Buf dx(size_t(v.rows * v.K)), dw(size_t(v.N * v.K));
        snip::qlinear_dgrad(dx.data(), v.dY, v.W, v.rows, v.K, v.N, p, ctx);
        snip::qlinear_wgrad(dw.data(), v.dY, v.X, v.rows, v.K, v.N, p, ctx);
        for (size_t e = 0; e < dx.size(); ++e) dx[e] -= v.dX[e];
        double own = 0;
        for (size_t e = 0; e < dw.size(); ++e) {
          const double d = double(dw[e]) - double(v.dW[e]);
          own += d * d * w[e];
        }
        pp[k::kPrecOwnUpdateSq] = own;
        std::map<std::string, double> sib;
        const snip::BlasSingleThreaded one_blas_thread;  // as the round runs its maps
        pp[k::kPrecResidErrSq] = maps.resid_err_sq(type, dx.data(), &sib);
        for (const auto& [name, val] : sib) pp[k::sibling_dg_sq_key(name.c_str())] = val;
      }
    }
  }
  return ref;
}

// Same parameters, AdamW moments and t, bit for bit.
void expect_same_state(snip::Trainer& a, snip::Trainer& b) {
  const size_t n = size_t(a.model().num_params());
  EXPECT_EQ(0, std::memcmp(a.model().param_data(), b.model().param_data(), sizeof(float) * n));
  EXPECT_EQ(0, std::memcmp(a.optimizer().m(), b.optimizer().m(), sizeof(float) * n));
  EXPECT_EQ(0, std::memcmp(a.optimizer().v(), b.optimizer().v(), sizeof(float) * n));
  EXPECT_EQ(a.optimizer().t(), b.optimizer().t());
}

// Tolerances, relative. The two paths run the same float operations on the same inputs: the cached
// rstd, RoPE'd q/k and attention probabilities are the bits the reference recomputes, the FP32
// dgrads are the same sgemm calls (OpenBLAS on one thread in both), the dgrad sum (a+b)+c equals
// the reference's ((0+a)+b)+c, and the optimizer's preview evaluates the reference's double
// expressions in the same order. So the maps, the own-update term, a and ‖u‖ get 1e-12 (double
// rounding only). adam_a_gain weights each element by the channel gain γ_i, which the reference can
// only read back from the round's recorded vector, stored as float: each γ_i is off by ≤ 2^-24 ≈
// 6e-8 relative, so a positive weighted mean of them is too; adam_a_gain, and ΔW and Q through it,
// get 2e-7. A real change of the maps or of the AdamW linearization (a wrong norm backward, a
// missing clip factor or bias correction) moves them by more than 1e-3.
constexpr double kTolExact = 1e-12, kTolGain = 2e-7;

TEST(StatsRoundReference, ModelBlockBackwardAndOptimizerPreviewGiveTheEarlierCosts) {
  auto cfg = exptest::tiny_config("fp8", 8);
  cfg.grad_clip = 0.05;  // the clip factor must be active (s < 1) to be checked
  snip::Trainer t(cfg), twin(cfg);
  for (int s = 0; s < 3; ++s) t.step(), twin.step();
  const snip::StatsRound r = snip::collect_stats_round(t);
  ASSERT_LT(r.globals.at("grad_clip_scale"), 1.0);
  expect_same_state(t, twin);  // the round changed no training state
  // the reference needs the round's clean pass with every intermediate kept
  t.model().set_retain_intermediates(true);
  const snip::StatsRound r2 = snip::collect_stats_round(t);
  const snip::StatsRound ref = reference_round(t, r2);
  for (size_t l = 0; l < r2.layers.size(); ++l) {
    const std::string& name = r2.layers[l].name;
    for (const char* key : {k::kLayerAdamA, k::kLayerAdamAGain, k::kLayerUpdateNorm}) {
      const double tol = std::string(key) == k::kLayerAdamAGain ? kTolGain : kTolExact;
      EXPECT_NEAR(r2.layers[l].scalars.at(key), ref.layers[l].scalars.at(key),
                  tol * std::abs(ref.layers[l].scalars.at(key)))
          << name << " " << key;
    }
    for (const auto& [prec, pp] : ref.layers[l].per_precision)
      for (const auto& [key, val] : pp)
        EXPECT_NEAR(r2.layers[l].per_precision.at(prec).at(key), val, kTolExact * std::abs(val))
            << name << " " << prec << " " << key;
  }
  const snip::Estimates e = snip::estimate_divergences(r2), e_ref = snip::estimate_divergences(ref);
  ASSERT_EQ(e.layers.size(), e_ref.layers.size());
  for (size_t l = 0; l < e.layers.size(); ++l) {
    expect_close(e.layers[l].dl, e_ref.layers[l].dl, kTolExact, e.layers[l].name + " ΔL");
    expect_close(e.layers[l].dw, e_ref.layers[l].dw, kTolGain, e.layers[l].name + " ΔW");
    expect_close(e.layers[l].q, e_ref.layers[l].q, kTolGain, e.layers[l].name + " Q");
  }
  // the first round (retention off) measured the same costs as the second
  const snip::Estimates e1 = snip::estimate_divergences(r);
  for (size_t l = 0; l < e.layers.size(); ++l) expect_close(e1.layers[l].q, e.layers[l].q, 0.0, e.layers[l].name);
  // and the trajectory goes on bit-identical
  t.model().set_retain_intermediates(false);
  for (int s = 0; s < 3; ++s) EXPECT_EQ(t.step().train_loss, twin.step().train_loss);
  expect_same_state(t, twin);
}

}  // namespace
