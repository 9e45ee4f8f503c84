// One SNIP statistics round on a live model (stats_round.h; METHOD.md section 4, 5.2 step 1).
#include "snip/stats_round.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>

#include "snip/error.h"
#include "snip/hutchinson.h"
#include "snip/llama_ops.h"
#include "snip/qgemm.h"
#include "snip/qlinear.h"
#include "snip/stats_keys.h"
#include "snip/trainer.h"

namespace snip {
namespace {

using Buf = std::vector<float>;

double sum_sq(const float* a, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(a[i]);
  return s;
}
// ‖a − b‖² in double
double diff_sq(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = double(a[i]) - double(b[i]);
    s += d * d;
  }
  return s;
}
// The quantized W and dY operands of one layer's GEMMs at one precision (FORMATS.md tilings);
// the input X's are kept in XQuant.
struct QuantizedOperands {
  Buf wf, gd, wd, gw;  // fprop W; dgrad dY, W; wgrad dY
  void reserve(int64_t tn, int64_t nk) {
    gd.resize(size_t(tn)), gw.resize(size_t(tn));
    wf.resize(size_t(nk)), wd.resize(size_t(nk));
  }
};

// Quantizes one operand exactly as the quantized GEMM does (qlinear_quantize_operand) into out
// and returns ‖e_p‖.
double quantize_err(float* out, const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                    const QLinearContext& ctx) {
  QuantStats st;
  qlinear_quantize_operand(out, src, rows, cols, p, g, op, ctx, &st);
  return std::sqrt(st.err_sq);
}

// One layer input X quantized for fprop and wgrad at one precision, kept for the next layer
// when it reads the same X (reusable: no stochastic rounding, so the layer's key does not matter).
struct XQuant {
  const float* src = nullptr;
  int64_t K = 0;
  bool reusable = false;
  double err_f = 0, err_w = 0;
  Buf xf, xw;
};

bool deterministic(const Recipe& recipe, Precision p, Gemm g, Operand op) {
  return recipe.spec(p, g, op).rounding != Rounding::stochastic;
}

// True when W quantizes to the same tensor in fprop and dgrad (same spec, no stochastic
// rounding), as with the snip recipe's 2D 128×128 weight blocks: one quantization serves both.
bool same_weight_quantization(const Recipe& recipe, Precision p) {
  const QuantSpec f = recipe.spec(p, Gemm::fprop, Operand::weight);
  return f == recipe.spec(p, Gemm::dgrad, Operand::weight) && f.rounding != Rounding::stochastic;
}

// The three GEMMs of qlinear_{fprop,dgrad,wgrad} on operands already quantized by
// qlinear_quantize_operand (so each operand is quantized once per round, not twice): the same
// cblas_sgemm calls and the same BF16 output rounding, hence bit-identical results (a test
// compares them with qlinear_*). With nvfp4's Hadamard option the wgrad operands arrive rotated,
// as in qlinear_wgrad, and the rotation cancels in the product.
// FP4 GEMMs run on E2M1 codes and FP8/BF16 GEMMs on BF16 codes, not on these dequantized copies
// (snip/qgemm.h): unless SNIP_QGEMM=sgemm asks for the dequantize-then-sgemm path for FP8/BF16,
// those call qlinear_* itself on the source tensors X, W, dY (re-quantizing them, fast path, no
// statistics).
void quantized_gemms(float* Y, float* dX, float* dW, const float* xf, const float* wf, const float* gd, const float* wd,
                     const float* gw, const float* xw, int64_t T, int64_t K, int64_t N, Precision p,
                     const QLinearContext& ctx, const float* X, const float* W, const float* dY) {
  if (p == Precision::fp4 || (p != Precision::fp32 && qgemm_mode() != QGemmMode::sgemm)) {
    qlinear_fprop(Y, X, W, T, K, N, p, ctx);
    qlinear_dgrad(dX, dY, W, T, K, N, p, ctx);
    qlinear_wgrad(dW, dY, X, T, K, N, p, ctx);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1.0f, xf, int(K), wf, int(K), 0.0f, Y,
              int(N));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(K), int(N), 1.0f, gd, int(N), wd, int(K), 0.0f, dX,
              int(K));
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(K), int(T), 1.0f, gw, int(N), xw, int(K), 0.0f, dW,
              int(K));
  if (ctx.recipe->options().bf16_output && p != Precision::fp32) {
    QuantSpec bf;
    bf.format = ElemFormat::bf16;
    const std::string label = std::string(ctx.layer_name) + ": statistics-round GEMM output";
    fake_quantize(Y, Y, T, N, bf, RngKey{}, label.c_str());
    fake_quantize(dX, dX, T, K, bf, RngKey{}, label.c_str());
    fake_quantize(dW, dW, N, K, bf, RngKey{}, label.c_str());
  }
}

// Recomputed per-block forward quantities the local backward maps need (the model caches them
// privately): RMSNorm rstd of both norms, q/k after RoPE and the attention probabilities.
struct BlockLocal {
  Buf rstd1, rstd2, scratch_ln;  // (BT), (BT), (BT,C)
  Buf q_rot, k_rot, att, probs;  // (BT,QD), (BT,KD), (BT,QD), (B,NH,T,T)
};

// Scratch buffers of the exact-mode backward (LocalBackward's exact methods), sized for one block.
struct ExactScratch {
  Buf dq_rot, dk_rot, dq, dk, dv, dg, du, dln, d_att, d_h, res_a, res_b;
  explicit ExactScratch(const ModelConfig& c, int64_t BT) {
    const int64_t C = c.hidden_size, F = c.intermediate_size, QD = int64_t(c.num_attention_heads) * c.head_dim(),
                  KD = int64_t(c.num_key_value_heads) * c.head_dim();
    dq_rot.resize(size_t(BT * QD)), dq.resize(size_t(BT * QD)), d_att.resize(size_t(BT * QD));
    dk_rot.resize(size_t(BT * KD)), dk.resize(size_t(BT * KD)), dv.resize(size_t(BT * KD));
    dg.resize(size_t(BT * F)), du.resize(size_t(BT * F)), d_h.resize(size_t(BT * F));
    dln.resize(size_t(BT * C)), res_a.resize(size_t(BT * C)), res_b.resize(size_t(BT * C));
  }
};

