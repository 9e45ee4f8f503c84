// Crash safety and concurrency with real processes: a writer killed with SIGKILL at random
// moments leaves a consistent database whose committed steps are all readable and whose run
// shows as interrupted; a reader process never sees a half-written batch of steps.
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include "snip/error.h"
#include "snip/run_recorder.h"
#include "store_test_util.h"

using namespace snip;
using namespace snip_test;

namespace {

constexpr int kBatch = 7;  // rows per transaction in the writer: a batch is all there or absent

// The writer child: creates a run, reports its id through the pipe, then records steps in
// batches of kBatch rows forever (until killed) or for max_steps steps; after its first batch
// is committed it writes one more byte to the pipe.
[[noreturn]] void writer_child(const std::string& path, int report_fd, int64_t max_steps) {
  ::signal(SIGPIPE, SIG_IGN);  // a parent that stopped listening after the run id must not kill the writer
  try {
    Store store(path);
    const int64_t id = store.create_run(tiny_spec("crash"));
    (void)!write(report_fd, &id, sizeof id);
    RunRecorder rec(store, id, {.flush_rows = kBatch, .flush_ms = 1000000});
    for (int64_t s = 0; s < max_steps; ++s) {
      rec.record(row_for_step(s));
      if (s == kBatch - 1) (void)!write(report_fd, "c", 1);  // the first batch is committed
      // Checkpoint right after a batch flush (49 = 7·kBatch), so batches stay whole.
      if (s % 49 == 48) rec.add_checkpoint(s, "/ckpt/" + std::to_string(s));
    }
    rec.finish();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "writer: %s\n", e.what());
    _exit(2);
  }
  _exit(0);
}

// Every committed step is whole: rows 0..n-1 exist, n is a multiple of the batch, every row
// equals row_for_step(step) and the run's bookkeeping (same transaction) agrees.
void expect_consistent(Store& store, int64_t id, const std::string& where) {
  const RunInfo r = store.run(id);
  const auto rows = store.metrics(id);
  ASSERT_EQ(int64_t(rows.size()) % kBatch, 0) << where << ": a batch is half present";
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].step, int64_t(i)) << where;
    ASSERT_EQ(rows[i], row_for_step(int64_t(i))) << where << " step " << i;
  }
  EXPECT_EQ(r.metric_rows, int64_t(rows.size())) << where;
  EXPECT_EQ(r.last_step, int64_t(rows.size()) - 1) << where;
}

}  // namespace

TEST(StoreCrash, SigkillAtRandomPointsLeavesConsistentDatabase) {
  TempDir dir;
  const std::string path = dir.file("crash.db");
  { Store init(path); }  // created once; every child writes into the same file
  std::mt19937 rng(20260201);
  std::uniform_int_distribution<int> delay_us(0, 60000);
  std::vector<int64_t> runs;
  int with_rows = 0;
  for (int round = 0; round < 12; ++round) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      writer_child(path, fds[1], int64_t(1) << 40);
    }
    close(fds[1]);
    // Even rounds kill at a random moment from the start (maybe before the run exists); odd
    // rounds first wait, through the pipe, until the writer has committed a batch, so some
    // rounds always check committed rows however slow the machine (or a sanitizer) is.
    const bool after_commit = round % 2 == 1;
    int64_t id = 0;
    bool got_id = false;
    if (after_commit) {
      got_id = read(fds[0], &id, sizeof id) == ssize_t(sizeof id);
      char committed = 0;
      ASSERT_EQ(read(fds[0], &committed, 1), 1) << "round " << round << ": the writer died before its first batch";
    }
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "round " << round << ": the writer exited on its own";
    if (!after_commit) got_id = read(fds[0], &id, sizeof id) == ssize_t(sizeof id);
    close(fds[0]);

    EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok") << "round " << round;
    Store store(path);  // opening marks runs of dead processes interrupted
    if (got_id) {
      runs.push_back(id);
      const RunInfo r = store.run(id);
      EXPECT_EQ(r.status, RunStatus::interrupted) << "round " << round;
      expect_consistent(store, id, "round " + std::to_string(round));
      with_rows += r.metric_rows > 0;
    }
    EXPECT_EQ(raw_query_text(path, "PRAGMA foreign_key_check"), "") << "round " << round;
  }
  // Earlier runs are unaffected by later crashes.
  Store store(path);
  for (int64_t id : runs) expect_consistent(store, id, "final run " + std::to_string(id));
  EXPECT_GE(with_rows, 6) << "the rounds killed after a commit must have rows";
}

