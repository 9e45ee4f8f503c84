// Trainer tests: schedules and clipping, checkpoint round trip, bit-exact resume, precision
// plans (FP4 changes the loss, BF16 stays within rounding), NaN handling, stop and set_plan.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <thread>

#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/optimizer.h"
#include "snip/trainer.h"
#include "temp_dir.h"
#include "tiny_config.h"

namespace fs = std::filesystem;

namespace {

// A throw-away directory per test.
using snip_test::TempDir;

// A small English-like text corpus (deterministic), so the tests do not depend on the bundled one.
std::string write_corpus(const TempDir& dir) {
  const char* words[] = {"the", "lord", "said",  "unto", "moses", "and",   "he",     "went",  "up",  "into", "mountain",
                         "of",  "god",  "light", "was",  "good",  "earth", "heaven", "water", "day", "night"};
  std::mt19937_64 rng(42);
  std::string text;
  while (text.size() < 60000) {
    text += words[rng() % 21];
    text += (rng() % 9 == 0) ? ".\n" : " ";
  }
  const std::string path = dir / "corpus.txt";
  snip::write_file_atomic(path, text);
  return path;
}

// The shared tiny configuration (tiny_config.h) on a corpus of the test's own: 2×32-token
// micro-batches, two per step, six FP32 steps with validation every third, seed 5.
snip::TrainConfig corpus_config(const std::string& data) {
  snip::TrainConfig c = snip_test::tiny_config("fp32", 6);
  c.data_path = data;
  c.batch_size = 2;
  c.grad_accum = 2;
  c.eval_every = 3;
  c.eval_batches = 2;
  c.seed = 5;
  return c;
}

TEST(Schedule, WarmupThenCosineToMinimum) {
  snip::LrSchedule s;
  s.kind = "cosine", s.lr = 1.0, s.lr_min = 0.1, s.warmup = 4, s.total = 104;
  EXPECT_DOUBLE_EQ(s.at(0), 0.25);
  EXPECT_DOUBLE_EQ(s.at(3), 1.0);
  EXPECT_DOUBLE_EQ(s.at(4), 1.0);
  EXPECT_NEAR(s.at(54), 0.55, 1e-12);  // half way: the mean of lr and lr_min
  EXPECT_NEAR(s.at(104), 0.1, 1e-12);
  EXPECT_NEAR(s.at(500), 0.1, 1e-12);
  s.kind = "constant";
  EXPECT_DOUBLE_EQ(s.at(50), 1.0);
  s.kind = "linear";
  EXPECT_THROW(s.validate(), snip::Error);
}

TEST(Clip, ScalesToMaxNormAndReportsTheNormBefore) {
  std::vector<float> g = {3, 4, 0, 0};
  EXPECT_NEAR(snip::clip_grad_global_norm(g.data(), 4, 1.0), 5.0, 1e-12);
  EXPECT_NEAR(std::sqrt(g[0] * g[0] + g[1] * g[1]), 1.0, 1e-6);
  std::vector<float> h = {0.3f, 0.4f};
  snip::clip_grad_global_norm(h.data(), 2, 1.0);
  EXPECT_EQ(h[0], 0.3f);  // below the threshold: untouched
}

// AdamW::preview is the next step(): with the clip factor of next_step() it predicts, per element,
// what clip_grad_global_norm + step() subtract from the weight (matrices decayed, vectors not).
TEST(AdamW, PreviewPredictsTheClippedNextStep) {
  const std::vector<snip::ParamTensor> tensors = {{"w", {3, 4}, 0, 12}, {"norm", {4}, 12, 4}};
  const int64_t n = 16;
  snip::AdamW<double> opt(n, {});
  std::mt19937_64 rng(3);
  std::normal_distribution<double> nd(0, 1);
  std::vector<double> p(n), g(n);
  for (auto& x : p) x = nd(rng);
  for (int s = 0; s < 3; ++s) {  // some history in m, v and t
    for (auto& x : g) x = nd(rng);
    opt.step(p.data(), g.data(), tensors, 1e-2);
  }
  for (auto& x : g) x = 5 * nd(rng);
  const double lr = 3e-3, max_norm = 1.0;
  const snip::AdamWNextStep next = opt.next_step(g.data(), lr, max_norm);
  EXPECT_LT(next.clip_scale, 0.5);  // this gradient is clipped
  EXPECT_NEAR(next.grad_norm, std::sqrt(std::inner_product(g.begin(), g.end(), g.begin(), 0.0)), 1e-12);
  std::vector<double> update(n);
  for (const auto& t : tensors)
    for (int64_t i = t.offset; i < t.offset + t.numel; ++i)
      update[size_t(i)] = opt.preview(next, i, p[size_t(i)], g[size_t(i)], t.shape.size() >= 2).update;
  const std::vector<double> p0 = p;
  EXPECT_EQ(snip::clip_grad_global_norm(g.data(), n, max_norm), next.grad_norm);
  opt.step(p.data(), g.data(), tensors, lr);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_NEAR(p0[size_t(i)] - p[size_t(i)], update[size_t(i)], 1e-12 * (std::fabs(p0[size_t(i)]) + 1e-3)) << i;
  EXPECT_EQ(snip::clip_coefficient(0.5, 1.0), 1.0);  // below the threshold, or clipping off
  EXPECT_EQ(snip::clip_coefficient(5.0, 0.0), 1.0);
}

TEST(Trainer, LossGoesDownOnTinyModel) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  cfg.steps = 30, cfg.schedule.total = 30, cfg.eval_every = 0;
  snip::Trainer t(cfg);
  std::vector<double> losses;
  t.set_callback([&](const snip::StepMetrics& m) {
    losses.push_back(m.train_loss);
    EXPECT_GT(m.tokens_per_s, 0);
    EXPECT_EQ(m.fp4_fraction, 0.0);
    return true;
  });
  EXPECT_TRUE(t.run());
  ASSERT_EQ(losses.size(), 30u);
  EXPECT_NEAR(losses.front(), std::log(256.0), 0.2);
  EXPECT_LT(losses.back(), losses.front() - 1.0);  // a byte-level model learns the letter statistics fast
}

