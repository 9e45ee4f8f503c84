// Shared fixtures of the experiments tests: a tiny trainer on the bundled corpus.
#pragma once
#include "snip/model_config.h"
#include "snip/trainer.h"

namespace exptest {

// The `tiny` preset on the bundled corpus, one micro-batch of 4×32 tokens per step.
inline snip::TrainConfig tiny_config(const std::string& precision = "bf16", int64_t steps = 20) {
  snip::TrainConfig c;
  c.model = snip::preset_config("tiny");
  c.batch_size = 4;
  c.seq_len = 32;
  c.grad_accum = 1;
  c.steps = steps;
  c.schedule.kind = "cosine";
  c.schedule.lr = 3e-3;
  c.schedule.lr_min = 3e-4;
  c.schedule.warmup = 2;
  c.schedule.total = steps;
  c.eval_every = 0;
  c.seed = 7;
  c.precision = precision;
  return c;
}

}  // namespace exptest
