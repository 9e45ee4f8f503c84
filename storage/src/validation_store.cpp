// Validation results (METHOD.md section 6): per layer and precision, predicted vs measured
// divergences as named values, plus round-wide summary values (Spearman per precision, ...).
#include "snip/error.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip {

using store_detail::now_ms;
using store_detail::ReadTxn;
using store_detail::Stmt;
using store_detail::WriteTxn;

namespace {
constexpr int64_t kSummaryPosition = -1;  // validation_values.position of the round-wide summary
}

int64_t Store::add_validation(const ValidationResult& result) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  if (result.run_id) store_detail::require_run(db, *result.run_id);
  Stmt st(db, "INSERT INTO validations (run_id, stats_round_id, step, options, created_ms) VALUES (?, ?, ?, ?, ?)");
  st.bind(1, result.run_id).bind(2, result.stats_round_id).bind(3, result.step).bind(4, result.options.dump());
  st.bind(5, now_ms()).run();
  const int64_t id = sqlite3_last_insert_rowid(db.handle());
  Stmt e(db, "INSERT INTO validation_entries (validation_id, position, layer, precision) VALUES (?, ?, ?, ?)");
  Stmt v(db, "INSERT INTO validation_values (validation_id, position, key, value) VALUES (?, ?, ?, ?)");
  for (const auto& [k, x] : result.summary) v.bind(1, id).bind(2, kSummaryPosition).bind(3, k).bind(4, x).run();
  for (size_t pos = 0; pos < result.entries.size(); ++pos) {
    const auto& entry = result.entries[pos];
    e.bind(1, id).bind(2, int64_t(pos)).bind(3, entry.layer).bind(4, entry.precision).run();
    for (const auto& [k, x] : entry.values) v.bind(1, id).bind(2, int64_t(pos)).bind(3, k).bind(4, x).run();
  }
  txn.commit();
  return id;
}

ValidationResult Store::validation(int64_t validation_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  const std::string where = impl_->path + ": validation " + std::to_string(validation_id);
  Stmt st(db, "SELECT run_id, stats_round_id, step, options, created_ms FROM validations WHERE id = ?");
  st.bind(1, validation_id);
  if (!st.step()) throw Error(where + " does not exist");
  ValidationResult r;
  r.id = validation_id;
  r.run_id = st.column_opt_int64(0);
  r.stats_round_id = st.column_opt_int64(1);
  r.step = st.column_int64(2);
  r.options = store_detail::parse_json_column(st.column_text(3), where + " options");
  r.created_ms = st.column_int64(4);
  Stmt e(db, "SELECT position, layer, precision FROM validation_entries WHERE validation_id = ? ORDER BY position");
  e.bind(1, validation_id);
  while (e.step()) {
    if (e.column_int64(0) != int64_t(r.entries.size())) throw Error(where + ": entry positions have a gap");
    r.entries.push_back({e.column_text(1), e.column_text(2), {}});
  }
  Stmt v(db, "SELECT position, key, value FROM validation_values WHERE validation_id = ?");
  v.bind(1, validation_id);
  while (v.step()) {
    const int64_t pos = v.column_int64(0);
    if (pos == kSummaryPosition)
      r.summary[v.column_text(1)] = v.column_double(2);
    else
      r.entries.at(size_t(pos)).values[v.column_text(1)] = v.column_double(2);
  }
  return r;
}

std::vector<ValidationResult> Store::validations(std::optional<int64_t> run_id) const {
  Stmt st(impl_->db,
          "SELECT id, run_id, stats_round_id, step, options, created_ms FROM validations "
          "WHERE ?1 IS NULL OR run_id = ?1 ORDER BY id DESC");
  st.bind(1, run_id);
  std::vector<ValidationResult> out;
  while (st.step()) {
    ValidationResult r;
    r.id = st.column_int64(0);
    r.run_id = st.column_opt_int64(1);
    r.stats_round_id = st.column_opt_int64(2);
    r.step = st.column_int64(3);
    r.options = store_detail::parse_json_column(st.column_text(4), impl_->path + ": validation options");
    r.created_ms = st.column_int64(5);
    out.push_back(std::move(r));
  }
  // The round-wide summary (Spearman per precision, ...) too: what a list of validations shows.
  for (ValidationResult& r : out) {
    Stmt v(impl_->db, "SELECT key, value FROM validation_values WHERE validation_id = ? AND position = ?");
    v.bind(1, r.id).bind(2, kSummaryPosition);
    while (v.step()) r.summary[v.column_text(0)] = v.column_double(1);
  }
  return out;
}

}  // namespace snip
