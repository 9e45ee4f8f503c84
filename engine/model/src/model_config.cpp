// ModelConfig: HF config.json reading/writing with validation, and the named presets.
#include "snip/model_config.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

#include "snip/atomic_file.h"
#include "snip/checked.h"
#include "snip/error.h"

namespace snip {

ModelDims ModelConfig::dims() const {
  ModelDims d;
  d.hidden = hidden_size;
  d.intermediate = intermediate_size;
  d.num_layers = num_hidden_layers;
  d.num_heads = num_attention_heads;
  d.num_kv_heads = num_key_value_heads;
  return d;
}

int64_t ModelConfig::num_parameters() const {
  const int64_t C = hidden_size, F = intermediate_size, V = vocab_size, HD = head_dim();
  const int64_t NH = num_attention_heads, KVH = num_key_value_heads;
  const int64_t per_block = C                   // input_layernorm
                            + NH * HD * C       // q
                            + 2 * KVH * HD * C  // k, v
                            + C * NH * HD       // o
                            + C                 // post_attention_layernorm
                            + 3 * F * C;        // gate, up, down
  return V * C + num_hidden_layers * per_block + C + (tie_word_embeddings ? 0 : V * C);
}

void ModelConfig::validate(const std::string& source) const {
  auto positive = [&](const char* name, int v) {
    if (v <= 0) throw Error(source + ": " + name + " = " + std::to_string(v) + " must be a positive integer");
  };
  positive("hidden_size", hidden_size);
  positive("intermediate_size", intermediate_size);
  positive("num_hidden_layers", num_hidden_layers);
  positive("num_attention_heads", num_attention_heads);
  positive("num_key_value_heads", num_key_value_heads);
  positive("vocab_size", vocab_size);
  positive("max_position_embeddings", max_position_embeddings);
  if (hidden_size % num_attention_heads != 0)
    throw Error(source + ": num_attention_heads = " + std::to_string(num_attention_heads) +
                " does not divide hidden_size = " + std::to_string(hidden_size) +
                " — choose a head count that divides the hidden size");
  if (num_attention_heads % num_key_value_heads != 0)
    throw Error(source + ": num_key_value_heads = " + std::to_string(num_key_value_heads) +
                " does not divide num_attention_heads = " + std::to_string(num_attention_heads) +
                " — grouped-query attention needs a whole number of query heads per kv head");
  if (head_dim() % 2 != 0)
    throw Error(source + ": head dimension hidden_size/num_attention_heads = " + std::to_string(head_dim()) +
                " is odd; rotary embeddings need an even head dimension");
  if (!(rms_norm_eps > 0) || !std::isfinite(rms_norm_eps))
    throw Error(source + ": rms_norm_eps must be a positive number");
  if (!(rope_theta > 0) || !std::isfinite(rope_theta)) throw Error(source + ": rope_theta must be a positive number");
  {  // num_parameters() counts in int64: refuse shapes whose count would overflow it (each field alone is ≤ 2^30)
    const double C = hidden_size, F = intermediate_size, V = vocab_size, HD = head_dim();
    const double per_block =
        2 * C + 2.0 * num_attention_heads * HD * C + 2.0 * num_key_value_heads * HD * C + 3 * F * C;
    const double params = V * C * (tie_word_embeddings ? 1 : 2) + num_hidden_layers * per_block + C;
    if (!(params < 1e18)) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.3g", params);
      throw Error(source + ": this shape has about " + buf +
                  " parameters, more than any machine can hold; check hidden_size, intermediate_size, "
                  "num_hidden_layers and vocab_size");
    }
  }
  if (vocab_size > 65536 * 16)
    throw Error(source + ": vocab_size = " + std::to_string(vocab_size) + " is implausibly large");
}

namespace {

int get_int(const nlohmann::json& j, const char* key, const std::string& source, std::optional<int> fallback) {
  if (!j.contains(key) || j[key].is_null()) {
    if (fallback) return *fallback;
    throw Error(source + ": missing required field \"" + key + "\"");
  }
  const auto& v = j[key];
  if (!v.is_number_integer()) throw Error(source + ": field \"" + key + "\" must be an integer, got " + v.dump());
  const int64_t x = v.get<int64_t>();
  if (x <= 0 || x > (int64_t(1) << 30))
    throw Error(source + ": field \"" + key + "\" = " + std::to_string(x) + " must be a positive integer");
  return int(x);
}

double get_double(const nlohmann::json& j, const char* key, const std::string& source, double fallback) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  const auto& v = j[key];
  if (!v.is_number()) throw Error(source + ": field \"" + key + "\" must be a number, got " + v.dump());
  const double x = v.get<double>();
  if (!(x > 0) || !std::isfinite(x))
    throw Error(source + ": field \"" + key + "\" = " + v.dump() + " must be a positive number");
  return x;
}

