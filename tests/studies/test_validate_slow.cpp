// Slow estimator sanity (label `slow`): on a tiny model trained for 400 steps, SNIP's ΔL ranks
// the layers like the RAW measured single-layer ablation ΔL_true (first-order term included),
// per precision FP4 and for the FP4−FP8 difference (METHOD.md section 6).
#include <gtest/gtest.h>

#include <cstdio>

#include "exp_test_util.h"
#include "snip/experiment_setup.h"
#include "snip/validate.h"

TEST(ValidateSlow, SnipLossDivergenceRanksLayersLikeTheRawAblation) {
  auto cfg = exptest::tiny_config("bf16", 400);
  cfg.batch_size = 8, cfg.seq_len = 64;
  const exptest::TinyCheckpoint ck(400, cfg);
  snip::ExperimentSetup s = snip::load_experiment(ck.dir);
  snip::ValidateOptions o;
  o.batches = 4;
  o.weight_truth = false;
  const snip::ValidationReport rep = snip::run_validation(s, o);
  const double r4 = rep.spearman("snip_dl", "dl_true", "fp4"), rd = rep.spearman("snip_dl", "dl_true", "fp4-fp8");
  std::printf("tiny 400 steps, 4 batches: Spearman snip_dl~dl_true fp4 %.3f, fp4-fp8 %.3f, ~dl_true2 fp4 %.3f\n", r4,
              rd, rep.spearman("snip_dl", "dl_true2", "fp4"));
  EXPECT_GT(r4, 0.0);
  EXPECT_GT(rd, 0.0);
}
