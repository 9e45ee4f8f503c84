// Precision plans and their file format `snip-plan/1`:
//   {"format": "snip-plan/1",
//    "layers": {"model.layers.0.self_attn.q_proj": {"fprop": "fp4", "dgrad": "fp4", "wgrad": "fp8"}, ...},
//    "method": "snip", "budget": 0.75, "achieved_fp4_fraction": 0.7512, "recipe": "snip",
//    "provenance": {...free-form: run, step, statistics round, lambda, solver...}}
#pragma once
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "snip/layers.h"
#include "snip/precision.h"

namespace snip {

struct Plan {
  std::map<std::string, LinearPrecision> layers;  // HF module name -> precision per GEMM role
  std::string method;                             // "snip", "min-err", "uniform-fp4", "manual", ...
  double budget = 0.0;                            // requested FP4 FLOP fraction ρ
  double achieved_fp4_fraction = 0.0;             // achieved ρ (exact, from FLOPs)
  std::string recipe = "snip";                    // scaling recipe the plan was made for
  nlohmann::json provenance = nlohmann::json::object();

  bool operator==(const Plan&) const = default;
};

// The same precision on every GEMM of every layer of `dims`.
Plan uniform_plan(const ModelDims& dims, Precision p);

// JSON text <-> Plan. `source` names the file in error messages; a layer name that is not a
// linear layer's (model.layers.N.self_attn.q_proj, ...) is an error here, for every reader.
Plan plan_from_json(const std::string& text, const std::string& source = "plan");
std::string plan_to_json(const Plan& plan);
Plan read_plan_file(const std::string& path);
void write_plan_file(const std::string& path, const Plan& plan);  // atomic

// Resolves a plan against a model: one LinearPrecision per layer in index order.
// A layer the model lacks or a block out of range is an error (snip::Error naming it), and so
// is a plan of whole blocks 0..k-1 that leaves out more than kPlanMaxLeftOut of the model's
// layers (made for a model with fewer blocks); the layers a plan leaves out run in
// `missing_default` and each is reported in *warnings.
inline constexpr size_t kPlanMaxLeftOut = 2;
std::vector<LinearPrecision> resolve_plan(const Plan& plan, const ModelDims& dims, std::vector<std::string>* warnings,
                                          Precision missing_default = Precision::bf16);

// The lenient reading of resolve_plan, for views of stored plans (the plan view's grid, the
// sensitivity view, the compare report): one LinearPrecision per layer of a model of
// `num_blocks` blocks in index order; names that are not linear layers or lie outside the
// model are skipped and the layers the plan leaves out show as `missing_default` (BF16, as
// they would run). Never throws, warns of nothing.
std::vector<LinearPrecision> resolve_plan_lenient(const Plan& plan, int num_blocks,
                                                  Precision missing_default = Precision::bf16);

// Megatron-LM's even pipeline layout (megatron/core/transformer/transformer_layer.py,
// get_transformer_layer_offset): `parallel` stages (--pipeline-model-parallel-size P) of
// `virtual_stages` model chunks each (--num-virtual-stages-per-pipeline-rank V). Chunk
// j = vp_stage·P + pp_rank holds blocks j·c .. j·c+c−1 with c = L/(P·V), and every chunk names its
// blocks decoder.layers.0 .. c−1: a stage-local position k stands for each block b with b mod c = k.
struct PipelineLayout {
  int parallel = 1;
  int virtual_stages = 1;
  bool operator==(const PipelineLayout&) const = default;
  bool split() const { return parallel * virtual_stages > 1; }
};
// c, the blocks of one chunk. Throws snip::Error when P or V < 1 or P·V does not divide `blocks`
// (Megatron's own condition for the even split).
int pipeline_chunk_blocks(int blocks, const PipelineLayout& layout);
// "pipeline-parallel 2" or "pipeline-parallel 2 × 2 virtual stages", for messages.
std::string pipeline_layout_text(const PipelineLayout& layout);
// Megatron's flags for the layout: "--pipeline-model-parallel-size 2 [--num-virtual-stages-per-pipeline-rank 2]".
std::string pipeline_layout_megatron_flags(const PipelineLayout& layout);
// The layout a plan was solved for (provenance "pipeline": {"parallel", "virtual_stages"}), {} when none.
PipelineLayout plan_pipeline_layout(const Plan& plan);
nlohmann::json pipeline_layout_json(const PipelineLayout& layout);
// The first two layers a layout would give one precision that the plan gives two (same type, same
// stage-local position, different blocks), as indices into linear_layers(dims); none when the plan
// is the same on every chunk.
std::optional<std::pair<int, int>> pipeline_conflict(const std::vector<LinearPrecision>& per_layer,
                                                     const ModelDims& dims, const PipelineLayout& layout);

// Achieved FP4 FLOP fraction of per-layer precisions (every GEMM of a layer has the same FLOPs).
double fp4_flop_fraction(const std::vector<LinearPrecision>& per_layer, const ModelDims& dims);

}  // namespace snip
