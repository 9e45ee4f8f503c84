// Fault injection and recovery (rows in docs/BAD_INPUT.md), always through the real
// `snip train` binary:
//  - KillTraining: SIGKILL at random moments in a bounded loop. After every kill the last
//    checkpoint loads and the database passes PRAGMA integrity_check; resuming until the end
//    gives bit-for-bit the loss curve and weights of an uninterrupted run. The seed of the kill
//    moments is printed (SNIP_KILL_SEED=<n> repeats the choices). A short loop runs by default,
//    a long one is labelled slow.
//  - DiskFull / ReadOnly: a real tmpfs mount (full, or remounted read-only) when mounting is
//    allowed (root with CAP_SYS_ADMIN), else skipped; the same failures injected into the atomic
//    file writer (SNIP_FAULT_WRITE, engine/core/src/atomic_file.cpp) always run. Each asserts a
//    message naming the path and the fix, the previous checkpoint byte-for-byte intact and
//    loadable, and no temp file left behind.
//  - NonFinite: a weight set to +Inf mid-run stops training at that step naming the tensor and
//    layer with the last good checkpoint kept; a diverging CLI run stops with the layer named, the
//    earlier checkpoint loadable and the run marked failed in the database.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "snip/checkpoint.h"
#include "snip/dataset.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/trainer.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "expected \"" << (needle) << "\" in:\n" << (haystack)

// Under /dev/shm when there is one: a SIGKILL leaves the page cache as it is, so a memory file
// system tests the same crash states as a disk, without waiting for fsync on a busy machine.
fs::path scratch_root() {
  std::error_code ec;
  if (fs::is_directory("/dev/shm", ec) && ::access("/dev/shm", W_OK) == 0) return "/dev/shm";
  return fs::temp_directory_path();
}

// The shared TempDir (tests/util/temp_dir.h) under scratch_root(), with paths as fs::path.
struct TempDir : snip_test::TempDir {
  explicit TempDir(const std::string& tag) : snip_test::TempDir("rel-" + tag, scratch_root()) {}
  fs::path operator/(const std::string& s) const { return path / s; }
};

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// The real `snip` binary as a child process: stdout and stderr go to files beside `log_base`.
class Snip {
 public:
  Snip(const std::vector<std::string>& args, const fs::path& log_base, const std::vector<std::string>& env = {})
      : out_(log_base.string() + ".out"), err_(log_base.string() + ".err") {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      ::dup2(o, 1), ::dup2(e, 2);
      for (const auto& kv : env) ::putenv(const_cast<char*>(kv.c_str()));
      std::vector<char*> argv{const_cast<char*>(SNIP_EXE)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(SNIP_EXE, argv.data());
      ::_exit(127);
    }
  }
  ~Snip() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  // Waits; the exit status, or -signal when killed.
  int wait() {
    if (status_) return *status_;
    int st = 0;
    while (::waitpid(pid_, &st, 0) < 0 && errno == EINTR) {
    }
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
    return *status_;
  }
  // true when the process was still running and was killed; false when it had already exited.
  bool kill_after(std::chrono::milliseconds delay) {
    const auto until = std::chrono::steady_clock::now() + delay;
    while (std::chrono::steady_clock::now() < until) {
      int st = 0;
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ::kill(pid_, SIGKILL);
    return wait() == -SIGKILL;
  }
  // Waits until `ready()` holds, then `extra` longer, and kills; false when the process exited first.
  template <class Ready>
  bool kill_when(Ready ready, std::chrono::microseconds extra) {
    for (;;) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_) {
        status_ = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? -WTERMSIG(st) : -1000;
        return false;
      }
      if (ready()) break;
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return kill_after(std::chrono::duration_cast<std::chrono::milliseconds>(extra));
  }
  // Lines printed on stdout so far (with --json: optimizer steps done by this process).
  int64_t out_lines() const {
    const std::string o = out();
    return int64_t(std::count(o.begin(), o.end(), '\n'));
  }
  std::string out() const { return read_bytes(out_); }
  std::string err() const { return read_bytes(err_); }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_, err_;
};

// Runs snip to the end; returns the exit status (stderr in *err).
int run_snip(const std::vector<std::string>& args, const fs::path& log_base, std::string* err = nullptr,
             const std::vector<std::string>& env = {}) {
  Snip p(args, log_base, env);
  const int st = p.wait();
  if (err) *err = p.err();
  return st;
}

