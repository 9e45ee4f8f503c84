// The vectorized exp and SiLU kernels of the float model path (engine/model/src/fast_math.h)
// against double-precision std::exp: ulp error over the whole float range, the edges
// (underflow to 0, overflow to inf, NaN passes through) and SiLU forward/backward.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "fast_math.h"

namespace {

// Distance in units in the last place between two finite floats of the same sign.
int64_t ulps(float a, float b) {
  return std::abs(int64_t(std::bit_cast<int32_t>(a)) - int64_t(std::bit_cast<int32_t>(b)));
}

TEST(FastMath, ExpWithinTwoUlpOverTheNormalRange) {
  std::vector<float> x;
  for (float v = -87.0f; v <= 88.0f; v += 0.00137f) x.push_back(v);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> small(-1e-3f, 1e-3f);
  for (int i = 0; i < 10000; ++i) x.push_back(small(rng));
  x.push_back(0.0f);
  std::vector<float> y(x.size());
  snip::ops::fast::exp_shifted(y.data(), x.data(), int64_t(x.size()), 0.0f);
  int64_t worst = 0;
  float at = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = float(std::exp(double(x[i])));
    if (!std::isnormal(want)) continue;
    const int64_t u = ulps(y[i], want);
    if (u > worst) worst = u, at = x[i];
  }
  EXPECT_LE(worst, 2) << "at x = " << at;
  EXPECT_EQ(y[x.size() - 1], 1.0f);  // exp(0) exactly
}

TEST(FastMath, ExpEdges) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-inf, -1000.0f, -87.5f, 89.0f, 1000.0f, inf, nan, 3.0f};
  std::vector<float> y(x.size());
  snip::ops::fast::exp_shifted(y.data(), x.data(), int64_t(x.size()), 0.0f);
  EXPECT_EQ(y[0], 0.0f);
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[2], 0.0f);
  EXPECT_EQ(y[3], inf);
  EXPECT_EQ(y[4], inf);
  EXPECT_EQ(y[5], inf);
  EXPECT_TRUE(std::isnan(y[6])) << "a NaN must never turn into a number";
  EXPECT_NEAR(y[7], std::exp(3.0), 2e-6);
  // The shift: exp(x - 3) in place.
  std::vector<float> z = {3.0f, 4.0f};
  snip::ops::fast::exp_shifted(z.data(), z.data(), 2, 3.0f);
  EXPECT_EQ(z[0], 1.0f);
  EXPECT_NEAR(z[1], std::exp(1.0), 1e-6);
}

TEST(FastMath, SiluForwardAndBackwardMatchDouble) {
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 4.0f);
  const int n = 4099;  // not a multiple of any vector width
  std::vector<float> g(n), u(n), dh(n), h(n), dg(n), du(n);
  for (int i = 0; i < n; ++i) g[size_t(i)] = d(rng), u[size_t(i)] = d(rng), dh[size_t(i)] = d(rng);
  g[0] = -120.0f, g[1] = 120.0f;  // exp overflow / underflow inside the sigmoid
  snip::ops::fast::silu_mul(h.data(), g.data(), u.data(), n);
  snip::ops::fast::silu_mul_backward(dg.data(), du.data(), dh.data(), g.data(), u.data(), n);
  double worst_h = 0, worst_dg = 0, worst_du = 0;
  for (size_t i = 0; i < size_t(n); ++i) {
    const double G = g[i], U = u[i], DH = dh[i];
    const double s = 1.0 / (1.0 + std::exp(-G));
    const double H = G * s * U, DU = DH * G * s, DG = DH * U * s * (1.0 + G * (1.0 - s));
    auto rel = [](double got, double want) { return std::fabs(got - want) / std::max(1e-6, std::fabs(want)); };
    worst_h = std::max(worst_h, rel(h[i], H));
    worst_du = std::max(worst_du, rel(du[i], DU));
    worst_dg = std::max(worst_dg, rel(dg[i], DG));
  }
  EXPECT_LT(worst_h, 1e-5);
  EXPECT_LT(worst_du, 1e-5);
  EXPECT_LT(worst_dg, 1e-4);
  EXPECT_EQ(h[0], -0.0f);  // silu(-120) underflows to (negative) zero
  EXPECT_FLOAT_EQ(h[1], 120.0f * u[1]);
  std::vector<float> gn = {std::numeric_limits<float>::quiet_NaN()}, un = {1.0f}, hn(1);
  snip::ops::fast::silu_mul(hn.data(), gn.data(), un.data(), 1);
  EXPECT_TRUE(std::isnan(hn[0]));
}

}  // namespace