// Maps gradient errors of one block to its residual-stream points exactly (METHOD.md 5.2 step 1).
// Every map is the model's own backward, which is linear in the incoming gradient.
class LocalBackward {
 public:
  LocalBackward(const Llama& m, int block) : m_(m), b_(block) {
    const ModelConfig& c = m.config();
    B_ = m.batch_size(), T_ = m.seq_len();
    BT_ = int64_t(B_) * T_, C_ = c.hidden_size, F_ = c.intermediate_size;
    NH_ = c.num_attention_heads, KVH_ = c.num_key_value_heads, HD_ = c.head_dim();
    QD_ = int64_t(NH_) * HD_, KD_ = int64_t(KVH_) * HD_;
    const LlamaParams<float>& p = m.params();
    // rstd of input_layernorm (on R_b) and post_attention_layernorm (on M_b)
    loc_.rstd1.resize(size_t(BT_)), loc_.rstd2.resize(size_t(BT_)), loc_.scratch_ln.resize(size_t(BT_ * C_));
    ops::rmsnorm_forward(loc_.scratch_ln.data(), loc_.rstd1.data(), m.residual(b_), p.attn_norm + b_ * C_, BT_, int(C_),
                         c.rms_norm_eps);
    ops::rmsnorm_forward(loc_.scratch_ln.data(), loc_.rstd2.data(), m.residual_mid(b_), p.mlp_norm + b_ * C_, BT_,
                         int(C_), c.rms_norm_eps);
    // RoPE'd q, k and softmax probabilities P (B,NH,T,T)
    cos_.resize(size_t(T_) * HD_ / 2), sin_.resize(size_t(T_) * HD_ / 2);
    ops::rope_table(cos_.data(), sin_.data(), T_, HD_, c.rope_theta);
    loc_.q_rot.resize(size_t(BT_ * QD_)), loc_.k_rot.resize(size_t(BT_ * KD_));
    ops::rope_forward(loc_.q_rot.data(), m.linear(idx(LayerType::q)).Y, cos_.data(), sin_.data(), B_, T_, NH_, HD_);
    ops::rope_forward(loc_.k_rot.data(), m.linear(idx(LayerType::k)).Y, cos_.data(), sin_.data(), B_, T_, KVH_, HD_);
    loc_.att.resize(size_t(BT_ * QD_)), loc_.probs.resize(size_t(B_) * NH_ * T_ * T_);
    ops::attention_forward(loc_.att.data(), loc_.probs.data(), loc_.q_rot.data(), loc_.k_rot.data(),
                           m.linear(idx(LayerType::v)).Y, B_, T_, NH_, KVH_, HD_);
    dr_.resize(size_t(BT_ * C_)), dln_.resize(size_t(BT_ * C_)), tmp_.resize(size_t(BT_ * C_));
  }

  int idx(LayerType t) const { return b_ * kLayersPerBlock + int(t); }
  const Buf& last_residual_err() const { return dr_; }

  // Layer t's dgrad error δdX (BT, K_t) -> ‖δr‖² at R_b (q,k,v,o) or M_b (gate,up,down); the
  // sibling output-gradient errors ‖δG‖² for o (at q,k,v) and down (at gate,up) go to *sib.
  double resid_err_sq(LayerType t, const float* ddx, std::vector<std::pair<LayerType, double>>* sib) {
    sib->clear();
    const LlamaParams<float>& p = m_.params();
    switch (t) {
      case LayerType::q:
      case LayerType::k:
      case LayerType::v:  // input_layernorm backward -> R_b
        return norm_back(ddx, /*mid=*/false);
      case LayerType::gate:
      case LayerType::up:  // post_attention_layernorm backward -> M_b
        return norm_back(ddx, /*mid=*/true);
      case LayerType::o: {
        // attention backward: δdX_o is ∂/∂(attention output); gives δG at q (after RoPE⁻ᵀ), k, v
        Buf dq_rot(size_t(BT_ * QD_)), dk_rot(size_t(BT_ * KD_)), dq(size_t(BT_ * QD_)), dk(size_t(BT_ * KD_)),
            dv(size_t(BT_ * KD_));
        ops::attention_backward(dq_rot.data(), dk_rot.data(), dv.data(), ddx, loc_.probs.data(), loc_.q_rot.data(),
                                loc_.k_rot.data(), m_.linear(idx(LayerType::v)).Y, B_, T_, NH_, KVH_, HD_);
        ops::rope_backward(dq.data(), dq_rot.data(), cos_.data(), sin_.data(), B_, T_, NH_, HD_);
        ops::rope_backward(dk.data(), dk_rot.data(), cos_.data(), sin_.data(), B_, T_, KVH_, HD_);
        sib->push_back({LayerType::q, sum_sq(dq.data(), BT_ * QD_)});
        sib->push_back({LayerType::k, sum_sq(dk.data(), BT_ * KD_)});
        sib->push_back({LayerType::v, sum_sq(dv.data(), BT_ * KD_)});
        // their dgrads (exact FP32 maps), summed into ∂/∂ln1, then input_layernorm backward
        dgrad_sum({{dq.data(), p.wq + b_ * QD_ * C_, QD_},
                   {dk.data(), p.wk + b_ * KD_ * C_, KD_},
                   {dv.data(), p.wv + b_ * KD_ * C_, KD_}});
        return norm_back(dln_.data(), false);
      }
      case LayerType::down: {
        // SwiGLU backward: δdX_down is ∂/∂h, h = silu(gate)·up; gives δG at gate and up
        Buf dg(size_t(BT_ * F_)), du(size_t(BT_ * F_));
        ops::swiglu_backward(dg.data(), du.data(), ddx, m_.linear(idx(LayerType::gate)).Y,
                             m_.linear(idx(LayerType::up)).Y, BT_ * F_);
        sib->push_back({LayerType::gate, sum_sq(dg.data(), BT_ * F_)});
        sib->push_back({LayerType::up, sum_sq(du.data(), BT_ * F_)});
        dgrad_sum({{dg.data(), p.wgate + b_ * F_ * C_, F_}, {du.data(), p.wup + b_ * F_ * C_, F_}});
        return norm_back(dln_.data(), true);
      }
    }
    return 0;
  }

  // ---- exact ΔW mode (METHOD.md 5.2 `exact`): the FP32 backward of a gradient error through
  // this block, linear in the error. visit(layer index, δG (BT, N)) is called for every linear
  // layer whose output gradient the error reaches. `addend` (may be null) is the residual
  // gradient that bypasses the branch (added to the norm backward's result).
  using Visit = std::function<void(int, const float*)>;

