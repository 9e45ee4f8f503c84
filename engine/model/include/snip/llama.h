// A Llama model (Hugging Face LlamaForCausalLM math) with hand-written forward and backward,
// explicit memory (one arena each for parameters, gradients, activations and backward
// buffers, with named views), and the 7 linear layers of every block running their three
// GEMMs at the precision a per-layer plan assigns (METHOD.md section 1).
//
// LlamaModel<float> is the training engine; LlamaModel<double> is the reference path for
// gradient checks (FP32 precision only, same code, cblas_dgemm).
//
// Shape legend: B batch, T sequence, C model dim, NH heads, KVH kv heads, HD head dim,
// F ffn dim, V vocab, L layers; BT = B·T. Row-major everywhere.
//
// Hooks for the SNIP statistics round (METHOD.md section 4), all valid after forward()+backward().
// Keeping every layer's intermediates costs memory the optimizer step does not need, so the
// per-layer dY/dX, the residual gradients and the q/k (pre-RoPE), o and down outputs are kept
// only after set_retain_intermediates(true) (the statistics round turns it on; without it those
// view pointers are null and residual_grad() asserts):
//  (a) linear(l) / linear("model.layers.3.mlp.up_proj"): read-only X_l (BT,K), Y_l (BT,N),
//      G_l = dY_l (BT,N), dX_l (BT,K), W_l (N,K), dW_l (N,K) of every linear layer. For q/k,
//      Y_l is the projection output before RoPE. dX_l is this layer's own input gradient
//      (q, k and v each keep theirs; their sum enters input_layernorm's backward).
//  (b) final_residual(): Z = R_L, the output of the last block before the final norm (BT,C);
//      residual(b) = R_b (block b's input), residual_mid(b) = M_b = R_b + o_proj output.
//  (c) loss_from_residual(Z'): final norm + lm_head + mean cross-entropy from a perturbed Z',
//      forward only, on the targets of the last forward(); cached activations are untouched.
//  (d) backward_from_residual(dZ): backpropagates a given ∂L/∂Z through all blocks with the
//      weights frozen, into a separate probe buffer set: probe_linear(l) gives the gradient
//      reaching each Y_l (dY) and each layer's dX; probe_residual_grad(b) = ∂/∂R_b,
//      probe_residual_mid_grad(b) = ∂/∂M_b. Parameter gradients and the main backward buffers
//      are not modified. (The main backward's residual gradients: residual_grad(b), residual_mid_grad(b).)
//  (e) set_precisions(): the per-layer plan vector; change one entry to run one layer's GEMMs at
//      another precision without touching the others.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snip/layers.h"
#include "snip/model_config.h"
#include "snip/precision.h"

