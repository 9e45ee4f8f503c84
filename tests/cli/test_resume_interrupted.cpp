// A resumed run is the same run: an adaptive SNIP run interrupted
// at several steps and resumed from its checkpoint alone (`snip train --resume DIR --db F`)
// ends with the uninterrupted run's weights byte for byte, the same metric rows, statistics
// rounds and plan timeline; a contradicting option, a changed or moved corpus are errors;
// training that cannot evaluate fails before step 1, a failure after it saves the last good
// state; a busy database never stops a run; what is stored is what happened.
//
// The interruptions are made with the session API (RecordedTraining stopped by its step
// callback at a chosen step), so nothing depends on timing; the resumes that matter run the
// real `snip` binary.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/inotify.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/recorded_training.h"
#include "snip/store.h"
#include "snip/trainer.h"
#include "temp_dir.h"
#include "tiny_config.h"

namespace fs = std::filesystem;

namespace {

using snip_test::TempDir;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `snip <args>` (in `cwd` when given); stderr goes to *err.
int run_snip(const std::string& args, std::string* err = nullptr, const std::string& cwd = "") {
  const snip_test::TempDir tmp("resume-err");
  const std::string err_file = tmp.file("stderr");
  std::string cmd = std::string(SNIP_BIN) + " " + args + " >/dev/null 2>" + err_file;
  if (!cwd.empty()) cmd = "cd '" + cwd + "' && " + cmd;
  const int rc = std::system(cmd.c_str());
  if (err) *err = file_bytes(err_file);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

constexpr int64_t kSteps = 12;

constexpr const char* kPlanJson =
    R"({"format": "snip-plan/1", "method": "manual-test", "budget": 0.1,
        "layers": {"model.layers.0.mlp.up_proj": {"fprop": "fp8", "dgrad": "fp8", "wgrad": "fp8"}}})";

// The shared tiny configuration (tiny_config.h) with 2×32-token batches over kSteps steps (the
// schedule's total matters: an interruption must not change the schedule) and validation
// every fourth step.
snip::TrainConfig resume_config() {
  snip::TrainConfig c = snip_test::tiny_config("bf16", kSteps);
  c.batch_size = 2;
  c.eval_every = 4;
  c.eval_batches = 2;
  return c;
}

snip::AdaptiveOptions adaptive_options() {
  snip::AdaptiveOptions ao;
  ao.method = snip::Method::snip;
  ao.request.budget = 0.5;
  ao.request.seed = 7;
  ao.estimator.lambda = 0.3;
  ao.replan_every = 3;
  ao.bf16_probe_every = 2;
  return ao;
}

// Trains `trainer` recorded in `db` into checkpoint `ck` until step `stop_at` (then stops as
// Ctrl-C would) or the end.
void train_until(snip::Trainer& trainer, const std::string& db, const std::string& ck,
                 const std::optional<snip::AdaptiveOptions>& adaptive, int64_t stop_at,
                 const std::string& resumed_from = "", bool every_step = false) {
  snip::Store store(db);
  snip::RunDescription d;
  d.name = "adaptive";
  const snip::RecordedRun run = snip::open_recorded_run(store, trainer, d, adaptive, resumed_from);
  snip::RecordedTrainingOptions o;
  o.checkpoint_dir = ck;
  o.adaptive = adaptive;
  o.stop_reason = "stopped by the test";
  if (every_step) o.save_every = 1, o.checkpoint_per_step = true;  // <ck>/step-<N>
  snip::RecordedTraining training(trainer, &store, run.id, o);
  training.on_step = [&](const snip::StepMetrics& m, const snip::MetricRow&) { return m.step < stop_at; };
  training.run();
}

// The recorded run of `db` (the only one).
struct Recorded {
  std::vector<snip::MetricRow> rows;
  std::vector<int64_t> round_steps;
  std::vector<snip::PlanTimelineEntry> timeline;
  std::vector<std::map<std::string, snip::LinearPrecision>> plans;
  snip::RunStatus status{};
};

