// AdamW (decoupled weight decay, bias correction; PyTorch 1.13's update order), global-norm
// gradient clipping and learning-rate schedules. Templated on the scalar type so the golden
// test can run the optimizer in double beside the float training path.
#pragma once
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snip/defaults.h"
#include "snip/llama.h"

namespace snip {

struct AdamWConfig {
  double beta1 = defaults::kBeta1;
  double beta2 = defaults::kBeta2;
  double eps = 1e-8;
  double weight_decay =
      defaults::kWeightDecay;  // applied to matrices (embedding, linear weights, lm_head), not to norm weights
};

// The next AdamW step (t+1) as the trainer will take it (AdamW::next_step): its learning rate,
// the clip factor of the gradient and the bias corrections.
struct AdamWNextStep {
  double lr = 0;
  double grad_norm = 0;     // global norm of the unclipped gradient
  double clip_scale = 1;    // s: the step uses s·g (clip_coefficient)
  double bc1 = 1, bc2 = 1;  // 1−β1^{t+1}, 1−β2^{t+1}
};

// What the next step would do to one element, given its unclipped gradient (AdamW::preview).
struct AdamWElementUpdate {
  double update = 0;  // p ← p − update
  double denom = 0;   // √v̂' + ε, the preconditioner of the gradient's m' term
};

// PyTorch clip_grad_norm_'s factor for a gradient of global norm `norm`: min(1, max_norm/(norm + 1e-6));
// 1 when max_norm ≤ 0 (off) or the norm is not finite.
double clip_coefficient(double norm, double max_norm);

// One AdamW state over a parameter arena (m and v share the parameter layout).
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
template <class R>
class AdamW {
 public:
  AdamW(int64_t num_params, AdamWConfig config);
  // One update of every tensor of `tensors` (offsets into params/grads); t advances by one.
  void step(R* params, const R* grads, const std::vector<ParamTensor>& tensors, double lr);
  // The next step() at learning rate lr after clip_grad_global_norm(grads, n, max_norm): read-only.
  AdamWNextStep next_step(const R* grads, double lr, double max_norm) const;
  // What that step would do to element i (arena index) with weight p and unclipped gradient g, in
  // double and without changing any state: g' = s·g, m' = β1·m + (1−β1)·g', v' = β2·v + (1−β2)·g'²,
  // update = lr·wd·p + lr/(1−β1^{t+1}) · m'/(√(v'/(1−β2^{t+1})) + ε); `decay`: the tensor is a
  // matrix (step() decays matrices only). The statistics round linearizes the update with it.
  AdamWElementUpdate preview(const AdamWNextStep& s, int64_t i, double p, double g, bool decay) const {
    const double gs = s.clip_scale * g;
    const double m1 = config_.beta1 * double(m_[size_t(i)]) + (1 - config_.beta1) * gs;
    const double v1 = config_.beta2 * double(v_[size_t(i)]) + (1 - config_.beta2) * gs * gs;
    AdamWElementUpdate u;
    u.denom = std::sqrt(v1 / s.bc2) + config_.eps;
    u.update = (decay ? s.lr * config_.weight_decay * p : 0.0) + s.lr / s.bc1 * m1 / u.denom;
    return u;
  }
  const AdamWConfig& config() const { return config_; }
  int64_t num_params() const { return n_; }
  int64_t t() const { return t_; }  // updates done so far
  void set_t(int64_t t) { t_ = t; }
  R* m() { return m_.get(); }
  R* v() { return v_.get(); }
  const R* m() const { return m_.get(); }
  const R* v() const { return v_.get(); }

 private:
  int64_t n_ = 0;
  AdamWConfig config_;
  int64_t t_ = 0;
  std::unique_ptr<R[]> m_, v_;
};

// L2 norm of all gradients (accumulated in double, fixed order).
template <class R>
double grad_global_norm(const R* grads, int64_t n);
// PyTorch clip_grad_norm_: g ← g · min(1, max_norm / (norm + 1e-6)). Returns the norm before clipping.
// max_norm ≤ 0 disables clipping.
template <class R>
double clip_grad_global_norm(R* grads, int64_t n, double max_norm);

// Learning rate at step s (0-based).
//   constant: lr (after warmup)
//   cosine:   lr_min + ½(lr − lr_min)(1 + cos(π·(s − warmup)/(total − warmup))) after warmup
// Warmup (both): lr·(s+1)/warmup for s < warmup.
struct LrSchedule {
  std::string kind = "cosine";  // "constant" | "cosine"
  double lr = defaults::kLearningRate;
  double lr_min = defaults::kLearningRate / defaults::kLrMinDivisor;
  int64_t warmup = defaults::kWarmup;
  int64_t total = defaults::kTrainSteps;
  double at(int64_t step) const;
  void validate() const;  // throws snip::Error for an unknown kind or negative values
};

}  // namespace snip
