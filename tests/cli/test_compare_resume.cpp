// A compare survives interruption: stored as it runs (snip::CompareRecorder), a
// compare stopped after a known training is `interrupted` with its finished trainings kept;
// `snip compare --resume ID` trains only the rest and stores what an uninterrupted compare
// stores, bit for bit (with another --jobs, too); contradicting options, a changed checkpoint
// and a finished compare are refused; SIGINT stops it cleanly and prints the resume command.
//
// The interruption that matters for the bits is made with the session API (stopped by its hook
// after the first finished training), so nothing depends on timing; the resumes run the real
// `snip` binary. The signal test waits for the line that says the compare is stored.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "snip/compare_recorder.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "snip/trainer.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

// `snip ARGS` as a user's terminal runs it: exit status and stdout+stderr (tests/util).
struct Result {
  int code = -1;
  std::string out;
};

Result run(const std::string& args) {
  const snip_test::CommandResult r = snip_test::run_shell(std::string(SNIP_BIN) + " " + args);
  return {r.status, r.out};
}

class CompareResume : public ::testing::Test {
 protected:
  void SetUp() override {
    snip::TrainConfig c;
    c.model = snip::preset_config("tiny");
    c.batch_size = 4;
    c.seq_len = 32;
    c.steps = 6;
    c.schedule.total = 6;
    c.schedule.warmup = 2;
    c.eval_every = 0;
    c.seed = 7;
    snip::Trainer t(c);
    t.run();
    t.save_checkpoint(ck());
  }
  std::string db() const { return (dir_ / "w.db").string(); }
  std::string ck() const { return (dir_ / "ck").string(); }
  // The options the CLI arguments below ask for.
  static snip::CompareOptions options() {
    snip::CompareOptions o;
    o.budget = 0.5;
    o.steps = 3;
    o.cooldown_steps = 1;
    o.eval_batches = 1;
    o.random_seeds = 1;
    o.replicates = 2;
    return o;
  }
  static std::string args() { return "--budget 0.5 --steps 3 --cooldown 1 --eval-batches 1 --seeds 1 --replicates 2"; }
  snip_test::TempDir tmp_{"compare-resume"};
  const fs::path dir_ = tmp_.path;
};

TEST_F(CompareResume, StoppedAfterOneTrainingThenResumedEqualsAnUninterruptedCompareBitForBit) {
  const Result straight = run("compare --checkpoint " + ck() + " " + args() + " --jobs 2 --db " + db());
  ASSERT_EQ(straight.code, 0) << straight.out;

  // Stopped through the recorder after the first finished training: interrupted, one kept.
  int64_t id = 0;
  {
    snip::Store store(db());
    snip::CompareRecorder rec(store, ck(), options());
    id = rec.id();
    EXPECT_EQ(store.compare(id).status, snip::RunStatus::running);
    bool stop = false;
    snip::CompareHooks hooks;
    hooks.on_replicate = [&](const snip::CompareRow&, int, const snip::CompareReplicate&) { stop = true; };
    hooks.stop_requested = [&] { return stop; };
    EXPECT_THROW(rec.run(hooks), snip::CompareStopped);
    const snip::CompareRecord c = store.compare(id);
    EXPECT_EQ(c.status, snip::RunStatus::interrupted);
    EXPECT_NE(c.status_message.find("snip compare --resume " + std::to_string(id)), std::string::npos)
        << c.status_message;
    EXPECT_EQ(store.compare_replicates(id).size(), 1u);
    EXPECT_GE(c.rows.size(), 10u);  // the arms and their plans are stored before the first training
  }
  const Result listed = run("compare --list --db " + db());
  ASSERT_EQ(listed.code, 0) << listed.out;
  EXPECT_NE(listed.out.find("interrupted"), std::string::npos) << listed.out;

  // A contradicting option is refused and changes nothing.
  const Result clash = run("compare --resume " + std::to_string(id) + " --db " + db() + " --budget 0.6");
  EXPECT_EQ(clash.code, 1);
  EXPECT_NE(clash.out.find("--budget 0.6 but the compare has 0.5"), std::string::npos) << clash.out;
  EXPECT_EQ(snip::Store(db()).compare(id).status, snip::RunStatus::interrupted);

  // Resumed (one job, the same options given again are fine): only the rest is trained.
  const Result resumed = run("compare --resume " + std::to_string(id) + " --db " + db() + " --jobs 1 --budget 0.5");
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("trainings kept: 1;"), std::string::npos) << resumed.out;

  snip::Store store(db());
  const auto all = store.list_compares();
  ASSERT_EQ(all.size(), 2u);
  const snip::CompareRecord a = store.compare(all[1].id), b = store.compare(id);
  EXPECT_EQ(a.status, snip::RunStatus::finished);
  EXPECT_EQ(b.status, snip::RunStatus::finished);
  EXPECT_EQ(b.start_step, a.start_step);
  EXPECT_EQ(b.recipe, a.recipe);
  EXPECT_EQ(b.noise_floor_train, a.noise_floor_train);
  EXPECT_EQ(b.noise_floor_val, a.noise_floor_val);
  EXPECT_EQ(b.options["snip_reference"], a.options["snip_reference"]);
  ASSERT_EQ(b.rows.size(), a.rows.size());
  for (size_t i = 0; i < a.rows.size(); ++i) {
    snip::CompareRowRecord x = a.rows[i], y = b.rows[i];
    ASSERT_TRUE(x.plan_id && y.plan_id);
    EXPECT_EQ(store.plan(*x.plan_id).plan.layers, store.plan(*y.plan_id).plan.layers) << x.method;
    x.plan_id = y.plan_id = std::nullopt;
    EXPECT_EQ(x.replicates.size(), 2u) << x.method;
    EXPECT_EQ(x, y) << x.method;  // every loss, gap, verdict, curve and replicate, bit for bit
  }

  // Nothing left to resume.
  const Result again = run("compare --resume " + std::to_string(id) + " --db " + db());
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.out.find("is finished"), std::string::npos) << again.out;
}