Recorded recorded(const std::string& db) {
  snip::Store store(db);
  const auto runs = store.runs();
  EXPECT_EQ(runs.size(), 1u) << "a resume records into the run that saved the checkpoint";
  Recorded r;
  if (runs.empty()) return r;
  r.status = runs[0].status;
  r.rows = store.metrics(runs[0].id);
  for (const auto& s : store.stats_rounds(runs[0].id)) r.round_steps.push_back(s.step);
  std::sort(r.round_steps.begin(), r.round_steps.end());
  r.timeline = store.plan_timeline(runs[0].id);
  for (const auto& e : r.timeline) r.plans.push_back(store.plan(e.plan_id).plan.layers);
  return r;
}

void expect_same_run(const Recorded& a, const Recorded& b) {
  EXPECT_EQ(b.status, snip::RunStatus::finished);
  ASSERT_EQ(a.rows.size(), size_t(kSteps));
  ASSERT_EQ(b.rows.size(), a.rows.size()) << "no metric row lost";
  for (size_t i = 0; i < a.rows.size(); ++i) {
    const snip::MetricRow &x = a.rows[i], &y = b.rows[i];
    EXPECT_EQ(y.step, x.step);
    EXPECT_EQ(y.train_loss, x.train_loss) << "step " << x.step;  // bit-identical
    EXPECT_EQ(y.val_loss, x.val_loss) << "step " << x.step;
    EXPECT_EQ(y.lr, x.lr) << "step " << x.step;
    EXPECT_EQ(y.fp4_fraction, x.fp4_fraction) << "step " << x.step;
    EXPECT_EQ(y.bf16_gap, x.bf16_gap) << "step " << x.step;  // the probes fall on the same steps
  }
  EXPECT_EQ(b.round_steps, a.round_steps);
  ASSERT_EQ(b.timeline.size(), a.timeline.size());
  for (size_t i = 0; i < a.timeline.size(); ++i) {
    EXPECT_EQ(b.timeline[i].first_step, a.timeline[i].first_step);
    EXPECT_EQ(b.timeline[i].last_step, a.timeline[i].last_step);
    EXPECT_EQ(b.plans[i], a.plans[i]) << "plan " << i;
  }
}

}  // namespace

// Interrupted at steps 2, 3, 5, 8 and 10 (before, on and after the round steps 3, 6, 9),
// resumed each time from the checkpoint alone; the last resume is the real CLI with nothing
// but --resume and --db. Weights, moments, rows, rounds and timeline equal the straight run.
// Adaptive planning on the gradient noise monitor (replan_when noise, a noise floor) resumes
// bit-identically too: the layers below the threshold at the last solve travel with its plan.
TEST(ResumeIsTheSameRun, ANoiseDrivenAdaptiveRunInterruptedEndsBitIdentical) {
  TempDir dir;
  snip::AdaptiveOptions ao = adaptive_options();
  ao.replan_when = snip::ReplanWhen::noise;
  ao.noise_floor = 6;
  const std::string ck_a = dir.file("ck_straight"), ck_b = dir.file("ck_split");
  {
    snip::Trainer t(resume_config());
    train_until(t, dir.file("a.db"), ck_a, ao, kSteps, "", /*every_step=*/true);
  }
  {
    snip::Trainer t(resume_config());
    train_until(t, dir.file("b.db"), ck_b, ao, 5);
  }
  EXPECT_TRUE(file_bytes(ck_a + "/step-5/model.safetensors") == file_bytes(ck_b + "/model.safetensors"));
  std::unique_ptr<snip::Trainer> t = snip::Trainer::resume(ck_b);
  const auto adaptive = snip::resumed_adaptive_options(*t, ck_b, std::nullopt, {}, nullptr);
  ASSERT_TRUE(adaptive.has_value());
  EXPECT_EQ(adaptive->replan_when, snip::ReplanWhen::noise);
  EXPECT_EQ(adaptive->noise_floor, 6);
  train_until(*t, dir.file("b.db"), ck_b, adaptive, kSteps, ck_b);
  const std::string last = ck_a + "/step-" + std::to_string(kSteps);
  EXPECT_TRUE(file_bytes(last + "/model.safetensors") == file_bytes(ck_b + "/model.safetensors"));
  EXPECT_TRUE(file_bytes(last + "/optimizer.safetensors") == file_bytes(ck_b + "/optimizer.safetensors"));
}

