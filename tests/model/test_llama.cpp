// Whole-model checks: finite differences on the double-precision model, the float training
// path against it, the statistics hooks, and config validation.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "snip/error.h"
#include "snip/llama.h"
#include "snip/model_config.h"

namespace {

constexpr double kFdStep = 1e-5;
constexpr double kFdTol = 1e-6;            // double model vs central differences (abs + rel)
constexpr double kFloatGradRelTol = 2e-4;  // float path vs double path, per tensor, relative L2
constexpr double kFloatLossTol = 1e-5;

snip::ModelConfig micro_config(bool tied) {
  snip::ModelConfig c;
  c.hidden_size = 16, c.intermediate_size = 24, c.num_hidden_layers = 2, c.num_attention_heads = 4;
  c.num_key_value_heads = 2, c.vocab_size = 11, c.max_position_embeddings = 8, c.rms_norm_eps = 1e-5;
  c.rope_theta = 100.0, c.tie_word_embeddings = tied;
  return c;
}

void random_tokens(std::vector<int32_t>& in, std::vector<int32_t>& tgt, int n, int V, uint64_t seed) {
  std::mt19937_64 rng(seed);
  in.resize(n), tgt.resize(n);
  for (int i = 0; i < n; ++i) in[i] = int32_t(rng() % V), tgt[i] = int32_t(rng() % V);
}

// Perturbs norm weights away from 1 so their gradients are exercised in a generic point.
template <class R>
void jitter_norms(snip::LlamaModel<R>& m, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 1.5);
  for (const auto& t : m.param_tensors())
    if (t.shape.size() == 1)
      for (int64_t i = 0; i < t.numel; ++i) m.param_data()[t.offset + i] = R(u(rng));
}

class ModelFd : public ::testing::TestWithParam<bool> {};

TEST_P(ModelFd, EveryTensorMatchesFiniteDifferences) {
  const auto cfg = micro_config(GetParam());
  const int B = 2, T = 5;
  snip::LlamaRef m(cfg, B, T);
  m.init_weights(7);
  // larger weights than HF's 0.02 so every op is far from linear
  for (int64_t i = 0; i < m.num_params(); ++i) m.param_data()[i] *= 10;
  jitter_norms(m, 8);
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, B * T, cfg.vocab_size, 9);
  m.zero_grads();
  m.forward(in.data(), tgt.data());
  m.backward();
  const std::vector<double> grad(m.grad_data(), m.grad_data() + m.num_params());
  std::mt19937_64 rng(10);
  for (const auto& t : m.param_tensors()) {
    for (int s = 0; s < 6; ++s) {  // 6 random elements of every tensor
      const int64_t i = t.offset + int64_t(rng() % uint64_t(t.numel));
      double& p = m.param_data()[i];
      const double keep = p;
      p = keep + kFdStep;
      const double lp = m.forward(in.data(), tgt.data());
      p = keep - kFdStep;
      const double lm = m.forward(in.data(), tgt.data());
      p = keep;
      const double numeric = (lp - lm) / (2 * kFdStep);
      EXPECT_NEAR(grad[size_t(i)], numeric, kFdTol * (1 + std::fabs(numeric))) << t.name << " element " << i - t.offset;
    }
  }
}
INSTANTIATE_TEST_SUITE_P(Tied, ModelFd, ::testing::Values(false, true));

TEST(Model, FloatPathMatchesDoublePath) {
  const auto cfg = snip::preset_config("tiny");
  const int B = 2, T = 16;
  snip::Llama mf(cfg, B, T);
  snip::LlamaRef md(cfg, B, T);
  mf.init_weights(3);
  for (int64_t i = 0; i < mf.num_params(); ++i) md.param_data()[i] = mf.param_data()[i];
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, B * T, cfg.vocab_size, 4);
  mf.zero_grads(), md.zero_grads();
  const double lf = mf.forward(in.data(), tgt.data());
  const double ld = md.forward(in.data(), tgt.data());
  EXPECT_NEAR(lf, ld, kFloatLossTol);
  EXPECT_NEAR(ld, std::log(256.0), 0.1);  // small init: close to uniform prediction
  mf.backward(), md.backward();
  for (const auto& t : mf.param_tensors()) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < t.numel; ++i) {
      const double a = mf.grad_data()[t.offset + i], b = md.grad_data()[t.offset + i];
      num += (a - b) * (a - b), den += b * b;
    }
    ASSERT_GT(den, 0) << t.name << " has an all-zero gradient";
    EXPECT_LT(std::sqrt(num / den), kFloatGradRelTol) << t.name;
  }
}

