// The store's DDL: version 1 and the forward migrations after it (see schema.h).
#include "schema.h"

namespace snip::store_detail {

namespace {

// Version 1. Never edit this text: databases in the field were created from it. Change the
// schema by appending a migration below.
const char* kSchemaV1 = R"sql(
CREATE TABLE runs (
  id              INTEGER PRIMARY KEY,
  name            TEXT    NOT NULL,
  hidden          INTEGER NOT NULL,
  intermediate    INTEGER NOT NULL,
  num_layers      INTEGER NOT NULL,
  num_heads       INTEGER NOT NULL,
  num_kv_heads    INTEGER NOT NULL,
  model_config    TEXT    NOT NULL,
  train_config    TEXT    NOT NULL,
  data_source     TEXT    NOT NULL,
  recipe          TEXT    NOT NULL,
  seed            INTEGER NOT NULL,
  method          TEXT    NOT NULL,
  plan_id         INTEGER REFERENCES plans(id) ON DELETE SET NULL,
  parent_run_id   INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  parent_step     INTEGER,
  notes           TEXT    NOT NULL DEFAULT '',
  status          TEXT    NOT NULL CHECK (status IN ('running', 'finished', 'failed', 'interrupted')),
  status_message  TEXT    NOT NULL DEFAULT '',
  started_ms      INTEGER NOT NULL,
  ended_ms        INTEGER,
  last_step       INTEGER NOT NULL DEFAULT -1,
  metric_rows     INTEGER NOT NULL DEFAULT 0,
  owner_pid       INTEGER NOT NULL,
  owner_host      TEXT    NOT NULL,
  owner_start     INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE checkpoints (
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step        INTEGER NOT NULL,
  path        TEXT    NOT NULL,
  created_ms  INTEGER NOT NULL,
  PRIMARY KEY (run_id, step, path)
) WITHOUT ROWID;

CREATE TABLE metrics (
  run_id        INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  step          INTEGER NOT NULL,
  train_loss    REAL,
  val_loss      REAL,
  lr            REAL,
  grad_norm     REAL,
  tokens_per_s  REAL,
  fp4_fraction  REAL,
  bf16_gap      REAL,
  PRIMARY KEY (run_id, step)
) WITHOUT ROWID;

CREATE TABLE stats_rounds (
  id            INTEGER PRIMARY KEY,
  run_id        INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  step          INTEGER NOT NULL,
  batch_id      TEXT    NOT NULL,
  recipe        TEXT    NOT NULL,
  tokens        INTEGER NOT NULL,
  hidden        INTEGER NOT NULL,
  intermediate  INTEGER NOT NULL,
  num_layers    INTEGER NOT NULL,
  num_heads     INTEGER NOT NULL,
  num_kv_heads  INTEGER NOT NULL,
  options       TEXT    NOT NULL,
  created_ms    INTEGER NOT NULL
);

CREATE TABLE stats_globals (
  round_id  INTEGER NOT NULL REFERENCES stats_rounds(id) ON DELETE CASCADE,
  key       TEXT    NOT NULL,
  value     REAL,
  PRIMARY KEY (round_id, key)
) WITHOUT ROWID;

CREATE TABLE stats_layers (
  round_id  INTEGER NOT NULL REFERENCES stats_rounds(id) ON DELETE CASCADE,
  position  INTEGER NOT NULL,
  name      TEXT    NOT NULL,
  PRIMARY KEY (round_id, position)
) WITHOUT ROWID;

CREATE TABLE stats_values (
  round_id   INTEGER NOT NULL,
  position   INTEGER NOT NULL,
  precision  TEXT    NOT NULL,
  key        TEXT    NOT NULL,
  value      REAL,
  PRIMARY KEY (round_id, position, precision, key),
  FOREIGN KEY (round_id, position) REFERENCES stats_layers(round_id, position) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE stats_vectors (
  round_id  INTEGER NOT NULL,
  position  INTEGER NOT NULL,
  key       TEXT    NOT NULL,
  data      BLOB    NOT NULL,
  PRIMARY KEY (round_id, position, key),
  FOREIGN KEY (round_id, position) REFERENCES stats_layers(round_id, position) ON DELETE CASCADE
) WITHOUT ROWID;

CREATE TABLE plans (
  id                      INTEGER PRIMARY KEY,
  run_id                  INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  stats_round_id          INTEGER REFERENCES stats_rounds(id) ON DELETE SET NULL,
  method                  TEXT    NOT NULL,
  budget                  REAL    NOT NULL,
  achieved_fp4_fraction   REAL    NOT NULL,
  recipe                  TEXT    NOT NULL,
  provenance              TEXT    NOT NULL,
  options                 TEXT    NOT NULL,
  objective               REAL,
  predicted_delta_loss    REAL,
  predicted_delta_weight  REAL,
  solver_status           TEXT    NOT NULL,
  solve_time_s            REAL,
  mip_gap                 REAL,
  created_ms              INTEGER NOT NULL
);

CREATE TABLE plan_assignments (
  plan_id    INTEGER NOT NULL REFERENCES plans(id) ON DELETE CASCADE,
  layer      TEXT    NOT NULL,
  role       TEXT    NOT NULL CHECK (role IN ('fprop', 'dgrad', 'wgrad')),
  precision  TEXT    NOT NULL CHECK (precision IN ('fp32', 'bf16', 'fp8', 'fp4')),
  PRIMARY KEY (plan_id, layer, role)
) WITHOUT ROWID;

CREATE TABLE plan_timeline (
  run_id      INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
  first_step  INTEGER NOT NULL,
  plan_id     INTEGER NOT NULL REFERENCES plans(id),
  last_step   INTEGER,
  PRIMARY KEY (run_id, first_step)
) WITHOUT ROWID;

CREATE TABLE validations (
  id              INTEGER PRIMARY KEY,
  run_id          INTEGER REFERENCES runs(id) ON DELETE CASCADE,
  stats_round_id  INTEGER REFERENCES stats_rounds(id) ON DELETE SET NULL,
  step            INTEGER NOT NULL,
  options         TEXT    NOT NULL,
  created_ms      INTEGER NOT NULL
);

CREATE TABLE validation_entries (
  validation_id  INTEGER NOT NULL REFERENCES validations(id) ON DELETE CASCADE,
  position       INTEGER NOT NULL,
  layer          TEXT    NOT NULL,
  precision      TEXT    NOT NULL,
  PRIMARY KEY (validation_id, position)
) WITHOUT ROWID;

CREATE TABLE validation_values (
  validation_id  INTEGER NOT NULL REFERENCES validations(id) ON DELETE CASCADE,
  position       INTEGER NOT NULL,
  key            TEXT    NOT NULL,
  value          REAL,
  PRIMARY KEY (validation_id, position, key)
) WITHOUT ROWID;
)sql";

// Version 2: a heartbeat per run (a running run on another host is judged dead when its
// heartbeat is stale, since its pid cannot be checked from here), and indexes for the
// "everything of run R" queries of the GUI's run browser.
const char* kMigrationV2 = R"sql(
ALTER TABLE runs ADD COLUMN heartbeat_ms INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET heartbeat_ms = COALESCE(ended_ms, started_ms);
CREATE INDEX stats_rounds_by_run ON stats_rounds(run_id, step);
CREATE INDEX plans_by_run ON plans(run_id);
CREATE INDEX validations_by_run ON validations(run_id);
CREATE INDEX runs_by_parent ON runs(parent_run_id);
)sql";

// Version 3: plan comparisons (`snip compare`, METHOD.md section 6 training truth). One row
// per experiment and one per arm; each arm's train-loss curve is a blob in its row (an arm is
// not a run: no checkpoint, no owner process, and 15 arms per experiment would swamp the
// run list), so the whole table with its curves is one query.
const char* kMigrationV3 = R"sql(
CREATE TABLE compares (
  id                 INTEGER PRIMARY KEY,
  run_id             INTEGER REFERENCES runs(id) ON DELETE SET NULL,
  stats_round_id     INTEGER REFERENCES stats_rounds(id) ON DELETE SET NULL,
  checkpoint         TEXT    NOT NULL,
  start_step         INTEGER NOT NULL,
  budget             REAL    NOT NULL,
  recipe             TEXT    NOT NULL,
  steps              INTEGER NOT NULL,
  cooldown_steps     INTEGER NOT NULL,
  eval_batches       INTEGER NOT NULL,
  last_window        INTEGER NOT NULL,
  control_rel        REAL    NOT NULL,
  noise_floor_train  REAL,
  noise_floor_val    REAL,
  options            TEXT    NOT NULL,
  created_ms         INTEGER NOT NULL
);

CREATE TABLE compare_rows (
  compare_id             INTEGER NOT NULL REFERENCES compares(id) ON DELETE CASCADE,
  position               INTEGER NOT NULL,
  method                 TEXT    NOT NULL,
  lambda                 REAL,
  seed                   INTEGER,
  achieved_fp4_fraction  REAL    NOT NULL,
  train_loss_last        REAL,
  val_loss_plan          REAL,
  val_loss_bf16          REAL,
  gap_train              REAL,
  gap_val_plan           REAL,
  gap_val_bf16           REAL,
  control                INTEGER NOT NULL CHECK (control IN (0, 1)),
  differs_from_snip      INTEGER NOT NULL CHECK (differs_from_snip IN (0, 1)),
  same_plan_as           TEXT    NOT NULL DEFAULT '',
  plan_id                INTEGER REFERENCES plans(id) ON DELETE SET NULL,
  train_curve            BLOB    NOT NULL,
  PRIMARY KEY (compare_id, position)
) WITHOUT ROWID;

CREATE INDEX compares_by_run ON compares(run_id);
CREATE INDEX compare_rows_by_plan ON compare_rows(plan_id);
)sql";

// Version 4: replicated compares (`snip compare --replicates K`). Every arm is trained K times,
// paired by replicate; the K values of each arm are kept (with each replicate's train-loss
// curve) so the intervals and verdicts are recomputed from the database, never stored as
// conclusions. compare_rows keeps the means over the replicates; compares from version 3 have
// no replicate rows and read back as one replicate each.
const char* kMigrationV4 = R"sql(
ALTER TABLE compares ADD COLUMN replicates INTEGER NOT NULL DEFAULT 1;

CREATE TABLE compare_replicates (
  compare_id       INTEGER NOT NULL,
  position         INTEGER NOT NULL,
  replicate        INTEGER NOT NULL CHECK (replicate >= 1),
  train_loss_last  REAL,
  val_loss_plan    REAL,
  val_loss_bf16    REAL,
  train_curve      BLOB    NOT NULL,
  PRIMARY KEY (compare_id, position, replicate),
  FOREIGN KEY (compare_id, position) REFERENCES compare_rows(compare_id, position) ON DELETE CASCADE
) WITHOUT ROWID;
)sql";