// A stop request that arrives inside the step-0 statistics round (here: at the round's third
// question, between its passes) ends the run at once: no step trained, no plan or round stored,
// the untouched start saved, and the resume from it is the uninterrupted run bit for bit.
TEST(ResumeIsTheSameRun, AStopInsideTheFirstStatisticsRoundStopsBeforeStepOne) {
  TempDir dir;
  const snip::AdaptiveOptions ao = adaptive_options();
  const std::string ck_a = dir.file("ck_straight"), ck_b = dir.file("ck_split");
  {
    snip::Trainer t(resume_config());
    train_until(t, dir.file("a.db"), ck_a, ao, kSteps);
  }
  {
    snip::Trainer t(resume_config());
    snip::Store store(dir.file("b.db"));
    snip::RunDescription d;
    d.name = "adaptive";
    const snip::RecordedRun run = snip::open_recorded_run(store, t, d, ao, "");
    snip::RecordedTrainingOptions o;
    o.checkpoint_dir = ck_b;
    o.adaptive = ao;
    o.stop_reason = "stopped by the test";
    snip::RecordedTraining training(t, &store, run.id, o);
    int asked = 0;  // 1: before step 1's round; 2 and later: inside the round
    training.stop_requested = [&] { return ++asked >= 3; };
    training.run();
    EXPECT_GE(asked, 3);
    EXPECT_EQ(t.step_count(), 0);
    EXPECT_EQ(store.run(run.id).status, snip::RunStatus::interrupted);
    EXPECT_TRUE(store.stats_rounds(run.id).empty()) << "the abandoned round was stored";
    EXPECT_TRUE(store.plan_timeline(run.id).empty());
    EXPECT_TRUE(store.metrics(run.id).empty());
  }
  ASSERT_TRUE(fs::exists(ck_b + "/trainer_state.json")) << "the start was not saved";
  std::unique_ptr<snip::Trainer> t = snip::Trainer::resume(ck_b);
  EXPECT_EQ(t->step_count(), 0);
  const auto adaptive = snip::resumed_adaptive_options(*t, ck_b, std::nullopt, {}, nullptr);
  ASSERT_TRUE(adaptive.has_value());
  train_until(*t, dir.file("b.db"), ck_b, adaptive, kSteps, ck_b);
  EXPECT_TRUE(file_bytes(ck_a + "/model.safetensors") == file_bytes(ck_b + "/model.safetensors"));
  EXPECT_TRUE(file_bytes(ck_a + "/optimizer.safetensors") == file_bytes(ck_b + "/optimizer.safetensors"));
  expect_same_run(recorded(dir.file("a.db")), recorded(dir.file("b.db")));
}

