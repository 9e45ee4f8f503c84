// Shared fixtures of the experiments tests: a tiny trainer on the bundled corpus and a tiny
// checkpoint in a temporary folder of its own.
#pragma once
#include <string>

#include "snip/model_config.h"
#include "snip/trainer.h"
#include "temp_dir.h"

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

// A checkpoint of tiny_config(precision, steps) trained from scratch, saved in a fresh temporary
// folder that is removed with this object.
struct TinyCheckpoint {
  snip_test::TempDir tmp;
  std::string dir;  // the checkpoint directory
  explicit TinyCheckpoint(int64_t steps, const snip::TrainConfig& config = tiny_config())
      : tmp("exp-ck"), dir(tmp.file("ck")) {
    snip::TrainConfig c = config;
    c.steps = c.schedule.total = steps;
    snip::Trainer t(c);
    t.run();
    t.save_checkpoint(dir);
  }
};

}  // namespace exptest
