// The training loop: owns model, AdamW, data loaders and the precision plan; runs optimizer
// steps with gradient accumulation, clipping and an LR schedule, evaluates, checkpoints and
// resumes bit-exactly, and reports every step through a plain callback (the CLI's progress
// bar, the GUI's Qt worker and the SQLite recorder all sit on it).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "snip/dataset.h"
#include "snip/defaults.h"
#include "snip/llama.h"
#include "snip/model_config.h"
#include "snip/optimizer.h"
#include "snip/plan.h"

namespace snip {

// Everything that defines a run (saved in trainer_state.json, so a resume continues it exactly).
struct TrainConfig {
  ModelConfig model;
  std::string data_path;  // "" = the bundled corpus
  std::string tokenizer = "byte";
  std::string tokenizer_fingerprint;  // of the model file (TokenizerRef), set by the Trainer; "" for byte
  double val_fraction = 0.05;
  int batch_size = defaults::kBatchSize;  // B rows per micro-batch
  int seq_len = defaults::kSeqLen;        // T
  int grad_accum = 1;                     // micro-batches per optimizer step
  int64_t steps = defaults::kTrainSteps;  // total optimizer steps of the run
  LrSchedule schedule;
  AdamWConfig adamw;
  double grad_clip = defaults::kGradClip;        // global-norm clipping; ≤ 0 disables
  uint64_t seed = defaults::kSeed;               // weights, data order and stochastic rounding
  int64_t eval_every = defaults::kEvalEvery;     // validation loss every N steps (0 = never)
  int eval_batches = defaults::kEvalBatches;     // sequential validation batches per evaluation
  Plan plan;                                     // precision per layer; empty layers map = uniform `precision`
  std::string precision = defaults::kPrecision;  // used when the plan is empty: fp32 | bf16 | fp8 | fp4
  std::string recipe = defaults::kRecipe;        // scaling recipe of the quantized GEMMs
};
nlohmann::json train_config_to_json(const TrainConfig& c);
TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source);

// One optimizer step's report.
struct StepMetrics {
  int64_t step = 0;  // 1-based: the number of optimizer steps done
  int64_t total_steps = 0;
  double train_loss = 0;           // mean over the step's micro-batches
  std::optional<double> val_loss;  // when evaluated at this step
  double lr = 0;
  double grad_norm = 0;     // before clipping
  double tokens_per_s = 0;  // this step
  double step_seconds = 0;
  double fp4_fraction = 0;  // achieved FP4 FLOP fraction of the plan in effect
  int64_t tokens_seen = 0;
};

// Thrown by Trainer::step when its interrupt asked it to stop between two micro-batches: the
// step was abandoned and the trainer is as it was before it (weights, moments, data position).
class StepInterrupted : public std::exception {
 public:
  const char* what() const noexcept override { return "the step was abandoned between two micro-batches"; }
};

class Trainer {
 public:
  // A new run: weights initialized from config.seed, data loaded (bad data throws snip::Error).
  explicit Trainer(TrainConfig config);
  // Continues the run saved in `checkpoint_dir` (weights, AdamW moments, step, data position,
  // plan). `total_steps` > 0 replaces the run's total step count. The corpus must be the one the
  // run was saved with: its absolute path is stored (a relative --data resumed from another
  // directory still finds it) with a fingerprint of its token stream, and a corpus that changed
  // or is gone is an error naming both fingerprints. `data_path` (non-empty) reads the corpus
  // from another place; its fingerprint must still match.
  // `state`: the checkpoint's trainer_state.json as the caller already read it (read_run_state),
  // so a resume reads it once; null: read here.
  static std::unique_ptr<Trainer> resume(const std::string& checkpoint_dir, int64_t total_steps = 0,
                                         const std::string& data_path = "", const nlohmann::json* state = nullptr);
  // The trainer state a resumed trainer started from (an empty object for a new run).
  const nlohmann::json& resumed_state() const { return resumed_state_; }
  // The memory one trainer of `config` needs (weights, gradients, AdamW moments, activations),
  // in bytes: what the constructor refuses when it cannot fit, and what a compare multiplies.
  static double memory_bytes(const TrainConfig& config);

  // Returning false from the callback cancels the run after that step.
  using Callback = std::function<bool(const StepMetrics&)>;
  void set_callback(Callback cb) { callback_ = std::move(cb); }
  // Warnings from resolving the plan (layers left out run in BF16, ...).
  const std::vector<std::string>& plan_warnings() const { return plan_warnings_; }
  // What loading the data changed in the configuration, and why (more --eval-batches than the
  // validation split holds: all of them are used, and stored).
  const std::vector<std::string>& data_warnings() const { return data_warnings_; }

  // Takes effect at the next step boundary (thread-safe). Throws snip::Error for a plan that
  // names a layer the model lacks.
  void set_plan(const Plan& plan);
  // The plan the next step trains under: the one set_plan handed over, else the config's.
  Plan next_plan() const;

