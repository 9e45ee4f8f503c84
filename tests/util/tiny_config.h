// The tests' tiny training configuration, one definition for every test area (experiments,
// train, cli): the `tiny` preset on the bundled corpus, micro-batches of 4×32 tokens, no gradient
// accumulation, a cosine schedule from 3e-3 to 3e-4 after 2 warmup steps over the whole run, no
// validation, seed 7. Tests that need other sizes or a corpus of their own adjust the copy.
#pragma once
#include <cstdint>
#include <string>

#include "snip/model_config.h"
#include "snip/trainer.h"

namespace snip_test {

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

}  // namespace snip_test