  // δ at the input of the block's first (mid = false) or second norm -> δR_b or δM_b (+ addend).
  void norm_input_back(const float* d_ln, bool mid, const float* addend, float* out) const {
    const LlamaParams<float>& p = m_.params();
    const float* x = mid ? m_.residual_mid(b_) : m_.residual(b_);
    const float* w = (mid ? p.mlp_norm : p.attn_norm) + b_ * C_;
    const float* rstd = mid ? loc_.rstd2.data() : loc_.rstd1.data();
    if (addend) std::memcpy(out, addend, sizeof(float) * size_t(BT_ * C_));
    ops::rmsnorm_backward(out, static_cast<float*>(nullptr), d_ln, x, w, rstd, BT_, int(C_), addend != nullptr);
  }
  // δ(attention output) (BT, QD): attention backward (q, k, v visited), their dgrads,
  // input_layernorm backward -> δR_b (+ addend).
  void attention_input_back(const float* d_att, const float* addend, float* out, ExactScratch& s,
                            const Visit& visit) const {
    const LlamaParams<float>& p = m_.params();
    ops::attention_backward(s.dq_rot.data(), s.dk_rot.data(), s.dv.data(), d_att, loc_.probs.data(), loc_.q_rot.data(),
                            loc_.k_rot.data(), m_.linear(idx(LayerType::v)).Y, B_, T_, NH_, KVH_, HD_);
    ops::rope_backward(s.dq.data(), s.dq_rot.data(), cos_.data(), sin_.data(), B_, T_, NH_, HD_);
    ops::rope_backward(s.dk.data(), s.dk_rot.data(), cos_.data(), sin_.data(), B_, T_, KVH_, HD_);
    visit(idx(LayerType::q), s.dq.data());
    visit(idx(LayerType::k), s.dk.data());
    visit(idx(LayerType::v), s.dv.data());
    dgrad32(s.dln.data(), s.dq.data(), p.wq + b_ * QD_ * C_, C_, QD_, false);
    dgrad32(s.dln.data(), s.dk.data(), p.wk + b_ * KD_ * C_, C_, KD_, true);
    dgrad32(s.dln.data(), s.dv.data(), p.wv + b_ * KD_ * C_, C_, KD_, true);
    norm_input_back(s.dln.data(), false, addend, out);
  }
  // δh (BT, F), the input of down_proj: SwiGLU backward (gate, up visited), their dgrads,
  // post_attention_layernorm backward -> δM_b (+ addend).
  void mlp_input_back(const float* d_h, const float* addend, float* out, ExactScratch& s, const Visit& visit) const {
    const LlamaParams<float>& p = m_.params();
    ops::swiglu_backward(s.dg.data(), s.du.data(), d_h, m_.linear(idx(LayerType::gate)).Y,
                         m_.linear(idx(LayerType::up)).Y, BT_ * F_);
    visit(idx(LayerType::gate), s.dg.data());
    visit(idx(LayerType::up), s.du.data());
    dgrad32(s.dln.data(), s.dg.data(), p.wgate + b_ * F_ * C_, C_, F_, false);
    dgrad32(s.dln.data(), s.du.data(), p.wup + b_ * F_ * C_, C_, F_, true);
    norm_input_back(s.dln.data(), true, addend, out);
  }
  // δM_b -> δR_b through the attention half (o visited; the residual carries δM_b past it).
  void attention_half_back(const float* d_mid, float* out, ExactScratch& s, const Visit& visit) const {
    visit(idx(LayerType::o), d_mid);
    dgrad32(s.d_att.data(), d_mid, m_.params().wo + b_ * C_ * QD_, QD_, C_, false);
    attention_input_back(s.d_att.data(), d_mid, out, s, visit);
  }
  // δR_{b+1} -> δM_b through the MLP half (down visited; the residual carries δR_{b+1} past it).
  void mlp_half_back(const float* d_next, float* out, ExactScratch& s, const Visit& visit) const {
    visit(idx(LayerType::down), d_next);
    dgrad32(s.d_h.data(), d_next, m_.params().wdown + b_ * C_ * F_, F_, C_, false);
    mlp_input_back(s.d_h.data(), d_next, out, s, visit);
  }

 private:
  // dX (BT, K) (+)= dY (BT, N) · W (N, K), FP32
  void dgrad32(float* dx, const float* dy, const float* W, int64_t K, int64_t N, bool accumulate) const {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(BT_), int(K), int(N), 1.0f, dy, int(N), W, int(K),
                accumulate ? 1.0f : 0.0f, dx, int(K));
  }
  struct DgradTerm {
    const float* dy;  // (BT, N)
    const float* W;   // (N, C)
    int64_t N;
  };
  // dln = Σ dy·W  (BT, C), exact FP32 GEMMs
  void dgrad_sum(std::initializer_list<DgradTerm> terms) {
    Recipe recipe;
    QLinearContext ctx;
    ctx.recipe = &recipe;
    std::fill(dln_.begin(), dln_.end(), 0.0f);
    for (const DgradTerm& t : terms) {
      qlinear_dgrad(tmp_.data(), t.dy, t.W, BT_, C_, t.N, Precision::fp32, ctx);
      for (int64_t i = 0; i < BT_ * C_; ++i) dln_[size_t(i)] += tmp_[size_t(i)];
    }
  }
  // RMSNorm backward of the block's first (mid = false) or second norm; returns ‖δr‖².
  double norm_back(const float* dy, bool mid) {
    const LlamaParams<float>& p = m_.params();
    const float* x = mid ? m_.residual_mid(b_) : m_.residual(b_);
    const float* w = (mid ? p.mlp_norm : p.attn_norm) + b_ * C_;
    const float* rstd = mid ? loc_.rstd2.data() : loc_.rstd1.data();
    ops::rmsnorm_backward(dr_.data(), static_cast<float*>(nullptr), dy, x, w, rstd, BT_, int(C_), false);
    return sum_sq(dr_.data(), BT_ * C_);
  }

  const Llama& m_;
  int b_;
  int B_, T_, NH_, KVH_, HD_;
  int64_t BT_, C_, F_, QD_, KD_;
  BlockLocal loc_;
  Buf cos_, sin_, dr_, dln_, tmp_;
};

// Exact ΔW mode: back-propagates δdX at the input of linear layer m through the frozen graph
// (FP32, linear in δdX): its own block from m's input down to R_b, then every earlier block.
// blocks[b] must exist for every b ≤ m's block.
void exact_backward(const std::vector<std::unique_ptr<LocalBackward>>& blocks, int m, const float* ddx, ExactScratch& s,
                    const LocalBackward::Visit& visit) {
  const int bm = m / kLayersPerBlock;
  float* cur = s.res_a.data();  // δR
  float* mid = s.res_b.data();  // δM
  const LocalBackward& lb = *blocks[size_t(bm)];
  switch (LayerType(m % kLayersPerBlock)) {
    case LayerType::q:
    case LayerType::k:
    case LayerType::v:
      lb.norm_input_back(ddx, false, nullptr, cur);
      break;
    case LayerType::o:
      lb.attention_input_back(ddx, nullptr, cur, s, visit);
      break;
    case LayerType::gate:
    case LayerType::up:
      lb.norm_input_back(ddx, true, nullptr, mid);
      lb.attention_half_back(mid, cur, s, visit);
      break;
    case LayerType::down:
      lb.mlp_input_back(ddx, nullptr, mid, s, visit);
      lb.attention_half_back(mid, cur, s, visit);
      break;
  }
  for (int b = bm - 1; b >= 0; --b) {
    blocks[size_t(b)]->mlp_half_back(cur, mid, s, visit);
    blocks[size_t(b)]->attention_half_back(mid, cur, s, visit);
  }
}

