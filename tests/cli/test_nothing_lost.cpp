// Nothing lost, round two (docs/BAD_INPUT.md "Streams, identity and files"), with the real
// `snip` binary and real SQLite files:
//  - a reader of stdout that goes away stops training like SIGTERM; any write error on stdout
//    is an error (output_streams.h);
//  - whole numbers are decimal (no octal), SNIP_* variables with a bad value are refused;
//  - a run is the same run from any working directory (canonical checkpoint paths, the
//    tokenizer by absolute path and fingerprint), and a second resume from an earlier
//    checkpoint is a branch that names its parent;
//  - checkpoints carry a checksum of their data, verified by every reader;
//  - a database the user cannot write can still be listed, shown and exported;
//  - a plan whose claimed FP4 fraction its layers contradict, or made for another model, is refused.
// Child processes are synchronised on their output and exit, never on sleeps.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_test.h"
#include "interrupted_compare.h"
#include "run_command.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

using Result = snip_test::CommandResult;

using namespace snip_test;  // kSnip, kTiny, sh, q, contains, slurp (cli_test.h)

// ---- streams ---------------------------------------------------------------------------------

TEST(Streams, AReaderOfStdoutThatGoesAwayStopsTrainingLikeSigterm) {
  TempDir dir("pipe");
  const std::string db = dir / "runs.db", ck = dir / "ck";
  // head takes two step lines and exits; the next line snip writes fails with EPIPE.
  const Result r =
      sh("bash -c " + q(kSnip + " train" + kTiny + "--steps 400 --json --db " + db + " --out " + ck + " 2>" +
                        dir.file("err") + " | head -n 2 >/dev/null; echo status=${PIPESTATUS[0]}"));
  EXPECT_TRUE(contains(r.out, "status=141")) << r.out << slurp(dir.file("err"));
  const std::string err = slurp(dir.file("err"));
  EXPECT_TRUE(contains(err, "Broken pipe")) << err;
  EXPECT_TRUE(contains(err, "continue with:")) << err;
  snip::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].status, snip::RunStatus::interrupted);
  ASSERT_FALSE(store.checkpoints(runs[0].id).empty()) << "no checkpoint recorded";
  const int64_t saved = store.checkpoints(runs[0].id).back().step;
  EXPECT_GE(saved, 2);
  EXPECT_LT(saved, 400);
  // The printed resume command goes on from there.
  const Result resumed =
      sh(kSnip + " train --resume " + ck + " --steps " + std::to_string(saved + 2) + " --db " + db + " --json");
  EXPECT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_EQ(snip::Store(db).runs().size(), 1u);
}

TEST(Streams, AClosedOrFullStderrDoesNotStopTraining) {
  TempDir dir("stderr");
  const std::string db = dir / "runs.db";
  for (const std::string& redirect : std::vector<std::string>{"2>&-", "2>/dev/full"}) {
    const std::string ck = dir.file("ck" + std::to_string(redirect.size()));
    const Result r = sh("( " + kSnip + " train" + kTiny + "--steps 3 --db " + db + " --out " + ck + " " + redirect +
                        "; echo status=$? )");
    EXPECT_TRUE(contains(r.out, "status=0")) << redirect << "\n" << r.out;
  }
  snip::Store store(db);
  ASSERT_EQ(store.runs().size(), 2u);
  for (const snip::RunInfo& run : store.runs()) {
    EXPECT_EQ(run.status, snip::RunStatus::finished);
    EXPECT_EQ(run.last_step, 3);
  }
}

TEST(Streams, WriteErrorsOnStdoutAreErrorsInEveryCommand) {
  TempDir dir("full");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --db " + db + " --out " + dir.file("ck")).status, 0);
  for (const std::string& cmd :
       std::vector<std::string>{"runs --db " + db, "runs --db " + db + " --json", "show --run 1 --db " + db,
                                "export --run 1 --format csv --db " + db, std::string("data peek"),
                                "train" + kTiny + "--steps 1 --no-db --json --out " + dir.file("ck2"),
                                std::string("export --help"), std::string("--help"), std::string("--version")}) {
    const Result r = sh("( " + kSnip + " " + cmd + " >/dev/full )");  // stderr still comes back
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "No space left on device")) << cmd << "\n" << r.out;
  }
}

// A number an option cannot hold says which option and what to do, not CLI11's "Could not convert".
TEST(Options, ANumberTooLargeForItsOptionNamesTheOption) {
  const Result r = sh(kSnip + " compare --checkpoint nowhere --no-db --jobs 2147483648");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "error: --jobs 2147483648 is not a value this option can hold")) << r.out;
  EXPECT_FALSE(contains(r.out, "Could not convert")) << r.out;
}

TEST(Streams, AStopSignalInsideALongStepStopsAtTheNextMicroBatch) {
  TempDir dir("accum");
  const std::string db = dir / "runs.db", ck = dir / "ck", err = dir / "err";
  // A step of a million micro-batches (minutes); SIGTERM once the run is recorded (its handler
  // is installed before that line is printed).
  const Result r = sh("bash -c " + q(kSnip + " train" + kTiny + "--grad-accum 1000000 --steps 2 --db " + db +
                                     " --out " + ck + " 2>" + err + " & pid=$!; " + "until grep -q \"recording run\" " +
                                     err + "; do sleep 0.05; done; " + "kill -TERM $pid; wait $pid; echo status=$?"));
  EXPECT_TRUE(contains(r.out, "status=143")) << r.out << slurp(err);
  EXPECT_TRUE(contains(slurp(err), "continue with:")) << slurp(err);
  snip::Store store(db);
  const snip::RunInfo run = store.run(1);
  EXPECT_EQ(run.status, snip::RunStatus::interrupted);
  ASSERT_EQ(store.checkpoints(1).size(), 1u);
  EXPECT_EQ(store.checkpoints(1)[0].step, 0);  // the state before the abandoned step
  EXPECT_EQ(run.metric_rows, 0);
  // The checkpoint is the untouched start (step 0, data position 0), ready to resume.
  const auto state = nlohmann::json::parse(slurp(ck + "/trainer_state.json"));
  EXPECT_EQ(state["step"], 0) << state.dump();
}

// ---- options that would be silently ignored ----------------------------------------------------

