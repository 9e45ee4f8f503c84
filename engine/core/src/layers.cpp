// Layer names, shapes and FLOPs of the selectable linear layers.
#include "snip/layers.h"

#include <charconv>

#include "snip/error.h"

namespace snip {

const char* layer_type_short_name(LayerType t) {
  static const char* names[] = {"q", "k", "v", "o", "gate", "up", "down"};
  return names[static_cast<int>(t)];
}

const char* layer_type_module(LayerType t) {
  static const char* names[] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                                "mlp.gate_proj",    "mlp.up_proj",      "mlp.down_proj"};
  return names[static_cast<int>(t)];
}

std::string layer_module_name(int block, LayerType t) {
  return "model.layers." + std::to_string(block) + "." + layer_type_module(t);
}

std::optional<LayerId> parse_layer_module_name(std::string_view name) {
  constexpr std::string_view prefix = "model.layers.";
  if (name.substr(0, prefix.size()) != prefix) return std::nullopt;
  name.remove_prefix(prefix.size());
  int block = -1;
  auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), block);
  if (ec != std::errc() || block < 0 || ptr == name.data()) return std::nullopt;
  name.remove_prefix(ptr - name.data());
  if (name.empty() || name[0] != '.') return std::nullopt;
  name.remove_prefix(1);
  for (LayerType t : kAllLayerTypes)
    if (name == layer_type_module(t)) return LayerId{block, t};
  return std::nullopt;
}

void check_canonical_layer_name(const std::string& name, const LayerId& id, const std::string& where) {
  const std::string canonical = layer_module_name(id.block, id.type);
  if (name != canonical)
    throw Error(where + ": layer '" + name + "' is not written the way snip names layers; use '" + canonical +
                "' (one spelling per layer, so no layer can be given twice)");
}

std::vector<LinearLayerInfo> linear_layers(const ModelDims& d) {
  std::vector<LinearLayerInfo> out;
  const int64_t C = d.hidden, F = d.intermediate, HD = d.head_dim();
  const int64_t q_out = int64_t(d.num_heads) * HD, kv_out = int64_t(d.num_kv_heads) * HD;
  for (int b = 0; b < d.num_layers; ++b) {
    for (LayerType t : kAllLayerTypes) {
      LinearLayerInfo info;
      info.name = layer_module_name(b, t);
      info.block = b;
      info.type = t;
      info.index = b * kLayersPerBlock + static_cast<int>(t);
      switch (t) {
        case LayerType::q:
          info.out_features = q_out;
          info.in_features = C;
          break;
        case LayerType::k:
        case LayerType::v:
          info.out_features = kv_out;
          info.in_features = C;
          break;
        case LayerType::o:
          info.out_features = C;
          info.in_features = q_out;
          break;
        case LayerType::gate:
        case LayerType::up:
          info.out_features = F;
          info.in_features = C;
          break;
        case LayerType::down:
          info.out_features = C;
          info.in_features = F;
          break;
      }
      out.push_back(std::move(info));
    }
  }
  return out;
}

}  // namespace snip
