// Nothing lost, round three (docs/BAD_INPUT.md "Files the user names" and "Input that cannot be
// trusted"), each named example of the issue as a test, with the real `snip` binary and real
// SQLite files:
//  - no file a command is told to write may be another file the command was named (its
//    database, its inputs), a database's WAL, index or journal, or a folder a running run writes;
//  - JSON nested deeper than any snip file is refused by every reader, not a stack overflow;
//  - numbers that add up to more than a double holds are refused at the reader.
// Child processes are synchronised on their output and exit, never on sleeps.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_test.h"
#include "run_command.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = snip_test::CommandResult;

using namespace snip_test;  // kSnip, kTiny, sh, q, contains, slurp (cli_test.h)

const std::vector<std::string> kLayers = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                          "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                          "mlp.down_proj"};

// A plan for the `tiny` preset's blocks with every linear layer in `precision`.
std::string uniform_plan(int blocks, const std::string& precision) {
  nlohmann::json layers = nlohmann::json::object();
  for (int b = 0; b < blocks; ++b)
    for (const auto& l : kLayers) layers["model.layers." + std::to_string(b) + "." + l] = precision;
  return nlohmann::json{{"format", "snip-plan/1"}, {"method", "manual"}, {"layers", layers}}.dump();
}

// A finished two-step `tiny` run recorded in `db`, its checkpoint in `ck`.
void train_tiny(const std::string& db, const std::string& ck) {
  const Result r = sh(kSnip + " train" + kTiny + "--steps 2 --db " + db + " --out " + ck);
  ASSERT_EQ(r.status, 0) << r.out;
}

// ---- files the user names ----------------------------------------------------------------------

// `export --plan plan.json --db w.db --out w.db`: the database the command was told of is not an
// output, whether or not the command ends up opening it.
TEST(Collisions, AnExportOntoTheDatabaseItWasGivenIsRefused) {
  TempDir dir("onto-db");
  const std::string db = dir / "w.db";
  train_tiny(db, dir / "ck");
  std::ofstream(dir.file("plan.json")) << uniform_plan(2, "fp8");
  const std::string before = slurp(db);
  const Result r = sh(kSnip + " export --plan " + dir.file("plan.json") + " --db " + db + " --out " + db);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "w.db")) << r.out;
  EXPECT_TRUE(contains(r.out, "experiment database")) << r.out;
  EXPECT_EQ(slurp(db), before);
  EXPECT_EQ(snip::Store(db).runs().size(), 1u);
}

// Any SQLite database is never replaced by a text export, named or not.
TEST(Collisions, AnExportOntoAnySqliteDatabaseIsRefused) {
  TempDir dir("onto-any-db");
  const std::string db = dir / "w.db", other = dir / "other.db";
  train_tiny(db, dir / "ck");
  fs::copy_file(db, other);
  const std::string before = slurp(other);
  const Result r = sh(kSnip + " export --run 1 --db " + db + " --out " + other);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "is a SQLite database")) << r.out;
  EXPECT_EQ(slurp(other), before);
}

// `export --plan t.json --to megatron --out t.json`: the plan would be replaced by its YAML.
TEST(Collisions, AnExportOntoItsOwnPlanIsRefused) {
  TempDir dir("onto-plan");
  const std::string plan = dir / "t.json";
  std::ofstream(plan) << uniform_plan(2, "fp4");
  const std::string before = slurp(plan);
  for (const std::string& to : {std::string(" --to megatron"), std::string(" --format csv"), std::string()}) {
    const Result r = sh(kSnip + " export --plan " + plan + to + " --out " + plan);
    EXPECT_NE(r.status, 0) << to << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "t.json")) << r.out;
    EXPECT_EQ(slurp(plan), before) << to;
  }
}