// Version 5: compares that survive interruption. A compare is stored when it starts (status
// `running`, owned by its process like a run) and each finished (arm, replicate) training is
// stored at once, so a compare stopped by Ctrl-C, a GUI cancel or a dead process keeps its
// trainings and `snip compare --resume` continues it. The checkpoint's fingerprint lets the
// resume refuse a checkpoint that changed. Compares stored before are `finished`.
const char* kMigrationV5 = R"sql(
ALTER TABLE compares ADD COLUMN status TEXT NOT NULL DEFAULT 'finished'
  CHECK (status IN ('running', 'finished', 'failed', 'interrupted'));
ALTER TABLE compares ADD COLUMN status_message TEXT NOT NULL DEFAULT '';
ALTER TABLE compares ADD COLUMN checkpoint_fingerprint TEXT NOT NULL DEFAULT '';
ALTER TABLE compares ADD COLUMN owner_pid INTEGER NOT NULL DEFAULT 0;
ALTER TABLE compares ADD COLUMN owner_host TEXT NOT NULL DEFAULT '';
ALTER TABLE compares ADD COLUMN owner_start INTEGER NOT NULL DEFAULT 0;
ALTER TABLE compares ADD COLUMN heartbeat_ms INTEGER NOT NULL DEFAULT 0;
)sql";

}  // namespace

const std::vector<std::string>& schema_steps() {
  static const std::vector<std::string> steps = {kSchemaV1, kMigrationV2, kMigrationV3, kMigrationV4, kMigrationV5};
  return steps;
}

}  // namespace snip::store_detail
