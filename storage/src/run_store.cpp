// Runs: creation, status, ownership by a process, checkpoints, and detection of runs left
// `running` by a process that died (kill -9, crash, power loss).
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>

#include "snip/error.h"
#include "snip/names.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip {

using store_detail::now_ms;
using store_detail::ReadTxn;
using store_detail::Stmt;
using store_detail::WriteTxn;

namespace {

constexpr std::array<Named<RunStatus>, 4> kRunStatusNames{{{RunStatus::running, "running"},
                                                           {RunStatus::finished, "finished"},
                                                           {RunStatus::failed, "failed"},
                                                           {RunStatus::interrupted, "interrupted"}}};

}  // namespace

const char* run_status_name(RunStatus s) {
  return name_of(kRunStatusNames, s);
}

RunStatus parse_run_status(std::string_view s) {
  return parse_name(kRunStatusNames, s, "run status");
}

namespace store_detail {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

// Field 3 (state) and field 22 (starttime) of /proc/<pid>/stat; the command name (field 2)
// may contain spaces and parentheses, so parsing starts after the last ')'.
bool read_proc_stat(int64_t pid, char* state, int64_t* start) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  const auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  rest >> *state;  // field 3
  for (int f = 4; f <= 22; ++f) rest >> field;
  *start = std::atoll(field.c_str());
  return true;
}

}  // namespace

// Recomputed after fork(): a child must not record its parent's identity.
ProcessId this_process() {
  static thread_local ProcessId cached;
  const int64_t pid = getpid();
  if (cached.pid != pid) {
    ProcessId p;
    p.pid = pid;
    p.host = host_name();
    char state = 0;
    read_proc_stat(p.pid, &state, &p.start);
    cached = p;
  }
  return cached;
}

namespace {
// A run's writer on another host cannot be checked from here: it is judged dead when it has
// not written for this long.
constexpr int64_t kForeignHeartbeatTimeoutMs = 60 * 60 * 1000;
}  // namespace

bool process_alive(const ProcessId& owner, int64_t heartbeat_ms) {
  const ProcessId me = this_process();
  if (owner.host != me.host) return now_ms() - heartbeat_ms < kForeignHeartbeatTimeoutMs;
  if (owner.pid <= 0) return false;
  if (owner.pid == me.pid) return owner.start == me.start;
  if (::kill(pid_t(owner.pid), 0) != 0 && errno == ESRCH) return false;
  char state = 0;
  int64_t start = 0;
  if (!read_proc_stat(owner.pid, &state, &start)) return ::kill(pid_t(owner.pid), 0) == 0 || errno == EPERM;
  if (state == 'Z' || state == 'X') return false;  // exited, not yet reaped by its parent
  return owner.start == 0 || start == owner.start;
}

}  // namespace store_detail

namespace {

using store_detail::process_alive;
using store_detail::ProcessId;
using store_detail::this_process;

constexpr const char* kRunColumns =
    "id, name, hidden, intermediate, num_layers, num_heads, num_kv_heads, model_config, train_config, data_source, "
    "recipe, seed, method, plan_id, parent_run_id, parent_step, notes, status, status_message, started_ms, ended_ms, "
    "last_step, metric_rows, owner_pid, owner_host, heartbeat_ms";

RunInfo read_run_row(const Stmt& st, const std::string& db_path) {
  RunInfo r;
  int c = 0;
  r.id = st.column_int64(c++);
  const std::string where = db_path + ": run " + std::to_string(r.id);
  r.spec.name = st.column_text(c++);
  r.spec.dims.hidden = int(st.column_int64(c++));
  r.spec.dims.intermediate = int(st.column_int64(c++));
  r.spec.dims.num_layers = int(st.column_int64(c++));
  r.spec.dims.num_heads = int(st.column_int64(c++));
  r.spec.dims.num_kv_heads = int(st.column_int64(c++));
  r.spec.model_config = store_detail::parse_json_column(st.column_text(c++), where + " model_config");
  r.spec.train_config = store_detail::parse_json_column(st.column_text(c++), where + " train_config");
  r.spec.data_source = st.column_text(c++);
  r.spec.recipe = st.column_text(c++);
  r.spec.seed = st.column_int64(c++);
  r.spec.method = st.column_text(c++);
  r.spec.plan_id = st.column_opt_int64(c++);
  r.spec.parent_run_id = st.column_opt_int64(c++);
  r.spec.parent_step = st.column_opt_int64(c++);
  r.spec.notes = st.column_text(c++);
  r.status = parse_run_status(st.column_text(c++));
  r.status_message = st.column_text(c++);
  r.started_ms = st.column_int64(c++);
  r.ended_ms = st.column_opt_int64(c++);
  r.last_step = st.column_int64(c++);
  r.metric_rows = st.column_int64(c++);
  r.owner_pid = st.column_int64(c++);
  r.owner_host = st.column_text(c++);
  r.heartbeat_ms = st.column_int64(c++);
  return r;
}

}  // namespace

