// What a `snip compare` table says as a whole, for every front that shows one (the CLI's table,
// `snip show --compare`, the GUI's Compare view): which row is the BF16 zero and which the SNIP
// reference, every arm's statistics recomputed from its replicate values (paired_stats.h), SNIP's
// regret to the oracle arm, and whether uniform FP4 itself can be told from BF16 — with the one
// wording of that note. Templates over the row type: the experiment's CompareRow, the store's
// CompareRowRecord and the CLI's stored rows share the field names used here. Header-only.
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "snip/defaults.h"
#include "snip/paired_stats.h"

namespace snip {

// Whether a replicate has finished: a stored one of an unfinished compare may be a placeholder
// for a training that has not run (CompareReplicateRecord::finished); one just trained has.
template <class Replicate>
bool replicate_finished(const Replicate& x) {
  if constexpr (requires { x.finished; })
    return x.finished;
  else
    return true;
}

// Every arm's statistics from its replicates; what has not finished is left out (paired_stats.h:
// no data, and an `incomplete` verdict). A row without replicates (stored before schema
// version 4) counts as one replicate of its own values.
template <class Rows>
std::vector<ArmStatistics> compare_row_statistics(const Rows& rows, size_t bf16_row, size_t snip_row) {
  std::vector<Replicates> train, val;
  std::vector<Finished> finished;
  for (const auto& r : rows) {
    Replicates t, v;
    Finished f;
    for (const auto& x : r.replicates)
      t.push_back(x.train_loss_last), v.push_back(x.val_loss_plan), f.push_back(replicate_finished(x));
    if (r.replicates.empty()) t = {r.train_loss_last}, v = {r.val_loss_plan}, f = {true};
    train.push_back(std::move(t));
    val.push_back(std::move(v));
    finished.push_back(std::move(f));
  }
  return compare_statistics(train, val, bf16_row, snip_row, finished);
}

// Whether every replicate of the arm and of the BF16 arm finished (all its pairs are there).
inline bool arm_complete(const ArmStatistics& s) {
  return s.train.finished == s.train.asked && int(s.train.gaps.size()) == s.train.asked;
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
    if (!rows[i].control && rows[i].lambda && std::abs(*rows[i].lambda - defaults::kLambda) < 1e-12) return i;
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
    if (rows[i].method == "oracle" && arm_complete(stats[i]) && arm_complete(stats[snip_row]))
      return Regret{mean_ci95(paired_differences(stats[snip_row].train.gaps, stats[i].train.gaps)),
                    mean_ci95(paired_differences(stats[snip_row].val.gaps, stats[i].val.gaps))};
  return std::nullopt;
}

// The note a compare table carries when uniform FP4 itself cannot be told from BF16: then no plan
// at this budget can be shown to matter either.
inline constexpr const char* kPrecisionDoesNotMatter =
    "precision does not matter in this regime: the plans cannot be told apart";

// Uniform FP4's train and validation gaps to BF16 both indistinguishable from 0: their 95%
// intervals contain 0. One replicate gives no interval, and no interval is no evidence either
// way: nothing is concluded from it.
inline bool precision_does_not_matter(const ArmStatistics& uniform_fp4) {
  return arm_complete(uniform_fp4) &&  // never before uniform FP4 (and BF16) have run
         uniform_fp4.train.gap.has_interval() && uniform_fp4.val.gap.has_interval() &&
         verdict_of(uniform_fp4.train.gap) == Verdict::indistinguishable &&
         verdict_of(uniform_fp4.val.gap) == Verdict::indistinguishable;
}

// The uniform-FP4 row, if the table has one.
template <class Rows>
std::optional<size_t> find_uniform_fp4_row(const Rows& rows) {
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].method == "uniform-fp4") return i;
  return std::nullopt;
}

}  // namespace snip