TEST(ResumeIsTheSameRun, AdaptiveRunInterruptedFiveTimesEndsBitIdentical) {
  TempDir dir;
  const std::string db_a = dir.file("straight.db"), ck_a = dir.file("ck_straight");
  const std::string db_b = dir.file("split.db"), ck_b = dir.file("ck_split");
  {
    snip::Trainer t(resume_config());
    train_until(t, db_a, ck_a, adaptive_options(), kSteps, "", /*every_step=*/true);
  }
  // After each interruption the checkpoint equals the straight run's at that step.
  const auto same_as_straight = [&](int64_t step) {
    const std::string at = ck_a + "/step-" + std::to_string(step);
    ASSERT_FALSE(file_bytes(at + "/model.safetensors").empty()) << at;
    EXPECT_TRUE(file_bytes(at + "/model.safetensors") == file_bytes(ck_b + "/model.safetensors")) << "step " << step;
    EXPECT_TRUE(file_bytes(at + "/optimizer.safetensors") == file_bytes(ck_b + "/optimizer.safetensors"))
        << "step " << step;
  };
  {
    snip::Trainer t(resume_config());
    train_until(t, db_b, ck_b, adaptive_options(), 2);
  }
  same_as_straight(2);
  for (const int64_t stop : {3, 5, 8, 10}) {
    std::unique_ptr<snip::Trainer> t = snip::Trainer::resume(ck_b);
    ASSERT_EQ(t->step_count(), stop == 3 ? 2 : stop == 5 ? 3 : stop == 8 ? 5 : 8);
    // What the CLI and the GUI do: the adaptive settings come from the checkpoint.
    const auto adaptive = snip::resumed_adaptive_options(*t, ck_b, std::nullopt, {}, nullptr);
    ASSERT_TRUE(adaptive.has_value()) << "the checkpoint carries the adaptive settings";
    EXPECT_EQ(snip::adaptive_options_to_json(*adaptive), snip::adaptive_options_to_json(adaptive_options()));
    train_until(*t, db_b, ck_b, adaptive, stop, ck_b);
    same_as_straight(stop);
  }
  std::string err;
  ASSERT_EQ(run_snip("train --resume " + ck_b + " --db " + db_b, &err), 0) << err;
  EXPECT_EQ(err.find("warning"), std::string::npos) << err;

  same_as_straight(kSteps);  // the final weights
  expect_same_run(recorded(db_a), recorded(db_b));
  EXPECT_EQ(recorded(db_a).round_steps, (std::vector<int64_t>{0, 3, 6, 9}));
}

// Killed after step 8 with the last checkpoint at step 4 (as SIGKILL leaves it): the resume
// makes the rounds at steps 6 again, and the stored run keeps one copy of each, as the
// uninterrupted run has (the stopped trajectory's copies are dropped with its rows).
TEST(ResumeIsTheSameRun, ResumedFromAnOlderCheckpointKeepsOneCopyOfEachRound) {
  TempDir dir;
  const std::string db_a = dir.file("straight.db"), ck_a = dir.file("ck_straight");
  const std::string db_b = dir.file("split.db"), ck_b = dir.file("ck_split");
  {
    snip::Trainer t(resume_config());
    train_until(t, db_a, ck_a, adaptive_options(), kSteps);
  }
  {
    snip::Trainer t(resume_config());
    train_until(t, db_b, ck_b, adaptive_options(), 8, "", /*every_step=*/true);
  }
  EXPECT_EQ(recorded(db_b).round_steps, (std::vector<int64_t>{0, 3, 6}));
  const std::string older = ck_b + "/step-4";
  std::unique_ptr<snip::Trainer> t = snip::Trainer::resume(older);
  ASSERT_EQ(t->step_count(), 4);
  const auto adaptive = snip::resumed_adaptive_options(*t, older, std::nullopt, {}, nullptr);
  train_until(*t, db_b, dir.file("ck_resumed"), adaptive, kSteps, older);
  expect_same_run(recorded(db_a), recorded(db_b));
  EXPECT_EQ(recorded(db_b).round_steps, (std::vector<int64_t>{0, 3, 6, 9}));
}

// A setting given again must agree with the checkpoint's run; agreeing ones are accepted.
TEST(ResumeIsTheSameRun, ContradictingOptionsAreAnErrorNamingBothValues) {
  TempDir dir;
  const std::string db = dir.file("w.db"), ck = dir.file("ck");
  {
    snip::Trainer t(resume_config());
    train_until(t, db, ck, adaptive_options(), 4);
  }
  std::string err;
  EXPECT_EQ(run_snip("train --resume " + ck + " --db " + db + " --budget 0.7", &err), 1);
  EXPECT_NE(err.find("--budget 0.7 but the run has 0.5"), std::string::npos) << err;
  EXPECT_EQ(run_snip("train --resume " + ck + " --db " + db + " --lr 0.01 --replan-every 5", &err), 1);
  EXPECT_NE(err.find("--lr 0.01 but the run has 0.003"), std::string::npos) << err;
  const std::string plan = dir.file("plan.json");
  { std::ofstream(plan) << kPlanJson; }
  EXPECT_EQ(run_snip("train --resume " + ck + " --db " + db + " --plan " + plan, &err), 1);
  EXPECT_NE(err.find("--plan with --resume of an adaptive run"), std::string::npos) << err;
  // the same values again are fine, and the run goes on adaptive
  ASSERT_EQ(run_snip("train --resume " + ck + " --db " + db + " --method snip --budget 0.5 --lambda 0.3 --batch-size 2",
                     &err),
            0)
      << err;
  EXPECT_EQ(recorded(db).round_steps, (std::vector<int64_t>{0, 3, 6, 9}));
}