// The model keeps every layer's hook tensors only when asked (set_retain_intermediates, newer
// model versions); these helpers compile against either version.
template <class M>
void set_retain(M& m, bool retain) {
  if constexpr (requires { m.set_retain_intermediates(retain); }) m.set_retain_intermediates(retain);
}
template <class M>
bool retains(const M& m) {
  if constexpr (requires { m.retains_intermediates(); })
    return m.retains_intermediates();
  else
    return true;
}

void fill_gaussian(std::vector<float>& out, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<double> nd(0.0, sigma);
  for (float& x : out) x = float(nd(rng));
}

// HAWQ-V3's sensitivity input: the Hutchinson trace of every linear layer's weight Hessian on this
// batch, in FP32 GEMMs (BF16 rounding would swamp the finite differences). 2·probes forward and
// backward passes; the weights are restored bit for bit and the precisions as they were; the
// gradients are left overwritten (the round has read them).
void record_hessian_traces(Llama& model, const int32_t* inputs, const int32_t* targets, const StatsRoundOptions& o,
                           StatsRound& round) {
  const int NL = model.num_linear_layers();
  const std::vector<LinearPrecision> saved = model.precisions();
  model.set_precisions(std::vector<LinearPrecision>(size_t(NL), LinearPrecision::uniform(Precision::fp32)));
  float* p = model.param_data();
  const int64_t np = model.num_params();
  const std::vector<float> w0(p, p + np);
  std::vector<HessianBlock> blocks;
  for (int l = 0; l < NL; ++l) {
    const ParamTensor* t = model.find_param(model.linear(l).name + ".weight");
    SNIP_ASSERT(t != nullptr);
    const double rms = std::sqrt(sum_sq(p + t->offset, t->numel) / double(t->numel));
    blocks.push_back({t->offset, t->offset + t->numel, o.hessian_eps_rel * (rms > 0 ? rms : 1.0)});
  }
  auto grad_at = [&](const std::vector<float>& delta, std::vector<float>& grad) {
    for (int64_t i = 0; i < np; ++i) p[i] = w0[size_t(i)] + delta[size_t(i)];
    const double loss = model.forward(inputs, targets);
    if (!std::isfinite(loss)) throw Error("statistics round: the loss is not finite while probing the Hessian trace");
    model.zero_grads();
    model.backward(1.0);
    grad.assign(model.grad_data(), model.grad_data() + np);
  };
  const std::vector<double> traces =
      hessian_block_traces(grad_at, np, blocks, o.hessian_probes, o.seed * 0xD1B54A32D192ED03ull + uint64_t(o.step));
  std::copy(w0.begin(), w0.end(), p);
  model.set_precisions(saved);
  for (int l = 0; l < NL; ++l)
    for (LayerStats& ls : round.layers)
      if (ls.name == model.linear(l).name) ls.scalars[keys::kLayerHessianTraceW] = traces[size_t(l)];
}

void check_round_inputs(const Llama& model, const AdamW<float>& opt, const StatsRoundOptions& o) {
  if (o.noise_passes < 1) throw Error("statistics round: noise_passes must be ≥ 1 (METHOD.md uses 3)");
  if (!(o.lr > 0) || !std::isfinite(o.lr))
    throw Error("statistics round: the learning rate of the next step must be positive (got " + std::to_string(o.lr) +
                "); pass the schedule's value at the round's step");
  if (!(o.sigma_eta_rel > 0)) throw Error("statistics round: sigma_eta_rel must be positive (default 1e-2)");
  if (opt.num_params() != model.num_params())
    throw Error("statistics round: the optimizer state has " + std::to_string(opt.num_params()) +
                " parameters but the model has " + std::to_string(model.num_params()));
}

// ---- stage 1: the clean BF16 pass; its activations and gradients stay cached for stage 4 ----
double clean_bf16_pass(Llama& model, const int32_t* inputs, const int32_t* targets, int64_t step) {
  model.set_precisions(
      std::vector<LinearPrecision>(size_t(model.num_linear_layers()), LinearPrecision::uniform(Precision::bf16)));
  const double loss0 = model.forward(inputs, targets);
  if (!std::isfinite(loss0))
    throw Error("statistics round at step " + std::to_string(step) + ": the clean BF16 loss is not finite (" +
                model.first_nonfinite_activation() + "); the model has diverged");
  model.zero_grads();
  model.backward(1.0);
  if (const std::string bad = model.first_nonfinite_param(false); !bad.empty())
    throw Error("statistics round at step " + std::to_string(step) + ": the gradient of " + bad + " is not finite");
  return loss0;
}

// AdamW of the next step t+1 (optimizer.h): g' = s·g, m' = β1 m + (1−β1) g', v' = β2 v + (1−β2) g'²,
// u = lr·wd·p + lr/(1−β1^{t+1}) · m'/(√v'/√(1−β2^{t+1}) + ε).
struct NextAdamStep {
  AdamWConfig ac;
  double lr = 0;
  double bc1 = 0, bc2 = 0;  // bias corrections 1−β1^{t+1}, 1−β2^{t+1}
  double grad_norm = 0;     // global norm of the clean gradient
  double clip_scale = 1;    // s: the clip factor of this batch's gradient
  double k_t = 0;           // s·lr·(1−β1)/(1−β1^{t+1}): a gradient error's weight in the update
};

NextAdamStep next_adam_step(const Llama& model, const AdamW<float>& opt, const StatsRoundOptions& o) {
  NextAdamStep n;
  n.ac = opt.config();
  n.lr = o.lr;
  const double t1 = double(opt.t() + 1);
  n.bc1 = 1 - std::pow(n.ac.beta1, t1), n.bc2 = 1 - std::pow(n.ac.beta2, t1);
  n.grad_norm = grad_global_norm(model.grad_data(), model.num_params());
  const double g = n.grad_norm;
  n.clip_scale = (o.grad_clip > 0 && o.grad_clip / (g + 1e-6) < 1) ? o.grad_clip / (g + 1e-6) : 1.0;
  n.k_t = n.clip_scale * o.lr * (1 - n.ac.beta1) / n.bc1;
  return n;
}

// ---- stage 2: backward-noise passes: Hutchinson at every Y_l, per channel, and at R_b / M_b ----
struct BackwardNoise {
  double sigma_eps = 0;
  std::vector<double> jt_y;               // per linear layer: mean ‖Jᵀε‖² at Y_l
  std::vector<double> jt_r, jt_m;         // per block: the same at R_b and M_b
  std::vector<std::vector<double>> gain;  // per linear layer and output channel: γ_i
};