TEST(Options, EveryOptionTheCommandWouldIgnoreIsAWarningOrAnError) {
  TempDir dir("ignored");
  const std::string db = dir / "runs.db", ck = dir / "ck", m = dir / "m.f32";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + ck).status, 0);
  {
    std::ofstream out(m, std::ios::binary);
    for (int i = 0; i < 64; ++i) {
      const float v = 0.01f * float(i - 30);
      out.write(reinterpret_cast<const char*>(&v), 4);
    }
  }
  const std::string q4 = " quantize --shape 4x16 --in " + m + " --out " + dir.file("q.f32");
  struct Case {
    std::string args;
    int status;  // 0: a warning, else the exit status of an error
    std::string says;
  };
  const std::vector<Case> cases = {
      {q4 + " --format bf16 --rounding stochastic", 1, "BF16 is always rounded to nearest-even"},
      {q4 + " --format bf16 --recipe mx", 0, "warning: --recipe is ignored with --format bf16"},
      {q4 + " --format e4m3 --recipe tensor --scale-mode ceil", 0, "warning: --scale-mode is ignored"},
      {q4 + " --format e4m3 --seed 7", 0, "warning: --seed is ignored: the rounding is rne"},
      {" eval --checkpoint " + ck + " --batches 1 --recipe mx", 0,
       "warning: --recipe is ignored with --precision fp32"},
      {" train" + kTiny + "--steps 1 --no-db --out " + dir.file("c1") + " --recipe mx", 0,
       "warning: --recipe is ignored with --precision bf16"},
      {" train" + kTiny + "--steps 1 --no-db --out " + dir.file("c2") + " --method random --precision fp4", 1,
       "--precision and --method cannot be combined"},
      {" train --preset tiny --batch-size 2 --seq-len 32 --steps 1 --no-db --out " + dir.file("c3") +
           " --eval-every 0 --eval-batches 3",
       0, "warning: --eval-batches is ignored with --eval-every 0"},
      {" train" + kTiny + "--steps 1 --no-db --overwrite", 0, "warning: --overwrite is ignored without --out"},
      {" runs --db " + db + " --compares --status finished", 1, "--status and --compares cannot be combined"},
      {" runs --db " + db + " --status bogus", 1, "--status 'bogus' is not one of"},
      {" compare --list --db " + db + " --steps 5", 0, "warning: --steps is ignored with --list"},
      {" compare --list --no-db", 1, "--list and --no-db cannot be combined"},
      {" compare --checkpoint " + ck +
           " --oracle-batches 4 --no-db --baselines uniform-fp4 --lambdas 0.1 --steps 1 "
           "--replicates 1 --eval-batches 1 --cooldown 0",
       0, "warning: --oracle-batches is ignored without --oracle"},
      {" data peek --val --seed 3", 0, "warning: --seed is ignored with --val"},
  };
  for (const Case& c : cases) {
    const Result r = sh(kSnip + c.args);
    EXPECT_EQ(r.status, c.status) << c.args << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, c.says)) << c.args << "\n" << r.out;
  }
  // --name with --resume renames the continued run instead of being dropped.
  ASSERT_EQ(sh(kSnip + " train --resume " + ck + " --steps 2 --db " + db + " --name renamed").status, 0);
  EXPECT_EQ(snip::Store(db).run(1).spec.name, "renamed");
}

// ---- inputs before the work, bounded set-up -------------------------------------------------------

TEST(BeforeTheWork, EveryInputIsCheckedBeforeTheWorkStarts) {
  TempDir dir("before");
  const std::string db = dir / "runs.db", ck = dir / "ck", junk = dir / "junk.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --db " + db + " --out " + ck).status, 0);
  { std::ofstream(junk) << "this is not a database, it is a note of the user's\n"; }
  // collect: the database is refused before the round, so its --out is never written.
  const Result c = sh(kSnip + " collect --checkpoint " + ck + " --db " + junk + " --out " + dir.file("st.json"));
  EXPECT_EQ(c.status, 1) << c.out;
  EXPECT_TRUE(contains(c.out, "not a SQLite database")) << c.out;
  EXPECT_FALSE(fs::exists(dir.path / "st.json"));
  // validate: the same, before its statistics rounds and truth passes.
  const Result v =
      sh(kSnip + " validate --checkpoint " + ck + " --db " + junk + " --batches 1 --no-weight-truth --json");
  EXPECT_EQ(v.status, 1) << v.out;
  EXPECT_TRUE(contains(v.out, "not a SQLite database")) << v.out;
  EXPECT_FALSE(contains(v.out, "spearman"));
  // train: the database, the checkpoint location and the names before the corpus is read.
  for (const std::string& bad : std::vector<std::string>{"--db " + junk, "--method bogus", "--recipe bogus"}) {
    const Result t = sh(kSnip + " train" + kTiny + "--steps 1 --out " + dir.file("t") + " " + bad);
    EXPECT_EQ(t.status, 1) << bad << "\n" << t.out;
    EXPECT_FALSE(contains(t.out, "parameters")) << "the model was built first: " << t.out;
  }
  EXPECT_EQ(slurp(junk), "this is not a database, it is a note of the user's\n");
  // A round collected with --db from another folder is attached to the checkpoint's run.
  fs::create_directories(dir.path / "elsewhere");
  const Result a = sh("cd " + dir.file("elsewhere") + " && " + kSnip + " collect --checkpoint ../ck --db " + db +
                      " --noise-passes 1");
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_EQ(snip::Store(db).stats_rounds(1).size(), 1u);
}

TEST(BeforeTheWork, MoreEvaluationBatchesThanTheSplitHoldsAreSaidAndStoredAsUsed) {
  TempDir dir("eval-batches");
  const std::string db = dir / "runs.db";
  const Result r = sh(kSnip +
                      " train --preset tiny --batch-size 2 --seq-len 32 --steps 1 --eval-every 1 "
                      "--eval-batches 100000 --db " +
                      db + " --out " + dir.file("ck"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "--eval-batches 100000 is more than the")) << r.out;
  const int64_t stored = snip::Store(db).runs().at(0).spec.train_config.at("eval_batches").get<int64_t>();
  EXPECT_LT(stored, 100000);
  EXPECT_TRUE(contains(r.out, "each evaluation uses all " + std::to_string(stored))) << r.out;
}

