// snip-stats/1 files: lossless round trip and clear errors on bad input.
#include <gtest/gtest.h>

#include "snip/error.h"
#include "snip/stats.h"

using namespace snip;

TEST(Stats, JsonRoundTripIsLossless) {
  StatsRound r;
  r.step = 120;
  r.batch_id = "train:e0:b7";
  r.dims = {64, 176, 1, 4, 2};
  r.tokens = 512;
  r.globals = {{"loss0", 3.25}, {"curvature", 1.0 / 3.0}};
  LayerStats ls;
  ls.name = "model.layers.0.mlp.up_proj";
  ls.scalars = {{"x_norm", 12.5}};
  ls.per_precision["fp4"] = {{"dy_err", 0.125}};
  ls.vectors["gamma"] = {1.5f, 2.25f};
  r.layers.push_back(ls);
  EXPECT_EQ(stats_from_json(stats_to_json(r)), r);
}

TEST(Stats, RejectsLayersOutsideTheModelAndNonFiniteValues) {
  const std::string head =
      R"({"format":"snip-stats/1","tokens":8,"model":{"hidden_size":64,"intermediate_size":176,"num_hidden_layers":1,"num_attention_heads":4,"num_key_value_heads":2},)";
  EXPECT_NO_THROW(stats_from_json(head + R"("layers":[{"name":"model.layers.0.mlp.up_proj"}]})"));
  EXPECT_THROW(stats_from_json(head + R"("layers":[{"name":"model.layers.1.mlp.up_proj"}]})"), Error);
  EXPECT_THROW(stats_from_json(head + R"("layers":[{"name":"model.layers.0.mlp.up_proj","scalars":{"a":"x"}}]})"),
               Error);
  EXPECT_THROW(stats_from_json(R"({"format":"snip-stats/1","layers":[]})"), Error);
}
