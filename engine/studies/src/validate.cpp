// Ablation validation of SNIP's estimators (validate.h; METHOD.md section 6).
#include "snip/validate.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "snip/error.h"
#include "snip/qlinear.h"

namespace snip {

namespace {
// 1-based ranks of x, ties sharing the mean of their positions.
Eigen::VectorXd average_ranks(const std::vector<double>& x) {
  const size_t n = x.size();
  std::vector<size_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return x[i] < x[j]; });
  Eigen::VectorXd r(static_cast<Eigen::Index>(n));
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j + 1 < n && x[idx[j + 1]] == x[idx[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[Eigen::Index(idx[k])] = 0.5 * double(i + j) + 1;
    i = j + 1;
  }
  return r;
}
}  // namespace

// Pearson's correlation of the ranks: ρ = ⟨ra − r̄a, rb − r̄b⟩ / (‖ra − r̄a‖ · ‖rb − r̄b‖)
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  SNIP_ASSERT(a.size() == b.size());
  if (a.size() < 3) return kNaN;
  const Eigen::VectorXd ra = average_ranks(a), rb = average_ranks(b);
  const Eigen::VectorXd ca = ra.array() - ra.mean(), cb = rb.array() - rb.mean();
  const double saa = ca.squaredNorm(), sbb = cb.squaredNorm();
  if (saa == 0 || sbb == 0) return kNaN;
  return ca.dot(cb) / std::sqrt(saa * sbb);
}

double ValidationReport::spearman(const std::string& predictor, const std::string& truth,
                                  const std::string& precision) const {
  for (const auto& c : correlations)
    if (c.predictor == predictor && c.truth == truth && c.precision == precision) return c.spearman;
  return kNaN;
}

namespace {

// The next AdamW update of every linear weight (optimizer.h's formula at t+1, with the
// trainer's global-norm clipping over ALL gradients), laid out layer after layer.
struct Updates {
  std::vector<float> u;         // concatenated linear-layer updates
  std::vector<int64_t> offset;  // per linear layer, into u
  std::vector<double> norm_sq;  // ‖u_k‖²
};

void next_updates(const Llama& m, const AdamW<float>& opt, double lr, double clip, Updates& out) {
  const AdamWConfig& ac = opt.config();
  const double t1 = double(opt.t() + 1);
  const double bc1 = 1 - std::pow(ac.beta1, t1), bc2 = 1 - std::pow(ac.beta2, t1);
  const double gnorm = grad_global_norm(m.grad_data(), m.num_params());
  const double s = (clip > 0 && clip / (gnorm + 1e-6) < 1) ? clip / (gnorm + 1e-6) : 1.0;
  const int NL = m.num_linear_layers();
  if (out.offset.empty()) {
    int64_t total = 0;
    for (int l = 0; l < NL; ++l) {
      out.offset.push_back(total);
      total += m.find_param(m.linear(l).name + ".weight")->numel;
    }
    out.u.resize(size_t(total));
    out.norm_sq.resize(size_t(NL));
  }
  for (int l = 0; l < NL; ++l) {
    const ParamTensor* pt = m.find_param(m.linear(l).name + ".weight");
    const float* p = m.param_data() + pt->offset;
    const float* g = m.grad_data() + pt->offset;
    const float* m0 = opt.m() + pt->offset;
    const float* v0 = opt.v() + pt->offset;
    float* u = out.u.data() + out.offset[size_t(l)];
    double nsq = 0;
    for (int64_t e = 0; e < pt->numel; ++e) {
      const double ge = s * double(g[e]);
      const double m1 = ac.beta1 * m0[e] + (1 - ac.beta1) * ge;
      const double v1 = ac.beta2 * v0[e] + (1 - ac.beta2) * ge * ge;
      const double ue = lr * ac.weight_decay * double(p[e]) + lr / bc1 * m1 / (std::sqrt(v1 / bc2) + ac.eps);
      u[e] = float(ue);
      nsq += ue * ue;
    }
    out.norm_sq[size_t(l)] = nsq;
  }
}

// Σ_k ‖u'_k − u_k‖² / ‖u_k‖²
double relative_update_change(const Updates& clean, const Updates& q) {
  double sum = 0;
  for (size_t l = 0; l < clean.offset.size(); ++l) {
    const int64_t b = clean.offset[l], e = l + 1 < clean.offset.size() ? clean.offset[l + 1] : int64_t(clean.u.size());
    const auto uq = Eigen::Map<const Eigen::VectorXf>(q.u.data() + b, e - b).cast<double>();
    const auto uc = Eigen::Map<const Eigen::VectorXf>(clean.u.data() + b, e - b).cast<double>();
    if (clean.norm_sq[l] > 0) sum += (uq - uc).squaredNorm() / clean.norm_sq[l];
  }
  return sum;
}

void check_batch_range(const ExperimentSetup& setup, const ValidateOptions& o) {
  if (o.batches < 1) throw Error("validation needs at least one batch (--batches)");
  if (o.first_batch < 0) throw Error("validation: the first batch must not be negative");
  if (int64_t(o.first_batch) + o.batches > setup.val_batches())
    throw Error("--batches " + std::to_string(o.batches) +
                (o.first_batch ? " from batch " + std::to_string(o.first_batch) : std::string()) + " exceeds the " +
                std::to_string(setup.val_batches()) + " validation batches of " +
                std::to_string(setup.config.batch_size) + "x" + std::to_string(setup.config.seq_len) + " in " +
                setup.data.source);
}

// One batch's predictions (METHOD.md 5): a statistics round on the batch and SNIP's estimates
// from it. snip_dw is always the approx mode; with the exact mode also snip_dw_exact beside it,
// and snip_q uses the estimator's chosen mode.
struct BatchPredictions {
  StatsRound round;
  Estimates est;
  std::optional<Estimates> est_exact;
};

// The truths of one batch (METHOD.md 6.1): every layer quantized alone at every precision, the
// rest in BF16, against the clean (all-BF16) loss and next updates; each batch's values are
// added into the report's entries, divided by the number of batches.
class BatchValidation {
 public:
  BatchValidation(ExperimentSetup& setup, const ValidateOptions& o, bool exact)
      : setup_(setup),
        m_(*setup.model),
        opt_(*setup.opt),
        o_(o),
        exact_(exact),
        NL_(m_.num_linear_layers()),
        bf16_(size_t(NL_), LinearPrecision::uniform(Precision::bf16)),
        lr_(setup.next_lr()),
        clip_(setup.config.grad_clip) {}

