// The selectable linear layers of a Llama model: names (Hugging Face module names), shapes
// and FLOPs (METHOD.md sections 1 and 3). Layer index l = block * 7 + type.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snip/precision.h"

namespace snip {

enum class LayerType { q = 0, k = 1, v = 2, o = 3, gate = 4, up = 5, down = 6 };
inline constexpr int kLayersPerBlock = 7;
inline constexpr std::array<LayerType, 7> kAllLayerTypes = {
    LayerType::q, LayerType::k, LayerType::v, LayerType::o, LayerType::gate, LayerType::up, LayerType::down};

const char* layer_type_short_name(LayerType t);  // "q" "k" "v" "o" "gate" "up" "down"
const char* layer_type_module(LayerType t);      // "self_attn.q_proj" ... "mlp.down_proj"

// "model.layers.3.mlp.up_proj"
std::string layer_module_name(int block, LayerType t);
// Inverse of layer_module_name; nullopt when the name is not a block linear layer.
struct LayerId {
  int block = 0;
  LayerType type = LayerType::q;
  int index() const { return block * kLayersPerBlock + static_cast<int>(type); }
};
std::optional<LayerId> parse_layer_module_name(std::string_view name);
// Files name a layer only as layer_module_name writes it: "model.layers.00.mlp.up_proj" parses to
// block 0 too, and accepting both spellings would let one file give one layer two values. Throws
// snip::Error "<where>: layer '<name>' is not written as snip writes it: use '<canonical>'".
void check_canonical_layer_name(const std::string& name, const LayerId& id, const std::string& where);

// The dimensions that fix every linear layer's shape (HF config.json names in comments).
struct ModelDims {
  int hidden = 0;        // hidden_size (C)
  int intermediate = 0;  // intermediate_size (F)
  int num_layers = 0;    // num_hidden_layers (L)
  int num_heads = 0;     // num_attention_heads (NH)
  int num_kv_heads = 0;  // num_key_value_heads (KVH)
  int head_dim() const { return hidden / num_heads; }
  bool operator==(const ModelDims&) const = default;
};

// One selectable linear layer: Y = X·Wᵀ with W of shape (out_features N, in_features K).
struct LinearLayerInfo {
  std::string name;  // HF module name
  int index = 0;     // block * 7 + type
  int block = 0;
  LayerType type = LayerType::q;
  int64_t out_features = 0;  // N
  int64_t in_features = 0;   // K
  // FLOPs of one GEMM of this layer for T tokens: 2·T·K·N (the same for fprop, dgrad, wgrad).
  double gemm_flops(int64_t tokens) const { return 2.0 * double(tokens) * double(in_features) * double(out_features); }
};

// All 7·L selectable layers in index order.
std::vector<LinearLayerInfo> linear_layers(const ModelDims& dims);

}  // namespace snip
