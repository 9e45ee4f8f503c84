// Checkpoint directories a Hugging Face user recognizes:
//   config.json           the model config (HF names)
//   model.safetensors     FP32 weights, HF tensor names (model.embed_tokens.weight, ...)
//   optimizer.safetensors AdamW moments: "exp_avg.<name>" and "exp_avg_sq.<name>" for every weight
//   trainer_state.json    step, data position, RNG state, current plan, recipe, hyper-parameters
// The directory is written as a whole into a temporary sibling and swapped in atomically, so a
// reader (or a crash) sees the previous checkpoint or the new one, never a mix.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "snip/llama.h"
#include "snip/optimizer.h"

namespace snip {

// Weights only (e.g. for `snip eval` or --grads-out): HF names.
void write_model_weights(const std::string& path, const Llama& model);
// Reads and checks every tensor's name and shape against the model's config. Throws snip::Error
// naming the file, tensor and both shapes. lm_head.weight may be absent when tied.
void read_model_weights(const std::string& path, Llama& model);
// Gradients of every parameter with HF names (what `snip eval --grads-out` writes).
void write_model_grads(const std::string& path, const Llama& model);

// Writes a complete checkpoint directory atomically (temp dir + fsync + swap).
void write_checkpoint(const std::string& dir, const Llama& model, const AdamW<float>& opt,
                      const nlohmann::json& trainer_state);
// Loads the parts of a checkpoint; each throws snip::Error naming what is missing or wrong.
ModelConfig read_checkpoint_config(const std::string& dir);
nlohmann::json read_trainer_state(const std::string& dir);
void read_checkpoint_model(const std::string& dir, Llama& model);
void read_checkpoint_optimizer(const std::string& dir, const Llama& model, AdamW<float>& opt);

}  // namespace snip
