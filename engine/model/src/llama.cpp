// LlamaModel: arenas, forward, backward and the statistics hooks (see llama.h). The block
// forward and the block backward below mirror each other line by line, in reverse order.
#include "snip/llama.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "gemm.h"
#include "snip/checked.h"
#include "snip/error.h"
#include "snip/llama_ops.h"
#include "snip/qlinear.h"

namespace snip {

namespace {

// Sizes the arena from a list of named views, then points each view into it (llm.c style).
template <class R>
struct ArenaLayout {
  std::vector<std::pair<R**, int64_t>> views;
  void add(R*& p, int64_t n) { views.push_back({&p, n}); }
  int64_t total() const {
    int64_t t = 0;
    for (auto& v : views) t += v.second;
    return t;
  }
  std::unique_ptr<R[]> allocate(int64_t* count) {
    *count = total();
    std::unique_ptr<R[]> mem(new R[size_t(std::max<int64_t>(*count, 1))]());
    R* p = mem.get();
    for (auto& v : views) *v.first = p, p += v.second;
    return mem;
  }
  // Points the views into `mem`, which is reallocated (zeroed) only when it holds fewer than
  // total() elements: switching between two layouts (set_retain_intermediates on and off, as
  // every statistics round does) then re-uses the larger arena instead of allocating and
  // page-faulting it again. Every view is written before it is read (forward/backward), so the
  // previous layout's contents do not matter.
  void place(std::unique_ptr<R[]>& mem, int64_t* capacity) {
    if (!mem || total() > *capacity) {
      mem.reset();
      mem = allocate(capacity);
      return;
    }
    R* p = mem.get();
    for (auto& v : views) *v.first = p, p += v.second;
  }
};

template <class R>
bool all_finite(const R* p, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(p[i])) return false;
  return true;
}

}  // namespace

// Shapes of the 7 linear layer types: (N = out_features, K = in_features).
struct LinearShape {
  int64_t N, K;
};
static LinearShape linear_shape(const ModelConfig& c, int type) {
  const int64_t C = c.hidden_size, F = c.intermediate_size, HD = c.head_dim();
  const int64_t QD = c.num_attention_heads * HD, KD = c.num_key_value_heads * HD;
  switch (type) {
    case 0:
      return {QD, C};  // q
    case 1:
      return {KD, C};  // k
    case 2:
      return {KD, C};  // v
    case 3:
      return {C, QD};  // o
    case 4:
      return {F, C};  // gate
    case 5:
      return {F, C};  // up
    default:
      return {C, F};  // down
  }
}

template <class R>
LlamaModel<R>::LlamaModel(const ModelConfig& config, int B, int T) : config_(config), B_(B), T_(T) {
  config_.validate("model config");
  if (B <= 0 || T <= 0)
    throw Error("batch size and sequence length must be positive (got B=" + std::to_string(B) +
                ", T=" + std::to_string(T) + ")");
  if (T > config_.max_position_embeddings)
    throw Error("sequence length " + std::to_string(T) + " exceeds max_position_embeddings = " +
                std::to_string(config_.max_position_embeddings) + "; use a shorter --seq-len or a larger config");
  {  // refuse what cannot fit before allocating it (std::bad_alloc must not be reachable from input)
    const ModelConfig& mc = config_;
    const double BT = double(B) * T;
    const double acts = double(mc.num_hidden_layers) * (BT * (6.0 * mc.hidden_size + 4.0 * mc.intermediate_size) +
                                                        double(B) * mc.num_attention_heads * double(T) * T) +
                        3.0 * BT * mc.vocab_size;
    check_fits_in_memory(double(sizeof(R)) * (2.0 * double(mc.num_parameters()) + acts),
                         "this model (" + std::to_string(mc.num_parameters()) + " parameters) at batch " +
                             std::to_string(B) + "x" + std::to_string(T),
                         "use a smaller --batch-size/--seq-len or a smaller model");
  }
  const int L = config_.num_hidden_layers;
  const int64_t C = config_.hidden_size, V = config_.vocab_size;

  // ---- parameters: one arena, stacked per kind; HF-named per-layer slices ----
  const LinearShape sq = linear_shape(config_, 0), sk = linear_shape(config_, 1), so = linear_shape(config_, 3);
  const LinearShape sg = linear_shape(config_, 4), sd = linear_shape(config_, 6);
  auto layout_params = [&](LlamaParams<R>& p, std::unique_ptr<R[]>& mem) {
    ArenaLayout<R> a;
    a.add(p.embed, V * C);
    a.add(p.attn_norm, L * C);
    a.add(p.wq, L * sq.N * sq.K);
    a.add(p.wk, L * sk.N * sk.K);
    a.add(p.wv, L * sk.N * sk.K);
    a.add(p.wo, L * so.N * so.K);
    a.add(p.mlp_norm, L * C);
    a.add(p.wgate, L * sg.N * sg.K);
    a.add(p.wup, L * sg.N * sg.K);
    a.add(p.wdown, L * sd.N * sd.K);
    a.add(p.final_norm, C);
    if (!config_.tie_word_embeddings) a.add(p.lm_head, V * C);
    mem = a.allocate(&num_params_);
    if (config_.tie_word_embeddings) p.lm_head = p.embed;
  };
  layout_params(params_, param_mem_);
  layout_params(grads_, grad_mem_);

  const R* base = param_mem_.get();
  auto add_tensor = [&](const std::string& name, std::vector<int64_t> shape, const R* ptr) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    tensors_.push_back({name, std::move(shape), int64_t(ptr - base), n});
  };
  add_tensor("model.embed_tokens.weight", {V, C}, params_.embed);
  for (int l = 0; l < L; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    add_tensor(pre + "input_layernorm.weight", {C}, params_.attn_norm + l * C);
    const R* w[7] = {params_.wq, params_.wk, params_.wv, params_.wo, params_.wgate, params_.wup, params_.wdown};
    for (int t = 0; t < 7; ++t) {
      const LinearShape s = linear_shape(config_, t);
      if (t == 4) add_tensor(pre + "post_attention_layernorm.weight", {C}, params_.mlp_norm + l * C);
      add_tensor(pre + layer_type_module(LayerType(t)) + ".weight", {s.N, s.K}, w[t] + l * s.N * s.K);
    }
  }
  add_tensor("model.norm.weight", {C}, params_.final_norm);
  if (!config_.tie_word_embeddings) add_tensor("lm_head.weight", {V, C}, params_.lm_head);
  for (auto& info : linear_layers(config_.dims())) layer_names_.push_back(info.name);

  alloc_activations();
  alloc_backbufs(main_, retain_);
  precisions_.assign(size_t(num_linear_layers()), LinearPrecision::uniform(Precision::fp32));
  recipe_ = std::make_unique<Recipe>(RecipeOptions{});
}

