// The experiment subcommands end to end (run from the snip build path, like tests/numerics):
// `snip collect` writes a snip-stats/1 file that round-trips and stores the round, `snip validate`
// and `snip compare` print one JSON object each, and bad input exits 1 with a message.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "exp_test_util.h"
#include "run_command.h"
#include "snip/stats.h"
#include "temp_dir.h"

#ifndef SNIP_BINARY
#error "SNIP_BINARY must be defined to the path of the built snip executable"
#endif

namespace fs = std::filesystem;

namespace {

using CliResult = snip_test::CommandResult;

// `snip <args>`, stdout only (progress goes to stderr).
CliResult run_snip(const std::string& args) {
  return snip_test::run_stdout(std::string(SNIP_BINARY) + " " + args);
}

class ExperimentCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = tmp_.emplace("exp-cli").path.string();
    snip::Trainer t(exptest::tiny_config("bf16", 10));
    t.run();
    t.save_checkpoint(dir_ + "/ck");
  }
  static void TearDownTestSuite() { tmp_.reset(); }
  static inline std::optional<snip_test::TempDir> tmp_;  // owns dir_ for the suite
  static inline std::string dir_;
};

TEST_F(ExperimentCli, CollectWritesARoundTrippingStatsFileAndStoresIt) {
  const std::string out = dir_ + "/stats.json", db = dir_ + "/exp.db";
  const CliResult r = run_snip("collect --checkpoint " + dir_ + "/ck --out " + out + " --db " + db + " --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["step"], 10);
  EXPECT_EQ(j["estimates"].size(), 14u);
  EXPECT_TRUE(j["stats_round_id"].is_number_integer());
  std::ifstream f(out);
  std::stringstream s;
  s << f.rdbuf();
  const snip::StatsRound round = snip::stats_from_json(s.str(), out);
  EXPECT_EQ(round.layers.size(), 14u);
  EXPECT_EQ(snip::stats_from_json(snip::stats_to_json(round)), round);
  EXPECT_TRUE(fs::exists(db));
}

TEST_F(ExperimentCli, ValidateAndComparePrintJson) {
  const CliResult v = run_snip("validate --checkpoint " + dir_ + "/ck --batches 1 --no-weight-truth --json");
  ASSERT_EQ(v.status, 0) << v.out;
  const nlohmann::json jv = nlohmann::json::parse(v.out);
  EXPECT_EQ(jv["entries"].size(), 28u);
  EXPECT_FALSE(jv["correlations"].empty());
  const CliResult c = run_snip("compare --checkpoint " + dir_ +
                               "/ck --budget 0.5 --steps 2 --cooldown 1 --eval-batches 1 --seeds 1 --no-db --json");
  ASSERT_EQ(c.status, 0) << c.out;
  const nlohmann::json jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(jc["rows"].size(), 13u);  // one random seed; no control arms (the replicates are the noise)
  EXPECT_EQ(jc["replicates"], 3);     // the default
  EXPECT_EQ(jc["rows"][0]["method"], "uniform-bf16");
}

TEST_F(ExperimentCli, CompareTakesLambdasBaselinesAndAGranularityRecipe) {
  const CliResult c = run_snip("compare --checkpoint " + dir_ +
                               "/ck --budget 0.5 --steps 1 --cooldown 0 --eval-batches 1 --replicates 1 "
                               "--lambdas 0,0.1 --baselines uniform-fp4 --recipe block:32:sr --no-db --json");
  ASSERT_EQ(c.status, 0) << c.out;
  const nlohmann::json jc = nlohmann::json::parse(c.out);
  EXPECT_EQ(jc["recipe"], "block:32:sr");
  ASSERT_EQ(jc["rows"].size(), 4u);  // bf16, two SNIP λ, uniform FP4
  EXPECT_EQ(jc["rows"][3]["method"], "uniform-fp4");
  EXPECT_EQ(run_snip("compare --checkpoint " + dir_ + "/ck --steps 1 --baselines hawk").status, 1);
  EXPECT_EQ(run_snip("compare --checkpoint " + dir_ + "/ck --steps 1 --recipe block:1").status, 1);
  EXPECT_EQ(run_snip("validate --checkpoint " + dir_ + "/ck --batches 1 --recipe channel:rr").status, 1);
}

TEST_F(ExperimentCli, BadInputExitsOne) {
  EXPECT_EQ(run_snip("collect --checkpoint " + dir_ + "/missing").status, 1);
  EXPECT_EQ(run_snip("validate --checkpoint " + dir_ + "/ck --batches 9999").status,
            1);  // more than the validation stream holds
  EXPECT_NE(run_snip("compare --checkpoint " + dir_ + "/ck --budget 1.5").status, 0);
}

}  // namespace