// ---- the experiment database, read with SQLite itself (opened as the next store would: a
// read-write open recovers a write-ahead log left by a killed writer) ----
struct Db {
  sqlite3* db = nullptr;
  explicit Db(const fs::path& path) {
    if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK)
      ADD_FAILURE() << "cannot open " << path << ": " << sqlite3_errmsg(db);
    sqlite3_busy_timeout(db, 5000);
  }
  ~Db() { sqlite3_close(db); }
  // Every row of the first column as text (NULL as "NULL").
  std::vector<std::string> column(const std::string& sql) const {
    std::vector<std::string> rows;
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
      ADD_FAILURE() << sql << ": " << sqlite3_errmsg(db);
      return rows;
    }
    while (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      rows.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    sqlite3_finalize(st);
    return rows;
  }
  // step -> training loss (bit-exact) of the last run that has a row for step n.
  std::map<int64_t, double> losses_to(int64_t n) const {
    std::map<int64_t, double> out;
    const std::string sql =
        "SELECT step, train_loss FROM metrics WHERE run_id = (SELECT MAX(run_id) FROM metrics "
        "WHERE step = " +
        std::to_string(n) + ") ORDER BY step";
    sqlite3_stmt* st = nullptr;
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) return out;
    while (sqlite3_step(st) == SQLITE_ROW) out[sqlite3_column_int64(st, 0)] = sqlite3_column_double(st, 1);
    sqlite3_finalize(st);
    return out;
  }
};

std::string integrity(const fs::path& db) {
  const auto rows = Db(db).column("PRAGMA integrity_check");
  return rows.empty() ? "(no answer)" : rows[0];
}

// The run settings shared by every test: the tiny preset, small batches, no evaluation.
std::vector<std::string> train_args(int64_t steps, const fs::path& out, const std::optional<fs::path>& db,
                                    int64_t save_every = 1, const std::optional<fs::path>& data = {}) {
  std::vector<std::string> a{"train",
                             "--preset",
                             "tiny",
                             "--steps",
                             std::to_string(steps),
                             "--batch-size",
                             "4",
                             "--seq-len",
                             "32",
                             "--eval-every",
                             "0",
                             "--save-every",
                             std::to_string(save_every),
                             "--json",
                             "--out",
                             out.string()};
  if (data) a.insert(a.end(), {"--data", data->string()});
  if (db)
    a.insert(a.end(), {"--db", db->string()});
  else
    a.push_back("--no-db");
  return a;
}
std::vector<std::string> resume_args(const fs::path& ck, const std::optional<fs::path>& db,
                                     std::optional<int64_t> steps = {}) {
  std::vector<std::string> a{"train", "--resume", ck.string(), "--save-every", "1", "--json"};
  if (steps) a.insert(a.end(), {"--steps", std::to_string(*steps)});
  if (db)
    a.insert(a.end(), {"--db", db->string()});
  else
    a.push_back("--no-db");
  return a;
}

