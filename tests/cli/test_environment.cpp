// The user's own environment (docs/BAD_INPUT.md "Environment"), with the real `snip`
// binary: existing paths at --out are refused before step 1 (nothing of the user's replaced,
// no run recorded), symbolic links are written through and FIFOs refused, a second run on a
// held checkpoint location is refused, SIGTERM/SIGHUP stop a run like Ctrl-C (checkpoint,
// every metric row, run `interrupted`), and the GUI's checkpoint folders are unique per
// database and run. Child processes are synchronized on their output, never on sleeps.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_command.h"
#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/recorded_training.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using snip_test::TempDir;

using Result = snip_test::CommandResult;

Result run(const std::string& args, const std::string& cwd = "", const std::string& env = "") {
  return snip_test::run_shell((cwd.empty() ? "" : "cd '" + cwd + "' && ") + (env.empty() ? "" : env + " ") +
                              std::string(SNIP_BIN) + " " + args);
}

const std::string kTiny = "--preset tiny --batch-size 2 --seq-len 32 --eval-every 0 --json";

bool has_step_line(const std::string& out) {
  return out.find("\n{\"") != std::string::npos || out.rfind("{\"", 0) == 0;
}

size_t run_count(const std::string& db) {
  if (!fs::exists(db)) return 0;
  snip::Store store(db);
  return store.runs().size();
}

// A `snip` child whose stdout and stderr come through a pipe, read line by line.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int p[2];
    if (::pipe(p) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(p[1], 1);
      ::dup2(p[1], 2);
      ::close(p[0]);
      ::close(p[1]);
      for (int s : {SIGINT, SIGTERM, SIGHUP}) ::signal(s, SIG_DFL);  // not inherited as ignored
      std::vector<char*> argv{const_cast<char*>(SNIP_BIN)};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(SNIP_BIN, argv.data());
      ::_exit(127);
    }
    ::close(p[1]);
    fd_ = p[0];
  }
  ~Child() {
    if (fd_ >= 0) ::close(fd_);
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // The next line (without '\n'); false at end of output. Blocks until the child writes one.
  bool line(std::string* out) {
    for (;;) {
      const auto nl = buf_.find('\n');
      if (nl != std::string::npos) {
        *out = buf_.substr(0, nl);
        all_ += buf_.substr(0, nl + 1);
        buf_.erase(0, nl + 1);
        return true;
      }
      char tmp[4096];
      const ssize_t n = ::read(fd_, tmp, sizeof tmp);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        *out = buf_;
        all_ += buf_;
        buf_.clear();
        return !out->empty();
      }
      buf_.append(tmp, size_t(n));
    }
  }
  int wait() {
    std::string ignored;
    while (line(&ignored)) {
    }
    int st = 0;
    ::waitpid(pid_, &st, 0);
    reaped_ = true;
    return st;
  }
  const std::string& output() const { return all_; }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  bool reaped_ = false;
  std::string buf_, all_;
};

}  // namespace

// `--out` naming a folder of the user's, a regular file or the folder holding the database:
// refused before step 1 (no step printed, no run recorded), everything left byte-identical.
TEST(Environment, TrainRefusesTheUsersFilesAndTheDatabaseFolderBeforeStep1) {
  TempDir d;
  const std::string db = d / "w.db";
  ASSERT_EQ(run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "ck1")).status, 0);
  fs::create_directories(d / "mine");
  snip::write_file_atomic(d / "mine/notes.txt", std::string_view("the user's notes"));
  snip::write_file_atomic(d / "file.txt", std::string_view("the user's file"));
  const std::string db_bytes = snip::read_file(db);
  const std::string ck_state = snip::read_file(d / "ck1/trainer_state.json");

  Result r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "mine"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("notes.txt, which snip did not write"), std::string::npos) << r.out;
  EXPECT_FALSE(has_step_line(r.out)) << r.out;
  r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "file.txt"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("it is a regular file, not a folder"), std::string::npos) << r.out;
  r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + d.path.string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("holds the experiment database"), std::string::npos) << r.out;
  EXPECT_FALSE(has_step_line(r.out)) << r.out;

  EXPECT_EQ(snip::read_file(d / "mine/notes.txt"), "the user's notes");
  EXPECT_EQ(snip::read_file(d / "file.txt"), "the user's file");
  EXPECT_EQ(snip::read_file(d / "ck1/trainer_state.json"), ck_state);
  EXPECT_EQ(run_count(db), 1u);  // the refused runs were never recorded
}

