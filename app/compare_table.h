// The rows of a `snip compare` table, as JSON and as text: the same for a compare just run
// (experiments' CompareRow, cmd_compare.cpp) and one read back from the database (StoredCompareRow,
// cmd_show.cpp), which share these field names. Header-only.
#pragma once
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace snip::cli {

inline nlohmann::json num_or_null(double v) {
  return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
}

template <class Row>
nlohmann::json compare_row_json(const Row& r) {
  return {{"method", r.method},
          {"lambda", r.lambda ? nlohmann::json(*r.lambda) : nlohmann::json(nullptr)},
          {"seed", r.seed ? nlohmann::json(*r.seed) : nlohmann::json(nullptr)},
          {"achieved_fraction", r.achieved_fraction},
          {"train_loss_last", num_or_null(r.train_loss_last)},
          {"val_loss_plan", num_or_null(r.val_loss_plan)},
          {"val_loss_bf16", num_or_null(r.val_loss_bf16)},
          {"gap_train", num_or_null(r.gap_train)},
          {"gap_val_plan", num_or_null(r.gap_val_plan)},
          {"gap_val_bf16", num_or_null(r.gap_val_bf16)},
          {"control", r.control},
          {"same_plan_as", r.same_plan_as},
          {"differs_from_snip", r.differs_from_snip}};
}

template <class Rows>
void print_compare_rows(const Rows& rows) {
  std::printf("  %-30s %8s %10s %10s %10s %10s %10s  %s\n", "method", "rho", "train(50)", "val plan", "val bf16",
              "gap train", "gap val", "vs SNIP");
  for (const auto& r : rows) {
    std::string cmp = r.control ? "control" : (r.differs_from_snip ? "differs" : "no difference");
    if (!r.same_plan_as.empty()) cmp += " (same plan as " + r.same_plan_as + ")";
    std::printf("  %-30s %8.4f %10.4f %10.4f %10.4f %+10.4f %+10.4f  %s\n", r.method.substr(0, 30).c_str(),
                r.achieved_fraction, r.train_loss_last, r.val_loss_plan, r.val_loss_bf16, r.gap_train, r.gap_val_plan,
                cmp.c_str());
  }
}

}  // namespace snip::cli
