// End-to-end golden case: logits, loss, every gradient and the weights after 3 AdamW steps
// (with clipping and weight decay) of a tiny Llama, against an independent float64 PyTorch
// implementation of Hugging Face's math (tests/golden/make_golden.py, data checked in under
// tests/golden/data/tiny). Torch is not needed to run this test.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/llama.h"
#include "snip/optimizer.h"
#include "snip/safetensors.h"

namespace {

const std::string kDir = SNIP_GOLDEN_DIR "/tiny";
// float32 engine vs float64 reference
constexpr double kLossTolF32 = 2e-5;       // absolute, on a loss of ~4.8
constexpr double kLogitRelTolF32 = 1e-5;   // max |Δ| / max |logit|
constexpr double kGradRelL2TolF32 = 1e-5;  // per tensor ‖Δg‖/‖g‖
// Weights after 3 AdamW steps at lr 1e-2: Adam divides by sqrt(v), so elements whose gradient is
// almost zero amplify float32 noise in the gradient up to a fraction of lr; bound the worst
// element by 3% of one step and the typical one through the relative L2 of the updates.
constexpr double kStepWeightAbsTolF32 = 3e-4;
constexpr double kStepUpdateRelL2TolF32 = 1e-3;
// float64 engine vs float64 reference: only summation order differs
constexpr double kRelTolF64 = 1e-10;

struct Golden {
  nlohmann::json batch;
  snip::ModelConfig config;
  snip::SafetensorsFile expected = snip::SafetensorsFile::open(kDir + "/expected.safetensors");
  std::vector<int32_t> inputs, targets;
  int B = 0, T = 0;
  Golden() {
    batch = nlohmann::json::parse(snip::read_file(kDir + "/batch.json"));
    config = snip::read_config_file(kDir + "/config.json");
    B = batch["B"], T = batch["T"];
    inputs = batch["inputs"].get<std::vector<int32_t>>();
    targets = batch["targets"].get<std::vector<int32_t>>();
  }
  std::vector<float> tensor(const std::string& name, const std::vector<int64_t>& shape) const {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    std::vector<float> v(static_cast<size_t>(n));
    expected.read_f32(name, v.data(), shape);
    return v;
  }
};

template <class R>
double rel_l2(const R* a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i)
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]), den += double(b[i]) * b[i];
  return std::sqrt(num / std::max(den, 1e-300));
}

TEST(Golden, ForwardAndGradientsMatchPyTorch) {
  Golden g;
  snip::Llama m(g.config, g.B, g.T);
  snip::read_model_weights(kDir + "/model.safetensors", m);
  m.zero_grads();
  const double loss = m.forward(g.inputs.data(), g.targets.data());
  EXPECT_NEAR(loss, g.batch["loss"].get<double>(), kLossTolF32);
  const int64_t V = g.config.vocab_size;
  const auto logits = g.tensor("logits", {int64_t(g.B) * g.T, V});
  double max_diff = 0, max_abs = 0;
  for (size_t i = 0; i < logits.size(); ++i)
    max_diff = std::max(max_diff, std::fabs(double(m.logits()[i]) - logits[i])),
    max_abs = std::max(max_abs, std::fabs(double(logits[i])));
  EXPECT_LT(max_diff / max_abs, kLogitRelTolF32);
  m.backward();
  for (const auto& t : m.param_tensors()) {
    const auto ref = g.tensor("grad." + t.name, t.shape);
    EXPECT_LT(rel_l2(m.grad_data() + t.offset, ref), kGradRelL2TolF32) << t.name;
  }
}