template <class R>
LlamaModel<R>::~LlamaModel() = default;

template <class R>
void LlamaModel<R>::alloc_activations() {
  const int L = config_.num_hidden_layers, Lr = retain_ ? L : 1;
  const int64_t C = config_.hidden_size, F = config_.intermediate_size, V = config_.vocab_size;
  const int64_t HD = config_.head_dim(), NH = config_.num_attention_heads, KVH = config_.num_key_value_heads;
  const int B = B_, T = T_;
  const int64_t BT = int64_t(B) * T;
  acts_ = Acts{};
  ArenaLayout<R> a;
  Acts& x = acts_;
  a.add(x.res, (L + 1) * BT * C);
  a.add(x.mid, L * BT * C);
  a.add(x.ln1, L * BT * C);
  a.add(x.ln1_rstd, L * BT);
  a.add(x.q_lin, Lr * BT * NH * HD);  // one scratch slot unless retained
  a.add(x.k_lin, Lr * BT * KVH * HD);
  a.add(x.v, L * BT * KVH * HD);
  a.add(x.q_rot, L * BT * NH * HD);
  a.add(x.k_rot, L * BT * KVH * HD);
  a.add(x.probs, L * int64_t(B) * NH * T * T);
  a.add(x.att, L * BT * NH * HD);
  a.add(x.o_out, Lr * BT * C);
  a.add(x.ln2, L * BT * C);
  a.add(x.ln2_rstd, L * BT);
  a.add(x.gate, L * BT * F);
  a.add(x.up, L * BT * F);
  a.add(x.hmlp, L * BT * F);
  a.add(x.down_out, Lr * BT * C);
  a.add(x.lnf, BT * C);
  a.add(x.lnf_rstd, BT);
  a.add(x.logits, BT * V);
  a.add(x.probs_ce, BT * V);
  a.add(x.losses, BT);
  a.add(x.dlnf, BT * C);
  a.add(x.s_lnf, BT * C);
  a.add(x.s_rstd, BT);
  a.add(x.s_logits, BT * V);
  a.add(x.s_probs, BT * V);
  a.add(x.s_losses, BT);
  a.add(x.rope_cos, int64_t(T) * HD / 2);
  a.add(x.rope_sin, int64_t(T) * HD / 2);
  a.place(act_mem_, &act_count_);
  ops::rope_table(x.rope_cos, x.rope_sin, T, int(HD), config_.rope_theta);
}

template <class R>
void LlamaModel<R>::set_retain_intermediates(bool retain) {
  if (retain == retain_) return;
  retain_ = retain;
  alloc_activations();
  alloc_backbufs(main_, retain_);
  have_forward_ = false;
}

