// The two randomized estimators of a statistics round (METHOD.md section 4), written against
// plain callbacks so they can be tested on maps whose answers are known exactly:
//   Hutchinson:  ‖J‖_F² ≈ mean_j ‖Jᵀε_j‖² / σ²,   ε_j ~ N(0, σ²I)        (backward-noise passes)
//   curvature:   c = mean_j [L(z+η_j) + L(z−η_j) − 2L₀] / (2·mean_j ‖η_j‖²),  η_j ~ N(0, σ²I)
//                (antithetic pairs cancel the first-order term exactly; c ≈ ½·tr(H)/dim z)
// Everything accumulates in FP64 (in FP32 the cancellation made c 6.5× wrong at σ = 1e-3).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

namespace snip {

// out = Jᵀ·eps, with eps of the output dimension (the noise's space) and out of the input one.
using ApplyJt = std::function<void(const std::vector<double>& eps, std::vector<double>& out)>;

// ‖J‖_F² estimated from n Gaussian probes of dimension `dim` (the space eps lives in).
// The result does not depend on σ in expectation; σ is a parameter so callers can match
// the statistics round (σ_ε = RMS ∂L/∂Z). Deterministic for a seed.
double hutchinson_frobenius(const ApplyJt& apply_Jt, int64_t dim, int n, uint64_t seed, double sigma = 1.0);

// Raw form used with recorded statistics: ‖J‖_F² = mean_j ‖Jᵀε_j‖² / σ².
inline double hutchinson_from_raw(double mean_jt_eps_sq, double sigma) {
  return mean_jt_eps_sq / (sigma * sigma);
}

// Hutchinson traces of the diagonal blocks of a Hessian from gradients (HAWQ-V3's estimator, by
// central differences instead of a second backward):
//   tr(H_b) ≈ mean_j v_jᵀ [∇f(x + ε v_j) − ∇f(x − ε v_j)]_b / (2ε)
// with v_j Rademacher (±1) on every block at once: the cross-block terms v_bᵀ H_bc v_c average
// to 0 because the blocks' signs are independent, so one pair of gradients serves every block.
// For a quadratic f the difference quotient is exact, and for a diagonal H every probe gives
// tr(H_b) exactly. grad_at(delta, grad) evaluates ∇f at x + delta (both of dimension dim; delta is
// 0 outside the blocks). Blocks are [begin, end) ranges with their own step ε (e.g. relative to
// the block's weights); deterministic for a seed. Throws snip::Error on n < 1, an empty or
// out-of-range block, or ε ≤ 0.
struct HessianBlock {
  int64_t begin = 0, end = 0;
  double eps = 1e-3;
};
using GradAt = std::function<void(const std::vector<float>& delta, std::vector<float>& grad)>;
std::vector<double> hessian_block_traces(const GradAt& grad_at, int64_t dim, const std::vector<HessianBlock>& blocks,
                                         int n, uint64_t seed);

struct CurvatureEstimate {
  double c = 0;            // the curvature estimate
  double second_diff = 0;  // mean_j [L(z+η_j) + L(z−η_j) − 2L₀]
  double eta_sq = 0;       // mean_j ‖η_j‖²
};

// Antithetic curvature from n noise pairs around z (loss0 = L(z)); deterministic for a seed.
CurvatureEstimate antithetic_curvature(const std::function<double(const std::vector<double>& z)>& loss,
                                       const std::vector<double>& z, double loss0, int n, double sigma, uint64_t seed);

// The same from losses measured elsewhere (the statistics round runs the model): pair j has
// L(z+η_j) = loss_plus[j], L(z−η_j) = loss_minus[j] and ‖η_j‖² = eta_sq[j]. Throws snip::Error
// on mismatched lengths, no pairs or a zero noise norm.
CurvatureEstimate curvature_from_pairs(const std::vector<double>& loss_plus, const std::vector<double>& loss_minus,
                                       double loss0, const std::vector<double>& eta_sq);

}  // namespace snip
