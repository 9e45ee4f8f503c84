// One run description (snip/run_settings.h): the defaults both fronts share, and the settings a
// run cannot have refused in one place, naming the setting.
#include <gtest/gtest.h>

#include <string>

#include "snip/error.h"
#include "snip/run_settings.h"

namespace {

std::string refusal(const snip::RunSettings& s) {
  try {
    (void)snip::train_config(s);
  } catch (const snip::Error& e) {
    return e.what();
  }
  return "accepted";
}

TEST(RunSettings, TheDefaultsAreTheSharedOnesAndFitTheModel) {
  snip::RunSettings s;
  s.preset = "tiny";  // 64 positions
  s.steps = 5;
  const snip::TrainConfig c = snip::train_config(s);
  EXPECT_EQ(c.seq_len, 64) << "min(128, max_position_embeddings)";
  EXPECT_EQ(c.schedule.warmup, 5) << "the default warmup (20) within a 5-step run";
  EXPECT_DOUBLE_EQ(c.schedule.lr_min, snip::defaults::kLearningRate / snip::defaults::kLrMinDivisor);
  EXPECT_EQ(c.precision, "bf16");
  EXPECT_EQ(c.recipe, "snip");
  s.warmup = 50;  // given: kept; the session shortens it and says so
  EXPECT_EQ(snip::train_config(s).schedule.warmup, 50);
  s.preset.clear();
  EXPECT_EQ(snip::train_config(s).model.num_hidden_layers, 6) << "the default preset is small";
  s.adaptive = snip::AdaptiveSettings{};
  s.precision = "fp4";
  EXPECT_EQ(snip::train_config(s).precision, "bf16") << "adaptive runs start in BF16 until the first plan";
  const snip::AdaptiveOptions a = snip::adaptive_options(*s.adaptive);
  EXPECT_EQ(a.replan_every, snip::defaults::kReplanEvery);
  EXPECT_DOUBLE_EQ(a.request.budget, snip::defaults::kBudget);
}

TEST(RunSettings, WhatARunCannotHaveIsRefusedNamingTheSetting) {
  snip::RunSettings s;
  s.preset = "tiny";
  s.seq_len = 65;
  EXPECT_NE(refusal(s).find("exceeds max_position_embeddings = 64"), std::string::npos) << refusal(s);
  s.seq_len = 0;
  s.config_path = "config.json";
  EXPECT_NE(refusal(s).find("not both"), std::string::npos) << refusal(s);
  s.config_path.clear();
  s.lr_min = 1.0;
  EXPECT_NE(refusal(s).find("between 0 and the learning rate"), std::string::npos) << refusal(s);
  s.lr_min = -1;
  s.precision = "fp16";
  EXPECT_NE(refusal(s), "accepted");
  s.precision = "fp8";
  s.recipe = "block:1";
  EXPECT_NE(refusal(s), "accepted");
  s.recipe = "snip";
  s.schedule = "linear";
  EXPECT_NE(refusal(s), "accepted");
  s.schedule = "cosine";
  s.plan = snip::Plan{};
  s.adaptive = snip::AdaptiveSettings{};
  EXPECT_NE(refusal(s).find("give one of them"), std::string::npos) << refusal(s);
  snip::AdaptiveSettings a;
  a.budget = 1.5;
  EXPECT_THROW((void)snip::adaptive_options(a), snip::Error);
  a.budget = 0.5;
  a.method = "best";
  EXPECT_THROW((void)snip::adaptive_options(a), snip::Error);
  a.method = "snip";
  a.replan_when = "sometimes";
  EXPECT_THROW((void)snip::adaptive_options(a), snip::Error);
}

}  // namespace
