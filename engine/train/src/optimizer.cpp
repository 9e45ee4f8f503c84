// AdamW, gradient clipping and learning-rate schedules (optimizer.h).
#include "snip/optimizer.h"

#include <cmath>

#include "snip/error.h"
#include "snip/parallel.h"

namespace snip {

template <class R>
AdamW<R>::AdamW(int64_t num_params, AdamWConfig config)
    : n_(num_params), config_(config), m_(new R[size_t(num_params)]()), v_(new R[size_t(num_params)]()) {}

template <class R>
void AdamW<R>::step(R* params, const R* grads, const std::vector<ParamTensor>& tensors, double lr) {
  ++t_;
  const R b1 = R(config_.beta1), b2 = R(config_.beta2), eps = R(config_.eps);
  const R bc1 = R(1 - std::pow(config_.beta1, double(t_)));
  const R bc2_sqrt = R(std::sqrt(1 - std::pow(config_.beta2, double(t_))));
  const R step_size = R(lr) / bc1;
  for (const auto& t : tensors) {
    const R decay = t.shape.size() >= 2 ? R(1 - lr * config_.weight_decay) : R(1);
    R* p = params + t.offset;
    const R* g = grads + t.offset;
    R* m = m_.get() + t.offset;
    R* v = v_.get() + t.offset;
    parallel_for(t.numel, t.numel, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        p[i] *= decay;
        m[i] = m[i] * b1 + g[i] * (R(1) - b1);
        v[i] = v[i] * b2 + g[i] * g[i] * (R(1) - b2);
        const R denom = std::sqrt(v[i]) / bc2_sqrt + eps;
        p[i] -= step_size * (m[i] / denom);
      }
    });
  }
}

template <class R>
AdamWNextStep AdamW<R>::next_step(const R* grads, double lr, double max_norm) const {
  AdamWNextStep s;
  s.lr = lr;
  s.grad_norm = grad_global_norm(grads, n_);
  s.clip_scale = clip_coefficient(s.grad_norm, max_norm);
  const double t1 = double(t_ + 1);
  s.bc1 = 1 - std::pow(config_.beta1, t1), s.bc2 = 1 - std::pow(config_.beta2, t1);
  return s;
}

double clip_coefficient(double norm, double max_norm) {
  if (!(max_norm > 0) || !std::isfinite(norm)) return 1.0;
  const double coef = max_norm / (norm + 1e-6);
  return coef < 1 ? coef : 1.0;
}

template <class R>
double grad_global_norm(const R* grads, int64_t n) {
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += double(grads[i]) * double(grads[i]);
  return std::sqrt(s);
}

template <class R>
double clip_grad_global_norm(R* grads, int64_t n, double max_norm) {
  const double norm = grad_global_norm(grads, n);
  const double coef = clip_coefficient(norm, max_norm);
  if (coef < 1) {
    const R c = R(coef);
    for (int64_t i = 0; i < n; ++i) grads[i] *= c;
  }
  return norm;
}

double LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup) return lr * double(step + 1) / double(warmup);
  if (kind == "constant") return lr;
  const int64_t span = std::max<int64_t>(total - warmup, 1);
  const double progress = std::min(1.0, double(step - warmup) / double(span));
  return lr_min + 0.5 * (lr - lr_min) * (1 + std::cos(M_PI * progress));
}

void LrSchedule::validate() const {
  if (kind != "constant" && kind != "cosine")
    throw Error("unknown learning-rate schedule \"" + kind + "\"; choose constant or cosine");
  if (!(lr > 0) || !std::isfinite(lr)) throw Error("learning rate must be a positive number");
  if (lr_min < 0 || lr_min > lr) throw Error("minimum learning rate must be between 0 and the learning rate");
  if (warmup < 0) throw Error("warmup steps must be ≥ 0");
}

template class AdamW<float>;
template class AdamW<double>;
template double grad_global_norm<float>(const float*, int64_t);
template double grad_global_norm<double>(const double*, int64_t);
template double clip_grad_global_norm<float>(float*, int64_t, double);
template double clip_grad_global_norm<double>(double*, int64_t, double);

}  // namespace snip
