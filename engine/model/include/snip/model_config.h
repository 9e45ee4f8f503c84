// Llama model configuration in Hugging Face `config.json` field names, its validation, and the
// named presets (tiny, small, medium, tinyllama-1.1b).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snip/layers.h"

namespace snip {

struct ModelConfig {
  int hidden_size = 0;              // C
  int intermediate_size = 0;        // F
  int num_hidden_layers = 0;        // L
  int num_attention_heads = 0;      // NH
  int num_key_value_heads = 0;      // KVH (grouped-query attention; == NH for multi-head)
  int vocab_size = 0;               // V
  int max_position_embeddings = 0;  // longest sequence the model is used with
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  bool tie_word_embeddings = false;  // lm_head.weight is model.embed_tokens.weight

  int head_dim() const { return hidden_size / num_attention_heads; }  // HD
  ModelDims dims() const;
  // Number of parameters (tied embeddings counted once).
  int64_t num_parameters() const;

  // Throws snip::Error naming the field and the fix (heads not dividing hidden size, ...).
  void validate(const std::string& source = "config") const;

  bool operator==(const ModelConfig&) const = default;
};

// JSON <-> config. Reading validates; missing optional fields take Hugging Face's LlamaConfig
// defaults (num_key_value_heads = num_attention_heads, rms_norm_eps 1e-6, rope_theta 10000,
// tie_word_embeddings false, max_position_embeddings 2048). `source` names the file in errors.
ModelConfig config_from_json(const nlohmann::json& j, const std::string& source = "config.json");
nlohmann::json config_to_json(const ModelConfig& c);
ModelConfig read_config_file(const std::string& path);
void write_config_file(const std::string& path, const ModelConfig& c);  // atomic

// Named presets: "tiny" (tests), "small" (default), "medium" (~25M parameters),
// "tinyllama-1.1b" (planning only). Throws snip::Error listing the names for an unknown one.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace snip
