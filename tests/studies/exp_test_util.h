// Shared fixtures of the experiments tests: a tiny trainer on the bundled corpus and a tiny
// checkpoint in a temporary folder of its own.
#pragma once
#include <string>

#include "snip/model_config.h"
#include "snip/trainer.h"
#include "temp_dir.h"
#include "tiny_config.h"

namespace exptest {

// The `tiny` preset on the bundled corpus, one micro-batch of 4×32 tokens per step (tiny_config.h).
using snip_test::tiny_config;

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
