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

#include "slurm_fixture.h"

namespace fs = std::filesystem;
using namespace snip_test;

namespace {

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

TEST_F(SlurmCluster, ACompareOnSlurmStoresTheLocalTableBitForBit) {
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

TEST_F(SlurmCluster, AStoppedSubmitterReattachesToItsArrayOnResume) {
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

TEST_F(SlurmCluster, ACancelledTaskIsNamedAndAResumeTrainsOnlyIt) {
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

TEST_F(SlurmCluster, ARefusedSubmissionAndATaskOfAnotherBuildOrCheckpointLeaveNoResult) {
  // sbatch refuses an argument: the compare says so and how to go on; its task list is written.
  const std::string db = (dir() / "refused.db").string();
  const snip_test::CommandResult bad = snip_cmd(
      "compare --executor slurm --sbatch-args --no-such-sbatch-option --checkpoint " + ck() + kArgs + " --db " + db);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.out.find("sbatch refused the compare's job array"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("then resume the compare"), std::string::npos) << bad.out;
  const std::string work = db + ".slurm/compare-1";
  ASSERT_TRUE(fs::exists(work + "/tasks.json"));
  // A task checks the snip it runs and the checkpoint it reads against the submitter's.
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
  // The task the forgery was made from, as submitted, trains and writes its result.
  r = snip_cmd("compare-task --work " + work + " --task 0");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(work + "/results/0.json"));
}

}  // namespace
