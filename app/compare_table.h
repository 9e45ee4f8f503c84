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

#include "snip/defaults.h"
#include "snip/paired_stats.h"

namespace snip::cli {

inline nlohmann::json num_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

// Every arm's statistics from its replicates. A row without replicates (stored before schema
// version 4) counts as one replicate of its own values.
template <class Rows>
std::vector<ArmStatistics> compare_row_statistics(const Rows& rows, size_t bf16_row, size_t snip_row) {
  std::vector<Replicates> train, val;
  for (const auto& r : rows) {
    Replicates t, v;
    for (const auto& x : r.replicates) t.push_back(x.train_loss_last), v.push_back(x.val_loss_plan);
    if (r.replicates.empty()) t = {r.train_loss_last}, v = {r.val_loss_plan};
    train.push_back(std::move(t));
    val.push_back(std::move(v));
  }
  return compare_statistics(train, val, bf16_row, snip_row);
}

// The uniform-BF16 row (the zero of the gaps) and the SNIP reference row of a stored table: the
// reference is named in the compare's options since schema version 4, before that it was the
// first non-control row with λ = defaults::kLambda (else the first SNIP row).
template <class Rows>
size_t find_bf16_row(const Rows& rows) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].method == "uniform-bf16") return i;
  return 0;
}
template <class Rows>
size_t find_snip_row(const Rows& rows, const nlohmann::json& options) {
  if (options.is_object() && options.contains("snip_reference") && options["snip_reference"].is_string())
    for (size_t i = 0; i < rows.size(); ++i)
      if (rows[i].method == options["snip_reference"].get<std::string>()) return i;
  for (size_t i = 0; i < rows.size(); ++i)
    if (!rows[i].control && rows[i].lambda && std::abs(*rows[i].lambda - snip::defaults::kLambda) < 1e-12) return i;
  for (size_t i = 0; i < rows.size(); ++i)
    if (!rows[i].control && rows[i].lambda) return i;
  return rows.size() > 1 ? 1 : 0;
}

// SNIP's regret to the oracle arm (method "oracle"), when there is one: SNIP's gap minus the
// oracle's, paired by replicate, per loss.
struct Regret {
  Interval train, val;
};
template <class Rows>
std::optional<Regret> oracle_regret(const Rows& rows, const std::vector<ArmStatistics>& stats, size_t snip_row) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].method == "oracle")
      return Regret{mean_ci95(paired_differences(stats[snip_row].train.gaps, stats[i].train.gaps)),
                    mean_ci95(paired_differences(stats[snip_row].val.gaps, stats[i].val.gaps))};
  return std::nullopt;
}

inline nlohmann::json interval_half_width(const Interval& iv) {
  return iv.has_interval() ? num_or_null(iv.ci95) : nlohmann::json(nullptr);
}

// The statistics of one loss under the JSON names of issue 16 (`suffix` "" for train, "_val").
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
                      {"replicates", s.train.gaps.size()}};
  if constexpr (requires { r.control; }) j["control"] = r.control;  // version-3 compares had control arms
  put_gap_stats(j, s.train, "train", "");
  put_gap_stats(j, s.val, "val", "_val");
  return j;
}

// "+0.0123 ± 0.0045", or "+0.0123" without an interval.
inline std::string mean_pm(const Interval& iv) {
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
    auto verdict = [&](const GapStats& g) { return g.verdict ? std::string(verdict_name(*g.verdict)) : "reference"; };
    std::string extra;
    if (!r.same_plan_as.empty()) extra = "  (same plan as " + r.same_plan_as + ")";
    if constexpr (requires { r.control; })
      if (r.control) extra += "  (control)";
    std::printf("  %s %6.3f %9.4f  %s%s%s%s%s%s%s\n", pad(r.method.substr(0, 24), 24).c_str(), r.achieved_fraction,
                r.train_loss_last, pad(mean_pm(s.train.gap), 18).c_str(), pad(diff(s.train), 18).c_str(),
                pad(i == snip_row ? "reference" : verdict(s.train), 18).c_str(), pad(mean_pm(s.val.gap), 18).c_str(),
                pad(diff(s.val), 18).c_str(), (i == snip_row ? std::string("reference") : verdict(s.val)).c_str(),
                extra.c_str());
  }
}

// What the table means, under it: the replicates and intervals, K = 1, and whether uniform FP4
// itself can be told from BF16.
template <class Rows>
void print_compare_notes(const Rows& rows, const std::vector<ArmStatistics>& stats, size_t snip_row) {
  const size_t k = stats.empty() ? 0 : stats.front().train.gaps.size();
  std::printf(
      "%zu replicate%s per arm, paired by replicate; ± is the 95%% Student-t half-width; verdicts compare "
      "each arm with %s (worse/better: the paired interval lies above/below 0)\n",
      k, k == 1 ? "" : "s", rows[snip_row].method.c_str());
  if (k < 2)
    std::printf(
        "one replicate: no interval can be computed, so every verdict is \"indistinguishable\" "
        "(run with --replicates 3 or more)\n");
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].method != "uniform-fp4") continue;
    const bool free_train = verdict_of(stats[i].train.gap) == Verdict::indistinguishable;
    const bool free_val = verdict_of(stats[i].val.gap) == Verdict::indistinguishable;
    if (free_train && free_val)
      std::printf(
          "uniform FP4 is indistinguishable from BF16 (train gap %s, val gap %s): precision does not matter "
          "in this regime: the plans cannot be told apart\n",
          mean_pm(stats[i].train.gap).c_str(), mean_pm(stats[i].val.gap).c_str());
  }
  if (const std::optional<Regret> r = oracle_regret(rows, stats, snip_row))
    std::printf("regret of %s to the oracle (its gap minus the oracle's, paired): train %s, val %s\n",
                rows[snip_row].method.c_str(), mean_pm(r->train).c_str(), mean_pm(r->val).c_str());
}

}  // namespace snip::cli
