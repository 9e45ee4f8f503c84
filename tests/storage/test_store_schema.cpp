// Schema versions: a version-1 database (made with the v1 DDL, as the first release wrote
// it) opens with current code and is migrated forward with its data intact; a database of a
// newer version is refused without being touched.
#include "schema.h"
#include "snip/error.h"
#include "store_test_util.h"

using namespace snip;
using namespace snip_test;

TEST(StoreSchema, MigratesVersion1ToCurrentKeepingData) {  // v1 -> v2 -> ... -> current
  TempDir dir;
  const std::string path = dir.file("v1.db");
  // A v1 database exactly as version 1 of the store created it, with one run and metrics.
  raw_exec(path, "PRAGMA journal_mode = WAL;");
  raw_exec(path, store_detail::schema_steps().at(0));
  raw_exec(path,
           "INSERT INTO runs (id, name, hidden, intermediate, num_layers, num_heads, num_kv_heads, model_config, "
           "train_config, data_source, recipe, seed, method, status, started_ms, ended_ms, last_step, metric_rows, "
           "owner_pid, owner_host) VALUES (7, 'old run', 64, 172, 2, 4, 2, '{}', '{\"lr\":0.001}', 'kjv', 'snip', 1, "
           "'uniform-fp8', 'finished', 1000, 5000, 2, 3, 1, 'elsewhere');"
           "INSERT INTO metrics (run_id, step, train_loss, lr) VALUES (7, 0, 3.0, 0.001), (7, 1, 2.5, 0.001), "
           "(7, 2, 2.25, 0.001);"
           "PRAGMA application_id = 1397639504; PRAGMA user_version = 1;");
  ASSERT_EQ(raw_query_text(path, "PRAGMA user_version"), "1");
  {
    Store store(path);
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    const RunInfo r = store.run(7);
    EXPECT_EQ(r.spec.name, "old run");
    EXPECT_EQ(r.status, RunStatus::finished);
    EXPECT_EQ(r.heartbeat_ms, 5000);  // v2 backfills the heartbeat from the end time
    EXPECT_EQ(r.spec.train_config["lr"], 0.001);
    const auto m = store.metrics(7);
    ASSERT_EQ(m.size(), 3u);
    EXPECT_EQ(m[2].train_loss, 2.25);
    EXPECT_FALSE(m[2].val_loss.has_value());
    // New writes work on the migrated database.
    const int64_t id = store.create_run(tiny_spec());
    store.append_metrics(id, std::vector<MetricRow>{row_for_step(0)});
    EXPECT_EQ(store.run(id).metric_rows, 1);
  }
  EXPECT_EQ(raw_query_text(path, "PRAGMA user_version"), std::to_string(Store::kSchemaVersion));
  EXPECT_EQ(raw_query_text(path, "SELECT name FROM sqlite_schema WHERE name = 'plans_by_run'"), "plans_by_run");
  EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok");
  // Opening again does not migrate again.
  EXPECT_EQ(Store(path).run(7).metric_rows, 3);
}

TEST(StoreSchema, NewDatabaseIsCurrentWalWithForeignKeys) {
  TempDir dir;
  const std::string path = dir.file("new.db");
  {
    Store store(path);
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    EXPECT_EQ(raw_query_text(path, "PRAGMA journal_mode"), "wal");
  }
  EXPECT_EQ(raw_query_text(path, "PRAGMA user_version"), std::to_string(Store::kSchemaVersion));
  EXPECT_EQ(raw_query_text(path, "PRAGMA application_id"), std::to_string(store_detail::kApplicationId));
}

TEST(StoreSchema, FutureVersionIsRefusedAndUntouched) {
  TempDir dir;
  const std::string path = dir.file("future.db");
  {
    Store store(path);
    store.create_run(tiny_spec());
  }
  raw_exec(path, "PRAGMA user_version = 99;");
  const std::string before = file_bytes(path);
  try {
    Store store(path);
    FAIL() << "a database of schema version 99 was opened";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("newer"), std::string::npos) << msg;
    EXPECT_NE(msg.find("99"), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  EXPECT_EQ(file_bytes(path), before);
  EXPECT_EQ(raw_query_text(path, "PRAGMA user_version"), "99");
}