// Options no compare can run with are refused before anything is stored: no compare record,
// no resume hint.
TEST_F(CompareResume, BadOptionsAreRefusedBeforeACompareIsStored) {
  for (const std::string& bad : {std::string("--recipe block:1"), std::string("--baselines foo")}) {
    const Result r = run("compare --checkpoint " + ck() + " --db " + db() + " " + bad);
    EXPECT_EQ(r.code, 1) << bad;
    EXPECT_NE(r.out.find("error:"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("--resume"), std::string::npos) << "a refused compare offers no resume: " << r.out;
  }
  EXPECT_TRUE(snip::Store(db()).list_compares().empty());
}

// The oracle's batches are part of a compare's stored settings: a new compare measures them after
// the evaluation's batches, and a compare stored before that rule (no "oracle-disjoint") resumes
// with its old rule, so the plans it makes again are the stored ones.
TEST(CompareSettings, TheOraclesBatchesSurviveTheRecordAndOldRecordsKeepTheirRule) {
  snip::CompareOptions o;
  o.oracle = true;
  o.eval_batches = 4;
  o.oracle_batches = 16;
  snip::CompareRecord c;
  c.options["resume"] = snip::compare_settings_to_json(o);
  EXPECT_TRUE(snip::compare_options_from_record(c).oracle_disjoint);
  EXPECT_EQ(snip::oracle_first_batch(snip::compare_options_from_record(c)), 4);
  o.oracle_disjoint = false;
  c.options["resume"] = snip::compare_settings_to_json(o);
  EXPECT_FALSE(snip::compare_options_from_record(c).oracle_disjoint);
  c.options["resume"].erase("oracle-disjoint");
  const snip::CompareOptions old = snip::compare_options_from_record(c);
  EXPECT_FALSE(old.oracle_disjoint);
  EXPECT_EQ(snip::oracle_first_batch(old), 0);
  EXPECT_EQ(old.oracle_batches, 16);
}

TEST_F(CompareResume, AChangedCheckpointIsRefused) {
  int64_t id = 0;
  {
    snip::Store store(db());
    snip::CompareRecorder rec(store, ck(), options());
    id = rec.id();
    snip::CompareHooks hooks;
    hooks.stop_requested = [] { return true; };  // before the first training step
    EXPECT_THROW(rec.run(hooks), snip::CompareStopped);
  }
  std::ofstream(ck() + "/trainer_state.json", std::ios::app) << "\n";  // the checkpoint was saved again
  const Result r = run("compare --resume " + std::to_string(id) + " --db " + db());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("has changed since"), std::string::npos) << r.out;
  EXPECT_EQ(snip::Store(db()).compare(id).status, snip::RunStatus::interrupted);
  const Result no_db = run("compare --resume " + std::to_string(id) + " --no-db");
  EXPECT_EQ(no_db.code, 1);
  EXPECT_NE(no_db.out.find("--resume and --no-db cannot be combined"), std::string::npos) << no_db.out;
  const Result no_jobs = run("compare --checkpoint " + ck() + " --jobs 0 --db " + db());
  EXPECT_EQ(no_jobs.code, 1);
  EXPECT_NE(no_jobs.out.find("--jobs must be ≥ 1 (got 0)"), std::string::npos) << no_jobs.out;
  const Result nothing = run("compare --db " + db());
  EXPECT_EQ(nothing.code, 1);
  EXPECT_NE(nothing.out.find("give --checkpoint DIR"), std::string::npos) << nothing.out;
}

