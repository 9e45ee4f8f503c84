// SNIP's divergence estimators (METHOD.md 5.1–5.3) and the local-error costs (section 8),
// computed from the raw statistics of one round.
#include "snip/estimator.h"

#include <cmath>
#include <map>
#include <optional>

#include "snip/error.h"
#include "snip/hutchinson.h"
#include "snip/names.h"
#include "snip/stats_keys.h"

namespace snip {

namespace k = keys;

namespace {

constexpr std::array<Named<Role>, 2> kRoleNames{{{Role::fprop, "fprop"}, {Role::backward, "backward"}}};
constexpr std::array<Named<DwMode>, 2> kDwModeNames{{{DwMode::approx, "approx"}, {DwMode::exact, "exact"}}};

}  // namespace

const char* role_name(Role r) {
  return name_of(kRoleNames, r);
}

const char* dw_mode_name(DwMode m) {
  return name_of(kDwModeNames, m);
}

DwMode parse_dw_mode(const std::string& s) {
  return parse_name(kDwModeNames, s, "ΔW mode",
                    "approx uses gain ratios at every round; exact needs rounds collected with --dw-mode exact");
}

bool has_exact_dw(const StatsRound& round) {
  for (const auto& ls : round.layers)
    for (const auto& [p, m] : ls.per_precision)
      for (const auto& [key, v] : m)
        if (key.rfind(k::kPrecExactUpstreamSqPrefix, 0) == 0) return true;
  return false;
}

bool is_upstream(LayerId l, LayerId m) {
  if (l.block != m.block) return l.block < m.block;
  // Backward order inside a block: down → gate,up → o → q,k,v. Stage numbers along the
  // forward path; a layer is upstream of m when it sits at an earlier stage (siblings share one).
  auto stage = [](LayerType t) {
    switch (t) {
      case LayerType::q:
      case LayerType::k:
      case LayerType::v:
        return 0;
      case LayerType::o:
        return 1;
      case LayerType::gate:
      case LayerType::up:
        return 2;
      case LayerType::down:
        return 3;
    }
    return 0;
  };
  return stage(l.type) < stage(m.type);
}

namespace {

// The gradient error at the outputs of l is known exactly (not via gain ratios) when m's local
// backward passes through l's output: o → q/k/v (attention backward), down → gate/up (SwiGLU).
bool sibling_exact(LayerId l, LayerId m) {
  if (l.block != m.block) return false;
  if (m.type == LayerType::o) return l.type == LayerType::q || l.type == LayerType::k || l.type == LayerType::v;
  if (m.type == LayerType::down) return l.type == LayerType::gate || l.type == LayerType::up;
  return false;
}

// Read access to a round with errors that name the layer and the key.
struct RoundView {
  const StatsRound& round;
  std::vector<LayerId> ids;
  std::vector<LinearLayerInfo> info;  // shape of each round layer
  double c = 0, sigma_eps = 0, k_t = 0;

  explicit RoundView(const StatsRound& r) : round(r) {
    if (r.tokens <= 0) throw Error("statistics: \"tokens\" must be positive (tokens in the statistics batch)");
    auto global = [&](const char* key) {
      auto it = r.globals.find(key);
      if (it == r.globals.end())
        throw Error(std::string("statistics (step ") + std::to_string(r.step) + "): globals has no \"" + key +
                    "\"; the statistics round did not record it");
      return it->second;
    };
    c = global(k::kGlobalCurvature);
    sigma_eps = global(k::kGlobalSigmaEps);
    k_t = global(k::kGlobalKt);
    if (!(sigma_eps > 0))
      throw Error("statistics: globals.sigma_eps must be positive (it is σ_ε of the backward-noise passes)");
    const auto all = linear_layers(r.dims);
    for (const auto& ls : r.layers) {
      auto id = parse_layer_module_name(ls.name);
      if (!id || id->block >= r.dims.num_layers)
        throw Error("statistics: '" + ls.name + "' is not a linear layer of a " + std::to_string(r.dims.num_layers) +
                    "-block model");
      ids.push_back(*id);
      info.push_back(all[id->index()]);
      check_vector(ls, k::kVectorGainY, info.back().out_features, "output channels");
      check_vector(ls, k::kVectorXColSq, info.back().in_features, "input channels");
    }
    // A plan sets every linear layer: a round that misses some would leave them to a default.
    std::vector<bool> present(all.size(), false);
    for (const LayerId& id : ids) present[size_t(id.index())] = true;
    std::string missing;
    size_t n_missing = 0;
    for (size_t i = 0; i < all.size(); ++i)
      if (!present[i] && n_missing++ < 3) missing += (missing.empty() ? "" : ", ") + all[i].name;
    if (n_missing > 0)
      throw Error("statistics (step " + std::to_string(r.step) + "): " + std::to_string(n_missing) + " of the " +
                  std::to_string(all.size()) + " linear layers of its " + std::to_string(r.dims.num_layers) +
                  "-block model have no statistics (" + missing + (n_missing > 3 ? ", …" : "") +
                  "), and a plan must set every layer; collect the round again on the whole model");
  }

