// Plans for Megatron-LM, Transformer Engine and torchao (plan_export.h): each format round-trips
// to the same assignment; Megatron's YAML means, read the way Megatron reads it (PyYAML's
// SafeLoader, enabled glob matchers, first match wins, Python's fnmatch), what snip reads back;
// our glob matcher agrees with Python's fnmatch.fnmatchcase; plans a stack cannot express are
// refused with the reason.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/plan_export.h"
#include "temp_dir.h"

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool have_python_with(const char* module) {
  if (::access(kPython, X_OK) != 0) return false;
  return std::system((std::string(kPython) + " -c 'import " + module + "' 2>/dev/null").c_str()) == 0;
}

// Runs a Python script on an input file and returns its stdout.
std::string run_python(const std::string& script, const std::string& dir) {
  const std::string path = dir + "/check.py";
  std::ofstream(path) << script;
  std::string out;
  FILE* f = popen((std::string(kPython) + " " + path).c_str(), "r");
  char buf[4096];
  size_t n;
  while (f && (n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  EXPECT_EQ(f ? pclose(f) : -1, 0) << out;
  return out;
}

// The precision Megatron runs a module in (megatron/core/extensions/transformer_engine.py at
// d98e8a64dd: TEQuantizationRecipe's fields and their defaults, parse_from_config refusing other
// fields, _get_fp8_autocast_for_quant_recipe), given the file `cfg`, the module's config name
// (None: no matcher) and whether a global FP8 flag is on.
constexpr const char* kMegatronAutocast =
    "FIELDS = {'fp8_quantization_recipe': None, 'fp4_quantization_recipe': None, 'custom_recipe_factory': None,\n"
    "          'fp8_format': 'e4m3', 'override_quantized_autocast': True,\n"
    "          'override_nonquantized_autocast': False, 'tp_only_amax_red': False}\n"
    "def recipe(cfg, config):\n"
    "    given = cfg['configs'][config]['training_recipe'] or {}\n"
    "    for f in given:\n"
    "        if f not in FIELDS: raise ValueError(f\"Field '{f}' not valid for this configuration.\")\n"
    "    return {**FIELDS, **given}\n"
    "def runs_in(cfg, config, global_fp8):\n"
    "    # keep the surrounding context unless told to override it\n"
    "    if config is None: return 'fp8' if global_fp8 else 'bf16'\n"
    "    r = recipe(cfg, config)\n"
    "    if global_fp8 and not r['override_quantized_autocast']: return 'fp8'\n"
    "    if not global_fp8 and not r['override_nonquantized_autocast']: return 'bf16'\n"
    "    if r['fp4_quantization_recipe']: return 'fp4'\n"
    "    if r['fp8_quantization_recipe']: return 'fp8'\n"
    "    return 'bf16'\n";

snip::ModelDims small_dims() {
  return snip::preset_config("small").dims();
}

// A plan with every layer in FP4, FP8 or BF16 at random; `tied`: q/k/v and gate/up share one.
snip::Plan random_plan(const snip::ModelDims& dims, bool tied, uint32_t seed) {
  std::mt19937 rng(seed);
  const snip::Precision choices[] = {snip::Precision::fp4, snip::Precision::fp8, snip::Precision::bf16};
  snip::Plan plan;
  plan.method = "snip";
  plan.budget = 0.5;
  plan.recipe = "nvfp4";
  snip::Precision qkv = snip::Precision::fp4, gate_up = snip::Precision::fp4;
  for (const snip::LinearLayerInfo& l : snip::linear_layers(dims)) {
    snip::Precision p = choices[rng() % 3];
    if (tied && (l.type == snip::LayerType::q)) qkv = p;
    if (tied && (l.type == snip::LayerType::k || l.type == snip::LayerType::v)) p = qkv;
    if (tied && l.type == snip::LayerType::gate) gate_up = p;
    if (tied && l.type == snip::LayerType::up) p = gate_up;
    plan.layers[l.name] = snip::LinearPrecision::uniform(p);
  }
  std::vector<snip::LinearPrecision> per_layer;
  for (const snip::LinearLayerInfo& l : snip::linear_layers(dims)) per_layer.push_back(plan.layers[l.name]);
  plan.achieved_fp4_fraction = snip::fp4_flop_fraction(per_layer, dims);
  return plan;
}

TEST(PlanExport, EveryStackRoundTripsToTheSameAssignment) {
  const snip::ModelDims dims = small_dims();
  for (const snip::PlanStack stack : {snip::PlanStack::megatron, snip::PlanStack::te, snip::PlanStack::torchao}) {
    for (uint32_t seed = 1; seed <= 5; ++seed) {
      const snip::Plan plan = random_plan(dims, /*tied=*/true, seed);
      std::vector<std::string> warnings;
      const std::string text = snip::export_plan(plan, dims, stack, &warnings);
      EXPECT_TRUE(warnings.empty());
      const snip::Plan back = snip::import_plan(text, stack, dims, "exported", &warnings);
      EXPECT_TRUE(warnings.empty()) << warnings.front();
      EXPECT_EQ(back.layers, plan.layers) << snip::plan_stack_name(stack) << " seed " << seed;
      EXPECT_EQ(back.method, plan.method);
      EXPECT_EQ(back.budget, plan.budget);
      EXPECT_EQ(back.recipe, plan.recipe);
      EXPECT_DOUBLE_EQ(back.achieved_fp4_fraction, plan.achieved_fp4_fraction);
    }
  }
}

TEST(PlanExport, UntiedPlansTravelToTheUnfusedStacksOnly) {
  const snip::ModelDims dims = small_dims();
  const snip::Plan plan = random_plan(dims, /*tied=*/false, 7);
  for (const snip::PlanStack stack : {snip::PlanStack::te, snip::PlanStack::torchao}) {
    const std::string text = snip::export_plan(plan, dims, stack, nullptr);
    EXPECT_EQ(snip::import_plan(text, stack, dims, "x", nullptr).layers, plan.layers);
  }
  try {
    (void)snip::export_plan(plan, dims, snip::PlanStack::megatron, nullptr);
    FAIL() << "an untied plan was exported to Megatron";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("snip solve --ties"), std::string::npos) << e.what();
  }
}

TEST(PlanExport, PlansTheStacksCannotExpressAreRefusedWithTheReason) {
  const snip::ModelDims dims = small_dims();
  snip::Plan per_role = random_plan(dims, true, 3);
  per_role.layers["model.layers.2.mlp.down_proj"] = {snip::Precision::fp4, snip::Precision::fp8, snip::Precision::fp8};
  snip::Plan fp32 = random_plan(dims, true, 3);
  fp32.layers["model.layers.0.mlp.down_proj"] = snip::LinearPrecision::uniform(snip::Precision::fp32);
  for (const snip::PlanStack stack : {snip::PlanStack::megatron, snip::PlanStack::te, snip::PlanStack::torchao}) {
    try {
      (void)snip::export_plan(per_role, dims, stack, nullptr);
      ADD_FAILURE() << "a per-role plan was exported";
    } catch (const snip::Error& e) {
      EXPECT_NE(std::string(e.what()).find("model.layers.2.mlp.down_proj has fprop fp4, dgrad fp8"), std::string::npos);
      EXPECT_NE(std::string(e.what()).find("without `snip solve --per-role`"), std::string::npos) << e.what();
    }
    EXPECT_THROW((void)snip::export_plan(fp32, dims, stack, nullptr), snip::Error);
  }
}

// A plan that leaves a block out: its layers run BF16 and the warning names them.
TEST(PlanExport, LayersAPlanLeavesOutAreBf16AndNamed) {
  const snip::ModelDims dims = small_dims();
  snip::Plan plan = random_plan(dims, true, 4);
  plan.layers.erase("model.layers.1.self_attn.o_proj");
  std::vector<std::string> warnings;
  const std::string text = snip::export_plan(plan, dims, snip::PlanStack::torchao, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("model.layers.1.self_attn.o_proj"), std::string::npos);
  EXPECT_EQ(snip::import_plan(text, snip::PlanStack::torchao, dims, "x", nullptr)
                .layers.at("model.layers.1.self_attn.o_proj"),
            snip::LinearPrecision::uniform(snip::Precision::bf16));
}

TEST(PlanExport, GlobMatchesAsPythonsFnmatch) {
  if (!have_python_with("fnmatch")) GTEST_SKIP() << kPython << " is not installed";
  const std::vector<std::string> patterns = {"*",
                                             "*fc1*",
                                             "*fc1",
                                             "decoder.layers.1.*",
                                             "*layers.1?.*",
                                             "*layers.[0-3].*",
                                             "*layers.[!0-3].*",
                                             "*[qkv]*",
                                             "*[]]*",
                                             "*[!]]*",
                                             "*[a-]*",
                                             "*[z-a]*",
                                             "*[*",
                                             "a*b*c",
                                             "?",
                                             "",
                                             "*.linear_fc?",
                                             "*layers.1.mlp*",
                                             "**fc2",
                                             "*[^x]*",
                                             "[!-a]*"};
  const std::vector<std::string> names = {"",
                                          "a",
                                          "abc",
                                          "axbyc",
                                          "decoder.layers.1.mlp.linear_fc1",
                                          "decoder.layers.11.mlp.linear_fc2",
                                          "decoder.layers.3.self_attention.linear_qkv",
                                          "module.decoder.layers.7.self_attention.linear_proj",
                                          "x]y",
                                          "a-b",
                                          "[x",
                                          "^",
                                          "-"};
  snip_test::TempDir tmp;
  const std::string dir_path = tmp.path.string();
  nlohmann::json cases = nlohmann::json::array();
  for (const auto& p : patterns)
    for (const auto& n : names) cases.push_back({p, n});
  std::ofstream(dir_path + "/cases.json") << cases.dump();
  const std::string out = run_python("import fnmatch, json\ncases = json.load(open('" + dir_path +
                                         "/cases.json'))\nprint(''.join('1' if fnmatch.fnmatchcase(n, p) else '0' "
                                         "for p, n in cases))\n",
                                     dir_path);
  ASSERT_GE(out.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string p = cases[i][0], n = cases[i][1];
    EXPECT_EQ(snip::glob_match(p, n), out[i] == '1') << "pattern '" << p << "' name '" << n << "'";
  }
}

// Megatron reads the YAML with PyYAML's SafeLoader and gives each module the config of the first
// enabled glob matcher that matches its path (quant_config.py: RecipeConfig._build_matchers and
// match_to_config_key). What the module then runs in is decided against the surrounding autocast
// (megatron/core/extensions/transformer_engine.py at d98e8a64dd: TEQuantizationRecipe's fields and
// their defaults, parse_from_config refusing other fields, _get_fp8_autocast_for_quant_recipe).
// The same reading, in Python, gives every module the precision snip reads back, with no global
// FP8/FP4 flag and under a global FP8 one (a plan applied nothing without a flag: the FP8/FP4
// configs kept override_nonquantized_autocast's default, false) — including a file whose broad
// matcher comes first and one that is disabled.
TEST(PlanExport, MegatronReadsTheYamlAsSnipDoes) {
  if (!have_python_with("yaml")) GTEST_SKIP() << "PyYAML is not installed";
  const snip::ModelDims dims = small_dims();
  std::string yaml = snip::export_plan(random_plan(dims, true, 9), dims, snip::PlanStack::megatron, nullptr);
  // First match wins: a broad matcher placed first takes block 1 whole; a disabled one is skipped.
  const std::string extra =
      "  block1_all_fp8:\n    type: glob\n    pattern: \"*layers.1.*\"\n    config: fp8\n    enabled: true\n"
      "  disabled_everything_fp4:\n    type: glob\n    pattern: \"*\"\n    config: fp4\n    enabled: false\n";
  yaml.insert(yaml.find("matchers:\n") + 10, extra);
  snip_test::TempDir tmp;
  const std::string dir_path = tmp.path.string();
  std::ofstream(dir_path + "/plan.yaml") << yaml;
  nlohmann::json paths = nlohmann::json::array({"embedding.word_embeddings", "output_layer"});
  for (const snip::LinearLayerInfo& l : snip::linear_layers(dims))
    paths.push_back(snip::megatron_module_path(l.block, l.type));
  std::ofstream(dir_path + "/paths.json") << paths.dump();
  const std::string out = run_python(
      std::string(kMegatronAutocast) + "import fnmatch, json, yaml\n" + "cfg = yaml.load(open('" + dir_path +
          "/plan.yaml'), Loader=yaml.SafeLoader)\n"
          "matchers = [(m['pattern'], m['config']) for m in cfg['matchers'].values() if m.get('enabled', False)]\n"
          "def key(path):\n"
          "    for pattern, config in matchers:\n"
          "        if fnmatch.fnmatch(path, pattern): return config\n"
          "    return None\n"
          "ps = json.load(open('" +
          dir_path +
          "/paths.json'))\n"
          "print(json.dumps({g: {p: runs_in(cfg, key(p), g == 'fp8') for p in ps} for g in ('none', 'fp8')}))\n",
      dir_path);
  const nlohmann::json megatron = nlohmann::json::parse(out);
  const snip::Plan back = snip::import_plan(yaml, snip::PlanStack::megatron, dims, "plan.yaml", nullptr);
  for (const char* global : {"none", "fp8"}) {
    SCOPED_TRACE(std::string("global flag: ") + global);
    EXPECT_EQ(megatron[global]["output_layer"], "bf16");
    EXPECT_EQ(megatron[global]["embedding.word_embeddings"], "bf16");
    for (const snip::LinearLayerInfo& l : snip::linear_layers(dims)) {
      const std::string path = snip::megatron_module_path(l.block, l.type);
      EXPECT_EQ(snip::precision_name(back.layers.at(l.name).fprop), megatron[global][path].get<std::string>()) << path;
      if (l.block == 1) {
        EXPECT_EQ(megatron[global][path], "fp8") << "the first matcher wins";
      }
    }
  }
}

// A plan that is the same on every pipeline chunk: blocks b and b mod c share each type's
// precision (c = blocks / chunks).
snip::Plan chunk_plan(const snip::ModelDims& dims, int chunk, uint32_t seed) {
  snip::ModelDims one = dims;
  one.num_layers = chunk;
  const snip::Plan local = random_plan(one, true, seed);
  snip::Plan plan = local;
  plan.layers.clear();
  std::vector<snip::LinearPrecision> per_layer;
  for (const snip::LinearLayerInfo& l : snip::linear_layers(dims)) {
    plan.layers[l.name] = local.layers.at(snip::layer_module_name(l.block % chunk, l.type));
    per_layer.push_back(plan.layers[l.name]);
  }
  plan.achieved_fp4_fraction = snip::fp4_flop_fraction(per_layer, dims);
  return plan;
}

// Under pipeline parallelism Megatron builds each stage's model chunks with their blocks numbered
// from 0 in named_modules() (TransformerBlock._build_layers: ModuleList index i, global number
// i + 1 + get_transformer_layer_offset) and matches the config's patterns against those names
// (GPTModel.__init__: get_quant_config_or_none(name, ...)). The Python below follows
// megatron/core/transformer/transformer_layer.py and transformer_block.py at d98e8a64dd
// (get_transformer_layer_offset, the even split): for every stage and virtual stage it names the
// chunk's modules as Megatron does, matches them, and maps each back to its global block.
// A plan exported for the layout gives every module of every stage the plan's precision; one
// exported for PP = 1 does not (the bug: stage 1 took stage 0's precisions), and a plan that
// differs between two blocks the layout names alike is refused with both layers named.
TEST(PlanExport, MegatronAtPipelineParallelGivesEveryStageItsBlocksPrecision) {
  if (!have_python_with("yaml")) GTEST_SKIP() << "PyYAML is not installed";
  snip_test::TempDir tmp;
  const std::string dir = tmp.path.string();
  struct Case {
    snip::ModelDims dims;
    snip::PipelineLayout layout;
    bool for_layout;  // exported for the layout (else for PP = 1, read at the layout)
  };
  const snip::ModelDims tinyllama = snip::preset_config("tinyllama-1.1b").dims();  // 22 blocks
  const snip::ModelDims medium = snip::preset_config("medium").dims();             // 8 blocks
  const std::vector<Case> cases = {
      {tinyllama, {2, 1}, true}, {medium, {2, 2}, true}, {medium, {4, 1}, true}, {tinyllama, {2, 1}, false}};
  nlohmann::json jobs = nlohmann::json::array();
  std::vector<snip::Plan> plans;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const int chunk = snip::pipeline_chunk_blocks(c.dims.num_layers, c.layout);
    // The PP = 1 file of a plan that differs between stages: what Megatron read before.
    plans.push_back(c.for_layout ? chunk_plan(c.dims, chunk, uint32_t(i + 1)) : random_plan(c.dims, true, 5));
    const std::string yaml =
        snip::export_plan(plans[i], c.dims, snip::PlanStack::megatron, nullptr,
                          c.for_layout ? std::optional(c.layout) : std::optional(snip::PipelineLayout{}));
    const std::string path = dir + "/plan" + std::to_string(i) + ".yaml";
    std::ofstream(path) << yaml;
    jobs.push_back({{"yaml", path},
                    {"num_layers", c.dims.num_layers},
                    {"pp", c.layout.parallel},
                    {"vp", c.layout.virtual_stages}});
    if (c.for_layout) {  // and back: snip reads the layout from the file's snip line
      const snip::Plan back = snip::import_plan(yaml, snip::PlanStack::megatron, c.dims, path, nullptr);
      EXPECT_EQ(back.layers, plans[i].layers) << i;
      EXPECT_EQ(snip::plan_pipeline_layout(back), c.layout) << i;
    }
  }
  std::ofstream(dir + "/jobs.json") << jobs.dump();
  const std::string out = run_python(
      std::string(kMegatronAutocast) + "import fnmatch, json, yaml\n" +
          "MODULES = ['self_attention.linear_qkv', 'self_attention.linear_proj', 'mlp.linear_fc1', 'mlp.linear_fc2']\n"
          "def offset(num_layers, pp_size, vp_size, pp_rank, vp_stage):\n"
          "    # get_transformer_layer_offset, pipeline_model_parallel_size > 1, no uneven first/last stage\n"
          "    if pp_size == 1: return 0\n"
          "    num_layers_per_pipeline_rank = num_layers // pp_size\n"
          "    if vp_size is not None:\n"
          "        num_layers_per_virtual_rank = num_layers_per_pipeline_rank // vp_size\n"
          "        total_virtual_chunks = num_layers // vp_size\n"
          "        return vp_stage * total_virtual_chunks + (pp_rank * num_layers_per_virtual_rank)\n"
          "    return pp_rank * num_layers_per_pipeline_rank\n"
          "def read(job):\n"
          "    cfg = yaml.load(open(job['yaml']), Loader=yaml.SafeLoader)\n"
          "    matchers = [(m['pattern'], m['config']) for m in cfg['matchers'].values() if m.get('enabled', False)]\n"
          "    L, P, V = job['num_layers'], job['pp'], job['vp']\n"
          "    per_chunk = L // P // V\n"
          "    got = {'none': {}, 'fp8': {}}\n"
          "    for pp_rank in range(P):\n"
          "        for vp_stage in range(V):\n"
          "            off = offset(L, P, V if V > 1 else None, pp_rank, vp_stage)\n"
          "            for i in range(per_chunk):  # the chunk's ModuleList index: its own name\n"
          "                for mod in MODULES:\n"
          "                    name = f'decoder.layers.{i}.{mod}'\n"
          "                    config = next((c for p, c in matchers if fnmatch.fnmatch(name, p)), None)\n"
          "                    for g in got: got[g][f'decoder.layers.{off + i}.{mod}'] = runs_in(cfg, config, g == "
          "'fp8')\n"
          "    return got\n"
          "print(json.dumps([read(j) for j in json.load(open('" +
          dir + "/jobs.json'))]))\n",
      dir);
  const nlohmann::json megatron = nlohmann::json::parse(out);
  for (size_t i = 0; i < cases.size(); ++i) {
    for (const char* global : {"none", "fp8"}) {  // without and with a global FP8 flag
      SCOPED_TRACE("case " + std::to_string(i) + ": " + snip::pipeline_layout_text(cases[i].layout) + ", global flag " +
                   global);
      const nlohmann::json& runs = megatron[i][global];
      int wrong = 0, modules = 0;
      for (const snip::LinearLayerInfo& l : snip::linear_layers(cases[i].dims)) {
        const std::string path = snip::megatron_module_path(l.block, l.type);
        ASSERT_TRUE(runs.contains(path)) << path << " is on no stage";
        if (l.type == snip::LayerType::k || l.type == snip::LayerType::v || l.type == snip::LayerType::up) continue;
        ++modules;
        wrong += runs[path] != snip::precision_name(plans[i].layers.at(l.name).fprop);
      }
      EXPECT_EQ(runs.size(), size_t(modules));
      if (cases[i].for_layout)
        EXPECT_EQ(wrong, 0) << "modules on a stage in another block's precision";
      else
        EXPECT_GT(wrong, 0) << "a PP = 1 file read at PP = 2 happened to fit this plan; pick another seed";
    }
  }
  // The plan that differs between stages is refused at the layout, both layers named.
  try {
    (void)snip::export_plan(plans[3], tinyllama, snip::PlanStack::megatron, nullptr, snip::PipelineLayout{2, 1});
    ADD_FAILURE() << "a plan Megatron cannot express at PP = 2 was exported";
  } catch (const snip::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("Megatron names blocks"), std::string::npos) << m;
    EXPECT_NE(m.find("snip solve --pipeline-parallel 2"), std::string::npos) << m;
  }
  // 22 blocks do not split evenly over 4 stages; Megatron refuses that layout too.
  EXPECT_THROW(
      (void)snip::export_plan(plans[0], tinyllama, snip::PlanStack::megatron, nullptr, snip::PipelineLayout{4, 1}),
      snip::Error);
  // Transformer Engine and torchao name modules model-wide: a layout there is a mistake.
  EXPECT_THROW((void)snip::export_plan(plans[0], tinyllama, snip::PlanStack::te, nullptr, snip::PipelineLayout{2, 1}),
               snip::Error);
}

