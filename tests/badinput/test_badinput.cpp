// Tests backing rows of docs/BAD_INPUT.md that no other area's test covers: what a user sees
// (message and exit status of the real `snip` binary) for broken checkpoints, databases, token
// files, statistics, costs, infeasible budgets and bad command-line values, plus the fuzzers'
// regression inputs. Regression tests name the bug they guard against (see docs/BAD_INPUT.md).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "run_command.h"
#include "snip/error.h"
#include "snip/plan.h"
#include "snip/stats.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = snip_test::CommandResult;

Result run(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_EXE) + " " + args);
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f << bytes;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// An llm.c token file: 256 int32 header {magic, version, count, 0...} then uint16 tokens.
std::string token_file(int32_t count_in_header, const std::vector<uint16_t>& tokens) {
  std::vector<int32_t> header(256, 0);
  header[0] = 20240520;
  header[1] = 1;
  header[2] = count_in_header;
  std::string s(reinterpret_cast<const char*>(header.data()), header.size() * 4);
  s.append(reinterpret_cast<const char*>(tokens.data()), tokens.size() * 2);
  return s;
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "expected \"" << (needle) << "\" in:\n" << (haystack)

// One tiny trained checkpoint and one statistics round shared by every test (about 5 s).
class BadInput : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = tmp_.emplace("badinput").path;
    const Result t =
        run("train --preset tiny --steps 2 --batch-size 2 --seq-len 16 --eval-every 0 --out " + (dir_ / "ck").string());
    ASSERT_EQ(t.status, 0) << t.out;
    const Result c =
        run("collect --checkpoint " + (dir_ / "ck").string() + " --batch-size 2 --seq-len 16 " +
            "--noise-passes 1 --out " + (dir_ / "stats.json").string() + " --db " + (dir_ / "good.db").string());
    ASSERT_EQ(c.status, 0) << c.out;
  }
  static void TearDownTestSuite() { tmp_.reset(); }

  // A copy of the checkpoint that a test may damage.
  static std::string checkpoint_copy(const std::string& name) {
    fs::copy(dir_ / "ck", dir_ / name, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    return (dir_ / name).string();
  }
  static std::string p(const std::string& name) { return (dir_ / name).string(); }
  static std::string stats() { return p("stats.json"); }

  static inline std::optional<snip_test::TempDir> tmp_;  // owns dir_ for the suite
  static inline fs::path dir_;
};

// ---- checkpoints -------------------------------------------------------------------------

TEST_F(BadInput, TruncatedCheckpointWeightsNameTheFile) {
  const std::string ck = checkpoint_copy("ck_trunc");
  const std::string bytes = read_bytes(fs::path(ck) / "model.safetensors");
  write_bytes(fs::path(ck) / "model.safetensors", bytes.substr(0, 1000));
  const Result r = run("eval --checkpoint " + ck);
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "error: " + ck + "/model.safetensors: truncated header");
}

TEST_F(BadInput, CheckpointWithoutTrainerStateCannotResume) {
  const std::string ck = checkpoint_copy("ck_nostate");
  fs::remove(fs::path(ck) / "trainer_state.json");
  const Result r = run("train --resume " + ck);
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "trainer_state.json");
  EXPECT_FALSE(fs::exists(fs::path(ck) / "trainer_state.json"));  // nothing half-written
}