  // A vector measured per channel has one value per channel of the layer.
  static void check_vector(const LayerStats& ls, const char* key, int64_t want, const char* what) {
    const auto it = ls.vectors.find(key);
    if (it == ls.vectors.end() || int64_t(it->second.size()) == want) return;
    throw Error("statistics: " + ls.name + " vector \"" + key + "\" has " + std::to_string(it->second.size()) +
                " values, but the layer has " + std::to_string(want) + " " + what +
                " in this model; the round was taken on another model, or the file is damaged");
  }

  double scalar(size_t i, const char* key) const {
    const auto& ls = round.layers[i];
    auto it = ls.scalars.find(key);
    if (it == ls.scalars.end())
      throw Error("statistics: " + ls.name + " has no scalar \"" + key + "\"; the statistics round did not record it");
    if (it->second < 0) throw Error("statistics: " + ls.name + " scalar \"" + key + "\" is negative");
    return it->second;
  }
  double positive_scalar(size_t i, const char* key) const {
    double v = scalar(i, key);
    if (!(v > 0))
      throw Error("statistics: " + round.layers[i].name + " scalar \"" + key +
                  "\" is 0; the estimators divide by it (was the round taken before the first optimizer step?)");
    return v;
  }
  const std::map<std::string, double>* prec_map(size_t i, Precision p) const {
    const auto& pp = round.layers[i].per_precision;
    auto it = pp.find(precision_name(p));
    return it == pp.end() ? nullptr : &it->second;
  }
  double prec(size_t i, Precision p, const std::string& key) const {
    const auto* m = prec_map(i, p);
    if (!m) {
      if (p == Precision::bf16) return 0.0;  // BF16 is the reference: zero error unless measured
      throw Error("statistics: " + round.layers[i].name + " has no " + precision_name(p) + " statistics");
    }
    auto it = m->find(key);
    if (it == m->end()) {
      if (p == Precision::bf16) return 0.0;
      throw Error("statistics: " + round.layers[i].name + ": " + precision_name(p) + " has no \"" + key +
                  "\"; the statistics round did not record it");
    }
    if (it->second < 0 && key != k::kPrecGDotDy)
      throw Error("statistics: " + round.layers[i].name + ": " + precision_name(p) + " \"" + key + "\" is negative");
    return it->second;
  }