// One resume path: the checkpoint's trainer_state.json is read once before training starts (it
// was read and checked four times: the command, the session twice, the trainer), and the new
// total is checked there, in one wording for both fronts. Counted with inotify on the folder:
// the run's first step line comes after every set-up open, and the run is killed long before its
// only save (nothing here depends on timing).
TEST(ResumeIsTheSameRun, TheCheckpointStateIsReadOnceBeforeTheFirstStep) {
  TempDir dir;
  const std::string ck = dir.file("ck");
  ASSERT_EQ(run_snip("train --preset tiny --steps 2 --batch-size 2 --seq-len 16 --no-db --out " + ck), 0);
  const int watch = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  ASSERT_GE(watch, 0);
  ASSERT_GE(inotify_add_watch(watch, ck.c_str(), IN_OPEN), 0);
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(out[1], 1);
    ::close(out[0]);
    const std::string bin = SNIP_BIN;
    execl(bin.c_str(), bin.c_str(), "train", "--resume", ck.c_str(), "--steps", "1000000", "--json", "--no-db",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(out[1]);
  std::string first;
  for (char c; first.find('\n') == std::string::npos && ::read(out[0], &c, 1) == 1;) first += c;
  int opens = 0;
  alignas(inotify_event) char buf[65536];
  for (ssize_t n; (n = ::read(watch, buf, sizeof buf)) > 0;)
    for (char* p = buf; p < buf + n;) {
      const auto* e = reinterpret_cast<const inotify_event*>(p);
      if (e->len > 0 && std::string(e->name) == "trainer_state.json") ++opens;
      p += sizeof(inotify_event) + e->len;
    }
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  ::close(out[0]);
  ::close(watch);
  ASSERT_NE(first.find("\"step\":3"), std::string::npos) << first;
  EXPECT_EQ(opens, 1) << "trainer_state.json opened " << opens << " times before the first step";
  std::string err;
  EXPECT_EQ(run_snip("train --resume " + ck + " --steps 2 --no-db", &err), 1);
  EXPECT_NE(err.find("a new total of 2 steps is not beyond the checkpoint's step 2"), std::string::npos) << err;
}

// The corpus is found by its absolute path from any directory, and a changed or moved one is
// an error naming both fingerprints (or the missing path); --data points at a moved copy.
TEST(ResumeIsTheSameRun, ChangedOrMovedCorpusIsAnErrorAndRelativeDataIsFoundFromElsewhere) {
  TempDir dir;
  fs::create_directories(dir.path / "work");
  std::string text;
  for (int i = 0; i < 400; ++i) text += "line " + std::to_string(i * 7919 % 1000) + " of a small corpus.\n";
  { std::ofstream(dir.file("work/corpus.txt")) << text; }
  const std::string ck = dir.file("ck");
  const std::string common = " --no-db --eval-every 0 --batch-size 2 --seq-len 32";
  std::string err;
  ASSERT_EQ(run_snip("train --preset tiny --steps 2 --data corpus.txt --out " + ck + common, &err, dir.file("work")), 0)
      << err;
  // From another directory, the relative --data of the first run is still found.
  ASSERT_EQ(run_snip("train --resume " + ck + " --steps 3 --no-db", &err, "/"), 0) << err;
  // Moved: the error names the path; --data with the new place continues.
  fs::rename(dir.file("work/corpus.txt"), dir.file("moved.txt"));
  EXPECT_EQ(run_snip("train --resume " + ck + " --steps 4 --no-db", &err), 1);
  EXPECT_NE(err.find("corpus.txt) does not exist — was it moved or deleted?"), std::string::npos) << err;
  ASSERT_EQ(run_snip("train --resume " + ck + " --steps 4 --no-db --data " + dir.file("moved.txt"), &err), 0) << err;
  // Changed: both fingerprints in the message.
  { std::ofstream(dir.file("moved.txt"), std::ios::app) << "one more line\n"; }
  EXPECT_EQ(run_snip("train --resume " + ck + " --steps 5 --no-db --data " + dir.file("moved.txt"), &err), 1);
  EXPECT_NE(err.find("is not the one"), std::string::npos) << err;
  const size_t was = err.find("the checkpoint's corpus is "), now = err.find(", this one is ");
  ASSERT_NE(was, std::string::npos) << err;
  ASSERT_NE(now, std::string::npos) << err;
  EXPECT_NE(err.find(" tokens, fnv1a64 ", was), std::string::npos) << err;
  EXPECT_NE(err.find(" tokens, fnv1a64 ", now), std::string::npos) << err;
}

// An older checkpoint (no corpus fingerprint, no adaptive settings) still resumes, with warnings.
TEST(ResumeIsTheSameRun, OlderCheckpointWithoutTheNewKeysResumesWithAWarning) {
  TempDir dir;
  const std::string ck = dir.file("ck");
  ASSERT_EQ(run_snip("train --preset tiny --steps 2 --batch-size 2 --seq-len 32 --eval-every 0 --no-db --out " + ck),
            0);
  nlohmann::json state = snip::read_trainer_state(ck);
  state["data"].erase("fingerprint");
  state["data"].erase("path");
  state.erase("extra");
  { std::ofstream(ck + "/trainer_state.json") << state.dump(2); }
  std::string err;
  ASSERT_EQ(run_snip("train --resume " + ck + " --steps 3 --no-db", &err), 0) << err;
  EXPECT_NE(err.find("saved without a corpus fingerprint"), std::string::npos) << err;
  EXPECT_NE(err.find("saved without its adaptive settings"), std::string::npos) << err;
}

// What would fail at the first evaluation fails before step 1, with nothing trained.
TEST(CheckedBeforeStepOne, TrainingThatCannotEvaluateFailsBeforeTheFirstStep) {
  TempDir dir;
  const std::string db = dir.file("w.db");
  std::string err;
  EXPECT_EQ(
      run_snip("train --preset tiny --steps 50 --batch-size 2 --seq-len 32 --eval-every 10 --eval-batches 0 --db " +
                   db + " --out " + dir.file("ck1"),
               &err),
      1);
  EXPECT_NE(err.find("--eval-batches"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir.file("ck1") + "/model.safetensors"));
  // 2000 bytes: the validation 5% (100 tokens) is less than one 2x64 batch.
  { std::ofstream(dir.file("small.txt")) << std::string(2000, 'a'); }
  EXPECT_EQ(run_snip("train --preset tiny --steps 50 --batch-size 2 --seq-len 64 --eval-every 10 --data " +
                         dir.file("small.txt") + " --db " + db + " --out " + dir.file("ck2"),
                     &err),
            1);
  EXPECT_NE(err.find("validation stream"), std::string::npos) << err;
  EXPECT_NE(err.find("--eval-every 0"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir.file("ck2") + "/model.safetensors"));
  snip::Store store(db);
  for (const auto& r : store.runs()) {
    EXPECT_EQ(r.status, snip::RunStatus::failed);
    EXPECT_EQ(r.metric_rows, 0) << "nothing was trained";
  }
}

// A failure after step 1 saves the last good state and marks the run failed with the reason.
TEST(CheckedBeforeStepOne, FailureAfterStepOneSavesTheLastGoodState) {
  TempDir dir;
  const std::string db = dir.file("w.db"), ck = dir.file("ck");
  std::string err;
  // A learning rate this large makes the second step's loss non-finite.
  EXPECT_EQ(run_snip("train --preset tiny --steps 20 --batch-size 2 --seq-len 32 --warmup 0 --schedule constant "
                     "--lr 1e30 --eval-every 0 --db " +
                         db + " --out " + ck,
                     &err),
            1);
  EXPECT_NE(err.find("the last good state, step"), std::string::npos) << err;
  ASSERT_TRUE(fs::exists(ck + "/trainer_state.json")) << err;
  const int64_t step = snip::read_trainer_state(ck).at("step").get<int64_t>();
  EXPECT_GE(step, 1);
  snip::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, snip::RunStatus::failed);
  EXPECT_NE(runs[0].status_message.find("the last good state, step " + std::to_string(step)), std::string::npos)
      << runs[0].status_message;
  const auto cps = store.checkpoints(runs[0].id);
  ASSERT_EQ(cps.size(), 1u);
  EXPECT_EQ(cps[0].step, step);
  EXPECT_EQ(runs[0].metric_rows, step) << "every trained step has its row";
}

