// Plan comparisons (`snip compare`) in the store: a full experiment round-trips exactly (every
// field of every row, NaN losses, curves bit-exact), listing is light and filters by run, bad
// references are refused without writing, deleting cascades to rows only, and a version-2
// database (made with the v1 DDL plus the v2 migration) is migrated to v3 with its data kept,
// and a version-3 compare reads back from version 4 as one replicate per arm.
#include <cmath>
#include <limits>

#include "schema.h"
#include "snip/error.h"
#include "store_test_util.h"

using namespace snip;
using namespace snip_test;

namespace {

CompareRowRecord sample_row(int i, int64_t steps) {
  CompareRowRecord r;
  r.method = "arm " + std::to_string(i);
  if (i % 3 == 1) r.lambda = 0.1 * i;
  if (i % 4 == 2) r.seed = 1000 + i;
  r.achieved_fraction = 0.75 + 0.001 * i;
  r.train_loss_last = 2.0 + 1.0 / 3.0 + 0.01 * i;
  r.val_loss_plan = 2.5 + 0.02 * i;
  r.val_loss_bf16 = 2.4 + 0.015 * i;
  r.gap_train = 0.01 * i;
  r.gap_val_plan = 0.02 * i;
  r.gap_val_bf16 = -0.003 * i;
  r.control = i >= 5;
  r.differs_from_snip = i % 2 == 1;
  if (i == 3) r.same_plan_as = "arm 1";
  for (int64_t s = 0; s < steps; ++s) r.train_curve.push_back(4.0 / double(1 + s) + 1e-17 * double(i));
  for (int k = 0; k < 3; ++k) {  // the replicates, each with its own curve
    CompareReplicateRecord x;
    x.train_loss_last = r.train_loss_last + 1e-3 * (k - 1);
    x.val_loss_plan = r.val_loss_plan + 2e-3 * (k - 1);
    x.val_loss_bf16 = r.val_loss_bf16 - 1e-3 * k;
    for (int64_t s = 0; s < steps; ++s) x.train_curve.push_back(4.0 / double(1 + s) + 1e-4 * k + 1e-17 * double(i));
    r.replicates.push_back(std::move(x));
  }
  return r;
}

CompareRecord sample_compare(std::optional<int64_t> run_id, int rows = 7) {
  CompareRecord c;
  c.run_id = run_id;
  c.checkpoint = "/tmp/ck-small";
  c.start_step = 600;
  c.budget = 0.75;
  c.recipe = "tensor";
  c.steps = 200;
  c.cooldown_steps = 20;
  c.eval_batches = 8;
  c.last_window = 50;
  c.control_rel = 1e-4;
  c.noise_floor_train = 0.0123;
  c.noise_floor_val = 0.0456;
  c.replicates = 3;
  c.options = {{"random_seeds", 2}, {"lambdas", {0, 0.1, 0.3, 1}}};
  for (int i = 0; i < rows; ++i) c.rows.push_back(sample_row(i, 200));
  return c;
}

}  // namespace