// A store named `w.db-wal` is w.db's WAL to SQLite: `snip runs --db w.db` would delete it.
TEST(Collisions, ADatabaseNamedLikeAnotherDatabasesWalIsNeitherMadeNorDeleted) {
  TempDir dir("wal-name");
  const std::string db = dir / "w.db";
  train_tiny(dir / "w.db-wal", dir / "ck1");  // made first: w.db does not exist yet
  const std::string before = slurp(db + "-wal");
  const Result r = sh(kSnip + " runs --db " + db);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "w.db-wal")) << r.out;
  EXPECT_TRUE(contains(r.out, "write-ahead log")) << r.out;
  EXPECT_EQ(slurp(db + "-wal"), before);
  EXPECT_EQ(snip::Store(db + "-wal").runs().size(), 1u);
  // The other order: w.db exists, and a database w.db-journal would be its journal.
  TempDir dir2("wal-name2");
  train_tiny(dir2 / "w.db", dir2 / "ck1");
  const Result made =
      sh(kSnip + " train" + kTiny + "--steps 1 --db " + dir2.file("w.db-journal") + " --out " + dir2.file("ck2"));
  EXPECT_NE(made.status, 0) << made.out;
  EXPECT_TRUE(contains(made.out, "w.db-journal")) << made.out;
  EXPECT_FALSE(fs::exists(dir2.path / "w.db-journal"));
  EXPECT_FALSE(fs::exists(dir2.path / "ck2"));
  EXPECT_EQ(snip::Store(dir2 / "w.db").runs().size(), 1u);
}

// A checkpoint folder named `w.db-journal` makes w.db unreadable to SQLite.
TEST(Collisions, ACheckpointFolderNamedLikeADatabasesJournalIsRefused) {
  TempDir dir("journal-name");
  const std::string db = dir / "w.db";
  train_tiny(db, dir / "ck");
  for (const std::string sidecar : {"-journal", "-wal", "-shm"}) {
    const Result r = sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + db + sidecar);
    EXPECT_NE(r.status, 0) << sidecar << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "w.db" + sidecar)) << r.out;
    EXPECT_FALSE(fs::exists(db + sidecar)) << sidecar;
  }
  const Result runs = sh(kSnip + " runs --db " + db);
  EXPECT_EQ(runs.status, 0) << runs.out;
  EXPECT_EQ(snip::Store(db).runs().size(), 1u);
}

// A TensorBoard export into the checkpoint folder of a run that is training (the run would die at
// its next save) is refused while the run holds the folder; the run finishes and saves.
TEST(Collisions, ATensorBoardExportIntoARunningRunsFolderIsRefused) {
  TempDir dir("tb-live");
  const std::string db = dir / "runs.db", ck = dir / "ck", err = dir / "err", fifo = dir / "go";
  train_tiny(dir / "first.db", dir / "first");
  // The run waits for the export on its standard input's end: it trains until told to stop.
  const Result r =
      sh("bash -c " + q(kSnip + " train" + kTiny + "--steps 100000 --save-every 5 --db " + db + " --out " + ck + " 2>" +
                        err + " & pid=$!; until grep -q \"step \" " + err + " 2>/dev/null; do sleep 0.05; done; " +
                        kSnip + " export --run 1 --to tensorboard --db " + dir.file("first.db") + " --out " + ck +
                        "; echo export=$?; kill -TERM $pid; wait $pid; echo train=$?"));
  EXPECT_TRUE(contains(r.out, "train=143")) << r.out << slurp(err);
  EXPECT_FALSE(contains(r.out, "export=0")) << r.out;
  EXPECT_TRUE(contains(r.out, "in use by another snip run") || contains(r.out, "it is the snip checkpoint")) << r.out;
  // A folder inside the checkpoint is refused too.
  const Result under =
      sh(kSnip + " export --run 1 --to tensorboard --db " + dir.file("first.db") + " --out " + ck + "/tb");
  EXPECT_NE(under.status, 0) << under.out;
  snip::Store store(db);
  ASSERT_FALSE(store.checkpoints(1).empty());
  EXPECT_EQ(sh(kSnip + " train --resume " + ck + " --steps " + std::to_string(store.checkpoints(1).back().step + 1) +
               " --db " + db)
                .status,
            0);
}

// ---- input that cannot be trusted ----------------------------------------------------------------

std::string nested(int depth) {
  return std::string(size_t(depth), '[') + std::string(size_t(depth), ']');
}