// Another connection holds the write lock from the first step; the training goes on, keeps
// its rows and writes them all when the lock is released (at a later step, told by the
// recorder's busy callback, not by a clock).
TEST(BusyDatabase, TrainingSurvivesAWriteLockHeldByAnotherConnection) {
  TempDir dir;
  const std::string db = dir.file("w.db");
  snip::Trainer trainer(resume_config());
  snip::Store store(db, {.busy_timeout_ms = 20});
  snip::RunDescription d;
  d.name = "busy";
  const snip::RecordedRun run = snip::open_recorded_run(store, trainer, d, std::nullopt);
  sqlite3* holder = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &holder), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(holder, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  bool held = true;
  int64_t busy_at = 0;
  int warnings = 0;
  snip::RecordedTrainingOptions o;
  o.checkpoint_dir = dir.file("ck");
  o.recorder.flush_rows = 1;
  o.recorder.busy_retry_ms = 1;
  o.recorder.busy_retry_max_ms = 1;
  o.recorder.on_busy = [&](const std::string&) { ++warnings; };
  snip::RecordedTraining training(trainer, &store, run.id, o);
  training.on_step = [&](const snip::StepMetrics& m, const snip::MetricRow&) {
    if (warnings > 0 && busy_at == 0) busy_at = m.step;
    if (held && busy_at > 0 && m.step >= busy_at + 4) {  // several steps trained while locked
      EXPECT_EQ(sqlite3_exec(holder, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
      held = false;
    }
    return true;
  };
  const snip::TrainingOutcome out = training.run();
  sqlite3_close(holder);
  EXPECT_TRUE(out.finished);
  EXPECT_GE(busy_at, 1);
  EXPECT_EQ(warnings, 1);
  EXPECT_FALSE(held);
  const snip::RunInfo r = store.run(run.id);
  EXPECT_EQ(r.status, snip::RunStatus::finished);
  EXPECT_EQ(r.metric_rows, kSteps) << "no row lost";
  EXPECT_EQ(store.metrics(run.id).size(), size_t(kSteps));
}

// What is stored is what happened: a resume under --plan records that plan from the next step;
// `snip runs --json` lists each run's checkpoints as `snip show --json` does; a name with a
// control character is refused where names enter the store, and an old one prints as one line.
TEST(StoredIsTrue, ResumeUnderAPlanRecordsItAndRunsJsonListsCheckpoints) {
  TempDir dir;
  const std::string db = dir.file("w.db"), ck = dir.file("ck"), plan = dir.file("plan.json");
  { std::ofstream(plan) << kPlanJson; }
  const std::string model = "--preset tiny --batch-size 2 --seq-len 32 --eval-every 0 --db " + db;
  std::string err;
  ASSERT_EQ(run_snip("train " + model + " --steps 3 --out " + ck, &err), 0) << err;
  ASSERT_EQ(run_snip("train --resume " + ck + " --plan " + plan + " --steps 5 --db " + db, &err), 0) << err;
  snip::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  const auto timeline = store.plan_timeline(runs[0].id);
  ASSERT_EQ(timeline.size(), 1u) << "the plan the resumed steps trained under is recorded";
  EXPECT_EQ(timeline[0].first_step, 4);
  EXPECT_EQ(store.plan(timeline[0].plan_id).plan.method, "manual-test");
  EXPECT_EQ(store.plan(timeline[0].plan_id).plan.layers.count("model.layers.0.mlp.up_proj"), 1u);
  // The run's stored configuration is the one it continued with.
  EXPECT_EQ(runs[0].spec.train_config.at("steps"), 5);
  EXPECT_EQ(runs[0].spec.train_config.at("plan").at("method"), "manual-test");
  EXPECT_EQ(runs[0].spec.method, "manual-test");

  const std::string out = dir.file("runs.json");
  ASSERT_EQ(std::system((std::string(SNIP_BIN) + " runs --json --db " + db + " > " + out).c_str()), 0);
  const nlohmann::json listed = nlohmann::json::parse(file_bytes(out));
  ASSERT_EQ(std::system((std::string(SNIP_BIN) + " show --json --run 1 --db " + db + " > " + out).c_str()), 0);
  const nlohmann::json shown = nlohmann::json::parse(file_bytes(out));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0]["checkpoints"].size(), 1u);  // the folder holds step 5 (it replaced step 3's)
  EXPECT_EQ(listed[0]["checkpoints"], shown["checkpoints"]);
}