TEST(Model, GradientAccumulationAddsMicroBatches) {
  const auto cfg = snip::preset_config("tiny");
  snip::LlamaRef m(cfg, 1, 8);
  m.init_weights(5);
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, 8, cfg.vocab_size, 6);
  m.zero_grads();
  m.forward(in.data(), tgt.data());
  m.backward(0.5);
  const std::vector<double> half(m.grad_data(), m.grad_data() + m.num_params());
  m.backward(0.5);  // same micro-batch again: the gradient of the mean doubles
  for (int64_t i = 0; i < m.num_params(); i += 97) EXPECT_NEAR(m.grad_data()[i], 2 * half[size_t(i)], 1e-15);
}

TEST(Hooks, LinearViewsAreConsistent) {
  const auto cfg = micro_config(false);
  const int B = 2, T = 5;
  snip::LlamaRef m(cfg, B, T);
  m.set_retain_intermediates(true);
  m.init_weights(11);
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, B * T, cfg.vocab_size, 12);
  m.zero_grads();
  m.forward(in.data(), tgt.data());
  m.backward();
  for (int l = 0; l < m.num_linear_layers(); ++l) {
    const auto v = m.linear(l);
    EXPECT_EQ(m.linear(v.name).Y, v.Y);
    for (int64_t r = 0; r < v.rows; r += 3)
      for (int64_t n = 0; n < v.N; n += 5) {
        double y = 0, dw = 0;
        for (int64_t k = 0; k < v.K; ++k) y += v.X[r * v.K + k] * v.W[n * v.K + k];
        EXPECT_NEAR(v.Y[r * v.N + n], y, 1e-12) << v.name;
        for (int64_t rr = 0; rr < v.rows; ++rr) dw += v.dY[rr * v.N + n] * v.X[rr * v.K + 1];
        EXPECT_NEAR(v.dW[n * v.K + 1], dw, 1e-12) << v.name;
      }
    for (int64_t r = 0; r < v.rows; r += 2) {  // dX = dY·W
      double dx = 0;
      for (int64_t n = 0; n < v.N; ++n) dx += v.dY[r * v.N + n] * v.W[n * v.K + 2];
      EXPECT_NEAR(v.dX[r * v.K + 2], dx, 1e-12) << v.name;
    }
  }
  EXPECT_THROW(m.linear("model.layers.9.self_attn.q_proj"), snip::Error);
}

TEST(Hooks, ResidualLossAndProbeBackward) {
  const auto cfg = micro_config(false);
  const int B = 2, T = 5, L = cfg.num_hidden_layers;
  const int64_t n = int64_t(B) * T * cfg.hidden_size;
  snip::LlamaRef m(cfg, B, T);
  m.set_retain_intermediates(true);
  m.init_weights(13);
  for (int64_t i = 0; i < m.num_params(); ++i) m.param_data()[i] *= 10;
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, B * T, cfg.vocab_size, 14);
  m.zero_grads();
  const double l0 = m.forward(in.data(), tgt.data());
  m.backward();
  const std::vector<double> grads(m.grad_data(), m.grad_data() + m.num_params());
  const std::vector<double> logits(m.logits(), m.logits() + B * T * cfg.vocab_size);

  // (c) the loss from the cached Z is the loss; a perturbed Z moves it by ≈ ⟨∂L/∂Z, δ⟩
  std::vector<double> Z(m.final_residual(), m.final_residual() + n);
  EXPECT_NEAR(m.loss_from_residual(Z.data()), l0, 1e-12);
  std::vector<double> Zp(Z), delta = Z;
  double lin = 0;
  std::mt19937_64 rng(15);
  std::normal_distribution<double> nd(0, 1e-6);
  for (int64_t i = 0; i < n; ++i) delta[i] = nd(rng), Zp[i] += delta[i], lin += m.residual_grad(L)[i] * delta[i];
  EXPECT_NEAR(m.loss_from_residual(Zp.data()) - l0, lin, 1e-9 * std::fabs(lin) + 1e-14);
  for (size_t i = 0; i < logits.size(); ++i) ASSERT_EQ(m.logits()[i], logits[i]) << "cached logits changed";

  // (d) seeding the probe backward with the real ∂L/∂Z reproduces the main backward exactly,
  // and a scaled seed scales every probe gradient (backprop is linear)
  std::vector<double> dZ(m.residual_grad(L), m.residual_grad(L) + n);
  for (auto& x : dZ) x *= 3;
  m.backward_from_residual(dZ.data());
  for (int l = 0; l < m.num_linear_layers(); ++l) {
    const auto a = m.linear(l), b = m.probe_linear(l);
    EXPECT_EQ(b.dW, nullptr);
    for (int64_t i = 0; i < a.rows * a.N; ++i) ASSERT_NEAR(b.dY[i], 3 * a.dY[i], 1e-12) << a.name;
    for (int64_t i = 0; i < a.rows * a.K; ++i) ASSERT_NEAR(b.dX[i], 3 * a.dX[i], 1e-12) << a.name;
  }
  for (int b = 0; b < L; ++b)
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_NEAR(m.probe_residual_grad(b)[i], 3 * m.residual_grad(b)[i], 1e-12);
      ASSERT_NEAR(m.probe_residual_mid_grad(b)[i], 3 * m.residual_mid_grad(b)[i], 1e-12);
    }
  for (int64_t i = 0; i < m.num_params(); ++i)
    ASSERT_EQ(m.grad_data()[i], grads[size_t(i)]) << "parameter grads changed";
}