template <class R>
void LlamaModel<R>::alloc_backbufs(BackBufs& bb, bool full) {
  // full: every layer keeps its dY, dX and residual gradients (hooks); otherwise one layer's
  // worth of buffers is reused (dres alternates between two slots: ∂/∂R_{l+1} is read while ∂/∂R_l is written).
  const int L = full ? config_.num_hidden_layers : 1;
  const int64_t C = config_.hidden_size, BT = int64_t(B_) * T_;
  bb.full = full;
  ArenaLayout<R> a;
  for (int t = 0; t < 7; ++t) {
    const LinearShape s = linear_shape(config_, t);
    a.add(bb.dy[t], L * BT * s.N);
    a.add(bb.dx[t], L * BT * s.K);
  }
  a.add(bb.dres, (full ? L + 1 : 2) * BT * C);
  a.add(bb.dmid, L * BT * C);
  a.add(bb.dq_rot, BT * linear_shape(config_, 0).N);
  a.add(bb.dk_rot, BT * linear_shape(config_, 1).N);
  a.add(bb.dln, BT * C);
  a.place(bb.mem, &bb.count);
}

template <class R>
const ParamTensor* LlamaModel<R>::find_param(const std::string& name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

template <class R>
void LlamaModel<R>::init_weights(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 0.02);
  for (const auto& t : tensors_) {
    R* p = param_mem_.get() + t.offset;
    const bool is_norm = t.shape.size() == 1;
    for (int64_t i = 0; i < t.numel; ++i) p[i] = is_norm ? R(1) : R(normal(rng));
  }
}

template <class R>
void LlamaModel<R>::zero_grads() {
  std::fill(grad_mem_.get(), grad_mem_.get() + num_params_, R(0));
}

template <class R>
void LlamaModel<R>::set_precisions(const std::vector<LinearPrecision>& per_layer) {
  if (int(per_layer.size()) != num_linear_layers())
    throw Error("precision plan has " + std::to_string(per_layer.size()) + " layers, the model has " +
                std::to_string(num_linear_layers()) + " — was the plan resolved against another config?");
  if constexpr (std::is_same_v<R, double>) {
    for (const auto& p : per_layer)
      if (p != LinearPrecision::uniform(Precision::fp32))
        throw Error("the double-precision reference model runs fp32 GEMMs only");
  }
  precisions_ = per_layer;
}

template <class R>
void LlamaModel<R>::set_recipe(const Recipe& recipe) {
  recipe_ = std::make_unique<Recipe>(recipe);
}

// ---- the linear layers: fp32 is a plain GEMM, every other precision goes through qlinear ----

template <class R>
void LlamaModel<R>::linear_fprop(R* Y, const R* X, const R* W, int64_t K, int64_t N, int layer) {
  const int64_t BT = int64_t(B_) * T_;
  const Precision p = precisions_[size_t(layer)].fprop;
  if (p == Precision::fp32) {  // Y(BT,N) = X(BT,K)·W(N,K)ᵀ
    gemm(false, true, BT, N, K, R(1), X, K, W, K, R(0), Y, N);
    return;
  }
  if constexpr (std::is_same_v<R, float>) {
    QLinearContext ctx{recipe_.get(), quant_seed_, quant_step_, uint32_t(layer), layer_names_[size_t(layer)].c_str()};
    qlinear_fprop(Y, X, W, BT, K, N, p, ctx);
    return;
  }
  SNIP_ASSERT(false);
}

template <class R>
void LlamaModel<R>::linear_dgrad(R* dX, const R* dY, const R* W, int64_t K, int64_t N, int layer, bool fp32) const {
  const int64_t BT = int64_t(B_) * T_;
  const Precision p = fp32 ? Precision::fp32 : precisions_[size_t(layer)].dgrad;
  if (p == Precision::fp32) {  // dX(BT,K) = dY(BT,N)·W(N,K)
    gemm(false, false, BT, K, N, R(1), dY, N, W, K, R(0), dX, K);
    return;
  }
  if constexpr (std::is_same_v<R, float>) {
    QLinearContext ctx{recipe_.get(), quant_seed_, quant_step_, uint32_t(layer), layer_names_[size_t(layer)].c_str()};
    qlinear_dgrad(dX, dY, W, BT, K, N, p, ctx);
    return;
  }
  SNIP_ASSERT(false);
}