TEST(StoreCompare, RoundTripsEveryFieldAndCurveExactly) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t run = store.create_run(tiny_spec());
  const int64_t round = store.add_stats_round(sample_round(tiny_dims(), 600), run);
  PlanSolveInfo solve;
  solve.run_id = run;
  solve.stats_round_id = round;
  const int64_t plan = store.add_plan(sample_plan(tiny_dims()), solve);
  CompareRecord c = sample_compare(run);
  c.stats_round_id = round;
  c.rows[1].plan_id = plan;
  c.rows[4].train_loss_last = std::numeric_limits<double>::quiet_NaN();  // a diverged arm
  c.rows[4].train_curve[150] = std::numeric_limits<double>::infinity();
  c.rows[6].train_curve.clear();  // an arm without a curve (e.g. "same plan as")
  c.rows[6].replicates[1].train_curve.clear();
  c.rows[2].replicates[2].val_loss_plan = std::numeric_limits<double>::quiet_NaN();
  const int64_t id = store.insert_compare(c);

  const CompareRecord back = store.compare(id);
  EXPECT_EQ(back.id, id);
  EXPECT_EQ(back.run_id, run);
  EXPECT_EQ(back.stats_round_id, round);
  EXPECT_EQ(back.checkpoint, c.checkpoint);
  EXPECT_EQ(back.start_step, 600);
  EXPECT_EQ(back.budget, 0.75);
  EXPECT_EQ(back.recipe, "tensor");
  EXPECT_EQ(back.steps, 200);
  EXPECT_EQ(back.cooldown_steps, 20);
  EXPECT_EQ(back.eval_batches, 8);
  EXPECT_EQ(back.last_window, 50);
  EXPECT_EQ(back.control_rel, 1e-4);
  EXPECT_EQ(back.noise_floor_train, 0.0123);
  EXPECT_EQ(back.noise_floor_val, 0.0456);
  EXPECT_EQ(back.options, c.options);
  EXPECT_GT(back.created_ms, 0);
  EXPECT_EQ(back.row_count, 7);
  EXPECT_EQ(back.replicates, 3);
  ASSERT_EQ(back.rows.size(), c.rows.size());
  for (size_t i = 0; i < c.rows.size(); ++i) {
    if (i == 4 || i == 2) continue;  // NaN != NaN; checked below
    EXPECT_EQ(back.rows[i], c.rows[i]) << "row " << i;
  }
  EXPECT_TRUE(std::isnan(back.rows[4].train_loss_last));
  EXPECT_EQ(back.rows[4].train_curve[150], std::numeric_limits<double>::infinity());
  EXPECT_EQ(back.rows[4].train_curve[149], c.rows[4].train_curve[149]);
  EXPECT_EQ(back.rows[4].method, "arm 4");
  EXPECT_EQ(back.rows[1].plan_id, plan);
  EXPECT_EQ(back.rows[1].lambda, 0.1);
  EXPECT_EQ(back.rows[2].seed, 1002);
  EXPECT_FALSE(back.rows[0].lambda.has_value());
  EXPECT_FALSE(back.rows[0].seed.has_value());
  EXPECT_EQ(back.rows[3].same_plan_as, "arm 1");
  EXPECT_TRUE(back.rows[5].control);
  EXPECT_FALSE(back.rows[4].control);
  EXPECT_TRUE(back.rows[5].differs_from_snip);
  EXPECT_TRUE(back.rows[6].train_curve.empty());
  // every replicate in order, with its own curve; NaN read back as NaN
  ASSERT_EQ(back.rows[2].replicates.size(), 3u);
  EXPECT_TRUE(std::isnan(back.rows[2].replicates[2].val_loss_plan));
  EXPECT_EQ(back.rows[2].replicates[1], c.rows[2].replicates[1]);
  EXPECT_EQ(back.rows[2].replicates[2].train_curve, c.rows[2].replicates[2].train_curve);
  EXPECT_TRUE(back.rows[6].replicates[1].train_curve.empty());
  // compare_rows is the same rows without the header.
  EXPECT_EQ(store.compare_rows(id).size(), 7u);
  EXPECT_EQ(store.compare_rows(id)[3], c.rows[3]);
  // deleting the compare deletes its replicates too
  store.delete_compare(id);
  EXPECT_EQ(raw_query_text(dir.file("w.db"), "SELECT COUNT(*) FROM compare_replicates"), "0");
}

TEST(StoreCompare, AVersion3CompareReadsBackAsOneReplicatePerArm) {
  TempDir dir;
  const std::string path = dir.file("v3.db");
  raw_exec(path, "PRAGMA journal_mode = WAL;");
  for (int v = 0; v < 3; ++v) raw_exec(path, store_detail::schema_steps().at(size_t(v)));
  raw_exec(path,
           "INSERT INTO compares (id, checkpoint, start_step, budget, recipe, steps, cooldown_steps, eval_batches, "
           "last_window, control_rel, noise_floor_train, noise_floor_val, options, created_ms) VALUES (4, '/ck', 6, "
           "0.5, 'snip', 3, 1, 1, 3, 1e-4, 0.01, 0.02, '{}', 1000);"
           "INSERT INTO compare_rows (compare_id, position, method, achieved_fp4_fraction, train_loss_last, "
           "val_loss_plan, val_loss_bf16, gap_train, gap_val_plan, gap_val_bf16, control, differs_from_snip, "
           "train_curve) VALUES (4, 0, 'uniform-bf16', 0, 3.0, 3.1, 3.1, 0, 0, 0, 0, 0, x''), "
           "(4, 1, 'snip λ=0.1', 0.5, 3.2, 3.3, 3.1, 0.2, 0.2, 0, 0, 0, x'');"
           "PRAGMA application_id = 1397639504; PRAGMA user_version = 3;");
  {
    Store store(path);
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    const CompareRecord c = store.compare(4);
    EXPECT_EQ(c.replicates, 1);
    ASSERT_EQ(c.rows.size(), 2u);
    EXPECT_TRUE(c.rows[1].replicates.empty());
    EXPECT_EQ(c.rows[1].train_loss_last, 3.2);
  }
  EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw_query_text(path, "PRAGMA foreign_key_check"), "");
}