// A plan, stats or checkpoint JSON nested 80,000 deep: a clear error from every reader.
TEST(Structure, JsonNestedTooDeepIsRefusedByEveryReader) {
  TempDir dir("deep");
  const std::string db = dir / "runs.db", ck = dir / "ck";
  train_tiny(db, ck);
  const std::string deep = nested(80000);
  std::ofstream(dir.file("plan.json")) << "{\"format\": \"snip-plan/1\", \"layers\": " << deep << "}";
  std::ofstream(dir.file("stats.json")) << "{\"format\": \"snip-stats/1\", \"layers\": " << deep << "}";
  fs::copy(ck, dir.path / "ck-config", fs::copy_options::recursive);
  std::ofstream(dir.file("ck-config/config.json")) << "{\"hidden_size\": " << deep << "}";
  fs::copy(ck, dir.path / "ck-state", fs::copy_options::recursive);
  std::ofstream(dir.file("ck-state/trainer_state.json")) << "{\"step\": " << deep << "}";
  const std::string plan = dir / "plan.json", stats = dir / "stats.json";
  for (const std::string& cmd :
       {"import " + plan + " --db " + db, "import " + stats + " --db " + db, "export --plan " + plan,
        "export --plan " + plan + " --to megatron", "train" + kTiny + "--steps 1 --plan " + plan + " --no-db",
        "eval --checkpoint " + ck + " --plan " + plan + " --batches 1", "solve --stats " + stats + " --budget 0.5",
        "eval --checkpoint " + dir.file("ck-config") + " --batches 1",
        "collect --checkpoint " + dir.file("ck-config") + " --out " + dir.file("s.json"),
        "collect --checkpoint " + dir.file("ck-state") + " --out " + dir.file("s.json"),
        "train --resume " + dir.file("ck-state") + " --steps 9 --no-db"}) {
    const Result r = sh(kSnip + " " + cmd);
    EXPECT_NE(r.status, -1) << cmd << " crashed\n" << r.out.substr(0, 2000);
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.out.substr(0, 2000);
    EXPECT_TRUE(contains(r.out, "nest more than")) << cmd << "\n" << r.out.substr(0, 2000);
  }
  EXPECT_EQ(snip::Store(db).runs().size(), 1u);
}

// FLOPs of 1e308 each add up to infinity: `sweep` crashed and `solve` printed a fraction of -nan.
TEST(Numbers, CostsBeyondAnyModelAreRefusedAtTheReaderWithTheFieldNamed) {
  TempDir dir("huge");
  {
    std::ofstream out(dir.file("costs.csv"));
    out << "layer,precision,cost,flops\n";
    for (int b = 0; b < 2; ++b)
      for (const auto& l : kLayers)
        for (const char* p : {"fp8", "fp4"})
          out << "model.layers." << b << "." << l << "," << p << "," << (p[2] == '4' ? 2.0 : 1.0) << ",1e308\n";
  }
  const std::string costs = dir / "costs.csv";
  for (const std::string& cmd :
       {"sweep --costs " + costs + " --budgets 0:1:0.5", "solve --costs " + costs + " --budget 0.5",
        "solve --costs " + costs + " --budget 0.5 --method random",
        "solve --costs " + costs + " --budget 0.5 --json"}) {
    const Result r = sh(kSnip + " " + cmd);
    EXPECT_NE(r.status, -1) << cmd << " crashed\n" << r.out;
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "costs.csv")) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "flops")) << cmd << "\n" << r.out;
    EXPECT_FALSE(contains(r.out, "nan")) << cmd << "\n" << r.out;
  }
}

// ---- quietly wrong -----------------------------------------------------------------------------------

TEST(Quiet, APlanWithNoLayersIsRefused) {
  TempDir dir("empty-plan");
  std::ofstream(dir.file("empty.json")) << R"({"format": "snip-plan/1", "layers": {}})";
  for (const std::string& cmd : {"train" + kTiny + "--steps 1 --no-db --out " + dir.file("ck") + " --plan ",
                                 std::string("export --to megatron --plan ")}) {
    const Result r = sh(kSnip + " " + cmd + dir.file("empty.json"));
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "\"layers\" is empty")) << r.out;
  }
  EXPECT_FALSE(fs::exists(dir.path / "ck"));
}

