// The --recipe grammar (snip/recipe_name.h): the named recipes, the granularity family
// (block:N, block:row, channel, tensor with ':sr'), canonical spellings, and the errors.
#include <gtest/gtest.h>

#include <string>

#include "snip/error.h"
#include "snip/plan.h"
#include "snip/recipe_name.h"

namespace snip {
namespace {

TEST(RecipeName, NamedRecipesKeepTheirNames) {
  for (const char* n : {"snip", "mx", "nvfp4", "tensor"}) {
    const RecipeName r = parse_recipe_name(n);
    EXPECT_EQ(r.canonical, n);
    EXPECT_FALSE(r.gradient_sr);
  }
  EXPECT_EQ(parse_recipe_name("mx").kind, RecipeName::Kind::mx);
  EXPECT_EQ(parse_recipe_name("tensor").kind, RecipeName::Kind::tensor);
}

TEST(RecipeName, GranularityFamilyParsesToCanonicalSpelling) {
  RecipeName r = parse_recipe_name("block:32");
  EXPECT_EQ(r.kind, RecipeName::Kind::block);
  EXPECT_EQ(r.block, 32);
  EXPECT_FALSE(r.gradient_sr);
  EXPECT_EQ(r.canonical, "block:32");
  r = parse_recipe_name("block:0016:sr");  // leading zeros are the same length
  EXPECT_EQ(r.block, 16);
  EXPECT_TRUE(r.gradient_sr);
  EXPECT_EQ(r.canonical, "block:16:sr");
  r = parse_recipe_name("block:row:rne");  // ':rne' is the default, written without it
  EXPECT_EQ(r.block, 0);
  EXPECT_EQ(r.canonical, "block:row");
  r = parse_recipe_name("channel:sr");
  EXPECT_EQ(r.kind, RecipeName::Kind::channel);
  EXPECT_TRUE(r.gradient_sr);
  EXPECT_EQ(r.canonical, "channel:sr");
  r = parse_recipe_name("tensor:sr");
  EXPECT_EQ(r.kind, RecipeName::Kind::tensor);
  EXPECT_TRUE(r.gradient_sr);
  EXPECT_EQ(r.canonical, "tensor:sr");
  EXPECT_EQ(parse_recipe_name("block:2").block, kMinRecipeBlock);
  EXPECT_EQ(parse_recipe_name("block:4096").block, kMaxRecipeBlock);
}

// Each bad name throws, and the message names what was wrong.
TEST(RecipeName, BadNamesSayWhatIsWrong) {
  const std::pair<const char*, const char*> cases[] = {
      {"fp4-everything", "use one of snip, mx, nvfp4, tensor, block:N"},
      {"block", "block needs a length"},
      {"block:", "must be a whole number"},
      {"block:3x", "must be a whole number"},
      {"block:-16", "between 2 and 4096"},
      {"block:1", "between 2 and 4096"},
      {"block:8192", "use block:row for whole rows"},
      {"block:32:sr:x", "too many ':' parts"},
      {"block:32:fast", "must be 'sr'"},
      {"tensor:xx", "must be 'sr'"},
      {"snip:sr", "has its own rounding rule"},
      {"nvfp4:16", "has its own rounding rule"},
      {"Block:32", "unknown scaling recipe 'Block:32'"},
      {"", "unknown scaling recipe ''"},
  };
  for (const auto& [name, want] : cases) {
    SCOPED_TRACE(name);
    try {
      parse_recipe_name(name);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  }
}

// A plan file's "recipe" goes through the same grammar: granularity names are kept canonically,
// bad ones are refused with the accepted forms.
TEST(RecipeName, PlanFilesUseTheSameGrammar) {
  const Plan p = plan_from_json(R"({"format":"snip-plan/1","recipe":"block:0064:sr","layers":{}})");
  EXPECT_EQ(p.recipe, "block:64:sr");
  EXPECT_EQ(plan_from_json(plan_to_json(p)).recipe, "block:64:sr");
  try {
    plan_from_json(R"({"format":"snip-plan/1","recipe":"block:1","layers":{}})", "p.json");
    ADD_FAILURE() << "block:1 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("p.json: \"recipe\" is \"block:1\"; expected one of snip, mx, nvfp4, tensor, "
                                         "block:N"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace snip