TEST(BeforeTheWork, ACompareThatCannotFitIsRefusedBeforeAnyTraining) {
  TempDir dir("fit");
  const std::string ck = dir / "ck";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --no-db --out " + ck).status, 0);
  const Result r = sh(kSnip + " compare --checkpoint " + ck +
                      " --no-db --jobs 100000 --replicates 100000 --steps 100000 --eval-batches 1");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "job threads needs about")) << r.out;
  EXPECT_TRUE(contains(r.out, "give fewer --jobs")) << r.out;
  // With a database: refused before the compare is stored (a failed compare was left behind).
  const std::string db = dir / "w.db";
  const Result stored = sh(kSnip + " compare --checkpoint " + ck + " --db " + db + " --replicates 100000000");
  EXPECT_EQ(stored.status, 1) << stored.out;
  EXPECT_TRUE(contains(stored.out, "give fewer --jobs")) << stored.out;
  EXPECT_FALSE(contains(stored.out, "is stored in")) << stored.out;
  EXPECT_TRUE(snip::Store(db).list_compares().empty());
  // A sweep of 100,000 random seeds per budget (pairwise comparisons: hours) is refused at once.
  const Result s = sh(kSnip + " sweep --costs " + dir.file("none.csv") + " --seeds 100000");
  EXPECT_EQ(s.status, 1) << s.out;
  EXPECT_TRUE(contains(s.out, "--seeds must be at most 1000")) << s.out;
  // ... and so is one whose budgets times seeds ask for millions of solves.
  ASSERT_EQ(sh(kSnip + " collect --checkpoint " + ck + " --noise-passes 1 --out " + dir.file("round.json")).status, 0);
  const Result many = sh(kSnip + " sweep --stats " + dir.file("round.json") + " --seeds 1000 --budgets 0:1:0.0001");
  EXPECT_EQ(many.status, 1) << many.out;
  EXPECT_TRUE(contains(many.out, "this sweep asks for")) << many.out;
  EXPECT_TRUE(contains(many.out, "give a coarser --budgets step")) << many.out;
  // collect: a statistics round that cannot fit, before the corpus is read.
  const Result c = sh(kSnip + " collect --checkpoint " + ck + " --batch-size 100000 --seq-len 64");
  EXPECT_EQ(c.status, 1) << c.out;
  EXPECT_TRUE(contains(c.out, "a statistics round of this model at batch 100000x64 needs about")) << c.out;
  // quantize: a --shape its file does not have is refused before the file is read.
  { std::ofstream(dir.path / "m.f32") << "12345678"; }
  const Result q = sh(kSnip + " quantize --format e4m3 --shape 100000x100000 --in " + dir.file("m.f32") + " --out " +
                      dir.file("q.f32"));
  EXPECT_EQ(q.status, 1) << q.out;
  EXPECT_TRUE(contains(q.out, "has 8 bytes but --shape 100000x100000 needs 40000000000")) << q.out;
}

// ---- an incomplete compare -------------------------------------------------------------------------

TEST(IncompleteCompare, ShowsWhatFinishedAndConcludesNothingFromWhatDidNot) {
  TempDir dir("partial");
  const std::string db = dir / "runs.db";
  {
    // Stopped after five trainings, out of order (two jobs): bf16 and SNIP have all three
    // replicates, min-err only its second, uniform FP4 none.
    snip::Store store(db);
    snip_test::insert_interrupted_compare(store, dir / "ck", {{2, 2}});
  }
  const Result text = sh(kSnip + " show --compare 1 --db " + db);
  ASSERT_EQ(text.status, 0) << text.out;
  EXPECT_FALSE(contains(text.out, "nan")) << text.out;
  EXPECT_TRUE(contains(text.out, "incomplete: 7 of 12 trainings finished")) << text.out;
  EXPECT_TRUE(contains(text.out, "incomplete 1/3")) << text.out;  // min-err
  EXPECT_TRUE(contains(text.out, "incomplete 0/3")) << text.out;  // uniform FP4
  EXPECT_FALSE(contains(text.out, "precision does not matter")) << text.out;
  const Result json = sh(kSnip + " show --compare 1 --db " + db + " --json");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["rows"].size(), 4u);
  EXPECT_EQ(j["rows"][0]["replicates_finished"], 3);
  EXPECT_EQ(j["rows"][2]["replicates_finished"], 1);
  EXPECT_EQ(j["rows"][2]["verdict"], "incomplete");
  EXPECT_EQ(j["rows"][3]["verdict"], "incomplete");
  EXPECT_TRUE(j["rows"][3]["gap_train_mean"].is_null());
  // The finished pair of min-err is shown: its gap to BF16 at replicate 2.
  EXPECT_NEAR(j["rows"][2]["gap_train_mean"].get<double>(), 3.3 - 3.02, 1e-12);
  // SNIP (complete, against a complete BF16) keeps its interval.
  EXPECT_FALSE(j["rows"][1]["gap_train_ci95"].is_null());
}

// ---- numbers and the environment ---------------------------------------------------------------