// Transformer Engine's recipe classes default to more than snip emulates (NVFP4BlockScaling: the
// random Hadamard transform, stochastic rounding, 16×16 weight blocks; Float8BlockScaling:
// power-of-two scales; Float8CurrentScaling: HYBRID). The export writes each setting that
// differs, per the plan's recipe, and the Megatron header names the environment it cannot carry.
TEST(PlanExport, TransformerEngineSettingsAreTheRecipeSnipEmulatesNotTheDefaults) {
  const snip::ModelDims dims = small_dims();
  snip::Plan plan = random_plan(dims, true, 3);
  auto settings = [&](const std::string& recipe) {
    plan.recipe = recipe;
    return nlohmann::json::parse(snip::export_plan(plan, dims, snip::PlanStack::te, nullptr))["settings"];
  };
  const nlohmann::json snip_recipe = settings("snip");
  EXPECT_EQ(snip_recipe["NVFP4BlockScaling"]["args"],
            (nlohmann::json{
                {"disable_rht", true}, {"disable_stochastic_rounding", false}, {"disable_2d_quantization", false}}));
  EXPECT_EQ(snip_recipe["Float8BlockScaling"]["args"]["fp8_format"], "E4M3");
  EXPECT_EQ(snip_recipe["Float8BlockScaling"]["env"]["NVTE_FP8_BLOCK_SCALING_FP32_SCALES"], "1");
  const nlohmann::json mx = settings("mx");
  EXPECT_EQ(mx["NVFP4BlockScaling"]["args"],
            (nlohmann::json{
                {"disable_rht", true}, {"disable_stochastic_rounding", true}, {"disable_2d_quantization", true}}));
  EXPECT_EQ(mx["MXFP8BlockScaling"]["args"]["fp8_format"], "E4M3");
  EXPECT_TRUE(mx["MXFP8BlockScaling"]["env"].empty());
  const nlohmann::json tensor_sr = settings("tensor:sr");
  EXPECT_EQ(tensor_sr["NVFP4BlockScaling"]["args"]["disable_stochastic_rounding"], false);
  EXPECT_EQ(tensor_sr["NVFP4BlockScaling"]["args"]["disable_2d_quantization"], true);
  EXPECT_EQ(tensor_sr["Float8CurrentScaling"]["args"]["fp8_format"], "E4M3");
  // Where the stack has nothing closer, the class says so; an exact class has no note.
  EXPECT_TRUE(snip_recipe["NVFP4BlockScaling"].contains("note"));
  EXPECT_FALSE(snip_recipe["Float8BlockScaling"].contains("note"));
  EXPECT_FALSE(mx["MXFP8BlockScaling"].contains("note"));
  EXPECT_TRUE(settings("block:32")["Float8BlockScaling"].value("note", "").find("`block:32`") != std::string::npos);
  // torchao: its FP8 and FP4 training configs, nearest to the plan's recipe, with what differs.
  auto torchao = [&](const std::string& recipe) {
    plan.recipe = recipe;
    return nlohmann::json::parse(snip::export_plan(plan, dims, snip::PlanStack::torchao, nullptr))["recipes"];
  };
  EXPECT_EQ(torchao("mx")["float8"]["config"], "MXFP8TrainingOpConfig");
  EXPECT_EQ(torchao("mx")["float8"]["exact"], true);
  EXPECT_EQ(torchao("snip")["float8"]["config"], "Float8LinearConfig.from_recipe_name(\"rowwise\")");
  EXPECT_EQ(torchao("snip")["float8"]["exact"], false);
  EXPECT_NE(torchao("tensor")["float8"]["config"].get<std::string>().find("float8_e4m3fn"), std::string::npos);
  EXPECT_EQ(torchao("nvfp4")["fp4"]["config"], "NVFP4TrainingConfig");
  EXPECT_NE(torchao("nvfp4")["fp4"]["note"].get<std::string>().find("Hadamard"), std::string::npos);
  plan.recipe = "mx";
  const std::string yaml = snip::export_plan(plan, dims, snip::PlanStack::megatron, nullptr);
  EXPECT_NE(yaml.find("environment NVTE_NVFP4_DISABLE_2D_QUANTIZATION=1 NVTE_NVFP4_DISABLE_RHT=1 "
                      "NVTE_NVFP4_DISABLE_STOCHASTIC_ROUNDING=1\n"),
            std::string::npos)
      << yaml.substr(0, 1500);
}