BackwardNoise backward_noise_passes(Llama& model, const StatsRoundOptions& o, std::mt19937_64& rng) {
  const int L = model.config().num_hidden_layers, NL = model.num_linear_layers();
  const int64_t BTC = int64_t(model.batch_size()) * model.seq_len() * model.config().hidden_size;
  BackwardNoise bn;
  bn.jt_y.assign(size_t(NL), 0.0), bn.jt_r.assign(size_t(L), 0.0), bn.jt_m.assign(size_t(L), 0.0);
  bn.gain.resize(size_t(NL));
  for (int i = 0; i < NL; ++i) bn.gain[size_t(i)].assign(size_t(model.linear(i).N), 0.0);
  bn.sigma_eps = std::sqrt(sum_sq(model.residual_grad(L), BTC) / double(BTC));
  if (!(bn.sigma_eps > 0)) throw Error("statistics round: ∂L/∂Z is zero; the batch gives no gradient");
  Buf eps(static_cast<size_t>(BTC));
  for (int j = 0; j < o.noise_passes; ++j) {
    fill_gaussian(eps, bn.sigma_eps, rng);
    model.backward_from_residual(eps.data());
    for (int i = 0; i < NL; ++i) {
      const LinearView<float> pv = model.probe_linear(i);
      std::vector<double>& g = bn.gain[size_t(i)];
      double tot = 0;
      for (int64_t r = 0; r < pv.rows; ++r)
        for (int64_t c = 0; c < pv.N; ++c) {
          const double d = pv.dY[r * pv.N + c];
          g[size_t(c)] += d * d, tot += d * d;
        }
      bn.jt_y[size_t(i)] += tot;
    }
    for (int b = 0; b < L; ++b) {
      bn.jt_r[size_t(b)] += sum_sq(model.probe_residual_grad(b), BTC);
      bn.jt_m[size_t(b)] += sum_sq(model.probe_residual_mid_grad(b), BTC);
    }
  }
  const double n = o.noise_passes;
  for (auto& x : bn.jt_y) x /= n;
  for (auto& x : bn.jt_r) x /= n;
  for (auto& x : bn.jt_m) x /= n;
  for (auto& g : bn.gain)
    for (auto& x : g) x /= n;
  return bn;
}

// ---- stage 3: forward-noise passes: antithetic curvature at Z, FP64 ---------------------------
struct ForwardNoise {
  double sigma_eta = 0;
  double loss0_resid = 0;  // L(Z) through loss_from_residual: the L₀ of the curvature
  CurvatureEstimate curvature;
};

ForwardNoise forward_noise_passes(Llama& model, const StatsRoundOptions& o, std::mt19937_64& rng) {
  const int64_t BTC = int64_t(model.batch_size()) * model.seq_len() * model.config().hidden_size;
  const float* Zp = model.final_residual();
  const Buf Z(Zp, Zp + BTC);
  ForwardNoise fn;
  fn.sigma_eta = o.sigma_eta_rel * std::sqrt(sum_sq(Z.data(), BTC) / double(BTC));
  fn.loss0_resid = model.loss_from_residual(Z.data());
  std::vector<double> lp, lm, esq;
  Buf eta(static_cast<size_t>(BTC)), zz(static_cast<size_t>(BTC));
  for (int j = 0; j < o.noise_passes; ++j) {
    fill_gaussian(eta, fn.sigma_eta, rng);
    // the perturbation actually applied is the float difference (Z±η) − Z, measured in double
    for (int64_t i = 0; i < BTC; ++i) zz[size_t(i)] = Z[size_t(i)] + eta[size_t(i)];
    const double e_plus = diff_sq(zz.data(), Z.data(), BTC);
    lp.push_back(model.loss_from_residual(zz.data()));
    for (int64_t i = 0; i < BTC; ++i) zz[size_t(i)] = Z[size_t(i)] - eta[size_t(i)];
    const double e_minus = diff_sq(zz.data(), Z.data(), BTC);
    lm.push_back(model.loss_from_residual(zz.data()));
    esq.push_back(0.5 * (e_plus + e_minus));
  }
  fn.curvature = curvature_from_pairs(lp, lm, fn.loss0_resid, esq);
  return fn;
}

void record_globals(StatsRound& round, double loss0, const NextAdamStep& ns, const BackwardNoise& bn,
                    const ForwardNoise& fn, const StatsRoundOptions& o, int64_t adam_t) {
  namespace k = keys;
  round.globals[k::kGlobalLoss0] = loss0;
  round.globals["loss0_resid"] = fn.loss0_resid;
  round.globals[k::kGlobalCurvature] = fn.curvature.c;
  round.globals[k::kGlobalCurvatureSecondDiff] = fn.curvature.second_diff;
  round.globals[k::kGlobalCurvatureEtaSq] = fn.curvature.eta_sq;
  round.globals[k::kGlobalSigmaEta] = fn.sigma_eta;
  round.globals[k::kGlobalSigmaEps] = bn.sigma_eps;
  round.globals[k::kGlobalNoisePasses] = o.noise_passes;
  round.globals[k::kGlobalKt] = ns.k_t;
  round.globals[k::kGlobalLearningRate] = o.lr;
  round.globals[k::kGlobalAdamBeta1] = ns.ac.beta1;
  round.globals[k::kGlobalAdamBeta2] = ns.ac.beta2;
  round.globals[k::kGlobalAdamEps] = ns.ac.eps;
  round.globals["grad_clip_scale"] = ns.clip_scale;
  round.globals["grad_norm"] = ns.grad_norm;
  round.globals["adam_t"] = double(adam_t);
}

// ---- stage 4: per-layer statistics on the clean pass's cached activations ----------------------

// Buffers reused by every layer of a round, sized for the largest layer.
struct LayerWorkspace {
  QuantizedOperands qops;
  std::vector<XQuant> xquant;       // per candidate precision
  Buf yq, dxq, dwq;                 // the quantized GEMMs' outputs Y (T,N), dX (T,K), dW (N,K)
  Buf ddx;                          // δdX = quantized − BF16 dX (T,K)
  std::vector<double> w;            // AdamW factors w_ij of the current layer (N,K)
  std::vector<double> xcol;         // x_j = ‖X[:, j]‖² of xcol_src
  const float* xcol_src = nullptr;  // q/k/v and gate/up share X: computed once for them
  int64_t xcol_k = 0;
  std::vector<std::pair<LayerType, double>> sib;  // sibling ‖δG‖² of the current layer
  // exact ΔW mode: every layer's w, the backward's scratch and one layer's δdW
  std::vector<std::vector<double>> w_keep;
  std::unique_ptr<ExactScratch> scratch;
  Buf dw_err;

