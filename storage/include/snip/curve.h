// Downsampling a metric curve for drawing: a 100k-step curve becomes at most a few thousand
// points without losing its spikes. Used by Store::curve and usable on live buffers (GUI).
#pragma once
#include <span>
#include <vector>

#include "snip/store_types.h"

namespace snip {

// Min/max bucketing. `points` ascending by step. When there are at most max_points points
// they are returned as is; otherwise the step range [first.step, last.step] is cut into
// max_points/2 equal-width buckets and each non-empty bucket contributes its minimum and its
// maximum value (one point when they coincide), in step order; ties keep the earliest step.
// Throws snip::Error when max_points < 2.
std::vector<CurvePoint> downsample_min_max(std::span<const CurvePoint> points, int max_points);

}  // namespace snip
