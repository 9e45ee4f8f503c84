// Where a checkpoint may go (docs/BAD_INPUT.md "Environment"): the pre-flight
// check_checkpoint_target refuses, before any training, anything that is not this run's to
// replace or cannot be written; its lock refuses a second run on the same location; and
// write_checkpoint itself never swaps out and removes anything but a snip checkpoint.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/trainer.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Scratch = snip_test::TempDir;

std::unique_ptr<snip::Trainer> tiny_trainer(const Scratch& d) {
  std::mt19937_64 rng(7);
  std::string text;
  const char* words[] = {"in", "the", "beginning", "was", "light", "and", "water"};
  while (text.size() < 20000) text += std::string(words[rng() % 7]) + (rng() % 8 == 0 ? ".\n" : " ");
  snip::write_file_atomic(d / "corpus.txt", text);
  snip::TrainConfig c;
  c.model = snip::preset_config("tiny");
  c.data_path = d / "corpus.txt";
  c.batch_size = 2;
  c.seq_len = 16;
  c.steps = 4;
  c.schedule.total = 4;
  c.precision = "fp32";
  c.eval_every = 0;
  return std::make_unique<snip::Trainer>(c);
}

// The message check_checkpoint_target refuses `dir` with ("" when it accepts it).
std::string refusal(const std::string& dir, const snip::CheckpointTargetOptions& o = {}) {
  try {
    snip::CheckpointLock lock = snip::check_checkpoint_target(dir, o);
  } catch (const snip::Error& e) {
    return e.what();
  }
  return "";
}

// Every file under `dir` with its contents, to show nothing changed.
std::string snapshot(const fs::path& dir) {
  std::string s;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    s += e.path().string() + "\n";
    if (e.is_regular_file()) s += snip::read_file(e.path().string()) + "\n";
  }
  return s;
}

pid_t dead_pid() {
  const pid_t pid = fork();
  if (pid == 0) _exit(0);
  int st = 0;
  waitpid(pid, &st, 0);
  return pid;
}

}  // namespace

TEST(CheckpointTarget, RefusesWhatIsNotThisRunsToReplace) {
  Scratch d;
  // A folder with the user's files.
  fs::create_directories(d / "mine");
  snip::write_file_atomic(d / "mine/thesis.tex", std::string_view("years of work"));
  // A regular file and a FIFO.
  snip::write_file_atomic(d / "file.txt", std::string_view("keep"));
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  // The folder holding the database.
  fs::create_directories(d / "dbdir");
  snip::write_file_atomic(d / "dbdir/w.db", std::string_view("SQLite format 3"));
  const std::string before = snapshot(d.path);

  EXPECT_NE(refusal(d / "mine").find("thesis.tex, which snip did not write"), std::string::npos) << refusal(d / "mine");
  EXPECT_NE(refusal(d / "file.txt").find("it is a regular file, not a folder"), std::string::npos);
  EXPECT_NE(refusal(d / "fifo").find("named pipe"), std::string::npos);
  snip::CheckpointTargetOptions with_db;
  with_db.db_path = d / "dbdir/w.db";
  EXPECT_NE(refusal(d / "dbdir", with_db).find("holds the experiment database"), std::string::npos);
  EXPECT_NE(refusal(d.path.string(), with_db).find("holds the experiment database"), std::string::npos);
  EXPECT_EQ(snapshot(d.path), before);  // nothing changed, no lock or probe left behind
}

TEST(CheckpointTarget, AnotherRunsCheckpointNeedsOverwriteButTheResumedOneIsFine) {
  Scratch d;
  auto t = tiny_trainer(d);
  t->step();
  t->save_checkpoint(d / "ck");
  EXPECT_NE(refusal(d / "ck").find("holds the checkpoint of another run (step 1)"), std::string::npos)
      << refusal(d / "ck");
  EXPECT_NE(refusal(d / "ck").find("--overwrite"), std::string::npos);
  snip::CheckpointTargetOptions overwrite;
  overwrite.overwrite = true;
  EXPECT_EQ(refusal(d / "ck", overwrite), "");
  snip::CheckpointTargetOptions resumed;
  resumed.resumed_from = d / "ck/";  // the same folder, written differently
  EXPECT_EQ(refusal(d / "ck", resumed), "");
  // A checkpoint with a file of the user's added is not replaceable even with --overwrite.
  snip::write_file_atomic(d / "ck/notes.txt", std::string_view("mine"));
  EXPECT_NE(refusal(d / "ck", overwrite).find("notes.txt"), std::string::npos);
  // New, empty: fine. The GUI's per-step folder: only step-<N> checkpoints.
  fs::create_directories(d / "empty");
  EXPECT_EQ(refusal(d / "empty"), "");
  EXPECT_EQ(refusal(d / "new/deeper/run"), "");
  snip::CheckpointTargetOptions per_step;
  per_step.per_step = true;
  fs::create_directories(d / "run-1");
  t->save_checkpoint(d / "run-1/step-1");
  EXPECT_EQ(refusal(d / "run-1", per_step), "");
  snip::write_file_atomic(d / "run-1/other.txt", std::string_view("x"));
  EXPECT_NE(refusal(d / "run-1", per_step).find("other.txt"), std::string::npos);
}