TEST(Quiet, AnExportToACsvNameWritesCsvAndAContradictingFormatIsRefused) {
  TempDir dir("csv-name");
  const std::string db = dir / "runs.db";
  train_tiny(db, dir / "ck");
  ASSERT_EQ(sh(kSnip + " export --run 1 --db " + db + " --out " + dir.file("metrics.csv")).status, 0);
  EXPECT_EQ(slurp(dir.file("metrics.csv")).rfind("step,", 0), 0u) << slurp(dir.file("metrics.csv")).substr(0, 200);
  const Result both = sh(kSnip + " export --run 1 --format json --db " + db + " --out " + dir.file("m2.csv"));
  EXPECT_NE(both.status, 0) << both.out;
  EXPECT_TRUE(contains(both.out, "contradicts")) << both.out;
  EXPECT_FALSE(fs::exists(dir.path / "m2.csv"));
}

TEST(Quiet, APrivateCheckpointFolderStaysPrivateAfterASave) {
  TempDir dir("private");
  const std::string db = dir / "runs.db", ck = dir / "ck";
  train_tiny(db, ck);
  fs::permissions(ck, fs::perms::owner_all, fs::perm_options::replace);
  ASSERT_EQ(sh(kSnip + " train --resume " + ck + " --steps 3 --db " + db).status, 0);
  struct stat st {};
  ASSERT_EQ(::stat(ck.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST(Quiet, ACompleteTemporaryCopyOfACheckpointIsKept) {
  TempDir dir("tmp-copy");
  const std::string db = dir / "runs.db", ck = dir / "ck";
  train_tiny(db, ck);
  // A pid that has exited: its process is gone, as after a kill.
  const std::string pid = snip_test::run_stdout("bash -c 'echo $$'").out;
  const std::string copy = ck + ".tmp-" + pid.substr(0, pid.find('\n'));
  fs::copy(ck, copy, fs::copy_options::recursive);
  fs::create_directory(dir.path / ("half.tmp-" + pid.substr(0, pid.find('\n'))));
  ASSERT_EQ(sh(kSnip + " train --resume " + ck + " --steps 3 --db " + db).status, 0);
  EXPECT_TRUE(fs::exists(copy + "/model.safetensors"));
}

TEST(Quiet, TensorBoardExportsOfTwoRunsIntoOneFolderKeepBoth) {
  TempDir dir("tb-two");
  const std::string db = dir / "runs.db";
  train_tiny(db, dir / "ck1");
  train_tiny(db, dir / "ck2");
  // The same start second, as when two runs start together.
  ASSERT_EQ(sh("sqlite3 " + db + " 'UPDATE runs SET started_ms = (SELECT started_ms FROM runs WHERE id = 1)'").status,
            0);
  ASSERT_EQ(snip::Store(db).run(2).started_ms, snip::Store(db).run(1).started_ms);
  for (const char* run : {"1", "2"})
    ASSERT_EQ(sh(kSnip + " export --to tensorboard --run " + run + " --db " + db + " --out " + dir.file("tb")).status,
              0);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "tb"))
    files += e.path().filename().string().find("tfevents") != std::string::npos;
  EXPECT_EQ(files, 2);
}

// A Megatron config that PyYAML (Megatron's reader) and this reader would read differently.
TEST(Yaml, WhatPyYamlReadsOtherwiseIsRefused) {
  TempDir dir("yaml");
  std::ofstream(dir.file("plan.json")) << uniform_plan(2, "fp4");
  ASSERT_EQ(sh(kSnip + " export --plan " + dir.file("plan.json") + " --to megatron --preset tiny --out " +
               dir.file("plan.yaml"))
                .status,
            0);
  const std::string yaml = slurp(dir.file("plan.yaml"));
  const auto edited = [&](const std::string& from, const std::string& to) {
    std::string y = yaml;
    const size_t at = y.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    if (at != std::string::npos) y.replace(at, from.size(), to);
    return y;
  };
  struct Case {
    std::string name, text, says;
  };
  const std::vector<Case> cases = {
      {"duplicate",
       edited("matchers:\n",
              "matchers:\n  default:\n    type: glob\n    pattern: \"*\"\n    config: "
              "bf16\n    enabled: false\n"),
       "written twice"},
      {"merge",
       edited("  bf16:\n",
              "  base: &base\n    transformer_engine_config_type: TEQuantizationParams\n  "
              "bf16:\n    <<: *base\n"),
       "merge keys"},
      {"enabled", edited("    enabled: true\n", "    enabled: 1\n"), "not true or false"},
  };
  for (const Case& c : cases) {
    const std::string path = dir / (c.name + ".yaml");
    std::ofstream(path) << c.text;
    const Result r = sh(kSnip + " import --from megatron --preset tiny " + path + " --out " + dir.file("back.json"));
    EXPECT_NE(r.status, 0) << c.name << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, c.says)) << c.name << "\n" << r.out;
  }
  // The control: the unedited file is read.
  EXPECT_EQ(
      sh(kSnip + " import --from megatron --preset tiny " + dir.file("plan.yaml") + " --out " + dir.file("back.json"))
          .status,
      0);
}