TEST_F(BadInput, MissingCheckpointDirectory) {
  const Result r = run("eval --checkpoint " + p("no_such_ck"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "is not a directory");
}

// ---- token files -------------------------------------------------------------------------

TEST_F(BadInput, TokenFileShorterThanItsHeaderSaysIsRefusedByTrain) {
  write_bytes(p("short.bin"), token_file(1000, {1, 2}));
  const Result r = run("train --preset tiny --steps 1 --data " + p("short.bin") + " --out " + p("x_short"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "header says 1000 tokens (2000 bytes) but 4 bytes follow the header");
  EXPECT_FALSE(fs::exists(p("x_short")));
}

TEST_F(BadInput, TokenIdsBeyondTheVocabularyAreRefusedByTrain) {
  write_bytes(p("bigid.bin"), token_file(3, {1, 2, 9999}));
  const Result r = run("train --preset tiny --steps 1 --data " + p("bigid.bin") + " --out " + p("x_big"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "token id 9999 at position 2 is >= vocab_size 256");
}

// ---- databases (the CLI's wording; storage/ tests cover the Store itself) ----------------

TEST_F(BadInput, DatabaseFilesThatAreNotStoresLeaveTheFileUntouched) {
  write_bytes(p("text.db"), "not a database");
  Result r = run("runs --db " + p("text.db"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "not a SQLite database");
  EXPECT_EQ(read_bytes(p("text.db")), "not a database");

  const std::string good = read_bytes(p("good.db"));
  ASSERT_GT(good.size(), 8192u);
  write_bytes(p("trunc.db"), good.substr(0, 4096));
  r = run("runs --db " + p("trunc.db"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "truncated SQLite database (4096 bytes");
  EXPECT_EQ(read_bytes(p("trunc.db")).size(), 4096u);

  r = run("runs --db " + dir_.string());
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "is a directory");

  r = run("runs --db " + p("missing_dir/x.db"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "no such database");
}

// ---- statistics, costs, plans, budgets ----------------------------------------------------

TEST_F(BadInput, StatisticsOfAnotherModelNameTheLayer) {
  std::string s = read_bytes(stats());
  const std::string from = "model.layers.1.mlp.down_proj", to = "model.layers.5.mlp.down_proj";
  ASSERT_NE(s.find(from), std::string::npos);
  s.replace(s.find(from), from.size(), to);
  write_bytes(p("foreign_stats.json"), s);
  const Result r = run("solve --stats " + p("foreign_stats.json") + " --budget 0.5");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "'model.layers.5.mlp.down_proj' is not a linear layer of a 2-block model");
}

TEST_F(BadInput, TruncatedStatisticsFileIsNotValidJson) {
  write_bytes(p("trunc_stats.json"), read_bytes(stats()).substr(0, 200));
  const Result r = run("solve --stats " + p("trunc_stats.json") + " --budget 0.5");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "trunc_stats.json: not valid JSON");
}

TEST_F(BadInput, CostsCsvRowsNameFileLineAndCause) {
  write_bytes(p("neg.csv"), "layer,precision,cost,flops\nmodel.layers.0.mlp.up_proj,fp8,-1,1e9\n");
  Result r = run("solve --costs " + p("neg.csv") + " --budget 0.5");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "neg.csv:2: cost -1 is negative");
  write_bytes(p("ovf.csv"), "layer,precision,cost,flops\nmodel.layers.0.mlp.up_proj,fp8,1e999,1\n");
  r = run("solve --costs " + p("ovf.csv") + " --budget 0.5");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "ovf.csv:2: cost is 1e999; it must be finite");
}

TEST_F(BadInput, BudgetOutsideTheUnitIntervalOrNan) {
  for (const char* b : {"1.5", "-0.1"}) {
    const Result r = run("solve --stats " + stats() + " --budget " + b);
    EXPECT_EQ(r.status, 1) << b;
    EXPECT_CONTAINS(r.out, "is outside [0, 1]");
  }
  // NaN (and inf) never reach the planner: every floating-point option must be finite (option_rules.h).
  const Result r = run("solve --stats " + stats() + " --budget nan");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "--budget must be a finite number (got nan)");
}