TEST(StoreCompare, ListingIsNewestFirstLightAndFiltersByRun) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t run_a = store.create_run(tiny_spec("a"));
  const int64_t run_b = store.create_run(tiny_spec("b"));
  const int64_t c1 = store.insert_compare(sample_compare(run_a, 3));
  const int64_t c2 = store.insert_compare(sample_compare(std::nullopt, 5));
  const int64_t c3 = store.insert_compare(sample_compare(run_b, 2));
  const auto all = store.list_compares();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].id, c3);
  EXPECT_EQ(all[1].id, c2);
  EXPECT_EQ(all[2].id, c1);
  EXPECT_EQ(all[1].row_count, 5);
  EXPECT_FALSE(all[1].run_id.has_value());
  for (const auto& c : all) EXPECT_TRUE(c.rows.empty());
  const auto of_a = store.list_compares(run_a);
  ASSERT_EQ(of_a.size(), 1u);
  EXPECT_EQ(of_a[0].id, c1);
  EXPECT_EQ(of_a[0].row_count, 3);
  // Deleting the run keeps its comparison (the result outlives the run), unlinked.
  store.delete_run(run_a);
  EXPECT_FALSE(store.compare(c1).run_id.has_value());
  EXPECT_EQ(store.compare(c1).rows.size(), 3u);
}

TEST(StoreCompare, BadReferencesAreRefusedAndWriteNothing) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store store(path);
  CompareRecord c = sample_compare(std::nullopt, 2);
  c.run_id = 42;
  EXPECT_THROW(store.insert_compare(c), Error);
  c.run_id.reset();
  c.stats_round_id = 7;
  try {
    store.insert_compare(c);
    FAIL() << "a comparison naming a missing statistics round was stored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("statistics round 7"), std::string::npos) << e.what();
  }
  c.stats_round_id.reset();
  c.rows[1].plan_id = 99;
  try {
    store.insert_compare(c);
    FAIL() << "a comparison naming a missing plan was stored";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("plan 99"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(store.list_compares().empty());
  EXPECT_EQ(raw_query_text(path, "SELECT COUNT(*) FROM compare_rows"), "0");
  EXPECT_THROW(store.compare(1), Error);
  EXPECT_THROW(store.compare_rows(1), Error);
  EXPECT_THROW(store.delete_compare(1), Error);
}

TEST(StoreCompare, DeleteRemovesRowsButKeepsPlans) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store store(path);
  const int64_t plan = store.add_plan(sample_plan(tiny_dims()));
  CompareRecord c = sample_compare(std::nullopt, 4);
  c.rows[0].plan_id = plan;
  const int64_t keep = store.insert_compare(sample_compare(std::nullopt, 2));
  const int64_t id = store.insert_compare(c);
  EXPECT_EQ(raw_query_text(path, "SELECT COUNT(*) FROM compare_rows"), "6");
  store.delete_compare(id);
  EXPECT_EQ(raw_query_text(path, "SELECT COUNT(*) FROM compare_rows"), "2");
  EXPECT_EQ(store.list_compares().size(), 1u);
  EXPECT_EQ(store.compare(keep).rows.size(), 2u);
  EXPECT_EQ(store.plan(plan).plan.method, "snip");
}

TEST(StoreCompare, DamagedCurveBlobIsAnErrorNamingTheRow) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  int64_t id = 0;
  {
    Store store(path);
    id = store.insert_compare(sample_compare(std::nullopt, 2));
  }
  raw_exec(path, "UPDATE compare_rows SET train_curve = x'0102030405' WHERE position = 1;");
  Store store(path);
  try {
    store.compare_rows(id);
    FAIL() << "a 5-byte curve blob was read";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("5 bytes"), std::string::npos) << msg;
  }
}

