// Hutchinson Frobenius-norm and antithetic curvature estimators (METHOD.md section 4), in FP64.
#include "snip/hutchinson.h"

#include <Eigen/Core>
#include <cmath>
#include <random>

#include "snip/error.h"

namespace snip {

namespace {

// Standard normal samples from mt19937_64 by Box–Muller, written out so a seed gives the same
// numbers on every standard library (std::normal_distribution is implementation-defined).
class Gaussian {
 public:
  explicit Gaussian(uint64_t seed) : rng_(seed) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    // u1 in (0, 1]: 53 random bits, shifted away from 0 so log(u1) is finite.
    const double u1 = (double(rng_() >> 11) + 1.0) * 0x1.0p-53;
    const double u2 = double(rng_() >> 11) * 0x1.0p-53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::mt19937_64 rng_;
  double spare_ = 0;
  bool has_spare_ = false;
};

}  // namespace

double hutchinson_frobenius(const ApplyJt& apply_Jt, int64_t dim, int n, uint64_t seed, double sigma) {
  if (n < 1 || dim < 1 || !(sigma > 0)) throw Error("hutchinson_frobenius: needs n ≥ 1 probes, dim ≥ 1 and σ > 0");
  Gaussian gauss(seed);
  std::vector<double> eps(static_cast<size_t>(dim)), out;
  double sum = 0;
  for (int j = 0; j < n; ++j) {
    for (auto& e : eps) e = sigma * gauss.next();
    out.clear();
    apply_Jt(eps, out);
    sum += Eigen::Map<const Eigen::VectorXd>(out.data(), Eigen::Index(out.size())).squaredNorm();
  }
  // E‖Jᵀε‖² = σ²·tr(J Jᵀ) = σ²·‖J‖_F²
  return hutchinson_from_raw(sum / n, sigma);
}

std::vector<double> hessian_block_traces(const GradAt& grad_at, int64_t dim, const std::vector<HessianBlock>& blocks,
                                         int n, uint64_t seed) {
  if (n < 1) throw Error("Hessian trace: needs n ≥ 1 probes");
  for (const HessianBlock& b : blocks)
    if (b.begin < 0 || b.end <= b.begin || b.end > dim || !(b.eps > 0))
      throw Error("Hessian trace: block [" + std::to_string(b.begin) + ", " + std::to_string(b.end) +
                  ") is empty, outside the " + std::to_string(dim) + " parameters, or has ε ≤ 0");
  std::mt19937_64 rng(seed);
  std::vector<float> delta(size_t(dim), 0.0f), g_plus, g_minus;
  std::vector<int8_t> sign(size_t(dim), 0);
  std::vector<double> trace(blocks.size(), 0.0);
  for (int j = 0; j < n; ++j) {
    for (const HessianBlock& b : blocks)
      for (int64_t i = b.begin; i < b.end; ++i) sign[size_t(i)] = (rng() >> 63) ? 1 : -1;
    // the step actually applied is the float value ±ε·v (ε is exact in float up to rounding of ε itself)
    for (int s : {1, -1}) {
      for (const HessianBlock& b : blocks)
        for (int64_t i = b.begin; i < b.end; ++i) delta[size_t(i)] = float(s * b.eps * sign[size_t(i)]);
      grad_at(delta, s > 0 ? g_plus : g_minus);
    }
    if (int64_t(g_plus.size()) != dim || int64_t(g_minus.size()) != dim)
      throw Error("Hessian trace: the gradient callback returned the wrong dimension");
    for (size_t k = 0; k < blocks.size(); ++k) {
      const HessianBlock& b = blocks[k];
      const double step = double(float(b.eps));
      // vᵀ(g₊ − g₋) over the block: the directional difference of the gradient along the probe v
      const Eigen::Index len = b.end - b.begin;
      const auto v = Eigen::Map<const Eigen::Array<int8_t, Eigen::Dynamic, 1>>(sign.data() + b.begin, len);
      const auto gp = Eigen::Map<const Eigen::ArrayXf>(g_plus.data() + b.begin, len);
      const auto gm = Eigen::Map<const Eigen::ArrayXf>(g_minus.data() + b.begin, len);
      const double acc = (v.cast<double>() * (gp.cast<double>() - gm.cast<double>())).sum();
      trace[k] += acc / (2.0 * step) / n;
    }
  }
  return trace;
}

CurvatureEstimate curvature_from_pairs(const std::vector<double>& loss_plus, const std::vector<double>& loss_minus,
                                       double loss0, const std::vector<double>& eta_sq) {
  if (loss_plus.empty() || loss_plus.size() != loss_minus.size() || loss_plus.size() != eta_sq.size())
    throw Error("curvature: needs the same positive number of L(z+η), L(z−η) and ‖η‖² values (got " +
                std::to_string(loss_plus.size()) + ", " + std::to_string(loss_minus.size()) + ", " +
                std::to_string(eta_sq.size()) + ")");
  const Eigen::Index n = Eigen::Index(loss_plus.size());
  const auto Lp = Eigen::Map<const Eigen::ArrayXd>(loss_plus.data(), n);
  const auto Lm = Eigen::Map<const Eigen::ArrayXd>(loss_minus.data(), n);
  CurvatureEstimate est;
  // mean of (L₊ − L₀) + (L₋ − L₀): differences first, so large L₀ does not swamp them.
  est.second_diff = ((Lp - loss0) + (Lm - loss0)).mean();
  est.eta_sq = Eigen::Map<const Eigen::ArrayXd>(eta_sq.data(), n).mean();
  if (!(est.eta_sq > 0)) throw Error("curvature: the noise norms ‖η‖² are zero; σ_η must be positive");
  est.c = est.second_diff / (2.0 * est.eta_sq);
  return est;
}

CurvatureEstimate antithetic_curvature(const std::function<double(const std::vector<double>& z)>& loss,
                                       const std::vector<double>& z, double loss0, int n, double sigma, uint64_t seed) {
  if (n < 1 || z.empty() || !(sigma > 0))
    throw Error("antithetic_curvature: needs n ≥ 1 pairs, a non-empty z and σ > 0");
  Gaussian gauss(seed);
  std::vector<double> plus(n), minus(n), eta_sq(n), zp(z.size()), zm(z.size());
  for (int j = 0; j < n; ++j) {
    double sq = 0;
    for (size_t i = 0; i < z.size(); ++i) {
      const double eta = sigma * gauss.next();
      zp[i] = z[i] + eta;
      zm[i] = z[i] - eta;
      sq += eta * eta;
    }
    plus[j] = loss(zp);
    minus[j] = loss(zm);
    eta_sq[j] = sq;
  }
  return curvature_from_pairs(plus, minus, loss0, eta_sq);
}

}  // namespace snip
