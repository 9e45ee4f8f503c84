// Plans in Megatron-LM's, Transformer Engine's and torchao's per-module formats, and back.
#include "snip/plan_export.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "snip/checked.h"
#include "snip/error.h"
#include "snip/names.h"
#include "snip/recipe_name.h"

namespace snip {

namespace {

// ---- glob ------------------------------------------------------------------------------

struct GlobToken {
  enum Kind { literal, any, star, set } kind = literal;
  char c = 0;
  bool negate = false;
  std::vector<std::pair<char, char>> ranges;  // inclusive
  static GlobToken of(Kind k, char ch = 0) {
    GlobToken t;
    t.kind = k;
    t.c = ch;
    return t;
  }
  bool matches(char x) const {
    if (kind == literal) return x == c;
    if (kind == any) return true;
    bool in = false;
    for (const auto& [lo, hi] : ranges) in = in || (lo <= x && x <= hi);
    return in != negate;
  }
};

std::vector<GlobToken> compile_glob(std::string_view p) {
  std::vector<GlobToken> out;
  for (size_t i = 0; i < p.size();) {
    const char ch = p[i];
    if (ch == '*') {
      if (out.empty() || out.back().kind != GlobToken::star) out.push_back(GlobToken::of(GlobToken::star));
      ++i;
    } else if (ch == '?') {
      out.push_back(GlobToken::of(GlobToken::any));
      ++i;
    } else if (ch == '[') {
      // Python's rule: the set ends at the first ']' after an optional '!' and a leading ']'.
      size_t j = i + 1;
      if (j < p.size() && p[j] == '!') ++j;
      if (j < p.size() && p[j] == ']') ++j;
      while (j < p.size() && p[j] != ']') ++j;
      if (j >= p.size()) {  // unclosed: a literal '['
        out.push_back(GlobToken::of(GlobToken::literal, '['));
        ++i;
        continue;
      }
      GlobToken t = GlobToken::of(GlobToken::set);
      size_t k = i + 1;
      if (p[k] == '!') t.negate = true, ++k;
      while (k < j) {
        if (k + 2 < j && p[k + 1] == '-') {
          if (p[k] <= p[k + 2]) t.ranges.push_back({p[k], p[k + 2]});  // a reversed range is empty
          k += 3;
        } else {
          t.ranges.push_back({p[k], p[k]});
          ++k;
        }
      }
      out.push_back(std::move(t));
      i = j + 1;
    } else {
      out.push_back(GlobToken::of(GlobToken::literal, ch));
      ++i;
    }
  }
  return out;
}

// ---- recipes of the stacks ---------------------------------------------------------------

// The Transformer Engine recipe nearest to one of ours, as Megatron's payload and TE's class.
struct StackRecipe {
  const char* megatron;  // Fp8Recipe / Fp4Recipe value in Megatron's TEQuantizationRecipe
  const char* te;        // transformer_engine.common.recipe class
  bool exact;            // the same scaling as ours (else the nearest one TE has)
};

StackRecipe stack_recipe(const std::string& recipe, Precision p) {
  // By the recipe's kind, not its spelling: `tensor:sr` is per-tensor scaling too.
  using Kind = RecipeName::Kind;
  const Kind kind = parse_recipe_name(recipe).kind;
  if (p == Precision::fp4) {
    // TE trains FP4 only as NVFP4 (1×16 blocks, E4M3 scales, a per-tensor FP32 scale).
    return {"nvfp4", "NVFP4BlockScaling", kind == Kind::nvfp4};
  }
  if (kind == Kind::mx || kind == Kind::nvfp4) return {"mxfp8", "MXFP8BlockScaling", kind == Kind::mx};
  if (kind == Kind::tensor) return {"tensorwise", "Float8CurrentScaling", true};
  if (kind == Kind::snip) return {"blockwise", "Float8BlockScaling", true};  // 1×128 and 128×128 blocks
  return {"blockwise", "Float8BlockScaling", false};
}

// How a Transformer Engine recipe class scales, for the notes of nearest recipes.
std::string te_class_scaling(const std::string& te_class) {
  if (te_class == "NVFP4BlockScaling") return "scales 1x16 blocks by E4M3 factors under a per-tensor FP32 scale";
  if (te_class == "MXFP8BlockScaling") return "scales 1x32 blocks by power-of-two (E8M0) factors";
  if (te_class == "Float8BlockScaling")
    return "scales 1x128 tiles of activations and gradients and 128x128 blocks of weights";
  return "scales each tensor by its current amax";
}

// The settings of a Transformer Engine recipe class that make it compute as snip emulates `recipe`
// (METHOD.md section 2), where TE's defaults differ: its constructor arguments and, for what the
// constructor does not reach, the environment (transformer_engine/common/recipe/__init__.py).
//  - NVFP4BlockScaling turns on the random Hadamard transform, stochastic rounding of gradients
//    and 16×16 weight blocks: snip never applies the transform from a recipe name, rounds FP4
//    gradients stochastically only where the recipe says so, and blocks weights in 2-D only in
//    `snip` (128×128) and `nvfp4` (16×16).
//  - Float8BlockScaling scales by powers of two unless NVTE_FP8_BLOCK_SCALING_FP32_SCALES=1
//    (snip's scales are FP32); every FP8 class is given E4M3 (Float8CurrentScaling defaults to
//    HYBRID, E5M2 gradients).
nlohmann::json te_settings(const std::string& recipe, Precision p) {
  using Kind = RecipeName::Kind;
  const RecipeName r = parse_recipe_name(recipe);
  nlohmann::json args = nlohmann::json::object(), env = nlohmann::json::object();
  if (p == Precision::fp4) {
    const bool sr = r.kind == Kind::snip || r.kind == Kind::nvfp4 || r.gradient_sr;
    const bool two_d = r.kind == Kind::snip || r.kind == Kind::nvfp4;
    args = {{"disable_rht", true}, {"disable_stochastic_rounding", !sr}, {"disable_2d_quantization", !two_d}};
    env["NVTE_NVFP4_DISABLE_RHT"] = "1";
    if (!sr) env["NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING"] = "1";
    if (!two_d) env["NVTE_NVFP4_DISABLE_2D_QUANTIZATION"] = "1";
  } else {
    args = {{"fp8_format", "E4M3"}};
    if (std::string(stack_recipe(recipe, p).te) == "Float8BlockScaling")
      env["NVTE_FP8_BLOCK_SCALING_FP32_SCALES"] = "1";
  }
  nlohmann::json out = {{"args", args}, {"env", env}};
  if (const StackRecipe nearest = stack_recipe(recipe, p); !nearest.exact)
    out["note"] = std::string("nearest: Transformer Engine has no ") + (p == Precision::fp4 ? "FP4" : "FP8") +
                  " recipe with the scaling of `" + r.canonical + "`; " + nearest.te + " " +
                  te_class_scaling(nearest.te);
  return out;
}

// torchao's nearest training config to one of ours (torchao at 36027d82d: torchao/float8/config.py,
// prototype/moe_training/config.py and nvfp4_training/nvfp4_training.py), with what differs.
nlohmann::json torchao_recipe(const std::string& recipe, Precision p) {
  using Kind = RecipeName::Kind;
  const RecipeName r = parse_recipe_name(recipe);
  if (p == Precision::fp4)
    return {{"config", "NVFP4TrainingConfig"},
            {"module", "torchao.prototype.moe_training.nvfp4_training"},
            {"apply", "quantize_"},
            {"exact", false},
            {"note", std::string(r.kind == Kind::nvfp4
                                     ? "the plan's NVFP4 blocks (1x16, E4M3 scales)"
                                     : "nearest: NVFP4's 1x16 blocks with E4M3 scales for `" + r.canonical + "`") +
                         ", but torchao always applies the random Hadamard transform and stochastic rounding, "
                         "which it cannot switch off"}};
  if (r.kind == Kind::mx)
    return {{"config", "MXFP8TrainingOpConfig"},
            {"module", "torchao.prototype.moe_training.config"},
            {"apply", "quantize_"},
            {"exact", true},
            {"note", "the plan's MXFP8: 1x32 blocks, power-of-two (E8M0) scales, E4M3"}};
  if (r.kind == Kind::tensor)
    return {{"config", "Float8LinearConfig(cast_config_grad_output=CastConfig(target_dtype=torch.float8_e4m3fn))"},
            {"module", "torchao.float8"},
            {"apply", "convert_to_float8_training"},
            {"exact", true},
            {"note",
             "per-tensor scaling (the tensorwise recipe) with E4M3 gradients as snip emulates them; the "
             "recipe's default casts gradients to E5M2"}};
  return {{"config", "Float8LinearConfig.from_recipe_name(\"rowwise\")"},
          {"module", "torchao.float8"},
          {"apply", "convert_to_float8_training"},
          {"exact", false},
          {"note",
           "nearest: torchao has no block scaling for FP8 linears; rowwise scales each row of the "
           "operands by a power of two, E4M3 throughout, for `" +
               r.canonical + "`"}};
}

// One precision per layer, each the same in all three GEMMs, from FP8, FP4 and BF16.
std::vector<Precision> module_precisions(const Plan& plan, const ModelDims& dims, PlanStack stack,
                                         std::vector<std::string>* warnings) {
  const std::vector<LinearPrecision> per_layer = resolve_plan(plan, dims, warnings, Precision::bf16);
  const std::vector<LinearLayerInfo> layers = linear_layers(dims);
  std::vector<Precision> out;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LinearPrecision& lp = per_layer[i];
    if (!(lp.fprop == lp.dgrad && lp.dgrad == lp.wgrad))
      throw Error("layer " + layers[i].name + " has fprop " + precision_name(lp.fprop) + ", dgrad " +
                  precision_name(lp.dgrad) + " and wgrad " + precision_name(lp.wgrad) + ": " + plan_stack_name(stack) +
                  " picks one recipe per module, covering its forward, data-gradient and weight-gradient GEMMs; "
                  "solve the plan with one precision per layer (without `snip solve --per-role`, or the Plan view's "
                  "\"Per GEMM role\" unchecked) to export it");
    if (lp.fprop == Precision::fp32)
      throw Error("layer " + layers[i].name + " is FP32 in the plan: " + plan_stack_name(stack) +
                  " runs every module it does not quantize in BF16; give the layer BF16, FP8 or FP4");
    out.push_back(lp.fprop);
  }
  return out;
}

nlohmann::json plan_summary(const Plan& plan) {
  return {{"method", plan.method},
          {"budget", plan.budget},
          {"achieved_fp4_fraction", plan.achieved_fp4_fraction},
          {"recipe", plan.recipe}};
}

const char* megatron_module(LayerType t) {
  switch (t) {
    case LayerType::q:
    case LayerType::k:
    case LayerType::v:
      return "self_attention.linear_qkv";
    case LayerType::o:
      return "self_attention.linear_proj";
    case LayerType::gate:
    case LayerType::up:
      return "mlp.linear_fc1";
    case LayerType::down:
      return "mlp.linear_fc2";
  }
  return "";
}

std::string yaml_quote(const std::string& s) {
  return nlohmann::json(s).dump();  // a JSON string is a YAML double-quoted scalar
}

// Megatron's module paths in block order, each with the first layer placed there. The fused
// members of a block must agree, and with a pipeline layout so must the blocks every chunk names
// alike (block mod c); throws snip::Error naming both layers otherwise.
std::vector<std::pair<std::string, int>> megatron_modules(const ModelDims& dims, const std::vector<Precision>& prec,
                                                          const PipelineLayout& layout) {
  const int chunk = pipeline_chunk_blocks(dims.num_layers, layout);
  std::map<std::string, int> first_of;  // path -> the first layer placed there
  std::vector<std::pair<std::string, int>> order;
  const std::vector<LinearLayerInfo> layers = linear_layers(dims);
  for (size_t i = 0; i < layers.size(); ++i) {
    const std::string path = megatron_module_path(layers[i].block % chunk, layers[i].type);
    const auto [it, fresh] = first_of.emplace(path, int(i));
    if (fresh) {
      order.emplace_back(path, int(i));
      continue;
    }
    const LinearLayerInfo& other = layers[size_t(it->second)];
    const Precision p = prec[size_t(it->second)];
    if (p == prec[i]) continue;
    if (other.block == layers[i].block)
      throw Error(std::string("Megatron fuses ") +
                  (megatron_module(layers[i].type)[0] == 's' ? "q, k and v" : "gate and up") + " of block " +
                  std::to_string(layers[i].block) + " into one module (" + path + "), but the plan gives them " +
                  precision_name(p) + " and " + precision_name(prec[i]) +
                  ": solve with fused layers tied to one precision (`snip solve --ties`, or the Plan view's \"Tie "
                  "q/k/v and gate/up\") to export it");
    throw Error("at " + pipeline_layout_text(layout) + " Megatron names blocks " + std::to_string(other.block) +
                " and " + std::to_string(layers[i].block) + " both " + path +
                " (each chunk numbers its blocks from 0), but the plan gives " + other.name + " " + precision_name(p) +
                " and " + layers[i].name + " " + precision_name(prec[i]) +
                ": solve for that layout (`snip solve --pipeline-parallel " + std::to_string(layout.parallel) +
                (layout.virtual_stages > 1 ? " --virtual-stages " + std::to_string(layout.virtual_stages) : "") +
                "`, or the Plan view's \"Megatron pipeline\") to export it");
  }
  return order;
}

// The file's comment lines: how Megatron reads it, the layout it is for, the environment its
// recipe needs and the plan.
std::string megatron_header(const Plan& plan, const ModelDims& dims, const PipelineLayout& layout) {
  const int chunk = pipeline_chunk_blocks(dims.num_layers, layout);
  std::ostringstream y;
  y << "# A SNIP precision plan for Megatron-LM: --te-precision-config-file FILE\n"
       "# (megatron/core/quantization/quant_config.py). The first enabled matcher whose glob matches a\n"
       "# module path picks its config; the last one keeps every other module (embeddings, output layer)\n"
       "# in BF16. Each config is a Transformer Engine payload: check that its recipe is the one you want.\n"
       "# It applies on its own: every config overrides the surrounding autocast both ways\n"
       "# (override_quantized_autocast, override_nonquantized_autocast), so no --fp8-format or\n"
       "# --fp4-format is needed and a global one changes none of the plan's modules; the plan also\n"
       "# overrides --first-last-layers-bf16 (it decides the first and last blocks itself).\n";
  if (layout.split())
    y << "# For --num-layers " << dims.num_layers << " " << pipeline_layout_megatron_flags(layout)
      << " only: each of the " << layout.parallel * layout.virtual_stages << " model chunks holds " << chunk
      << " blocks and names\n"
         "# them decoder.layers.0.."
      << chunk - 1 << ", so position k stands for blocks k, k+" << chunk
      << ", ...; the plan is the same on every chunk.\n"
         "# Not valid for another layout or an uneven split (--decoder-first/last-pipeline-num-layers).\n";
  else
    y << "# For --pipeline-model-parallel-size 1 only: every pipeline stage numbers its blocks from 0\n"
         "# (export with --pipeline-parallel N for N stages).\n";
  std::string env;
  for (const Precision p : {Precision::fp4, Precision::fp8}) {
    const nlohmann::json settings = te_settings(plan.recipe, p);  // items() must not outlive it
    for (const auto& [k, v] : settings["env"].items()) env += " " + k + "=" + v.get<std::string>();
  }
  if (!env.empty())
    y << "# The YAML cannot carry every Transformer Engine setting of the plan's recipe: set in the job's\n"
         "# environment"
      << env << "\n";
  y << "# Plan: method " << plan.method << ", budget " << plan.budget << ", achieved FP4 FLOP fraction "
    << plan.achieved_fp4_fraction << ", recipe " << plan.recipe << "; a model of " << dims.num_layers << " blocks.\n";
  return y.str();
}

// The configs: one Transformer Engine payload per precision, each overriding the surrounding autocast.
std::string megatron_configs(const Plan& plan) {
  std::ostringstream y;
  y << "configs:\n";
  for (const Precision p : {Precision::fp4, Precision::fp8}) {
    const StackRecipe r = stack_recipe(plan.recipe, p);
    y << "  " << precision_name(p) << ":\n"
      << "    transformer_engine_config_type: TEQuantizationParams\n"
      << "    training_recipe:\n"
      << "      " << (p == Precision::fp4 ? "fp4" : "fp8") << "_quantization_recipe: " << r.megatron << "  # TE "
      << r.te << (r.exact ? ": the plan's recipe " : ": the nearest Transformer Engine has to the plan's recipe ")
      << plan.recipe << "\n";
    if (p == Precision::fp8) y << "      fp8_format: e4m3  # every FP8 operand in E4M3, as snip emulates it\n";
    y << "      override_quantized_autocast: true\n"
         "      override_nonquantized_autocast: true\n";
  }
  y << "  bf16:\n"
       "    transformer_engine_config_type: TEQuantizationParams\n"
       "    training_recipe:\n"
       "      override_quantized_autocast: true  # BF16 under a global FP8/FP4 flag too\n";
  return y.str();
}

std::string export_megatron(const Plan& plan, const ModelDims& dims, const std::vector<Precision>& prec,
                            const PipelineLayout& layout) {
  std::ostringstream y;
  y << megatron_header(plan, dims, layout) << megatron_configs(plan);
  y << "matchers:\n";
  for (const auto& [path, layer] : megatron_modules(dims, prec, layout)) {
    std::string name = path;
    for (char& c : name)
      if (c == '.') c = '_';
    y << "  " << name << ":\n"
      << "    type: glob\n"
      << "    pattern: " << yaml_quote("*" + path) << "\n"
      << "    config: " << precision_name(prec[size_t(layer)]) << "\n"
      << "    enabled: true\n";
  }
  y << "  default:\n"
       "    type: glob\n"
       "    pattern: \"*\"\n"
       "    config: bf16\n"
       "    enabled: true\n";
  y << "# Read by `snip import --from megatron`, ignored by Megatron:\n";
  nlohmann::json summary = plan_summary(plan);
  if (layout.split()) summary["pipeline"] = pipeline_layout_json(layout);
  y << "snip: " << summary.dump() << "\n";
  return y.str();
}

std::string export_te(const Plan& plan, const ModelDims& dims, const std::vector<Precision>& prec) {
  nlohmann::json recipes = nlohmann::json::object();
  for (const Precision p : {Precision::fp4, Precision::fp8})
    recipes[precision_name(p)] = stack_recipe(plan.recipe, p).te;
  recipes["bf16"] = "BF16";
  nlohmann::json modules = nlohmann::json::object();
  const std::vector<LinearLayerInfo> layers = linear_layers(dims);
  for (size_t i = 0; i < layers.size(); ++i) modules[layers[i].name] = recipes[precision_name(prec[i])];
  // Each class's settings where TE's defaults are not the recipe snip emulates.
  nlohmann::json settings = nlohmann::json::object();
  for (const Precision p : {Precision::fp4, Precision::fp8})
    settings[stack_recipe(plan.recipe, p).te] = te_settings(plan.recipe, p);
  return nlohmann::json{{"format", "snip-te/1"},
                        {"plan", plan_summary(plan)},
                        {"recipes", recipes},
                        {"settings", settings},
                        {"modules", modules}}
             .dump(2) +
         "\n";
}

std::string export_torchao(const Plan& plan, const ModelDims& dims, const std::vector<Precision>& prec) {
  nlohmann::json lists{
      {"float8", nlohmann::json::array()}, {"fp4", nlohmann::json::array()}, {"bf16", nlohmann::json::array()}};
  const std::vector<LinearLayerInfo> layers = linear_layers(dims);
  for (size_t i = 0; i < layers.size(); ++i)
    lists[prec[i] == Precision::fp8 ? "float8" : prec[i] == Precision::fp4 ? "fp4" : "bf16"].push_back(layers[i].name);
  return nlohmann::json{{"format", "snip-torchao/1"},
                        {"plan", plan_summary(plan)},
                        {"recipes",
                         {{"float8", torchao_recipe(plan.recipe, Precision::fp8)},
                          {"fp4", torchao_recipe(plan.recipe, Precision::fp4)}}},
                        {"float8", lists["float8"]},
                        {"fp4", lists["fp4"]},
                        {"bf16", lists["bf16"]}}
             .dump(2) +
         "\n";
}

// ---- import ------------------------------------------------------------------------------

void apply_summary(Plan& plan, const nlohmann::json& summary) {
  if (!summary.is_object()) return;
  if (summary.contains("method") && summary["method"].is_string()) plan.method = summary["method"];
  if (summary.contains("budget") && summary["budget"].is_number()) plan.budget = summary["budget"];
  if (summary.contains("recipe") && summary["recipe"].is_string())
    plan.recipe = parse_recipe_name(summary["recipe"].get<std::string>()).canonical;
}

// The plan of per-layer precisions, with its FP4 fraction computed from the model.
Plan finish_import(Plan plan, const ModelDims& dims, const std::vector<Precision>& prec) {
  const std::vector<LinearLayerInfo> layers = linear_layers(dims);
  std::vector<LinearPrecision> per_layer;
  for (size_t i = 0; i < layers.size(); ++i) {
    plan.layers[layers[i].name] = LinearPrecision::uniform(prec[i]);
    per_layer.push_back(LinearPrecision::uniform(prec[i]));
  }
  plan.achieved_fp4_fraction = fp4_flop_fraction(per_layer, dims);
  if (plan.method.empty()) plan.method = "imported";
  return plan;
}

Precision megatron_config_precision(const YAML::Node& config, const std::string& key, const std::string& source) {
  if (!config || !config.IsMap())
    throw Error(source + ": config '" + key + "' is not a map (a Transformer Engine payload with training_recipe)");
  const YAML::Node recipe = config["training_recipe"];
  if (!recipe) return Precision::bf16;
  if (!recipe.IsMap()) throw Error(source + ": config '" + key + "' has a training_recipe that is not a map");
  if (recipe["fp4_quantization_recipe"] && !recipe["fp4_quantization_recipe"].IsNull()) return Precision::fp4;
  if (recipe["fp8_quantization_recipe"] && !recipe["fp8_quantization_recipe"].IsNull()) return Precision::fp8;
  return Precision::bf16;
}

// Megatron reads the file with PyYAML (yaml.safe_load); yaml-cpp reads some documents otherwise.
// Those are refused, each naming where: a key written twice in one map (PyYAML keeps the last,
// yaml-cpp the first), a merge key `<<` (PyYAML merges it, yaml-cpp keeps it as a key), and an
// `enabled` that is not a YAML boolean (`enabled: 1` is true to Megatron, not to yaml-cpp).
void refuse_what_pyyaml_reads_otherwise(const YAML::Node& node, const std::string& source, const std::string& where,
                                        int depth) {
  if (depth > kMaxJsonDepth)
    throw Error(source + ": maps and lists nest more than " + std::to_string(kMaxJsonDepth) +
                " deep; a Megatron precision config nests 4");
  if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i)
      refuse_what_pyyaml_reads_otherwise(node[i], source, where + "[" + std::to_string(i) + "]", depth + 1);
    return;
  }
  if (!node.IsMap()) return;
  std::set<std::string> keys;
  for (const auto& entry : node) {
    const std::string key = entry.first.IsScalar() ? entry.first.Scalar() : "?";
    const std::string at = where.empty() ? key : where + "." + key;
    if (key == "<<" && entry.first.Tag() != "!")
      throw Error(source + ": " + at +
                  ": merge keys (<<) are read differently by PyYAML, which Megatron uses, and "
                  "by this reader; write the merged keys out");
    if (!keys.insert(key).second)
      throw Error(source + ": " + at +
                  " is written twice in one map; PyYAML, which Megatron uses, keeps the last "
                  "and other readers the first: remove one");
    if (key == "enabled" && entry.second.IsScalar()) {
      static const std::set<std::string> booleans = {"true", "True", "TRUE", "false", "False", "FALSE",
                                                     "yes",  "Yes",  "YES",  "no",    "No",    "NO",
                                                     "on",   "On",   "ON",   "off",   "Off",   "OFF"};
      if (booleans.count(entry.second.Scalar()) == 0)
        throw Error(source + ": " + at + " is '" + entry.second.Scalar() +
                    "', not true or false; Megatron would take any non-empty value as on: write true or false");
    }
    refuse_what_pyyaml_reads_otherwise(entry.second, source, at, depth + 1);
  }
}

