// The settings of a training run as a user gives them. `snip train`'s options, the GUI's Run
// form and its Quick start all fill one RunSettings; train_config() and adaptive_options() make
// what the trainer and the adaptive controller take, with one set of defaults (snip/defaults.h)
// and one validation. Every field is an option of `snip train` and a field of the Run form.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "snip/adaptive.h"
#include "snip/defaults.h"
#include "snip/plan.h"
#include "snip/trainer.h"

namespace snip {

// Adaptive SNIP (METHOD.md 9, 10): a statistics round and a re-plan every replan_every steps.
struct AdaptiveSettings {
  std::string method = "snip";  // any planner method (snip/planner.h)
  double budget = defaults::kBudget;
  int64_t replan_every = defaults::kReplanEvery;  // 0: plan once, before step 1
  int64_t bf16_probe_every = defaults::kBf16ProbeEvery;
  double lambda = defaults::kLambda;
  bool ties = false;
  bool per_role = false;
  std::string replan_when = "always";  // or "noise"
  double noise_floor = 0;              // 0: off
  int noise_passes = StatsRoundOptions{}.noise_passes;
  double sigma_eta_rel = StatsRoundOptions{}.sigma_eta_rel;
  bool operator==(const AdaptiveSettings&) const = default;
};

struct RunSettings {
  std::string preset;       // a model preset; "" with no config_path: defaults::kPreset
  std::string config_path;  // a Hugging Face config.json instead of a preset
  std::string data;         // "": the bundled corpus
  std::string tokenizer = "byte";
  int64_t steps = defaults::kTrainSteps;
  int batch_size = defaults::kBatchSize;
  int seq_len = 0;  // 0: min(defaults::kSeqLen, the model's max_position_embeddings)
  int grad_accum = 1;
  double lr = defaults::kLearningRate;
  double lr_min = -1;   // < 0: lr / defaults::kLrMinDivisor
  int64_t warmup = -1;  // < 0: defaults::kWarmup within the run (a longer given one is shortened with a warning)
  std::string schedule = "cosine";
  double weight_decay = defaults::kWeightDecay;
  double beta1 = defaults::kBeta1, beta2 = defaults::kBeta2;
  double clip = defaults::kGradClip;
  uint64_t seed = defaults::kSeed;
  int64_t eval_every = defaults::kEvalEvery;
  int eval_batches = defaults::kEvalBatches;
  std::string precision = defaults::kPrecision;  // every layer, without a plan or adaptive planning
  std::optional<Plan> plan;
  std::string recipe = defaults::kRecipe;
  std::optional<AdaptiveSettings> adaptive;  // BF16 until its first plan, made before step 1
  bool operator==(const RunSettings&) const = default;
};
// A new setting is a field here, an option of `snip train` (app/cmd_train.cpp) and a field of the
// Run form (ui/src/run_view.cpp); test_gui's
// WorkbenchTest.EverySettingOfTheRunFormIsASnipTrainOptionAndBothMakeTheSameRun sets every one.

// The trainer's configuration of a new run. Throws snip::Error naming the setting: a preset and a
// config both, a sequence longer than the model's positions, a final learning rate above the peak,
// an unknown precision, recipe or schedule, a plan with adaptive planning.
TrainConfig train_config(const RunSettings& s);

// The adaptive controller's options; throws snip::Error for an unknown method or replan_when, or
// a budget outside [0, 1].
AdaptiveOptions adaptive_options(const AdaptiveSettings& a);

}  // namespace snip
