// Paired replicate statistics of a plan comparison (paired_stats.h).
#include "snip/paired_stats.h"

#include <Eigen/Core>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <string>

#include "snip/error.h"
#include "snip/names.h"

namespace snip {

namespace {

constexpr std::array<Named<Verdict>, 4> kVerdictNames{{{Verdict::better, "better"},
                                                       {Verdict::worse, "worse"},
                                                       {Verdict::indistinguishable, "indistinguishable"},
                                                       {Verdict::incomplete, "incomplete"}}};

}  // namespace

const char* verdict_name(Verdict v) {
  return name_of(kVerdictNames, v);
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

namespace {

// Mean ± half-width of what finished; no values: n = 0 and NaN (nothing to show).
Interval mean_ci95_or_none(const std::vector<double>& values) {
  if (!values.empty()) return mean_ci95(values);
  Interval iv;
  iv.mean = iv.sd = iv.ci95 = std::numeric_limits<double>::quiet_NaN();
  return iv;
}

}  // namespace

std::vector<GapStats> arm_statistics(const std::vector<Replicates>& arms, size_t bf16, size_t snip,
                                     const std::vector<Finished>& finished) {
  if (bf16 >= arms.size() || snip >= arms.size())
    throw Error("arm statistics: the BF16 or SNIP reference arm index is out of range");
  const size_t k = arms[bf16].size();
  if (k == 0) throw Error("arm statistics: the arms have no replicates");
  for (size_t a = 0; a < arms.size(); ++a)
    if (arms[a].size() != k)
      throw Error("arm statistics: arm " + std::to_string(a) + " has " + std::to_string(arms[a].size()) +
                  " replicates, the BF16 arm " + std::to_string(k) + " (every arm needs the same replicates)");
  if (!finished.empty() && finished.size() != arms.size())
    throw Error("arm statistics: a finished mask for " + std::to_string(finished.size()) + " of " +
                std::to_string(arms.size()) + " arms");
  auto done = [&](size_t a, size_t r) { return finished.empty() || (r < finished[a].size() && finished[a][r]); };
  auto complete = [&](size_t a) {
    for (size_t r = 0; r < k; ++r)
      if (!done(a, r)) return false;
    return true;
  };
  // a_r − b_r over the replicates finished on both sides.
  auto pairs = [&](size_t a, size_t b) {
    std::vector<double> d;
    for (size_t r = 0; r < k; ++r)
      if (done(a, r) && done(b, r)) d.push_back(arms[a][r] - arms[b][r]);
    return d;
  };
  std::vector<GapStats> out(arms.size());
  for (size_t a = 0; a < arms.size(); ++a) {
    GapStats& s = out[a];
    s.asked = int(k);
    for (size_t r = 0; r < k; ++r) s.finished += done(a, r);
    s.gaps = pairs(a, bf16);
    s.gap = mean_ci95_or_none(s.gaps);
    if (a == snip) continue;
    s.diff_vs_snip = mean_ci95_or_none(pairs(a, snip));
    s.verdict = complete(a) && complete(snip) && complete(bf16) ? verdict_of(*s.diff_vs_snip) : Verdict::incomplete;
  }
  return out;
}

std::vector<ArmStatistics> compare_statistics(const std::vector<Replicates>& train, const std::vector<Replicates>& val,
                                              size_t bf16, size_t snip, const std::vector<Finished>& finished) {
  if (train.size() != val.size()) throw Error("compare statistics: train and validation losses of different arms");
  const std::vector<GapStats> t = arm_statistics(train, bf16, snip, finished),
                              v = arm_statistics(val, bf16, snip, finished);
  std::vector<ArmStatistics> out(t.size());
  for (size_t a = 0; a < t.size(); ++a) out[a] = {t[a], v[a]};
  return out;
}

}  // namespace snip