TEST(Numbers, WholeNumbersWithLeadingZerosAreDecimalAndOtherNotationsRefused) {
  TempDir dir("octal");
  const std::string db = dir / "runs.db";
  const Result r = sh(kSnip + " train" + kTiny + "--steps 010 --db " + db + " --out " + dir.file("ck"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(snip::Store(db).runs().at(0).last_step, 10);  // not 8 (octal)
  // Real numbers: decimal notation, no spaces, -0 is 0, and no silent underflow to 0.
  for (const std::string& bad : std::vector<std::string>{"0x1p-1", "'0.5 '", "' 0.5'", "1e-400"}) {
    const Result b = sh(kSnip + " solve --costs " + dir.file("none.csv") + " --budget " + bad);
    EXPECT_NE(b.status, 0) << bad;
    EXPECT_TRUE(contains(b.out, "decimal notation") || contains(b.out, "too small for a double")) << b.out;
  }
  for (const std::string& bad : std::vector<std::string>{"0x10", "1e3", "12abc"}) {
    const Result b = sh(kSnip + " train" + kTiny + "--steps " + bad + " --no-db --out " + dir.file("ck2"));
    EXPECT_NE(b.status, 0) << bad;
    EXPECT_TRUE(contains(b.out, "decimal")) << b.out;
  }
}

TEST(Environment, SnipVariablesWithABadValueAreRefusedBeforeAnyWork) {
  TempDir dir("env");
  for (const std::string& v : std::vector<std::string>{"abc", "0", "300", "-2"}) {
    const Result r = sh("SNIP_NUM_THREADS=" + v + " " + kSnip + " runs --db " + dir.file("x.db"));
    EXPECT_EQ(r.status, 1) << v;
    EXPECT_TRUE(contains(r.out, "SNIP_NUM_THREADS='" + v + "' is not a thread count")) << r.out;
  }
  EXPECT_FALSE(fs::exists(dir.file("x.db")));
  const Result q = sh("SNIP_QGEMM=fast " + kSnip + " runs --db " + dir.file("x.db"));
  EXPECT_EQ(q.status, 1);
  EXPECT_TRUE(contains(q.out, "SNIP_QGEMM='fast'")) << q.out;
  EXPECT_EQ(sh("SNIP_NUM_THREADS=2 " + kSnip + " data peek").status, 0);
  const Result f = sh("SNIP_FAULT_WRITE=enospc " + kSnip + " data peek");
  EXPECT_EQ(f.status, 1);
  EXPECT_TRUE(contains(f.out, "SNIP_FAULT_WRITE='enospc' is not a fault")) << f.out;
  const Result x = sh("XDG_DATA_HOME=rel " + kSnip + " runs");
  EXPECT_EQ(x.status, 1);
  EXPECT_TRUE(contains(x.out, "XDG_DATA_HOME='rel' is not an absolute path")) << x.out;
}

// ---- text ----------------------------------------------------------------------------------------

TEST(Text, ACostsCsvWithAByteOrderMarkIsRead) {
  TempDir dir("bom");
  {
    std::ofstream out(dir.path / "costs.csv", std::ios::binary);
    out << "\xEF\xBB\xBFlayer,precision,cost,flops\n";
    for (int b = 0; b < 2; ++b)
      for (const char* l : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                            "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
        for (const char* p : {"fp8", "fp4"})
          out << "model.layers." << b << "." << l << "," << p << "," << (p[2] == '4' ? 2.0 : 1.0) << ",1000\n";
  }
  const Result r = sh(kSnip + " solve --costs " + dir.file("costs.csv") + " --budget 0.5 --out " + dir.file("p.json"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir.path / "p.json"));
}

TEST(Text, NamesThatAreNotUtf8OrHoldBidiOverridesNeverBreakOrReorderAListing) {
  TempDir dir("names");
  const std::string db = dir / "runs.db";
  // Refused where they enter ...
  for (const std::string& name : std::vector<std::string>{"a\xE2\x80\x8B"
                                                          "b",
                                                          "abc\xff",
                                                          "\xE2\x80\xAE"
                                                          "evil",
                                                          "a\xE2\x81\xA6"
                                                          "b"}) {
    const Result r =
        sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + dir.file("ck") + " --name " + q(name));
    EXPECT_NE(r.status, 0) << r.out;
    EXPECT_TRUE(contains(r.out, "bidirectional mark or override")) << r.out;
  }
  const Result blank =
      sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + dir.file("ck") + " --name '   '");
  EXPECT_NE(blank.status, 0);
  EXPECT_TRUE(contains(blank.out, "has no visible character")) << blank.out;
  EXPECT_FALSE(fs::exists(dir.path / "ck"));
  // ... and a folder named so (the run takes the folder's name) is listed escaped, in one aligned row.
  const std::string odd = "r\xE2\x80\xAEnur-\xff-\xC3\xA9t\xC3\xA9";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + q(dir.file(odd))).status, 0);
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + dir.file("plain")).status, 0);
  const Result list = sh(kSnip + " runs --db " + db);
  ASSERT_EQ(list.status, 0) << list.out;
  EXPECT_TRUE(contains(list.out, "r\\u{202e}nur-\\xff-\xC3\xA9t\xC3\xA9")) << list.out;
  EXPECT_FALSE(contains(list.out, "\xE2\x80\xAE"));
  // Every row's STATUS column starts at the same character.
  std::vector<size_t> status_at;
  std::istringstream lines(list.out);
  for (std::string line; std::getline(lines, line);) {
    size_t chars = 0, at = std::string::npos;
    for (size_t i = 0; i < line.size(); ++i) {
      if ((static_cast<unsigned char>(line[i]) & 0xc0) == 0x80) continue;
      if (line.compare(i, 8, "finished") == 0 || line.compare(i, 6, "STATUS") == 0) {
        at = chars;
        break;
      }
      ++chars;
    }
    if (at != std::string::npos) status_at.push_back(at);
  }
  ASSERT_EQ(status_at.size(), 3u) << list.out;
  EXPECT_EQ(status_at[0], status_at[1]);
  EXPECT_EQ(status_at[1], status_at[2]);
}

// An error that quotes a damaged file (a safetensors header with a byte that is not UTF-8)
// reaches the terminal escaped, never as the raw byte.
TEST(Text, AnErrorQuotingADamagedFileEscapesItsBytes) {
  TempDir dir("bytes");
  const std::string ck = dir / "ck";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 1 --no-db --out " + ck).status, 0);
  const std::string header =
      "{\"model.embed_tokens.weight\xff\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4]}}";
  {
    std::ofstream f(ck + "/model.safetensors", std::ios::binary | std::ios::trunc);
    const uint64_t n = header.size();
    f.write(reinterpret_cast<const char*>(&n), 8);
    f << header << std::string(4, '\0');
  }
  const Result r = sh(kSnip + " eval --checkpoint " + ck);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_TRUE(contains(r.out, "model.safetensors")) << r.out;
  EXPECT_TRUE(contains(r.out, "\\xff")) << r.out;
  EXPECT_FALSE(contains(r.out, "\xff")) << "a raw byte reached the terminal";
}

// ---- run identity ------------------------------------------------------------------------------