  LayerWorkspace(const Llama& model, size_t n_precisions, bool exact) {
    int64_t max_tk = 0, max_tn = 0, max_nk = 0, max_k = 0;
    for (int i = 0; i < model.num_linear_layers(); ++i) {
      const LinearView<float> v = model.linear(i);
      max_tk = std::max(max_tk, v.rows * v.K), max_tn = std::max(max_tn, v.rows * v.N);
      max_nk = std::max(max_nk, v.N * v.K), max_k = std::max(max_k, v.K);
    }
    qops.reserve(max_tn, max_nk);
    xquant.resize(n_precisions);
    for (XQuant& xq : xquant) xq.xf.resize(size_t(max_tk)), xq.xw.resize(size_t(max_tk));
    yq.resize(size_t(max_tn)), dxq.resize(size_t(max_tk)), dwq.resize(size_t(max_nk)), ddx.resize(size_t(max_tk));
    w.resize(size_t(max_nk)), xcol.resize(size_t(max_k));
    if (!exact) return;
    w_keep.resize(size_t(model.num_linear_layers()));
    scratch = std::make_unique<ExactScratch>(model.config(), int64_t(model.batch_size()) * model.seq_len());
    dw_err.resize(size_t(max_nk));
  }
};

void record_tensor_norms(LayerStats& ls, const LinearView<float>& v) {
  namespace k = keys;
  const int64_t T = v.rows, K = v.K, N = v.N;
  ls.scalars[k::kLayerXNorm] = std::sqrt(sum_sq(v.X, T * K));
  ls.scalars[k::kLayerWNorm] = std::sqrt(sum_sq(v.W, N * K));
  ls.scalars[k::kLayerYNorm] = std::sqrt(sum_sq(v.Y, T * N));
  ls.scalars[k::kLayerGNorm] = std::sqrt(sum_sq(v.dY, T * N));
  ls.scalars[k::kLayerDxNorm] = std::sqrt(sum_sq(v.dX, T * K));
  ls.scalars[k::kLayerDwNorm] = std::sqrt(sum_sq(v.dW, N * K));
}

// x_j = ‖X[:, j]‖², kept while the next layer reads the same X
void update_column_norms(LayerWorkspace& ws, const LinearView<float>& v) {
  const int64_t T = v.rows, K = v.K;
  if (ws.xcol_src == v.X && ws.xcol_k == K) return;
  std::fill(ws.xcol.begin(), ws.xcol.begin() + K, 0.0);
  for (int64_t r = 0; r < T; ++r)
    for (int64_t c = 0; c < K; ++c) ws.xcol[size_t(c)] += double(v.X[r * K + c]) * double(v.X[r * K + c]);
  ws.xcol_src = v.X, ws.xcol_k = K;
}

// AdamW factors per element w_ij = 1/(√v̂_ij + ε)² into ws.w, and the clean update u's norm
void record_adam_factors(LayerStats& ls, const LinearView<float>& v, const float* m0, const float* v0,
                         const std::vector<double>& gam, const NextAdamStep& ns, LayerWorkspace& ws) {
  namespace k = keys;
  const int64_t K = v.K, N = v.N;
  const AdamWConfig& ac = ns.ac;
  double m_sq = 0, v_sq = 0, a_sum = 0, u_sq = 0, a_gain_num = 0;
  double gam_sum = 0, x_sum = 0;
  for (int64_t j = 0; j < K; ++j) x_sum += ws.xcol[size_t(j)];
  for (double g : gam) gam_sum += g;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < K; ++j) {
      const int64_t e = i * K + j;
      const double g = ns.clip_scale * double(v.dW[e]);
      const double m1 = ac.beta1 * m0[e] + (1 - ac.beta1) * g;
      const double v1 = ac.beta2 * v0[e] + (1 - ac.beta2) * g * g;
      const double denom = std::sqrt(v1 / ns.bc2) + ac.eps;
      const double we = 1.0 / (denom * denom);
      ws.w[size_t(e)] = we;
      m_sq += double(m0[e]) * m0[e], v_sq += double(v0[e]) * v0[e];
      a_sum += we;
      a_gain_num += gam[size_t(i)] * ws.xcol[size_t(j)] * we;
      const double u = ns.lr * ac.weight_decay * double(v.W[e]) + ns.lr / ns.bc1 * m1 / denom;
      u_sq += u * u;
    }
  ls.scalars[k::kLayerAdamMNorm] = std::sqrt(m_sq);
  ls.scalars[k::kLayerAdamVNorm] = std::sqrt(v_sq);
  ls.scalars[k::kLayerAdamA] = a_sum / double(N * K);
  ls.scalars[k::kLayerAdamAGain] = (gam_sum > 0 && x_sum > 0) ? a_gain_num / (gam_sum * x_sum) : a_sum / double(N * K);
  ls.scalars[k::kLayerUpdateNorm] = std::sqrt(u_sq);
}

// ‖e_p‖ of each operand in its GEMM's tiling, keeping the quantized operands for the GEMMs;
// returns the dgrad W operand (the fprop one when both quantize alike). q/k/v share X
// (input_layernorm output), gate/up too: a deterministic quantization of the same tensor is
// done once (the result cannot depend on the layer's RNG key).
const float* quantize_operands(std::map<std::string, double>& pp, XQuant& xq, QuantizedOperands& qo,
                               const LinearView<float>& v, Precision p, const QLinearContext& ctx) {
  namespace k = keys;
  const Recipe& recipe = *ctx.recipe;
  const int64_t T = v.rows, K = v.K, N = v.N;
  if (xq.src != v.X || xq.K != K || !xq.reusable) {
    xq.err_f = quantize_err(xq.xf.data(), v.X, T, K, p, Gemm::fprop, Operand::activation, ctx);
    xq.err_w = quantize_err(xq.xw.data(), v.X, T, K, p, Gemm::wgrad, Operand::activation, ctx);
    xq.src = v.X, xq.K = K;
    xq.reusable = deterministic(recipe, p, Gemm::fprop, Operand::activation) &&
                  deterministic(recipe, p, Gemm::wgrad, Operand::activation);
  }
  pp[k::kPrecErrFpropX] = xq.err_f;
  pp[k::kPrecErrFpropW] = quantize_err(qo.wf.data(), v.W, N, K, p, Gemm::fprop, Operand::weight, ctx);
  pp[k::kPrecErrDgradG] = quantize_err(qo.gd.data(), v.dY, T, N, p, Gemm::dgrad, Operand::gradient, ctx);
  const float* wd = qo.wd.data();
  if (same_weight_quantization(recipe, p)) {  // e.g. snip's 128×128 weight blocks: one Q(W)
    pp[k::kPrecErrDgradW] = pp[k::kPrecErrFpropW];
    wd = qo.wf.data();
  } else {
    pp[k::kPrecErrDgradW] = quantize_err(qo.wd.data(), v.W, N, K, p, Gemm::dgrad, Operand::weight, ctx);
  }
  pp[k::kPrecErrWgradG] = quantize_err(qo.gw.data(), v.dY, T, N, p, Gemm::wgrad, Operand::gradient, ctx);
  pp[k::kPrecErrWgradX] = xq.err_w;
  return wd;
}