// ---- names and paths -------------------------------------------------------------------------------

// A checkpoint folder whose name is not UTF-8 (stored as the user's bytes) broke every --json
// listing of the whole database; it is written escaped, as the text listing writes it.
TEST(Names, AFolderNameThatIsNotUtf8BreaksNoJsonOutput) {
  TempDir dir("latin1");
  const std::string db = dir / "runs.db";
  const std::string odd = dir / "r\xe9sum\xe9";  // Latin-1
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + q(odd)).status, 0);
  for (const std::string cmd : {"runs --json", "show --run 1 --json", "show --run 1", "export --run 1"}) {
    const Result r = snip_test::run_stdout(kSnip + " " + cmd + " --db " + db);
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "r\\\\xe9sum\\\\xe9") || contains(r.out, "r\\xe9sum\\xe9")) << cmd << "\n" << r.out;
    if (cmd.find("--json") != std::string::npos || cmd.rfind("export", 0) == 0) {
      EXPECT_TRUE(nlohmann::json::accept(r.out)) << cmd << "\n" << r.out;
    }
  }
}

// A database path longer than SQLite opens got "read-only location?"; it says what is wrong.
TEST(Names, ADatabasePathLongerThanSqliteOpensSaysSo) {
  TempDir dir("long");
  const std::string part(200, 'a');
  fs::create_directories(dir.path / part / part / part);
  const std::string db = (dir.path / part / part / part / "w.db").string();
  const Result r = sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + dir.file("ck"));
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "SQLite opens paths of at most 511")) << r.out;
  EXPECT_FALSE(contains(r.out, "read-only")) << r.out;
  EXPECT_FALSE(fs::exists(dir.path / "ck"));
}

// ---- fingerprints ------------------------------------------------------------------------------

// `collect` and `validate` measured a run on a corpus edited since it trained, as the run's own.
TEST(Fingerprints, MeasuringARunOnItsCorpusEditedSinceTrainingIsRefused) {
  TempDir dir("edited");
  const std::string db = dir / "w.db", corpus = dir / "corpus.txt", ck = dir / "ck";
  {
    std::ofstream out(corpus);
    for (int i = 0; i < 400; ++i) out << "In the beginning God created the heaven and the earth. " << i << "\n";
  }
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --data " + corpus + " --db " + db + " --out " + ck).status, 0);
  std::ofstream(corpus, std::ios::app) << "And the earth was without form, and void.\n";
  for (const std::string& cmd :
       {"collect --checkpoint " + ck + " --out " + dir.file("s.json") + " --db " + db,
        "validate --checkpoint " + ck + " --db " + db, "train --resume " + ck + " --steps 4 --db " + db}) {
    const Result r = sh(kSnip + " " + cmd);
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "is not the one " + ck + " was trained on")) << cmd << "\n" << r.out;
  }
  EXPECT_FALSE(fs::exists(dir.path / "s.json"));
  EXPECT_TRUE(snip::Store(db).stats_rounds(1).empty());
}