TEST(RunIdentity, AResumeFromAnotherFolderContinuesTheSameRun) {
  TempDir dir("cwd");
  fs::create_directories(dir.path / "x");
  fs::create_directories(dir.path / "y");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh("cd " + dir.file("x") + " && " + kSnip + " train" + kTiny + "--steps 3 --db " + db + " --out ck").status,
            0);
  {
    snip::Store store(db);
    ASSERT_EQ(store.checkpoints(1).size(), 1u);
    EXPECT_EQ(store.checkpoints(1)[0].path, fs::canonical(dir.path / "x" / "ck").string());  // not "ck"
  }
  const Result r =
      sh("cd " + dir.file("y") + " && " + kSnip + " train --resume " + dir.file("x/ck") + " --steps 5 --db " + db);
  ASSERT_EQ(r.status, 0) << r.out;
  snip::Store store(db);
  ASSERT_EQ(store.runs().size(), 1u) << r.out;
  EXPECT_EQ(store.run(1).status, snip::RunStatus::finished);
  EXPECT_EQ(store.run(1).last_step, 5);
}

TEST(RunIdentity, TwoResumesFromOneCheckpointMakeABranchAndLoseNoRows) {
  TempDir dir("branch");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 3 --save-every 1 --db " + db + " --out " + dir.file("ck")).status,
            0);
  // Copy the step-3 checkpoint away so both resumes start from the same place.
  fs::copy(dir.path / "ck", dir.path / "start", fs::copy_options::recursive);
  {
    snip::Store store(db);
    store.add_checkpoint(1, 3, dir.file("start"));
  }
  ASSERT_EQ(
      sh(kSnip + " train --resume " + dir.file("start") + " --steps 6 --db " + db + " --out " + dir.file("a")).status,
      0);
  std::vector<snip::MetricRow> first = snip::Store(db).metrics(1);
  ASSERT_EQ(first.size(), 6u);
  const Result b = sh(kSnip + " train --resume " + dir.file("start") + " --steps 8 --lr 1e-2 --db " + db + " --out " +
                      dir.file("b"));
  // (--lr differs from the run's: a contradiction even for a branch, which is the same run's settings)
  EXPECT_NE(b.status, 0);
  const Result b2 =
      sh(kSnip + " train --resume " + dir.file("start") + " --steps 8 --db " + db + " --out " + dir.file("b"));
  ASSERT_EQ(b2.status, 0) << b2.out;
  snip::Store store(db);
  const auto runs = store.runs();
  ASSERT_EQ(runs.size(), 2u);
  const snip::RunInfo branch = store.run(2);
  EXPECT_EQ(branch.spec.parent_run_id, std::optional<int64_t>(1));
  EXPECT_EQ(branch.spec.parent_step, std::optional<int64_t>(3));
  EXPECT_EQ(branch.last_step, 8);
  // A branch may not write into the checkpoint it branches from (run 1's, and run 2's start).
  const auto start_bytes = slurp(dir.file("start") + "/model.safetensors");
  const Result in_place = sh(kSnip + " train --resume " + dir.file("start") + " --steps 9 --db " + db);
  EXPECT_NE(in_place.status, 0) << in_place.out;
  EXPECT_TRUE(contains(in_place.out, "starts a branch of run 1")) << in_place.out;
  EXPECT_TRUE(contains(in_place.out, "give the branch a folder of its own with --out")) << in_place.out;
  EXPECT_EQ(slurp(dir.file("start") + "/model.safetensors"), start_bytes);
  EXPECT_EQ(snip::Store(db).runs().size(), 2u);
  // --steps at or below the checkpoint's step trains nothing: refused, the checkpoint untouched.
  const Result back = sh(kSnip + " train --resume " + dir.file("a") + " --steps 5 --db " + db);
  EXPECT_NE(back.status, 0) << back.out;
  EXPECT_TRUE(contains(back.out, "a new total of 5 steps is not beyond the checkpoint's step 6")) << back.out;
  // The parent keeps every row it had, bit for bit.
  const std::vector<snip::MetricRow> after = store.metrics(1);
  ASSERT_EQ(after.size(), first.size());
  for (size_t i = 0; i < after.size(); ++i) EXPECT_EQ(after[i].train_loss, first[i].train_loss) << i;
}

// A resume from an earlier checkpoint that turns adaptive planning on goes another way than the
// run did: a branch. (It used to claim the run and overwrite its later rows with the adaptive ones.)
TEST(RunIdentity, AResumeThatTurnsOnAdaptivePlanningFromAnEarlierCheckpointIsABranch) {
  TempDir dir("adaptive-branch");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 4 --db " + db + " --out " + dir.file("ck")).status, 0);
  fs::copy(dir.path / "ck", dir.path / "start", fs::copy_options::recursive);
  snip::Store(db).add_checkpoint(1, 4, dir.file("start"));
  ASSERT_EQ(
      sh(kSnip + " train --resume " + dir.file("start") + " --steps 6 --db " + db + " --out " + dir.file("b1")).status,
      0);
  const std::vector<snip::MetricRow> before = snip::Store(db).metrics(1);
  ASSERT_EQ(before.size(), 6u);
  const Result b2 = sh(kSnip + " train --resume " + dir.file("start") + " --steps 6 --method snip --budget 0.75 --db " +
                       db + " --out " + dir.file("b2"));
  ASSERT_EQ(b2.status, 0) << b2.out;
  snip::Store store(db);
  ASSERT_EQ(store.runs().size(), 2u) << "the adaptive resume claimed run 1";
  EXPECT_EQ(store.run(2).spec.parent_run_id, std::optional<int64_t>(1));
  EXPECT_EQ(store.run(2).spec.method, "snip");
  EXPECT_EQ(store.run(1).spec.method, "uniform-bf16");
  EXPECT_EQ(store.metrics(1), before) << "run 1's rows were overwritten";
  EXPECT_GT(store.metrics(2).back().fp4_fraction, 0.5);
}

// A checkpoint folder another run overwrites (--overwrite) is that run's from then on: a resume
// from it continues the run that wrote it, and the run whose checkpoint it was no longer lists it.
TEST(RunIdentity, AnOverwrittenCheckpointFolderBelongsToTheRunThatWroteIt) {
  TempDir dir("overwritten");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 3 --db " + db + " --out " + dir.file("A")).status, 0);
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --db " + db + " --out " + dir.file("B")).status, 0);
  const Result moved =
      sh(kSnip + " train --resume " + dir.file("A") + " --steps 5 --out " + dir.file("B") + " --overwrite --db " + db);
  ASSERT_EQ(moved.status, 0) << moved.out;
  {
    snip::Store store(db);
    EXPECT_TRUE(store.checkpoints(2).empty()) << "run 2 still lists the folder run 1 replaced";
    ASSERT_FALSE(store.checkpoints(1).empty());
    EXPECT_EQ(store.checkpoints(1).back().step, 5);
  }
  const Result go_on = sh(kSnip + " train --resume " + dir.file("B") + " --steps 6 --db " + db);
  ASSERT_EQ(go_on.status, 0) << go_on.out;
  EXPECT_TRUE(contains(go_on.out, "recording run 1 ")) << go_on.out;
  snip::Store store(db);
  EXPECT_EQ(store.run(1).last_step, 6);
  EXPECT_EQ(store.run(2).last_step, 2);
  EXPECT_EQ(store.metrics(2).size(), 2u);
}

