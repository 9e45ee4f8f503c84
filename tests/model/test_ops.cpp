// Finite-difference gradient checks of every Llama op (double precision), against the
// backward functions the training path uses (llama_ops.h).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "snip/llama_ops.h"

namespace {

using Vec = std::vector<double>;
constexpr double kStep = 1e-6;    // central-difference step
constexpr double kRelTol = 1e-6;  // |analytic − numeric| ≤ kRelTol·(1 + |numeric|) per element

Vec randn(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, scale);
  Vec v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks d(⟨w, f(x)⟩)/dx against `analytic` by central differences on every element of x.
void check_grad(const char* what, Vec& x, const std::function<double()>& loss, const Vec& analytic) {
  ASSERT_EQ(x.size(), analytic.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + kStep;
    const double lp = loss();
    x[i] = keep - kStep;
    const double lm = loss();
    x[i] = keep;
    const double numeric = (lp - lm) / (2 * kStep);
    ASSERT_NEAR(analytic[i], numeric, kRelTol * (1 + std::fabs(numeric))) << what << " element " << i;
  }
}

TEST(OpsGrad, RmsNorm) {
  const int BT = 3, C = 8;
  const double eps = 1e-5;
  Vec x = randn(BT * C, 1), w = randn(C, 2), dy = randn(BT * C, 3);
  Vec y(BT * C), rstd(BT);
  auto loss = [&] {
    snip::ops::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), BT, C, eps);
    return dot(y, dy);
  };
  loss();
  Vec dx(BT * C, 0.0), dw(C, 0.0);
  snip::ops::rmsnorm_backward(dx.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), BT, C, false);
  check_grad("rmsnorm dx", x, loss, dx);
  check_grad("rmsnorm dw", w, loss, dw);
  // accumulate adds on top of what is there
  Vec dx2(BT * C, 1.0);
  snip::ops::rmsnorm_backward(dx2.data(), static_cast<double*>(nullptr), dy.data(), x.data(), w.data(), rstd.data(), BT,
                              C, true);
  for (int i = 0; i < BT * C; ++i) EXPECT_NEAR(dx2[i], dx[i] + 1.0, 1e-12);
}

TEST(OpsGrad, Rope) {
  const int B = 2, T = 5, H = 3, HD = 8;
  Vec cs(T * HD / 2), sn(T * HD / 2);
  snip::ops::rope_table(cs.data(), sn.data(), T, HD, 10000.0);
  Vec x = randn(B * T * H * HD, 4), dy = randn(x.size(), 5), y(x.size());
  auto loss = [&] {
    snip::ops::rope_forward(y.data(), x.data(), cs.data(), sn.data(), B, T, H, HD);
    return dot(y, dy);
  };
  loss();
  Vec dx(x.size());
  snip::ops::rope_backward(dx.data(), dy.data(), cs.data(), sn.data(), B, T, H, HD);
  check_grad("rope dx", x, loss, dx);
  // position 0 is the identity; a rotation keeps each pair's norm
  for (int i = 0; i < H * HD; ++i) EXPECT_DOUBLE_EQ(y[i], x[i]);
  for (int i = 0; i < HD / 2; ++i) {
    const size_t o = (size_t(1) * H) * HD;  // row t=1, head 0
    const double n0 = x[o + i] * x[o + i] + x[o + i + HD / 2] * x[o + i + HD / 2];
    const double n1 = y[o + i] * y[o + i] + y[o + i + HD / 2] * y[o + i + HD / 2];
    EXPECT_NEAR(n0, n1, 1e-12);
  }
}

// An attention forward/backward pair in double: the fast path or its reference twin.
using AttentionForward = void (*)(double*, double*, const double*, const double*, const double*, int, int, int, int,
                                  int);
using AttentionBackward = void (*)(double*, double*, double*, const double*, const double*, const double*,
                                   const double*, const double*, int, int, int, int, int);

// Causal, normalised probabilities and gradients that match finite differences (GQA shape).
void check_attention(const std::string& what, AttentionForward forward, AttentionBackward backward, uint64_t seed) {
  const int B = 2, T = 5, NH = 4, KVH = 2, HD = 4;
  Vec q = randn(B * T * NH * HD, seed), k = randn(B * T * KVH * HD, seed + 1), v = randn(B * T * KVH * HD, seed + 2);
  Vec dout = randn(q.size(), seed + 3), out(q.size()), probs(size_t(B) * NH * T * T);
  auto loss = [&] {
    forward(out.data(), probs.data(), q.data(), k.data(), v.data(), B, T, NH, KVH, HD);
    return dot(out, dout);
  };
  loss();
  // causal: row t of every head sums to 1 with zeros above the diagonal
  for (int bh = 0; bh < B * NH; ++bh)
    for (int t = 0; t < T; ++t) {
      double s = 0;
      for (int u = 0; u < T; ++u) {
        const double p = probs[(size_t(bh) * T + t) * T + u];
        if (u > t) {
          EXPECT_EQ(p, 0.0) << what;
        }
        s += p;
      }
      EXPECT_NEAR(s, 1.0, 1e-12) << what;
    }
  Vec dq(q.size()), dk(k.size()), dv(v.size());
  backward(dq.data(), dk.data(), dv.data(), dout.data(), probs.data(), q.data(), k.data(), v.data(), B, T, NH, KVH, HD);
  check_grad((what + " dq").c_str(), q, loss, dq);
  check_grad((what + " dk").c_str(), k, loss, dk);
  check_grad((what + " dv").c_str(), v, loss, dv);
}

