// `snip import`: stores plans (snip-plan/1) and statistics rounds (snip-stats/1) produced
// elsewhere, e.g. by a PyTorch run on a cluster, in the experiment database.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/checked.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/plan.h"
#include "snip/plan_export.h"
#include "snip/planner.h"
#include "snip/recipe_name.h"
#include "snip/stats.h"
#include "snip/store.h"
#include "snip/store_export.h"

namespace {

struct ImportOptions {
  std::string db;
  std::vector<std::string> files;
  std::optional<int64_t> run;
  bool json = false;
  std::string from;    // megatron, te, torchao: the files are in that stack's per-module format
  std::string preset;  // ... for this model (or --config, or --run's)
  std::string config;
  std::string out;                // write the one plan as a snip-plan/1 file instead of storing it
  snip::PipelineLayout pipeline;  // --from megatron: default the layout the file records
  bool pipeline_given = false;
};

// A stack's per-module plan as a snip-plan/1 for the model of --preset, --config or --run.
snip::Plan import_from_stack(const ImportOptions& o, const std::string& path, const std::string& text) {
  snip::ModelDims dims;
  if (!o.preset.empty()) {
    dims = snip::preset_config(o.preset).dims();
  } else if (!o.config.empty()) {
    dims = snip::read_config_file(o.config).dims();
  } else {
    snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db,
                      {.create = o.db.empty(), .read_only_if_unwritable = true});
    dims = store.run(*o.run).spec.dims;
  }
  std::vector<std::string> warnings;
  snip::Plan plan = snip::import_plan(text, snip::parse_plan_stack(o.from), dims, path, &warnings,
                                      o.pipeline_given ? std::optional(o.pipeline) : std::nullopt);
  for (const std::string& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  return plan;
}

// The "format" member of a JSON file, or "" when there is none.
std::string detect_format(const std::string& text, const std::string& path) {
  nlohmann::json j;
  try {
    j = snip::parse_json_strict(text, path);
  } catch (const snip::Error& e) {
    throw snip::Error(std::string(e.what()) + "; expected a snip-plan/1 or snip-stats/1 file");
  }
  if (!j.is_object() || !j.contains("format") || !j["format"].is_string())
    throw snip::Error(path +
                      ": no \"format\" member; expected \"snip-plan/1\" (a plan) or \"snip-stats/1\" "
                      "(a statistics round)");
  return j["format"].get<std::string>();
}

// One file to import, parsed and checked on its own.
struct ImportItem {
  std::string path;
  std::optional<snip::Plan> plan;
  std::optional<snip::StatsRound> stats;
  bool fraction_known = true;  // a plan's achieved FP4 fraction: given, or fixed by its layers
};

ImportItem parse_import_item(const ImportOptions& o, const std::string& path) {
  const std::string text = snip::read_file(path);
  if (!o.from.empty()) return {path, import_from_stack(o, path, text), {}};
  const std::string format = detect_format(text, path);
  ImportItem it{path, {}, {}};
  if (format == "snip-plan/1") {
    it.plan = snip::plan_from_json(text, path);  // (names no linear layer: refused; the model with --run)
    // A plan that mixes FP4 with other precisions and claims no fraction needs the model's FLOPs.
    bool some_fp4 = false, all_fp4 = true;
    for (const auto& [name, lp] : it.plan->layers)
      for (const snip::Gemm g : snip::kAllGemms) {
        some_fp4 = some_fp4 || lp[g] == snip::Precision::fp4;
        all_fp4 = all_fp4 && lp[g] == snip::Precision::fp4;
      }
    it.fraction_known = snip::parse_json_strict(text, path).contains("achieved_fp4_fraction") || !some_fp4 || all_fp4;
  } else if (format == "snip-stats/1") {
    it.stats = snip::stats_from_json(text, path);
    // A round no plan can be made from (no layers, a missing global) would be stored and then
    // refused by every command that reads it.
    try {
      if (it.stats->layers.empty()) throw snip::Error("it holds no layer");
      (void)snip::planner_input_from_stats(*it.stats);
    } catch (const snip::Error& e) {
      throw snip::Error(path + ": these statistics cannot be planned from (" + e.what() + "); nothing was imported");
    }
  } else {
    throw snip::Error(path + ": format \"" + format + "\" cannot be imported (expected snip-plan/1 or snip-stats/1)");
  }
  return it;
}

// A plan on run: it must fit the run's model, and the store computes its FP4 fraction from it.
void fit_plan_to_run(ImportItem& it, const snip::RunInfo& run) {
  std::vector<snip::LinearPrecision> per_layer;
  try {
    per_layer = snip::resolve_plan(*it.plan, run.spec.dims, nullptr);
  } catch (const snip::Error& e) {
    throw snip::Error(it.path + ": does not fit run " + std::to_string(run.id) + " (" +
                      snip::printable_text(run.spec.name) + "): " + e.what() + "; nothing was imported");
  }
  // The store computes what it can: the fraction from the run's model, a contradicting claim refused.
  const double exact = snip::fp4_flop_fraction(per_layer, run.spec.dims);
  if (it.fraction_known && std::abs(it.plan->achieved_fp4_fraction - exact) > 1e-6)
    throw snip::Error(it.path + ": \"achieved_fp4_fraction\" is " + std::to_string(it.plan->achieved_fp4_fraction) +
                      " but on run " + std::to_string(run.id) + "'s model its layers put " + std::to_string(exact) +
                      " of the FLOPs in FP4; correct the value or leave it out; nothing was imported");
  it.plan->achieved_fp4_fraction = exact;
}

// A statistics round on run: same model, and measured on this run (within its steps, under its recipe).
void check_stats_on_run(const ImportItem& it, const snip::RunInfo& run) {
  if (!(it.stats->dims.hidden == run.spec.dims.hidden && it.stats->dims.intermediate == run.spec.dims.intermediate &&
        it.stats->dims.num_layers == run.spec.dims.num_layers && it.stats->dims.num_heads == run.spec.dims.num_heads &&
        it.stats->dims.num_kv_heads == run.spec.dims.num_kv_heads))
    throw snip::Error(it.path + ": statistics of another model than run " + std::to_string(run.id) + " (" +
                      snip::printable_text(run.spec.name) + "); nothing was imported");
  // What the store can check against the run: a round from beyond its last step, or under
  // another recipe, was not measured on this run.
  if (it.stats->step > std::max<int64_t>(run.last_step, 0))
    throw snip::Error(it.path + ": a statistics round at step " + std::to_string(it.stats->step) + ", but run " +
                      std::to_string(run.id) + " has trained " + std::to_string(std::max<int64_t>(run.last_step, 0)) +
                      " steps: it was not measured on this run; nothing was imported");
  if (snip::parse_recipe_name(it.stats->recipe).canonical != run.spec.recipe)
    throw snip::Error(it.path + ": a statistics round under recipe " + it.stats->recipe + ", but run " +
                      std::to_string(run.id) + " trains under " + run.spec.recipe +
                      ": it was not measured on this run; nothing was imported");
}

// Every item in one transaction; then the list of what was stored.
void store_items(const ImportOptions& o, snip::Store& store, const std::vector<ImportItem>& items) {
  nlohmann::json out = nlohmann::json::array();
  snip::Store::Transaction txn(store);
  for (const auto& it : items) {
    if (it.plan) {
      snip::PlanSolveInfo solve;
      solve.run_id = o.run;
      solve.solver_status = "imported";
      const int64_t id = store.add_plan(*it.plan, solve);
      out.push_back({{"file", it.path}, {"kind", "plan"}, {"id", id}});
    } else {
      const int64_t id = store.add_stats_round(*it.stats, o.run);
      out.push_back({{"file", it.path}, {"kind", "stats_round"}, {"id", id}});
    }
  }
  txn.commit();
  if (o.json) {
    std::cout << snip::cli::json_text(out, 2) << "\n";
  } else {
    for (const auto& e : out)
      std::printf("imported %s %lld from %s\n", e["kind"] == "plan" ? "plan" : "statistics round",
                  (long long)e["id"].get<int64_t>(), e["file"].get<std::string>().c_str());
  }
}

void run_import(const ImportOptions& o) {
  // Parse and check every file before writing anything: a bad file imports nothing.
  std::vector<ImportItem> items;
  for (const auto& path : o.files) items.push_back(parse_import_item(o, path));
  if (!o.out.empty()) {  // --from with --out: a plan file, nothing stored
    snip::write_plan_file(o.out, *items.front().plan);
    if (!o.json) std::printf("wrote %s (%s plan from %s)\n", o.out.c_str(), o.from.c_str(), o.files.front().c_str());
    return;
  }
  snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db, {.check_integrity = true});
  std::optional<snip::RunInfo> run;
  if (o.run) run = store.run(*o.run);
  for (auto& it : items) {
    if (!run) {
      if (it.plan && !it.fraction_known)
        throw snip::Error(it.path +
                          ": the plan mixes FP4 with other precisions and gives no \"achieved_fp4_fraction\", which "
                          "depends on the model's layer sizes: give --run ID so the store computes it from that run's "
                          "model (or add the fraction to the file); nothing was imported");
      continue;
    }
    if (it.plan) fit_plan_to_run(it, *run);
    if (it.stats) check_stats_on_run(it, *run);
  }
  store_items(o, store, items);
}

