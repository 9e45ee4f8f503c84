// snip-stats/1 JSON reading and writing.
#include "snip/stats.h"

#include <cmath>

#include "snip/checked.h"
#include "snip/error.h"
#include "snip/layers.h"

namespace snip {

using nlohmann::json;

namespace {

double finite_number(const json& v, const std::string& where) {
  if (!v.is_number()) throw Error(where + " must be a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) throw Error(where + " is not finite");
  return d;
}

std::map<std::string, double> number_map(const json& j, const std::string& where) {
  if (!j.is_object()) throw Error(where + " must be an object of numbers");
  std::map<std::string, double> out;
  for (auto it = j.begin(); it != j.end(); ++it) out[it.key()] = finite_number(it.value(), where + "." + it.key());
  return out;
}

int dim(const json& m, const char* key, const std::string& source) {
  if (!m.contains(key) || !m[key].is_number_integer() || m[key].get<int64_t>() <= 0 ||
      m[key].get<int64_t>() > (1 << 24))
    throw Error(source + ": model." + key + " must be a positive integer");
  return int(m[key].get<int64_t>());
}

}  // namespace

StatsRound stats_from_json(const std::string& text, const std::string& source) {
  const json j = parse_json_strict(text, source);
  if (!j.is_object() || !j.contains("format") || j["format"] != "snip-stats/1")
    throw Error(source + ": not a statistics file (expected \"format\": \"snip-stats/1\")");
  StatsRound r;
  if (j.contains("step")) {
    r.step = json_integer<int64_t>(j["step"], source + ": \"step\"", 0);
  }
  if (j.contains("batch_id") && j["batch_id"].is_string()) r.batch_id = j["batch_id"].get<std::string>();
  if (j.contains("recipe") && j["recipe"].is_string()) r.recipe = j["recipe"].get<std::string>();
  if (!j.contains("model") || !j["model"].is_object())
    throw Error(source +
                ": missing \"model\" {hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, "
                "num_key_value_heads}");
  const json& m = j["model"];
  r.dims.hidden = dim(m, "hidden_size", source);
  r.dims.intermediate = dim(m, "intermediate_size", source);
  r.dims.num_layers = dim(m, "num_hidden_layers", source);
  r.dims.num_heads = dim(m, "num_attention_heads", source);
  r.dims.num_kv_heads = m.contains("num_key_value_heads") ? dim(m, "num_key_value_heads", source) : r.dims.num_heads;
  if (r.dims.hidden % r.dims.num_heads != 0 || r.dims.num_heads % r.dims.num_kv_heads != 0)
    throw Error(source + ": model heads do not divide hidden_size / num_attention_heads");
  if (!j.contains("tokens") || !j["tokens"].is_number_integer() || j["tokens"].get<int64_t>() <= 0)
    throw Error(source + ": \"tokens\" (tokens in the statistics batch) must be a positive integer");
  r.tokens = j["tokens"].get<int64_t>();
  if (j.contains("globals")) r.globals = number_map(j["globals"], source + ": globals");
  if (j.contains("options")) r.options = j["options"];
  // Scales no measurement makes negative (a negative curvature can be measured: the front warns).
  for (const char* key : {"sigma_eps", "sigma_eta", "k_t"}) {
    auto it = r.globals.find(key);
    if (it != r.globals.end() && it->second < 0)
      throw Error(source + ": globals." + key + " = " + json(it->second).dump() +
                  " is negative; it is a noise scale or step factor and must be ≥ 0 — the file is damaged or was not "
                  "written by a statistics round");
  }
  if (!j.contains("layers") || !j["layers"].is_array()) throw Error(source + ": missing \"layers\" array");
  std::map<std::string, size_t> seen;  // layer name -> first index
  for (size_t i = 0; i < j["layers"].size(); ++i) {
    const json& lj = j["layers"][i];
    const std::string where = source + ": layers[" + std::to_string(i) + "]";
    if (!lj.is_object() || !lj.contains("name") || !lj["name"].is_string()) throw Error(where + " needs a \"name\"");
    LayerStats ls;
    ls.name = lj["name"].get<std::string>();
    auto id = parse_layer_module_name(ls.name);
    if (!id || id->block >= r.dims.num_layers)
      throw Error(where + ": '" + ls.name + "' is not a linear layer of a " + std::to_string(r.dims.num_layers) +
                  "-block model");
    check_canonical_layer_name(ls.name, *id, where);
    if (!seen.emplace(ls.name, i).second)
      throw Error(where + ": layer '" + ls.name + "' appears twice (also layers[" + std::to_string(seen[ls.name]) +
                  "]); a statistics round has one entry per layer — which one was measured?");
    if (lj.contains("scalars")) ls.scalars = number_map(lj["scalars"], where + ".scalars");
    if (lj.contains("per_precision")) {
      if (!lj["per_precision"].is_object()) throw Error(where + ".per_precision must be an object");
      for (auto it = lj["per_precision"].begin(); it != lj["per_precision"].end(); ++it)
        ls.per_precision[it.key()] = number_map(it.value(), where + ".per_precision." + it.key());
    }
    if (lj.contains("vectors")) {
      if (!lj["vectors"].is_object()) throw Error(where + ".vectors must be an object of arrays");
      for (auto it = lj["vectors"].begin(); it != lj["vectors"].end(); ++it) {
        if (!it.value().is_array()) throw Error(where + ".vectors." + it.key() + " must be an array");
        std::vector<float> v;
        v.reserve(it.value().size());
        for (const auto& x : it.value()) v.push_back(float(finite_number(x, where + ".vectors." + it.key())));
        ls.vectors[it.key()] = std::move(v);
      }
    }
    r.layers.push_back(std::move(ls));
  }
  return r;
}

std::string stats_to_json(const StatsRound& r) {
  json j;
  j["format"] = "snip-stats/1";
  j["step"] = r.step;
  j["batch_id"] = r.batch_id;
  j["recipe"] = r.recipe;
  j["model"] = {{"hidden_size", r.dims.hidden},
                {"intermediate_size", r.dims.intermediate},
                {"num_hidden_layers", r.dims.num_layers},
                {"num_attention_heads", r.dims.num_heads},
                {"num_key_value_heads", r.dims.num_kv_heads}};
  j["tokens"] = r.tokens;
  j["globals"] = r.globals;
  j["options"] = r.options;
  json layers = json::array();
  for (const auto& ls : r.layers) {
    json lj;
    lj["name"] = ls.name;
    lj["scalars"] = ls.scalars;
    lj["per_precision"] = ls.per_precision;
    lj["vectors"] = ls.vectors;
    layers.push_back(lj);
  }
  j["layers"] = layers;
  return j.dump() + "\n";
}

}  // namespace snip
