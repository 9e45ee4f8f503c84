// Crash safety and concurrency with real processes: a writer killed with SIGKILL at random
// moments leaves a consistent database whose committed steps are all readable and whose run
// shows as interrupted; a reader process never sees a half-written batch of steps.
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <thread>

#include "snip/atomic_file.h"
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

namespace {

// The POSIX record locks this process holds on `path`'s inode (lines of /proc/locks).
int locks_held_on(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  std::ifstream in("/proc/locks");
  const std::string pid = std::to_string(::getpid()), ino = ":" + std::to_string(st.st_ino);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string num, kind, advisory, mode, owner, dev_ino;
    f >> num >> kind >> advisory >> mode >> owner >> dev_ino;
    const bool same_inode =
        dev_ino.size() > ino.size() && dev_ino.compare(dev_ino.size() - ino.size(), ino.size(), ino) == 0;
    n += kind == "POSIX" && owner == pid && same_inode;
  }
  return n;
}

}  // namespace

// The other process of StoreLocks.AnotherProcessClosingItsConnectionLeavesOurWalInPlace: started
// with SNIP_TEST_OPEN_AND_CLOSE=<db>, this binary opens that database, reads it and closes it
// (a closing connection checkpoints and deletes the WAL only if it can take the exclusive
// lock), then exits before any test runs.
[[maybe_unused]] const bool kOpenAndCloseChild = [] {
  const char* path = std::getenv("SNIP_TEST_OPEN_AND_CLOSE");
  if (path == nullptr) return false;
  int code = 0;
  try {
    Store other(path);
    code = other.runs().size() == 1 ? 0 : 4;
  } catch (...) {
    code = 2;
  }
  _exit(code);
}();

// POSIX locks belong to the process: closing any descriptor of the database file drops every
// lock our connections hold on it. Opening the same database a second time (the GUI's worker
// and views do), or passing it to a command as a plan or an --out file, must not open it raw.
TEST(StoreLocks, OpeningTheDatabaseAgainKeepsTheFirstConnectionsLocks) {
  TempDir dir;
  const std::string path = dir.file("locks.db");
  Store first(path);
  first.create_run(tiny_spec("first"));
  ASSERT_GE(locks_held_on(path), 1) << "a WAL connection holds a shared lock on the database file";
  {
    Store second(path);
    EXPECT_GE(locks_held_on(path), 1) << "opening the database again dropped the first connection's lock";
  }
  try {
    (void)read_file(path);
    ADD_FAILURE() << "reading the open database as a file was not refused";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the experiment database"), std::string::npos) << e.what();
  }
  for (const std::string& target : {path, path + "-wal", path + "-shm"}) {
    try {
      write_file_atomic(target, std::string("step,loss\n"));
      ADD_FAILURE() << "writing over " << target << " was not refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("give another file path"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(locks_held_on(path), 1) << "a refused read or write dropped the connection's lock";
  EXPECT_EQ(first.runs().size(), 1u);
}

// What the lost lock costs: a process that closes its connection while it can take the
// exclusive lock believes it is the last one, checkpoints over our readers and deletes the
// WAL under us (seen as "database disk image is malformed" or a half-visible transaction in
// StoreConcurrency.ReaderProcessNeverSeesHalfWrittenSteps, about once in 50 runs).
TEST(StoreLocks, AnotherProcessClosingItsConnectionLeavesOurWalInPlace) {
  TempDir dir;
  const std::string path = dir.file("wal.db");
  Store first(path);
  first.create_run(tiny_spec("first"));
  Store second(path);  // the re-open that used to drop the first connection's lock
  ASSERT_TRUE(std::filesystem::exists(path + "-wal"));
  // A fresh process (exec, not only fork: a forked child inherits SQLite's in-memory lock
  // bookkeeping and would never think itself the last connection).
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("SNIP_TEST_OPEN_AND_CLOSE", path.c_str(), 1);
    ::execl("/proc/self/exe", "test_storage", nullptr);  // see kOpenAndCloseChild
    _exit(3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_TRUE(std::filesystem::exists(path + "-wal")) << "another process deleted the WAL we still use";
  EXPECT_EQ(second.runs().size(), 1u);
}

namespace {

// Runs `body` in a child process as user `uid` (the test runs as root to have a second user);
// returns its exit status.
int as_user(uid_t uid, const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgid(uid) != 0 || ::setuid(uid) != 0) ::_exit(90);
    int rc = 91;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: %s\n", e.what());
      rc = 92;
    }
    ::_exit(rc);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

// A database in a shared folder, read by another user: the reader (who cannot write the file)
// leaves no -wal or -shm of its own beside it, so its owner can go on writing; and -wal/-shm
// files the owner cannot write are named as the cause, not the folder.
TEST(StoreUsers, AnotherUsersReaderLeavesNothingAndItsFilesAreNamed) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to act as a second user";
  constexpr uid_t kOther = 65534;  // nobody
  TempDir dir("shared");
  ASSERT_EQ(::chmod(dir.path.c_str(), 0777), 0);
  const std::string db = dir / "owner.db";
  {
    Store s(db);
    s.create_run(tiny_spec("the owner's run"));
  }
  ASSERT_EQ(::chmod(db.c_str(), 0644), 0);
  ASSERT_FALSE(std::filesystem::exists(db + "-wal"));
  // Another user lists the runs (read-only: it cannot write the file).
  const int listed = as_user(kOther, [&] {
    Store s(db, StoreOptions{.read_only_if_unwritable = true});
    return s.read_only() && s.runs().size() == 1 ? 0 : 1;
  });
  EXPECT_EQ(listed, 0);
  EXPECT_FALSE(std::filesystem::exists(db + "-wal")) << "the reader left a -wal its owner may not write";
  EXPECT_FALSE(std::filesystem::exists(db + "-shm")) << "the reader left a -shm its owner may not write";

  // The other way round: the other user owns a database, and -wal/-shm of another owner (here
  // root's, mode 0600) lie beside it; its write names them and how to go on.
  const std::string theirs = dir / "theirs.db";
  ASSERT_EQ(as_user(kOther,
                    [&] {
                      Store s(theirs);
                      return s.runs().empty() ? 0 : 1;
                    }),
            0);
  {
    std::ofstream(theirs + "-shm").put('\0');
    std::ofstream(theirs + "-wal");
  }
  ASSERT_EQ(::chmod((theirs + "-shm").c_str(), 0600), 0);
  ASSERT_EQ(::chmod((theirs + "-wal").c_str(), 0600), 0);
  const int wrote = as_user(kOther, [&] {
    try {
      Store s(theirs);
      return 3;  // opened for writing: the files were not noticed
    } catch (const Error& e) {
      const std::string m = e.what();
      const bool named = m.find(theirs + "-wal cannot be written by you") != std::string::npos ||
                         m.find(theirs + "-shm cannot be written by you") != std::string::npos;
      const bool advice =
          m.find("user id 0") != std::string::npos && m.find("nothing was changed") != std::string::npos;
      if (!named || !advice) std::fprintf(stderr, "message: %s\n", m.c_str());
      return named && advice ? 0 : 4;
    }
  });
  EXPECT_EQ(wrote, 0);
}