template <class R>
void LlamaModel<R>::linear_wgrad(R* dW, const R* dY, const R* X, int64_t K, int64_t N, int layer) const {
  const int64_t BT = int64_t(B_) * T_;
  const Precision p = precisions_[size_t(layer)].wgrad;
  if (p == Precision::fp32) {  // dW(N,K) += dY(BT,N)ᵀ·X(BT,K)
    gemm(true, false, N, K, BT, R(1), dY, N, X, K, R(1), dW, K);
    return;
  }
  if constexpr (std::is_same_v<R, float>) {
    QLinearContext ctx{recipe_.get(), quant_seed_, quant_step_, uint32_t(layer), layer_names_[size_t(layer)].c_str()};
    qlinear_wgrad(dW, dY, X, BT, K, N, p, ctx, /*accumulate=*/true);
    return;
  }
  SNIP_ASSERT(false);
}

template <class R>
R* LlamaModel<R>::dres_slot(BackBufs& bb, int b) const {
  return bb.dres + (bb.full ? b : (b & 1)) * int64_t(B_) * T_ * config_.hidden_size;
}

// ---- forward ----

template <class R>
void LlamaModel<R>::final_head_forward(R* lnf, R* rstd, R* logits, R* probs, R* losses, const R* Z, double* loss) {
  const int64_t BT = int64_t(B_) * T_, C = config_.hidden_size, V = config_.vocab_size;
  ops::rmsnorm_forward(lnf, rstd, Z, params_.final_norm, BT, int(C), config_.rms_norm_eps);
  gemm(false, true, BT, V, C, R(1), lnf, C, params_.lm_head, C, R(0), logits, V);  // logits = lnf·lm_headᵀ
  *loss = ops::crossentropy_forward(probs, losses, logits, targets_.data(), BT, int(V));
}

template <class R>
double LlamaModel<R>::forward(const int32_t* inputs, const int32_t* targets) {
  const int L = config_.num_hidden_layers;
  const int64_t C = config_.hidden_size, F = config_.intermediate_size, V = config_.vocab_size;
  const int NH = config_.num_attention_heads, KVH = config_.num_key_value_heads, HD = config_.head_dim();
  const int64_t BT = int64_t(B_) * T_, QD = int64_t(NH) * HD, KD = int64_t(KVH) * HD;
  for (int64_t i = 0; i < BT; ++i)
    if (inputs[i] < 0 || inputs[i] >= V || targets[i] < 0 || targets[i] >= V)
      throw Error("token id " + std::to_string(inputs[i] < 0 || inputs[i] >= V ? inputs[i] : targets[i]) +
                  " at position " + std::to_string(i) + " is outside the vocabulary [0, " + std::to_string(V) +
                  ") — was the data tokenized for another vocabulary?");
  inputs_.assign(inputs, inputs + BT);
  targets_.assign(targets, targets + BT);
  Acts& a = acts_;
  const LlamaParams<R>& p = params_;

  ops::embedding_forward(a.res, inputs, p.embed, BT, int(C));
  for (int l = 0; l < L; ++l) {
    const int li = l * kLayersPerBlock;
    R* res = a.res + l * BT * C;  // R_l (BT, C)
    R* ln1 = a.ln1 + l * BT * C;
    const int lr = retain_ ? l : 0;  // slot of the tensors kept only for the hooks
    R* q_lin = a.q_lin + lr * BT * QD;
    R* k_lin = a.k_lin + lr * BT * KD;
    R* v = a.v + l * BT * KD;
    R* q_rot = a.q_rot + l * BT * QD;
    R* k_rot = a.k_rot + l * BT * KD;
    R* probs = a.probs + l * int64_t(B_) * NH * T_ * T_;
    R* att = a.att + l * BT * QD;
    R* o_out = a.o_out + lr * BT * C;
    R* mid = a.mid + l * BT * C;
    R* ln2 = a.ln2 + l * BT * C;
    R* gate = a.gate + l * BT * F;
    R* up = a.up + l * BT * F;
    R* hmlp = a.hmlp + l * BT * F;
    R* down_out = a.down_out + lr * BT * C;
    R* res_next = a.res + (l + 1) * BT * C;

    ops::rmsnorm_forward(ln1, a.ln1_rstd + l * BT, res, p.attn_norm + l * C, BT, int(C), config_.rms_norm_eps);
    linear_fprop(q_lin, ln1, p.wq + l * QD * C, C, QD, li + 0);
    linear_fprop(k_lin, ln1, p.wk + l * KD * C, C, KD, li + 1);
    linear_fprop(v, ln1, p.wv + l * KD * C, C, KD, li + 2);
    ops::rope_forward(q_rot, q_lin, a.rope_cos, a.rope_sin, B_, T_, NH, HD);
    ops::rope_forward(k_rot, k_lin, a.rope_cos, a.rope_sin, B_, T_, KVH, HD);
    ops::attention_forward(att, probs, q_rot, k_rot, v, B_, T_, NH, KVH, HD);
    linear_fprop(o_out, att, p.wo + l * C * QD, QD, C, li + 3);
    ops::residual_forward(mid, res, o_out, BT * C);
    ops::rmsnorm_forward(ln2, a.ln2_rstd + l * BT, mid, p.mlp_norm + l * C, BT, int(C), config_.rms_norm_eps);
    linear_fprop(gate, ln2, p.wgate + l * F * C, C, F, li + 4);
    linear_fprop(up, ln2, p.wup + l * F * C, C, F, li + 5);
    ops::swiglu_forward(hmlp, gate, up, BT * F);
    linear_fprop(down_out, hmlp, p.wdown + l * C * F, F, C, li + 6);
    ops::residual_forward(res_next, mid, down_out, BT * C);
  }
  final_head_forward(a.lnf, a.lnf_rstd, a.logits, a.probs_ce, a.losses, a.res + L * BT * C, &loss_);
  have_forward_ = true;
  return loss_;
}

