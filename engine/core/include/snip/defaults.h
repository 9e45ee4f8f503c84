// The one home of every default a user meets in both fronts: the engine's structs
// (TrainConfig, LrSchedule, AdamWConfig, PlanRequest, EstimatorOptions, CompareOptions), the
// `snip` CLI's options and the GUI's form fields all read these constants, so a run started
// from either front with nothing changed is the same run.
#pragma once
#include <cstdint>

namespace snip::defaults {

// ---- training (snip train, the GUI's Run view, TrainConfig) ----
inline constexpr const char* kPreset = "small";  // the model (snip/model_config.h presets)
inline constexpr int64_t kTrainSteps = 500;      // a few minutes for `small` on 2 cores
// BF16 is the reference every statistics round, plan and comparison measures against.
inline constexpr const char* kPrecision = "bf16";
inline constexpr const char* kRecipe = "snip";
inline constexpr int kBatchSize = 8;
// T: capped at the model's max_position_embeddings. 128 is what the README's experiments use
// and keeps a CPU step short; the context is long enough for the byte-level corpus.
inline constexpr int kSeqLen = 128;
inline constexpr double kLearningRate = 3e-3;
inline constexpr double kLrMinDivisor = 10;  // the cosine schedule decays to lr / 10
inline constexpr int64_t kWarmup = 20;
inline constexpr double kWeightDecay = 0.1;
inline constexpr double kBeta1 = 0.9, kBeta2 = 0.95;
inline constexpr double kGradClip = 1.0;
inline constexpr uint64_t kSeed = 1337;
inline constexpr int64_t kEvalEvery = 100;
inline constexpr int kEvalBatches = 8;

// ---- planning (snip solve/train/compare, the GUI's Run, Plan and Compare views) ----
// ρ: the FP4 fraction of linear-layer FLOPs, as in the paper's main experiment.
inline constexpr double kBudget = 0.75;
// λ in Q = ΔL̂ + λ·ΔŴ (METHOD.md 5.3); λ = 1 is not neutral. The SNIP arm at this λ is the
// reference of a comparison.
inline constexpr double kLambda = 0.1;
inline constexpr double kBf16MaxFraction = 0.1;  // with BF16 as a third choice: at most this FLOP fraction
// Adaptive SNIP (snip train --method, the GUI's "Adaptive" precision): a statistics round and a
// re-plan every kReplanEvery steps (0: plan once, before step 1), and a BF16 forward on the same
// batch every kBf16ProbeEvery steps for the live loss gap (0: never). A round costs about five
// BF16 steps and a probe one forward: about 6% of a run at these intervals.
inline constexpr int64_t kReplanEvery = 100;
inline constexpr int64_t kBf16ProbeEvery = 25;

// ---- replicated compares (snip compare, the GUI's Compare view, CompareOptions) ----
inline constexpr int64_t kCompareSteps = 200;  // training steps per arm, from the checkpoint
inline constexpr int kCompareReplicates = 3;   // K: every arm trained K times, paired by replicate
inline constexpr int kCompareRandomSeeds = 2;  // random ×k
// SNIP's arms, one per λ; kLambda's arm is the reference of the verdicts.
inline constexpr double kCompareLambdas[] = {0, kLambda, 0.3, 1};
inline constexpr int kCompareCooldown = 20;       // LR decays linearly to 0 over these extra steps before val
inline constexpr int kCompareEvalBatches = 8;     // sequential validation batches
inline constexpr int kCompareOracleBatches = 32;  // validation batches the oracle's damage is averaged over

}  // namespace snip::defaults