// A validation is the run's: `snip show --run` counts it, and its summary (Spearman per
// precision) is read with the list the Plan view shows.
TEST(RunIdentity, AValidationIsAttachedToItsRunWithItsSummary) {
  TempDir dir("validation");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 3 --db " + db + " --out " + dir.file("ck")).status, 0);
  const Result v = sh(kSnip + " validate --checkpoint " + dir.file("ck") + " --db " + db);
  ASSERT_EQ(v.status, 0) << v.out;
  snip::Store store(db);
  const auto validations = store.validations(1);
  ASSERT_EQ(validations.size(), 1u) << "the validation is not attached to run 1";
  EXPECT_FALSE(validations[0].summary.empty());
  EXPECT_TRUE(contains(sh(kSnip + " show --run 1 --db " + db).out, "validations 1"));
}

TEST(RunIdentity, AMeasurementOnAnotherCorpusIsStoredButNotAsARoundOfTheRun) {
  TempDir dir("other-corpus");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 3 --db " + db + " --out " + dir.file("ck")).status, 0);
  {
    std::ofstream other(dir / "other.txt");
    for (int i = 0; i < 400; ++i) other << "A corpus the run never trained on, line " << i << ".\n";
  }
  const Result c = sh(kSnip + " collect --checkpoint " + dir.file("ck") + " --db " + db + " --noise-passes 1 --data " +
                      dir.file("other.txt"));
  ASSERT_EQ(c.status, 0) << c.out;
  EXPECT_TRUE(contains(c.out, "not as a round of run 1")) << c.out;
  const Result v = sh(kSnip + " validate --checkpoint " + dir.file("ck") + " --db " + db + " --data " +
                      dir.file("other.txt") + " --batches 1 --no-weight-truth");
  ASSERT_EQ(v.status, 0) << v.out;
  EXPECT_TRUE(contains(v.out, "not as a round of run 1")) << v.out;
  {
    snip::Store store(db);
    EXPECT_TRUE(store.stats_rounds(1).empty()) << "a round on another corpus became one of the run's";
    EXPECT_TRUE(store.validations(1).empty());
    EXPECT_EQ(store.stats_rounds().size(), 2u);  // both stored, on their own
  }
  // The run's own corpus, named by path, is the run's: that round is attached.
  const Result own = sh(kSnip + " collect --checkpoint " + dir.file("ck") + " --db " + db + " --noise-passes 1");
  ASSERT_EQ(own.status, 0) << own.out;
  EXPECT_FALSE(contains(own.out, "not as a round")) << own.out;
  EXPECT_EQ(snip::Store(db).stats_rounds(1).size(), 1u);
}

TEST(RunIdentity, TheRunsTokenizerIsItsOwnFromAnyFolderAndAChangedOneIsRefused) {
  TempDir dir("tok");
  fs::create_directories(dir.path / "x");
  fs::create_directories(dir.path / "y");
  {
    std::ofstream text(dir.path / "text.txt");
    for (int i = 0; i < 400; ++i)
      text << "In the beginning line " << i << " the quick brown fox jumps over the lazy dog " << (i * 7919 % 1000)
           << ".\n";
  }
  const std::string text = dir / "text.txt";
  ASSERT_EQ(
      sh("cd " + dir.file("x") + " && " + kSnip + " tokenizer train --input " + text + " --vocab-size 300 --out tok")
          .status,
      0);
  ASSERT_EQ(
      sh("cd " + dir.file("y") + " && " + kSnip + " tokenizer train --input " + text + " --vocab-size 320 --out tok")
          .status,
      0);
  // tiny's shape with room for the tokenizer's 300 pieces
  std::ofstream(dir.path / "config.json") << R"({"hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 512, "max_position_embeddings": 64})";
  const Result t =
      sh("cd " + dir.file("x") + " && " + kSnip + " train --config ../config.json --batch-size 2 " +
         "--seq-len 32 --eval-every 0 --steps 2 --no-db --data " + text + " --tokenizer tok.model --out ck");
  ASSERT_EQ(t.status, 0) << t.out;
  const auto state = nlohmann::json::parse(slurp(dir.file("x/ck/trainer_state.json")));
  EXPECT_EQ(state["config"]["tokenizer"], fs::canonical(dir.path / "x" / "tok.model").string());
  EXPECT_FALSE(state["config"]["tokenizer_fingerprint"].get<std::string>().empty());
  // From y (which holds another tok.model) eval and collect use x's tokenizer.
  const Result e = sh("cd " + dir.file("y") + " && " + kSnip + " eval --checkpoint " + dir.file("x/ck") + " --data " +
                      text + " --batches 1");
  EXPECT_EQ(e.status, 0) << e.out;
  // The run's tokenizer file replaced by another: refused, naming the file, before any work.
  fs::copy_file(dir.path / "y" / "tok.model", dir.path / "x" / "tok.model", fs::copy_options::overwrite_existing);
  for (const std::string& cmd :
       std::vector<std::string>{"eval --checkpoint " + dir.file("x/ck") + " --data " + text + " --batches 1",
                                "train --resume " + dir.file("x/ck") + " --steps 3 --no-db",
                                "collect --checkpoint " + dir.file("x/ck") + " --out " + dir.file("st.json")}) {
    const Result r = sh("cd " + dir.file("y") + " && " + kSnip + " " + cmd);
    EXPECT_NE(r.status, 0) << cmd;
    EXPECT_TRUE(contains(r.out, "is not the one this run was trained with")) << cmd << "\n" << r.out;
  }
}

// ---- files that cannot be trusted ----------------------------------------------------------------