TEST(OpsGrad, AttentionGqa) {
  check_attention("attention", snip::ops::attention_forward<double>, snip::ops::attention_backward<double>, 6);
}

// The reference twins are the fast path's oracle, so they are checked against mathematics too.
TEST(OpsGrad, AttentionReferenceGqa) {
  check_attention("attention_ref", snip::ops::attention_forward_ref<double>, snip::ops::attention_backward_ref<double>,
                  16);
}

TEST(OpsFast, AttentionMatchesScalarReference) {
  constexpr double kTol = 2e-6;  // float: blocked cblas GEMMs vs Eigen's whole-matrix products
  const int B = 2, T = 19, NH = 6, KVH = 2, HD = 8;
  std::mt19937_64 rng(16);
  std::normal_distribution<float> nd(0.f, 1.f);
  auto rnd = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
  };
  auto q = rnd(size_t(B) * T * NH * HD), k = rnd(size_t(B) * T * KVH * HD), v = rnd(k.size()), dout = rnd(q.size());
  std::vector<float> o1(q.size()), o2(q.size()), p1(size_t(B) * NH * T * T), p2(p1.size());
  std::vector<float> dq1(q.size()), dq2(q.size()), dk1(k.size()), dk2(k.size()), dv1(v.size()), dv2(v.size());
  snip::ops::attention_forward(o1.data(), p1.data(), q.data(), k.data(), v.data(), B, T, NH, KVH, HD);
  snip::ops::attention_forward_ref(o2.data(), p2.data(), q.data(), k.data(), v.data(), B, T, NH, KVH, HD);
  for (size_t i = 0; i < p1.size(); ++i) ASSERT_NEAR(p1[i], p2[i], kTol) << "probs " << i;
  for (size_t i = 0; i < o1.size(); ++i) ASSERT_NEAR(o1[i], o2[i], kTol) << "out " << i;
  snip::ops::attention_backward(dq1.data(), dk1.data(), dv1.data(), dout.data(), p1.data(), q.data(), k.data(),
                                v.data(), B, T, NH, KVH, HD);
  snip::ops::attention_backward_ref(dq2.data(), dk2.data(), dv2.data(), dout.data(), p1.data(), q.data(), k.data(),
                                    v.data(), B, T, NH, KVH, HD);
  for (size_t i = 0; i < dq1.size(); ++i) ASSERT_NEAR(dq1[i], dq2[i], 4 * kTol) << "dq " << i;
  for (size_t i = 0; i < dk1.size(); ++i) ASSERT_NEAR(dk1[i], dk2[i], 4 * kTol) << "dk " << i;
  for (size_t i = 0; i < dv1.size(); ++i) ASSERT_NEAR(dv1[i], dv2[i], 4 * kTol) << "dv " << i;
}

TEST(OpsGrad, SwiGlu) {
  const int n = 20;
  Vec g = randn(n, 10, 2.0), u = randn(n, 11), dh = randn(n, 12), h(n);
  auto loss = [&] {
    snip::ops::swiglu_forward(h.data(), g.data(), u.data(), n);
    return dot(h, dh);
  };
  loss();
  Vec dg(n), du(n);
  snip::ops::swiglu_backward(dg.data(), du.data(), dh.data(), g.data(), u.data(), n);
  check_grad("swiglu dg", g, loss, dg);
  check_grad("swiglu du", u, loss, du);
}

TEST(OpsGrad, CrossEntropy) {
  const int BT = 4, V = 7;
  Vec z = randn(BT * V, 13, 3.0), probs(z.size()), losses(BT);
  std::vector<int32_t> tgt = {0, 3, 6, 3};
  auto loss = [&] { return snip::ops::crossentropy_forward(probs.data(), losses.data(), z.data(), tgt.data(), BT, V); };
  const double l0 = loss();
  // against a direct evaluation of −log softmax
  double ref = 0;
  for (int bt = 0; bt < BT; ++bt) {
    double s = 0;
    for (int i = 0; i < V; ++i) s += std::exp(z[bt * V + i]);
    ref += std::log(s) - z[bt * V + tgt[bt]];
  }
  EXPECT_NEAR(l0, ref / BT, 1e-12);
  Vec dz(z.size());
  snip::ops::crossentropy_backward(dz.data(), probs.data(), tgt.data(), BT, V, 1.0 / BT);
  check_grad("crossentropy dlogits", z, loss, dz);
}

TEST(OpsGrad, Embedding) {
  const int V = 5, C = 3, BT = 6;
  Vec wte = randn(V * C, 14), dout = randn(BT * C, 15), out(BT * C);
  std::vector<int32_t> tok = {1, 4, 1, 0, 2, 4};
  auto loss = [&] {
    snip::ops::embedding_forward(out.data(), tok.data(), wte.data(), BT, C);
    return dot(out, dout);
  };
  loss();
  Vec dw(wte.size(), 0.0);
  snip::ops::embedding_backward(dw.data(), dout.data(), tok.data(), BT, C);
  check_grad("embedding dwte", wte, loss, dw);
  for (int c = 0; c < C; ++c) EXPECT_EQ(dw[3 * C + c], 0.0);  // token 3 never appears
}

}  // namespace