// Loads every part of the checkpoint as `snip train --resume` does; returns its step.
int64_t load_checkpoint(const fs::path& ck) {
  auto t = snip::Trainer::resume(ck.string());
  EXPECT_TRUE(t->model().first_nonfinite_param(/*values=*/true).empty()) << ck;
  return t->step_count();
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Bytes of every file of a checkpoint, to prove it was not touched.
std::vector<std::string> snapshot(const fs::path& ck) {
  std::vector<std::string> s;
  for (const auto& name : listing(ck)) s.push_back(name + "\n" + read_bytes(ck / name));
  return s;
}

// ------------------------------------------------------------------------------------------
// SIGKILL at random moments

// Up to `kills` kills at random moments (fewer when little is left to train). A moment is chosen by
// progress, not by the clock, so it does not depend on the machine's load: one kill in five lands
// in start-up (0-300 ms: loading, reading the checkpoint, claiming the run in the database); the
// others after a random number of this process's steps plus a random part of a step (the step's
// checkpoint save follows it at once, so many land mid-save).
// A kill lands after at most `max_steps_per_kill` steps of the process (0: anywhere in the run).
void kill_loop(const std::string& tag, int64_t steps, int kills, int64_t max_steps_per_kill) {
  TempDir dir(tag);
  // 40 kB of the bundled corpus: start-up takes a fraction of a second.
  const fs::path data = dir / "text.txt";
  {
    const std::string corpus = snip::read_text_corpus(snip::bundled_corpus_path());
    ASSERT_GT(corpus.size(), 40000u);
    std::ofstream(data, std::ios::binary) << corpus.substr(0, 40000);
  }
  const auto train = [&](const fs::path& out, const fs::path& db) { return train_args(steps, out, db, 1, data); };
  // The reference: one uninterrupted run.
  const auto t0 = std::chrono::steady_clock::now();
  std::string err;
  ASSERT_EQ(run_snip(train(dir / "ref", dir / "ref.db"), dir / "ref", &err), 0) << err;
  const auto ref_us =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0).count();
  const std::map<int64_t, double> ref_losses = Db(dir / "ref.db").losses_to(steps);
  ASSERT_EQ(ref_losses.size(), size_t(steps));

  uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("SNIP_KILL_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::mt19937_64 rng(seed);
  const int64_t step_us = std::max<int64_t>(1000, ref_us / steps);  // an upper bound of one step + save
  std::cout << "kill seed " << seed << " (SNIP_KILL_SEED=" << seed << " replays the choices); uninterrupted run "
            << ref_us / 1000 << " ms\n";

  const fs::path ck = dir / "ck", db = dir / "run.db";
  int64_t last_step = 0;
  int killed = 0, kills_with_checkpoint = 0;
  for (int i = 0; i < kills; ++i) {
    const bool resume = fs::exists(ck);
    const int64_t done = resume ? load_checkpoint(ck) : 0;
    if (steps - done < 4) break;  // the last steps are left to the final resume
    // The first kill lands after step 1's checkpoint is complete, so at least one kill has one.
    const bool in_startup = i > 0 && std::uniform_int_distribution<int>(0, 4)(rng) == 0;
    const int64_t after_steps =
        in_startup ? 0
                   : std::uniform_int_distribution<int64_t>(
                         i == 0 ? 2 : 1, max_steps_per_kill > 0 ? std::min(steps - done - 2, max_steps_per_kill + 1)
                                                                : steps - done - 2)(rng);
    const int64_t extra_us = in_startup ? std::uniform_int_distribution<int64_t>(0, 300000)(rng)
                                        : std::uniform_int_distribution<int64_t>(0, step_us)(rng);
    Snip p(resume ? resume_args(ck, db) : train(ck, db), dir / ("kill" + std::to_string(i)));
    if (!p.kill_when([&] { return p.out_lines() >= after_steps; }, std::chrono::microseconds(extra_us))) {
      ASSERT_EQ(p.wait(), 0) << p.err();
      if (kills_with_checkpoint > 0) break;  // finished before the kill
      // This process was not scheduled in time (a loaded machine): start the run again.
      std::cout << "run finished before kill " << i << "; starting again\n";
      fs::remove_all(ck);
      for (const char* suffix : {"", "-wal", "-shm"}) fs::remove(db.string() + suffix);
      continue;
    }
    const std::string d = std::to_string(after_steps) + " steps + " + std::to_string(extra_us / 1000) + " ms";
    ++killed;
    SCOPED_TRACE("kill " + std::to_string(i) + " after " + d);
    std::cout << "kill " << i << " after " << d;
    if (fs::exists(db)) {
      EXPECT_EQ(integrity(db), "ok");
    }
    if (!fs::exists(ck)) {  // killed before the first checkpoint: start again
      std::cout << ": no checkpoint yet\n";
      continue;
    }
    int64_t step = -1;
    ++kills_with_checkpoint;
    EXPECT_NO_THROW(step = load_checkpoint(ck)) << "the last checkpoint does not load";
    std::cout << ": checkpoint at step " << step;
    EXPECT_GE(step, last_step) << "a checkpoint went back in time";
    EXPECT_LE(step, steps);
    last_step = step;
    std::cout << "\n";
  }
  // Finish the run.
  if (fs::exists(ck) && load_checkpoint(ck) < steps) {
    ASSERT_EQ(run_snip(resume_args(ck, db), dir / "final", &err), 0) << err;
  } else if (!fs::exists(ck)) {
    ASSERT_EQ(run_snip(train(ck, db), dir / "final", &err), 0) << err;
  }
  std::cout << killed << " kills, " << kills_with_checkpoint
            << " after a checkpoint existed; checkpoint steps seen up to " << last_step << "\n";
  EXPECT_GE(kills_with_checkpoint, 1) << "no kill landed after the first checkpoint";
  EXPECT_EQ(integrity(db), "ok");
  EXPECT_EQ(load_checkpoint(ck), steps);
  // Bit-identical: the final loss (and every recorded step's loss) and the final weights. (A kill
  // between a step's checkpoint save and its database write loses that step's metrics row; the
  // other rows and the checkpoint are intact: see docs/BAD_INPUT.md.)
  const std::map<int64_t, double> losses = Db(db).losses_to(steps);
  ASSERT_TRUE(losses.count(steps)) << "the final step's loss is not in the database";
  EXPECT_EQ(losses.at(steps), ref_losses.at(steps)) << "final loss differs from the uninterrupted run";
  for (const auto& [step, loss] : losses) EXPECT_EQ(loss, ref_losses.at(step)) << "step " << step;
  if (losses.size() < size_t(steps))
    std::cout << steps - int64_t(losses.size()) << " step(s) without a metrics row (killed between save and record)\n";
  EXPECT_TRUE(read_bytes(ck / "model.safetensors") == read_bytes(dir / "ref" / "model.safetensors"))
      << "final weights differ from the uninterrupted run";
  EXPECT_TRUE(read_bytes(ck / "optimizer.safetensors") == read_bytes(dir / "ref" / "optimizer.safetensors"));
}

TEST(KillTraining, RandomSigkillsThenResumeGiveTheUninterruptedLoss) {
  kill_loop("kill", 24, 6, 0);
}

TEST(KillTrainingSlow, ManyRandomSigkillsThenResumeGiveTheUninterruptedLoss) {
  kill_loop("killslow", 60, 25, 3);
}

// ------------------------------------------------------------------------------------------
// Disk full and read-only locations, injected into the atomic file writer

class WriteFault : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    ASSERT_EQ(run_snip(train_args(2, ck(), db()), dir_ / "first", &err), 0) << err;
    before_ = snapshot(ck());
  }
  fs::path ck() const { return dir_ / "ck"; }
  fs::path db() const { return dir_ / "run.db"; }
  // The previous checkpoint is byte-for-byte intact, loads, and nothing else is left beside it.
  void expect_previous_checkpoint_kept() {
    EXPECT_EQ(snapshot(ck()), before_) << "the previous checkpoint was modified";
    EXPECT_EQ(load_checkpoint(ck()), 2);
    for (const auto& name : listing(dir_.path))
      EXPECT_TRUE(name == "ck" || name.rfind("run.db", 0) == 0 || name.find(".out") != std::string::npos ||
                  name.find(".err") != std::string::npos)
          << "left behind: " << name;
    EXPECT_EQ(listing(ck()), (std::vector<std::string>{"config.json", "model.safetensors", "optimizer.safetensors",
                                                       "trainer_state.json"}));
  }
  TempDir dir_{"fault"};
  std::vector<std::string> before_;
};