TEST(Checkpoints, AChangedWeightIsRefusedByEveryReader) {
  TempDir dir("crc");
  const std::string ck = dir / "ck";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --no-db --out " + ck).status, 0);
  // One weight set to 1e30; the file stays a valid safetensors file.
  const std::string path = ck + "/model.safetensors";
  std::string bytes = slurp(path);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  ASSERT_TRUE(contains(bytes.substr(8, n), "snip_data_crc32"));
  const float big = 1e30f;
  std::memcpy(bytes.data() + 8 + n + 64, &big, 4);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }
  for (const std::string& cmd : std::vector<std::string>{
           "eval --checkpoint " + ck + " --batches 1", "train --resume " + ck + " --steps 3 --no-db",
           "collect --checkpoint " + ck + " --out " + dir.file("st.json"),
           "validate --checkpoint " + ck + " --batches 1 --no-weight-truth"}) {
    const Result r = sh(kSnip + " " + cmd);
    EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
    EXPECT_TRUE(contains(r.out, "does not match the checksum recorded when it was written") ||
                contains(r.out, "do not match the checksum recorded when it was written"))
        << cmd << "\n"
        << r.out;
  }
}

// The files of a checkpoint vouch for each other: a checksum key removed or renamed (in the state
// or in the weights, with the data then edited) is refused by every reader, not taken as an older
// checkpoint without checksums.
TEST(Checkpoints, ARemovedOrRenamedChecksumKeyIsRefused) {
  TempDir dir("renamed-key");
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --no-db --out " + dir.file("ck")).status, 0);
  fs::copy(dir.path / "ck", dir.path / "state", fs::copy_options::recursive);
  fs::copy(dir.path / "ck", dir.path / "weights", fs::copy_options::recursive);
  {
    std::string state = slurp(dir.file("state") + "/trainer_state.json");
    ASSERT_NE(state.find("\"snip_crc32\""), std::string::npos);
    state.replace(state.find("\"snip_crc32\""), 12, "\"s.ip_crc32\"");
    std::ofstream(dir.file("state") + "/trainer_state.json", std::ios::binary) << state;
    std::string w = slurp(dir.file("weights") + "/model.safetensors");
    ASSERT_NE(w.find("snip_data_crc32"), std::string::npos);
    w.replace(w.find("snip_data_crc32"), 15, "snip_data_crc3X");
    w[w.size() - 1] ^= 0x40;  // and a weight changed
    std::ofstream(dir.file("weights") + "/model.safetensors", std::ios::binary) << w;
  }
  for (const std::string& ck : {dir.file("state"), dir.file("weights")})
    for (const std::string& cmd : {" eval --checkpoint " + ck, " train --no-db --steps 4 --resume " + ck}) {
      const Result r = sh(kSnip + cmd);
      EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
      EXPECT_TRUE(contains(r.out, "restore the checkpoint from a copy")) << cmd << "\n" << r.out;
    }
  // The untouched copy evaluates (two batches: the whole corpus took 43 s, and 10+ minutes under ASan).
  EXPECT_EQ(sh(kSnip + " eval --batches 2 --checkpoint " + dir.file("ck")).status, 0);
}

TEST(Checkpoints, SwappedTensorsAnEditedStateOrAnotherConfigAreRefused) {
  TempDir dir("state");
  const std::string ck = dir / "ck";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --no-db --out " + ck).status, 0);
  auto copy = [&](const std::string& name) {
    fs::copy(ck, dir.path / name, fs::copy_options::recursive);
    return dir.file(name);
  };
  // Two tensors of one shape, their names swapped in the header (same length: the file stays valid).
  const std::string swapped = copy("swapped");
  {
    std::string bytes = slurp(swapped + "/model.safetensors");
    const std::string a = "layers.0.self_attn.q_proj", b = "layers.0.self_attn.o_proj";
    const size_t i = bytes.find(a), j = bytes.find(b);
    ASSERT_NE(i, std::string::npos);
    ASSERT_NE(j, std::string::npos);
    bytes.replace(i, a.size(), b);
    bytes.replace(j, b.size(), a);
    std::ofstream(swapped + "/model.safetensors", std::ios::binary | std::ios::trunc) << bytes;
  }
  // The learning rate edited in trainer_state.json.
  const std::string edited = copy("edited");
  {
    auto state = nlohmann::json::parse(slurp(edited + "/trainer_state.json"));
    state["config"]["schedule"]["lr"] = 0.3;
    std::ofstream(edited + "/trainer_state.json", std::ios::trunc) << state.dump(2);
  }
  // Another rope_theta in config.json.
  const std::string config = copy("config");
  {
    auto c = nlohmann::json::parse(slurp(config + "/config.json"));
    c["rope_theta"] = 20000.0;
    std::ofstream(config + "/config.json", std::ios::trunc) << c.dump(2);
  }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {swapped, "do not match the checksum recorded when it was written"},
      {edited, "do not match the checksum recorded when it was saved"},
      {config, "config.json differs from the model config in trainer_state.json"}};
  for (const auto& [c, says] : cases)
    for (const std::string& cmd : std::vector<std::string>{"eval --checkpoint " + c + " --batches 1",
                                                           "train --resume " + c + " --steps 4 --no-db"}) {
      const Result r = sh(kSnip + " " + cmd);
      EXPECT_NE(r.status, 0) << cmd << "\n" << r.out;
      EXPECT_TRUE(contains(r.out, says)) << cmd << "\n" << r.out;
    }
}

