// Compares on a cluster: `snip compare --executor slurm` on a real one-node Slurm cluster
// (scripts/slurm_cluster.sh: munge, slurmctld and slurmd as root, state in a temporary folder).
// The table it stores equals the local compare's bit for bit; a stopped submitter re-attaches to
// its array; a cancelled task is named with Slurm's word for it and resubmitted alone; a task
// refuses another snip build and another checkpoint. Without root or Slurm the cluster tests skip
// with the reason, except under CI=true, where a skip is a failure.
//
// Nothing waits on time: tasks are submitted held (--sbatch-args --hold) where the test acts on
// them, and the test reads the submitter's output line by line for the job id.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_command.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "snip/trainer.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

const std::string kCluster = std::string("bash ") + SNIP_SOURCE_DIR + "/scripts/slurm_cluster.sh";
const std::string kArgs =
    " --budget 0.5 --steps 3 --cooldown 1 --eval-batches 1 --replicates 2 --lambdas 0.1 --baselines uniform-fp4";

snip_test::CommandResult snip_cmd(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_BIN) + " " + args);
}

// A background `snip compare`: its pid and its merged output, read line by line.
struct Submitter {
  FILE* out = nullptr;
  pid_t pid = 0;
  explicit Submitter(const std::string& args) {
    out = ::popen(("exec 2>&1; echo $$; exec " + std::string(SNIP_BIN) + " " + args).c_str(), "r");
    char line[64] = {};
    if (out && std::fgets(line, sizeof line, out)) pid = pid_t(std::atol(line));
  }
  // Reads until a line containing `what`; returns that line ("" at the end of the output).
  std::string wait_for(const std::string& what, std::string* all = nullptr) {
    std::string line;
    for (int c; (c = std::fgetc(out)) != EOF;) {
      line += char(c);
      if (c != '\n' && c != '\r') continue;
      if (all) *all += line;
      if (line.find(what) != std::string::npos) return line;
      line.clear();
    }
    return "";
  }
  int finish(std::string* rest) {
    wait_for("\x01never", rest);
    const int status = ::pclose(out);
    out = nullptr;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }
  ~Submitter() {
    if (out) ::pclose(out);
  }
};

int64_t job_of(const std::string& line) {
  const auto at = line.find("job array ");
  return at == std::string::npos ? 0 : std::atoll(line.c_str() + at + 10);
}

class SlurmCompare : public ::testing::Test {
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

TEST_F(SlurmCompare, ACompareOnSlurmStoresTheLocalTableBitForBit) {
  const std::string db = (dir() / "same.db").string();
  const snip_test::CommandResult r = snip_cmd("compare --executor slurm --checkpoint " + ck() + kArgs + " --db " + db);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("submitted Slurm job array"), std::string::npos) << r.out;
  const auto local = table(local_db()), slurm = table(db);
  EXPECT_EQ(local.size(), 6u);  // uniform-bf16, snip λ=0.1, uniform-fp4 × 2 replicates
  EXPECT_EQ(slurm, local);
  // The printed table is the local one's too, line for line after the header.
  const snip_test::CommandResult a = snip_cmd("show --compare 1 --db " + local_db());
  const snip_test::CommandResult b = snip_cmd("show --compare 1 --db " + db);
  auto rows = [](const std::string& s) { return s.substr(std::min(s.find("  method "), s.size())); };
  EXPECT_EQ(rows(b.out), rows(a.out));
  // Every task's result was written by a task, never the database: the work folder has them.
  EXPECT_EQ(std::distance(fs::directory_iterator(db + ".slurm/compare-1/results"), fs::directory_iterator{}), 6);
}

