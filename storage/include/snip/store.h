// The experiment store: one SQLite database file holding runs, per-step metrics, raw
// statistics rounds, plans with their timeline, validation results and plan comparisons
// (storage/README.md documents the schema). Plain sqlite3 underneath, value types on top.
//
// Guarantees: WAL mode, foreign keys on, a 5 s busy timeout instead of "database is locked"
// failures; every write method is one transaction, so a reader in another process never
// sees a half-written step and a kill -9 loses at most the uncommitted batch. A run left
// `running` by a process that no longer exists is marked `interrupted` when a store opens.
//
// Threads: one Store is one connection; use it from one thread at a time. A GUI that reads
// while its worker thread trains opens one Store per thread on the same file.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "snip/error.h"
#include "snip/plan.h"
#include "snip/stats.h"
#include "snip/store_types.h"

namespace snip {

// $XDG_DATA_HOME/snip-workbench/workbench.db, else ~/.local/share/snip-workbench/workbench.db
// (the directory is created when missing). No Qt: the GUI and the CLI use the same file.
std::string default_database_path();

// A write refused because another connection or process held the database's write lock past
// the busy timeout (a sqlite3 shell in a transaction, a backup, a GUI query). Nothing of that
// write was committed; retrying it later is safe. RunRecorder keeps a run's rows meanwhile.
class StoreBusy : public Error {
 public:
  using Error::Error;
};

struct StoreOptions {
  bool create = true;                      // create the file when missing (else: error)
  int busy_timeout_ms = 5000;              // wait this long for another process's write lock
  bool mark_dead_runs_interrupted = true;  // on open: running runs whose process is gone -> interrupted
  // On open: read every page (SQLite's quick_check, ~3 ms per MB) and refuse a damaged file
  // before anything is written. For the commands that then write for minutes (training, a
  // compare, a statistics round, an import), which would otherwise find the damage at the end.
  bool check_integrity = false;
  // For the commands that only read (runs, show, export, compare --list): a database the user
  // cannot write (a read-only file, folder or mount) is opened read-only instead of refused.
  // Nothing is migrated or marked then; an older schema is refused with how to upgrade it.
  bool read_only_if_unwritable = false;
  bool read_only = false;  // always read-only (implies create = false)
};

class Store {
 public:
  static constexpr int kSchemaVersion = 5;  // PRAGMA user_version of a current database

  // Opens (or creates) the database and migrates an older schema forward. Throws snip::Error,
  // without modifying the file, for: a file that is not a SQLite database, a truncated
  // database, a database of a newer schema version, a SQLite database of another program,
  // and a location that cannot be written.
  explicit Store(const std::string& path, const StoreOptions& options = {});
  ~Store();
  Store(Store&&) noexcept;
  Store& operator=(Store&&) noexcept;
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  const std::string& path() const;
  int schema_version() const;
  bool read_only() const;  // opened read-only (StoreOptions::read_only, or unwritable with read_only_if_unwritable)
  // How long a write waits for another process's write lock before throwing StoreBusy.
  void set_busy_timeout(int ms);
  int busy_timeout() const;
  // A number that changes whenever something was committed to the file: by another connection
  // or process (PRAGMA data_version) or through this one (sqlite3_total_changes64). Reads no
  // table, so a poller can call it often and re-read only when it changed.
  uint64_t change_counter() const;

  // ---- runs --------------------------------------------------------------------------
  // A new run, `running`, owned by this process (pid, host and heartbeat are recorded).
  int64_t create_run(const RunSpec& spec);
  RunInfo run(int64_t run_id) const;  // throws snip::Error when missing
  std::optional<RunInfo> find_run(int64_t run_id) const;
  std::vector<RunInfo> runs() const;  // newest first, without checkpoints
  // Terminal statuses set the end time; `message` says why a run failed or stopped.
  void set_run_status(int64_t run_id, RunStatus status, const std::string& message = "");
  void set_run_notes(int64_t run_id, const std::string& notes);
  void set_run_name(int64_t run_id, const std::string& name);
  // A resumed run's configuration as it continues (total steps, plan, adaptive settings), so
  // what is stored is what the run trains with.
  void set_run_config(int64_t run_id, const nlohmann::json& train_config, const std::string& method);
  // Resuming a run: `running` again, owned by this process. With resume_from_step (the
  // checkpoint's step), the metrics and timeline entries after that step are dropped, since
  // those steps are trained again. Throws snip::Error when a live process still owns the run.
  void claim_run(int64_t run_id, std::optional<int64_t> resume_from_step = std::nullopt);
  void add_checkpoint(int64_t run_id, int64_t step, const std::string& path);
  std::vector<Checkpoint> checkpoints(int64_t run_id) const;
  // Deletes a run with its metrics, checkpoints, timeline and validation results; its plans
  // and statistics rounds stay (run_id becomes NULL) because other runs may use them.
  void delete_run(int64_t run_id);
  // Marks `running` runs whose owning process is gone as `interrupted`; returns how many.
  int mark_dead_runs_interrupted();

  // ---- metrics (narrow table keyed by (run, step)) ------------------------------------
  // One transaction for all rows; a step written again replaces the earlier row (a run
  // resumed from a checkpoint re-records the steps after it).
  void append_metrics(int64_t run_id, std::span<const MetricRow> rows);
  std::vector<MetricRow> metrics(int64_t run_id, int64_t first_step = 0,
                                 int64_t last_step = std::numeric_limits<int64_t>::max()) const;
  // A curve for drawing: at most max_points points. When the range holds more, it is cut
  // into max_points/2 equal step buckets and each bucket contributes its minimum and its
  // maximum (in step order), so spikes survive. NULL values (val_loss, bf16_gap) are skipped.
  std::vector<CurvePoint> curve(int64_t run_id, Metric metric, int max_points, int64_t first_step = 0,
                                int64_t last_step = std::numeric_limits<int64_t>::max()) const;

