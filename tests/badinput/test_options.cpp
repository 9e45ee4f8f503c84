// Crashes and ignored or contradictory options, through the real `snip` binary: no input crashes it (planner edge
// cases, integers that overflow or change sign on the way in, sizes that cannot be allocated),
// and no option is silently ignored or silently loses a contradiction (app/option_rules.h), nor
// is a data file that contradicts itself (plans, statistics, model configs). Each test asserts the
// exit status and the message a user sees; the rows are in docs/BAD_INPUT.md.
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "run_command.h"
#include "snip/layers.h"
#include "temp_dir.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Result = snip_test::CommandResult;

Result run(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_EXE) + " " + args);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_text(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary) << s;
}
json read_json(const fs::path& p) {
  return json::parse(read_text(p));
}
void write_json(const fs::path& p, const json& j) {
  write_text(p, j.dump(2));
}

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "expected \"" << (needle) << "\" in:\n" << (haystack)

// Expects exit status 1 with "error: " and `message` in the output.
#define EXPECT_ERROR(result, message)   \
  do {                                  \
    const Result r_ = (result);         \
    EXPECT_EQ(r_.status, 1) << r_.out;  \
    EXPECT_CONTAINS(r_.out, "error: "); \
    EXPECT_CONTAINS(r_.out, message);   \
  } while (0)

// One tiny checkpoint, one statistics round and one plan shared by every test (a few seconds).
class Options : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = tmp_.emplace("options").path;
    const Result t =
        run("train --preset tiny --steps 2 --batch-size 2 --seq-len 16 --eval-every 0 --no-db --out " + p("ck"));
    ASSERT_EQ(t.status, 0) << t.out;
    const Result c = run("collect --checkpoint " + p("ck") + " --batch-size 2 --seq-len 16 --noise-passes 1 --out " +
                         p("stats.json"));
    ASSERT_EQ(c.status, 0) << c.out;
    const Result s = run("solve --stats " + p("stats.json") + " --budget 0.5 --out " + p("plan.json"));
    ASSERT_EQ(s.status, 0) << s.out;
  }
  static void TearDownTestSuite() { tmp_.reset(); }
  static std::string p(const std::string& name) { return (dir_ / name).string(); }
  // A copy of the checkpoint to damage.
  static std::string copy_ck(const std::string& name) {
    fs::remove_all(dir_ / name);
    fs::copy(dir_ / "ck", dir_ / name, fs::copy_options::recursive);
    return p(name);
  }
  // snip train on the tiny preset with these extra options (no database, one short step).
  static Result train(const std::string& extra) {
    return run("train --preset tiny --batch-size 2 --seq-len 16 --eval-every 0 --no-db --out " + p("tr") + " " + extra);
  }
  static inline std::optional<snip_test::TempDir> tmp_;  // owns dir_ for the suite
  static inline fs::path dir_;
};

// ---- section 4: counts where 0 or a negative number meant a default or wrapped ----------------

TEST_F(Options, ZeroAndNegativeCountsAreRefusedNotReplacedByADefault) {
  EXPECT_ERROR(run("train --preset tiny --steps 1 --no-db --seq-len 0"), "--seq-len must be ≥ 1 (got 0)");
  EXPECT_ERROR(run("train --preset tiny --steps 1 --no-db --seq-len -4"), "--seq-len must be ≥ 1 (got -4)");
  EXPECT_ERROR(train("--steps 0"), "--steps must be ≥ 1 (got 0); leave it out for the default");
  EXPECT_ERROR(train("--steps 1 --grad-accum 0"), "--grad-accum must be ≥ 1 (got 0)");
  EXPECT_ERROR(train("--steps 1 --lr-min -1"), "--lr-min must be ≥ 0 (got -1); leave it out for lr/10");
  EXPECT_ERROR(train("--steps 1 --eval-batches 0"), "--eval-batches must be ≥ 1 (got 0)");
  EXPECT_ERROR(run("eval --checkpoint " + p("ck") + " --batches -1"), "--batches must be ≥ 1 (got -1)");
  EXPECT_ERROR(run("eval --checkpoint " + p("ck") + " --seq-len 0"), "--seq-len must be ≥ 1 (got 0)");
  EXPECT_ERROR(run("eval --checkpoint " + p("ck") + " --split everything"),
               "--split 'everything' is not one of all, train or val");
  EXPECT_ERROR(run("collect --checkpoint " + p("ck") + " --seq-len -1"), "--seq-len must be ≥ 1 (got -1)");
  EXPECT_ERROR(run("data peek --seq-len 0"), "--seq-len must be ≥ 1 (got 0)");
  EXPECT_ERROR(run("data info --val-fraction 1"), "--val-fraction must be between 0 and 0.999 (got 1)");
  EXPECT_ERROR(run("show --run -3 --db " + p("none.db")), "--run must be ≥ 1 (got -3)");
  EXPECT_ERROR(run("sweep --stats " + p("stats.json") + " --seeds 0"), "--seeds must be ≥ 1 (got 0)");
}

