// The names of the raw statistics of one SNIP statistics round (METHOD.md section 4), as
// stored in snip::StatsRound (snip/stats.h). The statistics round writes exactly these keys;
// the estimators (snip/estimator.h) read them. All norms are Frobenius norms of the whole
// tensor over the statistics batch (T tokens); a "_sq" suffix means the squared value.
//
// Where each key lives:
//   StatsRound::globals                         round-wide values          (kGlobal*)
//   LayerStats::scalars                         per layer                 (kLayer*)
//   LayerStats::per_precision[precision_name]   per layer x precision p   (kPrec*)
//   LayerStats::vectors                         per layer, per channel    (kVector*)
// Layer shapes:  X (T, K)  W (N, K)  Y = X·Wᵀ (T, N)  G = dY (T, N)  dX (T, K)  dW (N, K).
#pragma once
#include <array>
#include <string>

namespace snip::keys {

// ---- globals ---------------------------------------------------------------------------
inline constexpr const char* kGlobalLoss0 = "loss0";  // L₀: clean loss of the statistics batch
// Curvature along the residual stream Z (last block's output, T×C), antithetic estimate
//   c = mean_j [L(Z+η_j) + L(Z−η_j) − 2L₀] / (2·mean_j ‖η_j‖²)   (≈ ½·tr(H_Z)/dim Z), FP64.
inline constexpr const char* kGlobalCurvature = "curvature";
// The two parts of c, kept so c can be recomputed: mean_j [L(Z+η_j)+L(Z−η_j)−2L₀] and mean_j ‖η_j‖².
inline constexpr const char* kGlobalCurvatureSecondDiff = "curvature_second_diff";
inline constexpr const char* kGlobalCurvatureEtaSq = "curvature_eta_sq";
inline constexpr const char* kGlobalSigmaEta = "sigma_eta";  // σ_η of the forward-noise passes
inline constexpr const char* kGlobalSigmaEps = "sigma_eps";  // σ_ε of the backward-noise passes (= RMS ∂L/∂Z)
inline constexpr const char* kGlobalNoisePasses = "noise_passes";  // passes per kind (3)
// AdamW: k_t = η_t·(1−β1)/(1−β1^t), the factor between a gradient change and the update change.
inline constexpr const char* kGlobalKt = "k_t";
inline constexpr const char* kGlobalLearningRate = "lr";  // η_t at the round's step
inline constexpr const char* kGlobalAdamBeta1 = "adam_beta1";
inline constexpr const char* kGlobalAdamBeta2 = "adam_beta2";
inline constexpr const char* kGlobalAdamEps = "adam_eps";
// The clean step's context, kept so a round can be checked and recomputed later:
// L(Z) through loss_from_residual, the L₀ of c (equal to loss0 up to FP32 summation order);
inline constexpr const char* kGlobalLoss0Resid = "loss0_resid";
// the clip factor s of this batch's gradient (k_t includes it: k_t = s·η_t(1−β1)/(1−β1^{t+1}),
// because a clipped step scales every gradient error by s too), the gradient's global norm
// before clipping, and the AdamW step count t before the round's (virtual) step.
inline constexpr const char* kGlobalGradClipScale = "grad_clip_scale";
inline constexpr const char* kGlobalGradNorm = "grad_norm";
inline constexpr const char* kGlobalAdamT = "adam_t";

// ---- per layer (precision-independent) -------------------------------------------------
inline constexpr const char* kLayerXNorm = "x_norm";           // ‖X_l‖
inline constexpr const char* kLayerWNorm = "w_norm";           // ‖W_l‖
inline constexpr const char* kLayerYNorm = "y_norm";           // ‖Y_l‖
inline constexpr const char* kLayerGNorm = "g_norm";           // ‖G_l‖, G = ∂L/∂Y_l
inline constexpr const char* kLayerDxNorm = "dx_norm";         // ‖dX_l‖
inline constexpr const char* kLayerDwNorm = "dw_norm";         // ‖dW_l‖
inline constexpr const char* kLayerAdamMNorm = "adam_m_norm";  // ‖m_l‖ (AdamW first moment)
inline constexpr const char* kLayerAdamVNorm = "adam_v_norm";  // ‖v_l‖ (second moment)
// a_l = mean_ij 1/(√v̂_ij+ε)²  (layer-wide AdamW factor; reported, not used by 5.2)
inline constexpr const char* kLayerAdamA = "adam_a";
// a^w_l = Σ_ij γ_i·x_j/(√v̂_ij+ε)² / (Σ_i γ_i · Σ_j x_j), γ_i = per-output-channel Hutchinson
// gain at Y_l, x_j = ‖X_l[:, j]‖² (METHOD.md 5.2 step 3).
inline constexpr const char* kLayerAdamAGain = "adam_a_gain";
inline constexpr const char* kLayerUpdateNorm = "update_norm";  // ‖u_l‖, the clean AdamW update
// Hutchinson at Y_l: mean_j ‖J_lᵀε_j‖², J_l = ∂Z/∂Y_l (so ‖J_l‖_F² ≈ this / σ_ε²).
inline constexpr const char* kLayerJtEpsSqY = "jt_eps_sq_y";
// Hutchinson at the residual-stream point layer l's dgrad error is mapped to (METHOD.md 5.2
// step 1): R_b (block input) for q, k, v, o and M_b = R_b + o_proj output for gate, up, down.
// Every layer of a block carries its own point's value: mean_j ‖J_Rᵀε_j‖².
inline constexpr const char* kLayerJtEpsSqResid = "jt_eps_sq_resid";
// HAWQ-V3 (Yao et al. 2021): Hutchinson trace of the loss Hessian w.r.t. W_l, tr(∂²L/∂W_l²), from
// central differences of FP32 gradients (snip/hutchinson.h hessian_block_traces). Only in rounds
// collected with hessian_probes > 0 (`snip collect --hessian-probes N`, `snip compare`).
inline constexpr const char* kLayerHessianTraceW = "hessian_trace_w";

// ---- per layer x precision p -------------------------------------------------------------
// Quantization error norms ‖e_p(operand)‖ = ‖Q_p(A) − A‖ of each operand in the tiling of the
// GEMM it is used in (FORMATS.md; the same tensor is quantized separately per GEMM).
inline constexpr const char* kPrecErrFpropX = "err_fprop_x";  // X  in Y = X·Wᵀ
inline constexpr const char* kPrecErrFpropW = "err_fprop_w";  // W  in Y = X·Wᵀ
inline constexpr const char* kPrecErrDgradG = "err_dgrad_g";  // dY in dX = dY·W
inline constexpr const char* kPrecErrDgradW = "err_dgrad_w";  // W  in dX = dY·W
inline constexpr const char* kPrecErrWgradG = "err_wgrad_g";  // dY in dW = dYᵀ·X
inline constexpr const char* kPrecErrWgradX = "err_wgrad_x";  // X  in dW = dYᵀ·X
// Exact GEMM output errors (quantized GEMM − BF16 GEMM).
inline constexpr const char* kPrecDyErr = "dy_err";     // ‖δY_l(p)‖
inline constexpr const char* kPrecDdxErr = "ddx_err";   // ‖δdX_l(p)‖
inline constexpr const char* kPrecDdwErr = "ddw_err";   // ‖δdW_l(p)‖
inline constexpr const char* kPrecGDotDy = "g_dot_dy";  // ⟨G_l, δY_l(p)⟩ (first-order loss change)
// The gradient's signal-to-quantization-noise ratio ‖∇W_l‖ / ‖δdW_l(p)‖ (dw_norm / ddw_err;
// METHOD.md 10): how far above its own quantization noise the layer's weight gradient stands.
// Absent when the quantization changes nothing (ddw_err = 0).
inline constexpr const char* kPrecGradNoiseRatio = "grad_noise_ratio";
// Own term of 5.2 without k_t²: Σ_ij δg_ij²/(√v̂_ij+ε)², δg = quantized − BF16 wgrad of l.
inline constexpr const char* kPrecOwnUpdateSq = "own_update_sq";
// Upstream term of 5.2 step 1: ‖δr‖², layer l's dgrad error δdX_l(p) mapped exactly by the
// local backward to its residual point (R_b for q/k/v/o, M_b for gate/up/down).
inline constexpr const char* kPrecResidErrSq = "resid_err_sq";
// The same local backward gives the gradient error at the sibling layers' outputs exactly:
// for o: ‖δG‖² at q, k, v of the same block (attention backward); for down: at gate, up
// (SwiGLU backward). Key = kPrecSiblingDgSqPrefix + short type name, e.g. "sib_dg_sq.q".
inline constexpr const char* kPrecSiblingDgSqPrefix = "sib_dg_sq.";
inline std::string sibling_dg_sq_key(const char* short_type_name) {  // "sib_dg_sq.q"
  return std::string(kPrecSiblingDgSqPrefix) + short_type_name;
}

// Exact ΔW mode (METHOD.md 5.2 `exact`, recorded only when the round ran it): for every layer
// l upstream of this layer, Σ_ij δdW_l,ij²/(√v̂_l,ij+ε)² with δdW_l the change of l's weight
// gradient caused by this layer's dgrad error δdX(p), back-propagated through the frozen graph
// in FP32 (without k_t², like kPrecOwnUpdateSq). Key = prefix + l's linear-layer index
// (block·7 + type), e.g. "exact_up_sq.3".
inline constexpr const char* kPrecExactUpstreamSqPrefix = "exact_up_sq.";
inline std::string exact_upstream_sq_key(int layer_index) {  // "exact_up_sq.3"
  return std::string(kPrecExactUpstreamSqPrefix) + std::to_string(layer_index);
}

// ---- per layer vectors ---------------------------------------------------------------------
// γ_i: per-output-channel Hutchinson gain at Y_l, mean_j Σ_t (J_lᵀε_j)_{t,i}² (length N).
inline constexpr const char* kVectorGainY = "gain_y";
// x_j = ‖X_l[:, j]‖² (length K), used with γ for a^w_l.
inline constexpr const char* kVectorXColSq = "x_col_sq";

// Every scalar / per-precision key the estimators need, for validation messages.
inline constexpr std::array<const char*, 7> kRequiredLayerScalars = {
    kLayerXNorm, kLayerWNorm, kLayerGNorm, kLayerAdamAGain, kLayerUpdateNorm, kLayerJtEpsSqY, kLayerJtEpsSqResid};
inline constexpr std::array<const char*, 11> kRequiredPrecisionKeys = {
    kPrecErrFpropX, kPrecErrFpropW, kPrecErrDgradG, kPrecErrDgradW,   kPrecErrWgradG, kPrecErrWgradX,
    kPrecDyErr,     kPrecDdxErr,    kPrecDdwErr,    kPrecOwnUpdateSq, kPrecResidErrSq};
inline constexpr std::array<const char*, 3> kRequiredGlobals = {kGlobalCurvature, kGlobalSigmaEps, kGlobalKt};

}  // namespace snip::keys