namespace snip {

class Recipe;

// Views into one parameter-shaped arena (parameters, gradients, AdamW moments all share it).
template <class R>
struct LlamaParams {
  R* embed = nullptr;       // (V, C)        model.embed_tokens.weight
  R* attn_norm = nullptr;   // (L, C)        model.layers.N.input_layernorm.weight
  R* wq = nullptr;          // (L, NH*HD, C) model.layers.N.self_attn.q_proj.weight
  R* wk = nullptr;          // (L, KVH*HD, C)
  R* wv = nullptr;          // (L, KVH*HD, C)
  R* wo = nullptr;          // (L, C, NH*HD)
  R* mlp_norm = nullptr;    // (L, C)        model.layers.N.post_attention_layernorm.weight
  R* wgate = nullptr;       // (L, F, C)
  R* wup = nullptr;         // (L, F, C)
  R* wdown = nullptr;       // (L, C, F)
  R* final_norm = nullptr;  // (C)           model.norm.weight
  R* lm_head = nullptr;     // (V, C)        lm_head.weight (== embed when tied)
};

// One named tensor of the parameter arena, in Hugging Face naming.
struct ParamTensor {
  std::string name;            // "model.layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // (N, K) for linear weights
  int64_t offset = 0;          // element offset into the arena
  int64_t numel = 0;
};

// Read-only view of one linear layer Y = X·Wᵀ after forward/backward.
template <class R>
struct LinearView {
  std::string name;       // HF module name
  int index = 0;          // block*7 + type
  int64_t rows = 0;       // BT
  int64_t K = 0;          // in_features
  int64_t N = 0;          // out_features
  const R* X = nullptr;   // (BT, K)
  const R* Y = nullptr;   // (BT, N)
  const R* dY = nullptr;  // (BT, N)  G_l
  const R* dX = nullptr;  // (BT, K)
  const R* W = nullptr;   // (N, K)
  const R* dW = nullptr;  // (N, K)   null for probe views
};

// The gradient buffers one block's backward writes (views, BT rows each): per linear type t
// (q, k, v, o, gate, up, down) its output gradient dY (BT, N_t) and input gradient dX (BT, K_t),
// ∂/∂M_b, ∂/∂R_b, and scratch. The model's backward points them into its arenas; other callers
// (the statistics round) own them in a BlockGradStorage.
template <class R>
struct BlockGrads {
  R* dy[7] = {};
  R* dx[7] = {};
  R* dmid = nullptr;    // (BT, C) ∂/∂M_b
  R* dres = nullptr;    // (BT, C) ∂/∂R_b
  R* dq_rot = nullptr;  // (BT, NH*HD) scratch
  R* dk_rot = nullptr;  // (BT, KVH*HD) scratch
  R* dln = nullptr;     // (BT, C) scratch
};

// Where a half-block backward starts. A block is two halves, attention (R_b -> M_b) and MLP
// (M_b -> R_{b+1}); each is norm -> linears -> mixing (attention / SwiGLU) -> linear (o / down)
// plus the residual connection around it.
enum class HalfEntry {
  output,        // the gradient at the half's output (M_b / R_{b+1}): branch plus residual pass-through
  branch_input,  // at the input of o (attention output) / down (SwiGLU output h); no pass-through
  norm_output,   // at the norm's output (the X of q, k, v / gate, up); no pass-through
};

// How a block backward runs its linear layers.
template <class R>
struct BlockBackwardMode {
  // Weight gradients accumulated here (the model's grads()); null: the weights are frozen.
  LlamaParams<R>* weight_grads = nullptr;
  // Every dgrad in FP32 (the exact linear map of the block, METHOD.md 5.2) instead of each
  // layer's planned precision.
  bool fp32 = false;
};

template <class R>
class LlamaModel {
 public:
  // Allocates every arena for batches of B rows × T tokens (T ≤ max_position_embeddings).
  LlamaModel(const ModelConfig& config, int B, int T);
  ~LlamaModel();
  LlamaModel(const LlamaModel&) = delete;
  LlamaModel& operator=(const LlamaModel&) = delete;

  const ModelConfig& config() const { return config_; }
  int batch_size() const { return B_; }
  int seq_len() const { return T_; }
  int num_linear_layers() const { return kLayersPerBlock * config_.num_hidden_layers; }

  // ---- parameters and gradients (same layout) ----
  LlamaParams<R>& params() { return params_; }
  const LlamaParams<R>& params() const { return params_; }
  LlamaParams<R>& grads() { return grads_; }
  const LlamaParams<R>& grads() const { return grads_; }
  R* param_data() { return param_mem_.get(); }
  const R* param_data() const { return param_mem_.get(); }
  R* grad_data() { return grad_mem_.get(); }
  const R* grad_data() const { return grad_mem_.get(); }
  int64_t num_params() const { return num_params_; }
  // HF-named tensors of the arena, in a fixed order (lm_head.weight absent when tied).
  const std::vector<ParamTensor>& param_tensors() const { return tensors_; }
  const ParamTensor* find_param(const std::string& name) const;
  // HF initialization: linear/embedding weights ~ N(0, 0.02²), norm weights 1. Deterministic in seed.
  void init_weights(uint64_t seed);
  void zero_grads();

  // ---- precision plan ----
  // One LinearPrecision per layer in index order (size 7·L). Default: all fp32.
  void set_precisions(const std::vector<LinearPrecision>& per_layer);
  const std::vector<LinearPrecision>& precisions() const { return precisions_; }
  void set_recipe(const Recipe& recipe);  // copied; default "snip"
  const Recipe& recipe() const { return *recipe_; }
  // Stochastic-rounding key (seed, step): the same step gives the same bits.
  void set_quant_key(uint64_t seed, uint64_t step) { quant_seed_ = seed, quant_step_ = step; }