TEST_F(Options, NegativeUnsignedAndNonFiniteNumbersAreRefusedForEveryCommand) {
  // CLI11 turns -1 into 2^64-1 for an unsigned option; every command gets this check.
  EXPECT_ERROR(train("--steps 1 --seed -1"), "--seed must be a non-negative whole number (got -1)");
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget 0.5 --seed -1"),
               "--seed must be a non-negative whole number (got -1)");
  EXPECT_ERROR(run("data peek --batch -1"), "--batch must be a non-negative whole number (got -1)");
  EXPECT_ERROR(train("--steps 1 --lr nan"), "--lr must be a finite number (got nan)");
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget inf"), "--budget must be a finite number (got inf)");
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget 0.5 --lambda nan"),
               "--lambda must be a finite number (got nan)");
  // Past 64 bits CLI11 kept the saturated value (2^64 − 1, 2^63 − 1) without a word.
  EXPECT_ERROR(train("--steps 1 --seed 18446744073709551616"),
               "--seed is out of range (got 18446744073709551616; a whole number of at most 64 bits)");
  EXPECT_ERROR(run("export --run 99999999999999999999 --db " + p("none.db")),
               "--run is out of range (got 99999999999999999999");
}

TEST_F(Options, AdaptiveOptionsWithoutAMethodAreRefused) {
  EXPECT_ERROR(train("--steps 1 --budget 0.7"),
               "--budget needs --method or --resume: it is the FP4 target of adaptive planning");
  EXPECT_ERROR(train("--steps 1 --replan-every 5"),
               "--replan-every needs --method or --resume: re-planning needs a planning method");
  EXPECT_ERROR(train("--steps 1 --bf16-probe-every 2"), "--bf16-probe-every needs --method");
  EXPECT_ERROR(train("--steps 1 --lambda 0.5"), "--lambda needs --method");
  EXPECT_ERROR(train("--steps 1 --ties"), "--ties needs --method");
  EXPECT_ERROR(train("--steps 1 --method snip --budget 1.5"), "--budget must be between 0 and 1 (got 1.5)");
  // On --resume the checkpoint says whether the run is adaptive: a fixed-plan run's resume with
  // an adaptive option alone is refused, not silently ignored or turned into SNIP at a default.
  const std::string ck = copy_ck("ck_fixed");
  EXPECT_ERROR(run("train --resume " + ck + " --no-db --budget 0.7"),
               ck + " is not an adaptive run, so --budget has nothing to change; give --method too");
  EXPECT_ERROR(run("train --resume " + ck + " --no-db --replan-every 5"),
               ck + " is not an adaptive run, so --replan-every has nothing to change");
}

TEST_F(Options, ContradictoryOptionsAreRefused) {
  EXPECT_ERROR(train("--steps 1 --plan " + p("plan.json") + " --precision fp8"),
               "--plan and --precision cannot be combined: both set every layer's precision");
  EXPECT_ERROR(train("--steps 1 --plan " + p("plan.json") + " --method snip"),
               "--plan and --method cannot be combined");
  EXPECT_ERROR(run("train --preset tiny --steps 1 --db " + p("x.db") + " --no-db"),
               "--db and --no-db cannot be combined");
  EXPECT_ERROR(train("--steps 1 --name foo"), "--name and --no-db cannot be combined");
  EXPECT_ERROR(train("--steps 1 --lr 0.001 --lr-min 0.01"), "--lr-min 0.010000 is above --lr 0.001000");
  EXPECT_FALSE(fs::exists(dir_ / "x.db"));
}