TEST(Checkpoint, RoundTripRestoresEverything) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  snip::Trainer t(cfg);
  t.step(), t.step();
  t.save_checkpoint(dir / "ckpt");
  for (const char* f : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"})
    EXPECT_TRUE(fs::exists(dir / (std::string("ckpt/") + f))) << f;
  auto r = snip::Trainer::resume(dir / "ckpt");
  EXPECT_EQ(r->step_count(), 2);
  EXPECT_EQ(r->config().model, cfg.model);
  EXPECT_EQ(r->optimizer().t(), 2);
  for (int64_t i = 0; i < t.model().num_params(); ++i) {
    ASSERT_EQ(r->model().param_data()[i], t.model().param_data()[i]);
    ASSERT_EQ(r->optimizer().m()[i], t.optimizer().m()[i]);
    ASSERT_EQ(r->optimizer().v()[i], t.optimizer().v()[i]);
  }
  // saving again over an existing checkpoint replaces it and leaves no temp directories
  t.step();
  t.save_checkpoint(dir / "ckpt");
  EXPECT_EQ(snip::Trainer::resume(dir / "ckpt")->step_count(), 3);
  int entries = 0;
  for (auto& e : fs::directory_iterator(dir.path)) entries += e.is_directory() ? 1 : 0;
  EXPECT_EQ(entries, 1);
}

TEST(Checkpoint, SavingRemovesTempDirsOfKilledSaversOnly) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  snip::Trainer t(cfg);
  t.step();
  // a saver that was SIGKILLed mid-save leaves ckpt.tmp-<pid>; a live one (this process's
  // parent stands in) must be left alone, and so must ckpt.old-<pid> (maybe the only copy)
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  int status = 0;
  ASSERT_EQ(waitpid(dead, &status, 0), dead);
  const fs::path stale = dir / ("ckpt.tmp-" + std::to_string(dead));
  const fs::path live = dir / ("ckpt.tmp-" + std::to_string(getppid()));
  const fs::path old = dir / ("ckpt.old-" + std::to_string(dead));
  for (const fs::path& p : {stale, live, old}) {
    fs::create_directories(p);
    std::ofstream(p / "model.safetensors") << "partial";
  }
  t.save_checkpoint(dir / "ckpt");
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(old));
  EXPECT_EQ(snip::Trainer::resume(dir / "ckpt")->step_count(), 1);
}

TEST(Checkpoint, WrongShapeIsAClearError) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  snip::Trainer t(cfg);
  t.save_checkpoint(dir / "ckpt");
  auto other = cfg.model;
  other.intermediate_size = 128;
  snip::Llama m(other, 1, 8);
  try {
    snip::read_checkpoint_model(dir / "ckpt", m);
    FAIL();
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlp.gate_proj.weight"), std::string::npos) << e.what();
  }
  EXPECT_THROW(snip::Trainer::resume(dir / "missing"), snip::Error);
}

class Resume : public ::testing::TestWithParam<const char*> {};