Plan import_megatron(const std::string& text, const ModelDims& dims, const std::string& source,
                     std::vector<std::string>* warnings, std::optional<PipelineLayout> layout) {
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(source + ": not valid YAML (" + e.what() + ")");
  }
  refuse_what_pyyaml_reads_otherwise(root, source, "", 0);
  if (!root.IsMap() || !root["matchers"] || !root["matchers"].IsMap())
    throw Error(source + ": no `matchers` map; expected a Megatron-LM --te-precision-config-file");
  const YAML::Node configs = root["configs"];
  struct Matcher {
    std::string pattern;
    Precision precision;
  };
  std::vector<Matcher> matchers;
  for (const auto& entry : root["matchers"]) {  // yaml-cpp keeps a map's order
    const std::string name = entry.first.as<std::string>();
    const YAML::Node m = entry.second;
    if (!m.IsMap()) throw Error(source + ": matcher '" + name + "' is not a map");
    if (!m["enabled"] || !m["enabled"].as<bool>(false)) continue;  // Megatron: enabled defaults to false
    const std::string type = m["type"] ? m["type"].as<std::string>() : "";
    if (type != "glob")
      throw Error(source + ": matcher '" + name + "' has type '" + type + "'; Megatron implements only glob");
    if (!m["pattern"] || !m["config"])
      throw Error(source + ": glob matcher '" + name + "' needs a pattern and a config");
    const std::string key = m["config"].as<std::string>();
    if (!configs || !configs[key])
      throw Error(source + ": matcher '" + name + "' names config '" + key + "', which is not in `configs`");
    matchers.push_back({m["pattern"].as<std::string>(), megatron_config_precision(configs[key], key, source)});
  }
  Plan plan;
  if (const YAML::Node s = root["snip"]; s && s.IsMap()) {
    nlohmann::json summary = nlohmann::json::object();
    if (s["method"]) summary["method"] = s["method"].as<std::string>();
    if (s["budget"]) summary["budget"] = s["budget"].as<double>();
    if (s["recipe"]) summary["recipe"] = s["recipe"].as<std::string>();
    apply_summary(plan, summary);
    // The layout the file was written for, unless the caller names one.
    if (const YAML::Node p = s["pipeline"]; !layout && p && p.IsMap())
      layout = PipelineLayout{p["parallel"].as<int>(1), p["virtual_stages"].as<int>(1)};
  }
  const PipelineLayout at = layout.value_or(PipelineLayout{});
  const int chunk = pipeline_chunk_blocks(dims.num_layers, at);
  if (at.split()) plan.provenance["pipeline"] = pipeline_layout_json(at);
  std::vector<Precision> prec;
  for (const LinearLayerInfo& l : linear_layers(dims)) {
    const std::string path = megatron_module_path(l.block % chunk, l.type);
    std::optional<Precision> p;
    for (const Matcher& m : matchers)
      if (glob_match(m.pattern, path)) {
        p = m.precision;
        break;
      }
    if (!p && warnings &&
        (l.type == LayerType::q || l.type == LayerType::o || l.type == LayerType::gate || l.type == LayerType::down))
      warnings->push_back(path + " matches no matcher: Megatron runs it in its global precision; imported as BF16");
    prec.push_back(p.value_or(Precision::bf16));
  }
  return finish_import(std::move(plan), dims, prec);
}