// A fresh run onto another run's checkpoint needs --overwrite; --resume of it does not.
TEST(Environment, AnotherRunsCheckpointNeedsOverwrite) {
  TempDir d;
  const std::string db = d / "w.db";
  ASSERT_EQ(run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "ck")).status, 0);
  const std::string state = snip::read_file(d / "ck/trainer_state.json");
  Result r = run("train " + kTiny + " --steps 3 --seed 9 --db " + db + " --out " + (d / "ck"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("holds the checkpoint of another run (step 2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
  EXPECT_EQ(snip::read_file(d / "ck/trainer_state.json"), state);
  r = run("train --resume " + (d / "ck") + " --steps 3 --json --db " + db);
  EXPECT_EQ(r.status, 0) << r.out;
  r = run("train " + kTiny + " --steps 1 --seed 9 --overwrite --db " + db + " --out " + (d / "ck"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(snip::read_trainer_state(d / "ck")["step"].get<int>(), 1);
}

// Locations that cannot hold a checkpoint fail now, not after the training.
TEST(Environment, UnwritableOutIsRefusedBeforeStep1) {
  TempDir d;
  const std::string db = d / "w.db";
  snip::write_file_atomic(d / "file.txt", std::string_view("x"));
  const std::vector<std::pair<std::string, std::string>> cases = {
      {d / "file.txt/ck", "is a regular file, not a folder"},
      {".", "not a checkpoint folder of its own"},
      {"..", "not a checkpoint folder of its own"},
      {d / std::string(250, 'n'), "too long"},
  };
  for (const auto& [out, expected] : cases) {
    const Result r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + out, d.path.string());
    EXPECT_EQ(r.status, 1) << out << ": " << r.out;
    EXPECT_NE(r.out.find(expected), std::string::npos) << out << ": " << r.out;
    EXPECT_FALSE(has_step_line(r.out)) << out << ": " << r.out;
  }
  // A read-only location (injected: root ignores permissions), and the same command without the fault.
  Result r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "rofolder"), "",
                 "SNIP_FAULT_WRITE=EROFS:rofolder");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("read-only"), std::string::npos) << r.out;
  EXPECT_FALSE(has_step_line(r.out)) << r.out;
  r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "rofolder"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(run_count(db), 1u);  // only the control run was recorded
}

