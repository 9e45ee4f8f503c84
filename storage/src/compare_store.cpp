// Plan comparisons (`snip compare`, METHOD.md section 6 training truth): one row per
// experiment in `compares`, one per arm in `compare_rows` with the arm's train-loss curve as a
// blob of float64 values (host byte order, little-endian on every supported platform).
#include <cstring>
#include <limits>

#include "snip/error.h"
#include "snip/store.h"
#include "snip/store_export.h"
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
    "(SELECT COUNT(*) FROM compare_rows r WHERE r.compare_id = c.id), c.replicates, c.status, c.status_message, "
    "c.checkpoint_fingerprint, (SELECT COUNT(*) FROM compare_replicates x WHERE x.compare_id = c.id)";

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
  c.status = parse_run_status(st.column_text(18));
  c.status_message = st.column_text(19);
  c.checkpoint_fingerprint = st.column_text(20);
  c.stored_trainings = st.column_int64(21);
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

// The rows of compare `id` with their replicates (the caller holds the write transaction).
void insert_rows(store_detail::Db& db, int64_t id, const std::vector<CompareRowRecord>& rows) {
  for (const auto& r : rows)
    if (r.plan_id) require_exists(db, "SELECT 1 FROM plans WHERE id = ?", *r.plan_id, "plan");
  Stmt row(db,
           "INSERT INTO compare_rows (compare_id, position, method, lambda, seed, achieved_fp4_fraction, "
           "train_loss_last, val_loss_plan, val_loss_bf16, gap_train, gap_val_plan, gap_val_bf16, control, "
           "differs_from_snip, same_plan_as, plan_id, train_curve) "
           "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  Stmt rep(db,
           "INSERT INTO compare_replicates (compare_id, position, replicate, train_loss_last, val_loss_plan, "
           "val_loss_bf16, train_curve) VALUES (?, ?, ?, ?, ?, ?, ?)");
  for (size_t pos = 0; pos < rows.size(); ++pos) {
    const CompareRowRecord& r = rows[pos];
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
}

void require_compare(store_detail::Db& db, int64_t id) {
  Stmt e(db, "SELECT 1 FROM compares WHERE id = ?");
  e.bind(1, id);
  if (!e.step())
    throw Error(db.path() + ": compare " + std::to_string(id) +
                " does not exist (see `snip runs --compares` or `snip show --compare`)");
}

}  // namespace

int64_t Store::insert_compare(const CompareRecord& c) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  if (c.run_id) store_detail::require_run(db, *c.run_id);
  if (c.stats_round_id)
    require_exists(db, "SELECT 1 FROM stats_rounds WHERE id = ?", *c.stats_round_id, "statistics round");
  const store_detail::ProcessId me = store_detail::this_process();
  const bool owned = c.status == RunStatus::running;
  Stmt st(db,
          "INSERT INTO compares (run_id, stats_round_id, checkpoint, start_step, budget, recipe, steps, "
          "cooldown_steps, eval_batches, last_window, control_rel, noise_floor_train, noise_floor_val, options, "
          "created_ms, replicates, status, status_message, checkpoint_fingerprint, owner_pid, owner_host, "
          "owner_start, heartbeat_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(1, c.run_id)
      .bind(2, c.stats_round_id)
      .bind(3, store_detail::stored_path(c.checkpoint))
      .bind(4, c.start_step)
      .bind(5, c.budget);
  st.bind(6, c.recipe).bind(7, c.steps).bind(8, c.cooldown_steps).bind(9, c.eval_batches).bind(10, c.last_window);
  st.bind(11, c.control_rel).bind(12, c.noise_floor_train).bind(13, c.noise_floor_val).bind(14, c.options.dump());
  st.bind(15, now_ms()).bind(16, c.replicates).bind(17, std::string(run_status_name(c.status)));
  st.bind(18, c.status_message).bind(19, c.checkpoint_fingerprint).bind(20, owned ? me.pid : int64_t(0));
  st.bind(21, owned ? me.host : std::string()).bind(22, owned ? me.start : int64_t(0)).bind(23, now_ms()).run();
  const int64_t id = sqlite3_last_insert_rowid(db.handle());
  insert_rows(db, id, c.rows);
  txn.commit();
  return id;
}

