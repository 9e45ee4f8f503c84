// A one-node Slurm cluster for a test suite (scripts/slurm_cluster.sh, as root), a tiny checkpoint
// and the local compare every Slurm compare is held against. Without root or Slurm the suite's
// tests skip with the reason, except under CI=true, where a skip is a failure.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "run_command.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "snip/trainer.h"
#include "temp_dir.h"

namespace snip_test {

namespace fs = std::filesystem;

inline const std::string kCluster = std::string("bash ") + SNIP_SOURCE_DIR + "/scripts/slurm_cluster.sh";
inline const std::string kArgs =
    " --budget 0.5 --steps 3 --cooldown 1 --eval-batches 1 --replicates 2 --lambdas 0.1 --baselines uniform-fp4";

inline snip_test::CommandResult snip_cmd(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_BIN) + " " + args);
}

class SlurmCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const snip_test::CommandResult check = snip_test::run_shell(kCluster + " check");
    if (check.status != 0) {
      why_not_ = check.out;
      return;
    }
    cluster_ = new snip_test::TempDir("slurm-cluster");
    const snip_test::CommandResult start = snip_test::run_shell(kCluster + " start " + cluster_->path.string());
    const auto at = start.out.rfind("SLURM_CONF=");
    if (start.status != 0 || at == std::string::npos) {
      why_not_ = "the cluster did not start: " + start.out;
      return;
    }
    std::string conf = start.out.substr(at + 11);
    conf.erase(conf.find_last_not_of(" \n\r") + 1);
    ::setenv("SLURM_CONF", conf.c_str(), 1);
    make_checkpoint();
    const snip_test::CommandResult local =
        snip_cmd("compare --checkpoint " + ck() + kArgs + " --db " + (dir() / "local.db").string());
    if (local.status != 0) why_not_ = "the local compare failed: " + local.out;
  }
  static void TearDownTestSuite() {
    if (cluster_) snip_test::run_shell(kCluster + " stop " + cluster_->path.string());
    delete cluster_;
    cluster_ = nullptr;
  }
  void SetUp() override {
    if (why_not_.empty()) return;
    if (const char* ci = std::getenv("CI"); ci && std::string(ci) == "true")
      FAIL() << "CI=true needs the Slurm tests to run: " << why_not_;
    GTEST_SKIP() << why_not_;
  }

  static fs::path dir() { return cluster_->path / "work"; }
  static std::string ck() { return (dir() / "ck").string(); }
  static void make_checkpoint() {
    fs::create_directories(dir());
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

  // Every stored training of the database's only compare: (arm, replicate) -> its losses' bits.
  static std::map<std::pair<std::string, int64_t>, std::vector<uint64_t>> table(const std::string& db) {
    snip::Store s(db, {.read_only = true});
    std::map<std::pair<std::string, int64_t>, std::vector<uint64_t>> t;
    const auto compares = s.list_compares();
    EXPECT_EQ(compares.size(), 1u);
    if (compares.empty()) return t;
    const snip::CompareRecord c = s.compare(compares.front().id);
    EXPECT_EQ(c.status, snip::RunStatus::finished) << c.status_message;
    auto bits = [](double v) {
      uint64_t u;
      std::memcpy(&u, &v, sizeof u);
      return u;
    };
    for (const snip::StoredCompareReplicate& x : s.compare_replicates(c.id)) {
      std::vector<uint64_t>& v = t[{c.rows.at(size_t(x.position)).method, x.replicate}];
      v = {bits(x.result.train_loss_last), bits(x.result.val_loss_plan), bits(x.result.val_loss_bf16)};
      for (double l : x.result.train_curve) v.push_back(bits(l));
    }
    return t;
  }
  static std::string local_db() { return (dir() / "local.db").string(); }

  static inline snip_test::TempDir* cluster_ = nullptr;
  static inline std::string why_not_;
};

}  // namespace snip_test
