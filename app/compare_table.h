// The rows of a `snip compare` table, as JSON and as text: the same for a compare just run
// (experiments' CompareRow, cmd_compare.cpp) and one read back from the database (StoredCompareRow,
// cmd_show.cpp), which share these field names. The statistics (gaps with 95% intervals, paired
// differences to SNIP, verdicts) are always recomputed from the replicate values by
// snip/paired_stats.h, so a stored table prints exactly as it did when it ran. Header-only.
#pragma once
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "snip/compare_summary.h"
#include "snip/paired_stats.h"

namespace snip::cli {

inline nlohmann::json num_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// The table's reading (row roles, statistics from the replicates, regret, the FP4 note) lives in
// the library, shared with the GUI.
using snip::compare_row_statistics;
using snip::find_bf16_row;
using snip::find_snip_row;
using snip::oracle_regret;
using snip::Regret;

inline nlohmann::json interval_half_width(const Interval& iv) {
  return iv.has_interval() ? num_or_null(iv.ci95) : nlohmann::json(nullptr);
}

// The statistics of one loss under the JSON names `snip compare --json` prints (`suffix` "" for train, "_val").
inline void put_gap_stats(nlohmann::json& j, const GapStats& s, const std::string& loss, const std::string& suffix) {
  nlohmann::json gaps = nlohmann::json::array();
  for (double g : s.gaps) gaps.push_back(num_or_null(g));
  j["replicate_gaps_" + loss] = gaps;
  j["gap_" + loss + "_mean"] = num_or_null(s.gap.mean);
  j["gap_" + loss + "_ci95"] = interval_half_width(s.gap);
  j["diff_vs_snip_mean" + suffix] = s.diff_vs_snip ? num_or_null(s.diff_vs_snip->mean) : nlohmann::json(nullptr);
  j["diff_vs_snip_ci95" + suffix] = s.diff_vs_snip ? interval_half_width(*s.diff_vs_snip) : nlohmann::json(nullptr);
  j["verdict" + suffix] = s.verdict ? nlohmann::json(verdict_name(*s.verdict)) : nlohmann::json(nullptr);
}

inline nlohmann::json interval_json(const Interval& iv) {
  return {{"mean", num_or_null(iv.mean)}, {"ci95", interval_half_width(iv)}, {"verdict", verdict_name(verdict_of(iv))}};
}

// The JSON of the regret (null without an oracle arm).
template <class Rows>
nlohmann::json regret_json(const Rows& rows, const std::vector<ArmStatistics>& stats, size_t snip_row) {
  const std::optional<Regret> r = oracle_regret(rows, stats, snip_row);
  if (!r) return nullptr;
  return {{"train", interval_json(r->train)}, {"val", interval_json(r->val)}};
}

template <class Row>
nlohmann::json compare_row_json(const Row& r, const ArmStatistics& s, bool snip_reference) {
  nlohmann::json j = {{"method", r.method},
                      {"lambda", r.lambda ? nlohmann::json(*r.lambda) : nlohmann::json(nullptr)},
                      {"seed", r.seed ? nlohmann::json(*r.seed) : nlohmann::json(nullptr)},
                      {"achieved_fraction", r.achieved_fraction},
                      {"train_loss_last", num_or_null(r.train_loss_last)},
                      {"val_loss_plan", num_or_null(r.val_loss_plan)},
                      {"val_loss_bf16", num_or_null(r.val_loss_bf16)},
                      {"gap_train", num_or_null(r.gap_train)},
                      {"gap_val_plan", num_or_null(r.gap_val_plan)},
                      {"gap_val_bf16", num_or_null(r.gap_val_bf16)},
                      {"same_plan_as", r.same_plan_as},
                      {"snip_reference", snip_reference},
                      {"replicates", s.train.asked},
                      {"replicates_finished", s.train.finished}};
  if constexpr (requires { r.control; }) j["control"] = r.control;  // version-3 compares had control arms
  put_gap_stats(j, s.train, "train", "");
  put_gap_stats(j, s.val, "val", "_val");
  return j;
}

// "+0.0123 ± 0.0045", or "+0.0123" without an interval.
inline std::string mean_pm(const Interval& iv) {
  if (!iv.has_data()) return "—";  // nothing finished
  char buf[64];
  if (iv.has_interval())
    std::snprintf(buf, sizeof buf, "%+.4f ± %.4f", iv.mean, iv.ci95);
  else
    std::snprintf(buf, sizeof buf, "%+.4f", iv.mean);
  return buf;
}

// Pads a UTF-8 string ("±", "λ" are 2 bytes, one column) to `width` columns.
inline std::string pad(const std::string& s, size_t width) {
  size_t cols = 0;
  for (unsigned char c : s) cols += (c & 0xC0) != 0x80;
  return cols >= width ? s : s + std::string(width - cols, ' ');
}

template <class Rows>
void print_compare_rows(const Rows& rows, const std::vector<ArmStatistics>& stats, size_t snip_row) {
  std::printf("  %s %6s %9s  %s%s%s%s%s%s\n", pad("method", 24).c_str(), "rho", "train", pad("gap train", 18).c_str(),
              pad("train vs SNIP", 18).c_str(), pad("verdict", 18).c_str(), pad("gap val", 18).c_str(),
              pad("val vs SNIP", 18).c_str(), "verdict val");
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const ArmStatistics& s = stats[i];
    auto diff = [&](const GapStats& g) { return g.diff_vs_snip ? mean_pm(*g.diff_vs_snip) : std::string("—"); };
    auto verdict = [&](const GapStats& g) {
      if (!g.verdict) return std::string("reference");
      if (*g.verdict == Verdict::incomplete)
        return "incomplete " + std::to_string(g.finished) + "/" + std::to_string(g.asked);
      return std::string(verdict_name(*g.verdict));
    };
    std::string extra;
    if (!r.same_plan_as.empty()) extra = "  (same plan as " + r.same_plan_as + ")";
    if constexpr (requires { r.control; })
      if (r.control) extra += "  (control)";
    char train[32] = "        —";  // an arm without a finished training has no loss yet
    if (std::isfinite(r.train_loss_last)) std::snprintf(train, sizeof train, "%9.4f", r.train_loss_last);
    std::printf("  %s %6.3f %s  %s%s%s%s%s%s%s\n", pad(r.method.substr(0, 24), 24).c_str(), r.achieved_fraction, train,
                pad(mean_pm(s.train.gap), 18).c_str(), pad(diff(s.train), 18).c_str(),
                pad(i == snip_row ? "reference" : verdict(s.train), 18).c_str(), pad(mean_pm(s.val.gap), 18).c_str(),
                pad(diff(s.val), 18).c_str(), (i == snip_row ? std::string("reference") : verdict(s.val)).c_str(),
                extra.c_str());
  }
}