  // Keep every layer's hook tensors (see the file comment). Re-lays out the activation arena:
  // call before forward(). Off by default (training needs ~1/3 less memory). The arenas grow to
  // the larger layout once and keep it when retention is turned off again, so periodic
  // statistics rounds do not allocate and page-fault them anew each time; a model that never
  // retains never holds the larger layout.
  void set_retain_intermediates(bool retain);
  bool retains_intermediates() const { return retain_; }

  // ---- forward / backward ----
  // inputs, targets: (B, T) token ids in [0, V). Caches every activation. Returns the mean loss.
  double forward(const int32_t* inputs, const int32_t* targets);
  // Adds d(dloss·mean loss)/dθ to the gradients (call zero_grads() first; repeated calls
  // accumulate micro-batches). Requires a preceding forward().
  void backward(double dloss = 1.0);
  double loss() const { return loss_; }
  const R* logits() const { return acts_.logits; }  // (BT, V)

  // ---- hooks (see the file comment) ----
  LinearView<R> linear(int index) const;
  LinearView<R> linear(const std::string& module_name) const;  // throws snip::Error when unknown
  const R* residual(int b) const;                              // R_b (BT, C), b in [0, L]; residual(L) = Z
  const R* residual_mid(int b) const;                          // M_b (BT, C), b in [0, L)
  const R* final_residual() const { return residual(config_.num_hidden_layers); }
  const R* residual_grad(int b) const;      // ∂L/∂R_b from backward()
  const R* residual_mid_grad(int b) const;  // ∂L/∂M_b from backward()
  double loss_from_residual(const R* Z);
  void backward_from_residual(const R* dZ);
  LinearView<R> probe_linear(int index) const;
  const R* probe_residual_grad(int b) const;
  const R* probe_residual_mid_grad(int b) const;

  // ---- per-block backward (what backward() and backward_from_residual() run, block by block) ----
  // Backward of one half of block b from the gradient d at `from` (HalfEntry), on the cached
  // activations of the last forward (nothing is recomputed). The MLP half writes g.dy/g.dx of
  // the layers it reaches (down, gate, up) and ∂/∂M_b into g.dmid; the attention half those of
  // o, q, k, v and ∂/∂R_b into g.dres. Linear in d when the weights are frozen and the dgrads
  // deterministic (mode.fp32, or a plan without stochastic rounding). d may be g.dres for the
  // MLP half and g.dmid for the attention half (so one BlockGrads carries a chain of blocks).
  void mlp_half_backward(int b, HalfEntry from, const R* d, BlockGrads<R>& g, const BlockBackwardMode<R>& mode) const;
  void attention_half_backward(int b, HalfEntry from, const R* d, BlockGrads<R>& g,
                               const BlockBackwardMode<R>& mode) const;
  // The whole block from ∂/∂R_{b+1}: the MLP half, then the attention half from g.dmid.
  void block_backward(int b, const R* dres_next, BlockGrads<R>& g, const BlockBackwardMode<R>& mode) const;

  // ---- non-finite detection ----
  // Name of the first non-finite activation of the last forward ("model.layers.3.mlp.up_proj
  // output", ...), or "" when all are finite.
  std::string first_nonfinite_activation() const;
  // Name of the first parameter tensor whose gradient (or value, when `values`) is not finite, or "".
  std::string first_nonfinite_param(bool values) const;

  // Bytes held by the arenas (parameters, gradients, activations, backward buffers).
  struct MemoryUse {
    int64_t params = 0, grads = 0, activations = 0, backward = 0;
  };
  MemoryUse memory_use() const;

 private:
  struct Acts;
  struct BackBufs;
  void linear_fprop(R* Y, const R* X, const R* W, int64_t K, int64_t N, int layer);
  void linear_dgrad(R* dX, const R* dY, const R* W, int64_t K, int64_t N, int layer, bool fp32 = false) const;
  void linear_wgrad(R* dW, const R* dY, const R* X, int64_t K, int64_t N, int layer) const;
  void backward_blocks(BackBufs& bb, bool weight_grads);
  BlockGrads<R> block_grads(BackBufs& bb, int b) const;
  void alloc_activations();
  R* dres_slot(BackBufs& bb, int b) const;
  void final_head_forward(R* lnf, R* rstd, R* logits, R* probs, R* losses, const R* Z, double* loss);

  ModelConfig config_;
  int B_ = 0, T_ = 0;
  int64_t num_params_ = 0;
  std::vector<ParamTensor> tensors_;
  std::unique_ptr<R[]> param_mem_, grad_mem_;
  LlamaParams<R> params_, grads_;

