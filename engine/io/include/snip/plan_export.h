// Plans that travel: a snip-plan/1 written in the per-module precision formats of the GPU
// training stacks, and read back from them (docs/FORMATS.md, "Plans for other stacks").
//
//   megatron  Megatron-LM's --te-precision-config-file YAML (megatron/core/quantization/
//             quant_config.py): `configs` named by precision, each a Transformer Engine payload,
//             and an ordered map of glob `matchers` on Megatron's module paths
//             (decoder.layers.N.self_attention.linear_qkv / linear_proj, mlp.linear_fc1 /
//             linear_fc2) where the first enabled match wins, then a default that keeps every
//             other module in BF16. Megatron fuses q/k/v and gate/up into one module each.
//   te        snip-te/1 JSON: Hugging Face module name -> Transformer Engine recipe name
//             (NVFP4BlockScaling, MXFP8BlockScaling, Float8BlockScaling, Float8CurrentScaling,
//             or BF16 for no quantized autocast).
//   torchao   snip-torchao/1 JSON: the Hugging Face module names to convert with
//             convert_to_float8_training(module_filter_fn=...), the FP4 ones, and the rest.
//
// Each stack picks one recipe per module, covering all three of its GEMMs, so a plan whose roles
// differ within a layer is refused; so is a plan whose fused Megatron members differ, and FP32
// layers (the stacks run unquantized modules in BF16).
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snip/layers.h"
#include "snip/plan.h"

namespace snip {

enum class PlanStack { megatron, te, torchao };
PlanStack parse_plan_stack(std::string_view name);  // "megatron" "te" "torchao"; snip::Error otherwise
const char* plan_stack_name(PlanStack stack);
inline constexpr const char* kPlanStackNames = "megatron, te, torchao";

// Megatron's module path of a layer (q, k and v share decoder.layers.N.self_attention.linear_qkv;
// gate and up share decoder.layers.N.mlp.linear_fc1).
std::string megatron_module_path(int block, LayerType type);

// The plan in the stack's format for a model of `dims` (layers the plan leaves out run in BF16
// and are named in *warnings). Throws snip::Error saying why a plan cannot be expressed. For
// Megatron, `layout` is the pipeline layout the file is for (default: the one the plan was solved
// for, else none): its patterns name stage-local blocks, and a plan that differs between two
// blocks a layout names alike is refused with both layers named.
std::string export_plan(const Plan& plan, const ModelDims& dims, PlanStack stack, std::vector<std::string>* warnings,
                        std::optional<PipelineLayout> layout = std::nullopt);

// The same for the plan's own blocks (0 .. its highest): the formats name modules by block, and
// the layers' shapes do not enter them. What `snip export --to` and the GUI's Plan view write
// when no model is named.
std::string export_plan(const Plan& plan, PlanStack stack, std::vector<std::string>* warnings,
                        std::optional<PipelineLayout> layout = std::nullopt);

// A file of the stack's format read back as a snip-plan/1 for a model of `dims`. Modules the
// file does not place run in BF16 and are named in *warnings. `source` names the file in errors.
// A Megatron file is read at `layout` (default: the one its snip line records, else none).
Plan import_plan(const std::string& text, PlanStack stack, const ModelDims& dims, const std::string& source,
                 std::vector<std::string>* warnings, std::optional<PipelineLayout> layout = std::nullopt);

// Shell-style glob matching with the meaning of Python's fnmatch.fnmatchcase (what Megatron's
// GlobMatcher calls): `*` any run of characters (dots and slashes too), `?` one character,
// `[seq]` / `[!seq]` a set with ranges; no escapes; an unclosed `[` is a literal.
bool glob_match(std::string_view pattern, std::string_view name);

}  // namespace snip
