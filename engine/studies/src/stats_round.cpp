// One SNIP statistics round on a live model (stats_round.h; METHOD.md section 4, 5.2 step 1).
#include "snip/stats_round.h"

#include <cblas.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>

#include "snip/blas_threads.h"
#include "snip/error.h"
#include "snip/hutchinson.h"
#include "snip/llama_ops.h"
#include "snip/qlinear.h"
#include "snip/stats_keys.h"
#include "snip/stats_sums.h"
#include "snip/thread_pool.h"
#include "snip/trainer.h"

namespace snip {
namespace {

using Buf = std::vector<float>;

bool g_concurrent_maps_off = false;  // detail::set_stats_round_concurrent_maps(false): maps in turn

// The round's double sums and their AVX-512 and AVX2 kernels are numerics' (snip/stats_sums.h).
using stats_sums::combine;
using stats_sums::lane_accumulate;
using stats_sums::lane_sums;
using stats_sums::Lanes;
using stats_sums::PreviewConsts;
using stats_sums::v8_adam;
using stats_sums::v8_col_sq;
using stats_sums::v8_err_dw;
using stats_sums::v8_err_dx;
using stats_sums::v8_err_y;
using stats_sums::v8_sq2;
using stats_sums::vector_sums;

// The AdamW preview's constants for one step (AdamW::preview's arithmetic, in its order;
// StatsRound.VectorSumsGiveTheScalarTermsBits holds the kernel and the scalar terms together).
PreviewConsts preview_consts(const AdamWConfig& c, const AdamWNextStep& s, bool decay) {
  return {s.clip_scale, c.beta1, 1 - c.beta1,           c.beta2,      1 - c.beta2,
          s.bc2,        c.eps,   s.lr * c.weight_decay, s.lr / s.bc1, decay};
}

double sq(float x) {
  return double(x) * double(x);
}
// g[c] += Σ_r a[r·n + c]² (a: rows × n), each column summed in row order
void add_col_sq(double* g, const float* a, int64_t rows, int64_t n) {
  const int64_t done = vector_sums() ? v8_col_sq(g, a, rows, n) : 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = done; c < n; ++c) g[c] += sq(a[r * n + c]);
}
// Σ a², Σ b² (b null: only the first)
std::array<double, 2> sum_sq2(const float* a, const float* b, int64_t n) {
  Lanes<2> L;
  const int64_t done = vector_sums() ? v8_sq2(L, a, b, n) : 0;
  lane_accumulate(L, done, n, [&](int64_t e, double* t) { t[0] = sq(a[e]), t[1] = b ? sq(b[e]) : 0.0; });
  return combine(L);
}
double sum_sq(const float* a, int64_t n) {
  return sum_sq2(a, nullptr, n)[0];
}
// ‖a − b‖² in double, in the same order as every other sum of the round (engine/numerics', which
// the operand errors use too)
double diff_sq(const float* a, const float* b, int64_t n) {
  return sum_sq_diff(a, b, n);
}
// The quantized W and dY operands of one layer's GEMMs at one precision (FORMATS.md tilings),
// each quantized once for its error norm and its GEMM (QLinearOperand); the input X's are kept
// in XQuant.
struct QuantizedOperands {
  QLinearOperand wf, gd, wd, gw;  // fprop W; dgrad dY, W; wgrad dY
};

// ‖e_p‖ of one operand, quantized into `q` exactly as the quantized GEMM quantizes it.
double quantize_err(QLinearOperand& q, const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                    const QLinearContext& ctx) {
  return std::sqrt(q.quantize(src, rows, cols, p, g, op, ctx));
}

// One layer input X quantized for fprop and wgrad at one precision, kept for the next layer
// when it reads the same X (reusable: no stochastic rounding, so the layer's key does not matter).
struct XQuant {
  const float* src = nullptr;
  int64_t K = 0;
  bool reusable = false;
  double err_f = 0, err_w = 0;
  QLinearOperand xf, xw;
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

// The exact local maps of METHOD.md 5.2 on the model's own block backward (Llama::
// mlp_half_backward / attention_half_backward): FP32 dgrads, frozen weights, the clean pass's
// cached activations. Every map is linear in the incoming gradient error.
class LocalBackward {
 public:
  // `store` (optional): the block-gradient buffers to use, e.g. kept from an earlier round
  // (they are overwritten before they are read); else the maps allocate their own.
  explicit LocalBackward(const Llama& m, BlockGradStorage<float>* store = nullptr)
      : m_(m), own_(store ? nullptr : std::make_unique<BlockGradStorage<float>>(m)), store_(store ? *store : *own_) {
    mode_.fp32 = true;
    const ModelConfig& c = m.config();
    BT_ = int64_t(m.batch_size()) * m.seq_len();
    QD_ = int64_t(c.num_attention_heads) * c.head_dim(), KD_ = int64_t(c.num_key_value_heads) * c.head_dim();
    F_ = c.intermediate_size, C_ = c.hidden_size;
  }

