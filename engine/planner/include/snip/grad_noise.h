// The gradient noise monitor (METHOD.md section 10): per layer and precision, how far the weight
// gradient stands above the quantization noise that precision puts into it,
//   grad_noise_ratio = ‖∇W‖ / ‖∇W_q − ∇W‖,
// recorded by every statistics round (snip/stats_keys.h: kPrecGradNoiseRatio). Below √3 FP4
// training stops helping (FP4 All the Way, arXiv 2505.19115). One reading for the planner
// (snip::AdaptiveController), the CLI and the GUI's Monitor and Plan views.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "snip/precision.h"
#include "snip/stats.h"
#include "snip/stats_keys.h"

namespace snip {

inline constexpr double kNoiseRatioThreshold = 1.7320508075688772;  // √3

// The layer's ratio at precision p, or nothing when the round has none (older rounds, or a
// precision whose quantization changed nothing).
inline std::optional<double> grad_noise_ratio(const LayerStats& layer, Precision p) {
  const auto pp = layer.per_precision.find(precision_name(p));
  if (pp == layer.per_precision.end()) return std::nullopt;
  const auto r = pp->second.find(keys::kPrecGradNoiseRatio);
  if (r == pp->second.end()) return std::nullopt;
  return r->second;
}

// The round's layers (indices into round.layers, in order) whose FP4 ratio is below threshold.
inline std::vector<size_t> layers_below_noise_threshold(const StatsRound& round,
                                                        double threshold = kNoiseRatioThreshold) {
  std::vector<size_t> out;
  for (size_t i = 0; i < round.layers.size(); ++i)
    if (const auto r = grad_noise_ratio(round.layers[i], Precision::fp4); r && *r < threshold) out.push_back(i);
  return out;
}

}  // namespace snip
