// Layer names, shapes and FLOPs (METHOD.md section 3 arithmetic).
#include <gtest/gtest.h>

#include "snip/layers.h"

using namespace snip;

TEST(Layers, ModuleNamesRoundTrip) {
  for (int b : {0, 3, 79})
    for (LayerType t : kAllLayerTypes) {
      auto id = parse_layer_module_name(layer_module_name(b, t));
      ASSERT_TRUE(id.has_value());
      EXPECT_EQ(id->block, b);
      EXPECT_EQ(id->type, t);
    }
  EXPECT_EQ(layer_module_name(3, LayerType::up), "model.layers.3.mlp.up_proj");
  EXPECT_FALSE(parse_layer_module_name("model.layers.x.mlp.up_proj"));
  EXPECT_FALSE(parse_layer_module_name("model.layers.3.mlp.up"));
  EXPECT_FALSE(parse_layer_module_name("lm_head"));
  EXPECT_FALSE(parse_layer_module_name("model.layers.-1.mlp.up_proj"));
}

TEST(Layers, TinyLlamaMlpShareOfFlops) {
  // METHOD.md: in TinyLlama-1.1B the MLP is 78.57% of linear FLOPs.
  ModelDims d{2048, 5632, 22, 32, 4};
  auto layers = linear_layers(d);
  ASSERT_EQ(layers.size(), 22u * kLayersPerBlock);
  double mlp = 0, all = 0;
  for (const auto& l : layers) {
    double f = l.gemm_flops(1);
    all += f;
    if (l.type == LayerType::gate || l.type == LayerType::up || l.type == LayerType::down) mlp += f;
  }
  EXPECT_NEAR(mlp / all, 0.7857, 1e-4);
  EXPECT_EQ(layers[1].out_features, 256);  // k_proj: 4 kv heads × 64
  EXPECT_EQ(layers[3].in_features, 2048);  // o_proj
}