TEST(StoreCompare, MigratesVersion2ToVersion3KeepingData) {
  TempDir dir;
  const std::string path = dir.file("v2.db");
  // A v2 database as version 2 of the store created it: v1 DDL plus the v2 migration.
  raw_exec(path, "PRAGMA journal_mode = WAL;");
  raw_exec(path, store_detail::schema_steps().at(0));
  raw_exec(path, store_detail::schema_steps().at(1));
  raw_exec(path,
           "INSERT INTO runs (id, name, hidden, intermediate, num_layers, num_heads, num_kv_heads, model_config, "
           "train_config, data_source, recipe, seed, method, status, started_ms, ended_ms, last_step, metric_rows, "
           "owner_pid, owner_host, heartbeat_ms) VALUES (3, 'v2 run', 64, 172, 2, 4, 2, '{}', '{}', 'kjv', 'snip', 1, "
           "'uniform-fp8', 'finished', 1000, 5000, 1, 2, 1, 'elsewhere', 5000);"
           "INSERT INTO metrics (run_id, step, train_loss, lr) VALUES (3, 0, 3.0, 0.001), (3, 1, 2.5, 0.001);"
           "INSERT INTO plans (id, method, budget, achieved_fp4_fraction, recipe, provenance, options, solver_status, "
           "created_ms) VALUES (5, 'snip', 0.75, 0.76, 'snip', '{}', '{}', 'optimal', 2000);"
           "PRAGMA application_id = 1397639504; PRAGMA user_version = 2;");
  ASSERT_EQ(raw_query_text(path, "SELECT name FROM sqlite_schema WHERE name = 'compares'"), "");
  {
    Store store(path);
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    EXPECT_EQ(store.run(3).spec.name, "v2 run");
    EXPECT_EQ(store.metrics(3).size(), 2u);
    EXPECT_EQ(store.plan(5).plan.achieved_fp4_fraction, 0.76);
    EXPECT_TRUE(store.list_compares().empty());
    // The new tables work on the migrated file, with references to the old rows.
    CompareRecord c = sample_compare(3, 2);
    c.rows[0].plan_id = 5;
    const int64_t id = store.insert_compare(c);
    EXPECT_EQ(store.compare(id).rows[0].plan_id, 5);
    EXPECT_EQ(store.list_compares(3).size(), 1u);
  }
  EXPECT_EQ(raw_query_text(path, "PRAGMA user_version"), std::to_string(Store::kSchemaVersion));
  EXPECT_EQ(raw_query_text(path, "SELECT name FROM sqlite_schema WHERE name = 'compares_by_run'"), "compares_by_run");
  EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw_query_text(path, "PRAGMA foreign_key_check"), "");
}

namespace {

// Version 5: a compare stored as it runs. Each training lands at once (in any order), the
// status and its message are kept, a running compare whose process died is marked interrupted
// when a store opens, a live owner refuses a second claim, and a finished one cannot be claimed.
TEST(StoreCompare, ARunningCompareKeepsEachTrainingAndEndsInterruptedWhenItsProcessDies) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store store(path);
  CompareRecord c = sample_compare(std::nullopt, 3);
  for (auto& r : c.rows) r.replicates.clear();
  c.status = RunStatus::running;
  c.checkpoint_fingerprint = "fnv1a64 0123456789abcdef";
  const int64_t id = store.insert_compare(c);
  const CompareRecord running = store.compare(id);
  EXPECT_EQ(running.status, RunStatus::running);
  EXPECT_EQ(running.checkpoint_fingerprint, c.checkpoint_fingerprint);
  EXPECT_THROW(store.claim_compare(id + 1), Error);

  // replicate 2 of row 1 before its replicate 1 (parallel jobs): shown in its place at once, the
  // others as placeholders (every arm of an unfinished compare has its K replicates)
  const CompareReplicateRecord x2 = sample_row(1, 5).replicates[1], x1 = sample_row(1, 5).replicates[0];
  store.add_compare_replicate(id, 1, 2, x2);
  ASSERT_EQ(store.compare_rows(id)[1].replicates.size(), 3u);
  EXPECT_FALSE(store.compare_rows(id)[1].replicates[0].finished);
  EXPECT_EQ(store.compare_rows(id)[1].replicates[1], x2);
  EXPECT_FALSE(store.compare_rows(id)[0].replicates[0].finished);  // an arm not started: K placeholders
  EXPECT_EQ(store.compare_rows(id)[0].replicates.size(), 3u);
  ASSERT_EQ(store.compare_replicates(id).size(), 1u);
  EXPECT_EQ(store.compare_replicates(id)[0].replicate, 2);
  EXPECT_EQ(store.compare_replicates(id)[0].result, x2);
  store.add_compare_replicate(id, 1, 1, x1);
  ASSERT_EQ(store.compare_rows(id)[1].replicates.size(), 3u);
  EXPECT_EQ(store.compare_rows(id)[1].replicates[0], x1);
  EXPECT_EQ(store.compare_rows(id)[1].replicates[1], x2);
  EXPECT_THROW(store.add_compare_replicate(id, 7, 1, x1), Error);  // no such row