TEST(Hooks, RetainingIntermediatesDoesNotChangeTheStep) {
  const auto cfg = snip::preset_config("tiny");
  snip::Llama a(cfg, 2, 16), b(cfg, 2, 16);
  b.set_retain_intermediates(true);
  a.init_weights(21), b.init_weights(21);
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, 32, cfg.vocab_size, 22);
  a.zero_grads(), b.zero_grads();
  EXPECT_EQ(a.forward(in.data(), tgt.data()), b.forward(in.data(), tgt.data()));
  a.backward(), b.backward();
  for (int64_t i = 0; i < a.num_params(); ++i) ASSERT_EQ(a.grad_data()[i], b.grad_data()[i]);
  EXPECT_EQ(a.linear(0).dY, nullptr);  // not retained: no per-layer gradients
  EXPECT_EQ(a.linear(6).Y, nullptr);   // down_proj output is a scratch slot
  EXPECT_NE(a.linear(4).Y, nullptr);   // gate output is needed by backward anyway
  EXPECT_NE(b.linear(0).dY, nullptr);
  EXPECT_GT(double(b.memory_use().backward), 1.5 * double(a.memory_use().backward));
}

// Turning retention off again keeps the larger arenas (a statistics round every N steps does not
// re-allocate and page-fault them each time), and the re-used memory's stale contents do not
// reach the results: a model toggled on, off, on and off computes the same bits as one that
// never retained.
TEST(Hooks, RetentionToggledKeepsTheArenasAndTheBits) {
  const auto cfg = snip::preset_config("tiny");
  snip::Llama a(cfg, 2, 16), c(cfg, 2, 16);
  a.init_weights(23), c.init_weights(23);
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, 32, cfg.vocab_size, 24);
  const auto small = c.memory_use();
  c.set_retain_intermediates(true);
  c.zero_grads();
  c.forward(in.data(), tgt.data());
  c.backward();
  const auto large = c.memory_use();
  ASSERT_GT(large.activations, small.activations);
  ASSERT_GT(large.backward, small.backward);
  c.set_retain_intermediates(false);
  EXPECT_EQ(c.memory_use().activations, large.activations);
  EXPECT_EQ(c.memory_use().backward, large.backward);
  c.set_retain_intermediates(true);
  c.set_retain_intermediates(false);
  a.zero_grads(), c.zero_grads();
  EXPECT_EQ(a.forward(in.data(), tgt.data()), c.forward(in.data(), tgt.data()));
  a.backward(), c.backward();
  for (int64_t i = 0; i < a.num_params(); ++i) ASSERT_EQ(a.grad_data()[i], c.grad_data()[i]);
  EXPECT_EQ(c.linear(0).dY, nullptr);  // the hooks follow the layout, not the memory held
}