TEST(ReadOnly, ADatabaseTheUserCannotWriteIsListedShownAndExported) {
  TempDir dir("ro");
  fs::create_directories(dir.path / "ro");
  const std::string db = dir / "ro/runs.db";
  // Adaptive, so the run holds a statistics round to plan from.
  ASSERT_EQ(
      sh(kSnip + " train" + kTiny + "--steps 2 --method snip --budget 0.5 --db " + db + " --out " + dir.file("ck"))
          .status,
      0);
  ASSERT_FALSE(fs::exists(db + "-wal"));  // closed cleanly
  std::string as_user;
  if (::geteuid() == 0) {
    // Root ignores permissions: run the readers as nobody, who cannot write a root-owned folder.
    if (sh("command -v setpriv").status != 0) GTEST_SKIP() << "setpriv (util-linux) is not installed";
    fs::permissions(dir.path, fs::perms(0755));
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
    if (sh(as_user + kSnip + " --version").status != 0)
      GTEST_SKIP() << "nobody cannot run " << kSnip << " (a folder on its path is private to root)";
  } else {
    fs::permissions(db, fs::perms(0444));
  }
  fs::permissions(dir.path / "ro", fs::perms(0555));
  const auto before = slurp(db);
  for (const std::string& cmd :
       std::vector<std::string>{"runs", "runs --json", "show --run 1", "export --run 1", "compare --list",
                                "solve --run 1 --budget 0.5", "sweep --run 1 --budgets 0:1:0.5"}) {
    const Result r = sh(as_user + kSnip + " " + cmd + " --db " + db);
    EXPECT_EQ(r.status, 0) << cmd << "\n" << r.out;
  }
  EXPECT_TRUE(contains(sh(as_user + kSnip + " runs --db " + db).out, "finished"));
  // A command that writes says why it cannot.
  const Result w = sh(as_user + kSnip + " train" + kTiny + "--steps 1 --db " + db + " --out " + dir.file("ck3"));
  EXPECT_NE(w.status, 0);
  EXPECT_TRUE(contains(w.out, "read-only")) << w.out;
  EXPECT_EQ(slurp(db), before);
  EXPECT_EQ(fs::directory_iterator(dir.path / "ro") == fs::directory_iterator(), false);
  EXPECT_FALSE(fs::exists(db + "-wal"));
}

// ---- plans -------------------------------------------------------------------------------------------

std::string all_fp4_plan(int blocks, const std::string& claim) {
  nlohmann::json layers = nlohmann::json::object();
  for (int b = 0; b < blocks; ++b)
    for (const char* l : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      layers["model.layers." + std::to_string(b) + "." + l] = "fp4";
  nlohmann::json j = {{"format", "snip-plan/1"}, {"method", "manual"}, {"layers", layers}};
  if (!claim.empty()) j["achieved_fp4_fraction"] = nlohmann::json::parse(claim);
  return j.dump();
}

TEST(Plans, AClaimedFractionTheLayersContradictIsRefusedAndAMissingOneDerived) {
  TempDir dir("plans");
  const std::string db = dir / "runs.db";
  {
    std::ofstream(dir.path / "liar.json") << all_fp4_plan(2, "0");
    std::ofstream(dir.path / "quiet.json") << all_fp4_plan(2, "");
  }
  const Result liar = sh(kSnip + " import " + dir.file("liar.json") + " --db " + db);
  EXPECT_NE(liar.status, 0);
  EXPECT_TRUE(contains(liar.out, "\"achieved_fp4_fraction\" is 0 but its layers put 42 of their 42 GEMMs in FP4"))
      << liar.out;
  const Result quiet = sh(kSnip + " import " + dir.file("quiet.json") + " --db " + db + " --json");
  ASSERT_EQ(quiet.status, 0) << quiet.out;
  EXPECT_EQ(snip::Store(db).plan(1).plan.achieved_fp4_fraction, 1.0);
}

// What the store can compute it computes, and what it can check it checks: a mixed plan without
// a claimed fraction needs a run's model; with one, a contradicting claim is refused; a round from
// beyond the run's last step, or under another recipe, was not measured on the run.
TEST(Plans, ImportedPlansAndRoundsAreCheckedAgainstWhatTheStoreCanCompute) {
  TempDir dir("import-checks");
  const std::string db = dir / "runs.db";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --db " + db + " --out " + dir.file("ck")).status, 0);
  nlohmann::json layers = nlohmann::json::object();
  for (int b = 0; b < 2; ++b)
    for (const char* l : {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"})
      layers["model.layers." + std::to_string(b) + "." + l] = b == 0 ? "fp4" : "fp8";
  std::ofstream(dir.file("mixed.json")) << nlohmann::json{{"format", "snip-plan/1"}, {"layers", layers}}.dump();
  std::ofstream(dir.file("lie.json")) << nlohmann::json{
      {"format", "snip-plan/1"},
      {"layers", layers},
      {"achieved_fp4_fraction", 0.05}}.dump();
  const Result no_run = sh(kSnip + " import --db " + db + " " + dir.file("mixed.json"));
  EXPECT_NE(no_run.status, 0);
  EXPECT_TRUE(contains(no_run.out, "give --run ID so the store computes it")) << no_run.out;
  const Result lie = sh(kSnip + " import --db " + db + " --run 1 " + dir.file("lie.json"));
  EXPECT_NE(lie.status, 0);
  EXPECT_TRUE(contains(lie.out, "\"achieved_fp4_fraction\" is 0.05")) << lie.out;
  ASSERT_EQ(sh(kSnip + " import --db " + db + " --run 1 " + dir.file("mixed.json")).status, 0);
  {
    snip::Store store(db);
    ASSERT_EQ(store.plans().size(), 1u);
    const double f = store.plans()[0].plan.achieved_fp4_fraction;
    EXPECT_GT(f, 0.1);
    EXPECT_LT(f, 0.9);
  }
  ASSERT_EQ(sh(kSnip + " collect --checkpoint " + dir.file("ck") + " --out " + dir.file("round.json")).status, 0);
  nlohmann::json round = nlohmann::json::parse(slurp(dir.file("round.json")));
  round["step"] = 99999;
  std::ofstream(dir.file("future.json")) << round.dump();
  round["step"] = 2;
  round["recipe"] = "mx";
  std::ofstream(dir.file("mx.json")) << round.dump();
  for (const char* f : {"future.json", "mx.json"}) {
    const Result r = sh(kSnip + " import --db " + db + " --run 1 " + dir.file(f));
    EXPECT_NE(r.status, 0) << f;
    EXPECT_TRUE(contains(r.out, "it was not measured on this run")) << r.out;
  }
  EXPECT_TRUE(snip::Store(db).stats_rounds(1).empty());
}

TEST(Plans, APlanMadeForAnotherModelIsRefusedBeforeTraining) {
  TempDir dir("foreign");
  {
    std::ofstream(dir.path / "tiny.json") << all_fp4_plan(2, "1");  // tiny has 2 blocks; small has more
  }
  const Result r = sh(kSnip + " train --preset small --batch-size 1 --seq-len 16 --steps 1 --no-db --plan " +
                      dir.file("tiny.json") + " --out " + dir.file("ck"));
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_TRUE(contains(r.out, "was it made for another model?")) << r.out;
  EXPECT_FALSE(fs::exists(dir.path / "ck"));
}

}  // namespace