  // a dead owner: interrupted on the next open, with the resume command
  raw_exec(path, "UPDATE compares SET owner_pid = 999999999 WHERE id = " + std::to_string(id));
  {
    Store again(path);
    const CompareRecord back = again.compare(id);
    EXPECT_EQ(back.status, RunStatus::interrupted);
    EXPECT_NE(back.status_message.find("snip compare --resume " + std::to_string(id)), std::string::npos)
        << back.status_message;
    again.claim_compare(id);  // this process owns it now
    EXPECT_EQ(again.compare(id).status, RunStatus::running);
  }
  store.claim_compare(id);  // the same process may claim it again
  store.set_compare_status(id, RunStatus::interrupted, "stopped by Ctrl-C");
  EXPECT_EQ(store.list_compares()[0].status, RunStatus::interrupted);
  EXPECT_EQ(store.list_compares()[0].status_message, "stopped by Ctrl-C");
  store.set_compare_status(id, RunStatus::finished);
  try {
    store.claim_compare(id);
    FAIL() << "a finished compare was claimed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is finished"), std::string::npos) << e.what();
  }

  // update_compare replaces the rows and their replicates, keeping id and status
  CompareRecord full = sample_compare(std::nullopt, 3);
  full.id = id;
  store.update_compare(full);
  const CompareRecord updated = store.compare(id);
  EXPECT_EQ(updated.status, RunStatus::finished);
  EXPECT_EQ(updated.rows, full.rows);
  EXPECT_EQ(raw_query_text(path, "PRAGMA foreign_key_check"), "");
}

// A database of version 4 (before compares were stored as they run) opens: its compares are
// finished, and new compares can be stored in it.
TEST(StoreCompare, AVersion4DatabaseOpensWithItsComparesFinished) {
  TempDir dir;
  const std::string path = dir.file("v4.db");
  raw_exec(path, "PRAGMA journal_mode = WAL;");
  for (int v = 0; v < 4; ++v) raw_exec(path, store_detail::schema_steps().at(size_t(v)));
  raw_exec(path,
           "INSERT INTO compares (id, checkpoint, start_step, budget, recipe, steps, cooldown_steps, eval_batches, "
           "last_window, control_rel, noise_floor_train, noise_floor_val, options, created_ms, replicates) VALUES "
           "(2, '/ck', 6, 0.5, 'snip', 3, 1, 1, 3, 1e-4, 0.01, 0.02, '{}', 1000, 2);"
           "INSERT INTO compare_rows (compare_id, position, method, achieved_fp4_fraction, train_loss_last, "
           "val_loss_plan, val_loss_bf16, gap_train, gap_val_plan, gap_val_bf16, control, differs_from_snip, "
           "train_curve) VALUES (2, 0, 'uniform-bf16', 0, 3.0, 3.1, 3.1, 0, 0, 0, 0, 0, x'');"
           "INSERT INTO compare_replicates (compare_id, position, replicate, train_loss_last, val_loss_plan, "
           "val_loss_bf16, train_curve) VALUES (2, 0, 1, 3.0, 3.1, 3.1, x''), (2, 0, 2, 3.0, 3.1, 3.1, x'');"
           "PRAGMA application_id = 1397639504; PRAGMA user_version = 4;");
  {
    Store store(path);
    EXPECT_EQ(store.schema_version(), 5);
    const CompareRecord c = store.compare(2);
    EXPECT_EQ(c.status, RunStatus::finished);
    EXPECT_EQ(c.checkpoint_fingerprint, "");
    ASSERT_EQ(c.rows.size(), 1u);
    EXPECT_EQ(c.rows[0].replicates.size(), 2u);
    EXPECT_EQ(store.list_compares()[0].status, RunStatus::finished);
    EXPECT_THROW(store.claim_compare(2), Error);
    const int64_t id = store.insert_compare(sample_compare(std::nullopt, 2));
    EXPECT_EQ(store.compare(id).rows.size(), 2u);
  }
  EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok");
  EXPECT_EQ(raw_query_text(path, "PRAGMA foreign_key_check"), "");
}

}  // namespace