// The per-block backward is the model's backward: from ∂L/∂R_{b+1} it reproduces every dY, dX,
// ∂L/∂M_b and ∂L/∂R_b of backward() bit for bit (the same code on the same cached activations),
// and entered inside a half (o's / down's input, a norm's output) it gives the branch's share of
// the residual gradient: ∂L/∂M_b − ∂L/∂R_{b+1} and ∂L/∂R_b − ∂L/∂M_b.
TEST(Hooks, BlockBackwardIsTheModelsBackwardFromAnyEntryPoint) {
  const auto cfg = micro_config(false);
  const int B = 2, T = 5, L = cfg.num_hidden_layers;
  const int64_t n = int64_t(B) * T * cfg.hidden_size;
  snip::LlamaRef m(cfg, B, T);
  m.set_retain_intermediates(true);
  m.init_weights(31);
  for (int64_t i = 0; i < m.num_params(); ++i) m.param_data()[i] *= 10;
  std::vector<int32_t> in, tgt;
  random_tokens(in, tgt, B * T, cfg.vocab_size, 32);
  m.zero_grads();
  m.forward(in.data(), tgt.data());
  m.backward();
  const std::vector<double> grads(m.grad_data(), m.grad_data() + m.num_params());
  snip::BlockGradStorage<double> store(m);
  snip::BlockGrads<double>& g = store.grads();
  const snip::BlockBackwardMode<double> frozen;
  auto expect_diff = [n](const double* got, const double* hi, const double* lo, const char* what, int b) {
    for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], hi[i] - lo[i], 1e-12 * (1 + std::fabs(hi[i]))) << what << b;
  };
  for (int b = 0; b < L; ++b) {
    m.block_backward(b, m.residual_grad(b + 1), g, frozen);
    for (int t = 0; t < 7; ++t) {
      const auto v = m.linear(b * snip::kLayersPerBlock + t);
      for (int64_t i = 0; i < v.rows * v.N; ++i) ASSERT_EQ(g.dy[t][i], v.dY[i]) << v.name;
      for (int64_t i = 0; i < v.rows * v.K; ++i) ASSERT_EQ(g.dx[t][i], v.dX[i]) << v.name;
    }
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g.dmid[i], m.residual_mid_grad(b)[i]) << "block " << b;
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g.dres[i], m.residual_grad(b)[i]) << "block " << b;

    const int li = b * snip::kLayersPerBlock;
    std::vector<double> d(static_cast<size_t>(n));
    m.mlp_half_backward(b, snip::HalfEntry::branch_input, m.linear(li + 6).dX, g, frozen);
    expect_diff(g.dmid, m.residual_mid_grad(b), m.residual_grad(b + 1), "down input, block ", b);
    for (int64_t i = 0; i < n; ++i) d[size_t(i)] = m.linear(li + 4).dX[i] + m.linear(li + 5).dX[i];
    m.mlp_half_backward(b, snip::HalfEntry::norm_output, d.data(), g, frozen);
    expect_diff(g.dmid, m.residual_mid_grad(b), m.residual_grad(b + 1), "ln2 output, block ", b);
    m.attention_half_backward(b, snip::HalfEntry::branch_input, m.linear(li + 3).dX, g, frozen);
    expect_diff(g.dres, m.residual_grad(b), m.residual_mid_grad(b), "o input, block ", b);
    for (int64_t i = 0; i < n; ++i)
      d[size_t(i)] = m.linear(li + 0).dX[i] + m.linear(li + 1).dX[i] + m.linear(li + 2).dX[i];
    m.attention_half_backward(b, snip::HalfEntry::norm_output, d.data(), g, frozen);
    expect_diff(g.dres, m.residual_grad(b), m.residual_mid_grad(b), "ln1 output, block ", b);
  }
  for (int64_t i = 0; i < m.num_params(); ++i)
    ASSERT_EQ(m.grad_data()[i], grads[size_t(i)]) << "frozen block backward changed a gradient";
}

TEST(Config, ValidationErrorsNameTheField) {
  auto expect_error = [](nlohmann::json j, const std::string& needle) {
    try {
      snip::config_from_json(j, "cfg.json");
      FAIL() << "expected an error mentioning " << needle;
    } catch (const snip::Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  nlohmann::json good = snip::config_to_json(snip::preset_config("tiny"));
  EXPECT_EQ(snip::config_from_json(good), snip::preset_config("tiny"));
  auto j = good;
  j["num_attention_heads"] = 5;
  expect_error(j, "does not divide hidden_size");
  j = good;
  j["num_key_value_heads"] = 3;
  expect_error(j, "num_key_value_heads");
  j = good;
  j.erase("hidden_size");
  expect_error(j, "missing required field \"hidden_size\"");
  j = good;
  j["intermediate_size"] = -4;
  expect_error(j, "intermediate_size");
  j = good;
  j["rms_norm_eps"] = "small";
  expect_error(j, "rms_norm_eps");
  j = good;
  j["hidden_act"] = "gelu";
  expect_error(j, "hidden_act");
  EXPECT_THROW(snip::preset_config("huge"), snip::Error);
  EXPECT_THROW(snip::Llama(snip::preset_config("tiny"), 1, 65), snip::Error);  // T > max_position_embeddings
}

TEST(Config, PresetsHaveTheAdvertisedSizes) {
  EXPECT_NEAR(double(snip::preset_config("medium").num_parameters()), 25e6, 2e6);
  const auto t = snip::preset_config("tinyllama-1.1b");
  EXPECT_NEAR(double(t.num_parameters()), 1.1e9, 0.05e9);
  const auto s = snip::preset_config("small");
  EXPECT_EQ(s.hidden_size, 256);
  snip::Llama m(s, 1, 8);
  EXPECT_EQ(m.num_params(), s.num_parameters());
}

}  // namespace