nlohmann::json parse_json_format(const std::string& text, const std::string& source, const char* format) {
  const nlohmann::json j = parse_json_strict(text, source);
  if (!j.is_object() || j.value("format", "") != format)
    throw Error(source + ": not a " + format + " file (its \"format\" member must be \"" + format + "\")");
  return j;
}

Plan import_te(const std::string& text, const ModelDims& dims, const std::string& source,
               std::vector<std::string>* warnings) {
  const nlohmann::json j = parse_json_format(text, source, "snip-te/1");
  if (!j.contains("modules") || !j["modules"].is_object())
    throw Error(source + ": no \"modules\" object (Hugging Face module name -> recipe name)");
  // Recipe name -> precision: the file's own table, else Transformer Engine's names.
  std::map<std::string, Precision> by_recipe{{"BF16", Precision::bf16},
                                             {"NVFP4BlockScaling", Precision::fp4},
                                             {"MXFP8BlockScaling", Precision::fp8},
                                             {"Float8BlockScaling", Precision::fp8},
                                             {"Float8CurrentScaling", Precision::fp8},
                                             {"DelayedScaling", Precision::fp8}};
  if (j.contains("recipes") && j["recipes"].is_object())
    for (const auto& [precision, name] : j["recipes"].items())
      if (name.is_string()) by_recipe[name.get<std::string>()] = parse_precision(precision);
  Plan plan;
  apply_summary(plan, j.value("plan", nlohmann::json::object()));
  std::vector<Precision> prec;
  for (const LinearLayerInfo& l : linear_layers(dims)) {
    Precision p = Precision::bf16;
    if (!j["modules"].contains(l.name)) {
      if (warnings) warnings->push_back(l.name + " is not in the file; imported as BF16");
    } else {
      const nlohmann::json& r = j["modules"][l.name];
      if (!r.is_string() || !by_recipe.count(r.get<std::string>()))
        throw Error(source + ": " + l.name + " has recipe " + r.dump() +
                    ", which is not one of the file's recipes or a Transformer Engine recipe snip knows");
      p = by_recipe[r.get<std::string>()];
    }
    prec.push_back(p);
  }
  for (const auto& [name, r] : j["modules"].items())
    if (!parse_layer_module_name(name)) throw Error(source + ": " + name + " is not a linear layer of a Llama model");
  return finish_import(std::move(plan), dims, prec);
}

