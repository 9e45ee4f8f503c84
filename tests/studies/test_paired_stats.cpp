// The replicate statistics of `snip compare` (paired_stats.h): Student-t quantiles against
// published values, means and 95% half-widths against a hand computation, paired differences,
// verdicts on each side of zero, ties (zero spread) and K = 1 (no interval).
#include <gtest/gtest.h>

#include <cmath>

#include "snip/error.h"
#include "snip/paired_stats.h"

namespace {

using snip::Verdict;

TEST(PairedStats, StudentQuantilesMatchPublishedTables) {
  // t_{0.975, dof} from any statistics table (e.g. scipy.stats.t.ppf(0.975, dof)).
  EXPECT_NEAR(snip::student_t_975(1), 12.706204736174707, 1e-9);
  EXPECT_NEAR(snip::student_t_975(2), 4.302652729749464, 1e-9);
  EXPECT_NEAR(snip::student_t_975(3), 3.182446305284263, 1e-9);
  EXPECT_NEAR(snip::student_t_975(9), 2.262157162740992, 1e-9);
  EXPECT_NEAR(snip::student_t_975(1000), 1.962339, 1e-6);
  EXPECT_THROW(snip::student_t_975(0), snip::Error);
}

// Four replicates of one arm, the BF16 arm and the SNIP reference (train losses).
// By hand (Python's statistics module gives the same digits):
//   gaps  = arm − bf16 = 0.012, 0.019, 0.006, 0.027: mean 0.016, sd √(246e-6/3) = 0.0090553851,
//           half-width t_{0.975,3}·sd/2 = 0.0144091385 → [0.0016, 0.0304]
//   diffs = arm − snip = 0.002, 0.005, −0.003, 0.011: mean 0.00375, sd 0.0058523500,
//           half-width 0.0093123947 → contains 0: indistinguishable
TEST(PairedStats, MeansIntervalsAndVerdictsAgreeWithAHandComputation) {
  const std::vector<double> arm = {3.112, 3.120, 3.105, 3.131};
  const std::vector<double> bf16 = {3.100, 3.101, 3.099, 3.104};
  const std::vector<double> snip = {3.110, 3.115, 3.108, 3.120};
  const auto st = snip::arm_statistics({bf16, snip, arm}, 0, 1);
  ASSERT_EQ(st.size(), 3u);
  const snip::GapStats& a = st[2];
  ASSERT_EQ(a.gaps.size(), 4u);
  EXPECT_NEAR(a.gaps[1], 0.019, 1e-12);
  EXPECT_EQ(a.gap.n, 4);
  EXPECT_NEAR(a.gap.mean, 0.016, 1e-12);
  EXPECT_NEAR(a.gap.sd, 0.009055385138137384, 1e-12);
  EXPECT_NEAR(a.gap.ci95, 0.014409138487895672, 1e-12);
  ASSERT_TRUE(a.diff_vs_snip.has_value());
  EXPECT_NEAR(a.diff_vs_snip->mean, 0.00375, 1e-12);
  EXPECT_NEAR(a.diff_vs_snip->sd, 0.005852349955359693, 1e-12);
  EXPECT_NEAR(a.diff_vs_snip->ci95, 0.009312394746332487, 1e-12);
  EXPECT_EQ(a.verdict, Verdict::indistinguishable);
  // The BF16 arm is the zero of the gaps; the SNIP reference has no verdict against itself.
  EXPECT_EQ(st[0].gap.mean, 0.0);
  EXPECT_EQ(st[0].gap.ci95, 0.0);
  EXPECT_FALSE(st[1].diff_vs_snip.has_value());
  EXPECT_FALSE(st[1].verdict.has_value());
  // The SNIP reference's own gap: 0.010, 0.014, 0.009, 0.016 -> mean 0.01225
  EXPECT_NEAR(st[1].gap.mean, 0.01225, 1e-12);
  // BF16 against SNIP: diffs −0.010, −0.014, −0.009, −0.016, interval below 0: SNIP is worse
  // than BF16, i.e. BF16 is `better` than SNIP.
  EXPECT_EQ(st[0].verdict, Verdict::better);
}

TEST(PairedStats, PairingRemovesTheSharedReplicateNoise) {
  // Replicate noise far larger than the effect, shared by r: unpaired it would drown the
  // constant +0.003, paired the difference is exact and the arm is `worse`.
  const std::vector<double> snip = {3.0, 3.5, 2.7};
  const std::vector<double> arm = {3.003, 3.503, 2.703};
  const auto st = snip::arm_statistics({snip, snip, arm}, 0, 1);
  EXPECT_NEAR(st[2].diff_vs_snip->mean, 0.003, 1e-12);
  EXPECT_NEAR(st[2].diff_vs_snip->ci95, 0.0, 1e-12);
  EXPECT_EQ(st[2].verdict, Verdict::worse);
  // the gap to BF16 (here the SNIP values) is the same constant
  EXPECT_GT(st[2].gap.lo(), 0.0);
}

TEST(PairedStats, VerdictSides) {
  snip::Interval above{3, 0.02, 0.001, 0.005};
  snip::Interval below{3, -0.02, 0.001, 0.005};
  snip::Interval across{3, 0.002, 0.001, 0.005};
  snip::Interval touching{3, 0.005, 0.001, 0.005};  // [0, 0.01]: contains 0
  EXPECT_EQ(snip::verdict_of(above), Verdict::worse);
  EXPECT_EQ(snip::verdict_of(below), Verdict::better);
  EXPECT_EQ(snip::verdict_of(across), Verdict::indistinguishable);
  EXPECT_EQ(snip::verdict_of(touching), Verdict::indistinguishable);
  snip::Interval nan_bound{3, std::nan(""), 0.001, 0.005};
  EXPECT_EQ(snip::verdict_of(nan_bound), Verdict::indistinguishable);
  EXPECT_STREQ(snip::verdict_name(Verdict::indistinguishable), "indistinguishable");
}

TEST(PairedStats, TiesGiveAZeroWidthIntervalAroundZero) {
  // An arm with the very same plan as SNIP trains the very same model: every difference is 0.
  const std::vector<double> snip = {3.11, 3.12, 3.10};
  const std::vector<double> bf16 = {3.10, 3.10, 3.10};
  const auto st = snip::arm_statistics({bf16, snip, snip}, 0, 1);
  EXPECT_EQ(st[2].diff_vs_snip->mean, 0.0);
  EXPECT_EQ(st[2].diff_vs_snip->sd, 0.0);
  EXPECT_EQ(st[2].diff_vs_snip->ci95, 0.0);
  EXPECT_EQ(st[2].verdict, Verdict::indistinguishable);
  // identical gaps: a zero-width interval that lies above 0
  const auto iv = snip::mean_ci95({0.01, 0.01, 0.01});
  EXPECT_DOUBLE_EQ(iv.mean, 0.01);
  EXPECT_EQ(iv.ci95, 0.0);
  EXPECT_EQ(snip::verdict_of(iv), Verdict::worse);
}

TEST(PairedStats, OneReplicateHasNoIntervalAndIsIndistinguishable) {
  const auto st = snip::arm_statistics({{3.10}, {3.11}, {3.50}}, 0, 1);
  EXPECT_NEAR(st[2].gap.mean, 0.40, 1e-12);
  EXPECT_FALSE(st[2].gap.has_interval());
  EXPECT_TRUE(std::isnan(st[2].gap.ci95));
  EXPECT_NEAR(st[2].diff_vs_snip->mean, 0.39, 1e-12);
  EXPECT_FALSE(st[2].diff_vs_snip->has_interval());
  EXPECT_EQ(st[2].verdict, Verdict::indistinguishable);  // however large the difference
}

TEST(PairedStats, RejectsUnpairedOrEmptyData) {
  EXPECT_THROW(snip::mean_ci95({}), snip::Error);
  EXPECT_THROW(snip::paired_differences({1, 2}, {1}), snip::Error);
  EXPECT_THROW(snip::arm_statistics({{1, 2}, {1, 2}, {1}}, 0, 1), snip::Error);
  EXPECT_THROW(snip::arm_statistics({{}, {}}, 0, 1), snip::Error);
  EXPECT_THROW(snip::arm_statistics({{1}, {1}}, 0, 2), snip::Error);
}

}  // namespace
