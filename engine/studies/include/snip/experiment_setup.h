// Loading a training checkpoint for an experiment (statistics round, validation, comparison):
// the model at a chosen batch shape, its AdamW state, the run's configuration and its data,
// with the fixed batches the experiments use.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "snip/dataset.h"
#include "snip/llama.h"
#include "snip/optimizer.h"
#include "snip/trainer.h"

namespace snip {

struct ExperimentSetup {
  std::string checkpoint;             // directory it came from
  TrainConfig config;                 // the run's configuration (batch/seq/data overrides applied)
  int64_t step = 0;                   // optimizer steps done at the checkpoint
  DataPosition position;              // the run's next training batch
  std::unique_ptr<Llama> model;       // at (config.batch_size, config.seq_len); recipe set, all BF16
  std::unique_ptr<AdamW<float>> opt;  // the checkpoint's moments and t
  TokenData data;
  bool own_data = true;               // the run's own corpus (false: another one was given, read from its start)
  std::vector<std::string> warnings;  // for the front to show (a checkpoint without a corpus fingerprint)

  // The training batch at the checkpoint's data position (+ `offset` batches), what the run
  // would train on next; batch_id "train:e<epoch>:b<batch>". inputs/targets (B, T).
  void train_batch(int64_t offset, std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                   std::string* batch_id = nullptr) const;
  // Sequential validation batch i (llm.c convention). Throws snip::Error when the validation
  // stream has fewer than i+1 batches.
  void val_batch(int64_t i, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const;
  int64_t val_batches() const;
  // η at the checkpoint's next step.
  double next_lr() const { return config.schedule.at(step); }
};

// Reads `dir` (config.json, model.safetensors, optimizer.safetensors, trainer_state.json).
// data_path "" keeps the run's data; batch_size / seq_len ≤ 0 keep the run's. Throws
// snip::Error naming the file and what is wrong (missing trainer state, seq_len above the
// model's max_position_embeddings, data too short for one batch, ...).
ExperimentSetup load_experiment(const std::string& dir, const std::string& data_path = "", int batch_size = 0,
                                int seq_len = 0);

}  // namespace snip