  // Several curves of one run from a single scan of its rows (a monitor view draws six at
  // once: about the cost of one curve() call instead of six). Same points as curve() per metric.
  std::map<Metric, std::vector<CurvePoint>> curves(int64_t run_id, std::span<const Metric> metrics, int max_points,
                                                   int64_t first_step = 0,
                                                   int64_t last_step = std::numeric_limits<int64_t>::max()) const;

  // ---- statistics rounds (snip-stats/1, stored losslessly: every value, every vector) --
  int64_t add_stats_round(const StatsRound& round, std::optional<int64_t> run_id = std::nullopt);
  StatsRound stats_round(int64_t round_id) const;  // throws snip::Error when missing
  std::vector<StatsRoundInfo> stats_rounds(std::optional<int64_t> run_id = std::nullopt) const;
  // One key's per-layer values (e.g. "grad_noise_ratio", snip/stats_keys.h) in every round of a
  // run, ordered by step, round, layer and precision: what a layer × step view needs, without
  // loading whole rounds.
  std::vector<StatsValuePoint> stats_value_series(int64_t run_id, const std::string& key) const;

  // ---- plans -------------------------------------------------------------------------
  int64_t add_plan(const Plan& plan, const PlanSolveInfo& solve = {});
  PlanRecord plan(int64_t plan_id) const;                                             // throws snip::Error when missing
  std::vector<PlanRecord> plans(std::optional<int64_t> run_id = std::nullopt) const;  // newest first
  // The plan resolved against the run's model (snip::resolve_plan): throws snip::Error naming
  // a layer the model does not have.
  std::vector<LinearPrecision> resolve_plan_for_run(int64_t plan_id, int64_t run_id,
                                                    std::vector<std::string>* warnings = nullptr) const;
  // Plan timeline: plan_id takes effect at first_step; the entry in effect before it is
  // closed at first_step - 1.
  void set_plan_in_effect(int64_t run_id, int64_t plan_id, int64_t first_step);
  void end_plan_timeline(int64_t run_id, int64_t last_step);           // closes the open entry, if any
  std::vector<PlanTimelineEntry> plan_timeline(int64_t run_id) const;  // ascending first_step

  // ---- validation results (METHOD.md section 6) ----------------------------------------
  int64_t add_validation(const ValidationResult& result);
  ValidationResult validation(int64_t validation_id) const;  // throws snip::Error when missing
  std::vector<ValidationResult> validations(std::optional<int64_t> run_id = std::nullopt) const;  // without entries

  // ---- plan comparisons (METHOD.md section 6, training truth; `snip compare`) -----------
  // Inserts the experiment and all its rows in one transaction; returns its id. Throws
  // snip::Error for a run, statistics round or plan id that does not exist.
  int64_t insert_compare(const CompareRecord& compare);
  // Newest first, without rows (row_count says how many); only those of run_id when given.
  std::vector<CompareRecord> list_compares(std::optional<int64_t> run_id = std::nullopt) const;
  // Report order; throws when missing. An unfinished compare's arms have all K replicates in
  // replicate order, those not trained yet as placeholders (CompareReplicateRecord::finished
  // false, NaN losses); a row with an earlier row's plan has that row's.
  std::vector<CompareRowRecord> compare_rows(int64_t compare_id) const;
  CompareRecord compare(int64_t compare_id) const;  // with rows; throws when missing
  void delete_compare(int64_t compare_id);          // with its rows (plans stay)
  // A compare that survives interruption (CompareRecorder, session/): insert_compare with status
  // `running` makes this process its owner. Replaces the compare's header fields and rows
  // (with their replicates) by `compare`'s, keeping its id, status and owner:
  void update_compare(const CompareRecord& compare);
  // Replaces only the compare's options (CompareRecord::options); rows and trainings stay.
  void set_compare_options(int64_t compare_id, const nlohmann::json& options);
  // Stores one finished training of row `position` (replicate counts from 1), replacing an
  // earlier one, and records that the owner is alive.
  void add_compare_replicate(int64_t compare_id, int64_t position, int64_t replicate,
                             const CompareReplicateRecord& result);
  // Every stored training of the compare, by (position, replicate).
  std::vector<StoredCompareReplicate> compare_replicates(int64_t compare_id) const;
  // Terminal statuses end the ownership; `message` says why it failed or stopped.
  void set_compare_status(int64_t compare_id, RunStatus status, const std::string& message = "");
  // Continuing a compare: `running` again, owned by this process. Throws snip::Error when it is
  // missing, already finished, or a live process still owns it.
  void claim_compare(int64_t compare_id);
  // Marks `running` compares whose owning process is gone as `interrupted`; returns how many.
  int mark_dead_compares_interrupted();

  // Groups several write calls into one transaction (nested calls join it). Commits when
  // commit() is called; rolls back when destroyed uncommitted (e.g. by an exception).
  class Transaction {
   public:
    explicit Transaction(Store& store);
    ~Transaction();
    void commit();
    Transaction(const Transaction&) = delete;
    Transaction& operator=(const Transaction&) = delete;

   private:
    Store* store_;
    bool done_ = false;
  };

  struct Impl;  // the connection and prepared statements (storage/src)

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace snip