void Store::update_compare(const CompareRecord& c) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  require_compare(db, c.id);
  if (c.run_id) store_detail::require_run(db, *c.run_id);
  if (c.stats_round_id)
    require_exists(db, "SELECT 1 FROM stats_rounds WHERE id = ?", *c.stats_round_id, "statistics round");
  Stmt st(
      db,
      "UPDATE compares SET run_id = ?, stats_round_id = ?, checkpoint = ?, start_step = ?, budget = ?, recipe = ?, "
      "steps = ?, cooldown_steps = ?, eval_batches = ?, last_window = ?, control_rel = ?, noise_floor_train = ?, "
      "noise_floor_val = ?, options = ?, replicates = ?, checkpoint_fingerprint = ?, heartbeat_ms = ? WHERE id = ?");
  st.bind(1, c.run_id)
      .bind(2, c.stats_round_id)
      .bind(3, store_detail::stored_path(c.checkpoint))
      .bind(4, c.start_step)
      .bind(5, c.budget);
  st.bind(6, c.recipe).bind(7, c.steps).bind(8, c.cooldown_steps).bind(9, c.eval_batches).bind(10, c.last_window);
  st.bind(11, c.control_rel).bind(12, c.noise_floor_train).bind(13, c.noise_floor_val).bind(14, c.options.dump());
  st.bind(15, c.replicates).bind(16, c.checkpoint_fingerprint).bind(17, now_ms()).bind(18, c.id).run();
  Stmt(db, "DELETE FROM compare_rows WHERE compare_id = ?").bind(1, c.id).run();  // replicates cascade
  insert_rows(db, c.id, c.rows);
  txn.commit();
}

void Store::add_compare_replicate(int64_t compare_id, int64_t position, int64_t replicate,
                                  const CompareReplicateRecord& x) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  require_compare(db, compare_id);
  {
    Stmt e(db, "SELECT 1 FROM compare_rows WHERE compare_id = ? AND position = ?");
    e.bind(1, compare_id).bind(2, position);
    if (!e.step())
      throw Error(impl_->path + ": compare " + std::to_string(compare_id) + " has no row " + std::to_string(position));
  }
  Stmt rep(db,
           "INSERT OR REPLACE INTO compare_replicates (compare_id, position, replicate, train_loss_last, "
           "val_loss_plan, val_loss_bf16, train_curve) VALUES (?, ?, ?, ?, ?, ?, ?)");
  rep.bind(1, compare_id).bind(2, position).bind(3, replicate).bind(4, x.train_loss_last);
  rep.bind(5, x.val_loss_plan).bind(6, x.val_loss_bf16);
  bind_curve(rep, 7, x.train_curve);
  rep.run();
  Stmt(db, "UPDATE compares SET heartbeat_ms = ? WHERE id = ?").bind(1, now_ms()).bind(2, compare_id).run();
  txn.commit();
}

void Store::set_compare_options(int64_t compare_id, const nlohmann::json& options) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  require_compare(db, compare_id);
  Stmt st(db, "UPDATE compares SET options = ?, heartbeat_ms = ? WHERE id = ?");
  st.bind(1, options.dump()).bind(2, now_ms()).bind(3, compare_id).run();
  txn.commit();
}

void Store::set_compare_status(int64_t compare_id, RunStatus status, const std::string& message) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  require_compare(db, compare_id);
  Stmt st(db, "UPDATE compares SET status = ?, status_message = ?, heartbeat_ms = ? WHERE id = ?");
  st.bind(1, std::string(run_status_name(status))).bind(2, message).bind(3, now_ms()).bind(4, compare_id).run();
  txn.commit();
}

void Store::claim_compare(int64_t compare_id) {
  auto& db = impl_->db;
  const store_detail::ProcessId me = store_detail::this_process();
  WriteTxn txn(db);
  Stmt cur(db, "SELECT status, owner_pid, owner_host, owner_start, heartbeat_ms FROM compares WHERE id = ?");
  cur.bind(1, compare_id);
  const std::string name = impl_->path + ": compare " + std::to_string(compare_id);
  if (!cur.step()) throw Error(name + " does not exist (see `snip runs --compares`)");
  const std::string status = cur.column_text(0);
  if (status == "finished")
    throw Error(name + " is finished: there is nothing to resume (show it with `snip show --compare " +
                std::to_string(compare_id) + "`)");
  if (status == "running") {
    store_detail::ProcessId owner{cur.column_int64(1), cur.column_text(2), cur.column_int64(3)};
    const bool mine = owner.pid == me.pid && owner.host == me.host && owner.start == me.start;
    if (!mine && store_detail::process_alive(owner, cur.column_int64(4)))
      throw Error(name + " is still being trained by process " + std::to_string(owner.pid) + " on " + owner.host +
                  "; stop it (Ctrl-C, or Cancel in the workbench) before resuming the compare");
  }
  cur.reset();
  Stmt st(db,
          "UPDATE compares SET status = 'running', status_message = '', owner_pid = ?, owner_host = ?, "
          "owner_start = ?, heartbeat_ms = ? WHERE id = ?");
  st.bind(1, me.pid).bind(2, me.host).bind(3, me.start).bind(4, now_ms()).bind(5, compare_id).run();
  txn.commit();
}