TEST(StoredIsTrue, ControlCharactersInNamesCannotForgeRows) {
  TempDir dir;
  const std::string db = dir.file("w.db");
  std::string err;
  EXPECT_EQ(run_snip("train --preset tiny --steps 1 --batch-size 2 --seq-len 32 --eval-every 0 --db " + db + " --out " +
                         dir.file("ck") + " --name \"$(printf 'a\\n    9  forged  finished')\"",
                     &err),
            1);
  EXPECT_NE(err.find("contains a control character"), std::string::npos) << err;
  // A name stored by an older version: printed escaped, on one line.
  {
    snip::Store store(db);
    snip::RunSpec spec;
    spec.name = "x";
    spec.dims = snip::preset_config("tiny").dims();
    store.create_run(spec);
    EXPECT_THROW(store.set_run_name(1, "a\nb"), snip::Error);
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "UPDATE runs SET name = 'a' || char(10) || '    9  forged'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(raw);
  const std::string out = dir.file("runs.txt");
  ASSERT_EQ(std::system((std::string(SNIP_BIN) + " runs --db " + db + " > " + out).c_str()), 0);
  const std::string text = file_bytes(out);
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << text;  // header + one run
  EXPECT_NE(text.find("a\\n    9  forged"), std::string::npos) << text;
}

namespace {

// `snip train --resume DIR` alone keeps the run's checkpoint interval (--save-every), carried
// by the checkpoint: a resumed run that saved only at its end lost everything since the resume
// point when it was killed (found by a SIGKILL loop over an adaptive run).
TEST(ResumeIsTheSameRun, ResumeKeepsTheCheckpointInterval) {
  TempDir d;
  const std::string db = d.file("w.db"), ck = d.file("ck");
  const std::string common = " --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 --save-every 2";
  std::string err;
  ASSERT_EQ(run_snip("train" + common + " --steps 4 --out " + ck + " --db " + db, &err), 0) << err;
  ASSERT_EQ(run_snip("train --resume " + ck + " --steps 8 --db " + db, &err), 0) << err;
  snip::Store store(db);
  const std::vector<snip::RunInfo> runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  // The resumed run saved with the interval its checkpoint carried, and its last checkpoint carries
  // it on. (One folder holds one checkpoint: the store lists the folder once, at its last step.)
  const nlohmann::json state = nlohmann::json::parse(file_bytes(ck + "/trainer_state.json"));
  EXPECT_EQ(state.at("step"), 8);
  EXPECT_EQ(state.at("extra").at("save_every"), 2) << state.dump();
  const std::vector<snip::Checkpoint> listed = store.checkpoints(runs[0].id);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].step, 8);
}

}  // namespace