TEST(Golden, DoublePathMatchesPyTorchToRounding) {
  Golden g;
  snip::Llama mf(g.config, g.B, g.T);
  snip::read_model_weights(kDir + "/model.safetensors", mf);
  snip::LlamaRef m(g.config, g.B, g.T);
  for (int64_t i = 0; i < m.num_params(); ++i) m.param_data()[i] = mf.param_data()[i];
  m.zero_grads();
  EXPECT_NEAR(m.forward(g.inputs.data(), g.targets.data()), g.batch["loss"].get<double>(), 1e-12);
  m.backward();
  for (const auto& t : m.param_tensors()) {
    const auto ref = g.tensor("grad." + t.name, t.shape);
    // the reference gradients were stored as float32: compare at float32 resolution
    EXPECT_LT(rel_l2(m.grad_data() + t.offset, ref), 1e-7) << t.name;
  }

  // 3 AdamW steps with clipping, in double: the trajectory of torch.optim.AdamW.
  const auto& hp = g.batch["adamw"];
  snip::AdamWConfig ac;
  ac.beta1 = hp["beta1"], ac.beta2 = hp["beta2"], ac.eps = hp["eps"], ac.weight_decay = hp["weight_decay"];
  snip::AdamW<double> opt(m.num_params(), ac);
  const auto step_losses = g.batch["step_losses"].get<std::vector<double>>();
  const auto step_norms = g.batch["step_grad_norms"].get<std::vector<double>>();
  for (int s = 0; s < int(hp["steps"]); ++s) {
    m.zero_grads();
    EXPECT_NEAR(m.forward(g.inputs.data(), g.targets.data()), step_losses[size_t(s)], kRelTolF64 * 10) << "step " << s;
    m.backward();
    const double norm = snip::clip_grad_global_norm(m.grad_data(), m.num_params(), hp["clip"].get<double>());
    EXPECT_NEAR(norm, step_norms[size_t(s)], 1e-9 * step_norms[size_t(s)]) << "step " << s;
    opt.step(m.param_data(), m.grad_data(), m.param_tensors(), hp["lr"].get<double>());
  }
  for (const auto& t : m.param_tensors()) {
    const auto ref = g.tensor("step3." + t.name, t.shape);
    for (int64_t i = 0; i < t.numel; ++i)
      ASSERT_NEAR(m.param_data()[t.offset + i], ref[size_t(i)], 1e-6 * (1 + std::fabs(ref[size_t(i)]))) << t.name;
  }
}

TEST(Golden, FloatAdamWStepsMatchPyTorch) {
  Golden g;
  snip::Llama m(g.config, g.B, g.T);
  snip::read_model_weights(kDir + "/model.safetensors", m);
  const auto& hp = g.batch["adamw"];
  snip::AdamWConfig ac;
  ac.beta1 = hp["beta1"], ac.beta2 = hp["beta2"], ac.eps = hp["eps"], ac.weight_decay = hp["weight_decay"];
  snip::AdamW<float> opt(m.num_params(), ac);
  for (int s = 0; s < int(hp["steps"]); ++s) {
    m.zero_grads();
    m.forward(g.inputs.data(), g.targets.data());
    m.backward();
    snip::clip_grad_global_norm(m.grad_data(), m.num_params(), hp["clip"].get<double>());
    opt.step(m.param_data(), m.grad_data(), m.param_tensors(), hp["lr"].get<double>());
  }
  snip::Llama m0(g.config, g.B, g.T);
  snip::read_model_weights(kDir + "/model.safetensors", m0);
  double worst = 0;
  std::string worst_name;
  for (const auto& t : m.param_tensors()) {
    const auto ref = g.tensor("step3." + t.name, t.shape);
    double num = 0, den = 0;  // update = w3 − w0, ours vs the reference
    for (int64_t i = 0; i < t.numel; ++i) {
      const double w0 = m0.param_data()[t.offset + i], ours = m.param_data()[t.offset + i];
      const double d = std::fabs(ours - ref[size_t(i)]);
      if (d > worst) worst = d, worst_name = t.name;
      num += d * d, den += (ref[size_t(i)] - w0) * (ref[size_t(i)] - w0);
    }
    EXPECT_LT(std::sqrt(num / den), kStepUpdateRelL2TolF32) << t.name;
  }
  EXPECT_LT(worst, kStepWeightAbsTolF32) << "worst tensor " << worst_name;
}

}  // namespace