// Exact GEMM output errors, quantized − BF16: the clean pass ran every layer in BF16 with this
// recipe, so its Y, dX and dW are exactly qlinear_*(…, bf16) (dW accumulated onto zero). Leaves
// δdX in ws.ddx.
void record_output_errors(std::map<std::string, double>& pp, const LinearView<float>& v, LayerWorkspace& ws) {
  namespace k = keys;
  const int64_t T = v.rows, K = v.K, N = v.N;
  double dy_sq = 0, g_dot = 0;
  for (int64_t e = 0; e < T * N; ++e) {
    const double d = double(ws.yq[size_t(e)]) - double(v.Y[e]);
    dy_sq += d * d;
    g_dot += double(v.dY[e]) * d;
  }
  pp[k::kPrecDyErr] = std::sqrt(dy_sq);
  pp[k::kPrecGDotDy] = g_dot;
  double ddx_sq = 0;
  for (int64_t e = 0; e < T * K; ++e) {
    const double d = double(ws.dxq[size_t(e)]) - double(v.dX[e]);
    ddx_sq += d * d;
    ws.ddx[size_t(e)] = ws.dxq[size_t(e)] - v.dX[e];
  }
  pp[k::kPrecDdxErr] = std::sqrt(ddx_sq);
  // own term: Σ δg²/(√v̂+ε)² with δg the raw wgrad error (k_t carries the clip factor)
  double ddw_sq = 0, own = 0;
  for (int64_t e = 0; e < N * K; ++e) {
    const double d = double(ws.dwq[size_t(e)]) - double(v.dW[e]);
    ddw_sq += d * d;
    own += d * d * ws.w[size_t(e)];
  }
  pp[k::kPrecDdwErr] = std::sqrt(ddw_sq);
  pp[k::kPrecOwnUpdateSq] = own;
}

// Exact mode: δdX back-propagated through the frozen graph; every upstream layer's
// weight-gradient error δdW_l = δG_lᵀ·X_l, weighted elementwise by its AdamW factors.
void record_exact_upstream(std::map<std::string, double>& pp, const Llama& model,
                           const std::vector<std::unique_ptr<LocalBackward>>& blocks, int li, LayerWorkspace& ws) {
  exact_backward(blocks, li, ws.ddx.data(), *ws.scratch, [&](int l, const float* dy) {
    const LinearView<float> vl = model.linear(l);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(vl.N), int(vl.K), int(vl.rows), 1.0f, dy, int(vl.N), vl.X,
                int(vl.K), 0.0f, ws.dw_err.data(), int(vl.K));
    const std::vector<double>& wl = ws.w_keep[size_t(l)];
    double acc = 0;
    for (int64_t e = 0; e < vl.N * vl.K; ++e)
      acc += double(ws.dw_err[size_t(e)]) * ws.dw_err[size_t(e)] * wl[size_t(e)];
    pp[keys::exact_upstream_sq_key(l)] = acc;
  });
}

// Stage 4 for every linear layer, block by block: norms, AdamW factors, and per candidate
// precision the operand errors, the GEMM output errors and their maps to the residual stream.
class LayerStatsPass {
 public:
  LayerStatsPass(Llama& model, const AdamW<float>& opt, const StatsRoundOptions& o, const NextAdamStep& ns,
                 const BackwardNoise& bn)
      : model_(model),
        opt_(opt),
        o_(o),
        ns_(ns),
        bn_(bn),
        recipe_(model.recipe()),
        exact_(o.exact_weight_divergence),
        ws_(model, o.precisions.size(), exact_),
        blocks_(size_t(model.config().num_hidden_layers)) {
    ctx_.recipe = &recipe_;
    ctx_.seed = o.seed;
    ctx_.step = uint64_t(o.step);
  }

  void run(StatsRound& round) {
    for (int b = 0; b < int(blocks_.size()); ++b) {
      // exact ΔW mode back-propagates through every earlier block: keep them all
      blocks_[size_t(b)] = std::make_unique<LocalBackward>(model_, b);
      if (!exact_ && b > 0) blocks_[size_t(b - 1)].reset();
      for (LayerType type : kAllLayerTypes) round.layers.push_back(layer(b, type));
    }
  }

 private:
  LayerStats layer(int b, LayerType type) {
    namespace k = keys;
    const int li = b * kLayersPerBlock + int(type);
    const LinearView<float> v = model_.linear(li);
    ctx_.layer = uint32_t(li);
    ctx_.layer_name = v.name.c_str();
    LayerStats ls;
    ls.name = v.name;
    record_tensor_norms(ls, v);
    ls.scalars[k::kLayerJtEpsSqY] = bn_.jt_y[size_t(li)];
    ls.scalars[k::kLayerJtEpsSqResid] = int(type) <= int(LayerType::o) ? bn_.jt_r[size_t(b)] : bn_.jt_m[size_t(b)];
    update_column_norms(ws_, v);
    const std::vector<double>& gam = bn_.gain[size_t(li)];
    const ParamTensor* pt = model_.find_param(v.name + ".weight");
    SNIP_ASSERT(pt != nullptr && pt->numel == v.N * v.K);
    record_adam_factors(ls, v, opt_.m() + pt->offset, opt_.v() + pt->offset, gam, ns_, ws_);
    if (exact_) ws_.w_keep[size_t(li)].assign(ws_.w.begin(), ws_.w.begin() + v.N * v.K);
    if (o_.record_vectors) {
      ls.vectors[k::kVectorGainY].assign(gam.begin(), gam.end());
      ls.vectors[k::kVectorXColSq].assign(ws_.xcol.begin(), ws_.xcol.begin() + v.K);
    }
    for (size_t pi = 0; pi < o_.precisions.size(); ++pi)
      precision(ls.per_precision[precision_name(o_.precisions[pi])], b, type, v, pi);
    return ls;
  }

