// Shared fixtures for test_planner: synthetic cost tables and statistics rounds.
#pragma once
#include <random>
#include <string>

#include "snip/cost_table.h"
#include "snip/layers.h"
#include "snip/stats.h"
#include "snip/stats_keys.h"

namespace snip::test {

// A small Llama shape: C 64, F 176, 4 heads, 2 kv heads (q/o 64×64, k/v 32×64, MLP 176×64).
inline ModelDims small_dims(int blocks) {
  return ModelDims{64, 176, blocks, 4, 2};
}

// Random positive costs with fp4 > fp8 > bf16 = 0 on a model shape (FLOPs from the shape), or
// with random FLOPs when `random_flops` (exercises non-Llama ratios and the rounding guard).
inline CostTable random_table(int blocks, uint64_t seed, bool random_flops = false) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  CostTable t;
  t.kind = "snip";
  t.source = "synthetic";
  t.has_roles = true;
  t.has_divergences = true;
  for (const auto& info : linear_layers(small_dims(blocks))) {
    CostLayer c;
    c.name = info.name;
    c.block = info.block;
    c.type = info.type;
    c.flops = random_flops ? 0.1 + 3.0 * u(rng) : 3.0 * info.gemm_flops(16);
    for (int r = 0; r < kNumRoles; ++r) {
      const double c8 = u(rng);
      c.cost[r][int(Precision::fp32)] = kNaN;
      c.cost[r][int(Precision::bf16)] = 0.1 * u(rng);
      c.cost[r][int(Precision::fp8)] = c8;
      c.cost[r][int(Precision::fp4)] = c8 + 4.0 * u(rng);
    }
    c.pred_q = c.cost;
    for (Precision p : {Precision::bf16, Precision::fp8, Precision::fp4}) {
      c.pred_dl[int(p)] = c.cost[0][int(p)];
      c.pred_dw[int(p)] = c.cost[1][int(p)];
    }
    t.layers.push_back(c);
  }
  return t;
}

// A statistics round with every key the estimators read, values random positive.
inline StatsRound random_round(int blocks, uint64_t seed) {
  namespace k = keys;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.5, 2.0);
  StatsRound r;
  r.step = 100;
  r.dims = small_dims(blocks);
  r.tokens = 32;
  r.globals = {{k::kGlobalLoss0, 3.0}, {k::kGlobalCurvature, 0.02}, {k::kGlobalSigmaEps, 0.3}, {k::kGlobalKt, 1e-3}};
  for (const auto& info : linear_layers(r.dims)) {
    LayerStats ls;
    ls.name = info.name;
    for (const char* key : k::kRequiredLayerScalars) ls.scalars[key] = u(rng);
    for (const char* p : {"fp8", "fp4"}) {
      const double scale = std::string(p) == "fp4" ? 8.0 : 1.0;  // fp4 errors larger
      for (const char* key : k::kRequiredPrecisionKeys) ls.per_precision[p][key] = scale * u(rng);
      ls.per_precision[p][k::kPrecGDotDy] = u(rng) - 1.0;
      for (const char* t : {"q", "k", "v", "gate", "up"}) ls.per_precision[p][k::sibling_dg_sq_key(t)] = scale * u(rng);
    }
    r.layers.push_back(ls);
  }
  return r;
}

}  // namespace snip::test