TEST_F(BadInput, BudgetUnreachableBecauseOfPinsIsInfeasible) {
  std::string pins;
  for (int b = 0; b < 2; ++b)
    for (const char* l : {"gate_proj", "up_proj", "down_proj"})
      pins += " --pin model.layers." + std::to_string(b) + ".mlp." + l + "=fp8";
  const Result r = run("solve --stats " + stats() + " --budget 0.5" + pins + " --out " + p("never.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "budget 0.5000 is unreachable: with the 6 pinned non-FP4 layers");
  EXPECT_CONTAINS(r.out, "remove pins or lower the budget");
  EXPECT_FALSE(fs::exists(p("never.json")));
}

TEST_F(BadInput, PinOfALayerOutsideTheModel) {
  const Result r = run("solve --stats " + stats() + " --budget 0.5 --pin model.layers.7.mlp.down_proj=fp8");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "names a layer that is not in the cost table");
}

TEST_F(BadInput, PlanWithUnknownPrecisionIsRefusedByTrain) {
  write_bytes(p("fp6.json"), R"({"format":"snip-plan/1","layers":{"model.layers.0.mlp.up_proj":"fp6"}})");
  const Result r = run("train --preset tiny --steps 1 --plan " + p("fp6.json") + " --out " + p("x_fp6"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "layer model.layers.0.mlp.up_proj: unknown precision 'fp6'");
  EXPECT_FALSE(fs::exists(p("x_fp6")));
}

// ---- command-line arguments -------------------------------------------------------------

TEST_F(BadInput, UnknownOptionAndExcludedPairAreCli11Errors) {
  Result r = run("train --preset tiny --bogus");
  EXPECT_EQ(r.status, 109);  // CLI11's ExtrasError
  EXPECT_CONTAINS(r.out, "The following argument was not expected: --bogus");
  write_bytes(p("any.csv"), "layer,precision,cost,flops\n");
  r = run("solve --stats " + stats() + " --costs " + p("any.csv") + " --budget 0.5");
  EXPECT_EQ(r.status, 108);  // CLI11's ExcludesError
  EXPECT_CONTAINS(r.out, "--stats excludes --costs");
}

TEST_F(BadInput, NonPositiveBatchAndTooLongSequence) {
  Result r = run("train --preset tiny --steps 1 --batch-size 0 --out " + p("x_b0"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "--batch-size must be ≥ 1 (got 0)");  // option_rules.h, before the engine's own check
  r = run("train --preset tiny --steps 1 --batch-size 2 --seq-len 65 --out " + p("x_t"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "sequence length 65 exceeds max_position_embeddings = 64");
}

TEST_F(BadInput, UnknownNamesListTheChoicesAndBadTrainingValuesAreRefused) {
  struct Case {
    std::string args, needle;
  };
  const std::vector<Case> cases = {
      {"train --preset huge --steps 1", "unknown model preset \"huge\"; choose one of: tiny, small, medium"},
      {"train --preset tiny --steps 1 --schedule linear",
       "unknown learning-rate schedule \"linear\"; choose constant or cosine"},
      {"train --preset tiny --steps 1 --lr -1", "learning rate must be a positive number"},
      {"train --preset tiny --steps 1 --lr nan", "--lr must be a finite number (got nan)"},
      {"train --preset tiny --steps 1 --warmup -4", "--warmup must be ≥ 0 (got -4)"},
      {"solve --stats " + stats() + " --budget 0.5 --method best", "unknown method 'best' (expected one of: snip,"},
  };
  for (const Case& c : cases) {
    const Result r = run(c.args + (c.args.rfind("train", 0) == 0 ? " --out " + p("x_names") : ""));
    EXPECT_EQ(r.status, 1) << c.args << "\n" << r.out;
    EXPECT_CONTAINS(r.out, c.needle);
    EXPECT_FALSE(fs::exists(p("x_names"))) << c.args;
  }
}

TEST_F(BadInput, BrokenTrainerStateOrConfigInACheckpoint) {
  const std::string a = checkpoint_copy("ck_state");
  write_bytes(fs::path(a) / "trainer_state.json", "{}");
  Result r = run("train --resume " + a);
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "trainer_state.json: not a snip trainer state");
  const std::string b = checkpoint_copy("ck_config");
  write_bytes(fs::path(b) / "config.json", "{\"hidden_size\":");
  r = run("eval --checkpoint " + b);
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, b + "/config.json: not valid JSON");
}

TEST_F(BadInput, ImportAndShowRefuseWhatTheyCannotUse) {
  fs::copy_file(p("good.db"), p("imp.db"), fs::copy_options::overwrite_existing);
  write_bytes(p("plan9.json"), R"({"format":"snip-plan/9","layers":{}})");
  Result r = run("import --db " + p("imp.db") + " " + p("plan9.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "format \"snip-plan/9\" cannot be imported (expected snip-plan/1 or snip-stats/1)");
  write_bytes(p("array.json"), "[1,2]");
  r = run("import --db " + p("imp.db") + " " + p("array.json"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "no \"format\" member");
  r = run("show --db " + p("imp.db") + " --run 42");
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "run 42 does not exist (list runs with `snip runs --db");
}

// Regression (found in the reliability pass, fixed): app/cmd_train.cpp turned a negative --steps into the default 500
// (`c.steps = o.steps > 0 ? o.steps : 500;`) and trains for minutes instead of refusing it.
TEST_F(BadInput, NegativeStepsAreRefused) {
  const Result r = run("train --preset tiny --batch-size 2 --seq-len 16 --steps -3 --out " + p("x_neg"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_CONTAINS(r.out, "--steps");
  EXPECT_FALSE(fs::exists(p("x_neg")));
}

// Regression (found in the reliability pass, fixed): `snip train` accepted --beta1 1.5 / --beta2 -0.5 (a meaningless
// AdamW), --clip -1 (silently no clipping; the help says 0 disables) and --save-every -1
// (silently never): engine/train/src/trainer.cpp validates lr, warmup, batch and steps only.
TEST_F(BadInput, OutOfRangeOptimizerOptionsAreRefused) {
  for (const char* opt : {"--clip -1", "--beta1 1.5", "--beta2 -0.5", "--save-every -1"}) {
    const Result r =
        run(std::string("train --preset tiny --batch-size 2 --seq-len 16 --steps 1 ") + opt + " --out " + p("x_opt"));
    EXPECT_EQ(r.status, 1) << opt << "\n" << r.out;
    fs::remove_all(p("x_opt"));
  }
}

// ---- regression inputs of the fuzzers (library level) -----------------------------------

// Regression (found by hand while cataloguing, reachable by fuzz_stats / fuzz_plan; fixed): a number too
// large for a double makes nlohmann::json throw out_of_range.406, which stats_from_json and
// plan_from_json do not catch (they catch json::parse_error only), so the user sees
// "error: [json.exception.out_of_range.406] number overflow parsing '1e999'" without the file
// name, and the fuzz targets abort on an uncaught exception.
// Fix: catch `const json::exception&` in engine/core/src/stats.cpp:40 and engine/core/src/plan.cpp:24.
TEST(BadInputRegression, StatsNumberOverflowIsASnipErrorNamingTheFile) {
  try {
    snip::stats_from_json(R"({"format":"snip-stats/1","step":1e999,"layers":[]})", "big.stats.json");
    FAIL() << "accepted a number that overflows a double";
  } catch (const snip::Error& e) {
    EXPECT_CONTAINS(std::string(e.what()), "big.stats.json");
  }
}

TEST(BadInputRegression, PlanNumberOverflowIsASnipErrorNamingTheFile) {
  try {
    snip::plan_from_json(R"({"format":"snip-plan/1","budget":1e999,"layers":{}})", "big.plan.json");
    FAIL() << "accepted a number that overflows a double";
  } catch (const snip::Error& e) {
    EXPECT_CONTAINS(std::string(e.what()), "big.plan.json");
  }
}

// The same class of input the config reader already handles (read_config_file catches
// json::exception): kept so the three JSON readers stay consistent.
TEST(BadInputRegression, ConfigNumberOverflowIsASnipError) {
  const snip_test::TempDir tmp("badinput-cfg");
  const fs::path f = tmp.path / "cfg.json";
  write_bytes(f, R"({"hidden_size": 1e999})");
  const Result r = run("train --config " + f.string() + " --steps 1 --out " + tmp.file("out"));
  EXPECT_EQ(r.status, 1);
  EXPECT_CONTAINS(r.out, "not valid JSON ([json.exception.out_of_range.406] number overflow");
}

}  // namespace