TEST_F(SlurmCompare, AStoppedSubmitterReattachesToItsArrayOnResume) {
  const std::string db = (dir() / "stop.db").string();
  Submitter sub("compare --executor slurm --sbatch-args --hold --checkpoint " + ck() + kArgs + " --db " + db);
  const int64_t job = job_of(sub.wait_for("submitted Slurm job array"));
  ASSERT_GT(job, 0);
  ::kill(sub.pid, SIGINT);
  std::string rest;
  const int code = sub.finish(&rest);
  EXPECT_NE(code, 0) << rest;
  EXPECT_NE(rest.find("--resume 1"), std::string::npos) << rest;
  // The array outlived its submitter; released now, it runs with no one waiting.
  ASSERT_EQ(snip_test::run_shell("scontrol release " + std::to_string(job)).status, 0);
  const snip_test::CommandResult r = snip_cmd("compare --resume 1 --db " + db);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("re-attaching to Slurm job array " + std::to_string(job)), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("submitted Slurm job array"), std::string::npos) << "resubmitted instead:\n" << r.out;
  EXPECT_EQ(table(db), table(local_db()));
}

TEST_F(SlurmCompare, ACancelledTaskIsNamedAndAResumeTrainsOnlyIt) {
  const std::string db = (dir() / "cancel.db").string();
  Submitter sub("compare --executor slurm --sbatch-args --hold --checkpoint " + ck() + kArgs + " --db " + db);
  const int64_t job = job_of(sub.wait_for("submitted Slurm job array"));
  ASSERT_GT(job, 0);
  ASSERT_EQ(snip_test::run_shell("scancel " + std::to_string(job) + "_4").status, 0);
  ASSERT_EQ(snip_test::run_shell("scontrol release " + std::to_string(job)).status, 0);
  std::string rest;
  const int code = sub.finish(&rest);
  EXPECT_NE(code, 0) << rest;
  // Task 4 is replicate 2's second arm: named, with what Slurm knows of it.
  EXPECT_NE(rest.find("1 training of the compare ended on Slurm without a result"), std::string::npos) << rest;
  EXPECT_NE(rest.find("replicate 2 (Slurm job " + std::to_string(job) + "_4: no record"), std::string::npos) << rest;
  {
    snip::Store s(db, {.read_only = true});
    EXPECT_EQ(s.compare_replicates(1).size(), 5u);  // every other training is stored
  }
  const snip_test::CommandResult r = snip_cmd("compare --resume 1 --sbatch-args '' --db " + db);
  ASSERT_EQ(r.status, 0) << r.out;
  const int64_t again = job_of(r.out.substr(r.out.find("submitted Slurm job array")));
  EXPECT_GT(again, job);
  // Only the missing training went to Slurm again: the new array has one task.
  const snip_test::CommandResult tasks =
      snip_test::run_shell("squeue -h -r -t all -o '%i' -j " + std::to_string(again));
  EXPECT_EQ(tasks.out, std::to_string(again) + "_4\n");
  EXPECT_EQ(table(db), table(local_db()));
}

TEST_F(SlurmCompare, ATaskRefusesAnotherSnipBuildAndAnotherCheckpoint) {
  const std::string db = (dir() / "same.db").string();  // the first test's folder, if it ran
  const std::string work = db + ".slurm/compare-1";
  if (!fs::exists(work + "/tasks.json")) GTEST_SKIP() << "needs ACompareOnSlurmStoresTheLocalTableBitForBit's folder";
  const fs::path copy = dir() / "forged";
  fs::remove_all(copy);
  fs::create_directories(copy / "results");
  nlohmann::json t = nlohmann::json::parse(std::ifstream(work + "/tasks.json"));
  t["snip_build"] = "fnv1a64 0000000000000000";
  std::ofstream(copy / "tasks.json") << t.dump();
  snip_test::CommandResult r = snip_cmd("compare-task --work " + copy.string() + " --task 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("is not the one that submitted the compare"), std::string::npos) << r.out;
  t = nlohmann::json::parse(std::ifstream(work + "/tasks.json"));
  t["checkpoint_fingerprint"] = "fnv1a64 0000000000000000";
  std::ofstream(copy / "tasks.json", std::ios::trunc) << t.dump();
  r = snip_cmd("compare-task --work " + copy.string() + " --task 0");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("not the compare's fnv1a64 0000000000000000"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::is_empty(copy / "results"));  // a refused task leaves no result
}

}  // namespace