// ---- backward: the forward in reverse ----

template <class R>
void LlamaModel<R>::backward(double dloss) {
  SNIP_ASSERT_MSG(have_forward_, "backward() needs a forward() first");
  const int L = config_.num_hidden_layers;
  const int64_t C = config_.hidden_size, V = config_.vocab_size, BT = int64_t(B_) * T_;
  Acts& a = acts_;
  // d(mean CE)/dlogits = (softmax − onehot)/BT; s_probs serves as the dlogits buffer.
  R* dlogits = a.s_probs;
  ops::crossentropy_backward(dlogits, a.probs_ce, targets_.data(), BT, int(V), dloss / double(BT));
  gemm(true, false, V, C, BT, R(1), dlogits, V, a.lnf, C, R(1), grads_.lm_head, C);     // dW_head += dlogitsᵀ·lnf
  gemm(false, false, BT, C, V, R(1), dlogits, V, params_.lm_head, C, R(0), a.dlnf, C);  // dlnf = dlogits·W_head
  ops::rmsnorm_backward(dres_slot(main_, L), grads_.final_norm, a.dlnf, a.res + L * BT * C, params_.final_norm,
                        a.lnf_rstd, BT, int(C), /*accumulate=*/false);
  backward_blocks(main_, /*weight_grads=*/true);
  ops::embedding_backward(grads_.embed, dres_slot(main_, 0), inputs_.data(), BT, int(C));
}

template <class R>
void LlamaModel<R>::backward_blocks(BackBufs& bb, bool weight_grads) {
  BlockBackwardMode<R> mode;
  mode.weight_grads = weight_grads ? &grads_ : nullptr;
  for (int l = config_.num_hidden_layers - 1; l >= 0; --l) {
    BlockGrads<R> g = block_grads(bb, l);
    block_backward(l, dres_slot(bb, l + 1), g, mode);
  }
}

// Block l's slots of a backward buffer set (one reused slot unless bb.full).
template <class R>
BlockGrads<R> LlamaModel<R>::block_grads(BackBufs& bb, int l) const {
  const int64_t BT = int64_t(B_) * T_, C = config_.hidden_size;
  const int64_t lb = bb.full ? l : 0;
  BlockGrads<R> g;
  for (int t = 0; t < 7; ++t) {
    const LinearShape s = linear_shape(config_, t);
    g.dy[t] = bb.dy[t] + lb * BT * s.N;
    g.dx[t] = bb.dx[t] + lb * BT * s.K;
  }
  g.dmid = bb.dmid + lb * BT * C;
  g.dres = dres_slot(bb, l);
  g.dq_rot = bb.dq_rot, g.dk_rot = bb.dk_rot, g.dln = bb.dln;
  return g;
}

template <class R>
void LlamaModel<R>::block_backward(int l, const R* dres_next, BlockGrads<R>& g,
                                   const BlockBackwardMode<R>& mode) const {
  mlp_half_backward(l, HalfEntry::output, dres_next, g, mode);
  attention_half_backward(l, HalfEntry::output, g.dmid, g, mode);
}