TEST_F(WriteFault, DiskFullWhileSavingACheckpointKeepsThePreviousOne) {
  std::string err;
  EXPECT_EQ(run_snip(resume_args(ck(), db(), 4), dir_ / "full", &err, {"SNIP_FAULT_WRITE=ENOSPC:model.safetensors"}),
            1);
  EXPECT_CONTAINS(err, "error: cannot save checkpoint " + ck().string() + ": cannot write " + ck().string() + ".tmp-");
  EXPECT_CONTAINS(err, "No space left on device (the disk is full: free some space or write somewhere else");
  EXPECT_CONTAINS(err, "the previous checkpoint in " + ck().string() + " is intact");
  expect_previous_checkpoint_kept();
  EXPECT_EQ(integrity(db()), "ok");
  const auto status = Db(db()).column("SELECT status || ': ' || status_message FROM runs ORDER BY id DESC LIMIT 1");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_CONTAINS(status[0], "failed: cannot save checkpoint");
}

TEST_F(WriteFault, ReadOnlyLocationWhileSavingACheckpointKeepsThePreviousOne) {
  std::string err;
  EXPECT_EQ(run_snip(resume_args(ck(), db(), 4), dir_ / "ro", &err, {"SNIP_FAULT_WRITE=EROFS:trainer_state.json"}), 1);
  EXPECT_CONTAINS(err, "error: cannot save checkpoint " + ck().string());
  EXPECT_CONTAINS(err, "Read-only file system (the location is read-only or not writable: choose a writable directory");
  EXPECT_CONTAINS(err, "the previous checkpoint in " + ck().string() + " is intact");
  expect_previous_checkpoint_kept();
}