// Regression guard: resuming must restore weights, AdamW moments, data position and the
// stochastic-rounding key (seed, step) — with fp4 the gradients are stochastically rounded.
TEST_P(Resume, IsBitIdenticalToStraightRun) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  cfg.precision = GetParam();
  std::vector<double> straight, resumed, val_straight, val_resumed;
  {
    snip::Trainer t(cfg);
    t.set_callback([&](const snip::StepMetrics& m) {
      straight.push_back(m.train_loss);
      if (m.val_loss) val_straight.push_back(*m.val_loss);
      return true;
    });
    t.run();
    t.save_checkpoint(dir / "straight");
  }
  {
    snip::Trainer t(cfg);
    t.set_callback([&](const snip::StepMetrics& m) {
      resumed.push_back(m.train_loss);
      if (m.val_loss) val_resumed.push_back(*m.val_loss);
      return m.step < 4;  // stop after 4 steps
    });
    t.run(/*save_every=*/4, dir / "mid");
  }
  {
    auto t = snip::Trainer::resume(dir / "mid");
    EXPECT_EQ(t->step_count(), 4);
    t->set_callback([&](const snip::StepMetrics& m) {
      resumed.push_back(m.train_loss);
      if (m.val_loss) val_resumed.push_back(*m.val_loss);
      return true;
    });
    t->run();
    t->save_checkpoint(dir / "resumed");
  }
  ASSERT_EQ(straight.size(), 6u);
  ASSERT_EQ(resumed.size(), 6u);
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_EQ(straight[i], resumed[i]) << "step " << i + 1;
  EXPECT_EQ(val_straight, val_resumed);
  snip::Llama a(cfg.model, 1, 8), b(cfg.model, 1, 8);
  snip::read_checkpoint_model(dir / "straight", a);
  snip::read_checkpoint_model(dir / "resumed", b);
  for (int64_t i = 0; i < a.num_params(); ++i) ASSERT_EQ(a.param_data()[i], b.param_data()[i]);
}
INSTANTIATE_TEST_SUITE_P(Precisions, Resume, ::testing::Values("fp32", "fp4"));

TEST(Trainer, NanLossStopsAndKeepsTheLastGoodCheckpoint) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  cfg.eval_every = 0;
  snip::Trainer t(cfg);
  t.set_callback([&](const snip::StepMetrics& m) {
    if (m.step == 3) t.model().params().wq[5] = NAN;  // corrupt a weight after step 3
    return true;
  });
  try {
    t.run(/*save_every=*/2, dir / "ckpt");
    FAIL() << "expected a NaN error";
  } catch (const snip::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("step 4"), std::string::npos) << msg;
    EXPECT_NE(msg.find("model.layers.0.self_attn.q_proj.weight"), std::string::npos) << msg;
  }
  auto r = snip::Trainer::resume(dir / "ckpt");
  EXPECT_EQ(r->step_count(), 2);
  EXPECT_TRUE(r->model().first_nonfinite_param(true).empty());
}

TEST(Trainer, StopFromAnotherThreadAndCallbackCancel) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  cfg.steps = 1000, cfg.eval_every = 0;
  snip::Trainer t(cfg);
  std::atomic<int64_t> last{0};
  t.set_callback([&](const snip::StepMetrics& m) {
    last = m.step;
    return true;
  });
  std::thread stopper([&] {
    while (last.load() < 2) std::this_thread::yield();
    t.request_stop();
  });
  EXPECT_FALSE(t.run());
  stopper.join();
  EXPECT_LT(t.step_count(), 1000);
  EXPECT_GE(t.step_count(), 2);

  snip::Trainer u(cfg);
  u.set_callback([](const snip::StepMetrics& m) { return m.step < 3; });
  EXPECT_FALSE(u.run());
  EXPECT_EQ(u.step_count(), 3);
}

TEST(Trainer, BadPlanIsRejected) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  snip::Trainer t(cfg);
  snip::Plan p;
  p.layers["model.layers.7.mlp.up_proj"] = snip::LinearPrecision::uniform(snip::Precision::fp8);
  EXPECT_THROW(t.set_plan(p), snip::Error);
  cfg.precision = "fp5";
  EXPECT_THROW(snip::Trainer{cfg}, snip::Error);
}

TEST(Precision, Fp4ChangesTheLossBf16StaysWithinRounding) {
  TempDir dir;
  auto cfg = corpus_config(write_corpus(dir));
  snip::Trainer t(cfg);
  for (int i = 0; i < 10; ++i) t.step();  // away from the init, where every loss is log V
  snip::Llama& m = t.model();
  std::vector<int32_t> in(size_t(cfg.batch_size * cfg.seq_len)), tgt(in.size());
  snip::BatchLoader val(&t.data().val, cfg.batch_size, cfg.seq_len, 0, false);
  val.next(in.data(), tgt.data());
  const auto dims = cfg.model.dims();
  auto loss_at = [&](snip::Precision p) {
    m.set_precisions(std::vector<snip::LinearPrecision>(size_t(snip::kLayersPerBlock * dims.num_layers),
                                                        snip::LinearPrecision::uniform(p)));
    return m.forward(in.data(), tgt.data());
  };
  const double l32 = loss_at(snip::Precision::fp32);
  const double l16 = loss_at(snip::Precision::bf16);
  const double l4 = loss_at(snip::Precision::fp4);
  // BF16 keeps 8 significant bits: relative operand error ≤ 2^-9, the loss moves by far less than 1%.
  EXPECT_LT(std::fabs(l16 - l32), 0.01 * l32);
  EXPECT_GT(std::fabs(l4 - l32), 5 * std::fabs(l16 - l32));
  EXPECT_GT(std::fabs(l4 - l32), 1e-3);
  // set_plan takes effect at the next step, and the FP4 fraction is reported
  t.set_plan(snip::uniform_plan(dims, snip::Precision::fp4));
  EXPECT_DOUBLE_EQ(t.step().fp4_fraction, 1.0);
}

}  // namespace