TEST_F(Options, OptionsWithoutEffectArePrintedAsWarnings) {
  const Result s = run("solve --stats " + p("stats.json") + " --budget 0.5 --bf16-max 0.2 --seed 4");
  EXPECT_EQ(s.status, 0) << s.out;
  EXPECT_CONTAINS(s.out, "warning: --bf16-max is ignored without --allow-bf16");
  EXPECT_CONTAINS(s.out, "warning: --seed is ignored unless --method random");
  const Result t = train("--steps 2 --warmup 10 --schedule constant --lr-min 0.0001");
  EXPECT_EQ(t.status, 0) << t.out;
  EXPECT_CONTAINS(t.out, "warning: --lr-min is ignored with --schedule constant");
  EXPECT_CONTAINS(t.out, "warning: --warmup 10 is longer than the run; warming up over all 2 steps");
}

// ---- section 3: the planner never aborts -------------------------------------------------------

// The FP4 fraction left when these layers are pinned to FP8 on the tiny model (2 blocks).
double reachable_with_pins(const std::vector<std::string>& pinned) {
  double all = 0, fp4 = 0;
  for (const auto& l : snip::linear_layers(snip::ModelDims{64, 176, 2, 4, 2})) {
    const double f = l.gemm_flops(1);
    all += f;
    if (std::find(pinned.begin(), pinned.end(), l.name) == pinned.end()) fp4 += f;
  }
  return fp4 / all;
}

TEST_F(Options, PlannerBudgetAtTheLargestFractionThePinsAllowIsAPlanNotAnAbort) {
  const std::vector<std::string> pins = {"model.layers.0.mlp.down_proj", "model.layers.1.self_attn.k_proj"};
  char budget[64];
  std::snprintf(budget, sizeof budget, "%.17g", reachable_with_pins(pins));
  const std::string pin_args = " --pin " + pins[0] + "=fp8 --pin " + pins[1] + "=fp8";
  // Budgets above the largest fraction minus the smallest free layer leave one answer (every free
  // layer FP4); GLPK's presolver then removed every column and aborted (`glp_add_cols: ncs = 0`).
  for (const std::string& b : {std::string("0.84"), std::string("0.85"), std::string(budget)}) {
    const Result s = run("solve --stats " + p("stats.json") + " --budget " + b + pin_args + " --json");
    ASSERT_EQ(s.status, 0) << b << "\n" << s.out;
    const json j = json::parse(s.out);
    EXPECT_EQ(j["fp4_layers"].size(), 12u) << b;
    EXPECT_TRUE(j["meets_budget"].get<bool>()) << b;
  }
  const Result np = run("solve --stats " + p("stats.json") + " --budget 0.99 --json");
  ASSERT_EQ(np.status, 0) << np.out;
  EXPECT_EQ(json::parse(np.out)["fp4_layers"].size(), 14u);
  const Result w = run("sweep --stats " + p("stats.json") + " --budgets 0.5,0.84,0.85," + budget + pin_args +
                       " --methods snip,min-err");
  EXPECT_EQ(w.status, 0) << w.out;
  const Result w2 = run("sweep --stats " + p("stats.json") + " --budgets 0:1:0.01 --methods snip,min-err,min-rel-err");
  EXPECT_EQ(w2.status, 0) << w2.out;
  // Just past it: infeasible, said so, exit 1.
  std::snprintf(budget, sizeof budget, "%.6f", reachable_with_pins(pins) + 1e-3);
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget " + budget + pin_args), "is unreachable");
}

TEST_F(Options, SolverParametersGlpkWouldAbortOnAreRefused) {
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget 0.5 --mip-gap -1"),
               "--mip-gap must be between 0 and 0.999 (got -1)");
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget 0.5 --time-limit-ms -5"),
               "--time-limit-ms must be ≥ 1 (got -5)");
  EXPECT_ERROR(run("solve --stats " + p("stats.json") + " --budget 0.5 --stages 0"), "--stages must be ≥ 1 (got 0)");
  EXPECT_ERROR(run("solve --stats " + p("stats.json") +
                   " --budget 0.5 --pin model.layers.0.mlp.up_proj=fp8 --pin "
                   "model.layers.0.mlp.up_proj=fp4"),
               "pins contradict each other: model.layers.0.mlp.up_proj is pinned to both fp8 and fp4");
}