Plan import_torchao(const std::string& text, const ModelDims& dims, const std::string& source,
                    std::vector<std::string>* warnings) {
  const nlohmann::json j = parse_json_format(text, source, "snip-torchao/1");
  std::map<std::string, Precision> given;
  for (const auto& [key, p] :
       {std::pair{"float8", Precision::fp8}, {"fp4", Precision::fp4}, {"bf16", Precision::bf16}}) {
    if (!j.contains(key)) continue;
    if (!j[key].is_array()) throw Error(source + ": \"" + key + "\" is not a list of module names");
    for (const auto& n : j[key]) {
      if (!n.is_string() || !parse_layer_module_name(n.get<std::string>()))
        throw Error(source + ": \"" + key + "\" holds " + n.dump() + ", not a linear layer of a Llama model");
      if (!given.emplace(n.get<std::string>(), p).second)
        throw Error(source + ": " + n.get<std::string>() + " is listed twice");
    }
  }
  Plan plan;
  apply_summary(plan, j.value("plan", nlohmann::json::object()));
  std::vector<Precision> prec;
  for (const LinearLayerInfo& l : linear_layers(dims)) {
    const auto it = given.find(l.name);
    if (it == given.end() && warnings) warnings->push_back(l.name + " is in no list; imported as BF16");
    prec.push_back(it == given.end() ? Precision::bf16 : it->second);
  }
  return finish_import(std::move(plan), dims, prec);
}

}  // namespace