TEST_F(WriteFault, DiskFullBeforeTheFirstCheckpointSaysNoneWasWritten) {
  std::string err;
  const fs::path fresh = dir_ / "fresh";
  EXPECT_EQ(run_snip(train_args(2, fresh, std::nullopt), dir_ / "fresh", &err, {"SNIP_FAULT_WRITE=ENOSPC"}), 1);
  EXPECT_CONTAINS(err, "error: cannot save checkpoint " + fresh.string());
  EXPECT_CONTAINS(err, "no checkpoint was written");
  EXPECT_FALSE(fs::exists(fresh));
  expect_previous_checkpoint_kept();  // and no fresh.tmp-* left behind
}

// ------------------------------------------------------------------------------------------
// Disk full and read-only locations on a real tmpfs (root with CAP_SYS_ADMIN only)

class Tmpfs : public ::testing::Test {
 protected:
  // Mounts a tmpfs of `bytes` at dir_/mnt; false when this machine does not allow it.
  bool mount_tmpfs(int64_t bytes) {
    mnt_ = dir_ / "mnt";
    fs::create_directories(mnt_);
    const std::string opts = "size=" + std::to_string(bytes);
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      why_ = std::string("cannot mount a tmpfs here (") + std::strerror(errno) +
             "); WriteFault.* covers the same failures by injection";
      return false;
    }
    mounted_ = true;
    return true;
  }
  bool remount(bool read_only) {
    const unsigned long flags = MS_REMOUNT | (read_only ? MS_RDONLY : 0);
    return ::mount("tmpfs", mnt_.c_str(), "tmpfs", flags, nullptr) == 0;
  }
  // Fills the file system but for `leave` bytes.
  void fill(int64_t leave) {
    {
      std::ofstream f(mnt_ / "filler", std::ios::binary);
      const std::string block(4096, 'x');
      while (f.write(block.data(), std::streamsize(block.size())) && f.flush()) {
      }
    }
    const auto size = fs::file_size(mnt_ / "filler");
    fs::resize_file(mnt_ / "filler", size > uintmax_t(leave) ? size - uintmax_t(leave) : 0);
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
  TempDir dir_{"tmpfs"};
  fs::path mnt_;
  bool mounted_ = false;
  std::string why_;
};

TEST_F(Tmpfs, DiskFullWhileSavingACheckpointKeepsThePreviousOne) {
  // Room for one tiny checkpoint (about 1.5 MB) but not for the second one beside it.
  if (!mount_tmpfs(2400 * 1024)) GTEST_SKIP() << why_;
  const fs::path ck = mnt_ / "ck";
  std::string err;
  EXPECT_EQ(run_snip(train_args(3, ck, dir_ / "run.db"), dir_ / "train", &err), 1);
  EXPECT_CONTAINS(err, "error: cannot save checkpoint " + ck.string() + ": cannot write " + ck.string() + ".tmp-");
  EXPECT_CONTAINS(err, "No space left on device (the disk is full: free some space or write somewhere else");
  EXPECT_CONTAINS(err, "the previous checkpoint in " + ck.string() + " is intact");
  EXPECT_EQ(load_checkpoint(ck), 1);
  EXPECT_EQ(listing(mnt_), std::vector<std::string>{"ck"}) << "a temp directory was left on the full disk";
  EXPECT_EQ(integrity(dir_ / "run.db"), "ok");
}