// A config's initializer_range was ignored (every run started from N(0, 0.02²)) and a float
// head_dim accepted.
TEST(Quiet, AConfigsInitializerRangeAndAFloatHeadDimAreNotIgnored) {
  TempDir dir("config");
  const std::string ck = dir / "ck";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 1 --no-db --out " + ck).status, 0);
  const nlohmann::json base = nlohmann::json::parse(slurp(ck + "/config.json"));
  struct Case {
    std::string field;
    nlohmann::json value;
    std::string says;
  };
  for (const Case& c : {Case{"initializer_range", 0.5, "initializer_range is 0.5"},
                        Case{"head_dim", 16.0, "\"head_dim\" must be an integer"},
                        Case{"head_dim", 8, "differs from hidden_size/num_attention_heads"}}) {
    nlohmann::json cfg = base;
    cfg[c.field] = c.value;
    std::ofstream(dir.file("cfg.json")) << cfg.dump();
    const Result r = sh(kSnip + " train --config " + dir.file("cfg.json") +
                        " --batch-size 2 --seq-len 32 --steps 1 --no-db --out " + dir.file("ck2"));
    EXPECT_NE(r.status, 0) << c.field << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, c.says)) << r.out;
  }
  EXPECT_FALSE(fs::exists(dir.path / "ck2"));
  // The config every checkpoint carries (initializer_range 0.02, an integer head_dim or none) is read.
  nlohmann::json cfg = base;
  cfg["head_dim"] = 16;
  std::ofstream(dir.file("cfg.json")) << cfg.dump();
  EXPECT_EQ(sh(kSnip + " train --config " + dir.file("cfg.json") +
               " --batch-size 2 --seq-len 32 --steps 1 --no-db --out " + dir.file("ck3"))
                .status,
            0);
}

// One replicate gives no interval: the compare concludes nothing from it.
TEST(Quiet, AOneReplicateCompareDoesNotConcludeThatPrecisionDoesNotMatter) {
  TempDir dir("one-rep");
  const std::string db = dir / "w.db";
  train_tiny(db, dir / "ck");
  const Result r = sh(kSnip + " compare --checkpoint " + dir.file("ck") +
                      " --steps 2 --replicates 1 --budget 0.5 --baselines uniform-fp4 --db " + db);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(contains(r.out, "precision does not matter")) << r.out;
  EXPECT_TRUE(contains(r.out, "no interval")) << r.out;
  const Result shown = sh(kSnip + " show --compare 1 --db " + db);
  EXPECT_FALSE(contains(shown.out, "precision does not matter")) << shown.out;
}

// ---- branches ---------------------------------------------------------------------------------

// Run 1's metric rows, step by step (loss and FP4 fraction), to compare before and after.
std::vector<std::pair<double, double>> rows_of(const std::string& db, int64_t run) {
  std::vector<std::pair<double, double>> out;
  for (const snip::MetricRow& r : snip::Store(db).metrics(run)) out.emplace_back(r.train_loss, r.fp4_fraction);
  return out;
}

// A second resume from one checkpoint took run 1 over, and replaced its later rows, when an
// earlier takeover had changed the run's total (`--steps`) or its plan: both are branches.
TEST(Branches, ASecondResumeFromOneCheckpointAfterATakeoverChangedTheRunIsABranch) {
  for (const bool by_plan : {false, true}) {
    TempDir dir(by_plan ? "branch-plan" : "branch-total");
    const std::string db = dir / "runs.db", ck = dir / "ck";
    ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 3 --db " + db + " --out " + ck).status, 0);
    std::ofstream(dir.file("p.json")) << uniform_plan(2, "fp4");
    if (by_plan) {
      ASSERT_EQ(sh(kSnip + " train --resume " + ck + " --steps 6 --plan " + dir.file("p.json") + " --db " + db +
                   " --out " + dir.file("a"))
                    .status,
                0);
    } else {
      ASSERT_EQ(sh(kSnip + " train --resume " + ck + " --steps 6 --db " + db + " --out " + dir.file("a")).status, 0);
      ASSERT_EQ(sh(kSnip + " train --resume " + dir.file("a") + " --steps 9 --db " + db).status, 0);
    }
    const auto before = rows_of(db, 1);
    const std::string total = by_plan ? "6" : "9";
    const Result b =
        sh(kSnip + " train --resume " + ck + " --steps " + total + " --db " + db + " --out " + dir.file("b"));
    ASSERT_EQ(b.status, 0) << b.out;
    snip::Store store(db);
    ASSERT_EQ(store.runs().size(), 2u) << (by_plan ? "plan" : "total");
    EXPECT_EQ(store.run(2).spec.parent_run_id, std::optional<int64_t>(1));
    EXPECT_EQ(store.run(2).spec.parent_step, std::optional<int64_t>(3));
    EXPECT_EQ(rows_of(db, 1), before) << "run 1's rows were replaced";
  }
}