  // One candidate precision of layer (b, type): operand errors, GEMM output errors against the
  // BF16 references, and δdX mapped exactly to the residual point (siblings' δG too).
  void precision(std::map<std::string, double>& pp, int b, LayerType type, const LinearView<float>& v, size_t pi) {
    const Precision p = o_.precisions[pi];
    const int li = b * kLayersPerBlock + int(type);
    XQuant& xq = ws_.xquant[pi];
    QuantizedOperands& qo = ws_.qops;
    const float* wd = quantize_operands(pp, xq, qo, v, p, ctx_);
    quantized_gemms(ws_.yq.data(), ws_.dxq.data(), ws_.dwq.data(), xq.xf.data(), qo.wf.data(), qo.gd.data(), wd,
                    qo.gw.data(), xq.xw.data(), v.rows, v.K, v.N, p, ctx_, v.X, v.W, v.dY);
    record_output_errors(pp, v, ws_);
    pp[keys::kPrecResidErrSq] = blocks_[size_t(b)]->resid_err_sq(type, ws_.ddx.data(), &ws_.sib);
    for (const auto& [st, val] : ws_.sib) pp[keys::sibling_dg_sq_key(layer_type_short_name(st))] = val;
    if (exact_) record_exact_upstream(pp, model_, blocks_, li, ws_);
  }

  Llama& model_;
  const AdamW<float>& opt_;
  const StatsRoundOptions& o_;
  const NextAdamStep& ns_;
  const BackwardNoise& bn_;
  Recipe recipe_;
  QLinearContext ctx_;
  bool exact_;
  LayerWorkspace ws_;
  std::vector<std::unique_ptr<LocalBackward>> blocks_;
};

nlohmann::json round_options_json(const StatsRoundOptions& o) {
  nlohmann::json precisions = nlohmann::json::array();
  for (Precision p : o.precisions) precisions.push_back(precision_name(p));
  return nlohmann::json{{"precisions", precisions},
                        {"noise_passes", o.noise_passes},
                        {"sigma_eta_rel", o.sigma_eta_rel},
                        {"seed", o.seed},
                        {"lr", o.lr},
                        {"grad_clip", o.grad_clip},
                        {"reference", "bf16"},
                        {"weight_divergence_mode", o.exact_weight_divergence ? "local+exact" : "local"},
                        {"hessian_probes", o.hessian_probes}};
}

}  // namespace

StatsRound collect_stats_round(Llama& model, const AdamW<float>& opt, const int32_t* inputs, const int32_t* targets,
                               const StatsRoundOptions& o) {
  check_round_inputs(model, opt, o);
  const std::vector<LinearPrecision> saved_precisions = model.precisions();
  struct Restore {  // the model's plan and memory layout come back whatever happens
    Llama& m;
    const std::vector<LinearPrecision>& p;
    bool retain;
    ~Restore() {
      m.set_precisions(p);
      if (!retain) set_retain(m, false);
    }
  } restore{model, saved_precisions, retains(model)};
  set_retain(model, true);

  StatsRound round;
  round.step = o.step;
  round.batch_id = o.batch_id;
  round.dims = model.config().dims();
  round.tokens = int64_t(model.batch_size()) * model.seq_len();
  round.recipe = model.recipe().name();

  const double loss0 = clean_bf16_pass(model, inputs, targets, o.step);
  const NextAdamStep next_step = next_adam_step(model, opt, o);
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + uint64_t(o.step));  // stages 2 and 3 draw from it in turn
  const BackwardNoise backward_noise = backward_noise_passes(model, o, rng);
  const ForwardNoise forward_noise = forward_noise_passes(model, o, rng);
  record_globals(round, loss0, next_step, backward_noise, forward_noise, o, opt.t());
  LayerStatsPass(model, opt, o, next_step, backward_noise).run(round);
  if (o.hessian_probes > 0) record_hessian_traces(model, inputs, targets, o, round);
  round.options = round_options_json(o);
  return round;
}

double map_dgrad_to_residual(const Llama& model, int index, const float* ddx, std::vector<float>* residual_err,
                             std::map<std::string, double>* sibling_sq) {
  SNIP_ASSERT(index >= 0 && index < model.num_linear_layers());
  LocalBackward local(model, index / kLayersPerBlock);
  std::vector<std::pair<LayerType, double>> sib;
  const double r = local.resid_err_sq(LayerType(index % kLayersPerBlock), ddx, &sib);
  if (residual_err) *residual_err = local.last_residual_err();
  if (sibling_sq)
    for (const auto& [t, v] : sib) (*sibling_sq)[layer_type_short_name(t)] = v;
  return r;
}

std::vector<std::vector<float>> propagate_dgrad_error(const Llama& model, int index, const float* ddx) {
  SNIP_ASSERT(index >= 0 && index < model.num_linear_layers());
  const int bm = index / kLayersPerBlock;
  std::vector<std::unique_ptr<LocalBackward>> blocks(static_cast<size_t>(bm + 1));
  for (int b = 0; b <= bm; ++b) blocks[size_t(b)] = std::make_unique<LocalBackward>(model, b);
  ExactScratch s(model.config(), int64_t(model.batch_size()) * model.seq_len());
  std::vector<std::vector<float>> out(static_cast<size_t>(model.num_linear_layers()));
  exact_backward(blocks, index, ddx, s, [&](int l, const float* dy) {
    const LinearView<float> vl = model.linear(l);
    std::vector<float>& d = out[size_t(l)];
    d.resize(size_t(vl.N * vl.K));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(vl.N), int(vl.K), int(vl.rows), 1.0f, dy, int(vl.N), vl.X,
                int(vl.K), 0.0f, d.data(), int(vl.K));
  });
  return out;
}

void peek_next_batch(const Trainer& trainer, std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                     std::string* batch_id) {
  const TrainConfig& c = trainer.config();
  const nlohmann::json d = trainer.trainer_state().at("data");
  DataPosition pos;
  pos.epoch = d.at("epoch").get<uint64_t>();
  pos.batch_in_epoch = d.at("batch_in_epoch").get<uint64_t>();
  pos.seed = d.at("seed").get<uint64_t>();
  BatchLoader loader(&trainer.data().train, c.batch_size, c.seq_len, c.seed, /*shuffle=*/true);
  loader.seek(pos);
  const size_t n = size_t(c.batch_size) * size_t(c.seq_len);
  inputs.resize(n), targets.resize(n);
  loader.next(inputs.data(), targets.data());
  if (batch_id) *batch_id = "train:e" + std::to_string(pos.epoch) + ":b" + std::to_string(pos.batch_in_epoch);
}

StatsRound collect_stats_round(Trainer& trainer, StatsRoundOptions options) {
  std::vector<int32_t> in, tgt;
  peek_next_batch(trainer, in, tgt, &options.batch_id);
  const TrainConfig& c = trainer.config();
  options.step = trainer.step_count();
  options.lr = c.schedule.at(trainer.step_count());
  options.grad_clip = c.grad_clip;
  return collect_stats_round(trainer.model(), trainer.optimizer(), in.data(), tgt.data(), options);
}

}  // namespace snip