  // k_t²·a^w_l·‖X_l‖²/(T·‖u_l‖²): converts ‖δG_l‖² into l's relative update change (5.2 step 3).
  double upstream_factor(size_t l) const {
    const double x = scalar(l, k::kLayerXNorm);
    const double u = positive_scalar(l, k::kLayerUpdateNorm);
    return k_t * k_t * scalar(l, k::kLayerAdamAGain) * x * x / (double(round.tokens) * u * u);
  }
};

std::vector<Precision> precisions_of(const StatsRound& r) {
  // Every precision any layer measured, plus bf16 (always available as the zero-error reference).
  std::vector<Precision> out{Precision::bf16};
  for (const auto& ls : r.layers)
    for (const auto& [name, _] : ls.per_precision) {
      Precision p;
      try {
        p = parse_precision(name);
      } catch (const Error& e) {
        throw Error("statistics: " + ls.name + " per_precision: " + e.what());
      }
      bool seen = false;
      for (Precision q : out) seen = seen || q == p;
      if (!seen) out.push_back(p);
    }
  return out;
}

// ‖δG_l‖² of upstream layer l caused by m's dgrad error in precision p (5.2 steps 1–2).
double upstream_dg_sq(const RoundView& v, size_t l, size_t m, Precision p) {
  if (sibling_exact(v.ids[l], v.ids[m]))
    return v.prec(m, p, k::sibling_dg_sq_key(layer_type_short_name(v.ids[l].type)));
  const double gain_ratio = v.scalar(l, k::kLayerJtEpsSqY) / v.positive_scalar(m, k::kLayerJtEpsSqResid);
  return v.prec(m, p, k::kPrecResidErrSq) * gain_ratio;
}

}  // namespace

double weight_divergence_ref(const StatsRound& round, int m_index, Precision p) {
  RoundView v(round);
  std::optional<size_t> m;
  for (size_t i = 0; i < v.ids.size(); ++i)
    if (v.ids[i].index() == m_index) m = i;
  SNIP_ASSERT_MSG(m.has_value(), "weight_divergence_ref: layer not in the round");
  const double u = v.positive_scalar(*m, k::kLayerUpdateNorm);
  double total = v.k_t * v.k_t * v.prec(*m, p, k::kPrecOwnUpdateSq) / (u * u);
  for (size_t l = 0; l < v.ids.size(); ++l) {
    if (!is_upstream(v.ids[l], v.ids[*m])) continue;
    const double dg_sq = upstream_dg_sq(v, l, *m, p);
    const double x = v.scalar(l, k::kLayerXNorm);
    const double ul = v.positive_scalar(l, k::kLayerUpdateNorm);
    // ‖δu_l‖² ≈ k_t²·a^w_l·‖δG_l‖²·‖X_l‖²/T, relative to ‖u_l‖².
    total += v.k_t * v.k_t * v.scalar(l, k::kLayerAdamAGain) * dg_sq * x * x / double(round.tokens) / (ul * ul);
  }
  return total;
}

namespace {

// Gain-ratio upstream sums (5.2 step 2) in O(L) per layer: for m, the layers reached through the
// gain ratio are every layer of earlier blocks plus the non-sibling-exact upstream layers of m's
// own block. S_l = upstream_factor(l)·jt_eps_sq_y(l); Σ over earlier blocks by a prefix sum per block.
struct UpstreamSums {
  std::vector<double> factor, s;
  std::map<int, double> before_block;  // Σ S_l over blocks < b
};

UpstreamSums upstream_sums(const RoundView& v) {
  const size_t n = v.ids.size();
  UpstreamSums u;
  u.factor.resize(n);
  u.s.resize(n);
  std::map<int, double> block_sum;
  for (size_t l = 0; l < n; ++l) {
    u.factor[l] = v.upstream_factor(l);
    u.s[l] = u.factor[l] * v.scalar(l, k::kLayerJtEpsSqY);
    block_sum[v.ids[l].block] += u.s[l];
  }
  double running = 0;
  for (const auto& [b, sum] : block_sum) {
    u.before_block[b] = running;
    running += sum;
  }
  return u;
}

// m's upstream set: the gain-ratio part, without ‖δr‖²/‖J_Rᵀε‖² (which depend on p), and the
// upstream layers in m's block whose δG is known exactly.
struct UpstreamSet {
  double gain_sum = 0;
  std::vector<size_t> exact;
};

UpstreamSet upstream_set(const RoundView& v, const UpstreamSums& sums, size_t m) {
  const int block = v.ids[m].block;
  UpstreamSet set;
  set.gain_sum = sums.before_block.at(block);
  for (size_t l = 0; l < v.ids.size(); ++l) {
    if (v.ids[l].block != block || !is_upstream(v.ids[l], v.ids[m])) continue;
    if (sibling_exact(v.ids[l], v.ids[m]))
      set.exact.push_back(l);
    else
      set.gain_sum += sums.s[l];
  }
  return set;
}

// The layer's name and shape.
void describe_layer(LayerEstimate& e, const RoundView& v, size_t m) {
  const auto& info = v.info[m];
  e.name = v.round.layers[m].name;
  e.block = v.ids[m].block;
  e.type = v.ids[m].type;
  e.in_features = info.in_features;
  e.out_features = info.out_features;
  e.gemm_flops = info.gemm_flops(v.round.tokens);
}

// 5.1: ΔL_l(p) = c·‖J_l‖_F²·‖δY_l(p)‖²/(T·N_l), with the raw signals ‖δY‖² and ⟨G, δY⟩.
void loss_divergence(LayerEstimate& e, const RoundView& v, size_t m, Precision p, double j_fro_sq) {
  const int pi = int(p);
  const double T = double(v.round.tokens);
  const double dy = v.prec(m, p, k::kPrecDyErr);
  e.dy_err_sq[pi] = dy * dy;
  e.g_dot_dy[pi] = v.prec_map(m, p) && v.prec_map(m, p)->count(k::kPrecGDotDy) ? v.prec(m, p, k::kPrecGDotDy) : 0.0;
  e.dl[pi] = v.c * j_fro_sq * dy * dy / (T * double(v.info[m].out_features));
}

// 5.2 own term: k_t²·Σ δg²/(√v̂+ε)² / ‖u_m‖²
double own_weight_divergence(const RoundView& v, size_t m, Precision p, double u) {
  return v.k_t * v.k_t * v.prec(m, p, k::kPrecOwnUpdateSq) / (u * u);
}

// 5.2 upstream: Σ_l k_t²·a^w_l·‖δG_l‖²·‖X_l‖²/(T·‖u_l‖²), δG_l through the gain ratio or, for
// the sibling-exact layers, as recorded.
double upstream_weight_divergence(const RoundView& v, const UpstreamSums& sums, const UpstreamSet& set, size_t m,
                                  Precision p) {
  double up = 0;
  if (set.gain_sum > 0)
    up += v.prec(m, p, k::kPrecResidErrSq) / v.positive_scalar(m, k::kLayerJtEpsSqResid) * set.gain_sum;
  for (size_t l : set.exact)
    up += sums.factor[l] * v.prec(m, p, k::sibling_dg_sq_key(layer_type_short_name(v.ids[l].type)));
  return up;
}

// 5.2 upstream, exact ΔW mode: Σ_l k_t²·Σ_ij δdW_l²/(√v̂+ε)² / ‖u_l‖² from the recorded backward
// of δdX_m (rounds collected with --dw-mode exact).
double upstream_weight_divergence_exact(const RoundView& v, size_t m, Precision p) {
  double up = 0;
  if (p == Precision::bf16 && !v.prec_map(m, p)) return up;
  const std::string& name = v.round.layers[m].name;
  for (size_t l = 0; l < v.ids.size(); ++l) {
    if (!is_upstream(v.ids[l], v.ids[m])) continue;
    const auto* pm = v.prec_map(m, p);
    const auto it = pm->find(k::exact_upstream_sq_key(v.ids[l].index()));
    if (it == pm->end())
      throw Error("statistics: " + name + ": " + precision_name(p) + " has no \"" +
                  k::exact_upstream_sq_key(v.ids[l].index()) +
                  "\"; the round was collected without the exact ΔW mode (snip collect --dw-mode exact)");
    const double ul = v.positive_scalar(l, k::kLayerUpdateNorm);
    up += v.k_t * v.k_t * it->second / (ul * ul);
  }
  return up;
}

// Section 8: local quantization errors of the six GEMM operands (min-err, min-rel-err) and
// HAWQ-V3's Hessian-weighted weight error where the round has the trace. x, w, g: ‖X‖, ‖W‖, ‖G‖.
void local_errors(LayerEstimate& e, const RoundView& v, size_t m, Precision p, double x, double w, double g) {
  const int pi = int(p);
  const double ef = v.prec(m, p, k::kPrecErrFpropX) + v.prec(m, p, k::kPrecErrFpropW);
  const double eb = v.prec(m, p, k::kPrecErrDgradG) + v.prec(m, p, k::kPrecErrDgradW) +
                    v.prec(m, p, k::kPrecErrWgradG) + v.prec(m, p, k::kPrecErrWgradX);
  auto rel = [](double err, double norm) { return norm > 0 ? err / norm : 0.0; };
  const double rf = rel(v.prec(m, p, k::kPrecErrFpropX), x) + rel(v.prec(m, p, k::kPrecErrFpropW), w);
  const double rb = rel(v.prec(m, p, k::kPrecErrDgradG), g) + rel(v.prec(m, p, k::kPrecErrDgradW), w) +
                    rel(v.prec(m, p, k::kPrecErrWgradG), g) + rel(v.prec(m, p, k::kPrecErrWgradX), x);
  e.min_err_role[0][pi] = ef;
  e.min_err_role[1][pi] = eb;
  e.min_err[pi] = ef + eb;
  e.min_rel_err_role[0][pi] = rf;
  e.min_rel_err_role[1][pi] = rb;
  e.min_rel_err[pi] = rf + rb;
  const auto trace = v.round.layers[m].scalars.find(k::kLayerHessianTraceW);
  if (trace != v.round.layers[m].scalars.end()) {
    const double ew = v.prec(m, p, k::kPrecErrFpropW);
    e.hawq[pi] = trace->second / (double(v.info[m].in_features) * double(v.info[m].out_features)) * ew * ew;
  }
}

// Every estimate of round layer m at every precision of the round.
void estimate_layer(LayerEstimate& e, const RoundView& v, const UpstreamSums& sums, size_t m,
                    const std::vector<Precision>& precisions, const EstimatorOptions& options) {
  describe_layer(e, v, m);
  const double j_fro_sq = hutchinson_from_raw(v.scalar(m, k::kLayerJtEpsSqY), v.sigma_eps);
  const double u = v.positive_scalar(m, k::kLayerUpdateNorm);
  const double x = v.scalar(m, k::kLayerXNorm), w = v.scalar(m, k::kLayerWNorm), g = v.scalar(m, k::kLayerGNorm);
  const UpstreamSet set = upstream_set(v, sums, m);
  for (Precision p : precisions) {
    const int pi = int(p);
    if (p != Precision::bf16 && !v.prec_map(m, p))
      throw Error("statistics: " + e.name + " has no " + precision_name(p) + " statistics, but other layers do");
    loss_divergence(e, v, m, p, j_fro_sq);
    e.dw_own[pi] = own_weight_divergence(v, m, p, u);
    double up = upstream_weight_divergence(v, sums, set, m, p);
    if (options.dw_mode == DwMode::exact) up = upstream_weight_divergence_exact(v, m, p);
    e.dw_upstream[pi] = up;
    e.dw[pi] = e.dw_own[pi] + up;
    local_errors(e, v, m, p, x, w, g);
  }
  for (int r = 0; r < kNumRoles; ++r)
    for (int pi = 0; pi < kNumPrecisions; ++pi) {
      if (std::isnan(e.dl[pi])) {
        e.min_err_role[r][pi] = e.min_rel_err_role[r][pi] = kNaN;
      }
    }
}

// 5.3: scale-free terms, Q = ΔL̂ + λ·ΔŴ, ΔL and ΔW each divided by its FP4 sum over the layers.
void normalise(Estimates& est, const EstimatorOptions& options) {
  const int p4 = int(Precision::fp4);
  double sdl = 0, sdw = 0;
  bool have_fp4 = true;
  for (const auto& e : est.layers) {
    if (std::isnan(e.dl[p4]))
      have_fp4 = false;
    else {
      sdl += e.dl[p4];
      sdw += e.dw[p4];
    }
  }
  est.dl_fp4_sum = sdl;
  est.dw_fp4_sum = sdw;
  double ndl = 1, ndw = 1;
  if (options.normalize) {
    if (!have_fp4)
      est.warnings.push_back("the round has no fp4 statistics for every layer: ΔL and ΔW are not normalised");
    else {
      if (sdl > 0)
        ndl = sdl;
      else
        est.warnings.push_back("Σ ΔL(fp4) is 0: ΔL is not normalised");
      if (sdw > 0)
        ndw = sdw;
      else
        est.warnings.push_back("Σ ΔW(fp4) is 0: ΔW is not normalised");
    }
  }
  for (auto& e : est.layers)
    for (int pi = 0; pi < kNumPrecisions; ++pi) {
      e.dl_hat[pi] = e.dl[pi] / ndl;
      e.dw_hat[pi] = e.dw[pi] / ndw;
      e.q_role[0][pi] = e.dl_hat[pi];
      e.q_role[1][pi] = options.lambda * e.dw_hat[pi];
      e.q[pi] = e.q_role[0][pi] + e.q_role[1][pi];
    }
}

}  // namespace

Estimates estimate_divergences(const StatsRound& round, const EstimatorOptions& options) {
  if (!std::isfinite(options.lambda) || options.lambda < 0)
    throw Error("lambda must be a finite number ≥ 0 (the weight of ΔW in Q = ΔL̂ + λ·ΔŴ)");
  RoundView v(round);
  Estimates est;
  est.options = options;
  est.dims = round.dims;
  est.tokens = round.tokens;
  est.layers.resize(v.ids.size());
  const auto precisions = precisions_of(round);
  const UpstreamSums sums = upstream_sums(v);
  for (size_t m = 0; m < v.ids.size(); ++m) estimate_layer(est.layers[m], v, sums, m, precisions, options);
  normalise(est, options);
  return est;
}

}  // namespace snip