// ---- section 3: integers from outside --------------------------------------------------------

TEST_F(Options, LargestBatchIndexIsAnEpochNotASentinel) {
  const Result r = run("data peek --batch 18446744073709551615 --json");
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_CONTAINS(r.out, "\"batch\":18446744073709551615");
  EXPECT_CONTAINS(r.out, "\"rows\":[{");
}

TEST_F(Options, NegativeOrWrappedIntegersInTrainerStateAreRefused) {
  const std::string ck = copy_ck("ck_epoch");
  json st = read_json(ck + "/trainer_state.json");
  // A state without our checksum (hand-written, or from another tool): the values themselves are
  // checked. (With the checksum, any edit is refused first: test_cli_nothing_lost.)
  st.erase("snip_crc32");
  st.erase("snip_files");  // (and the checksums of its files it names)
  st["data"]["epoch"] = -1;
  write_json(ck + "/trainer_state.json", st);
  EXPECT_ERROR(run("train --resume " + ck + " --no-db"),
               "trainer_state.json: data.epoch is -1; it must be an integer ≥ 0");
  EXPECT_ERROR(run("collect --checkpoint " + ck), "data.epoch is -1");
  st["data"]["epoch"] = 0;
  st["config"]["batch_size"] = int64_t(4294967298);  // get<int>() wrapped it to 2
  write_json(ck + "/trainer_state.json", st);
  EXPECT_ERROR(run("train --resume " + ck + " --no-db"), "batch_size is 4294967298; it must be an integer ≥ 1");
}

TEST_F(Options, AdamStepCountMustBeANonNegativeInteger) {
  // The metadata "t" of optimizer.safetensors is read as text: "-5" and "12abc" were taken.
  const std::string ck = copy_ck("ck_t");
  std::string bytes = read_text(ck + "/optimizer.safetensors");
  const auto pos = bytes.find("\"t\":\"");
  ASSERT_NE(pos, std::string::npos);
  const auto end = bytes.find('"', pos + 5);
  const std::string value = bytes.substr(pos + 5, end - pos - 5);
  std::string bad = "-" + value.substr(1);
  if (bad.size() != value.size()) bad = std::string(value.size(), '-');
  bytes.replace(pos + 5, value.size(), bad);
  write_text(ck + "/optimizer.safetensors", bytes);
  EXPECT_ERROR(run("train --resume " + ck + " --no-db"), "is not a non-negative integer (the AdamW step count)");
}

