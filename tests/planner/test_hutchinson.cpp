// Hutchinson and antithetic curvature estimators on maps with exactly known answers
// (a linear map: ‖J‖_F²; a quadratic loss: c = tr(H)/(2·dim z)), within statistical bounds.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "snip/error.h"
#include "snip/hutchinson.h"

namespace snip {
namespace {

struct Matrix {
  int rows, cols;  // J: (rows, cols); Jᵀε maps R^rows -> R^cols
  std::vector<double> a;
};

Matrix random_matrix(int rows, int cols, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Matrix m{rows, cols, std::vector<double>(size_t(rows) * cols)};
  for (auto& x : m.a) x = u(rng);
  return m;
}

TEST(Hutchinson, RecoversFrobeniusNormOfLinearMapWithinStatisticalBound) {
  const Matrix J = random_matrix(6, 9, 1);
  auto apply_Jt = [&](const std::vector<double>& eps, std::vector<double>& out) {
    out.assign(J.cols, 0.0);
    for (int i = 0; i < J.rows; ++i)
      for (int j = 0; j < J.cols; ++j) out[j] += J.a[size_t(i) * J.cols + j] * eps[i];
  };
  double fro = 0;
  for (double x : J.a) fro += x * x;
  // Var ‖Jᵀε‖²/σ² = 2·‖J Jᵀ‖_F² for Gaussian probes.
  double jjt_fro = 0;
  for (int i = 0; i < J.rows; ++i)
    for (int k = 0; k < J.rows; ++k) {
      double s = 0;
      for (int j = 0; j < J.cols; ++j) s += J.a[size_t(i) * J.cols + j] * J.a[size_t(k) * J.cols + j];
      jjt_fro += s * s;
    }
  const int n = 4000;
  const double sd = std::sqrt(2.0 * jjt_fro / n);
  const double est = hutchinson_frobenius(apply_Jt, J.rows, n, 42, 0.37);
  EXPECT_NEAR(est, fro, 4 * sd) << "exact " << fro;
  EXPECT_NE(est, fro);  // it is an estimate
  // Deterministic by seed, and σ only scales the probes.
  EXPECT_EQ(est, hutchinson_frobenius(apply_Jt, J.rows, n, 42, 0.37));
  EXPECT_NEAR(hutchinson_frobenius(apply_Jt, J.rows, n, 42, 5.0), est, 1e-9 * est);
  // Three probes (the statistics round's count) are already in the right range.
  const double three = hutchinson_frobenius(apply_Jt, J.rows, 3, 7, 1.0);
  EXPECT_GT(three, 0.2 * fro);
  EXPECT_LT(three, 5.0 * fro);
}

TEST(Curvature, QuadraticLossGivesHalfTraceOverDim) {
  const int dim = 64;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> u(0.1, 2.0);
  std::vector<double> h(dim), b(dim), z(dim);
  double tr = 0;
  for (int i = 0; i < dim; ++i) {
    h[i] = u(rng);
    b[i] = 10 * u(rng);  // a large gradient: the antithetic pair must cancel it exactly
    z[i] = u(rng);
    tr += h[i];
  }
  const double offset = 1000.0;  // large L₀: FP64 differences must survive it
  auto loss = [&](const std::vector<double>& x) {
    double l = offset;
    for (int i = 0; i < dim; ++i) l += 0.5 * h[i] * x[i] * x[i] + b[i] * x[i];
    return l;
  };
  const double l0 = loss(z);
  const auto est = antithetic_curvature(loss, z, l0, 200, 1e-2, 5);
  // Each pair gives ηᵀHη exactly; mean ηᵀHη / (2·mean ‖η‖²) → tr(H)/(2·dim), ~1.5% spread here.
  EXPECT_NEAR(est.c, tr / (2.0 * dim), 0.05 * tr / (2.0 * dim));
  // METHOD.md section 4: c agrees within 5% between σ = 1e-2 and 3e-2.
  const auto wide = antithetic_curvature(loss, z, l0, 200, 3e-2, 5);
  EXPECT_NEAR(wide.c, est.c, 0.05 * est.c);
}

TEST(Curvature, LinearLossHasZeroCurvature) {
  std::vector<double> z(32, 0.5);
  auto loss = [](const std::vector<double>& x) {
    double l = 3.0;
    for (size_t i = 0; i < x.size(); ++i) l += (1.0 + i) * x[i];
    return l;
  };
  const auto est = antithetic_curvature(loss, z, loss(z), 3, 1e-3, 1);
  EXPECT_NEAR(est.c, 0.0, 1e-6);
}

TEST(Curvature, NonQuadraticLossAgreesAcrossNoiseScales) {
  // Log-sum-exp (softmax cross-entropy shape): c at σ = 1e-2 and 3e-2 within 5%.
  const int dim = 48;
  std::vector<double> z(dim);
  for (int i = 0; i < dim; ++i) z[i] = std::sin(0.7 * i);
  auto loss = [&](const std::vector<double>& x) {
    double mx = -1e300, s = 0;
    for (double v : x) mx = std::max(mx, v);
    for (double v : x) s += std::exp(v - mx);
    return mx + std::log(s) - x[3];
  };
  const double l0 = loss(z);
  const auto a = antithetic_curvature(loss, z, l0, 300, 1e-2, 9);
  const auto b = antithetic_curvature(loss, z, l0, 300, 3e-2, 9);
  EXPECT_GT(a.c, 0.0);
  EXPECT_NEAR(b.c, a.c, 0.05 * a.c);
}

TEST(Curvature, FromPairsValidatesInput) {
  EXPECT_THROW(curvature_from_pairs({}, {}, 0.0, {}), Error);
  EXPECT_THROW(curvature_from_pairs({1.0}, {1.0, 2.0}, 0.0, {1.0}), Error);
  EXPECT_THROW(curvature_from_pairs({1.0}, {1.0}, 0.0, {0.0}), Error);
  const auto c = curvature_from_pairs({1.5, 1.25}, {1.5, 1.75}, 1.0, {2.0, 2.0});
  EXPECT_DOUBLE_EQ(c.second_diff, 1.0);
  EXPECT_DOUBLE_EQ(c.c, 0.25);
}

// HAWQ-V3's Hessian trace per block, on f(x) = ½ xᵀAx + bᵀx (∇f = Ax + b, H = A, known exactly).
// Block-diagonal A with diagonal blocks: every Rademacher probe gives tr(A_b) exactly. With
// off-diagonal entries inside and across blocks the estimate is unbiased: within a statistical
// bound of the true traces over many probes.
TEST(Hutchinson, HessianBlockTracesOfAQuadraticAreItsBlockTraces) {
  const int64_t dim = 7;
  std::vector<double> A(size_t(dim * dim), 0.0), b(size_t(dim), 0.0);
  const double diag[7] = {2.0, 0.5, -1.0, 4.0, 3.0, 0.25, 9.0};
  for (int64_t i = 0; i < dim; ++i) A[size_t(i * dim + i)] = diag[i], b[size_t(i)] = 0.1 * double(i);
  const std::vector<float> x0 = {0.3f, -1.2f, 0.7f, 2.0f, -0.4f, 1.1f, 0.05f};
  auto make_grad = [&](const std::vector<double>& H) {
    return [&, H](const std::vector<float>& delta, std::vector<float>& g) {
      g.assign(size_t(dim), 0.0f);
      for (int64_t i = 0; i < dim; ++i) {
        double acc = b[size_t(i)];
        for (int64_t j = 0; j < dim; ++j) acc += H[size_t(i * dim + j)] * (double(x0[size_t(j)]) + delta[size_t(j)]);
        g[size_t(i)] = float(acc);
      }
    };
  };
  // blocks [0,3) and [3,6); element 6 is outside every block (never perturbed)
  const std::vector<HessianBlock> blocks = {{0, 3, 1e-2}, {3, 6, 5e-2}};
  const std::vector<double> exact = hessian_block_traces(make_grad(A), dim, blocks, 3, 11);
  ASSERT_EQ(exact.size(), 2u);
  EXPECT_NEAR(exact[0], 2.0 + 0.5 - 1.0, 1e-3);  // float gradients: a few ulps over 2ε
  EXPECT_NEAR(exact[1], 4.0 + 3.0 + 0.25, 1e-3);

  // couple everything (symmetric), the traces stay 1.5 and 7.25
  std::vector<double> C = A;
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < dim; ++i)
    for (int64_t j = i + 1; j < dim; ++j) C[size_t(i * dim + j)] = C[size_t(j * dim + i)] = u(rng);
  const int n = 4000;
  const std::vector<double> est = hessian_block_traces(make_grad(C), dim, blocks, n, 12);
  // per probe the error is Σ_{i≠j} v_i C_ij v_j over ≤ 6·5 pairs with |C_ij| ≤ 1: sd ≤ √(2·15) ≈ 5.5;
  // over n probes the sd of the mean is ≤ 0.09; 5 sd
  EXPECT_NEAR(est[0], 1.5, 0.45);
  EXPECT_NEAR(est[1], 7.25, 0.45);
  EXPECT_EQ(est, hessian_block_traces(make_grad(C), dim, blocks, n, 12));  // deterministic for a seed

  EXPECT_THROW(hessian_block_traces(make_grad(A), dim, blocks, 0, 1), Error);
  EXPECT_THROW(hessian_block_traces(make_grad(A), dim, {{5, 9, 1e-2}}, 1, 1), Error);
  EXPECT_THROW(hessian_block_traces(make_grad(A), dim, {{0, 2, 0.0}}, 1, 1), Error);
}

}  // namespace
}  // namespace snip
