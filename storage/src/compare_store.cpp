// Plan comparisons (`snip compare`, METHOD.md section 6 training truth): one row per
// experiment in `compares`, one per arm in `compare_rows` with the arm's train-loss curve as a
// blob of float64 values (host byte order, little-endian on every supported platform).
#include <cstring>

#include "snip/error.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip {

using store_detail::now_ms;
using store_detail::ReadTxn;
using store_detail::Stmt;
using store_detail::WriteTxn;

namespace {

constexpr const char* kCompareColumns =
    "c.id, c.run_id, c.stats_round_id, c.checkpoint, c.start_step, c.budget, c.recipe, c.steps, c.cooldown_steps, "
    "c.eval_batches, c.last_window, c.control_rel, c.noise_floor_train, c.noise_floor_val, c.options, c.created_ms, "
    "(SELECT COUNT(*) FROM compare_rows r WHERE r.compare_id = c.id), c.replicates";

CompareRecord read_compare_row(const Stmt& st, const std::string& db_path) {
  CompareRecord c;
  c.id = st.column_int64(0);
  c.run_id = st.column_opt_int64(1);
  c.stats_round_id = st.column_opt_int64(2);
  c.checkpoint = st.column_text(3);
  c.start_step = st.column_int64(4);
  c.budget = st.column_double(5);
  c.recipe = st.column_text(6);
  c.steps = st.column_int64(7);
  c.cooldown_steps = st.column_int64(8);
  c.eval_batches = st.column_int64(9);
  c.last_window = st.column_int64(10);
  c.control_rel = st.column_double(11);
  c.noise_floor_train = st.column_double(12);
  c.noise_floor_val = st.column_double(13);
  c.options =
      store_detail::parse_json_column(st.column_text(14), db_path + ": compare " + std::to_string(c.id) + " options");
  c.created_ms = st.column_int64(15);
  c.row_count = st.column_int64(16);
  c.replicates = st.column_int64(17);
  return c;
}

// A float64 curve blob read back, or an error naming where it is damaged.
std::vector<double> read_curve(const Stmt& st, int column, const std::string& where) {
  const std::vector<uint8_t> blob = st.column_blob(column);
  if (blob.size() % sizeof(double) != 0)
    throw Error(where + ": the train-loss curve is " + std::to_string(blob.size()) +
                " bytes, not a whole number of float64 values (damaged database)");
  std::vector<double> curve(blob.size() / sizeof(double));
  if (!blob.empty()) std::memcpy(curve.data(), blob.data(), blob.size());
  return curve;
}

// An empty curve is an empty (not NULL) blob.
void bind_curve(Stmt& st, int column, const std::vector<double>& curve) {
  static const double kNone = 0;
  st.bind_blob(column, curve.empty() ? &kNone : curve.data(), curve.size() * sizeof(double));
}

void require_exists(store_detail::Db& db, const char* sql, int64_t id, const std::string& what) {
  Stmt st(db, sql);
  st.bind(1, id);
  if (!st.step())
    throw Error(db.path() + ": the comparison names " + what + " " + std::to_string(id) + ", which does not exist");
}

}  // namespace

int64_t Store::insert_compare(const CompareRecord& c) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  if (c.run_id) store_detail::require_run(db, *c.run_id);
  if (c.stats_round_id)
    require_exists(db, "SELECT 1 FROM stats_rounds WHERE id = ?", *c.stats_round_id, "statistics round");
  for (const auto& r : c.rows)
    if (r.plan_id) require_exists(db, "SELECT 1 FROM plans WHERE id = ?", *r.plan_id, "plan");
  Stmt st(db,
          "INSERT INTO compares (run_id, stats_round_id, checkpoint, start_step, budget, recipe, steps, "
          "cooldown_steps, eval_batches, last_window, control_rel, noise_floor_train, noise_floor_val, options, "
          "created_ms, replicates) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(1, c.run_id).bind(2, c.stats_round_id).bind(3, c.checkpoint).bind(4, c.start_step).bind(5, c.budget);
  st.bind(6, c.recipe).bind(7, c.steps).bind(8, c.cooldown_steps).bind(9, c.eval_batches).bind(10, c.last_window);
  st.bind(11, c.control_rel).bind(12, c.noise_floor_train).bind(13, c.noise_floor_val).bind(14, c.options.dump());
  st.bind(15, now_ms()).bind(16, c.replicates).run();
  const int64_t id = sqlite3_last_insert_rowid(db.handle());
  Stmt row(db,
           "INSERT INTO compare_rows (compare_id, position, method, lambda, seed, achieved_fp4_fraction, "
           "train_loss_last, val_loss_plan, val_loss_bf16, gap_train, gap_val_plan, gap_val_bf16, control, "
           "differs_from_snip, same_plan_as, plan_id, train_curve) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  Stmt rep(db,
           "INSERT INTO compare_replicates (compare_id, position, replicate, train_loss_last, val_loss_plan, "
           "val_loss_bf16, train_curve) VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (size_t pos = 0; pos < c.rows.size(); ++pos) {
    const CompareRowRecord& r = c.rows[pos];
    row.bind(1, id).bind(2, int64_t(pos)).bind(3, r.method).bind(4, r.lambda).bind(5, r.seed);
    row.bind(6, r.achieved_fraction).bind(7, r.train_loss_last).bind(8, r.val_loss_plan).bind(9, r.val_loss_bf16);
    row.bind(10, r.gap_train).bind(11, r.gap_val_plan).bind(12, r.gap_val_bf16).bind(13, int64_t(r.control));
    row.bind(14, int64_t(r.differs_from_snip)).bind(15, r.same_plan_as).bind(16, r.plan_id);
    bind_curve(row, 17, r.train_curve);
    row.run();
    for (size_t k = 0; k < r.replicates.size(); ++k) {
      const CompareReplicateRecord& x = r.replicates[k];
      rep.bind(1, id).bind(2, int64_t(pos)).bind(3, int64_t(k + 1)).bind(4, x.train_loss_last);
      rep.bind(5, x.val_loss_plan).bind(6, x.val_loss_bf16);
      bind_curve(rep, 7, x.train_curve);
      rep.run();
    }
  }
  txn.commit();
  return id;
}

