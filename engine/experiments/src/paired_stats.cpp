// Paired replicate statistics of a plan comparison (paired_stats.h).
#include "snip/paired_stats.h"

#include <Eigen/Core>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "snip/error.h"

namespace snip {

const char* verdict_name(Verdict v) {
  switch (v) {
    case Verdict::better:
      return "better";
    case Verdict::worse:
      return "worse";
    case Verdict::indistinguishable:
      return "indistinguishable";
  }
  return "?";
}

double student_t_975(int dof) {
  if (dof < 1) throw Error("student_t_975: the degrees of freedom must be at least 1, got " + std::to_string(dof));
  const boost::math::students_t dist(static_cast<double>(dof));
  return boost::math::quantile(dist, 0.975);
}

namespace {
// The values as an Eigen vector (no copy).
Eigen::Map<const Eigen::VectorXd> vector_view(const std::vector<double>& v) {
  return Eigen::Map<const Eigen::VectorXd>(v.data(), Eigen::Index(v.size()));
}
}  // namespace

// mean = Σx/n,  sd = ‖x − mean‖ / √(n − 1),  ci95 = t_{0.975, n−1} · sd / √n
Interval mean_ci95(const std::vector<double>& values) {
  if (values.empty()) throw Error("mean_ci95: no values");
  const auto x = vector_view(values);
  Interval iv;
  iv.n = int(values.size());
  iv.mean = x.mean();
  if (iv.n < 2) {
    iv.sd = iv.ci95 = std::numeric_limits<double>::quiet_NaN();
    return iv;
  }
  // two-pass (centre first): exact zero for identical values (ties)
  iv.sd = std::sqrt((x.array() - iv.mean).square().sum() / (iv.n - 1));
  iv.ci95 = student_t_975(iv.n - 1) * iv.sd / std::sqrt(double(iv.n));
  return iv;
}

std::vector<double> paired_differences(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size())
    throw Error("paired differences need the same number of replicates on both sides (" + std::to_string(a.size()) +
                " vs " + std::to_string(b.size()) + ")");
  std::vector<double> d(a.size());
  Eigen::Map<Eigen::VectorXd>(d.data(), Eigen::Index(d.size())) = vector_view(a) - vector_view(b);
  return d;
}

Verdict verdict_of(const Interval& diff) {
  if (!diff.has_interval() || !std::isfinite(diff.lo()) || !std::isfinite(diff.hi())) return Verdict::indistinguishable;
  if (diff.lo() > 0) return Verdict::worse;
  if (diff.hi() < 0) return Verdict::better;
  return Verdict::indistinguishable;
}

std::vector<GapStats> arm_statistics(const std::vector<Replicates>& arms, size_t bf16, size_t snip) {
  if (bf16 >= arms.size() || snip >= arms.size())
    throw Error("arm statistics: the BF16 or SNIP reference arm index is out of range");
  const size_t k = arms[bf16].size();
  if (k == 0) throw Error("arm statistics: the arms have no replicates");
  for (size_t a = 0; a < arms.size(); ++a)
    if (arms[a].size() != k)
      throw Error("arm statistics: arm " + std::to_string(a) + " has " + std::to_string(arms[a].size()) +
                  " replicates, the BF16 arm " + std::to_string(k) + " (every arm needs the same replicates)");
  std::vector<GapStats> out(arms.size());
  for (size_t a = 0; a < arms.size(); ++a) {
    GapStats& s = out[a];
    s.gaps = paired_differences(arms[a], arms[bf16]);
    s.gap = mean_ci95(s.gaps);
    if (a == snip) continue;
    s.diff_vs_snip = mean_ci95(paired_differences(arms[a], arms[snip]));
    s.verdict = verdict_of(*s.diff_vs_snip);
  }
  return out;
}

std::vector<ArmStatistics> compare_statistics(const std::vector<Replicates>& train, const std::vector<Replicates>& val,
                                              size_t bf16, size_t snip) {
  if (train.size() != val.size()) throw Error("compare statistics: train and validation losses of different arms");
  const std::vector<GapStats> t = arm_statistics(train, bf16, snip), v = arm_statistics(val, bf16, snip);
  std::vector<ArmStatistics> out(t.size());
  for (size_t a = 0; a < t.size(); ++a) out[a] = {t[a], v[a]};
  return out;
}

}  // namespace snip
