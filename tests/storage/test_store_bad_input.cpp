// Bad input: a file that is not a database, a truncated database, another program's SQLite
// database, a read-only location, a missing directory, a plan naming a layer the run's model
// lacks. Each gives a clear snip::Error and leaves the original files byte-identical.
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <filesystem>

#include "snip/error.h"
#include "store_test_util.h"

using namespace snip;
using namespace snip_test;

namespace {

// Opens a Store and returns the error text ("" when it opened).
std::string open_error(const std::string& path, StoreOptions options = {}) {
  try {
    Store store(path, options);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A closed database with enough pages that truncating it cuts real data.
void make_database(const std::string& path) {
  Store store(path);
  const int64_t id = store.create_run(tiny_spec());
  std::vector<MetricRow> rows;
  for (int s = 0; s < 3000; ++s) rows.push_back(row_for_step(s));
  store.append_metrics(id, rows);
  store.add_stats_round(sample_round(tiny_dims(), 10), id);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST(StoreBadInput, TextFileIsNotADatabase) {
  TempDir dir;
  const std::string path = dir.file("notes.txt");
  const std::string text = "step,loss\n0,3.1\n1,3.0\n";
  write_bytes(path, text);
  const std::string err = open_error(path);
  EXPECT_TRUE(contains(err, "not a SQLite database")) << err;
  EXPECT_TRUE(contains(err, path)) << err;
  EXPECT_EQ(file_bytes(path), text);
  EXPECT_FALSE(std::filesystem::exists(path + "-wal"));
}

TEST(StoreBadInput, BinaryGarbageWithSqliteMagicIsDamaged) {
  TempDir dir;
  const std::string path = dir.file("garbage.db");
  std::string bytes(4096, '\x5a');
  std::memcpy(bytes.data(), "SQLite format 3", 16);
  write_bytes(path, bytes);
  const std::string err = open_error(path);
  EXPECT_FALSE(err.empty());
  EXPECT_TRUE(contains(err, path)) << err;
  EXPECT_EQ(file_bytes(path), bytes);
}

TEST(StoreBadInput, TruncatedDatabaseIsReported) {
  TempDir dir;
  const std::string good = dir.file("good.db");
  make_database(good);
  const std::string full = file_bytes(good);
  ASSERT_GT(full.size(), 16384u);
  // Cut at a page boundary (looks plausible) and in the middle of a page.
  for (size_t cut : {size_t(8192), full.size() / 2 + 123, size_t(50)}) {
    const std::string path = dir.file("cut" + std::to_string(cut) + ".db");
    const std::string bytes = full.substr(0, cut);
    write_bytes(path, bytes);
    const std::string err = open_error(path);
    EXPECT_TRUE(contains(err, "truncated")) << "cut at " << cut << ": " << err;
    EXPECT_EQ(file_bytes(path), bytes);
  }
}

// A page overwritten in the middle of the file: the header and schema still read, so a plain
// open succeeds and a training would find the damage only when it writes there, at the end.
// With check_integrity (the writers' open) it is refused at once, the file left as it was.
TEST(StoreBadInput, DamagedPagesAreRefusedByTheWritersOpen) {
  TempDir dir;
  const std::string path = dir.file("damaged.db");
  make_database(path);
  std::string bytes = file_bytes(path);
  ASSERT_GT(bytes.size(), 8u * 4096u);
  for (size_t i = 3 * 4096; i < 4 * 4096; ++i) bytes[i] = char(0xDE ^ (i & 0xFF));
  write_bytes(path, bytes);
  const std::string err = open_error(path, {.check_integrity = true});
  EXPECT_TRUE(contains(err, "the database is damaged")) << err;
  EXPECT_TRUE(contains(err, "restore it from a copy")) << err;
  EXPECT_EQ(file_bytes(path), bytes);
  const std::string good = dir.file("good.db");
  make_database(good);
  EXPECT_EQ(open_error(good, {.check_integrity = true}), "");
}

TEST(StoreBadInput, OtherProgramsDatabaseIsRefused) {
  TempDir dir;
  const std::string path = dir.file("other.db");
  raw_exec(path, "CREATE TABLE contacts (name TEXT); INSERT INTO contacts VALUES ('ada');");
  const std::string before = file_bytes(path);
  const std::string err = open_error(path);
  EXPECT_TRUE(contains(err, "another program")) << err;
  EXPECT_EQ(file_bytes(path), before);
}

TEST(StoreBadInput, MissingDirectoryAndDirectoryPath) {
  TempDir dir;
  EXPECT_TRUE(contains(open_error(dir.file("no/such/dir/w.db")), "does not exist"));
  EXPECT_TRUE(contains(open_error(dir.path.string()), "is a directory"));
  EXPECT_TRUE(contains(open_error(dir.file("absent.db"), {.create = false}), "no such database"));
  EXPECT_FALSE(std::filesystem::exists(dir.file("absent.db")));
}

// Root ignores permission bits, so when running as root the check runs in a child process
// that has dropped to the unprivileged user `nobody`.
TEST(StoreBadInput, ReadOnlyLocationIsReportedAndUntouched) {
  TempDir dir;
  const std::string sub = dir.file("ro");
  std::filesystem::create_directory(sub);
  const std::string existing = sub + "/w.db";
  make_database(existing);
  const std::string before = file_bytes(existing);
  ::chmod(dir.path.c_str(), 0755);
  ::chmod(existing.c_str(), 0444);
  ::chmod(sub.c_str(), 0555);

  auto check = [&]() -> std::string {
    std::string out;
    const std::string e1 = open_error(existing);
    const std::string e2 = open_error(sub + "/new.db");
    if (!contains(e1, "read-only")) out += "existing: '" + e1 + "' ";
    if (!contains(e2, "read-only")) out += "new: '" + e2 + "' ";
    return out;
  };
  if (geteuid() != 0) {
    EXPECT_EQ(check(), "");
  } else {
    const passwd* nobody = getpwnam("nobody");
    if (!nobody) GTEST_SKIP() << "no user 'nobody' to drop root privileges to";
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      std::string msg;
      if (setgid(nobody->pw_gid) != 0 || setuid(nobody->pw_uid) != 0)
        msg = "could not drop privileges";
      else
        msg = check();
      (void)!write(fds[1], msg.data(), msg.size());
      _exit(0);
    }
    close(fds[1]);
    std::string msg;
    char buf[512];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) msg.append(buf, size_t(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_EQ(msg, "");
  }
  EXPECT_EQ(file_bytes(existing), before);
  EXPECT_FALSE(std::filesystem::exists(sub + "/new.db"));
  EXPECT_FALSE(std::filesystem::exists(existing + "-wal"));
}

TEST(StoreBadInput, PlanNamingMissingLayerIsRejectedForTheRun) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store store(path);
  const int64_t run_id = store.create_run(tiny_spec());  // 2 blocks
  Plan plan = sample_plan(tiny_dims(4));                 // made for 4 blocks
  const int64_t pid = store.add_plan(plan);
  try {
    store.resolve_plan_for_run(pid, run_id);
    FAIL() << "a plan for 4 blocks resolved against a 2-block run";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_TRUE(contains(msg, "model.layers.")) << msg;
    EXPECT_TRUE(contains(msg, "2 blocks")) << msg;
    EXPECT_TRUE(contains(msg, "run " + std::to_string(run_id))) << msg;
  }
  // The plan file a user would import stays as it was (read_plan_file never writes).
  const std::string plan_path = dir.file("plan.json");
  write_plan_file(plan_path, plan);
  const std::string before = file_bytes(plan_path);
  EXPECT_EQ(read_plan_file(plan_path), plan);
  EXPECT_EQ(file_bytes(plan_path), before);
}

// A write to a database opened read-only (the GUI's Ctrl+S showed SQLite's raw statement error):
// refused in words before any statement, and nothing is written.
TEST(StoreBadInput, AWriteToADatabaseOpenedReadOnlyIsRefusedInWords) {
  TempDir dir;
  const std::string path = dir / "ro.db";
  make_database(path);
  Store store(path, StoreOptions{.read_only = true});
  ASSERT_TRUE(store.read_only());
  try {
    store.add_plan(sample_plan(tiny_dims()), {});
    FAIL() << "the write was not refused";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_TRUE(contains(what, "open read-only")) << what;
    EXPECT_FALSE(contains(what, "INSERT")) << what;
    EXPECT_FALSE(contains(what, "readonly database")) << what;
  }
  EXPECT_TRUE(store.plans().empty());
}