int64_t Store::create_run(const RunSpec& spec) {
  auto& db = impl_->db;
  if (spec.dims.num_layers < 0 || spec.dims.hidden < 0)
    throw Error("run '" + spec.name + "': model dimensions must not be negative");
  const ProcessId me = this_process();
  store_detail::check_run_name(spec.name);
  const int64_t now = now_ms();
  WriteTxn txn(db);
  if (spec.parent_run_id) store_detail::require_run(db, *spec.parent_run_id);
  if (spec.plan_id) {
    Stmt p(db, "SELECT 1 FROM plans WHERE id = ?");
    p.bind(1, *spec.plan_id);
    if (!p.step())
      throw Error(impl_->path + ": run '" + spec.name + "' names plan " + std::to_string(*spec.plan_id) +
                  ", which does not exist; import the plan first (`snip import`)");
  }
  Stmt st(db,
          "INSERT INTO runs (name, hidden, intermediate, num_layers, num_heads, num_kv_heads, model_config, "
          "train_config, data_source, recipe, seed, method, plan_id, parent_run_id, parent_step, notes, status, "
          "started_ms, owner_pid, owner_host, owner_start, heartbeat_ms) "
          "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?)");
  st.bind(1, spec.name);
  st.bind(2, spec.dims.hidden);
  st.bind(3, spec.dims.intermediate);
  st.bind(4, spec.dims.num_layers);
  st.bind(5, spec.dims.num_heads);
  st.bind(6, spec.dims.num_kv_heads);
  st.bind(7, spec.model_config.dump());
  st.bind(8, spec.train_config.dump());
  st.bind(9, spec.data_source);
  st.bind(10, spec.recipe);
  st.bind(11, spec.seed);
  st.bind(12, spec.method);
  st.bind(13, spec.plan_id);
  st.bind(14, spec.parent_run_id);
  st.bind(15, spec.parent_step);
  st.bind(16, spec.notes);
  st.bind(17, now);
  st.bind(18, me.pid);
  st.bind(19, me.host);
  st.bind(20, me.start);
  st.bind(21, now);
  st.run();
  const int64_t id = sqlite3_last_insert_rowid(db.handle());
  txn.commit();
  return id;
}

std::optional<RunInfo> Store::find_run(int64_t run_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  Stmt st(db, std::string("SELECT ") + kRunColumns + " FROM runs WHERE id = ?");
  st.bind(1, run_id);
  if (!st.step()) return std::nullopt;
  RunInfo r = read_run_row(st, impl_->path);
  r.checkpoints = checkpoints(run_id);
  return r;
}

RunInfo Store::run(int64_t run_id) const {
  auto r = find_run(run_id);
  if (!r)
    throw Error(impl_->path + ": run " + std::to_string(run_id) + " does not exist (list runs with `snip runs --db " +
                impl_->path + "`)");
  return *r;
}

std::vector<RunInfo> Store::runs() const {
  Stmt st(impl_->db, std::string("SELECT ") + kRunColumns + " FROM runs ORDER BY id DESC");
  std::vector<RunInfo> out;
  while (st.step()) out.push_back(read_run_row(st, impl_->path));
  return out;
}

