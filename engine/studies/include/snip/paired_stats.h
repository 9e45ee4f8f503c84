// The statistics of a replicated plan comparison (`snip compare --replicates K`): every arm is
// trained K times, replicate r of every arm from the same perturbed weights (seed r), so the
// arms are paired by r. Per arm, from its K losses and the BF16 arm's K losses:
//   gap_r   = loss_r(arm) − loss_r(uniform-bf16)                 (paired by r)
//   gap     = mean_r gap_r ± t_{0.975, K−1} · sd(gap_r) / √K      (95% Student-t half-width)
//   diff_r  = loss_r(arm) − loss_r(SNIP reference)               (paired by r)
//   diff    = mean_r diff_r ± t_{0.975, K−1} · sd(diff_r) / √K
//   verdict = worse (diff interval above 0), better (below 0), indistinguishable (contains 0)
// With K = 1 there is no interval (no spread to estimate) and every verdict is
// indistinguishable. Pure functions on plain vectors: the compare that just ran, the table
// read back from the database and the GUI all compute the same numbers from the same values.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

namespace snip {

// incomplete: the arm or a reference it is measured against has replicates that have not finished
// (an interrupted or running compare); no conclusion is drawn from what did not run.
enum class Verdict { better, worse, indistinguishable, incomplete };
const char* verdict_name(Verdict v);  // "better" "worse" "indistinguishable" "incomplete"

// Mean of n values with the 95% Student-t half-width of the mean. sd and ci95 are NaN when n < 2
// (no interval); a zero spread gives a zero half-width (the interval is the mean itself).
struct Interval {
  int n = 0;
  double mean = 0;
  double sd = 0;    // sample standard deviation (n − 1 in the denominator)
  double ci95 = 0;  // half-width: t_{0.975, n−1} · sd / √n
  bool has_interval() const { return n >= 2; }
  bool has_data() const { return n >= 1; }  // n = 0: nothing finished, mean NaN
  double lo() const { return mean - ci95; }
  double hi() const { return mean + ci95; }
};

// The two-sided 95% quantile t_{0.975, dof} of Student's t (Boost.Math); dof ≥ 1.
double student_t_975(int dof);

// Mean ± 95% half-width of the values. Throws snip::Error when there are none.
Interval mean_ci95(const std::vector<double>& values);

// a_r − b_r for every r. Throws snip::Error when the lengths differ (unpaired data).
std::vector<double> paired_differences(const std::vector<double>& a, const std::vector<double>& b);

// The verdict of an arm against the reference from the interval of (arm − reference).
// No interval (n < 2) or a non-finite bound: indistinguishable.
Verdict verdict_of(const Interval& diff);

// One arm's replicate losses (index r = replicate), e.g. train_loss_last or val_loss_plan.
using Replicates = std::vector<double>;
// Which of an arm's replicates have finished (index r); empty: all of them.
using Finished = std::vector<bool>;

// The statistics of one arm on one loss.
struct GapStats {
  std::vector<double> gaps;              // gap_r to the BF16 arm (the finished pairs only)
  int finished = 0;                      // replicates of this arm that finished
  int asked = 0;                         // replicates asked for (K)
  Interval gap;                          // their mean ± half-width
  std::optional<Interval> diff_vs_snip;  // arm − SNIP reference, paired (absent for the reference)
  std::optional<Verdict> verdict;        // from diff_vs_snip (absent for the reference)
};

// Every arm's statistics (same order as `arms`) on one loss. Every arm must have the same
// number K ≥ 1 of replicates; bf16 and snip are indices into `arms`. Throws snip::Error otherwise.
// `finished` (one mask per arm, or empty: every replicate finished) leaves out the replicates
// not trained yet: gaps and differences use the pairs finished on both sides (n = 0: no data),
// and an arm whose own or whose reference's replicates are not all finished is `incomplete`.
std::vector<GapStats> arm_statistics(const std::vector<Replicates>& arms, size_t bf16, size_t snip,
                                     const std::vector<Finished>& finished = {});

// Both losses of a compare: the mean train loss over the last steps and the validation loss
// under the plan (after the cooldown).
struct ArmStatistics {
  GapStats train, val;
};
std::vector<ArmStatistics> compare_statistics(const std::vector<Replicates>& train, const std::vector<Replicates>& val,
                                              size_t bf16, size_t snip, const std::vector<Finished>& finished = {});

}  // namespace snip