TEST(StoreConcurrency, ReaderProcessNeverSeesHalfWrittenSteps) {
  TempDir dir;
  const std::string path = dir.file("shared.db");
  { Store init(path); }
  constexpr int64_t kSteps = 7000;
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    writer_child(path, fds[1], kSteps);
  }
  close(fds[1]);
  int64_t id = 0;
  ASSERT_EQ(read(fds[0], &id, sizeof id), ssize_t(sizeof id));
  close(fds[0]);

  Store reader(path);
  int64_t last_seen = 0;
  int reads = 0, distinct = 0;
  for (;;) {
    // Re-open now and then, as a GUI does on "refresh": opening must succeed mid-write
    // (including during the writer's WAL checkpoints) and must not disturb the writer.
    if (reads % 16 == 15) reader = Store(path);
    const RunInfo before = reader.run(id);
    const auto rows = reader.metrics(id);
    const auto curve = reader.curve(id, Metric::train_loss, 100);
    ++reads;
    ASSERT_EQ(int64_t(rows.size()) % kBatch, 0) << "a reader saw a half-written batch";
    for (size_t i = 0; i < rows.size(); i += 97) ASSERT_EQ(rows[i], row_for_step(int64_t(i)));
    ASSERT_LE(before.metric_rows, int64_t(rows.size())) << "rows disappeared between two reads";
    ASSERT_GE(int64_t(rows.size()), last_seen);
    ASSERT_LE(curve.size(), 100u);
    distinct += int64_t(rows.size()) != last_seen;
    last_seen = int64_t(rows.size());
    if (before.status == RunStatus::finished) break;
    ASSERT_LT(reads, 200000) << "the writer never finished";
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  const auto rows = reader.metrics(id);
  ASSERT_EQ(int64_t(rows.size()), kSteps);
  expect_consistent(reader, id, "after the writer finished");
  EXPECT_GT(distinct, 1) << "the reader never overlapped the writer";
}

// Regression: a writer killed in the middle of a WAL checkpoint leaves the main file shorter
// than the page count its (already checkpointed) header states, with the missing pages still
// in the WAL. That database is fine (SQLite replays the WAL) and must not be called truncated.
TEST(StoreCrash, KilledMidCheckpointIsNotMistakenForTruncation) {
  TempDir dir;
  const std::string path = dir.file("ckpt.db");
  int64_t id = 0;
  {
    Store store(path);
    id = store.create_run(tiny_spec());
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // Commit 2000 rows into the WAL only (no checkpoint), then die without closing.
    sqlite3* db = nullptr;
    sqlite3_open(path.c_str(), &db);
    sqlite3_exec(db, "PRAGMA wal_autocheckpoint = 0; BEGIN;", nullptr, nullptr, nullptr);
    for (int s = 0; s < 2000; ++s) {
      const std::string sql = "INSERT INTO metrics (run_id, step, train_loss) VALUES (" + std::to_string(id) + ", " +
                              std::to_string(s) + ", 1.5)";
      sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr);
    }
    sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_GT(std::filesystem::file_size(path + "-wal"), 0u);
  // As if the checkpoint had written page 1 (header page count = the grown size) and died.
  std::string bytes = file_bytes(path);
  const uint32_t page_size = uint32_t(uint8_t(bytes[16])) << 8 | uint8_t(bytes[17]);
  const uint32_t pages = uint32_t(bytes.size() / page_size) + 40;
  for (int i = 0; i < 4; ++i) bytes[28 + i] = char(pages >> (24 - 8 * i));
  write_bytes(path, bytes);
  Store store(path);
  EXPECT_EQ(store.metrics(id).size(), 2000u);
  EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok");
}

// A process killed while it creates a new database (WAL switch, v1 schema, migrations) leaves
// either no schema or the whole current one: the next open always succeeds.
TEST(StoreCrash, KilledWhileCreatingDatabaseReopensCleanly) {
  TempDir dir;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> delay_us(0, 4000);
  for (int round = 0; round < 10; ++round) {
    const std::string path = dir.file("fresh" + std::to_string(round) + ".db");
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      writer_child(path, fds[1], int64_t(1) << 40);
    }
    close(fds[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    if (std::filesystem::exists(path)) {
      EXPECT_EQ(raw_query_text(path, "PRAGMA integrity_check"), "ok") << "round " << round;
    }
    Store store(path);
    EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
    for (const RunInfo& r : store.runs()) {
      EXPECT_EQ(r.status, RunStatus::interrupted) << "round " << round;
      expect_consistent(store, r.id, "round " + std::to_string(round));
    }
  }
}