TEST_F(Tmpfs, DiskFullWhileWritingTheDatabaseKeepsItConsistent) {
  if (!mount_tmpfs(1024 * 1024)) GTEST_SKIP() << why_;
  const fs::path db = mnt_ / "run.db";
  std::string err;
  ASSERT_EQ(run_snip(train_args(2, dir_ / "ck1", db), dir_ / "first", &err), 0) << err;
  // Room for the write-ahead log to open and take some steps' metrics and checkpoint rows (one
  // transaction per step with --save-every 1), then the disk is full.
  fill(96 * 1024);
  EXPECT_EQ(run_snip(train_args(200, dir_ / "ck2", db, 1), dir_ / "full", &err), 1);
  EXPECT_CONTAINS(err, "error: " + db.string() + ": ");
  // Mid-run: "... failed: database or disk is full — the disk is full; the last transaction was
  // rolled back, free space and retry"; when already full at open: "... disk I/O error — an I/O
  // error occurred (disk removed or full?)".
  EXPECT_CONTAINS(err, "full");
  if (fs::exists(dir_ / "ck2")) {
    EXPECT_LT(load_checkpoint(dir_ / "ck2"), 200);  // saved before the disk filled
  }
  fs::remove(mnt_ / "filler");
  EXPECT_EQ(integrity(db), "ok");
  Db d(db);
  EXPECT_EQ(d.column("SELECT status FROM runs WHERE id = 1"), std::vector<std::string>{"finished"});
  EXPECT_EQ(d.column("SELECT COUNT(*) FROM metrics WHERE run_id = 1"), std::vector<std::string>{"2"});
  // With space again the same database takes the next run.
  EXPECT_EQ(run_snip(train_args(2, dir_ / "ck3", db), dir_ / "again", &err), 0) << err;
  EXPECT_EQ(integrity(db), "ok");
}

// A checkpoint saved but never recorded in the database (a kill or a full disk between the two):
// the checkpoint names its run, and the resume goes on as that run instead of starting another.
TEST(Resume, ACheckpointTheDatabaseNeverRecordedResumesAsItsOwnRun) {
  TempDir dir("unrecorded");
  std::string err;
  ASSERT_EQ(run_snip(train_args(4, dir / "ck", dir / "run.db", 2), dir / "first", &err), 0) << err;
  {
    Db d(dir / "run.db");
    ASSERT_EQ(sqlite3_exec(d.db, "DELETE FROM checkpoints", nullptr, nullptr, nullptr), SQLITE_OK);
  }
  ASSERT_EQ(run_snip(resume_args(dir / "ck", dir / "run.db", 6), dir / "resume", &err), 0) << err;
  Db d(dir / "run.db");
  EXPECT_EQ(d.column("SELECT COUNT(*) FROM runs"), std::vector<std::string>{"1"}) << "the resume made another run";
  EXPECT_EQ(d.column("SELECT COUNT(DISTINCT step) || ' ' || MAX(step) FROM metrics WHERE run_id = 1"),
            std::vector<std::string>{"6 6"});
}

// A database on a disk that is already full when `snip train` opens it: SQLite reports only
// The database fills up mid-run while the checkpoint lives on another disk (issue 42's example:
// the checkpoint reached step 1027 while the database stopped at 908, and the resume made an
// unlinked run). Whatever fails first, the resume is the same run with every row up to its end.
TEST_F(Tmpfs, DatabaseFullMidRunTheResumeIsTheSameRunWithEveryRow) {
  if (!mount_tmpfs(16 * 1024 * 1024)) GTEST_SKIP() << why_;  // room for SQLite's 4 MB write-ahead log
  const fs::path db = mnt_ / "run.db", ck = dir_ / "ck";
  std::string err;
  ASSERT_EQ(run_snip(train_args(2, dir_ / "ck1", db), dir_ / "first", &err), 0) << err;
  fill(160 * 1024);
  // A checkpoint every step, each after the rows before it are written (however the rows are
  // batched, by count or by time): the disk fills at one of those writes, with a checkpoint
  // of the step before it on the other disk, whatever the machine's speed.
  const int64_t steps = 1200;
  ASSERT_EQ(run_snip(train_args(steps, ck, db, 1), dir_ / "full", &err), 1) << "the disk never filled";
  EXPECT_CONTAINS(err, "full");
  fs::remove(mnt_ / "filler");
  const int64_t at = load_checkpoint(ck);
  {
    Db d(db);
    const auto last = d.column("SELECT COALESCE(MAX(step), 0) FROM metrics WHERE run_id = 2");
    ASSERT_EQ(last.size(), 1u);
    EXPECT_LE(at, std::stoll(last[0])) << "the checkpoint is ahead of the rows the database holds";
  }
  ASSERT_EQ(run_snip(resume_args(ck, db), dir_ / "resume", &err), 0) << err;
  Db d(db);
  EXPECT_EQ(d.column("SELECT COUNT(*) FROM runs"), std::vector<std::string>{"2"}) << "the resume made another run";
  EXPECT_EQ(d.column("SELECT status FROM runs WHERE id = 2"), std::vector<std::string>{"finished"});
  EXPECT_EQ(
      d.column("SELECT COUNT(DISTINCT step) || ' ' || MIN(step) || ' ' || MAX(step) FROM metrics WHERE run_id = 2"),
      std::vector<std::string>{std::to_string(steps) + " 1 " + std::to_string(steps)})
      << "rows are missing between the database's last row and the checkpoint";
  EXPECT_EQ(integrity(db), "ok");
}

