// Per-step metrics: batched upserts into the narrow (run, step) table and range reads,
// full or downsampled for drawing.
#include <algorithm>

#include "snip/curve.h"
#include "snip/error.h"
#include "snip/names.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip {

using store_detail::now_ms;
using store_detail::Stmt;
using store_detail::WriteTxn;

namespace {

constexpr std::array<Named<Metric>, 7> kMetricNames{{{Metric::train_loss, "train_loss"},
                                                     {Metric::val_loss, "val_loss"},
                                                     {Metric::lr, "lr"},
                                                     {Metric::grad_norm, "grad_norm"},
                                                     {Metric::tokens_per_s, "tokens_per_s"},
                                                     {Metric::fp4_fraction, "fp4_fraction"},
                                                     {Metric::bf16_gap, "bf16_gap"}}};

}  // namespace

const char* metric_name(Metric m) {
  return name_of(kMetricNames, m);
}

Metric parse_metric(std::string_view name) {
  return parse_name(kMetricNames, name, "metric");
}

void Store::append_metrics(int64_t run_id, std::span<const MetricRow> rows) {
  if (rows.empty()) return;
  auto& db = impl_->db;
  int64_t lo = rows.front().step, hi = rows.front().step;
  for (const auto& r : rows) {
    if (r.step < 0)
      throw Error("run " + std::to_string(run_id) + ": metrics step " + std::to_string(r.step) + " is negative");
    lo = std::min(lo, r.step);
    hi = std::max(hi, r.step);
  }
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  // Row count bookkeeping: a re-recorded step replaces its row, so count the range before and after.
  Stmt count(db, "SELECT COUNT(*) FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ?");
  count.bind(1, run_id).bind(2, lo).bind(3, hi);
  count.step();
  const int64_t before = count.column_int64(0);
  count.reset();
  {
    Stmt ins(db,
             "INSERT OR REPLACE INTO metrics (run_id, step, train_loss, val_loss, lr, grad_norm, tokens_per_s, "
             "fp4_fraction, bf16_gap) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (const auto& r : rows) {
      ins.bind(1, run_id).bind(2, r.step).bind(3, r.train_loss).bind(4, r.val_loss).bind(5, r.lr);
      ins.bind(6, r.grad_norm).bind(7, r.tokens_per_s).bind(8, r.fp4_fraction).bind(9, r.bf16_gap);
      ins.step();
      ins.reset();
    }
  }
  count.bind(1, run_id).bind(2, lo).bind(3, hi);
  count.step();
  const int64_t after = count.column_int64(0);
  count.reset();
  // last_step and metric_rows change in the same transaction as the rows: a reader sees both or neither.
  Stmt up(db,
          "UPDATE runs SET last_step = (SELECT MAX(step) FROM metrics WHERE run_id = ?1), "
          "metric_rows = metric_rows + ?2, heartbeat_ms = ?3 WHERE id = ?1");
  up.bind(1, run_id).bind(2, after - before).bind(3, now_ms()).run();
  txn.commit();
}

std::vector<MetricRow> Store::metrics(int64_t run_id, int64_t first_step, int64_t last_step) const {
  Stmt st(impl_->db,
          "SELECT step, train_loss, val_loss, lr, grad_norm, tokens_per_s, fp4_fraction, bf16_gap FROM metrics "
          "WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step");
  st.bind(1, run_id).bind(2, first_step).bind(3, last_step);
  std::vector<MetricRow> out;
  while (st.step()) {
    MetricRow r;
    r.step = st.column_int64(0);
    r.train_loss = st.column_double(1);
    r.val_loss = st.column_opt_double(2);
    r.lr = st.column_double(3);
    r.grad_norm = st.column_double(4);
    r.tokens_per_s = st.column_double(5);
    r.fp4_fraction = st.column_double(6);
    r.bf16_gap = st.column_opt_double(7);
    out.push_back(r);
  }
  return out;
}

std::vector<CurvePoint> Store::curve(int64_t run_id, Metric metric, int max_points, int64_t first_step,
                                     int64_t last_step) const {
  if (max_points < 2)
    throw Error("a curve needs at least 2 points (a minimum and a maximum), got " + std::to_string(max_points));
  // The column name comes from the enum, never from user text.
  const std::string col = metric_name(metric);
  Stmt st(impl_->db, "SELECT step, " + col + " FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ? AND " + col +
                         " IS NOT NULL ORDER BY step");
  st.bind(1, run_id).bind(2, first_step).bind(3, last_step);
  std::vector<CurvePoint> points;
  while (st.step()) points.push_back({st.column_int64(0), st.column_double(1)});
  if (points.size() <= size_t(max_points)) return points;
  return downsample_min_max(points, max_points);
}

std::map<Metric, std::vector<CurvePoint>> Store::curves(int64_t run_id, std::span<const Metric> metrics, int max_points,
                                                        int64_t first_step, int64_t last_step) const {
  if (max_points < 2)
    throw Error("a curve needs at least 2 points (a minimum and a maximum), got " + std::to_string(max_points));
  std::map<Metric, std::vector<CurvePoint>> out;
  if (metrics.empty()) return out;
  std::string sql = "SELECT step";
  for (Metric m : metrics) sql += std::string(", ") + metric_name(m);  // names from the enum, never user text
  sql += " FROM metrics WHERE run_id = ? AND step BETWEEN ? AND ? ORDER BY step";
  Stmt st(impl_->db, sql);
  st.bind(1, run_id).bind(2, first_step).bind(3, last_step);
  std::vector<std::vector<CurvePoint>*> dest;
  for (Metric m : metrics) dest.push_back(&out[m]);
  while (st.step()) {
    const int64_t step = st.column_int64(0);
    for (size_t i = 0; i < dest.size(); ++i)
      if (!st.is_null(int(i) + 1)) dest[i]->push_back({step, st.column_double(int(i) + 1)});
  }
  for (auto& [m, points] : out)
    if (points.size() > size_t(max_points)) points = downsample_min_max(points, max_points);
  return out;
}

}  // namespace snip