// R_{l+1} = M_l + down(swiglu(gate(ln2), up(ln2))), ln2 = rmsnorm(M_l): the forward's second
// half in reverse. Entering at `output`, both the branch and M_l get ∂/∂R_{l+1}.
template <class R>
void LlamaModel<R>::mlp_half_backward(int l, HalfEntry from, const R* d, BlockGrads<R>& g,
                                      const BlockBackwardMode<R>& mode) const {
  const int li = l * kLayersPerBlock;
  const int64_t C = config_.hidden_size, F = config_.intermediate_size, BT = int64_t(B_) * T_;
  const Acts& a = acts_;
  const LlamaParams<R>& p = params_;
  LlamaParams<R>* wg = mode.weight_grads;
  const R* dln = d;  // ∂/∂ln2
  if (from != HalfEntry::norm_output) {
    const R* dh = d;  // ∂/∂h, h = silu(gate)·up
    if (from == HalfEntry::output) {
      std::memcpy(g.dy[6], d, sizeof(R) * BT * C);
      linear_dgrad(g.dx[6], g.dy[6], p.wdown + l * C * F, F, C, li + 6, mode.fp32);
      if (wg) linear_wgrad(wg->wdown + l * C * F, g.dy[6], a.hmlp + l * BT * F, F, C, li + 6);
      dh = g.dx[6];
    }
    ops::swiglu_backward(g.dy[4], g.dy[5], dh, a.gate + l * BT * F, a.up + l * BT * F, BT * F);
    linear_dgrad(g.dx[4], g.dy[4], p.wgate + l * F * C, C, F, li + 4, mode.fp32);
    linear_dgrad(g.dx[5], g.dy[5], p.wup + l * F * C, C, F, li + 5, mode.fp32);
    if (wg) {
      linear_wgrad(wg->wgate + l * F * C, g.dy[4], a.ln2 + l * BT * C, C, F, li + 4);
      linear_wgrad(wg->wup + l * F * C, g.dy[5], a.ln2 + l * BT * C, C, F, li + 5);
    }
    ops::residual_forward(g.dln, g.dx[4], g.dx[5], BT * C);
    dln = g.dln;
  }
  const bool pass_through = from == HalfEntry::output;
  if (pass_through) std::memcpy(g.dmid, d, sizeof(R) * BT * C);
  ops::rmsnorm_backward(g.dmid, wg ? wg->mlp_norm + l * C : nullptr, dln, a.mid + l * BT * C, p.mlp_norm + l * C,
                        a.ln2_rstd + l * BT, BT, int(C), /*accumulate=*/pass_through);
}

// M_l = R_l + o(attention(rope(q(ln1)), rope(k(ln1)), v(ln1))), ln1 = rmsnorm(R_l): the
// forward's first half in reverse. Entering at `output`, both the branch and R_l get ∂/∂M_l.
template <class R>
void LlamaModel<R>::attention_half_backward(int l, HalfEntry from, const R* d, BlockGrads<R>& g,
                                            const BlockBackwardMode<R>& mode) const {
  const int li = l * kLayersPerBlock;
  const int64_t C = config_.hidden_size;
  const int NH = config_.num_attention_heads, KVH = config_.num_key_value_heads, HD = config_.head_dim();
  const int64_t BT = int64_t(B_) * T_, QD = int64_t(NH) * HD, KD = int64_t(KVH) * HD;
  const Acts& a = acts_;
  const LlamaParams<R>& p = params_;
  LlamaParams<R>* wg = mode.weight_grads;
  const R* dln = d;  // ∂/∂ln1
  if (from != HalfEntry::norm_output) {
    const R* datt = d;  // ∂/∂(attention output)
    if (from == HalfEntry::output) {
      std::memcpy(g.dy[3], d, sizeof(R) * BT * C);
      linear_dgrad(g.dx[3], g.dy[3], p.wo + l * C * QD, QD, C, li + 3, mode.fp32);
      if (wg) linear_wgrad(wg->wo + l * C * QD, g.dy[3], a.att + l * BT * QD, QD, C, li + 3);
      datt = g.dx[3];
    }
    ops::attention_backward(g.dq_rot, g.dk_rot, g.dy[2], datt, a.probs + l * int64_t(B_) * NH * T_ * T_,
                            a.q_rot + l * BT * QD, a.k_rot + l * BT * KD, a.v + l * BT * KD, B_, T_, NH, KVH, HD);
    ops::rope_backward(g.dy[0], g.dq_rot, a.rope_cos, a.rope_sin, B_, T_, NH, HD);
    ops::rope_backward(g.dy[1], g.dk_rot, a.rope_cos, a.rope_sin, B_, T_, KVH, HD);
    linear_dgrad(g.dx[0], g.dy[0], p.wq + l * QD * C, C, QD, li + 0, mode.fp32);
    linear_dgrad(g.dx[1], g.dy[1], p.wk + l * KD * C, C, KD, li + 1, mode.fp32);
    linear_dgrad(g.dx[2], g.dy[2], p.wv + l * KD * C, C, KD, li + 2, mode.fp32);
    if (wg) {
      const R* ln1 = a.ln1 + l * BT * C;
      linear_wgrad(wg->wq + l * QD * C, g.dy[0], ln1, C, QD, li + 0);
      linear_wgrad(wg->wk + l * KD * C, g.dy[1], ln1, C, KD, li + 1);
      linear_wgrad(wg->wv + l * KD * C, g.dy[2], ln1, C, KD, li + 2);
    }
    ops::residual_forward(g.dln, g.dx[0], g.dx[1], BT * C);
    ops::residual_forward(g.dln, g.dln, g.dx[2], BT * C);
    dln = g.dln;
  }
  const bool pass_through = from == HalfEntry::output;
  if (pass_through) std::memcpy(g.dres, d, sizeof(R) * BT * C);
  ops::rmsnorm_backward(g.dres, wg ? wg->attn_norm + l * C : nullptr, dln, a.res + l * BT * C, p.attn_norm + l * C,
                        a.ln1_rstd + l * BT, BT, int(C), /*accumulate=*/pass_through);
}

