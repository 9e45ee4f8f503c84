// CSV cost import: every kind of bad input gives an error naming the file, the line and the
// problem; good files round-trip through cost_table_to_csv.
#include <gtest/gtest.h>

#include <string>

#include "planner_test_util.h"
#include "snip/cost_table.h"
#include "snip/error.h"

namespace snip {
namespace {

const std::string kQ = "model.layers.0.self_attn.q_proj";
const std::string kK = "model.layers.0.self_attn.k_proj";

// Expects cost_table_from_csv(text) to throw an Error whose message contains every fragment.
void expect_csv_error(const std::string& text, std::initializer_list<const char*> fragments) {
  try {
    cost_table_from_csv(text, "c.csv");
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    for (const char* f : fragments)
      EXPECT_NE(std::string(e.what()).find(f), std::string::npos) << "missing '" << f << "' in: " << e.what();
  }
}

TEST(CostCsv, ParsesGoodFileWithCommentsAndAnyColumnOrder) {
  const std::string text = "# costs from elsewhere\nflops,layer,cost,precision\n" +  //
                           ("30," + kQ + ",0.5,fp8\n") + ("30," + kQ + ",2.5,fp4\n") + ("15," + kK + ",0.25,fp8\n") +
                           ("15," + kK + ",1.0,fp4\n") + ("15," + kK + ",0,bf16\n");
  const CostTable t = cost_table_from_csv(text, "c.csv");
  ASSERT_EQ(t.layers.size(), 2u);
  EXPECT_EQ(t.layers[0].name, kQ);  // sorted by (block, type)
  EXPECT_DOUBLE_EQ(t.layers[0].total_cost(Precision::fp4), 2.5);
  EXPECT_DOUBLE_EQ(t.layers[1].flops, 15.0);
  EXPECT_TRUE(t.layers[1].has(Precision::bf16));
  EXPECT_FALSE(t.layers[0].has(Precision::bf16));
  EXPECT_FALSE(t.has_roles);
  EXPECT_FALSE(t.has_divergences);
}

// A spreadsheet's CSV: every text field quoted, "" for a quote inside one; the same table as
// the plain file. A quote left open or text after a closing one names the line and the field.
TEST(CostCsv, QuotedFieldsAsSpreadsheetsWriteThemAreRead) {
  const std::string plain = "layer,precision,cost,flops\n" + kQ + ",fp8,0.5,30\n" + kQ + ",fp4,2.5,30\n";
  const std::string quoted = "\"layer\",\"precision\",\"cost\",\"flops\"\n\"" + kQ + "\",\"fp8\",0.5,30\n \"" + kQ +
                             "\" , \"fp4\",\"2.5\",30\n";
  const CostTable a = cost_table_from_csv(plain, "a.csv"), b = cost_table_from_csv(quoted, "b.csv");
  ASSERT_EQ(b.layers.size(), 1u);
  EXPECT_EQ(b.layers[0].name, kQ);
  EXPECT_DOUBLE_EQ(b.layers[0].total_cost(Precision::fp4), a.layers[0].total_cost(Precision::fp4));
  EXPECT_DOUBLE_EQ(b.layers[0].flops, a.layers[0].flops);
  // A quoted field keeps its commas and doubled quotes: here a layer name no model has.
  expect_csv_error("layer,precision,cost,flops\n\"model.layers.0.self_attn.q_proj,x\"\"\",fp8,1,10\n",
                   {"c.csv:2", "model.layers.0.self_attn.q_proj,x\""});
  expect_csv_error("layer,precision,cost,flops\n\"" + kQ + ",fp8,1,10\n", {"c.csv:2", "never closes"});
  expect_csv_error("layer,precision,cost,flops\n\"" + kQ + "\"x,fp8,1,10\n", {"c.csv:2", "after the closing quote"});
}

TEST(CostCsv, RoundTripsWithRoles) {
  CostTable t = test::random_table(2, 4);
  const CostTable back = cost_table_from_csv(cost_table_to_csv(t), "rt.csv");
  ASSERT_EQ(back.layers.size(), t.layers.size());
  EXPECT_TRUE(back.has_roles);
  for (size_t i = 0; i < t.layers.size(); ++i) {
    EXPECT_EQ(back.layers[i].name, t.layers[i].name);
    EXPECT_DOUBLE_EQ(back.layers[i].flops, t.layers[i].flops);
    for (int r = 0; r < kNumRoles; ++r)
      for (Precision p : {Precision::bf16, Precision::fp8, Precision::fp4})
        EXPECT_DOUBLE_EQ(back.layers[i].cost[r][int(p)], t.layers[i].cost[r][int(p)]);
  }
}

TEST(CostCsv, BadInputsNameLineAndCause) {
  const std::string h = "layer,precision,cost,flops\n";
  const std::string ok = kQ + ",fp8,1,10\n" + kQ + ",fp4,2,10\n";
  expect_csv_error("", {"c.csv", "empty"});
  expect_csv_error("layer,precision,cost\n", {"c.csv:1", "flops"});
  expect_csv_error(h + ok + "model.layers.0.attn.q,fp8,1,10\n", {"c.csv:4", "unknown layer", "model.layers.0.attn.q"});
  expect_csv_error(h + ok + kK + ",fp6,1,10\n", {"c.csv:4", "fp6"});
  expect_csv_error(h + ok + kK + ",fp8,-1,10\n" + kK + ",fp4,1,10\n", {"c.csv:4", "negative"});
  expect_csv_error(h + ok + kK + ",fp8,nan,10\n", {"c.csv:4", "finite"});
  expect_csv_error(h + ok + kK + ",fp8,inf,10\n", {"c.csv:4", "finite"});
  expect_csv_error(h + ok + kK + ",fp8,abc,10\n", {"c.csv:4", "not a number"});
  expect_csv_error(h + ok + kQ + ",fp8,3,10\n", {"c.csv:4", "duplicate", "line 2"});
  expect_csv_error(h + ok + kK + ",fp8,1,10\n" + kK + ",fp4,1,11\n", {"c.csv:5", "differs from line 4"});
  expect_csv_error(h + ok + kK + ",fp8,1,10\n", {kK.c_str(), "no fp4"});
  expect_csv_error(h + ok + kK + ",fp8,1\n", {"c.csv:4", "3 fields"});
  expect_csv_error(h + kQ + ",fp8,1,0\n", {"c.csv:2", "positive FLOPs"});
  expect_csv_error(h + kQ + ",fp32,1,10\n", {"c.csv:2", "fp32"});
  expect_csv_error(h, {"no cost rows"});
  expect_csv_error("layer,precision,cost,flops,role\n" + kQ + ",fp8,1,10,fprop\n" + kQ + ",fp4,1,10,fprop\n" + kQ +
                       ",fp8,1,10,backward\n",
                   {kQ.c_str(), "fp4 backward"});
  expect_csv_error("layer,precision,cost,flops,role\n" + kQ + ",fp8,1,10,forward\n", {"c.csv:2", "role"});
}

}  // namespace
}  // namespace snip