  void run(int batch, ValidationReport& rep) {
    setup_.val_batch(batch, in_, tgt_);
    BatchPredictions bp = predict(batch);
    measure(bp, rep);
    rep.rounds.push_back(std::move(bp.round));
  }

 private:
  BatchPredictions predict(int batch) {
    StatsRoundOptions so = o_.stats;
    so.step = setup_.step, so.lr = lr_, so.grad_clip = clip_;
    so.precisions = o_.precisions;
    so.batch_id = "val:b" + std::to_string(batch);
    so.exact_weight_divergence = exact_;
    BatchPredictions bp;
    bp.round = collect_stats_round(m_, opt_, in_.data(), tgt_.data(), so);
    EstimatorOptions approx_opts = o_.estimator;
    approx_opts.dw_mode = DwMode::approx;
    bp.est = estimate_divergences(bp.round, approx_opts);
    if (exact_) {
      EstimatorOptions ex = o_.estimator;
      ex.dw_mode = DwMode::exact;
      bp.est_exact = estimate_divergences(bp.round, ex);
    }
    return bp;
  }

  // The loss with layer l in `lp` and every other layer in BF16 into *loss (when given) and, when
  // need_weights, the relative change of the next updates against the clean ones (else NaN).
  double ablate(int l, LinearPrecision lp, bool need_weights, double* loss) {
    prec_[size_t(l)] = lp;
    m_.set_precisions(prec_);
    const double L = m_.forward(in_.data(), tgt_.data());
    if (!std::isfinite(L))
      throw Error("validation: the loss with " + m_.linear(l).name + " quantized is not finite (" +
                  m_.first_nonfinite_activation() + ")");
    if (loss) *loss = L;
    double dw = kNaN;
    if (need_weights) {
      m_.zero_grads();
      m_.backward(1.0);
      next_updates(m_, opt_, lr_, clip_, quant_);
      dw = relative_update_change(clean_, quant_);
    }
    prec_[size_t(l)] = LinearPrecision::uniform(Precision::bf16);
    return dw;
  }

  void measure(const BatchPredictions& bp, ValidationReport& rep) {
    const Estimates& est_q = o_.estimator.dw_mode == DwMode::exact ? *bp.est_exact : bp.est;
    // clean reference: loss and next updates with every layer in BF16
    m_.set_precisions(bf16_);
    m_.set_quant_key(o_.stats.seed, uint64_t(setup_.step));
    const double L0 = m_.forward(in_.data(), tgt_.data());
    if (o_.weight_truth) {
      m_.zero_grads();
      m_.backward(1.0);
      next_updates(m_, opt_, lr_, clip_, clean_);
    }
    prec_ = bf16_;
    const size_t NP = o_.precisions.size();
    for (int l = 0; l < NL_; ++l) {
      const LayerEstimate& le = bp.est.layers[size_t(l)];
      for (size_t pi = 0; pi < NP; ++pi) {
        const Precision p = o_.precisions[pi];
        std::map<std::string, double>& v = rep.entries[size_t(l) * NP + pi].values;
        auto add = [&](const char* key, double x) { v[key] += x / double(o_.batches); };
        double L = 0;
        const double dw_fwd = ablate(l, {p, Precision::bf16, Precision::bf16}, o_.weight_truth, &L);
        add("dl_true", L - L0);
        add("dl_true2", L - L0 - le.g_dot_dy[int(p)]);
        if (o_.weight_truth) {
          add("dw_true_fwd", dw_fwd);
          add("dw_true_bwd", ablate(l, {Precision::bf16, p, p}, true, nullptr));
          add("dw_true_full", ablate(l, LinearPrecision::uniform(p), true, nullptr));
        }
        add("snip_dl", le.dl[int(p)]);
        add("snip_dw", le.dw[int(p)]);
        if (bp.est_exact) add("snip_dw_exact", bp.est_exact->layers[size_t(l)].dw[int(p)]);
        add("snip_q", est_q.layers[size_t(l)].q[int(p)]);
        add("min_err", le.min_err[int(p)]);
        add("min_rel_err", le.min_rel_err[int(p)]);
        add("dy_err_sq", le.dy_err_sq[int(p)]);
      }
    }
  }

