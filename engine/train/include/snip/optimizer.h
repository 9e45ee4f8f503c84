// AdamW (decoupled weight decay, bias correction; PyTorch 1.13's update order), global-norm
// gradient clipping and learning-rate schedules. Templated on the scalar type so the golden
// test can run the optimizer in double beside the float training path.
#pragma once
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

// One AdamW state over a parameter arena (m and v share the parameter layout).
//   p ← p·(1 − lr·wd);  m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − lr/(1−β1^t) · m / (sqrt(v)/sqrt(1−β2^t) + eps)
template <class R>
class AdamW {
 public:
  AdamW(int64_t num_params, AdamWConfig config);
  // One update of every tensor of `tensors` (offsets into params/grads); t advances by one.
  void step(R* params, const R* grads, const std::vector<ParamTensor>& tensors, double lr);
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
