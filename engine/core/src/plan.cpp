// snip-plan/1 reading, writing and resolution against a model.
#include "snip/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>

#include "snip/atomic_file.h"
#include "snip/checked.h"
#include "snip/error.h"
#include "snip/recipe_name.h"
#include "snip/text.h"

namespace snip {

using nlohmann::json;

Plan uniform_plan(const ModelDims& dims, Precision p) {
  Plan plan;
  for (const auto& layer : linear_layers(dims)) plan.layers[layer.name] = LinearPrecision::uniform(p);
  plan.method = std::string("uniform-") + precision_name(p);
  plan.achieved_fp4_fraction = p == Precision::fp4 ? 1.0 : 0.0;
  plan.budget = plan.achieved_fp4_fraction;
  return plan;
}

namespace {

// Whether the plan names every linear layer of blocks 0..k-1 and nothing else: a whole model's plan.
bool whole_blocks(const Plan& plan) {
  std::map<int, int> per_block;
  for (const auto& [name, lp] : plan.layers)
    if (auto id = parse_layer_module_name(name)) ++per_block[id->block];
  bool whole = !per_block.empty() && per_block.rbegin()->first + 1 == int(per_block.size());
  for (const auto& [block, n] : per_block) whole = whole && n == kLayersPerBlock;
  return whole;
}

// What the layers alone say of the achieved FP4 fraction: exactly 0 with no FP4 GEMM, exactly 1
// with every GEMM of every layer of whole blocks in FP4, strictly between otherwise. A claim
// that disagrees is an error; a missing one is filled in where the layers decide it.
void check_claimed_fraction(Plan& plan, bool claimed, const std::string& source) {
  int fp4 = 0, all = 0;
  for (const auto& [name, lp] : plan.layers)
    for (Gemm g : kAllGemms) {
      ++all;
      fp4 += lp[g] == Precision::fp4;
    }
  const std::optional<double> exact = fp4 == 0                           ? std::optional<double>(0.0)
                                      : fp4 == all && whole_blocks(plan) ? std::optional<double>(1.0)
                                                                         : std::nullopt;
  const double v = plan.achieved_fp4_fraction;
  if (!claimed) {
    if (exact) plan.achieved_fp4_fraction = *exact;
    return;
  }
  const bool agrees = exact ? std::abs(v - *exact) <= 1e-9 : v > 0 && v < 1;
  if (!agrees)
    throw Error(
        source + ": \"achieved_fp4_fraction\" is " + format_g(v) + " but its layers put " + std::to_string(fp4) +
        " of their " + std::to_string(all) + " GEMMs in FP4" +
        (exact ? " (exactly " + format_g(*exact) + " of the FLOPs)" : std::string(" (strictly between 0 and 1)")) +
        "; correct the value or leave it out (it is derived from the layers)");
}

}  // namespace

Plan plan_from_json(const std::string& text, const std::string& source) {
  json j = parse_json_strict(text, source);
  if (!j.is_object()) throw Error(source + ": a plan must be a JSON object with \"format\": \"snip-plan/1\"");
  if (!j.contains("format") || !j["format"].is_string() || j["format"].get<std::string>() != "snip-plan/1")
    throw Error(source + ": missing or unsupported \"format\" (expected \"snip-plan/1\")");
  if (!j.contains("layers") || !j["layers"].is_object())
    throw Error(source + ": missing \"layers\" object (HF module name -> {fprop, dgrad, wgrad})");
  Plan plan;
  for (auto it = j["layers"].begin(); it != j["layers"].end(); ++it) {
    const std::string& name = it.key();
    const auto id = parse_layer_module_name(name);
    if (!id)
      throw Error(source + ": names '" + name +
                  "', which is not a linear layer (expected model.layers.N.self_attn.{q,k,v,o}_proj or "
                  "model.layers.N.mlp.{gate,up,down}_proj)");
    check_canonical_layer_name(name, *id, source);
    LinearPrecision lp;
    if (it.value().is_string()) {  // shorthand: one precision for all three GEMMs
      try {
        lp = LinearPrecision::uniform(parse_precision(it.value().get<std::string>()));
      } catch (const Error& e) {
        throw Error(source + ": layer " + name + ": " + e.what());
      }
    } else if (it.value().is_object()) {
      for (Gemm g : kAllGemms) {
        const auto& v = it.value();
        if (!v.contains(gemm_name(g)) || !v[gemm_name(g)].is_string())
          throw Error(source + ": layer " + name + " has no precision for " + gemm_name(g) +
                      " (give \"fprop\", \"dgrad\" and \"wgrad\")");
        try {
          lp[g] = parse_precision(v[gemm_name(g)].get<std::string>());
        } catch (const Error& e) {
          throw Error(source + ": layer " + name + " " + gemm_name(g) + ": " + e.what());
        }
      }
    } else {
      throw Error(source + ": layer " + name + ": expected {\"fprop\": ..., \"dgrad\": ..., \"wgrad\": ...}");
    }
    plan.layers[name] = lp;
  }
  auto get_num = [&](const char* key) -> double {
    if (!j.contains(key) || j[key].is_null()) return 0.0;
    if (!j[key].is_number()) throw Error(source + ": \"" + key + "\" must be a number");
    return j[key].get<double>();
  };
  auto get_str = [&](const char* key, const char* def) -> std::string {
    if (!j.contains(key) || j[key].is_null()) return def;
    if (!j[key].is_string()) throw Error(source + ": \"" + key + "\" must be a string");
    return j[key].get<std::string>();
  };
  plan.method = get_str("method", "");
  plan.recipe = get_str("recipe", "snip");
  plan.budget = get_num("budget");
  plan.achieved_fp4_fraction = get_num("achieved_fp4_fraction");
  check_claimed_fraction(plan, j.contains("achieved_fp4_fraction") && !j["achieved_fp4_fraction"].is_null(), source);
  for (const auto& [key, v] :
       {std::pair<const char*, double>{"budget", plan.budget}, {"achieved_fp4_fraction", plan.achieved_fp4_fraction}})
    if (!(v >= 0 && v <= 1))
      throw Error(source + ": \"" + key + "\" is " + json(v).dump() +
                  "; it is a fraction of the linear-layer FLOPs and must be between 0 and 1");
  // The scaling recipes of engine/numerics (Recipe); a plan naming another would be stored and
  // exported again, then fail only when a run uses it.
  try {
    plan.recipe = parse_recipe_name(plan.recipe).canonical;
  } catch (const Error&) {
    throw Error(source + ": \"recipe\" is \"" + plan.recipe + "\"; expected one of " + recipe_name_forms());
  }
  if (j.contains("provenance")) plan.provenance = j["provenance"];
  return plan;
}

std::string plan_to_json(const Plan& plan) {
  json j;
  j["format"] = "snip-plan/1";
  j["method"] = plan.method;
  j["budget"] = plan.budget;
  j["achieved_fp4_fraction"] = plan.achieved_fp4_fraction;
  j["recipe"] = plan.recipe;
  j["provenance"] = plan.provenance;
  json layers = json::object();
  for (const auto& [name, lp] : plan.layers) {
    json g = json::object();
    for (Gemm gm : kAllGemms) g[gemm_name(gm)] = precision_name(lp[gm]);
    layers[name] = g;
  }
  j["layers"] = layers;
  return j.dump(2) + "\n";
}

Plan read_plan_file(const std::string& path) {
  Plan plan = plan_from_json(read_file(path), path);
  if (plan.layers.empty())
    throw Error(path +
                ": \"layers\" is empty, so the plan sets no layer's precision (every layer would train at "
                "the default); name the layers, or train with --precision instead");
  return plan;
}

void write_plan_file(const std::string& path, const Plan& plan) {
  write_file_atomic(path, plan_to_json(plan));
}

std::vector<LinearPrecision> resolve_plan(const Plan& plan, const ModelDims& dims, std::vector<std::string>* warnings,
                                          Precision missing_default) {
  const auto layers = linear_layers(dims);
  std::vector<LinearPrecision> out(layers.size(), LinearPrecision::uniform(missing_default));
  std::vector<bool> seen(layers.size(), false);
  for (const auto& [name, lp] : plan.layers) {
    auto id = parse_layer_module_name(name);
    if (!id)
      throw Error("plan names '" + name +
                  "', which is not a selectable linear layer (expected model.layers.N.self_attn.{q,k,v,o}_proj or "
                  "model.layers.N.mlp.{gate,up,down}_proj)");
    if (id->block >= dims.num_layers)
      throw Error("plan names '" + name + "' but the model has only " + std::to_string(dims.num_layers) +
                  " blocks (0.." + std::to_string(dims.num_layers - 1) + ") — was the plan made for another model?");
    out[id->index()] = lp;
    seen[id->index()] = true;
  }
  std::vector<std::string> left_out;
  for (size_t i = 0; i < layers.size(); ++i)
    if (!seen[i]) left_out.push_back(layers[i].name);
  // A plan of whole blocks 0..k-1 on a model with more blocks was made for another model (a
  // `tiny` plan on a `medium` run would train mostly in the default and be listed as the plan).
  // A hand-written plan of a few layers keeps its per-layer warnings.
  if (whole_blocks(plan) && left_out.size() > kPlanMaxLeftOut)
    throw Error("the plan gives " + std::to_string(layers.size() - left_out.size()) + " of the model's " +
                std::to_string(layers.size()) + " linear layers (" + std::to_string(dims.num_layers) +
                " blocks) and leaves out " + left_out.front() + " and " + std::to_string(left_out.size() - 1) +
                " more — was it made for another model? Solve a plan for this model (snip solve), or give every "
                "layer");
  if (warnings)
    for (const std::string& name : left_out)
      warnings->push_back("plan leaves out " + name + "; it runs in " + precision_name(missing_default));
  return out;
}

std::vector<LinearPrecision> resolve_plan_lenient(const Plan& plan, int num_blocks, Precision missing_default) {
  std::vector<LinearPrecision> out(size_t(std::max(0, num_blocks)) * kLayersPerBlock,
                                   LinearPrecision::uniform(missing_default));
  for (const auto& [name, lp] : plan.layers) {
    const auto id = parse_layer_module_name(name);
    if (id && id->index() < int(out.size())) out[size_t(id->index())] = lp;
  }
  return out;
}

int pipeline_chunk_blocks(int blocks, const PipelineLayout& layout) {
  if (layout.parallel < 1 || layout.virtual_stages < 1)
    throw Error("pipeline-parallel " + std::to_string(layout.parallel) + " with " +
                std::to_string(layout.virtual_stages) + " virtual stages: both must be at least 1");
  const long chunks = long(layout.parallel) * layout.virtual_stages;
  if (blocks < 1 || chunks > blocks || blocks % chunks != 0)
    throw Error("Megatron-LM splits " + std::to_string(blocks) + " blocks over " + pipeline_layout_text(layout) +
                " only evenly, and " + std::to_string(chunks) + " chunks do not divide " + std::to_string(blocks) +
                ": choose a pipeline size (times virtual stages) that divides the number of blocks (uneven splits, "
                "--decoder-first/last-pipeline-num-layers, are not supported)");
  return int(blocks / chunks);
}

std::string pipeline_layout_text(const PipelineLayout& layout) {
  std::string s = "pipeline-parallel " + std::to_string(layout.parallel);
  if (layout.virtual_stages > 1) s += " × " + std::to_string(layout.virtual_stages) + " virtual stages";
  return s;
}

std::string pipeline_layout_megatron_flags(const PipelineLayout& layout) {
  std::string s = "--pipeline-model-parallel-size " + std::to_string(layout.parallel);
  if (layout.virtual_stages > 1)
    s += " --num-virtual-stages-per-pipeline-rank " + std::to_string(layout.virtual_stages);
  return s;
}

PipelineLayout plan_pipeline_layout(const Plan& plan) {
  PipelineLayout layout;
  if (!plan.provenance.is_object() || !plan.provenance.contains("pipeline")) return layout;
  const json& p = plan.provenance["pipeline"];
  if (!p.is_object()) return layout;
  if (p.contains("parallel") && p["parallel"].is_number_integer()) layout.parallel = p["parallel"].get<int>();
  if (p.contains("virtual_stages") && p["virtual_stages"].is_number_integer())
    layout.virtual_stages = p["virtual_stages"].get<int>();
  return layout;
}

json pipeline_layout_json(const PipelineLayout& layout) {
  return {{"parallel", layout.parallel}, {"virtual_stages", layout.virtual_stages}};
}

std::optional<std::pair<int, int>> pipeline_conflict(const std::vector<LinearPrecision>& per_layer,
                                                     const ModelDims& dims, const PipelineLayout& layout) {
  const int chunk = pipeline_chunk_blocks(dims.num_layers, layout);
  const std::vector<LinearLayerInfo> layers = linear_layers(dims);
  std::map<std::pair<int, LayerType>, int> first;  // (stage-local position, type) -> first layer
  for (size_t i = 0; i < layers.size() && i < per_layer.size(); ++i) {
    const auto [it, fresh] = first.emplace(std::pair(layers[i].block % chunk, layers[i].type), int(i));
    if (!fresh && !(per_layer[size_t(it->second)] == per_layer[i])) return std::pair(it->second, int(i));
  }
  return std::nullopt;
}

double fp4_flop_fraction(const std::vector<LinearPrecision>& per_layer, const ModelDims& dims) {
  const auto layers = linear_layers(dims);
  double fp4 = 0, all = 0;
  for (size_t i = 0; i < layers.size() && i < per_layer.size(); ++i) {
    const double f = layers[i].gemm_flops(1);
    for (Gemm g : kAllGemms) {
      all += f;
      if (per_layer[i][g] == Precision::fp4) fp4 += f;
    }
  }
  return all > 0 ? fp4 / all : 0.0;
}

}  // namespace snip