void Store::set_run_status(int64_t run_id, RunStatus status, const std::string& message) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  const bool terminal = status != RunStatus::running;
  Stmt st(db, "UPDATE runs SET status = ?, status_message = ?, ended_ms = ?, heartbeat_ms = ? WHERE id = ?");
  const int64_t now = now_ms();
  st.bind(1, run_status_name(status)).bind(2, message).bind(3, terminal ? std::optional<int64_t>(now) : std::nullopt);
  st.bind(4, now).bind(5, run_id).run();
  txn.commit();
}

void Store::set_run_notes(int64_t run_id, const std::string& notes) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  Stmt(db, "UPDATE runs SET notes = ? WHERE id = ?").bind(1, notes).bind(2, run_id).run();
  txn.commit();
}

void Store::set_run_config(int64_t run_id, const nlohmann::json& train_config, const std::string& method) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  Stmt(db, "UPDATE runs SET train_config = ?, method = ? WHERE id = ?")
      .bind(1, train_config.dump())
      .bind(2, method)
      .bind(3, run_id)
      .run();
  txn.commit();
}

void Store::set_run_name(int64_t run_id, const std::string& name) {
  store_detail::check_run_name(name);
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  Stmt(db, "UPDATE runs SET name = ? WHERE id = ?").bind(1, name).bind(2, run_id).run();
  txn.commit();
}

namespace {

// A statistics round made at step k sets the plan from step k + 1, so a run resumed from step s
// makes every round at k >= s again (bit-identical). The earlier copies, and the plans the run
// made from them, go with the steps they belonged to, unless something else refers to them:
// another run's timeline, a run that started with the plan, a validation, a compare, or a plan
// someone made from the round by hand. Call inside the claiming transaction.
void drop_rounds_trained_again(store_detail::Db& db, int64_t run_id, int64_t from_step) {
  // This run's plans from those rounds that nothing still uses ...
  Stmt(db,
       "DELETE FROM plans WHERE run_id = ?1 "
       "AND stats_round_id IN (SELECT id FROM stats_rounds WHERE run_id = ?1 AND step >= ?2) "
       "AND id NOT IN (SELECT plan_id FROM plan_timeline) "
       "AND id NOT IN (SELECT plan_id FROM runs WHERE plan_id IS NOT NULL) "
       "AND id NOT IN (SELECT plan_id FROM compare_rows WHERE plan_id IS NOT NULL)")
      .bind(1, run_id)
      .bind(2, from_step)
      .run();
  // ... then the rounds nothing still uses.
  Stmt(db,
       "DELETE FROM stats_rounds WHERE run_id = ?1 AND step >= ?2 "
       "AND id NOT IN (SELECT stats_round_id FROM plans WHERE stats_round_id IS NOT NULL) "
       "AND id NOT IN (SELECT stats_round_id FROM validations WHERE stats_round_id IS NOT NULL) "
       "AND id NOT IN (SELECT stats_round_id FROM compares WHERE stats_round_id IS NOT NULL)")
      .bind(1, run_id)
      .bind(2, from_step)
      .run();
}

}  // namespace