// What the table means, under it: the replicates and intervals, K = 1, and whether uniform FP4
// itself can be told from BF16.
template <class Rows>
void print_compare_notes(const Rows& rows, const std::vector<ArmStatistics>& stats, size_t snip_row) {
  const size_t k = stats.empty() ? 0 : size_t(stats.front().train.asked);
  std::printf(
      "%zu replicate%s per arm, paired by replicate; ± is the 95%% Student-t half-width; verdicts compare "
      "each arm with %s (worse/better: the paired interval lies above/below 0)\n",
      k, k == 1 ? "" : "s", rows[snip_row].method.c_str());
  int finished = 0, asked = 0;
  for (size_t i = 0; i < stats.size(); ++i)
    if (rows[i].same_plan_as.empty()) finished += stats[i].train.finished, asked += stats[i].train.asked;
  if (finished < asked)
    std::printf(
        "incomplete: %d of %d trainings finished; the table shows what finished, and an arm whose replicates (or "
        "its references') have not all finished has no verdict (\"incomplete k/K\") and no conclusion is drawn\n",
        finished, asked);
  if (k < 2)
    std::printf(
        "one replicate: no interval can be computed, so every verdict is \"indistinguishable\" "
        "(run with --replicates 3 or more)\n");
  if (const std::optional<size_t> fp4 = find_uniform_fp4_row(rows); fp4 && precision_does_not_matter(stats[*fp4]))
    std::printf("uniform FP4 is indistinguishable from BF16 (train gap %s, val gap %s): %s\n",
                mean_pm(stats[*fp4].train.gap).c_str(), mean_pm(stats[*fp4].val.gap).c_str(), kPrecisionDoesNotMatter);
  if (const std::optional<Regret> r = oracle_regret(rows, stats, snip_row))
    std::printf("regret of %s to the oracle (its gap minus the oracle's, paired): train %s, val %s\n",
                rows[snip_row].method.c_str(), mean_pm(r->train).c_str(), mean_pm(r->val).c_str());
}

}  // namespace snip::cli