// HF LlamaConfig fields whose non-default values change the model's math. The engine implements
// only the defaults; a config asking for anything else is refused instead of silently trained
// (or evaluated) as a different model. Absent or null fields are the defaults.
void refuse_unimplemented_fields(const nlohmann::json& j, const std::string& source) {
  auto has = [&](const char* key) { return j.contains(key) && !j[key].is_null(); };
  auto number = [&](const char* key) {
    return j[key].is_number() ? j[key].get<double>() : std::numeric_limits<double>::quiet_NaN();
  };
  struct Rule {
    const char* key;
    bool supported;
    const char* why;
  };
  const Rule rules[] = {
      {"attention_bias", !has("attention_bias") || j["attention_bias"] == false,
       "attention_bias = true is not supported (Llama projections have no biases)"},
      {"mlp_bias", !has("mlp_bias") || j["mlp_bias"] == false,
       "mlp_bias = true is not supported (the MLP projections here have no biases)"},
      {"attention_dropout", !has("attention_dropout") || number("attention_dropout") == 0.0,
       "attention_dropout must be 0 (the engine has no dropout; training with it would be another model)"},
      {"hidden_dropout", !has("hidden_dropout") || number("hidden_dropout") == 0.0,
       "hidden_dropout must be 0 (the engine has no dropout)"},
      {"pretraining_tp", !has("pretraining_tp") || number("pretraining_tp") == 1.0,
       "pretraining_tp must be 1 (tensor-parallel slicing of the linear layers is not implemented)"},
      {"partial_rotary_factor", !has("partial_rotary_factor") || number("partial_rotary_factor") == 1.0,
       "partial_rotary_factor must be 1 (rotary embeddings cover the whole head here)"},
  };
  for (const Rule& r : rules)
    if (!r.supported) throw Error(source + ": " + r.why + "; got " + r.key + " = " + j[r.key].dump());
}

// Edit distance (insertions, deletions, substitutions) between two short keys.
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// A misspelt field ("rope_thetta") would leave the field it meant at its default (or at the
// value the user meant to change) and train another model: a key this reader does not know, one
// or two edits from a field it reads, is refused with the field it meant. Other unknown keys (a Hugging Face
// config carries many: bos_token_id, torch_dtype, ...) are left alone.
void refuse_misspelt_fields(const nlohmann::json& j, const std::string& source) {
  static const char* const kRead[] = {"hidden_size",
                                      "intermediate_size",
                                      "num_hidden_layers",
                                      "num_attention_heads",
                                      "num_key_value_heads",
                                      "vocab_size",
                                      "max_position_embeddings",
                                      "rms_norm_eps",
                                      "rope_theta",
                                      "tie_word_embeddings",
                                      "head_dim",
                                      "rope_scaling",
                                      "hidden_act",
                                      "model_type",
                                      "attention_bias",
                                      "mlp_bias",
                                      "attention_dropout",
                                      "hidden_dropout",
                                      "pretraining_tp",
                                      "partial_rotary_factor"};
  static const char* const kKnown[] = {"architectures", "initializer_range", "use_cache",   "pad_token_id",
                                       "bos_token_id",  "eos_token_id",      "torch_dtype", "transformers_version",
                                       "_name_or_path", "rope_type",         "dtype"};
  auto known = [](const std::string& k) {
    for (const char* r : kRead)
      if (k == r) return true;
    for (const char* r : kKnown)
      if (k == r) return true;
    return false;
  };
  for (const auto& [key, value] : j.items()) {
    if (known(key) || key.size() < 5) continue;
    for (const char* field : kRead) {
      const std::string f = field;
      if (edit_distance(key, f) > 2) continue;
      throw Error(source + ": \"" + key + "\" is not a Llama config field; did you mean \"" + f + "\"? As written, " +
                  f +
                  (j.contains(f) ? " keeps the value given under its own name" : " is left out (its default applies)") +
                  " and this one is ignored; correct or remove it");
    }
  }
}

}  // namespace