int Store::mark_dead_compares_interrupted() {
  auto& db = impl_->db;
  struct Candidate {
    int64_t id;
    store_detail::ProcessId owner;
  };
  std::vector<Candidate> dead;
  {
    Stmt st(db, "SELECT id, owner_pid, owner_host, owner_start, heartbeat_ms FROM compares WHERE status = 'running'");
    while (st.step()) {
      Candidate c{st.column_int64(0), {st.column_int64(1), st.column_text(2), st.column_int64(3)}};
      if (!store_detail::process_alive(c.owner, st.column_int64(4))) dead.push_back(c);
    }
  }
  if (dead.empty()) return 0;
  int marked = 0;
  WriteTxn txn(db);
  Stmt up(db,
          "UPDATE compares SET status = 'interrupted', status_message = ? "
          "WHERE id = ? AND status = 'running' AND owner_pid = ? AND owner_host = ? AND owner_start = ?");
  for (const auto& c : dead) {
    up.bind(1, "its process (pid " + std::to_string(c.owner.pid) + " on " + c.owner.host +
                   ") ended without finishing the compare; continue it with: " + compare_resume_command(*this, c.id));
    up.bind(2, c.id).bind(3, c.owner.pid).bind(4, c.owner.host).bind(5, c.owner.start);
    up.run();
    marked += sqlite3_changes(db.handle());
  }
  txn.commit();
  return marked;
}

std::vector<CompareRecord> Store::list_compares(std::optional<int64_t> run_id) const {
  Stmt st(impl_->db, std::string("SELECT ") + kCompareColumns +
                         " FROM compares c WHERE ?1 IS NULL OR c.run_id = ?1 ORDER BY c.id DESC");
  st.bind(1, run_id);
  std::vector<CompareRecord> out;
  while (st.step()) out.push_back(read_compare_row(st, impl_->path));
  return out;
}

namespace {

CompareReplicateRecord unfinished_replicate() {
  CompareReplicateRecord x;
  x.train_loss_last = x.val_loss_plan = x.val_loss_bf16 = std::numeric_limits<double>::quiet_NaN();
  x.finished = false;
  return x;
}

}  // namespace

std::vector<CompareRowRecord> Store::compare_rows(int64_t compare_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  const std::string where = impl_->path + ": compare " + std::to_string(compare_id);
  bool finished = true;
  int64_t asked = 0;
  {
    Stmt e(db, "SELECT status, replicates FROM compares WHERE id = ?");
    e.bind(1, compare_id);
    if (!e.step()) throw Error(where + " does not exist (see `snip runs` or `snip show --compare`)");
    finished = e.column_text(0) == "finished";
    asked = e.column_int64(1);
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
    if (finished && k != int64_t(r.replicates.size()) + 1)
      throw Error(at + ": replicate numbers have a gap (damaged database)");
    if (!finished && (k < 1 || k > asked)) throw Error(at + ": no such replicate (damaged database)");
    CompareReplicateRecord x;
    x.train_loss_last = reps.column_double(2);
    x.val_loss_plan = reps.column_double(3);
    x.val_loss_bf16 = reps.column_double(4);
    x.train_curve = read_curve(reps, 5, at);
    if (finished) {
      r.replicates.push_back(std::move(x));
    } else {  // in replicate order, whichever finished first (trainings run in parallel)
      r.replicates.resize(size_t(asked), unfinished_replicate());
      r.replicates[size_t(k - 1)] = std::move(x);
    }
  }
  // An unfinished compare: every arm has its K replicates, those not trained yet as placeholders
  // (an arm that never started has all K), so what finished is shown and nothing else concluded.
  if (!finished) {
    for (CompareRowRecord& r : out) r.replicates.resize(size_t(asked), unfinished_replicate());
    // A row with an earlier row's plan is not trained: it has that row's replicates.
    for (CompareRowRecord& r : out)
      if (!r.same_plan_as.empty())
        for (const CompareRowRecord& o : out)
          if (o.method == r.same_plan_as && o.same_plan_as.empty()) r.replicates = o.replicates;
  }
  return out;
}

std::vector<StoredCompareReplicate> Store::compare_replicates(int64_t compare_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  require_compare(db, compare_id);
  const std::string where = impl_->path + ": compare " + std::to_string(compare_id);
  Stmt reps(db,
            "SELECT position, replicate, train_loss_last, val_loss_plan, val_loss_bf16, train_curve "
            "FROM compare_replicates WHERE compare_id = ? ORDER BY position, replicate");
  reps.bind(1, compare_id);
  std::vector<StoredCompareReplicate> out;
  while (reps.step()) {
    StoredCompareReplicate x;
    x.position = reps.column_int64(0);
    x.replicate = reps.column_int64(1);
    x.result.train_loss_last = reps.column_double(2);
    x.result.val_loss_plan = reps.column_double(3);
    x.result.val_loss_bf16 = reps.column_double(4);
    x.result.train_curve =
        read_curve(reps, 5, where + " row " + std::to_string(x.position) + " replicate " + std::to_string(x.replicate));
    out.push_back(std::move(x));
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
