// Min/max bucket downsampling of curves (see curve.h).
#include "snip/curve.h"

#include "snip/error.h"

namespace snip {

std::vector<CurvePoint> downsample_min_max(std::span<const CurvePoint> points, int max_points) {
  if (max_points < 2)
    throw Error("a downsampled curve needs at least 2 points (a minimum and a maximum), got " +
                std::to_string(max_points));
  if (points.size() <= size_t(max_points)) return {points.begin(), points.end()};
  const int64_t buckets = max_points / 2;
  const int64_t lo = points.front().step;
  const __int128 span = __int128(points.back().step) - lo + 1;
  std::vector<CurvePoint> out;
  out.reserve(size_t(max_points));
  size_t i = 0;
  while (i < points.size()) {
    // bucket b holds steps with floor((step - lo) * buckets / span) == b
    const int64_t b = int64_t((__int128(points[i].step) - lo) * buckets / span);
    size_t lo_i = i, hi_i = i;
    size_t j = i + 1;
    for (; j < points.size() && int64_t((__int128(points[j].step) - lo) * buckets / span) == b; ++j) {
      if (points[j].value < points[lo_i].value) lo_i = j;
      if (points[j].value > points[hi_i].value) hi_i = j;
    }
    if (lo_i == hi_i) {
      out.push_back(points[lo_i]);
    } else {
      out.push_back(points[std::min(lo_i, hi_i)]);
      out.push_back(points[std::max(lo_i, hi_i)]);
    }
    i = j;
  }
  return out;
}

}  // namespace snip