void Store::claim_run(int64_t run_id, std::optional<int64_t> resume_from_step) {
  auto& db = impl_->db;
  const ProcessId me = this_process();
  WriteTxn txn(db);
  Stmt cur(db, "SELECT status, owner_pid, owner_host, owner_start, heartbeat_ms FROM runs WHERE id = ?");
  cur.bind(1, run_id);
  if (!cur.step())
    throw Error(impl_->path + ": run " + std::to_string(run_id) + " does not exist (list runs with `snip runs`)");
  if (cur.column_text(0) == "running") {
    ProcessId owner{cur.column_int64(1), cur.column_text(2), cur.column_int64(3)};
    const bool mine = owner.pid == me.pid && owner.host == me.host && owner.start == me.start;
    if (!mine && process_alive(owner, cur.column_int64(4)))
      throw Error(impl_->path + ": run " + std::to_string(run_id) + " is still being written by process " +
                  std::to_string(owner.pid) + " on " + owner.host + "; stop it before resuming the run");
  }
  cur.reset();
  if (resume_from_step) {
    // Steps after the checkpoint are trained again: drop their rows and the timeline after it.
    Stmt(db, "DELETE FROM metrics WHERE run_id = ? AND step > ?").bind(1, run_id).bind(2, *resume_from_step).run();
    Stmt(db, "DELETE FROM plan_timeline WHERE run_id = ? AND first_step > ?")
        .bind(1, run_id)
        .bind(2, *resume_from_step)
        .run();
    Stmt(db, "UPDATE plan_timeline SET last_step = NULL WHERE run_id = ? AND last_step > ?")
        .bind(1, run_id)
        .bind(2, *resume_from_step)
        .run();
    drop_rounds_trained_again(db, run_id, *resume_from_step);
    Stmt(db,
         "UPDATE runs SET last_step = COALESCE((SELECT MAX(step) FROM metrics WHERE run_id = ?1), -1), "
         "metric_rows = (SELECT COUNT(*) FROM metrics WHERE run_id = ?1) WHERE id = ?1")
        .bind(1, run_id)
        .run();
  }
  Stmt st(db,
          "UPDATE runs SET status = 'running', status_message = '', ended_ms = NULL, owner_pid = ?, owner_host = ?, "
          "owner_start = ?, heartbeat_ms = ? WHERE id = ?");
  st.bind(1, me.pid).bind(2, me.host).bind(3, me.start).bind(4, now_ms()).bind(5, run_id).run();
  txn.commit();
}

void Store::add_checkpoint(int64_t run_id, int64_t step, const std::string& path) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  const std::string stored = store_detail::stored_path(path);
  // A folder holds one checkpoint: saving there replaces what any run (this one at an earlier
  // step, or another run whose folder was overwritten) listed at that path, so a listed
  // checkpoint is always on disk as listed and a path names one run's state.
  Stmt(db, "DELETE FROM checkpoints WHERE path = ?").bind(1, stored).run();
  Stmt st(db, "INSERT OR REPLACE INTO checkpoints (run_id, step, path, created_ms) VALUES (?, ?, ?, ?)");
  st.bind(1, run_id).bind(2, step).bind(3, stored).bind(4, now_ms()).run();
  txn.commit();
}

std::vector<Checkpoint> Store::checkpoints(int64_t run_id) const {
  Stmt st(impl_->db, "SELECT step, path, created_ms FROM checkpoints WHERE run_id = ? ORDER BY step, path");
  st.bind(1, run_id);
  std::vector<Checkpoint> out;
  while (st.step()) out.push_back({st.column_int64(0), st.column_text(1), st.column_int64(2)});
  return out;
}

void Store::delete_run(int64_t run_id) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  Stmt(db, "DELETE FROM runs WHERE id = ?").bind(1, run_id).run();
  txn.commit();
}

int Store::mark_dead_runs_interrupted() {
  auto& db = impl_->db;
  // Liveness is checked outside the write lock; the UPDATE re-checks the owner so a run
  // claimed meanwhile by a live process is left alone.
  struct Candidate {
    int64_t id;
    ProcessId owner;
  };
  std::vector<Candidate> dead;
  {
    Stmt st(db, "SELECT id, owner_pid, owner_host, owner_start, heartbeat_ms FROM runs WHERE status = 'running'");
    while (st.step()) {
      Candidate c{st.column_int64(0), {st.column_int64(1), st.column_text(2), st.column_int64(3)}};
      if (!process_alive(c.owner, st.column_int64(4))) dead.push_back(c);
    }
  }
  if (dead.empty()) return 0;
  int marked = 0;
  WriteTxn txn(db);
  Stmt up(db,
          "UPDATE runs SET status = 'interrupted', ended_ms = heartbeat_ms, status_message = ? "
          "WHERE id = ? AND status = 'running' AND owner_pid = ? AND owner_host = ? AND owner_start = ?");
  for (const auto& c : dead) {
    up.bind(1, "its process (pid " + std::to_string(c.owner.pid) + " on " + c.owner.host +
                   ") ended without finishing the run; resume it from its last checkpoint");
    up.bind(2, c.id).bind(3, c.owner.pid).bind(4, c.owner.host).bind(5, c.owner.start);
    up.run();
    marked += sqlite3_changes(db.handle());
  }
  txn.commit();
  return marked;
}

}  // namespace snip