  // Layer li's dgrad error δdX (BT, K) -> ‖δr‖² at R_b (q,k,v,o) or M_b (gate,up,down); the
  // sibling output-gradient errors ‖δG‖² for o (at q,k,v) and down (at gate,up) go to *sib.
  double resid_err_sq(int li, const float* ddx, std::vector<std::pair<LayerType, double>>* sib) {
    sib->clear();
    const int b = li / kLayersPerBlock;
    const LayerType t = LayerType(li % kLayersPerBlock);
    BlockGrads<float>& g = store_.grads();
    if (int(t) <= int(LayerType::o)) {
      m_.attention_half_backward(b, entry(t), ddx, g, mode_);
      if (t == LayerType::o)
        for (LayerType s : {LayerType::q, LayerType::k, LayerType::v}) sib->push_back({s, dy_sq(s)});
      last_ = g.dres;
    } else {
      m_.mlp_half_backward(b, entry(t), ddx, g, mode_);
      if (t == LayerType::down)
        for (LayerType s : {LayerType::gate, LayerType::up}) sib->push_back({s, dy_sq(s)});
      last_ = g.dmid;
    }
    return sum_sq(last_, BT_ * C_);
  }
  // δr of the last resid_err_sq (BT, C)
  const float* last_residual_err() const { return last_; }

  // Exact ΔW mode: back-propagates δdX at the input of linear layer li through the frozen graph,
  // its own block from li's input down to R_b, then every earlier block. visit(layer index,
  // δG (BT, N)) is called for every linear layer whose output gradient the error reaches.
  using Visit = std::function<void(int, const float*)>;
  void exact_backward(int li, const float* ddx, const Visit& visit) {
    const int bm = li / kLayersPerBlock;
    const LayerType t = LayerType(li % kLayersPerBlock);
    BlockGrads<float>& g = store_.grads();
    if (int(t) <= int(LayerType::o)) {
      m_.attention_half_backward(bm, entry(t), ddx, g, mode_);
      if (t == LayerType::o) visit_types(bm, {LayerType::q, LayerType::k, LayerType::v}, visit);
    } else {
      m_.mlp_half_backward(bm, entry(t), ddx, g, mode_);
      if (t == LayerType::down) visit_types(bm, {LayerType::gate, LayerType::up}, visit);
      attention_half(bm, visit);
    }
    for (int b = bm - 1; b >= 0; --b) {
      m_.mlp_half_backward(b, HalfEntry::output, g.dres, g, mode_);
      visit_types(b, {LayerType::down, LayerType::gate, LayerType::up}, visit);
      attention_half(b, visit);
    }
  }

 private:
  // o and down take δdX at their half's branch input; q/k/v and gate/up at the norm's output
  static HalfEntry entry(LayerType t) {
    return t == LayerType::o || t == LayerType::down ? HalfEntry::branch_input : HalfEntry::norm_output;
  }
  int64_t out_features(LayerType t) const {
    switch (t) {
      case LayerType::q:
        return QD_;
      case LayerType::k:
      case LayerType::v:
        return KD_;
      case LayerType::gate:
      case LayerType::up:
        return F_;
      default:
        return C_;
    }
  }
  double dy_sq(LayerType t) { return sum_sq(store_.grads().dy[int(t)], BT_ * out_features(t)); }
  void visit_types(int b, std::initializer_list<LayerType> types, const Visit& visit) {
    for (LayerType t : types) visit(b * kLayersPerBlock + int(t), store_.grads().dy[int(t)]);
  }
  // δM_b (in dmid) -> δR_b through the whole attention half; o, q, k, v visited
  void attention_half(int b, const Visit& visit) {
    BlockGrads<float>& g = store_.grads();
    m_.attention_half_backward(b, HalfEntry::output, g.dmid, g, mode_);
    visit_types(b, {LayerType::o, LayerType::q, LayerType::k, LayerType::v}, visit);
  }

