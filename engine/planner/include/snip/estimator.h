// SNIP's divergence estimators (METHOD.md section 5) and the local-error baselines'
// costs (section 8), recomputed from the raw statistics of one round (snip/stats.h,
// keys in snip/stats_keys.h). Changing an option (λ, normalisation) never needs the model.
#pragma once
#include <array>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "snip/defaults.h"
#include "snip/layers.h"
#include "snip/precision.h"
#include "snip/stats.h"

namespace snip {

// How ΔW's upstream term is computed (METHOD.md 5.2). approx: δdX mapped to its residual point
// and spread by Hutchinson gain ratios with the gain-weighted AdamW factor (every round records
// what it needs). exact: the recorded FP32 backward of the real δdX with elementwise AdamW
// weights (only rounds collected with the exact mode have it; for validation).
enum class DwMode { approx, exact };
const char* dw_mode_name(DwMode m);        // "approx" "exact"
DwMode parse_dw_mode(const std::string&);  // throws snip::Error naming the choices

struct EstimatorOptions {
  double lambda = defaults::kLambda;  // λ in Q = ΔL̂ + λ·ΔŴ (5.3); λ = 1 is NOT neutral (see METHOD.md)
  bool normalize = true;              // divide ΔL and ΔW by their FP4 sums over layers (5.3); off: raw values
  DwMode dw_mode = DwMode::approx;
};

// True when the round recorded the exact ΔW mode's statistics (StatsRoundOptions::exact_weight_divergence).
bool has_exact_dw(const StatsRound& round);

// GEMM roles a plan may choose separately (METHOD.md section 1, option): fprop alone, and
// the backward pair (dgrad, wgrad). FLOPs split 1/3 : 2/3.
enum class Role { fprop = 0, backward = 1 };
inline constexpr int kNumRoles = 2;
const char* role_name(Role r);  // "fprop" "backward"

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
using PerPrecision = std::array<double, kNumPrecisions>;  // indexed by int(Precision); NaN = not measured

// All estimates of one layer. Values for a precision the round did not measure are NaN.
struct LayerEstimate {
  std::string name;  // HF module name
  int block = 0;
  LayerType type = LayerType::q;
  int64_t in_features = 0, out_features = 0;         // K, N
  double gemm_flops = 0;                             // 2·T·K·N, one GEMM
  PerPrecision dl{kNaN, kNaN, kNaN, kNaN};           // ΔL_l(p) = c·‖J_l‖_F²·‖δY_l(p)‖²/(T·N)   (5.1)
  PerPrecision dw{kNaN, kNaN, kNaN, kNaN};           // ΔW_l(p) = own + upstream                 (5.2)
  PerPrecision dw_own{kNaN, kNaN, kNaN, kNaN};       //   k_t²·Σ δg²/(√v̂+ε)² / ‖u_l‖²
  PerPrecision dw_upstream{kNaN, kNaN, kNaN, kNaN};  //   Σ_{u ∈ upstream(l)} ‖δu_u^(l)‖²/‖u_u‖²
  PerPrecision dl_hat{kNaN, kNaN, kNaN, kNaN};       // ΔL̂ = ΔL / Σ_k ΔL_k(fp4)  (= ΔL when not normalising)
  PerPrecision dw_hat{kNaN, kNaN, kNaN, kNaN};       // ΔŴ = ΔW / Σ_k ΔW_k(fp4)
  PerPrecision q{kNaN, kNaN, kNaN, kNaN};            // Q = ΔL̂ + λ·ΔŴ                            (5.3)
  // Per role (fprop: ΔL̂ and the fprop operands; backward: λ·ΔŴ and the dgrad/wgrad operands).
  std::array<PerPrecision, kNumRoles> q_role{};
  // min-err: Σ over the six GEMM operands of ‖e_p‖; min-rel-err: Σ ‖e_p‖/‖operand‖ (section 8).
  std::array<PerPrecision, kNumRoles> min_err_role{};
  std::array<PerPrecision, kNumRoles> min_rel_err_role{};
  PerPrecision min_err{kNaN, kNaN, kNaN, kNaN};
  PerPrecision min_rel_err{kNaN, kNaN, kNaN, kNaN};
  // HAWQ-V3: Ω_l(p) = tr(H_W_l)/(N·K) · ‖Q_p(W_l) − W_l‖² (the fprop weight's error); NaN when the
  // round has no Hessian trace. All of it on the fprop role (HAWQ models weight quantization).
  PerPrecision hawq{kNaN, kNaN, kNaN, kNaN};
  // Raw signals for validation: ‖δY‖² and the first-order term ⟨G, δY⟩.
  PerPrecision dy_err_sq{kNaN, kNaN, kNaN, kNaN};
  PerPrecision g_dot_dy{kNaN, kNaN, kNaN, kNaN};

  bool has(Precision p) const { return !std::isnan(dl[int(p)]); }
};

struct Estimates {
  EstimatorOptions options;
  ModelDims dims;
  int64_t tokens = 0;
  double dl_fp4_sum = 0;              // Σ_k ΔL_k(fp4), the normaliser of ΔL̂
  double dw_fp4_sum = 0;              // Σ_k ΔW_k(fp4)
  std::vector<LayerEstimate> layers;  // layer index order (the round's layers)
  std::vector<std::string> warnings;  // e.g. "no fp4 statistics: normalisation off"
};

// Recomputes every estimate from the raw statistics. Throws snip::Error naming the layer and
// the missing key when the round lacks something (e.g. "model.layers.2.mlp.up_proj: fp4 has
// no \"dy_err\"; the statistics round did not record it"), or when a value is negative.
// Precisions are taken from each layer's per_precision map (bf16, fp8, fp4 as present);
// bf16 entries without errors count as zero divergence (BF16 is the reference).
Estimates estimate_divergences(const StatsRound& round, const EstimatorOptions& options = {});

// The upstream relation of METHOD.md 5.2: true when layer `l`'s weight update is changed by
// layer `m`'s dgrad error, i.e. l lies before m on the backward path. Inside a block:
// q,k,v -> o -> gate,up -> down; every layer of an earlier block is upstream of every layer
// of a later block; siblings (q/k/v, gate/up) and l == m are not upstream.
bool is_upstream(LayerId l, LayerId m);

// ---- slow, obviously correct references (test oracles) ------------------------------------
// ΔW_m(p) by the literal double sum over all layers l with is_upstream(l, m).
double weight_divergence_ref(const StatsRound& round, int m_index, Precision p);

}  // namespace snip