bool glob_match(std::string_view pattern, std::string_view name) {
  const std::vector<GlobToken> t = compile_glob(pattern);
  // Each non-star token takes one character: the classic backtrack to the last star suffices.
  size_t ti = 0, ni = 0, star_t = std::string_view::npos, star_n = 0;
  while (ni < name.size()) {
    if (ti < t.size() && t[ti].kind == GlobToken::star) {
      star_t = ti++;
      star_n = ni;
    } else if (ti < t.size() && t[ti].matches(name[ni])) {
      ++ti, ++ni;
    } else if (star_t != std::string_view::npos) {
      ti = star_t + 1;
      ni = ++star_n;
    } else {
      return false;
    }
  }
  while (ti < t.size() && t[ti].kind == GlobToken::star) ++ti;
  return ti == t.size();
}

namespace {

constexpr std::array<Named<PlanStack>, 3> kPlanStackTable{
    {{PlanStack::megatron, "megatron"}, {PlanStack::te, "te"}, {PlanStack::torchao, "torchao"}}};

}  // namespace

PlanStack parse_plan_stack(std::string_view name) {
  return parse_name(kPlanStackTable, name, "training stack");
}

const char* plan_stack_name(PlanStack stack) {
  return name_of(kPlanStackTable, stack);
}

std::string megatron_module_path(int block, LayerType type) {
  return "decoder.layers." + std::to_string(block) + "." + megatron_module(type);
}