TEST_F(Options, DatabaseWithANegativeSchemaVersionIsRefusedUntouched) {
  const std::string db = p("neg.db");
  ASSERT_EQ(run("runs --db " + db).status, 1);  // missing: refused, nothing created
  ASSERT_EQ(run("train --preset tiny --steps 1 --batch-size 2 --seq-len 16 --eval-every 0 --out " + p("ck_db") +
                " --db " + db)
                .status,
            0);
  sqlite3* h = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(h, "PRAGMA user_version = -1", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(h);
  const std::string before = read_text(db);
  EXPECT_ERROR(run("runs --db " + db), "schema version -1 is not one SNIP Workbench writes");
  EXPECT_EQ(read_text(db), before);
}

TEST_F(Options, QuantizeShapeWhoseSizeOverflowsIsAnError) {
  write_text(dir_ / "m.f32", std::string(48, '\0'));
  EXPECT_ERROR(run("quantize --format e4m3 --shape 4294967296x4294967296 --in " + p("m.f32") + " --out " + p("q.f32")),
               "--shape 4294967296x4294967296 is too large: 4294967296 × 4294967296 overflows a 64-bit integer");
  EXPECT_ERROR(run("quantize --format e4m3 --shape 999999999999x9999999 --in " + p("m.f32") + " --out " + p("q.f32")),
               "overflows a 64-bit integer");
  EXPECT_FALSE(fs::exists(dir_ / "q.f32"));
}

TEST_F(Options, ModelsTooLargeToCountOrAllocateAreRefusedBeforeAllocation) {
  json huge = {{"hidden_size", 1 << 30},       {"intermediate_size", 1 << 30}, {"num_hidden_layers", 1 << 30},
               {"num_attention_heads", 1},     {"num_key_value_heads", 1},     {"vocab_size", 256},
               {"max_position_embeddings", 64}};
  write_json(dir_ / "huge.json", huge);
  EXPECT_ERROR(run("train --config " + p("huge.json") + " --steps 1 --no-db"),
               "parameters, more than any machine can hold");
  // Countable but far beyond memory: eval builds a model without a trainer.
  EXPECT_ERROR(run("eval --checkpoint " + p("ck") + " --batch-size 2000000000 --seq-len 64"), "needs about");
}

// ---- section 4: data files that contradict themselves or ask for what is not implemented -----

TEST_F(Options, ConfigFieldsTheEngineDoesNotImplementAreRefused) {
  const json base = read_json(p("ck") + "/config.json");
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"mlp_bias", true}}, "mlp_bias = true is not supported"},
      {{{"attention_dropout", 0.1}}, "attention_dropout must be 0"},
      {{{"pretraining_tp", 2}}, "pretraining_tp must be 1"},
      {{{"partial_rotary_factor", 0.5}}, "partial_rotary_factor must be 1"},
      {{{"hidden_act", "gelu"}}, "hidden_act is \"gelu\""},
      {{{"rope_scaling", {{"type", "linear"}, {"factor", 2.0}}}}, "rope_scaling is not supported"},
      {{{"attention_bias", true}}, "attention_bias = true is not supported"},
      // a misspelt optional field would leave the one it meant at its default: another model
      {{{"rope_thetta", 500000.0}}, "\"rope_thetta\" is not a Llama config field; did you mean \"rope_theta\"?"},
      {{{"rms_norm_esp", 1e-5}}, "did you mean \"rms_norm_eps\""},
  };
  for (const auto& [patch, message] : cases) {
    json c = base;
    c.update(patch);
    write_json(dir_ / "cfg.json", c);
    EXPECT_ERROR(run("train --config " + p("cfg.json") + " --steps 1 --no-db"), message);
  }
  json ok = base;
  ok.update(json{{"attention_dropout", 0.0}, {"mlp_bias", false}, {"pretraining_tp", 1}});
  write_json(dir_ / "cfg.json", ok);
  const Result r = run("train --config " + p("cfg.json") +
                       " --steps 1 --batch-size 2 --seq-len 16 --eval-every 0 "
                       "--no-db --out " +
                       p("cfg_ck"));
  EXPECT_EQ(r.status, 0) << r.out;
}

TEST_F(Options, TiedEmbeddingsWithADistinctLmHeadAreRefused) {
  const std::string ck = copy_ck("ck_tied");
  json c = read_json(ck + "/config.json");
  c["tie_word_embeddings"] = true;
  write_json(ck + "/config.json", c);
  // The state's record of the model says the same (a consistent checkpoint of another writer,
  // without our checksum): the weights themselves are checked.
  json st = read_json(ck + "/trainer_state.json");
  st.erase("snip_crc32");
  st.erase("snip_files");  // (and the checksums of its files it names)
  st["config"]["model"]["tie_word_embeddings"] = true;
  write_json(ck + "/trainer_state.json", st);
  EXPECT_ERROR(run("eval --checkpoint " + ck + " --batches 1"),
               "lm_head.weight differs from model.embed_tokens.weight but config.json says tie_word_embeddings = true");
}

TEST_F(Options, StatisticsWithADuplicatedLayerOrNegativeCurvatureAreRefused) {
  json st = read_json(p("stats.json"));
  json dup = st;
  dup["layers"].push_back(dup["layers"][0]);
  write_json(dir_ / "dup_stats.json", dup);
  const std::string name = st["layers"][0]["name"];
  EXPECT_ERROR(run("solve --stats " + p("dup_stats.json") + " --budget 0.5"),
               "layers[14]: layer '" + name + "' appears twice (also layers[0])");
  EXPECT_ERROR(run("import " + p("dup_stats.json") + " --db " + p("imp.db")), "appears twice");
  json neg = st;
  neg["globals"]["curvature"] = -0.5;
  write_json(dir_ / "neg_stats.json", neg);
  // A negative curvature can be measured (noise): planned on, with a warning, never silently.
  for (const std::string cmd : {"solve --budget 0.5", "sweep --budgets 0.5"}) {
    const Result r = run(cmd + " --stats " + p("neg_stats.json"));
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_CONTAINS(r.out,
                    "neg_stats.json: the measured curvature is negative (-0.5), so every ΔL estimate is negative");
  }
  json sig = st;
  sig["globals"]["sigma_eps"] = -1.0;
  write_json(dir_ / "sig_stats.json", sig);
  EXPECT_ERROR(run("solve --stats " + p("sig_stats.json") + " --budget 0.5"), "globals.sigma_eps = -1.0 is negative");
}