// `compare --eval-batches 100000` evaluated every arm on the split's few batches without a word.
TEST(Quiet, ACompareAskedForMoreEvaluationBatchesThanTheSplitHoldsIsRefused) {
  TempDir dir("eval-batches");
  train_tiny(dir / "w.db", dir / "ck");
  const Result r = sh(kSnip + " compare --checkpoint " + dir.file("ck") +
                      " --steps 1 --replicates 1 --budget 0.5 --baselines uniform-fp4 --eval-batches 100000 --no-db");
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "--eval-batches 100000 is more than the")) << r.out;
  EXPECT_FALSE(contains(r.out, "replicate 1/1")) << "trained before refusing\n" << r.out;
}

}  // namespace

// ---- bounded set-up, signals during it, and pipes ---------------------------------------------

// A corpus larger than snip reads into memory (a 2 GB text, a folder of them, a token file, a
// gzip that decompresses beyond the limit) is refused by its size or as it decompresses, never
// read whole first. The files are sparse: nothing of them is on disk.
TEST(SetUp, ACorpusLargerThanSnipReadsIsRefusedBeforeItIsRead) {
  TempDir dir("big");
  const std::string big = dir / "big.txt", folder = dir / "parts", bin = dir / "big.bin", gz = dir / "bomb.txt.gz";
  fs::create_directories(folder);
  std::ofstream(big).put('x');
  fs::resize_file(big, uint64_t(2) << 30);
  std::ofstream(folder + "/a.txt").put('x');
  std::ofstream(folder + "/b.txt").put('x');
  fs::resize_file(folder + "/a.txt", uint64_t(600) << 20);
  fs::resize_file(folder + "/b.txt", uint64_t(600) << 20);
  std::ofstream(bin).put('x');
  fs::resize_file(bin, uint64_t(2) << 30);
  // 17 gzip members of 64 MiB of zeros each: 1.06 GiB of text from 1 MB on disk.
  ASSERT_EQ(sh("head -c 67108864 /dev/zero | gzip -1 > " + q(dir / "one.gz") + " && for i in $(seq 17); do cat " +
               q(dir / "one.gz") + "; done > " + q(gz))
                .status,
            0);
  for (const auto& [data, says] : std::vector<std::pair<std::string, std::string>>{
           {big, "the corpus is longer than the 1 GiB snip reads into memory (it is 2147483648 bytes)"},
           {folder, "holds 1258291200 bytes, more than the 1 GiB of text snip reads into memory"},
           {bin, "the token file is longer than the 1 GiB snip reads into memory"},
           {gz, "the corpus decompresses to more than the 1 GiB of text snip reads into memory"}}) {
    const Result r = sh(kSnip + " train" + kTiny + "--steps 1 --no-db --out " + q(dir / "ck") + " --data " + q(data));
    EXPECT_EQ(r.status, 1) << data << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, says)) << data << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, data == bin ? "use a shard of it" : "train on a part of it")) << r.out;
    EXPECT_FALSE(fs::exists(dir / "ck"));
  }
}