// `--out link` writes through the link; `--out fifo` is refused and the FIFO stays one.
TEST(Environment, FileWritersFollowSymlinksAndRefuseFifos) {
  TempDir d;
  std::vector<float> x(128);
  for (size_t i = 0; i < x.size(); ++i) x[i] = float(i) * 0.01f - 0.5f;
  snip::write_file_atomic(d / "x.bin", x.data(), x.size() * sizeof(float));
  const std::string q = "quantize --format e4m3 --shape 1x128 --in " + (d / "x.bin") + " --out ";
  fs::create_directories(d / "real");
  snip::write_file_atomic(d / "real/y.bin", std::string_view("old"));
  fs::create_symlink("real/y.bin", d / "y-link");
  Result r = run(q + (d / "y-link"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::is_symlink(d / "y-link"));
  EXPECT_EQ(fs::file_size(d / "real/y.bin"), 128 * sizeof(float));
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  r = run(q + (d / "fifo"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("is a named pipe (FIFO)"), std::string::npos) << r.out;
  struct stat st {};
  ASSERT_EQ(::lstat((d / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  r = run(q + (d / "real"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("is a directory"), std::string::npos) << r.out;
}

// `--out` naming the database the command has open (or its WAL, or a link to it) used to
// replace the database with the export. Refused, and the database still lists its run.
TEST(Environment, OutNamingTheOpenDatabaseIsRefused) {
  TempDir d;
  const std::string db = d / "w.db";
  Result r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "ck"));
  ASSERT_EQ(r.status, 0) << r.out;
  fs::create_symlink("w.db", d / "link.csv");
  for (const std::string& out : {db, db + "-wal", d / "link.csv"}) {
    r = run("export --db " + db + " --run 1 --out " + out);
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("it is the experiment database " + db), std::string::npos) << r.out;
  }
  EXPECT_EQ(run_count(db), 1u);
  EXPECT_TRUE(fs::is_symlink(d / "link.csv"));
}

// An output naming one of the command's own inputs (the matrix, the corpus, the statistics, a
// file of the checkpoint or a new file in its folder), or two outputs naming one file, used to
// replace the input without a word. Each is refused before anything is written; every input
// keeps its bytes and the checkpoint still evaluates to the same loss.
TEST(Environment, OutputsNeverReplaceTheCommandsOwnInputs) {
  TempDir d;
  const std::string ck = d / "ck";
  ASSERT_EQ(run("train " + kTiny + " --steps 2 --no-db --out " + ck).status, 0);
  std::string matrix(4096 * sizeof(float), '\0');
  for (size_t i = 0; i < 4096; ++i) {
    const float v = float(int(i % 17) - 8) * 0.25f;
    std::memcpy(&matrix[i * sizeof(float)], &v, sizeof v);
  }
  snip::write_file_atomic(d / "m.f32", matrix);
  snip::write_file_atomic(d / "corpus.txt",
                          "In the beginning God created the heaven and the earth. " + std::string(4000, 'a'));
  const Result stats = run("collect --checkpoint " + ck + " --batch-size 2 --seq-len 32 --out " + (d / "st.json"));
  ASSERT_EQ(stats.status, 0) << stats.out;
  fs::create_symlink("m.f32", d / "link.f32");
  std::vector<std::string> watched = {d / "m.f32", d / "corpus.txt", d / "st.json"};
  for (const auto& e : fs::directory_iterator(ck)) watched.push_back(e.path());
  std::vector<std::string> before;
  for (const std::string& f : watched) before.push_back(snip::read_file(f));
  const std::string loss0 = run("eval --checkpoint " + ck + " --batches 1 --batch-size 2 --seq-len 32 --json").out;

  const std::string q = "quantize --format e2m1 --shape 64x64 --in " + (d / "m.f32");
  struct Case {
    std::string args, says;
  };
  const Case cases[] = {
      {q + " --out " + (d / "m.f32"), "it is the input " + (d / "m.f32") + " (--in)"},
      {q + " --out " + (d / "link.f32"), "it is the input " + (d / "m.f32") + " (--in)"},
      {q + " --out " + (d / "q.f32") + " --codes " + (d / "q.f32"), "--codes and --out name the same file"},
      {"tokenizer encode --input " + (d / "corpus.txt") + " --out " + (d / "corpus.txt"), "(--input)"},
      {"solve --stats " + (d / "st.json") + " --budget 0.5 --out " + (d / "st.json"), "(--stats)"},
      {"eval --checkpoint " + ck + " --batches 1 --batch-size 2 --seq-len 32 --grads-out " + ck + "/model.safetensors",
       "inside the input folder " + ck + " (--checkpoint)"},
      {"eval --checkpoint " + ck + " --batches 1 --batch-size 2 --seq-len 32 --grads-out " + ck + "/grads.safetensors",
       "inside the input folder " + ck + " (--checkpoint)"},
      {"collect --checkpoint " + ck + " --batch-size 2 --seq-len 32 --out " + ck + "/trainer_state.json",
       "inside the input folder " + ck + " (--checkpoint)"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args);
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.args << "\n" << r.out;
  }
  for (size_t i = 0; i < watched.size(); ++i) EXPECT_EQ(snip::read_file(watched[i]), before[i]) << watched[i];
  EXPECT_FALSE(fs::exists(ck + "/grads.safetensors"));
  EXPECT_FALSE(fs::exists(d / "q.f32"));
  EXPECT_TRUE(fs::is_symlink(d / "link.f32"));
  EXPECT_EQ(run("eval --checkpoint " + ck + " --batches 1 --batch-size 2 --seq-len 32 --json").out, loss0);
}

// A lock held by another process (this test process) refuses `snip train` naming its pid; a
// lock file of a dead process is taken over.
TEST(Environment, AHeldCheckpointLocationIsRefusedAndAStaleLockIsTakenOver) {
  TempDir d;
  {
    snip::CheckpointLock held = snip::check_checkpoint_target(d / "ck", {});
    const Result r = run("train " + kTiny + " --steps 2 --no-db --out " + (d / "ck"));
    EXPECT_EQ(r.status, 1) << r.out;
    EXPECT_NE(r.out.find("in use by another snip run (process " + std::to_string(::getpid()) + " holds"),
              std::string::npos)
        << r.out;
    EXPECT_FALSE(fs::exists(d / "ck"));
  }
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  snip::write_file_atomic(d / "ck.lock", std::to_string(dead) + "\n");
  const Result r = run("train " + kTiny + " --steps 2 --no-db --out " + (d / "ck"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(snip::is_snip_checkpoint(d / "ck"));
  EXPECT_FALSE(fs::exists(d / "ck.lock"));  // released at the end of the run
}

// SIGTERM and SIGHUP stop `snip train` like Ctrl-C: the step finishes, the checkpoint is saved,
// every metric row up to it is stored and the run is `interrupted`. While it runs, a second
// `snip train` with the same --out is refused (two real processes, the lock). The printed resume
// command, pasted into a shell, continues the run although its paths hold spaces.
class StopSignal : public ::testing::TestWithParam<int> {};

TEST_P(StopSignal, SavesTheCheckpointFlushesEveryRowAndMarksTheRunInterrupted) {
  const int sig = GetParam();
  TempDir d;
  const std::string db = d / "w db.db", ck = d / "c k";
  Child child({"train", "--preset", "tiny", "--batch-size", "2", "--seq-len", "32", "--eval-every", "0", "--steps",
               "100000", "--json", "--db", db, "--out", ck});
  ASSERT_GT(child.pid(), 0);
  std::string line;
  bool stepped = false;
  while (!stepped && child.line(&line))
    stepped = line.rfind("{", 0) == 0 && line.find("\"step\":") != std::string::npos;
  ASSERT_TRUE(stepped) << child.output();

  const Result second = run("train " + kTiny + " --steps 2 --db " + (d / "other.db") + " --out '" + ck + "'");
  EXPECT_EQ(second.status, 1) << second.out;
  EXPECT_NE(second.out.find("in use by another snip run (process " + std::to_string(child.pid()) + " holds"),
            std::string::npos)
      << second.out;

  ASSERT_EQ(::kill(child.pid(), sig), 0);
  const int st = child.wait();
  ASSERT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0) << "\n" << child.output();
  EXPECT_EQ(WEXITSTATUS(st), 128 + sig) << "the shell's status for a process ended by the signal\n" << child.output();
  EXPECT_NE(child.output().find("interrupted at step"), std::string::npos) << child.output();

  const int64_t saved = snip::read_trainer_state(ck)["step"].get<int64_t>();
  EXPECT_GE(saved, 1);
  EXPECT_LT(saved, 100000);
  snip::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, snip::RunStatus::interrupted);
  const std::string reason = sig == SIGINT ? "Ctrl-C" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
  EXPECT_NE(runs[0].status_message.find("stopped by " + reason + " at step " + std::to_string(saved)),
            std::string::npos)
      << runs[0].status_message;
  const auto rows = store.metrics(runs[0].id);
  ASSERT_EQ(int64_t(rows.size()), saved);
  for (int64_t i = 0; i < saved; ++i) EXPECT_EQ(rows[size_t(i)].step, i + 1);
  const auto cks = store.checkpoints(runs[0].id);
  ASSERT_FALSE(cks.empty());
  EXPECT_EQ(cks.back().step, saved);
  EXPECT_FALSE(fs::exists(ck + ".lock"));

  const std::string out = child.output(), hint = "(continue with: snip ";
  const size_t at = out.find(hint), end = out.find(")\n", at);
  ASSERT_NE(at, std::string::npos) << out;
  ASSERT_NE(end, std::string::npos) << out;
  const Result resumed =
      run(out.substr(at + hint.size(), end - at - hint.size()) + " --steps " + std::to_string(saved + 1) + " --json");
  EXPECT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_EQ(snip::read_trainer_state(ck)["step"].get<int64_t>(), saved + 1);
}

INSTANTIATE_TEST_SUITE_P(Signals, StopSignal, ::testing::Values(SIGTERM, SIGHUP, SIGINT),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return std::string(i.param == SIGTERM ? "SIGTERM" : i.param == SIGHUP ? "SIGHUP" : "SIGINT");
                         });

// The GUI's checkpoint folders: per database file (two databases in one folder never share
// one), per run, a leftover of an earlier database of the same name is not reused, and a run
// resumed from its own step-<N> checkpoint goes on in that folder.
TEST(Environment, GuiCheckpointFoldersAreUniquePerDatabaseAndRun) {
  TempDir d;
  const std::string a = snip::checkpoint_root_of_database(d / "a.db");
  const std::string b = snip::checkpoint_root_of_database(d / "b.db");
  EXPECT_NE(a, b);
  EXPECT_EQ(a, d / "a.db.checkpoints");
  EXPECT_EQ(snip::run_checkpoint_folder(a, 1, "", false), a + "/run-1");
  EXPECT_NE(snip::run_checkpoint_folder(a, 1, "", false), snip::run_checkpoint_folder(b, 1, "", false));
  fs::create_directories(a + "/run-1/step-150");  // left by an earlier a.db
  EXPECT_EQ(snip::run_checkpoint_folder(a, 1, "", false), a + "/run-1-2");
  EXPECT_EQ(snip::run_checkpoint_folder(a, 1, a + "/run-1/step-150", true), a + "/run-1");
  // Not claimed again (a checkpoint of another database): a folder of its own.
  EXPECT_EQ(snip::run_checkpoint_folder(a, 1, a + "/run-1/step-150", false), a + "/run-1-2");
}

// Stopped by a signal after 1..5 steps, again and again (SIGTERM, SIGHUP, SIGINT in turn), and
// resumed each time with the command the tool prints: the same metric rows (every step once,
// the same losses) and byte-identical weights and optimizer state as one uninterrupted run.
TEST(Environment, RepeatedStopSignalsThenResumeGiveTheUninterruptedRun) {
  TempDir d;
  // Long enough that a process can never run to the end between the step line the test reads
  // and the signal it sends (a tiny step takes milliseconds): every signalled process is
  // interrupted, whatever the machine's load.
  constexpr int64_t kSteps = 400;
  const std::vector<std::string> base = {
      "--preset", "tiny",    "--batch-size",         "2",      "--seq-len", "32",    "--eval-every",
      "0",        "--steps", std::to_string(kSteps), "--seed", "5",         "--json"};
  std::vector<std::string> straight = {"train"};
  straight.insert(straight.end(), base.begin(), base.end());
  straight.insert(straight.end(), {"--db", d / "straight.db", "--out", d / "straight"});
  Child s(straight);
  ASSERT_EQ(s.wait(), 0) << s.output();

  std::vector<std::string> args = {"train"};
  args.insert(args.end(), base.begin(), base.end());
  args.insert(args.end(), {"--db", d / "loop.db", "--out", d / "ck"});
  const int signals[] = {SIGTERM, SIGHUP, SIGINT};
  int stops = 0;
  for (int round = 0; round < 12; ++round) {
    Child c(args);
    const int after = 1 + round % 5;  // steps of this process before its signal
    const bool signal = stops < 6;    // then the last process runs to the end
    int seen = 0;
    bool sent = false;
    std::string line;
    while (c.line(&line)) {
      if (line.rfind("{", 0) != 0 || line.find("\"step\":") == std::string::npos) continue;
      const int64_t step = nlohmann::json::parse(line)["step"].get<int64_t>();
      if (signal && ++seen == after && step < kSteps) {
        ::kill(c.pid(), signals[stops % 3]);
        sent = true;
      }
    }
    const int st = c.wait();
    const bool interrupted = c.output().find("interrupted at step") != std::string::npos;
    ASSERT_EQ(sent, interrupted) << c.output();
    ASSERT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == (interrupted ? 128 + signals[stops % 3] : 0)) << c.output();
    stops += interrupted;
    args = {"train", "--resume", d / "ck", "--json", "--db", d / "loop.db"};
    if (snip::read_trainer_state(d / "ck")["step"].get<int64_t>() >= kSteps) break;
  }
  EXPECT_EQ(stops, 6);
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_EQ(snip::read_file(d / ("ck/" + std::string(f))), snip::read_file(d / ("straight/" + std::string(f)))) << f;
  snip::Store loop(d / "loop.db"), one(d / "straight.db");
  ASSERT_EQ(loop.runs().size(), 1u);
  EXPECT_EQ(loop.runs()[0].status, snip::RunStatus::finished);
  const auto a = loop.metrics(loop.runs()[0].id), b = one.metrics(one.runs()[0].id);
  ASSERT_EQ(a.size(), size_t(kSteps));
  ASSERT_EQ(b.size(), size_t(kSteps));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].step, int64_t(i) + 1);
    EXPECT_EQ(a[i].train_loss, b[i].train_loss) << "step " << a[i].step;
  }
}