TEST(CheckpointTarget, UnusableLocationsAreRefusedBeforeTraining) {
  Scratch d;
  snip::write_file_atomic(d / "file.txt", std::string_view("keep"));
  EXPECT_NE(refusal(d / "file.txt/ck").find("file.txt is a regular file, not a folder"), std::string::npos)
      << refusal(d / "file.txt/ck");
  for (const std::string& bad : {std::string("."), std::string(".."), d / ".", d / "..", std::string("/")})
    EXPECT_NE(refusal(bad).find("not a checkpoint folder of its own"), std::string::npos)
        << bad << ": " << refusal(bad);
  EXPECT_NE(refusal("").find("empty"), std::string::npos);
  EXPECT_NE(refusal(d / std::string(250, 'x')).find("too long"), std::string::npos)
      << refusal(d / std::string(250, 'x'));
  // A read-only location (injected: root ignores permissions): refused by the probe, not after training.
  ::setenv("SNIP_FAULT_WRITE", "EROFS:rofolder", 1);
  const std::string ro = refusal(d / "rofolder");
  ::unsetenv("SNIP_FAULT_WRITE");
  EXPECT_NE(ro.find("read-only"), std::string::npos) << ro;
  EXPECT_EQ(std::distance(fs::directory_iterator(d.path), fs::directory_iterator{}), 1);  // only file.txt
}

TEST(CheckpointTarget, TheLockRefusesASecondHolderAndAStaleOneIsTakenOver) {
  Scratch d;
  {
    snip::CheckpointLock first = snip::check_checkpoint_target(d / "ck", {});
    ASSERT_TRUE(first.held());
    EXPECT_EQ(snip::read_file(d / "ck.lock"), std::to_string(::getpid()) + "\n");
    const std::string second = refusal(d / "ck");
    EXPECT_NE(second.find("in use by another snip run (process " + std::to_string(::getpid())), std::string::npos)
        << second;
  }
  EXPECT_FALSE(fs::exists(d / "ck.lock"));  // released and removed
  // A lock file left by a killed run (its pid is gone; the kernel dropped its flock).
  snip::write_file_atomic(d / "ck.lock", std::to_string(dead_pid()) + "\n");
  EXPECT_EQ(refusal(d / "ck"), "");
  // A file of the user's that happens to have the lock's name is not taken.
  snip::write_file_atomic(d / "ck.lock", std::string_view("my shopping list"));
  EXPECT_NE(refusal(d / "ck").find("not snip's lock file"), std::string::npos);
  EXPECT_EQ(snip::read_file(d / "ck.lock"), "my shopping list");
}

TEST(CheckpointTarget, WriteCheckpointNeverRemovesAFolderThatIsNotACheckpoint) {
  Scratch d;
  auto t = tiny_trainer(d);
  t->step();
  fs::create_directories(d / "mine");
  snip::write_file_atomic(d / "mine/data.csv", std::string_view("1,2,3"));
  const std::string before = snapshot(d / "mine");
  try {
    t->save_checkpoint(d / "mine");
    ADD_FAILURE() << "a folder of the user's was replaced";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a snip checkpoint"), std::string::npos) << e.what();
  }
  EXPECT_EQ(snapshot(d / "mine"), before);
  // Through a symbolic link: the folder it names gets the checkpoint, the link stays.
  fs::create_directories(d / "real");
  fs::create_directory_symlink("real", d / "link");
  t->save_checkpoint(d / "link");
  t->step();
  t->save_checkpoint(d / "link");
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  EXPECT_TRUE(snip::is_snip_checkpoint(d / "real"));
  EXPECT_EQ(snip::read_trainer_state(d / "real")["step"].get<int>(), 2);
}
