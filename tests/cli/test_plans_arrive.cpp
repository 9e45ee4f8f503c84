// Plans that arrive intact (docs/FORMATS.md section 8), through the real `snip` binary: a plan
// carries the recipe of the statistics it was solved from, and each exporter maps that recipe
// (by its kind: `tensor:sr` is per-tensor scaling too) to the stack's nearest one.
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

}  // namespace