// SIGTERM while the corpus is still being read (a FIFO whose writer waits) stops at once: exit
// 143, nothing recorded, no checkpoint. Synchronised on the FIFO's open and on the data written
// after the signal, never on a sleep.
TEST(SetUp, SigtermWhileTheCorpusIsReadStopsAtOnceWithNothingRecorded) {
  TempDir dir("fifo");
  const std::string fifo = dir / "corpus.txt", db = dir / "t.db", ck = dir / "ck";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const Result r = sh("(" + kSnip + " train" + kTiny + "--steps 2 --db " + q(db) + " --out " + q(ck) + " --data " +
                      q(fifo) + " & P=$!; exec 3>" + q(fifo) + "; kill -TERM $P; echo 'In the beginning' >&3; " +
                      "exec 3>&-; wait $P; echo \"status=$?\")");
  EXPECT_TRUE(contains(r.out, "status=143")) << r.out;
  EXPECT_TRUE(contains(r.out, "stopped by SIGTERM while reading " + fifo + ", before anything was trained or recorded"))
      << r.out;
  EXPECT_FALSE(fs::exists(ck));
  EXPECT_TRUE(snip::Store(db).runs().empty());
}

// `--plan <(cat plan.json)`, `--stats <(…)` and FIFOs: a pipe gives its bytes once, so a command
// that reads an input twice (solve read the statistics to check them, then to plan) got nothing
// the second time ("not valid JSON").
TEST(Names, APipeOrProcessSubstitutionGivesEveryReaderTheSameBytes) {
  TempDir dir("pipes");
  const std::string db = dir / "runs.db", ck = dir / "ck", stats = dir / "stats.json", plan = dir / "plan.json";
  train_tiny(db, ck);
  ASSERT_EQ(sh(kSnip + " collect --checkpoint " + q(ck) + " --out " + q(stats)).status, 0);
  const Result solved = sh(kSnip + " solve --stats " + q(stats) + " --budget 0.5 --ties --json --out " + q(plan));
  ASSERT_EQ(solved.status, 0) << solved.out;
  for (const std::string& cmd :
       {"solve --stats <(cat " + q(stats) + ") --budget 0.5", "sweep --stats <(cat " + q(stats) + ")",
        "export --plan <(cat " + q(plan) + ") --to megatron", "import <(cat " + q(plan) + ") --db " + q(db),
        "train" + kTiny + "--steps 1 --no-db --out " + q(dir / "ck2") + " --plan <(cat " + q(plan) + ")"}) {
    const Result r = sh("bash -c " + q(kSnip + " " + cmd));
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out;
  }
}

// Statistics of the wrong width (a vector measured on another model) or with layers missing
// were planned on: the plan left the missing layers to a default. Refused by the one reader of
// rounds every planner goes through (solve, sweep, a stored round).
TEST(Quiet, StatisticsOfTheWrongWidthOrWithLayersMissingAreNotPlannedOn) {
  TempDir dir("stats-shape");
  const std::string db = dir / "runs.db", ck = dir / "ck", stats = dir / "stats.json";
  train_tiny(db, ck);
  ASSERT_EQ(sh(kSnip + " collect --checkpoint " + q(ck) + " --out " + q(stats)).status, 0);
  nlohmann::json round = nlohmann::json::parse(slurp(stats));
  nlohmann::json missing = round, narrow = round;
  missing["layers"].erase(3);  // model.layers.0.self_attn.o_proj
  narrow["layers"][0]["vectors"]["gain_y"] = std::vector<double>{1.0, 2.0, 3.0};
  std::ofstream(dir.file("missing.json")) << missing.dump();
  std::ofstream(dir.file("narrow.json")) << narrow.dump();
  for (const auto& [file, says] : std::vector<std::pair<std::string, std::string>>{
           {dir / "missing.json",
            "1 of the 14 linear layers of its 2-block model have no statistics (model.layers.0.self_attn.o_proj)"},
           {dir / "narrow.json",
            "model.layers.0.self_attn.q_proj vector \"gain_y\" has 3 values, but the layer has 64 output channels"}}) {
    for (const std::string& cmd : {"solve --stats " + q(file) + " --budget 0.5", "sweep --stats " + q(file)}) {
      const Result r = sh(kSnip + " " + cmd);
      EXPECT_EQ(r.status, 1) << cmd << "\n" << r.out;
      EXPECT_TRUE(contains(r.out, says)) << cmd << "\n" << r.out;
    }
  }
}