template <class R>
BlockGradStorage<R>::BlockGradStorage(const LlamaModel<R>& model) {
  const ModelConfig& c = model.config();
  const int64_t BT = int64_t(model.batch_size()) * model.seq_len(), C = c.hidden_size;
  ArenaLayout<R> a;
  for (int t = 0; t < 7; ++t) {
    const LinearShape s = linear_shape(c, t);
    a.add(g_.dy[t], BT * s.N);
    a.add(g_.dx[t], BT * s.K);
  }
  a.add(g_.dmid, BT * C), a.add(g_.dres, BT * C), a.add(g_.dln, BT * C);
  a.add(g_.dq_rot, BT * linear_shape(c, 0).N), a.add(g_.dk_rot, BT * linear_shape(c, 1).N);
  int64_t count = 0;
  for (auto& v : a.views) count += v.second;
  mem_.assign(size_t(count), R(0));
  R* q = mem_.data();
  for (auto& v : a.views) *v.first = q, q += v.second;
}

// ---- hooks ----

template <class R>
LinearView<R> LlamaModel<R>::linear(int index) const {
  SNIP_ASSERT(index >= 0 && index < num_linear_layers());
  const int l = index / 7, t = index % 7;
  const LinearShape s = linear_shape(config_, t);
  const int64_t BT = int64_t(B_) * T_, F = config_.intermediate_size, C = config_.hidden_size;
  const int64_t QD = linear_shape(config_, 0).N;
  const Acts& a = acts_;
  LinearView<R> v;
  v.name = layer_names_[size_t(index)];
  v.index = index;
  v.rows = BT, v.K = s.K, v.N = s.N;
  const R* xs[7] = {a.ln1 + l * BT * C, a.ln1 + l * BT * C, a.ln1 + l * BT * C, a.att + l * BT * QD,
                    a.ln2 + l * BT * C, a.ln2 + l * BT * C, a.hmlp + l * BT * F};
  const R* ys[7] = {a.q_lin, a.k_lin, a.v, a.o_out, a.gate, a.up, a.down_out};
  const R* ws[7] = {params_.wq, params_.wk, params_.wv, params_.wo, params_.wgate, params_.wup, params_.wdown};
  const R* gs[7] = {grads_.wq, grads_.wk, grads_.wv, grads_.wo, grads_.wgate, grads_.wup, grads_.wdown};
  const bool hook_only = t == 0 || t == 1 || t == 3 || t == 6;  // q/k before RoPE, o and down outputs
  v.X = xs[t];
  v.Y = hook_only && !retain_ ? nullptr : ys[t] + l * BT * s.N;
  v.W = ws[t] + l * s.N * s.K;
  v.dW = gs[t] + l * s.N * s.K;
  v.dY = main_.full ? main_.dy[t] + l * BT * s.N : nullptr;
  v.dX = main_.full ? main_.dx[t] + l * BT * s.K : nullptr;
  return v;
}

template <class R>
LinearView<R> LlamaModel<R>::linear(const std::string& module_name) const {
  for (int i = 0; i < num_linear_layers(); ++i)
    if (layer_names_[size_t(i)] == module_name) return linear(i);
  throw Error("the model has no linear layer \"" + module_name + "\" (it has " +
              std::to_string(config_.num_hidden_layers) + " blocks; names look like model.layers.0.self_attn.q_proj)");
}

template <class R>
LinearView<R> LlamaModel<R>::probe_linear(int index) const {
  SNIP_ASSERT_MSG(probe_.mem != nullptr, "probe_linear() needs backward_from_residual() first");
  LinearView<R> v = linear(index);
  const int l = index / 7, t = index % 7;
  const int64_t BT = int64_t(B_) * T_;
  v.dY = probe_.dy[t] + l * BT * v.N;
  v.dX = probe_.dx[t] + l * BT * v.K;
  v.dW = nullptr;
  return v;
}