// "disk I/O error"; the message must say the disk is full, and the file must stay usable.
TEST_F(Tmpfs, DiskAlreadyFullWhenTheDatabaseOpensSaysSo) {
  if (!mount_tmpfs(1024 * 1024)) GTEST_SKIP() << why_;
  const fs::path db = mnt_ / "run.db";
  std::string err;
  ASSERT_EQ(run_snip(train_args(2, dir_ / "ck1", db), dir_ / "first", &err), 0) << err;
  fill(0);
  EXPECT_EQ(run_snip(train_args(2, dir_ / "ck2", db), dir_ / "full", &err), 1);
  EXPECT_CONTAINS(err, "error: " + db.string() + ": ");
  EXPECT_CONTAINS(err, "the disk is full");
  EXPECT_EQ(err.find("disk removed"), std::string::npos) << err;
  fs::remove(mnt_ / "filler");
  EXPECT_EQ(integrity(db), "ok");
  EXPECT_EQ(run_snip(train_args(2, dir_ / "ck3", db), dir_ / "again", &err), 0) << err;
}

TEST_F(Tmpfs, ReadOnlyMountWhileSavingACheckpointOrOpeningTheDatabase) {
  if (!mount_tmpfs(8 * 1024 * 1024)) GTEST_SKIP() << why_;
  const fs::path ck = mnt_ / "ck", db = mnt_ / "run.db";
  std::string err;
  ASSERT_EQ(run_snip(train_args(2, ck, db), dir_ / "first", &err), 0) << err;
  const auto before = snapshot(ck);
  ASSERT_TRUE(remount(/*read_only=*/true)) << std::strerror(errno);
  // The checkpoint directory is read-only (root ignores chmod, not a read-only mount).
  EXPECT_EQ(run_snip(resume_args(ck, std::nullopt, 4), dir_ / "ro-ck", &err), 1);
  EXPECT_CONTAINS(err, "error: cannot save checkpoint " + ck.string() + ": cannot create " + ck.string() + ".tmp-");
  EXPECT_CONTAINS(err, "Read-only file system");
  EXPECT_CONTAINS(err, "choose a writable location for the checkpoint");
  EXPECT_CONTAINS(err, "the previous checkpoint in " + ck.string() + " is intact");
  // The database cannot be written: refused before training starts.
  EXPECT_EQ(run_snip(resume_args(ck, db, 4), dir_ / "ro-db", &err), 1);
  EXPECT_CONTAINS(err, "error: " + db.string() + ": the database file is read-only (Read-only file system)");
  EXPECT_CONTAINS(err, "make it writable or copy it elsewhere");
  // The commands that only read still work on it (opened read-only), and write nothing.
  EXPECT_EQ(run_snip({"runs", "--db", db.string()}, dir_ / "ro-runs", &err), 0) << err;
  EXPECT_EQ(run_snip({"show", "--run", "1", "--db", db.string()}, dir_ / "ro-show", &err), 0) << err;
  EXPECT_EQ(run_snip({"export", "--run", "1", "--db", db.string()}, dir_ / "ro-export", &err), 0) << err;
  EXPECT_EQ(snapshot(ck), before);
  EXPECT_EQ(load_checkpoint(ck), 2);
  ASSERT_TRUE(remount(/*read_only=*/false));
  EXPECT_EQ(integrity(db), "ok");
  EXPECT_EQ(listing(mnt_), (std::vector<std::string>{"ck", "run.db"}));
}

// ------------------------------------------------------------------------------------------
// Non-finite values mid-run (the NaN-weight case is test_train: Trainer.NanLossStopsAndKeeps...)