// `snip import` used to store plans naming no linear layer and statistics without layers or
// without a global the planner needs; every command that read them back refused them. Refused at
// import, with nothing stored.
TEST_F(Options, ImportRefusesPlansAndStatisticsNoCommandCouldUse) {
  json bad_plan = read_json(p("plan.json"));
  bad_plan["layers"]["model.layers.0.mlp.nonexist"] = {{"fprop", "fp4"}, {"dgrad", "fp4"}, {"wgrad", "fp4"}};
  write_json(dir_ / "bad_plan.json", bad_plan);
  json no_layers = read_json(p("stats.json"));
  no_layers["layers"] = json::array();
  write_json(dir_ / "no_layers.json", no_layers);
  json no_curvature = read_json(p("stats.json"));
  no_curvature["globals"].erase("curvature");
  write_json(dir_ / "no_curvature.json", no_curvature);
  const std::string db = p("imp_checked.db");
  EXPECT_ERROR(run("import --db " + db + " " + p("bad_plan.json")),
               "names 'model.layers.0.mlp.nonexist', which is not a linear layer");
  EXPECT_ERROR(run("import --db " + db + " " + p("no_layers.json")), "cannot be planned from (it holds no layer)");
  EXPECT_ERROR(run("import --db " + db + " " + p("stats.json") + " " + p("no_curvature.json")),
               "globals has no \"curvature\"");
  const Result ok = run("import --db " + db + " " + p("stats.json") + " " + p("plan.json"));
  EXPECT_EQ(ok.status, 0) << ok.out;
  EXPECT_CONTAINS(ok.out, "imported statistics round 1 from");  // the refused imports stored nothing
  EXPECT_CONTAINS(ok.out, "imported plan 1 from");
}

TEST_F(Options, PlansWithTwoSpellingsOfALayerABadBudgetOrRecipeAreRefused) {
  const json plan = read_json(p("plan.json"));
  json two = plan;
  two["layers"]["model.layers.00.mlp.up_proj"] = {{"fprop", "fp8"}, {"dgrad", "fp8"}, {"wgrad", "fp8"}};
  write_json(dir_ / "two.json", two);
  EXPECT_ERROR(run("train --preset tiny --steps 1 --no-db --plan " + p("two.json")),
               "layer 'model.layers.00.mlp.up_proj' is not written the way snip names layers; use "
               "'model.layers.0.mlp.up_proj'");
  EXPECT_ERROR(run("import " + p("two.json") + " --db " + p("imp.db")), "model.layers.00.mlp.up_proj");
  // The same key twice in the file: nlohmann kept the last one silently.
  std::string text = plan.dump();
  const std::string key = "\"model.layers.0.mlp.up_proj\":";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos);
  text.insert(at, key + "\"fp4\",");
  write_text(dir_ / "dupkey.json", text);
  EXPECT_ERROR(run("import " + p("dupkey.json") + " --db " + p("imp.db")),
               "key \"model.layers.0.mlp.up_proj\" appears twice in one object");
  json budget = plan;
  budget["budget"] = 1.5;
  write_json(dir_ / "budget.json", budget);
  EXPECT_ERROR(run("import " + p("budget.json") + " --db " + p("imp.db")),
               "\"budget\" is 1.5; it is a fraction of the linear-layer FLOPs and must be between 0 and 1");
  json recipe = plan;
  recipe["recipe"] = "bogus";
  write_json(dir_ / "recipe.json", recipe);
  EXPECT_ERROR(run("train --preset tiny --steps 1 --no-db --plan " + p("recipe.json")),
               "\"recipe\" is \"bogus\"; expected one of snip, mx, nvfp4, tensor");
}

}  // namespace
