// TEST DATA ONLY: a synthetic but plausible snip-stats/1 statistics round for a model shape, so
// the GUI tests, screenshots and the GUI bench can exercise the planner without running a
// statistics round. Nothing here is measured; it is never shipped in the product.
//
// Shape of the numbers: operand norms grow with √(T·K); FP4 quantization errors are ~8× FP8's;
// each layer type and block gets a fixed sensitivity (down_proj and the first and last blocks
// more sensitive), jittered by a seeded RNG, so plans differ between methods and budgets.
#pragma once
#include <cmath>
#include <random>
#include <string>

#include "snip/layers.h"
#include "snip/stats.h"
#include "snip/stats_keys.h"

namespace snip::test {

inline StatsRound synthetic_stats_round(const ModelDims& dims, int64_t tokens, int64_t step, uint64_t seed = 7) {
  namespace k = snip::keys;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> jitter(0.7, 1.4);
  StatsRound round;
  round.step = step;
  round.batch_id = "synthetic:test-only";
  round.dims = dims;
  round.tokens = tokens;
  round.recipe = "snip";
  round.globals = {{k::kGlobalLoss0, 2.5},     {k::kGlobalCurvature, 3e-4},    {k::kGlobalSigmaEps, 1e-3},
                   {k::kGlobalKt, 3e-4},       {k::kGlobalLearningRate, 3e-3}, {k::kGlobalNoisePasses, 3},
                   {k::kGlobalSigmaEta, 1e-2}, {k::kGlobalAdamBeta1, 0.9},     {k::kGlobalAdamBeta2, 0.95},
                   {k::kGlobalAdamEps, 1e-8}};
  round.options = {{"synthetic", true}};
  static const double kTypeSensitivity[7] = {0.6, 0.5, 1.1, 1.3, 0.9, 0.8, 2.2};  // q k v o gate up down
  for (const LinearLayerInfo& info : linear_layers(dims)) {
    LayerStats ls;
    ls.name = info.name;
    const double edge = (info.block == 0 || info.block == dims.num_layers - 1) ? 1.8 : 1.0;
    const double sens = kTypeSensitivity[int(info.type)] * edge * jitter(rng);
    const double K = double(info.in_features), N = double(info.out_features), T = double(tokens);
    const double x = std::sqrt(T * K), w = std::sqrt(N * K) * 0.02, g = std::sqrt(T * N) * 1e-4;
    ls.scalars = {{k::kLayerXNorm, x},
                  {k::kLayerWNorm, w},
                  {k::kLayerYNorm, x * 0.5},
                  {k::kLayerGNorm, g},
                  {k::kLayerDxNorm, g * 2},
                  {k::kLayerDwNorm, g * x * 1e-2},
                  {k::kLayerAdamMNorm, 1e-3},
                  {k::kLayerAdamVNorm, 1e-6},
                  {k::kLayerAdamA, 1e6},
                  {k::kLayerAdamAGain, 1e6 * jitter(rng)},
                  {k::kLayerUpdateNorm, 3e-4 * std::sqrt(N * K) * jitter(rng)},
                  {k::kLayerJtEpsSqY, 1e-6 * T * N * sens},
                  {k::kLayerJtEpsSqResid, 1e-6 * T * dims.hidden}};
    for (const char* prec : {"fp8", "fp4"}) {
      const double e = (std::string(prec) == "fp4" ? 0.09 : 0.012) * jitter(rng);  // relative RMS error
      std::map<std::string, double> m = {{k::kPrecErrFpropX, e * x},
                                         {k::kPrecErrFpropW, e * w},
                                         {k::kPrecErrDgradG, e * g},
                                         {k::kPrecErrDgradW, e * w},
                                         {k::kPrecErrWgradG, e * g},
                                         {k::kPrecErrWgradX, e * x},
                                         {k::kPrecDyErr, e * x * 0.5 * sens},
                                         {k::kPrecDdxErr, e * g * 2},
                                         {k::kPrecDdwErr, e * g * x * 1e-2},
                                         {k::kPrecGDotDy, 0.0},
                                         {k::kPrecOwnUpdateSq, e * e * 1e-2 * sens * K * N},
                                         {k::kPrecResidErrSq, e * e * g * g * sens}};
      m[k::kPrecGradNoiseRatio] = m[k::kPrecDdwErr] > 0 ? (g * x * 1e-2) / m[k::kPrecDdwErr] : 0.0;
      if (info.type == LayerType::o)
        for (const char* s : {"q", "k", "v"}) m[k::sibling_dg_sq_key(s)] = e * e * g * g * 0.3;
      if (info.type == LayerType::down)
        for (const char* s : {"gate", "up"}) m[k::sibling_dg_sq_key(s)] = e * e * g * g * 0.3;
      ls.per_precision[prec] = std::move(m);
    }
    round.layers.push_back(std::move(ls));
  }
  return round;
}

// Llama-2-70B's shape: 80 blocks × 7 = 560 selectable linear layers.
inline ModelDims llama70b_dims() {
  ModelDims d;
  d.hidden = 8192;
  d.intermediate = 28672;
  d.num_layers = 80;
  d.num_heads = 64;
  d.num_kv_heads = 8;
  return d;
}

}  // namespace snip::test