TEST(NonFinite, InfiniteWeightMidRunStopsAtThatStepNamingTensorAndLayer) {
  TempDir dir("inf");
  snip::TrainConfig cfg;  // FP32 GEMMs: the loss check (not the quantizer's operand check) sees it
  cfg.model = snip::preset_config("tiny");
  cfg.batch_size = 4, cfg.seq_len = 32, cfg.eval_every = 0;
  cfg.steps = 8, cfg.schedule.total = 8, cfg.schedule.warmup = 0;
  cfg.precision = "fp32";
  const std::string tensor = "model.layers.1.mlp.down_proj.weight";
  // Between two checkpoints (saved every 2 steps): step 4 is the first to see the weight.
  {
    const fs::path ck = dir / "between";
    snip::Trainer t(cfg);
    const snip::ParamTensor* down = t.model().find_param(tensor);
    ASSERT_NE(down, nullptr);
    t.set_callback([&](const snip::StepMetrics& m) {
      if (m.step == 3) t.model().param_data()[down->offset + 7] = INFINITY;
      return true;
    });
    try {
      t.run(/*save_every=*/2, ck.string());
      ADD_FAILURE() << "training went on with an infinite weight";
    } catch (const snip::Error& e) {
      const std::string msg = e.what();
      EXPECT_CONTAINS(msg, "step 4: the training loss is");
      EXPECT_CONTAINS(msg, "non-finite weight: " + tensor);
      EXPECT_CONTAINS(msg, "Training stopped before the update; the last saved checkpoint, if any, is kept");
    }
    EXPECT_EQ(t.step_count(), 3) << "the failing step must not count";
    EXPECT_EQ(load_checkpoint(ck), 2);  // the last good checkpoint, finite (checked in load_checkpoint)
  }
  // Right before a checkpoint is due (step 4): the save refuses to replace the good one.
  {
    const fs::path ck = dir / "at-save";
    snip::Trainer t(cfg);
    const snip::ParamTensor* down = t.model().find_param(tensor);
    std::vector<std::string> before;
    t.set_callback([&](const snip::StepMetrics& m) {
      if (m.step == 3) before = snapshot(ck);  // the checkpoint of step 2
      if (m.step == 4) t.model().param_data()[down->offset + 7] = INFINITY;
      return true;
    });
    try {
      t.run(/*save_every=*/2, ck.string());
      ADD_FAILURE() << "a checkpoint with an infinite weight was saved";
    } catch (const snip::Error& e) {
      const std::string msg = e.what();
      EXPECT_CONTAINS(msg, "cannot save checkpoint " + ck.string() + ": weight " + tensor + " is not finite");
      EXPECT_CONTAINS(msg, "the previous checkpoint in " + ck.string() + " is intact");
    }
    EXPECT_EQ(snapshot(ck), before);
    EXPECT_EQ(load_checkpoint(ck), 2);
  }
}

TEST(NonFinite, DivergingCliRunStopsNamingTheLayerAndKeepsTheLastCheckpoint) {
  TempDir dir("diverge");
  auto args = train_args(20, dir / "ck", dir / "run.db");
  args.insert(args.end(), {"--lr", "1e12", "--clip", "0", "--warmup", "0", "--schedule", "constant"});
  std::string err;
  EXPECT_EQ(run_snip(args, dir / "train", &err), 1);
  EXPECT_CONTAINS(err, "error: step ");
  EXPECT_CONTAINS(err, "model.layers.");
  EXPECT_CONTAINS(err, "(training stopped before the update; the last saved checkpoint, if any, is kept)");
  // The failing step is the one after the last checkpoint (saved every step).
  const auto at = err.find("error: step ");
  ASSERT_NE(at, std::string::npos);
  const int64_t failed_step = std::stoll(err.substr(at + 12));
  ASSERT_GE(failed_step, 2) << "diverged at once; no checkpoint to keep";
  EXPECT_EQ(load_checkpoint(dir / "ck"), failed_step - 1);
  EXPECT_EQ(integrity(dir / "run.db"), "ok");
  const auto status = Db(dir / "run.db").column("SELECT status || ': ' || status_message FROM runs");
  ASSERT_EQ(status.size(), 1u);
  EXPECT_CONTAINS(status[0], "failed: step " + std::to_string(failed_step));
}

}  // namespace