void setup_import(CLI::App& app) {
  auto opts = std::make_shared<ImportOptions>();
  auto* cmd = app.add_subcommand(
      "import", "Import plans (snip-plan/1) and statistics rounds (snip-stats/1) made elsewhere into the database");
  cmd->add_option("--db", opts->db, "Experiment database (SQLite); default: the user's data directory");
  cmd->add_option("files", opts->files, "PLAN.json or STATS.json files (format detected from \"format\")")
      ->required()
      ->check(CLI::ExistingFile);
  cmd->add_option("--run", opts->run, "Attach to this run; plans are checked against its model first");
  cmd->add_flag("--json", opts->json, "Print a JSON array of the imported ids");
  auto* from = cmd->add_option("--from", opts->from,
                               "The files are plans in a training stack's format: megatron (--te-precision-config-file "
                               "YAML), te or torchao (the JSON `snip export --to` writes); needs the model: --preset, "
                               "--config or --run");
  cmd->add_option("--preset", opts->preset, "With --from: the model the plan is for")->needs(from);
  cmd->add_option("--config", opts->config, "With --from: the model's config.json")->needs(from);
  cmd->add_option("--out", opts->out, "With --from and one file: write it as a snip-plan/1 file instead of storing it")
      ->needs(from);
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  snip::cli::add_pipeline_options(cmd, opts->pipeline, *rules,
                                  "with --from megatron, the layout the file was written for (default: the one its "
                                  "snip line records, else 1)",
                                  &opts->pipeline_given);
  rules->at_least<int64_t>("--run", opts->run, 1, "run ids start at 1 (see `snip runs`)")
      .writes("--out", opts->out)
      .excludes("--preset", "--config", "both name the model; give one")
      .add([opts] {
        if (opts->from.empty()) return;
        (void)snip::parse_plan_stack(opts->from);
        if (opts->preset.empty() && opts->config.empty() && !opts->run)
          throw snip::Error("--from " + opts->from +
                            " needs the model the plan is for: --preset NAME, --config config.json or --run ID");
        if (!opts->out.empty() && opts->files.size() != 1)
          throw snip::Error("--out writes one plan: give one file (or leave --out out to store them all)");
        if (!opts->out.empty() && opts->run)
          throw snip::Error("--run attaches stored plans to a run, and --out stores nothing: drop one of them");
      });
  snip::cli::run_checked(cmd, rules, [opts] { run_import(*opts); });
}

SNIP_REGISTER_COMMAND("import", setup_import);

}  // namespace