  ExperimentSetup& setup_;
  Llama& m_;
  const AdamW<float>& opt_;
  const ValidateOptions& o_;
  const bool exact_;
  const int NL_;
  const std::vector<LinearPrecision> bf16_;
  const double lr_, clip_;
  std::vector<LinearPrecision> prec_;
  std::vector<int32_t> in_, tgt_;
  Updates clean_, quant_;
};

// METHOD.md 6.2: Spearman's ρ of every predictor against every truth over the layers, per
// precision and for the FP4−FP8 difference.
void add_correlations(ValidationReport& rep, const ValidateOptions& o, int NL, bool exact) {
  const size_t NP = o.precisions.size();
  std::vector<std::string> predictors = {"snip_dl", "snip_dw", "snip_q", "min_err", "min_rel_err", "dy_err_sq"};
  if (exact) predictors.insert(predictors.begin() + 2, "snip_dw_exact");
  std::vector<std::string> truths = {"dl_true", "dl_true2"};
  if (o.weight_truth) truths.insert(truths.end(), {"dw_true_full", "dw_true_fwd", "dw_true_bwd"});
  auto column = [&](const std::string& key, size_t pi) {
    std::vector<double> c;
    for (int l = 0; l < NL; ++l) c.push_back(rep.entries[size_t(l) * NP + pi].values.at(key));
    return c;
  };
  std::optional<size_t> i8, i4;
  for (size_t pi = 0; pi < NP; ++pi) {
    if (o.precisions[pi] == Precision::fp8) i8 = pi;
    if (o.precisions[pi] == Precision::fp4) i4 = pi;
  }
  for (const auto& pr : predictors)
    for (const auto& tr : truths) {
      for (size_t pi = 0; pi < NP; ++pi)
        rep.correlations.push_back(
            {pr, tr, precision_name(o.precisions[pi]), spearman(column(pr, pi), column(tr, pi)), NL});
      if (i8 && i4) {
        std::vector<double> a = column(pr, *i4), b = column(tr, *i4);
        const std::vector<double> a8 = column(pr, *i8), b8 = column(tr, *i8);
        for (int l = 0; l < NL; ++l) a[size_t(l)] -= a8[size_t(l)], b[size_t(l)] -= b8[size_t(l)];
        rep.correlations.push_back({pr, tr, "fp4-fp8", spearman(a, b), NL});
      }
    }
}

nlohmann::json validation_options_json(const ExperimentSetup& setup, const ValidateOptions& o, bool exact) {
  nlohmann::json precs = nlohmann::json::array();
  for (Precision p : o.precisions) precs.push_back(precision_name(p));
  return {{"batches", o.batches},
          {"first_batch", o.first_batch},
          {"precisions", precs},
          {"lambda", o.estimator.lambda},
          {"noise_passes", o.stats.noise_passes},
          {"weight_truth", o.weight_truth},
          {"recipe", setup.model->recipe().name()},
          {"dw_mode", dw_mode_name(o.estimator.dw_mode)},
          {"dw_exact_recorded", exact},
          {"checkpoint", setup.checkpoint},
          {"batch", "val sequential"}};
}

}  // namespace

ValidationReport run_validation(ExperimentSetup& setup, const ValidateOptions& o) {
  check_batch_range(setup, o);
  Llama& m = *setup.model;
  const int NL = m.num_linear_layers();
  const std::vector<LinearPrecision> saved = m.precisions();

  ValidationReport rep;
  rep.step = setup.step;
  rep.batches = o.batches;
  for (int l = 0; l < NL; ++l)
    for (Precision p : o.precisions) rep.entries.push_back({m.linear(l).name, p, {}});

  const bool exact = o.stats.exact_weight_divergence || o.estimator.dw_mode == DwMode::exact;
  BatchValidation batches(setup, o, exact);
  for (int bi = 0; bi < o.batches; ++bi) batches.run(o.first_batch + bi, rep);
  m.set_precisions(saved);

  add_correlations(rep, o, NL, exact);
  rep.options = validation_options_json(setup, o, exact);
  return rep;
}

}  // namespace snip
