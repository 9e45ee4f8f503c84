// End-to-end tests of `snip train` and `snip eval` as a user runs them: JSON lines per step,
// checkpoints, Ctrl-C (SIGINT) saving a checkpoint, resume, eval with --grads-out, bad input.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>

#include "run_command.h"
#include "snip/atomic_file.h"
#include "snip/safetensors.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = snip_test::CommandResult;

// Runs `snip ARGS` through the shell, capturing stdout (stderr goes to a file we append).
Result run(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_EXE) + " " + args);
}

using snip_test::TempDir;

// A constant schedule without warmup: extending a run with --steps on resume keeps its learning rates.
const std::string kTiny =
    "--preset tiny --batch-size 2 --seq-len 32 --eval-every 0 --seed 3 --schedule constant --warmup 0";

TEST(Cli, TrainJsonLinesResumeAndEval) {
  TempDir d;
  const Result r = run("train " + kTiny + " --steps 4 --json --precision fp32 --out " + (d / "a"));
  ASSERT_EQ(r.status, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  int steps = 0;
  double last_loss = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line[0] != '{') continue;
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["step"].get<int>(), ++steps);
    last_loss = j["train_loss"];
  }
  EXPECT_EQ(steps, 4);
  EXPECT_TRUE(fs::exists(d / "a/model.safetensors"));

  // resume to 6 steps, then a straight 6-step run: same final loss, bit for bit (printed with 17 digits by JSON)
  ASSERT_EQ(run("train --resume " + (d / "a") + " --steps 6 --json").status, 0);
  const Result straight = run("train " + kTiny + " --steps 6 --json --precision fp32 --out " + (d / "b"));
  ASSERT_EQ(straight.status, 0) << straight.out;
  const Result e1 = run("eval --checkpoint " + (d / "a") + " --batch-size 2 --seq-len 32 --batches 3 --json");
  const Result e2 = run("eval --checkpoint " + (d / "b") +
                        " --batch-size 2 --seq-len 32 --batches 3 --json --grads-out " + (d / "g.safetensors"));
  ASSERT_EQ(e1.status, 0) << e1.out;
  ASSERT_EQ(e2.status, 0) << e2.out;
  const auto j1 = nlohmann::json::parse(e1.out), j2 = nlohmann::json::parse(e2.out);
  EXPECT_EQ(j1["loss"].get<double>(), j2["loss"].get<double>());
  EXPECT_EQ(j1["tokens"].get<int>(), 3 * 2 * 32);
  const auto g = snip::SafetensorsFile::open(d / "g.safetensors");
  EXPECT_TRUE(g.has("model.layers.1.mlp.down_proj.weight"));
  EXPECT_TRUE(g.has("lm_head.weight"));
  EXPECT_GT(last_loss, 0);
}

TEST(Cli, CtrlCSavesACheckpointAndExitsWithTheShellsStatusForIt) {
  TempDir d;
  const std::string log = d / "log.txt";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string out = d / "ck", steps = "100000";
    freopen(log.c_str(), "w", stderr);
    signal(SIGINT, SIG_DFL);  // a background test runner may have it ignored (snip then keeps ignoring it)
    execl(SNIP_EXE, SNIP_EXE, "train", "--preset", "tiny", "--batch-size", "2", "--seq-len", "32", "--eval-every", "0",
          "--steps", steps.c_str(), "--out", out.c_str(), (char*)nullptr);
    _exit(127);
  }
  // wait until training runs (the progress log shows step lines), then interrupt
  for (int i = 0; i < 600; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (fs::exists(log) && snip::read_file(log).find("step 1/") != std::string::npos) break;
  }
  kill(pid, SIGINT);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(WIFEXITED(st)) << "killed by a signal instead of exiting";
  EXPECT_EQ(WEXITSTATUS(st), 128 + SIGINT) << snip::read_file(log);  // 130, as a shell reports Ctrl-C
  EXPECT_NE(snip::read_file(log).find("interrupted at step"), std::string::npos) << snip::read_file(log);
  const auto state = nlohmann::json::parse(snip::read_file(d / "ck/trainer_state.json"));
  EXPECT_GE(state["step"].get<int>(), 1);
  EXPECT_LT(state["step"].get<int>(), 100000);
}

// --plan ID trains under a plan of the database, as the Run form's "Stored plan" does: the run's
// plan timeline names that plan (not a copy); an id the database lacks, or one with --no-db, is
// refused before anything is trained.
TEST(Cli, APlanOfTheDatabaseIsGivenByItsId) {
  TempDir d;
  const std::string db = d / "w.db";
  std::string layers;
  for (int b = 0; b < 2; ++b)
    for (const char* m : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      layers += std::string(layers.empty() ? "" : ",") + "\"model.layers." + std::to_string(b) + "." + m +
                "\": {\"fprop\": \"fp4\", \"dgrad\": \"fp4\", \"wgrad\": \"fp4\"}";
  snip::write_file_atomic(d / "p.json",
                          "{\"format\": \"snip-plan/1\", \"method\": \"manual\", \"layers\": {" + layers + "}}");
  ASSERT_EQ(run("import " + (d / "p.json") + " --db " + db).status, 0);
  const Result r = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "ck") + " --plan 1");
  ASSERT_EQ(r.status, 0) << r.out;
  const Result shown = run("show --run 1 --db " + db);
  EXPECT_NE(shown.out.find("plan 1 (manual"), std::string::npos) << shown.out;
  const Result missing = run("train " + kTiny + " --steps 2 --db " + db + " --out " + (d / "ck2") + " --plan 7");
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.out.find("plan 7 does not exist"), std::string::npos) << missing.out;
  const Result no_db = run("train " + kTiny + " --steps 2 --no-db --out " + (d / "ck3") + " --plan 1");
  EXPECT_EQ(no_db.status, 1);
  EXPECT_NE(no_db.out.find("--no-db opens none"), std::string::npos) << no_db.out;
  EXPECT_FALSE(fs::exists(d / "ck2"));
}

TEST(Cli, BadInputIsAClearErrorAndNonZeroExit) {
  TempDir d;
  snip::write_file_atomic(d / "bad.json",
                          R"({"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
                              "num_attention_heads": 5, "vocab_size": 256})");
  Result r = run("train --config " + (d / "bad.json") + " --steps 1 --out " + (d / "x"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("does not divide hidden_size"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(d / "x"));
  r = run("train " + kTiny + " --steps 1 --precision fp5 --out " + (d / "y"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("fp5"), std::string::npos) << r.out;
  r = run("eval --checkpoint " + (d / "missing"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("missing"), std::string::npos) << r.out;
  snip::write_file_atomic(d / "plan.json",
                          R"({"format": "snip-plan/1", "layers": {"model.layers.9.mlp.up_proj":
                              {"fprop": "fp4", "dgrad": "fp4", "wgrad": "fp4"}}})");
  r = run("train " + kTiny + " --steps 1 --plan " + (d / "plan.json") + " --out " + (d / "z"));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.out.find("model.layers.9"), std::string::npos) << r.out;
}

}  // namespace