std::vector<CompareRecord> Store::list_compares(std::optional<int64_t> run_id) const {
  Stmt st(impl_->db, std::string("SELECT ") + kCompareColumns +
                         " FROM compares c WHERE ?1 IS NULL OR c.run_id = ?1 ORDER BY c.id DESC");
  st.bind(1, run_id);
  std::vector<CompareRecord> out;
  while (st.step()) out.push_back(read_compare_row(st, impl_->path));
  return out;
}

std::vector<CompareRowRecord> Store::compare_rows(int64_t compare_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  const std::string where = impl_->path + ": compare " + std::to_string(compare_id);
  {
    Stmt e(db, "SELECT 1 FROM compares WHERE id = ?");
    e.bind(1, compare_id);
    if (!e.step()) throw Error(where + " does not exist (see `snip runs` or `snip show --compare`)");
  }
  Stmt st(db,
          "SELECT position, method, lambda, seed, achieved_fp4_fraction, train_loss_last, val_loss_plan, "
          "val_loss_bf16, gap_train, gap_val_plan, gap_val_bf16, control, differs_from_snip, same_plan_as, plan_id, "
          "train_curve FROM compare_rows WHERE compare_id = ? ORDER BY position");
  st.bind(1, compare_id);
  std::vector<CompareRowRecord> out;
  while (st.step()) {
    if (st.column_int64(0) != int64_t(out.size())) throw Error(where + ": row positions have a gap");
    CompareRowRecord r;
    r.method = st.column_text(1);
    r.lambda = st.column_opt_double(2);
    r.seed = st.column_opt_int64(3);
    r.achieved_fraction = st.column_double(4);
    r.train_loss_last = st.column_double(5);
    r.val_loss_plan = st.column_double(6);
    r.val_loss_bf16 = st.column_double(7);
    r.gap_train = st.column_double(8);
    r.gap_val_plan = st.column_double(9);
    r.gap_val_bf16 = st.column_double(10);
    r.control = st.column_int64(11) != 0;
    r.differs_from_snip = st.column_int64(12) != 0;
    r.same_plan_as = st.column_text(13);
    r.plan_id = st.column_opt_int64(14);
    r.train_curve = read_curve(st, 15, where + " row " + std::to_string(out.size()));
    out.push_back(std::move(r));
  }
  Stmt reps(db,
            "SELECT position, replicate, train_loss_last, val_loss_plan, val_loss_bf16, train_curve "
            "FROM compare_replicates WHERE compare_id = ? ORDER BY position, replicate");
  reps.bind(1, compare_id);
  while (reps.step()) {
    const int64_t pos = reps.column_int64(0), k = reps.column_int64(1);
    const std::string at = where + " row " + std::to_string(pos) + " replicate " + std::to_string(k);
    if (pos < 0 || pos >= int64_t(out.size())) throw Error(at + ": no such row (damaged database)");
    CompareRowRecord& r = out[size_t(pos)];
    if (k != int64_t(r.replicates.size()) + 1) throw Error(at + ": replicate numbers have a gap (damaged database)");
    CompareReplicateRecord x;
    x.train_loss_last = reps.column_double(2);
    x.val_loss_plan = reps.column_double(3);
    x.val_loss_bf16 = reps.column_double(4);
    x.train_curve = read_curve(reps, 5, at);
    r.replicates.push_back(std::move(x));
  }
  return out;
}

CompareRecord Store::compare(int64_t compare_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  Stmt st(db, std::string("SELECT ") + kCompareColumns + " FROM compares c WHERE c.id = ?");
  st.bind(1, compare_id);
  if (!st.step())
    throw Error(impl_->path + ": compare " + std::to_string(compare_id) +
                " does not exist (see `snip runs` or `snip show --compare`)");
  CompareRecord c = read_compare_row(st, impl_->path);
  c.rows = compare_rows(compare_id);
  return c;
}

void Store::delete_compare(int64_t compare_id) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  Stmt st(db, "DELETE FROM compares WHERE id = ?");
  st.bind(1, compare_id).run();
  if (sqlite3_changes(db.handle()) == 0)
    throw Error(impl_->path + ": compare " + std::to_string(compare_id) + " does not exist");
  txn.commit();
}

}  // namespace snip