  // One optimizer step (all micro-batches). Non-finite loss or gradients throw snip::Error naming
  // the step and the first non-finite tensor; the weights are left as they were before the step.
  StepMetrics step();
  // Asked between two micro-batches of a step (--grad-accum): true abandons the step (throws
  // StepInterrupted, nothing of it applied), so a stop request never waits for a long step.
  void set_interrupt(std::function<bool()> interrupt) { interrupt_ = std::move(interrupt); }
  const std::function<bool()>& interrupt() const { return interrupt_; }
  // Runs steps until the total is reached, the callback returns false or stop is requested.
  // With save_every > 0 and an out_dir, writes a checkpoint every save_every steps. Returns true
  // when the run reached its total step count.
  bool run(int64_t save_every = 0, const std::string& out_dir = "");
  // From any thread: stop after the current step / pause and resume between steps.
  void request_stop() {
    stop_.store(true);
    resume_cv_.notify_all();
  }
  void set_paused(bool paused);
  bool stop_requested() const { return stop_.load(); }

  // Mean loss over the first `batches` sequential batches of the validation stream (forward only).
  double evaluate(int batches);
  // What would make the run fail at its first evaluation, checked before step 1: a validation
  // stream shorter than one batch, or --eval-every > 0 with no evaluation batches. Throws
  // snip::Error saying what to change.
  void check_can_evaluate() const;
  // 64-bit FNV-1a of the corpus token stream (train + validation) and its token count: what a
  // checkpoint stores to recognize its corpus on resume.
  struct CorpusFingerprint {
    uint64_t tokens = 0;
    uint64_t hash = 0;
    std::string hex() const;  // the hash as 16 hex digits
    std::string str() const;  // "N tokens, fnv1a64 0123456789abcdef"
  };
  void save_checkpoint(const std::string& dir) const;
  nlohmann::json trainer_state() const;

  // Settings of the layers above the trainer (e.g. the session's adaptive re-planning) saved in
  // trainer_state.json under "extra" and given back by a resumed trainer, so a checkpoint alone
  // continues the whole run. An object; null when the checkpoint has none (older checkpoints).
  void set_state_extra(const std::string& key, nlohmann::json value) { extra_[key] = std::move(value); }
  const nlohmann::json& state_extra() const { return extra_; }
  // Warnings of a resume the caller should print (e.g. an older checkpoint without a corpus
  // fingerprint, so an edited corpus cannot be detected).
  const std::vector<std::string>& resume_warnings() const { return resume_warnings_; }

  int64_t step_count() const { return step_; }
  // The stochastic-rounding seed of the quantized GEMMs (default: config().seed). A replicated
  // experiment gives each replicate its own without changing the data order; not checkpointed.
  void set_rounding_seed(uint64_t seed) { rounding_seed_ = seed; }
  uint64_t rounding_seed() const { return rounding_seed_.value_or(config_.seed); }
  const TrainConfig& config() const { return config_; }
  Llama& model() { return *model_; }
  const Llama& model() const { return *model_; }
  AdamW<float>& optimizer() { return *opt_; }
  const TokenData& data() const { return data_; }
  const std::vector<LinearPrecision>& precisions() const { return model_->precisions(); }

 private:
  std::function<bool()> interrupt_;
  Trainer(TrainConfig config, bool init_weights);
  void apply_pending_plan();
  void resolve_and_store_plan(const Plan& plan, std::vector<LinearPrecision>* out);

  TrainConfig config_;
  TokenData data_;
  std::unique_ptr<Llama> model_;
  std::unique_ptr<AdamW<float>> opt_;
  std::unique_ptr<BatchLoader> train_loader_;
  std::vector<int32_t> inputs_, targets_;
  int64_t step_ = 0;
  int64_t tokens_seen_ = 0;
  std::optional<uint64_t> rounding_seed_;
  Callback callback_;
  std::vector<std::string> plan_warnings_;
  std::vector<std::string> data_warnings_;
  std::vector<std::string> resume_warnings_;
  nlohmann::json extra_ = nlohmann::json::object();
  nlohmann::json resumed_state_ = nlohmann::json::object();
  CorpusFingerprint fingerprint_;

  mutable std::mutex plan_mutex_;
  std::optional<Plan> pending_plan_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> paused_{false};
  std::mutex pause_mutex_;
  std::condition_variable resume_cv_;
};

// Whether `data` (the tokens read now) is the corpus the checkpoint in `dir` was trained on (its
// trainer_state.json's "data", as `state_data`): throws snip::Error naming both fingerprints
// and what to do when they differ. Returns a warning when the checkpoint stored no fingerprint
// (an older snip), else "". Every reader that continues or measures a run on its own corpus
// (resume, collect, validate, compare) asks.
std::string check_checkpoint_corpus(const nlohmann::json& state_data, const TokenData& data, const std::string& dir);

}  // namespace snip