namespace {
// A pipeline layout is Megatron's: the other stacks name modules model-wide.
void refuse_layout_outside_megatron(PlanStack stack, const std::optional<PipelineLayout>& layout) {
  if (stack != PlanStack::megatron && layout && layout->split())
    throw Error(pipeline_layout_text(*layout) + " is a Megatron-LM layout; " + plan_stack_name(stack) +
                " names every module by its model-wide name, so its files need no layout");
}
}  // namespace

std::string export_plan(const Plan& plan, const ModelDims& dims, PlanStack stack, std::vector<std::string>* warnings,
                        std::optional<PipelineLayout> layout) {
  const PipelineLayout at = layout.value_or(plan_pipeline_layout(plan));
  refuse_layout_outside_megatron(stack, layout);
  const std::vector<Precision> prec = module_precisions(plan, dims, stack, warnings);
  switch (stack) {
    case PlanStack::megatron:
      return export_megatron(plan, dims, prec, at);
    case PlanStack::te:
      return export_te(plan, dims, prec);
    case PlanStack::torchao:
      return export_torchao(plan, dims, prec);
  }
  return {};
}

std::string export_plan(const Plan& plan, PlanStack stack, std::vector<std::string>* warnings,
                        std::optional<PipelineLayout> layout) {
  int blocks = 0;
  for (const auto& [name, lp] : plan.layers)
    if (const auto id = parse_layer_module_name(name)) blocks = std::max(blocks, id->block + 1);
  if (blocks == 0) throw Error("the plan names no linear layer, so there is nothing to export");
  ModelDims dims{/*hidden=*/64, /*intermediate=*/128, /*num_layers=*/blocks, /*num_heads=*/1, /*num_kv_heads=*/1};
  return export_plan(plan, dims, stack, warnings, layout);
}

Plan import_plan(const std::string& text, PlanStack stack, const ModelDims& dims, const std::string& source,
                 std::vector<std::string>* warnings, std::optional<PipelineLayout> layout) {
  refuse_layout_outside_megatron(stack, layout);
  switch (stack) {
    case PlanStack::megatron:
      return import_megatron(text, dims, source, warnings, layout);
    case PlanStack::te:
      return import_te(text, dims, source, warnings);
    case PlanStack::torchao:
      return import_torchao(text, dims, source, warnings);
  }
  return {};
}

}  // namespace snip