  const Llama& m_;
  std::unique_ptr<BlockGradStorage<float>> own_;
  BlockGradStorage<float>& store_;
  BlockBackwardMode<float> mode_;
  int64_t BT_ = 0, QD_ = 0, KD_ = 0, F_ = 0, C_ = 0;
  const float* last_ = nullptr;
};

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

// Between two passes or layers: a stop request abandons the round.
void check_interrupt(const StatsRoundOptions& o) {
  if (o.interrupt && o.interrupt()) throw StepInterrupted();
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

// The next AdamW step t+1 (AdamW::next_step, with the trainer's clipping) and k_t, a gradient
// error's weight in the update: s·lr·(1−β1)/(1−β1^{t+1}).
struct NextAdamStep {
  AdamWNextStep step;
  double k_t = 0;
};

NextAdamStep next_adam_step(const Llama& model, const AdamW<float>& opt, const StatsRoundOptions& o) {
  NextAdamStep n;
  n.step = opt.next_step(model.grad_data(), o.lr, o.grad_clip);
  n.k_t = n.step.clip_scale * o.lr * (1 - opt.config().beta1) / n.step.bc1;
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
  Buf eps(static_cast<size_t>(BTC)), eps_next(static_cast<size_t>(BTC));
  fill_gaussian(eps, bn.sigma_eps, rng);
  for (int j = 0; j < o.noise_passes; ++j) {
    check_interrupt(o);
    model.backward_from_residual(eps.data());
    // This pass's sums, one task per linear layer and per block (each sum runs whole on one
    // thread, in its own order: the bits do not depend on which), alongside the next pass's
    // draws (task 0: the same draws from the same stream, in the same order, as drawn in turn).
    const bool draw_next = j + 1 < o.noise_passes;
    pool_run(1 + NL + L, [&](int t) {
      if (t == 0) {
        if (draw_next) fill_gaussian(eps_next, bn.sigma_eps, rng);
      } else if (const int i = t - 1; i < NL) {
        const LinearView<float> pv = model.probe_linear(i);
        add_col_sq(bn.gain[size_t(i)].data(), pv.dY, pv.rows, pv.N);  // per channel: one sum per column
        bn.jt_y[size_t(i)] += sum_sq(pv.dY, pv.rows * pv.N);
      } else {
        const int b = i - NL;
        bn.jt_r[size_t(b)] += sum_sq(model.probe_residual_grad(b), BTC);
        bn.jt_m[size_t(b)] += sum_sq(model.probe_residual_mid_grad(b), BTC);
      }
    });
    std::swap(eps, eps_next);
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
    check_interrupt(o);
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

void record_globals(StatsRound& round, double loss0, const NextAdamStep& ns, const AdamWConfig& ac,
                    const BackwardNoise& bn, const ForwardNoise& fn, const StatsRoundOptions& o, int64_t adam_t) {
  namespace k = keys;
  round.globals[k::kGlobalLoss0] = loss0;
  round.globals[k::kGlobalLoss0Resid] = fn.loss0_resid;
  round.globals[k::kGlobalCurvature] = fn.curvature.c;
  round.globals[k::kGlobalCurvatureSecondDiff] = fn.curvature.second_diff;
  round.globals[k::kGlobalCurvatureEtaSq] = fn.curvature.eta_sq;
  round.globals[k::kGlobalSigmaEta] = fn.sigma_eta;
  round.globals[k::kGlobalSigmaEps] = bn.sigma_eps;
  round.globals[k::kGlobalNoisePasses] = o.noise_passes;
  round.globals[k::kGlobalKt] = ns.k_t;
  round.globals[k::kGlobalLearningRate] = o.lr;
  round.globals[k::kGlobalAdamBeta1] = ac.beta1;
  round.globals[k::kGlobalAdamBeta2] = ac.beta2;
  round.globals[k::kGlobalAdamEps] = ac.eps;
  round.globals[k::kGlobalGradClipScale] = ns.step.clip_scale;
  round.globals[k::kGlobalGradNorm] = ns.step.grad_norm;
  round.globals[k::kGlobalAdamT] = double(adam_t);
}

// ---- stage 4: per-layer statistics on the clean pass's cached activations ----------------------

// Buffers reused by every layer of a round, sized for the largest layer.
struct LayerWorkspace {
  QuantizedOperands qops;
  std::vector<XQuant> xquant;       // per candidate precision
  Buf yq, dxq, dwq;                 // the quantized GEMMs' outputs Y (T,N), dX (T,K), dW (N,K)
  std::vector<Buf> ddx;             // per candidate precision: δdX = quantized − BF16 dX (T,K)
  std::vector<double> w;            // AdamW factors w_ij of the current layer (N,K)
  std::vector<double> xcol;         // x_j = ‖X[:, j]‖² of xcol_src
  const float* xcol_src = nullptr;  // q/k/v and gate/up share X: computed once for them
  int64_t xcol_k = 0;
  // per candidate precision: sibling ‖δG‖² of the current layer
  std::vector<std::vector<std::pair<LayerType, double>>> sib;
  // exact ΔW mode: every layer's w and one layer's δdW
  std::vector<std::vector<double>> w_keep;
  Buf dw_err;

  LayerWorkspace(const Llama& model, size_t n_precisions, bool exact) {
    int64_t max_tk = 0, max_tn = 0, max_nk = 0, max_k = 0;
    for (int i = 0; i < model.num_linear_layers(); ++i) {
      const LinearView<float> v = model.linear(i);
      max_tk = std::max(max_tk, v.rows * v.K), max_tn = std::max(max_tn, v.rows * v.N);
      max_nk = std::max(max_nk, v.N * v.K), max_k = std::max(max_k, v.K);
    }
    xquant.resize(n_precisions), sib.resize(n_precisions), ddx.resize(n_precisions);
    yq.resize(size_t(max_tn)), dxq.resize(size_t(max_tk)), dwq.resize(size_t(max_nk));
    for (Buf& d : ddx) d.resize(size_t(max_tk));
    w.resize(size_t(max_nk)), xcol.resize(size_t(max_k));
    if (!exact) return;
    w_keep.resize(size_t(model.num_linear_layers()));
    dw_err.resize(size_t(max_nk));
  }
  // Forgets what the previous round computed: the model's tensors keep their addresses from
  // round to round, but not their values.
  void begin_round() {
    xcol_src = nullptr, xcol_k = 0;
    for (XQuant& xq : xquant) xq.src = nullptr, xq.reusable = false;
  }
};

// The per-layer stage's buffers (LayerWorkspace, the local maps' block gradients), kept from
// one round to the next on the thread that runs them, as the model keeps its arenas: allocating,
// zero-filling and page-faulting them cost every round of a `small` model a few percent of its
// time. Rebuilt when the model's shapes or the round's options change.
struct RoundBuffers {
  std::string key;
  std::unique_ptr<LayerWorkspace> ws;
  std::vector<std::unique_ptr<BlockGradStorage<float>>> grads;  // per candidate precision
};

RoundBuffers& round_buffers(const Llama& model, size_t n_precisions, bool exact) {
  thread_local RoundBuffers b;
  const ModelConfig& c = model.config();
  std::string key;
  for (int64_t x : {int64_t(model.batch_size()), int64_t(model.seq_len()), int64_t(c.hidden_size),
                    int64_t(c.intermediate_size), int64_t(c.num_attention_heads), int64_t(c.num_key_value_heads),
                    int64_t(c.head_dim()), int64_t(c.num_hidden_layers), int64_t(n_precisions), int64_t(exact)})
    key += std::to_string(x) + ",";
  if (b.key != key || !b.ws) {
    b.ws.reset(), b.grads.clear(), b.key.clear();
    b.ws = std::make_unique<LayerWorkspace>(model, n_precisions, exact);
    for (size_t i = 0; i < n_precisions; ++i) b.grads.push_back(std::make_unique<BlockGradStorage<float>>(model));
    b.key = key;
  }
  b.ws->begin_round();
  return b;
}

void record_tensor_norms(LayerStats& ls, const LinearView<float>& v) {
  namespace k = keys;
  const auto [x, dx] = sum_sq2(v.X, v.dX, v.rows * v.K);
  const auto [w, dw] = sum_sq2(v.W, v.dW, v.N * v.K);
  const auto [y, g] = sum_sq2(v.Y, v.dY, v.rows * v.N);
  ls.scalars[k::kLayerXNorm] = std::sqrt(x);
  ls.scalars[k::kLayerWNorm] = std::sqrt(w);
  ls.scalars[k::kLayerYNorm] = std::sqrt(y);
  ls.scalars[k::kLayerGNorm] = std::sqrt(g);
  ls.scalars[k::kLayerDxNorm] = std::sqrt(dx);
  ls.scalars[k::kLayerDwNorm] = std::sqrt(dw);
}

// x_j = ‖X[:, j]‖², kept while the next layer reads the same X
void update_column_norms(LayerWorkspace& ws, const LinearView<float>& v) {
  const int64_t T = v.rows, K = v.K;
  if (ws.xcol_src == v.X && ws.xcol_k == K) return;
  std::fill(ws.xcol.begin(), ws.xcol.begin() + K, 0.0);
  add_col_sq(ws.xcol.data(), v.X, T, K);
  ws.xcol_src = v.X, ws.xcol_k = K;
}

// AdamW factors per element w_ij = 1/(√v̂_ij + ε)² into ws.w, and the clean update u's norm, from
// the optimizer's preview of the next step (nothing of its state changes).
void record_adam_factors(LayerStats& ls, const LinearView<float>& v, const AdamW<float>& opt, const ParamTensor& pt,
                         const std::vector<double>& gam, const NextAdamStep& ns, LayerWorkspace& ws) {
  namespace k = keys;
  const int64_t K = v.K, N = v.N;
  const float* m0 = opt.m() + pt.offset;
  const float* v0 = opt.v() + pt.offset;
  const bool decay = pt.shape.size() >= 2;
  double gam_sum = 0, x_sum = 0;
  for (int64_t j = 0; j < K; ++j) x_sum += ws.xcol[size_t(j)];
  for (double g : gam) gam_sum += g;
  Lanes<5> L;
  const int64_t done = vector_sums() && K % 8 == 0 ? v8_adam(L, preview_consts(opt.config(), ns.step, decay), m0, v0,
                                                             v.W, v.dW, gam.data(), ws.xcol.data(), ws.w.data(), N, K)
                                                   : 0;
  int64_t i = done / K, j = done % K;  // element e = i·K + j (lane_accumulate visits e in order)
  lane_accumulate(L, done, N * K, [&](int64_t e, double* t) {
    const AdamWElementUpdate u = opt.preview(ns.step, pt.offset + e, double(v.W[e]), double(v.dW[e]), decay);
    const double we = 1.0 / (u.denom * u.denom);
    ws.w[size_t(e)] = we;
    t[0] = sq(m0[e]), t[1] = sq(v0[e]), t[2] = we, t[3] = gam[size_t(i)] * ws.xcol[size_t(j)] * we;
    t[4] = u.update * u.update;
    if (++j == K) j = 0, ++i;
  });
  const auto [m_sq, v_sq, a_sum, a_gain_num, u_sq] = combine(L);
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
const QLinearOperand& quantize_operands(std::map<std::string, double>& pp, XQuant& xq, QuantizedOperands& qo,
                                        const LinearView<float>& v, Precision p, const QLinearContext& ctx) {
  namespace k = keys;
  const Recipe& recipe = *ctx.recipe;
  const int64_t T = v.rows, K = v.K, N = v.N;
  if (xq.src != v.X || xq.K != K || !xq.reusable) {
    xq.err_f = quantize_err(xq.xf, v.X, T, K, p, Gemm::fprop, Operand::activation, ctx);
    xq.err_w = quantize_err(xq.xw, v.X, T, K, p, Gemm::wgrad, Operand::activation, ctx);
    xq.src = v.X, xq.K = K;
    xq.reusable = deterministic(recipe, p, Gemm::fprop, Operand::activation) &&
                  deterministic(recipe, p, Gemm::wgrad, Operand::activation);
  }
  pp[k::kPrecErrFpropX] = xq.err_f;
  pp[k::kPrecErrFpropW] = quantize_err(qo.wf, v.W, N, K, p, Gemm::fprop, Operand::weight, ctx);
  pp[k::kPrecErrDgradG] = quantize_err(qo.gd, v.dY, T, N, p, Gemm::dgrad, Operand::gradient, ctx);
  const QLinearOperand* wd = &qo.wd;
  if (same_weight_quantization(recipe, p)) {  // e.g. snip's 128×128 weight blocks: one Q(W)
    pp[k::kPrecErrDgradW] = pp[k::kPrecErrFpropW];
    wd = &qo.wf;
  } else {
    pp[k::kPrecErrDgradW] = quantize_err(qo.wd, v.W, N, K, p, Gemm::dgrad, Operand::weight, ctx);
  }
  pp[k::kPrecErrWgradG] = quantize_err(qo.gw, v.dY, T, N, p, Gemm::wgrad, Operand::gradient, ctx);
  pp[k::kPrecErrWgradX] = xq.err_w;
  return *wd;
}

// Exact GEMM output errors, quantized − BF16: the clean pass ran every layer in BF16 with this
// recipe, so its Y, dX and dW are exactly qlinear_*(…, bf16) (dW accumulated onto zero). Leaves
// δdX in `ddx`.
void record_output_errors(std::map<std::string, double>& pp, const LinearView<float>& v, LayerWorkspace& ws,
                          float* ddx) {
  namespace k = keys;
  const int64_t TN = v.rows * v.N, TK = v.rows * v.K, NK = v.N * v.K;
  const float *yq = ws.yq.data(), *dxq = ws.dxq.data(), *dwq = ws.dwq.data();
  const double* w = ws.w.data();
  const bool vec = vector_sums();
  Lanes<2> Ly;
  Lanes<1> Lx;
  Lanes<2> Lw;
  // The three sums are independent: one pool task each (each runs whole on one thread, in its
  // own order, so the bits do not depend on which).
  pool_run(3, [&](int task) {
    if (task == 0) {
      lane_accumulate(Ly, vec ? v8_err_y(Ly, yq, v.Y, v.dY, TN) : 0, TN, [&](int64_t e, double* t) {
        const double d = double(yq[e]) - double(v.Y[e]);
        t[0] = d * d, t[1] = double(v.dY[e]) * d;
      });
    } else if (task == 1) {
      lane_accumulate(Lx, vec ? v8_err_dx(Lx, dxq, v.dX, ddx, TK) : 0, TK, [&](int64_t e, double* t) {
        const double d = double(dxq[e]) - double(v.dX[e]);
        t[0] = d * d;
        ddx[e] = dxq[e] - v.dX[e];
      });
    } else {
      // own term: Σ δg²/(√v̂+ε)² with δg the raw wgrad error (k_t carries the clip factor)
      lane_accumulate(Lw, vec ? v8_err_dw(Lw, dwq, v.dW, w, NK) : 0, NK, [&](int64_t e, double* t) {
        const double d = double(dwq[e]) - double(v.dW[e]);
        t[0] = d * d, t[1] = d * d * w[e];
      });
    }
  });
  const auto [dy_sq, g_dot] = combine(Ly);
  const auto [ddx_sq] = combine(Lx);
  const auto [ddw_sq, own] = combine(Lw);
  pp[k::kPrecDyErr] = std::sqrt(dy_sq);
  pp[k::kPrecGDotDy] = g_dot;
  pp[k::kPrecDdxErr] = std::sqrt(ddx_sq);
  pp[k::kPrecDdwErr] = std::sqrt(ddw_sq);
  pp[k::kPrecOwnUpdateSq] = own;
}

// Exact mode: δdX back-propagated through the frozen graph; every upstream layer's
// weight-gradient error δdW_l = δG_lᵀ·X_l, weighted elementwise by its AdamW factors.
void record_exact_upstream(std::map<std::string, double>& pp, const Llama& model, LocalBackward& local, int li,
                           const float* ddx, LayerWorkspace& ws) {
  local.exact_backward(li, ddx, [&](int l, const float* dy) {
    const LinearView<float> vl = model.linear(l);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(vl.N), int(vl.K), int(vl.rows), 1.0f, dy, int(vl.N), vl.X,
                int(vl.K), 0.0f, ws.dw_err.data(), int(vl.K));
    const std::vector<double>& wl = ws.w_keep[size_t(l)];
    const float* d = ws.dw_err.data();
    pp[keys::exact_upstream_sq_key(l)] =
        lane_sums<1>(vl.N * vl.K, [&](int64_t e, double* t) { t[0] = sq(d[e]) * wl[size_t(e)]; })[0];
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
        bufs_(round_buffers(model, o.precisions.size(), exact_)),
        ws_(*bufs_.ws) {
    for (auto& g : bufs_.grads) local_.push_back(std::make_unique<LocalBackward>(model, g.get()));
    ctx_.recipe = &recipe_;
    ctx_.seed = o.seed;
    ctx_.step = uint64_t(o.step);
  }

  void run(StatsRound& round) {
    for (int b = 0; b < model_.config().num_hidden_layers; ++b)
      for (LayerType type : kAllLayerTypes) {
        check_interrupt(o_);
        round.layers.push_back(layer(b, type));
      }
  }

 private:
  LayerStats layer(int b, LayerType type) {
    namespace k = keys;
    const int li = b * kLayersPerBlock + int(type);
    const LinearView<float> v = model_.linear(li);
    ctx_.layer = uint32_t(li);
    ctx_.layer_name = v.name.c_str();
    LayerStats ls, norms;
    ls.name = v.name;
    const std::vector<double>& gam = bn_.gain[size_t(li)];
    const ParamTensor* pt = model_.find_param(v.name + ".weight");
    SNIP_ASSERT(pt != nullptr && pt->numel == v.N * v.K);
    // The tensor norms and the AdamW factors (after X's column norms) are independent sums: one
    // pool task each, each whole on one thread (the bits do not depend on which).
    pool_run(2, [&](int task) {
      if (task == 0) {
        record_tensor_norms(norms, v);
      } else {
        update_column_norms(ws_, v);
        record_adam_factors(ls, v, opt_, *pt, gam, ns_, ws_);
      }
    });
    ls.scalars.insert(norms.scalars.begin(), norms.scalars.end());
    ls.scalars[k::kLayerJtEpsSqY] = bn_.jt_y[size_t(li)];
    ls.scalars[k::kLayerJtEpsSqResid] = int(type) <= int(LayerType::o) ? bn_.jt_r[size_t(b)] : bn_.jt_m[size_t(b)];
    if (exact_) ws_.w_keep[size_t(li)].assign(ws_.w.begin(), ws_.w.begin() + v.N * v.K);
    if (o_.record_vectors) {
      ls.vectors[k::kVectorGainY].assign(gam.begin(), gam.end());
      ls.vectors[k::kVectorXColSq].assign(ws_.xcol.begin(), ws_.xcol.begin() + v.K);
    }
    std::vector<std::map<std::string, double>*> pps;
    for (Precision p : o_.precisions) pps.push_back(&ls.per_precision[precision_name(p)]);
    for (size_t pi = 0; pi < pps.size(); ++pi) gemm_errors(*pps[pi], v, pi);
    residual_maps(pps, li);
    if (exact_)
      for (size_t pi = 0; pi < pps.size(); ++pi)
        record_exact_upstream(*pps[pi], model_, *local_[pi], li, ws_.ddx[pi].data(), ws_);
    return ls;
  }

  // One candidate precision of the current layer: operand errors and GEMM output errors against
  // the BF16 references; δdX left in ws_.ddx[pi].
  void gemm_errors(std::map<std::string, double>& pp, const LinearView<float>& v, size_t pi) {
    const Precision p = o_.precisions[pi];
    XQuant& xq = ws_.xquant[pi];
    QuantizedOperands& qo = ws_.qops;
    const QLinearOperand& wd = quantize_operands(pp, xq, qo, v, p, ctx_);
    // the GEMMs on the operands just quantized: qlinear_*'s results bit for bit (a test checks)
    qlinear_fprop(ws_.yq.data(), xq.xf, qo.wf, ctx_);
    qlinear_dgrad(ws_.dxq.data(), qo.gd, wd, ctx_);
    qlinear_wgrad(ws_.dwq.data(), qo.gw, xq.xw, ctx_);
    record_output_errors(pp, v, ws_, ws_.ddx[pi].data());
  }

  // Every candidate precision's δdX mapped exactly to the residual point (siblings' δG too). The
  // maps are independent: each reads its own δdX and writes its own block gradients and
  // results. They run with OpenBLAS on one thread, whatever OPENBLAS_NUM_THREADS says (so their
  // bits do not depend on it: a GEMM's low bits depend on OpenBLAS's thread count), which makes
  // them FP32 GEMMs and element-wise loops on one thread each (pool loops nested in a pool task
  // run on their caller): they run concurrently, one per pool thread, with the bits they have
  // one after the other (a single-threaded cblas_sgemm's bits do not depend on the calling
  // thread; a test compares).
  void residual_maps(const std::vector<std::map<std::string, double>*>& pps, int li) {
    std::vector<double> resid(pps.size());
    const auto map = [&](int pi) {
      const size_t i = size_t(pi);
      resid[i] = local_[i]->resid_err_sq(li, ws_.ddx[i].data(), &ws_.sib[i]);
    };
    const BlasSingleThreaded pin;  // one thread until every map is done, whoever else restores it
    if (!g_concurrent_maps_off && pps.size() >= 2) {
      pool_run(int(pps.size()), map);
    } else {
      for (int pi = 0; pi < int(pps.size()); ++pi) map(pi);
    }
    for (size_t pi = 0; pi < pps.size(); ++pi) {
      (*pps[pi])[keys::kPrecResidErrSq] = resid[pi];
      for (const auto& [st, val] : ws_.sib[pi]) (*pps[pi])[keys::sibling_dg_sq_key(layer_type_short_name(st))] = val;
    }
  }

  Llama& model_;
  const AdamW<float>& opt_;
  const StatsRoundOptions& o_;
  const NextAdamStep& ns_;
  const BackwardNoise& bn_;
  Recipe recipe_;
  QLinearContext ctx_;
  bool exact_;
  RoundBuffers& bufs_;
  LayerWorkspace& ws_;
  std::vector<std::unique_ptr<LocalBackward>> local_;  // per candidate precision, on its own block gradients
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

// The gradient noise monitor's quantity (METHOD.md 10): ‖∇W_l‖ / ‖δdW_l(p)‖ from the norms the
// layer pass recorded; none where quantization changed nothing.
void record_grad_noise_ratios(StatsRound& round) {
  for (LayerStats& ls : round.layers) {
    const auto dw = ls.scalars.find(keys::kLayerDwNorm);
    if (dw == ls.scalars.end()) continue;
    for (auto& [precision, pp] : ls.per_precision) {
      const auto err = pp.find(keys::kPrecDdwErr);
      if (err != pp.end() && err->second > 0) pp[keys::kPrecGradNoiseRatio] = dw->second / err->second;
    }
  }
}

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

  check_interrupt(o);
  const double loss0 = clean_bf16_pass(model, inputs, targets, o.step);
  const NextAdamStep next_step = next_adam_step(model, opt, o);
  std::mt19937_64 rng(o.seed * 0x9E3779B97F4A7C15ull + uint64_t(o.step));  // stages 2 and 3 draw from it in turn
  const BackwardNoise backward_noise = backward_noise_passes(model, o, rng);
  const ForwardNoise forward_noise = forward_noise_passes(model, o, rng);
  record_globals(round, loss0, next_step, opt.config(), backward_noise, forward_noise, o, opt.t());
  LayerStatsPass(model, opt, o, next_step, backward_noise).run(round);
  record_grad_noise_ratios(round);
  check_interrupt(o);
  if (o.hessian_probes > 0) record_hessian_traces(model, inputs, targets, o, round);
  round.options = round_options_json(o);
  return round;
}

double map_dgrad_to_residual(const Llama& model, int index, const float* ddx, std::vector<float>* residual_err,
                             std::map<std::string, double>* sibling_sq) {
  SNIP_ASSERT(index >= 0 && index < model.num_linear_layers());
  LocalBackward local(model);
  std::vector<std::pair<LayerType, double>> sib;
  const double r = local.resid_err_sq(index, ddx, &sib);
  if (residual_err) {
    const int64_t n = int64_t(model.batch_size()) * model.seq_len() * model.config().hidden_size;
    residual_err->assign(local.last_residual_err(), local.last_residual_err() + n);
  }
  if (sibling_sq)
    for (const auto& [t, v] : sib) (*sibling_sq)[layer_type_short_name(t)] = v;
  return r;
}

std::vector<std::vector<float>> propagate_dgrad_error(const Llama& model, int index, const float* ddx) {
  SNIP_ASSERT(index >= 0 && index < model.num_linear_layers());
  LocalBackward local(model);
  std::vector<std::vector<float>> out(static_cast<size_t>(model.num_linear_layers()));
  local.exact_backward(index, ddx, [&](int l, const float* dy) {
    const LinearView<float> vl = model.linear(l);
    std::vector<float>& d = out[size_t(l)];
    d.resize(size_t(vl.N * vl.K));
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(vl.N), int(vl.K), int(vl.rows), 1.0f, dy, int(vl.N), vl.X,
                int(vl.K), 0.0f, d.data(), int(vl.K));
  });
  return out;
}

void detail::set_stats_round_vector_sums(bool on) {
  stats_sums::set_vector_sums(on);
}

void detail::set_stats_round_concurrent_maps(bool on) {
  g_concurrent_maps_off = !on;
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
  if (!options.interrupt) options.interrupt = trainer.interrupt();
  return collect_stats_round(trainer.model(), trainer.optimizer(), in.data(), tgt.data(), options);
}

}  // namespace snip