TEST(PlanExport, BrokenFilesSayWhatIsWrong) {
  const snip::ModelDims dims = small_dims();
  auto message = [&](const std::string& text, snip::PlanStack stack) {
    try {
      (void)snip::import_plan(text, stack, dims, "f", nullptr);
    } catch (const snip::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("matchers: [", snip::PlanStack::megatron).find("not valid YAML"), std::string::npos);
  EXPECT_NE(message("configs: {}\n", snip::PlanStack::megatron).find("no `matchers` map"), std::string::npos);
  EXPECT_NE(message("matchers:\n  a: {type: regex, pattern: x, config: c, enabled: true}\n", snip::PlanStack::megatron)
                .find("implements only glob"),
            std::string::npos);
  EXPECT_NE(message("matchers:\n  a: {type: glob, pattern: x, config: c, enabled: true}\n", snip::PlanStack::megatron)
                .find("names config 'c'"),
            std::string::npos);
  EXPECT_NE(message("{\"format\": \"snip-te/1\"}", snip::PlanStack::torchao).find("not a snip-torchao/1 file"),
            std::string::npos);
  EXPECT_NE(
      message(R"({"format": "snip-te/1", "modules": {"model.layers.0.mlp.up_proj": "Float16"}})", snip::PlanStack::te)
          .find("has recipe \"Float16\""),
      std::string::npos);
  EXPECT_NE(message(R"({"format": "snip-torchao/1", "float8": ["model.layers.0.mlp.up_proj"],
                        "fp4": ["model.layers.0.mlp.up_proj"]})",
                    snip::PlanStack::torchao)
                .find("listed twice"),
            std::string::npos);
}

}  // namespace