// The resume hint a stopped compare stores names its database by absolute path: a store
// opened as a relative path ("w.db" in the database's folder) leaves a hint that works from any
// working directory, and so does `snip compare --list` read from elsewhere.
TEST_F(CompareResume, TheStoredResumeHintNamesTheDatabaseByItsAbsolutePath) {
  const std::filesystem::path before = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::path(db()).parent_path());
  int64_t id = 0;
  {
    snip::Store store("w.db");
    snip::CompareRecorder rec(store, ck(), options());
    id = rec.id();
    snip::CompareHooks hooks;
    hooks.stop_requested = [] { return true; };
    EXPECT_THROW(rec.run(hooks), snip::CompareStopped);
  }
  std::filesystem::current_path(before);
  const std::string message = snip::Store(db()).compare(id).status_message;
  EXPECT_NE(message.find("snip compare --resume " + std::to_string(id) + " --db " + db()), std::string::npos)
      << message;
  const Result list = run("compare --list --db " + db());
  EXPECT_NE(list.out.find("--db " + db()), std::string::npos) << list.out;
}

// SIGINT (like SIGTERM and SIGHUP, app/stop_signals.h) stops after the current step: the compare
// is interrupted, the message names the signal, and the exact resume command is printed.
TEST_F(CompareResume, SigintLeavesAnInterruptedCompareAndPrintsTheResumeCommand) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  const std::vector<std::string> a = {"compare", "--checkpoint", ck(), "--steps", "100000", "--replicates",
                                      "1",       "--seeds",      "0",  "--db",    db(),     "--jobs",
                                      "1"};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::close(p[0]);
    ::close(p[1]);
    ::signal(SIGINT, SIG_DFL);
    std::vector<char*> argv{const_cast<char*>(SNIP_BIN)};
    for (const auto& s : a) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    ::execv(SNIP_BIN, argv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  std::string out;
  char buf[4096];
  const std::string stored_line = "each finished training is stored";
  while (out.find(stored_line) == std::string::npos) {  // the signal handlers are in place by then
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, size_t(n));
  }
  ASSERT_NE(out.find(stored_line), std::string::npos) << out;
  ASSERT_EQ(::kill(pid, SIGINT), 0);
  for (ssize_t n; (n = ::read(p[0], buf, sizeof buf)) > 0;) out.append(buf, size_t(n));
  ::close(p[0]);
  int st = 0;
  ::waitpid(pid, &st, 0);
  ASSERT_TRUE(WIFEXITED(st)) << out;
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGINT) << "the shell's status for a process ended by Ctrl-C\n" << out;
  snip::Store store(db());
  const auto all = store.list_compares();
  ASSERT_EQ(all.size(), 1u);
  const std::string resume = "snip compare --resume " + std::to_string(all[0].id) + " --db " + db();
  EXPECT_NE(out.find("stopped by Ctrl-C"), std::string::npos) << out;
  EXPECT_NE(out.find("continue it with: " + resume), std::string::npos) << out;
  EXPECT_EQ(all[0].status, snip::RunStatus::interrupted);
  EXPECT_NE(all[0].status_message.find("Ctrl-C"), std::string::npos) << all[0].status_message;
  EXPECT_NE(all[0].status_message.find(resume), std::string::npos) << all[0].status_message;
}

}  // namespace