template <class R>
const R* LlamaModel<R>::residual(int b) const {
  SNIP_ASSERT(b >= 0 && b <= config_.num_hidden_layers);
  return acts_.res + b * int64_t(B_) * T_ * config_.hidden_size;
}
template <class R>
const R* LlamaModel<R>::residual_mid(int b) const {
  SNIP_ASSERT(b >= 0 && b < config_.num_hidden_layers);
  return acts_.mid + b * int64_t(B_) * T_ * config_.hidden_size;
}
template <class R>
const R* LlamaModel<R>::residual_grad(int b) const {
  SNIP_ASSERT_MSG(main_.full, "residual_grad() needs set_retain_intermediates(true)");
  SNIP_ASSERT(b >= 0 && b <= config_.num_hidden_layers);
  return main_.dres + b * int64_t(B_) * T_ * config_.hidden_size;
}
template <class R>
const R* LlamaModel<R>::residual_mid_grad(int b) const {
  SNIP_ASSERT_MSG(main_.full, "residual_mid_grad() needs set_retain_intermediates(true)");
  SNIP_ASSERT(b >= 0 && b < config_.num_hidden_layers);
  return main_.dmid + b * int64_t(B_) * T_ * config_.hidden_size;
}
template <class R>
const R* LlamaModel<R>::probe_residual_grad(int b) const {
  SNIP_ASSERT(probe_.mem != nullptr && b >= 0 && b <= config_.num_hidden_layers);
  return probe_.dres + b * int64_t(B_) * T_ * config_.hidden_size;
}
template <class R>
const R* LlamaModel<R>::probe_residual_mid_grad(int b) const {
  SNIP_ASSERT(probe_.mem != nullptr && b >= 0 && b < config_.num_hidden_layers);
  return probe_.dmid + b * int64_t(B_) * T_ * config_.hidden_size;
}

template <class R>
double LlamaModel<R>::loss_from_residual(const R* Z) {
  SNIP_ASSERT_MSG(have_forward_, "loss_from_residual() needs a forward() first (for the targets)");
  Acts& a = acts_;
  double loss = 0;
  final_head_forward(a.s_lnf, a.s_rstd, a.s_logits, a.s_probs, a.s_losses, Z, &loss);
  return loss;
}

template <class R>
void LlamaModel<R>::backward_from_residual(const R* dZ) {
  SNIP_ASSERT_MSG(have_forward_, "backward_from_residual() needs a forward() first");
  if (!probe_.mem) alloc_backbufs(probe_, /*full=*/true);
  const int64_t n = int64_t(B_) * T_ * config_.hidden_size;
  std::memcpy(probe_.dres + config_.num_hidden_layers * n, dZ, sizeof(R) * n);
  backward_blocks(probe_, /*weight_grads=*/false);
}

// ---- non-finite detection ----

template <class R>
std::string LlamaModel<R>::first_nonfinite_activation() const {
  const int L = config_.num_hidden_layers;
  const int64_t BT = int64_t(B_) * T_, C = config_.hidden_size, V = config_.vocab_size;
  const Acts& a = acts_;
  if (!all_finite(a.res, BT * C)) return "model.embed_tokens output";
  for (int l = 0; l < L; ++l) {
    const std::string pre = "model.layers." + std::to_string(l) + ".";
    if (!all_finite(a.ln1 + l * BT * C, BT * C)) return pre + "input_layernorm output";
    for (int t = 0; t < 7; ++t) {
      const LinearView<R> v = linear(l * kLayersPerBlock + t);
      if (v.Y && !all_finite(v.Y, BT * v.N)) return v.name + " output";
      if (t == 3 && !all_finite(a.mid + l * BT * C, BT * C)) return pre + "self_attn residual (M)";
      if (t == 3 && !all_finite(a.ln2 + l * BT * C, BT * C)) return pre + "post_attention_layernorm output";
      const int64_t QD = linear_shape(config_, 0).N;
      if (t == 2 && !all_finite(a.att + l * BT * QD, BT * QD)) return pre + "self_attn attention output";
    }
    if (!all_finite(a.res + (l + 1) * BT * C, BT * C)) return pre + "output (residual)";
  }
  if (!all_finite(a.lnf, BT * C)) return "model.norm output";
  if (!all_finite(a.logits, BT * V)) return "lm_head output (logits)";
  return "";
}

template <class R>
std::string LlamaModel<R>::first_nonfinite_param(bool values) const {
  const R* base = values ? param_mem_.get() : grad_mem_.get();
  for (const auto& t : tensors_)
    if (!all_finite(base + t.offset, t.numel)) return t.name;
  return "";
}

template <class R>
typename LlamaModel<R>::MemoryUse LlamaModel<R>::memory_use() const {
  MemoryUse m;
  m.params = num_params_ * int64_t(sizeof(R));
  m.grads = num_params_ * int64_t(sizeof(R));
  m.activations = act_count_ * int64_t(sizeof(R));
  m.backward = (main_.count + probe_.count) * int64_t(sizeof(R));
  return m;
}

template class LlamaModel<float>;
template class LlamaModel<double>;
template class BlockGradStorage<float>;
template class BlockGradStorage<double>;

}  // namespace snip