  struct Acts {
    R* res = nullptr;       // (L+1, BT, C) R_b; res[L] = Z
    R* mid = nullptr;       // (L, BT, C)   M_b
    R* ln1 = nullptr;       // (L, BT, C)   input_layernorm output (X of q, k, v)
    R* ln1_rstd = nullptr;  // (L, BT)
    R* q_lin = nullptr;     // (L, BT, NH*HD) q_proj output before RoPE (1 slot unless retained)
    R* k_lin = nullptr;     // (L, BT, KVH*HD) (1 slot unless retained)
    R* v = nullptr;         // (L, BT, KVH*HD)
    R* q_rot = nullptr;     // (L, BT, NH*HD) after RoPE
    R* k_rot = nullptr;     // (L, BT, KVH*HD)
    R* probs = nullptr;     // (L, B, NH, T, T)
    R* att = nullptr;       // (L, BT, NH*HD) attention output (X of o)
    R* o_out = nullptr;     // (L, BT, C) (1 slot unless retained)
    R* ln2 = nullptr;       // (L, BT, C)   post_attention_layernorm output (X of gate, up)
    R* ln2_rstd = nullptr;  // (L, BT)
    R* gate = nullptr;      // (L, BT, F)
    R* up = nullptr;        // (L, BT, F)
    R* hmlp = nullptr;      // (L, BT, F)   silu(gate)·up (X of down)
    R* down_out = nullptr;  // (L, BT, C) (1 slot unless retained)
    R* lnf = nullptr;       // (BT, C)
    R* lnf_rstd = nullptr;  // (BT)
    R* logits = nullptr;    // (BT, V)
    R* probs_ce = nullptr;  // (BT, V) softmax, then dlogits in backward
    R* losses = nullptr;    // (BT)
    R* dlnf = nullptr;      // (BT, C) scratch
    // loss_from_residual scratch (leaves the cached activations alone)
    R* s_lnf = nullptr;     // (BT, C)
    R* s_rstd = nullptr;    // (BT)
    R* s_logits = nullptr;  // (BT, V)
    R* s_probs = nullptr;   // (BT, V)
    R* s_losses = nullptr;  // (BT)
    R* rope_cos = nullptr;  // (T, HD/2)
    R* rope_sin = nullptr;  // (T, HD/2)
  } acts_;
  std::unique_ptr<R[]> act_mem_;
  int64_t act_count_ = 0;  // elements held by act_mem_ (the largest layout so far)

  // Backward buffers: per layer and linear type, the output gradient dY and input gradient dX,
  // plus the residual-stream gradients. Two sets: `main` (backward) and `probe` (backward_from_residual).
  struct BackBufs {
    R* dy[7] = {};        // (L, BT, N_type)
    R* dx[7] = {};        // (L, BT, K_type)
    R* dres = nullptr;    // (L+1, BT, C) ∂/∂R_b
    R* dmid = nullptr;    // (L, BT, C)   ∂/∂M_b
    R* dq_rot = nullptr;  // (BT, NH*HD) scratch
    R* dk_rot = nullptr;  // (BT, KVH*HD) scratch
    R* dln = nullptr;     // (BT, C) scratch
    std::unique_ptr<R[]> mem;
    int64_t count = 0;  // elements held by mem (the largest layout so far)
    bool full = true;   // per-layer buffers for every layer (else one reused slot)
  };
  BackBufs main_, probe_;
  void alloc_backbufs(BackBufs& bb, bool full);
  bool retain_ = false;

  std::vector<int32_t> inputs_, targets_;  // (B, T) of the last forward
  double loss_ = 0;
  bool have_forward_ = false;
  std::vector<LinearPrecision> precisions_;
  std::unique_ptr<Recipe> recipe_;
  uint64_t quant_seed_ = 0, quant_step_ = 0;
  std::vector<std::string> layer_names_;
};

// Owns one block's backward buffers (BlockGrads) for a model's shape.
template <class R>
class BlockGradStorage {
 public:
  explicit BlockGradStorage(const LlamaModel<R>& model);
  BlockGrads<R>& grads() { return g_; }

 private:
  std::vector<R> mem_;
  BlockGrads<R> g_;
};

using Llama = LlamaModel<float>;
using LlamaRef = LlamaModel<double>;

}  // namespace snip
