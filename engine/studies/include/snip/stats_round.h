// One SNIP statistics round (METHOD.md section 4) on a live model: a clean BF16 forward +
// backward, 3 backward-noise passes and 3 antithetic forward-noise passes, producing every raw
// statistic named in snip/stats_keys.h as a snip::StatsRound that the estimators
// (snip/estimator.h) turn into ΔL / ΔW / Q costs.
//
// The round is read-only for training: it never writes the weights, the AdamW moments or t,
// the data loader or any RNG of the trainer. It overwrites the model's activations, gradients
// and probe buffers (the next training step recomputes them) and restores the model's
// per-layer precisions and intermediate-retention setting. A test checks that a trajectory is bit-identical with and
// without a round in the middle.
//
// Shape legend: B batch, T sequence, C model dim, NH heads, KVH kv heads, HD head dim, F ffn
// dim; BT = B·T rows. Per linear layer: X (BT,K), W (N,K), Y = X·Wᵀ (BT,N), G = dY (BT,N).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "snip/llama.h"
#include "snip/optimizer.h"
#include "snip/precision.h"
#include "snip/stats.h"

namespace snip {

class Trainer;

struct StatsRoundOptions {
  // Candidate precisions measured per layer (LayerStats::per_precision); bf16 is the reference.
  std::vector<Precision> precisions = {Precision::fp8, Precision::fp4};
  int noise_passes = 3;         // backward-noise passes and antithetic forward-noise pairs (each)
  double sigma_eta_rel = 1e-2;  // σ_η = sigma_eta_rel · RMS(Z)
  uint64_t seed = 1;            // noise RNG; also the stochastic-rounding key of the quantized GEMMs
  int64_t step = 0;             // training step the round belongs to (StatsRound::step, SR key)
  std::string batch_id;         // e.g. "train:e0:b37"
  // AdamW linearization (METHOD.md 5.2): the round predicts the update of the NEXT optimizer
  // step (t+1) at learning rate `lr`, with the step's global-norm clipping (≤ 0: off).
  double lr = 0;
  double grad_clip = 1.0;
  bool record_vectors = true;  // gain_y / x_col_sq vectors (needed to recompute a^w later)
  // METHOD.md 5.2 `exact` mode (for validation): per layer × precision, one extra FP32 backward
  // pass seeded with the real δdX through the frozen graph, recording every upstream layer's
  // elementwise AdamW-weighted weight-gradient error (keys::exact_upstream_sq_key). Costs about
  // one partial backward with weight gradients per layer and precision.
  bool exact_weight_divergence = false;
  // HAWQ-V3's input: per linear layer the Hutchinson trace of its weight Hessian from this many
  // Rademacher probes (2 FP32 forward+backward passes each, every layer probed at once), with the
  // central-difference step hessian_eps_rel·RMS(W_l). 0 = not recorded (the `hawq` method then
  // refuses the round).
  int hessian_probes = 0;
  double hessian_eps_rel = 1e-2;
  // Asked between the round's passes and layers: true abandons the round (throws
  // snip::StepInterrupted; the model's plan and weights are as before), so a stop request never
  // waits for a whole round. The trainer overload takes the trainer's (Trainer::set_interrupt).
  std::function<bool()> interrupt;
};

// Runs one round on the batch (inputs, targets: (B, T) ids, the model's batch shape) with the
// AdamW state `opt` (m, v, t; may be fresh with t = 0). Throws snip::Error for a non-finite
// clean loss or gradients (naming the tensor), lr ≤ 0, or noise_passes < 1. The
// keys it writes are those of snip/stats_keys.h.
StatsRound collect_stats_round(Llama& model, const AdamW<float>& opt, const int32_t* inputs, const int32_t* targets,
                               const StatsRoundOptions& options);

// The same on a trainer's state: its model, optimizer, learning rate of the next step, clipping,
// recipe and the next training batch (peeked without advancing the data position). `options`
// supplies precisions/noise/seed; step, lr, grad_clip and batch_id are taken from the trainer.
StatsRound collect_stats_round(Trainer& trainer, StatsRoundOptions options = {});

// METHOD.md 5.2 step 1 on its own (the round runs the same code): maps a gradient error δdX at
// the input of linear layer `index` (BT, K) exactly through the local backward to its residual
// point — input_layernorm backward to R_b for q/k/v; attention backward, the q/k/v dgrads (FP32)
// and input_layernorm backward for o; post_attention_layernorm backward to M_b for gate/up;
// SwiGLU backward, the gate/up dgrads and post_attention_layernorm backward for down — and
// returns ‖δr‖². `residual_err` (optional) receives δr (BT, C); `sibling_sq` (optional) the
// exact ‖δG‖² at the sibling outputs ("q","k","v" for o; "gate","up" for down). Needs the
// model's forward (and retained intermediates) of the batch in question.
double map_dgrad_to_residual(const Llama& model, int index, const float* ddx,
                             std::vector<float>* residual_err = nullptr,
                             std::map<std::string, double>* sibling_sq = nullptr);

// METHOD.md 5.2 `exact` mode on its own (the round runs the same code): back-propagates a
// gradient error δdX (BT, K) at the input of linear layer `index` through the frozen graph in
// FP32 — the rest of its block, then every earlier block — and returns per linear layer the
// resulting weight-gradient error δdW_l = δG_lᵀ·X_l (N_l·K_l values, row-major); layers the
// error does not reach (not upstream of `index`) get an empty vector. Needs the model's forward
// (with retained intermediates) of the batch in question.
std::vector<std::vector<float>> propagate_dgrad_error(const Llama& model, int index, const float* ddx);

// The next training micro-batch of `trainer` (what its next step() will train on first),
// without advancing its data position. inputs/targets: (B, T).
void peek_next_batch(const Trainer& trainer, std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                     std::string* batch_id = nullptr);

namespace detail {
// false: the round's double sums run on their scalar terms only, as on a CPU without AVX-512
// (the vector kernels give the same bits; a test compares the two). Not thread-safe; tests only.
void set_stats_round_vector_sums(bool on);
// false: a layer's residual maps (one per candidate precision) run one after the other on the
// calling thread instead of concurrently on the shared pool (the same bits; a test compares the
// two). Not thread-safe; tests only.
void set_stats_round_concurrent_maps(bool on);
}  // namespace detail

}  // namespace snip