ModelConfig config_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(source + ": expected a JSON object (a Hugging Face config.json)");
  if (j.contains("model_type") && j["model_type"].is_string() && j["model_type"] != "llama")
    throw Error(source + ": model_type is \"" + j["model_type"].get<std::string>() +
                "\"; only Llama models (model_type \"llama\") are supported");
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    throw Error(source + ": hidden_act is " + j["hidden_act"].dump() + "; the Llama MLP here is SwiGLU (\"silu\")");
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(source + ": rope_scaling is not supported; remove it or set it to null");
  refuse_unimplemented_fields(j, source);
  refuse_misspelt_fields(j, source);
  ModelConfig c;
  c.hidden_size = get_int(j, "hidden_size", source, std::nullopt);
  c.intermediate_size = get_int(j, "intermediate_size", source, std::nullopt);
  c.num_hidden_layers = get_int(j, "num_hidden_layers", source, std::nullopt);
  c.num_attention_heads = get_int(j, "num_attention_heads", source, std::nullopt);
  c.num_key_value_heads = get_int(j, "num_key_value_heads", source, c.num_attention_heads);
  c.vocab_size = get_int(j, "vocab_size", source, std::nullopt);
  c.max_position_embeddings = get_int(j, "max_position_embeddings", source, 2048);
  c.rms_norm_eps = get_double(j, "rms_norm_eps", source, 1e-6);
  c.rope_theta = get_double(j, "rope_theta", source, 10000.0);
  if (j.contains("tie_word_embeddings")) {
    if (!j["tie_word_embeddings"].is_boolean()) throw Error(source + ": tie_word_embeddings must be true or false");
    c.tie_word_embeddings = j["tie_word_embeddings"].get<bool>();
  }
  if (j.contains("head_dim") && !j["head_dim"].is_null()) {
    if (!j["head_dim"].is_number_integer())
      throw Error(source + ": field \"head_dim\" must be an integer, got " + j["head_dim"].dump());
    if (j["head_dim"].get<int64_t>() != c.head_dim() && c.num_attention_heads > 0)
      throw Error(source + ": head_dim = " + j["head_dim"].dump() + " differs from hidden_size/num_attention_heads = " +
                  std::to_string(c.head_dim()) + "; only head_dim = hidden_size/num_attention_heads is supported");
  }
  // Weights start as N(0, 0.02²) (Llama::init_weights), HF Llama's default; another value was
  // silently trained with 0.02.
  if (j.contains("initializer_range") && !j["initializer_range"].is_null() &&
      !(j["initializer_range"].is_number() && j["initializer_range"].get<double>() == 0.02))
    throw Error(source + ": initializer_range is " + j["initializer_range"].dump() +
                "; new weights are drawn from N(0, 0.02²) (Hugging Face Llama's default) and no other value is "
                "supported: set it to 0.02 or remove it");
  c.validate(source);
  return c;
}

nlohmann::json config_to_json(const ModelConfig& c) {
  return nlohmann::json{{"architectures", {"LlamaForCausalLM"}},
                        {"model_type", "llama"},
                        {"hidden_act", "silu"},
                        {"hidden_size", c.hidden_size},
                        {"intermediate_size", c.intermediate_size},
                        {"num_hidden_layers", c.num_hidden_layers},
                        {"num_attention_heads", c.num_attention_heads},
                        {"num_key_value_heads", c.num_key_value_heads},
                        {"vocab_size", c.vocab_size},
                        {"max_position_embeddings", c.max_position_embeddings},
                        {"rms_norm_eps", c.rms_norm_eps},
                        {"rope_theta", c.rope_theta},
                        {"rope_scaling", nullptr},
                        {"attention_bias", false},
                        {"tie_word_embeddings", c.tie_word_embeddings},
                        {"initializer_range", 0.02},
                        {"torch_dtype", "float32"}};
}

ModelConfig read_config_file(const std::string& path) {
  const std::string text = read_file(path);
  return config_from_json(parse_json_strict(text, path), path);
}

void write_config_file(const std::string& path, const ModelConfig& c) {
  write_file_atomic(path, config_to_json(c).dump(2) + "\n");
}

ModelConfig preset_config(const std::string& name) {
  ModelConfig c;
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  if (name == "tiny") {  // trains in seconds; the tests' model
    c.hidden_size = 64, c.intermediate_size = 176, c.num_hidden_layers = 2, c.num_attention_heads = 4;
    c.num_key_value_heads = 2, c.vocab_size = 256, c.max_position_embeddings = 64;
  } else if (name == "small") {  // the default: a visible loss curve in minutes on 2 cores
    c.hidden_size = 256, c.intermediate_size = 688, c.num_hidden_layers = 6, c.num_attention_heads = 8;
    c.num_key_value_heads = 4, c.vocab_size = 256, c.max_position_embeddings = 256;
  } else if (name == "medium") {  // ~25M parameters
    c.hidden_size = 512, c.intermediate_size = 1376, c.num_hidden_layers = 8, c.num_attention_heads = 8;
    c.num_key_value_heads = 8, c.vocab_size = 256, c.max_position_embeddings = 512;
  } else if (name == "tinyllama-1.1b") {  // TinyLlama-1.1B's shape, for planning from imported statistics
    c.hidden_size = 2048, c.intermediate_size = 5632, c.num_hidden_layers = 22, c.num_attention_heads = 32;
    c.num_key_value_heads = 4, c.vocab_size = 32000, c.max_position_embeddings = 2048;
  } else {
    std::string names;
    for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
    throw Error("unknown model preset \"" + name + "\"; choose one of: " + names);
  }
  c.validate("preset " + name);
  return c;
}

std::vector<std::string> preset_names() {
  return {"tiny", "small", "medium", "tinyllama-1.1b"};
}

}  // namespace snip
