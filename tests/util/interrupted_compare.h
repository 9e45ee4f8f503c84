// An interrupted compare for the tests that show one (the CLI's `show --compare`, the GUI's
// Compare view): four arms (BF16, SNIP λ 0.1, min-err, uniform FP4), K = 3, stopped after the
// trainings `finished` names, as two jobs leave it: bf16 and SNIP with all three replicates,
// then whatever else the test asks for. Returns the compare's id.
#pragma once
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "snip/store.h"

namespace snip_test {

// (row position, replicate from 1) of a finished training beyond bf16's and SNIP's.
using FinishedTraining = std::pair<int64_t, int64_t>;

inline int64_t insert_interrupted_compare(snip::Store& store, const std::string& checkpoint,
                                          const std::vector<FinishedTraining>& finished) {
  snip::CompareRecord c;
  c.checkpoint = checkpoint;
  c.budget = 0.5;
  c.recipe = "snip";
  c.steps = 10;
  c.cooldown_steps = 0;
  c.eval_batches = 1;
  c.last_window = 5;
  c.replicates = 3;
  c.status = snip::RunStatus::running;
  for (const char* m : {"uniform-bf16", "snip \u03bb=0.1", "min-err", "uniform-fp4"}) {
    snip::CompareRowRecord r;
    r.method = m;
    if (std::string(m).rfind("snip", 0) == 0) r.lambda = 0.1;
    r.train_loss_last = r.val_loss_plan = r.val_loss_bf16 = std::numeric_limits<double>::quiet_NaN();
    c.rows.push_back(r);
  }
  c.options = {{"snip_reference", "snip \u03bb=0.1"}};
  const int64_t id = store.insert_compare(c);
  auto put = [&](int64_t pos, int64_t k, double loss) {
    snip::CompareReplicateRecord x;
    x.train_loss_last = loss;
    x.val_loss_plan = loss + 0.01;
    x.val_loss_bf16 = loss + 0.02;
    x.train_curve = {loss + 1, loss};
    store.add_compare_replicate(id, pos, k, x);
  };
  for (int k = 1; k <= 3; ++k) put(0, k, 3.0 + 0.01 * k), put(1, k, 3.1 + 0.012 * k);
  for (const auto& [pos, k] : finished) put(pos, k, 3.0 + 0.1 * double(pos) + 0.05 * double(k));  // (2, 2): 3.3
  store.set_compare_status(id, snip::RunStatus::interrupted, "stopped by the test");
  return id;
}

}  // namespace snip_test
