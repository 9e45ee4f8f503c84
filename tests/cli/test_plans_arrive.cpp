// Plans that arrive intact (docs/FORMATS.md section 8), through the real `snip` binary: a plan
// carries the recipe of the statistics it was solved from, and each exporter maps that recipe
// (by its kind: `tensor:sr` is per-tensor scaling too) to the stack's nearest one; a plan solved
// for Megatron's pipeline layout is the same on every chunk and exported for that layout.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "cli_test.h"
#include "run_command.h"
#include "temp_dir.h"

namespace {

using Result = snip_test::CommandResult;
using namespace snip_test;  // kSnip, kTiny, sh, q, contains, slurp (cli_test.h)

// A plan solved from the statistics of a run trained under `recipe` carries that recipe, and the
// Megatron export names the stack's recipe for it (a plan from `mx` statistics was exported as
// `blockwise`, the recipe of the default).
TEST(Recipes, APlanCarriesTheRecipeOfItsStatisticsIntoEveryExport) {
  TempDir dir("recipes");
  for (const auto& [recipe, fp8] : std::vector<std::pair<std::string, std::string>>{
           {"mx", "mxfp8"}, {"tensor:sr", "tensorwise"}, {"snip", "blockwise"}}) {
    SCOPED_TRACE(recipe);
    const std::string ck = dir / ("ck-" + recipe), stats = dir / "stats.json", plan = dir / "plan.json";
    ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --no-db --precision fp8 --recipe " + recipe + " --out " + q(ck))
                  .status,
              0);
    ASSERT_EQ(sh(kSnip + " collect --checkpoint " + q(ck) + " --noise-passes 1 --out " + q(stats)).status, 0);
    const Result solved = sh(kSnip + " solve --stats " + q(stats) + " --budget 0.5 --ties --out " + q(plan));
    ASSERT_EQ(solved.status, 0) << solved.out;
    EXPECT_EQ(nlohmann::json::parse(slurp(plan)).value("recipe", ""), recipe);
    const Result yaml = sh(kSnip + " export --plan " + q(plan) + " --to megatron");
    ASSERT_EQ(yaml.status, 0) << yaml.out;
    EXPECT_TRUE(contains(yaml.out, "fp8_quantization_recipe: " + fp8 + " ")) << yaml.out;
    EXPECT_TRUE(contains(yaml.out, "override_nonquantized_autocast: true")) << yaml.out;
  }
}

// `snip solve --pipeline-parallel 2` on the 2-block tiny model: one block per chunk, so blocks 0
// and 1 share every precision; the Megatron export takes the plan's layout (its header says so and
// it names decoder.layers.0 only) and reads back as the same plan. A plan that differs between the
// blocks is refused at that layout with both layers named, and contradictory layouts say why.
TEST(Pipeline, APlanSolvedForMegatronsLayoutIsExportedForItAndOthersAreRefusedWithTheCause) {
  TempDir dir("pipeline");
  const std::string ck = dir / "ck", stats = dir / "stats.json", plan = dir / "pp.json", yaml = dir / "pp.yaml";
  ASSERT_EQ(sh(kSnip + " train" + kTiny + "--steps 2 --no-db --precision fp8 --out " + q(ck)).status, 0);
  ASSERT_EQ(sh(kSnip + " collect --checkpoint " + q(ck) + " --noise-passes 1 --out " + q(stats)).status, 0);
  const std::string solve = kSnip + " solve --stats " + q(stats) + " --budget 0.5 --ties";
  const Result solved = sh(solve + " --pipeline-parallel 2 --out " + q(plan));
  ASSERT_EQ(solved.status, 0) << solved.out;
  EXPECT_TRUE(contains(solved.out, "the same plan on every chunk of pipeline-parallel 2")) << solved.out;
  const nlohmann::json p = nlohmann::json::parse(slurp(plan));
  EXPECT_EQ(p["provenance"]["pipeline"]["parallel"], 2);
  for (const char* layer : {"self_attn.q_proj", "self_attn.o_proj", "mlp.up_proj", "mlp.down_proj"})
    EXPECT_EQ(p["layers"][std::string("model.layers.0.") + layer], p["layers"][std::string("model.layers.1.") + layer])
        << layer;
  const Result exported = sh(kSnip + " export --plan " + q(plan) + " --to megatron --out " + q(yaml));
  ASSERT_EQ(exported.status, 0) << exported.out;
  EXPECT_TRUE(contains(slurp(yaml), "--pipeline-model-parallel-size 2 only")) << slurp(yaml);
  EXPECT_FALSE(contains(slurp(yaml), "decoder.layers.1.")) << slurp(yaml);
  const std::string back = dir / "back.json";
  const Result imported = sh(kSnip + " import --from megatron " + q(yaml) + " --preset tiny --out " + q(back));
  ASSERT_EQ(imported.status, 0) << imported.out;
  EXPECT_EQ(nlohmann::json::parse(slurp(back))["layers"], p["layers"]);

  // Pins that make the blocks differ: solvable without the layout, refused at it.
  const std::string free = dir / "free.json";
  const std::string pins = " --pin model.layers.0.mlp.down_proj=fp8 --pin model.layers.1.mlp.down_proj=fp4";
  ASSERT_EQ(sh(solve + pins + " --out " + q(free)).status, 0);
  const Result refused = sh(kSnip + " export --plan " + q(free) + " --to megatron --pipeline-parallel 2");
  EXPECT_EQ(refused.status, 1);
  EXPECT_TRUE(contains(refused.out, "Megatron names blocks 0 and 1 both decoder.layers.0.mlp.linear_fc2"))
      << refused.out;
  EXPECT_TRUE(contains(refused.out, "model.layers.1.mlp.down_proj fp4")) << refused.out;
  const Result pinned = sh(solve + pins + " --pipeline-parallel 2");
  EXPECT_EQ(pinned.status, 1);
  EXPECT_TRUE(contains(pinned.out, "Megatron names both alike")) << pinned.out;

  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {solve + " --virtual-stages 2", "needs --pipeline-parallel 2 or more"},
           {solve + " --stages 2 --pipeline-parallel 2", "cannot be combined"},
           {solve + " --pipeline-parallel 3", "3 chunks do not divide 2"},
           {kSnip + " export --plan " + q(plan) + " --to te --pipeline-parallel 2", "is a Megatron-LM layout"}}) {
    const Result r = sh(args);
    EXPECT_EQ(r.status, 1) << args;
    EXPECT_TRUE(contains(r.out, says)) << args << "\n" << r.out;
  }
}

}  // namespace
