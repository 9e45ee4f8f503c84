// `snip eval`: the mean loss of a checkpoint on a token stream read sequentially from its start
// (llm.c's convention: batch i takes tokens [i·B·T, (i+1)·B·T + 1)), under a uniform precision
// or a plan; optionally the gradient of that mean loss for every parameter (HF names).
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/dataset.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/plan.h"
#include "snip/qlinear.h"
#include "snip/trainer.h"

namespace {

struct EvalOptions {
  std::string checkpoint;
  std::string data;
  std::string tokenizer;  // default: the run's tokenizer (trainer_state.json), else byte
  std::string split = "all";
  int batch_size = 0;   // 0: the run's own, else defaults::kBatchSize
  int seq_len = 0;      // 0: the run's own, else defaults::kSeqLen (at most max_position_embeddings)
  int64_t batches = 0;  // 0: every whole batch of the stream
  std::string precision = "fp32";
  std::string plan;
  std::string recipe;
  std::string grads_out;
  bool json = false;
};

// What is not given is the run's own (trainer_state.json), else the training defaults.
struct EvalSettings {
  std::string tokenizer, recipe, tokenizer_fingerprint;
  int B = 0, T = 0;
};

EvalSettings eval_settings(const EvalOptions& o, const snip::ModelConfig& cfg) {
  EvalSettings e{o.tokenizer, o.recipe, {}, o.batch_size, o.seq_len};
  if (std::filesystem::exists(o.checkpoint + "/trainer_state.json")) {
    const auto state = snip::read_trainer_state(o.checkpoint);
    if (state.contains("config")) {
      const auto& c = state["config"];
      if (e.tokenizer.empty()) {  // the run's own, held to its fingerprint
        e.tokenizer = c.value("tokenizer", "byte");
        e.tokenizer_fingerprint = c.value("tokenizer_fingerprint", std::string());
      }
      if (e.B <= 0) e.B = c.value("batch_size", 0);
      if (e.T <= 0) e.T = c.value("seq_len", 0);
    }
    if (e.recipe.empty()) e.recipe = state.value("recipe", snip::defaults::kRecipe);
  }
  if (e.tokenizer.empty()) e.tokenizer = "byte";
  if (e.recipe.empty()) e.recipe = snip::defaults::kRecipe;
  if (e.B <= 0) e.B = snip::defaults::kBatchSize;
  if (e.T <= 0) e.T = std::min(snip::defaults::kSeqLen, cfg.max_position_embeddings);
  return e;
}

// The number of batches to evaluate: --batches, else every whole batch of the stream.
int64_t eval_batch_count(const EvalOptions& o, const snip::BatchLoader& loader, const snip::TokenData& data,
                         size_t stream_tokens, int B, int T) {
  const int64_t available = int64_t(loader.batches_per_epoch());
  if (available <= 0)
    throw snip::Error(data.source + ": " + std::to_string(stream_tokens) + " tokens are fewer than one batch of " +
                      std::to_string(B) + "x" + std::to_string(T) + "+1; use a smaller --batch-size/--seq-len");
  if (o.batches > available)
    throw snip::Error("--batches " + std::to_string(o.batches) + " exceeds the " + std::to_string(available) +
                      " whole batches of " + std::to_string(B) + "x" + std::to_string(T) + " in " + data.source);
  return o.batches > 0 ? o.batches : available;
}

// The sum of n batches' losses (and, with --grads-out, the gradient of their mean in the model).
double eval_loss_sum(const EvalOptions& o, snip::Llama& model, snip::BatchLoader& loader, int64_t n, int B, int T) {
  std::vector<int32_t> in(size_t(B) * T), tgt(in.size());
  double sum = 0;
  model.zero_grads();
  for (int64_t i = 0; i < n; ++i) {
    loader.next(in.data(), tgt.data());
    const double loss = model.forward(in.data(), tgt.data());
    if (!std::isfinite(loss))
      throw snip::Error("batch " + std::to_string(i) +
                        ": loss is not finite (first non-finite tensor: " + model.first_nonfinite_activation() + ")");
    sum += loss;
    if (!o.grads_out.empty()) model.backward(1.0 / double(n));  // gradient of the mean loss
  }
  return sum;
}

void run_eval(const EvalOptions& o) {
  if (!o.grads_out.empty()) snip::checked_write_target(o.grads_out);  // refused before the evaluation
  const snip::ModelConfig cfg = snip::read_checkpoint_config(o.checkpoint);
  const EvalSettings e = eval_settings(o, cfg);
  const std::string& recipe = e.recipe;
  const int B = e.B, T = e.T;
  if (o.split != "all" && o.split != "train" && o.split != "val")
    throw snip::Error("--split must be all, train or val (got \"" + o.split + "\")");

  // Everything that can be refused before the corpus is read and the model allocated.
  const snip::Recipe eval_recipe = snip::Recipe::named(recipe);
  std::vector<std::string> warnings;
  const std::vector<snip::LinearPrecision> precisions =
      !o.plan.empty()
          ? snip::resolve_plan(snip::read_plan_file(o.plan), cfg.dims(), &warnings)
          : std::vector<snip::LinearPrecision>(size_t(snip::kLayersPerBlock * cfg.num_hidden_layers),
                                               snip::LinearPrecision::uniform(snip::parse_precision(o.precision)));
  auto tok = snip::make_recorded_tokenizer(e.tokenizer, e.tokenizer_fingerprint, o.checkpoint);
  const snip::TokenData data = snip::load_token_data(o.data, *tok, cfg.vocab_size);
  std::vector<int32_t> stream;
  if (o.split != "val") stream = data.train;
  if (o.split != "train") stream.insert(stream.end(), data.val.begin(), data.val.end());

  snip::Llama model(cfg, B, T);
  snip::read_checkpoint_model(o.checkpoint, model);
  model.set_recipe(eval_recipe);
  model.set_precisions(precisions);
  for (const auto& w : warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());

  snip::BatchLoader loader(&stream, B, T, 0, /*shuffle=*/false);
  const int64_t n = eval_batch_count(o, loader, data, stream.size(), B, T);
  const double sum = eval_loss_sum(o, model, loader, n, B, T);
  const double mean = sum / double(n);
  const int64_t tokens = n * B * T;
  if (!o.grads_out.empty()) snip::write_model_grads(o.grads_out, model);
  if (o.json) {
    nlohmann::json j{{"loss", mean},        {"tokens", tokens},
                     {"batches", n},        {"batch_size", B},
                     {"seq_len", T},        {"checkpoint", o.checkpoint},
                     {"data", data.source}, {"split", o.split},
                     {"recipe", recipe},    {"precision", o.plan.empty() ? o.precision : "plan:" + o.plan}};
    if (!o.grads_out.empty()) j["grads_out"] = o.grads_out;
    std::printf("%s\n", snip::cli::json_text(j).c_str());
  } else {
    std::printf("loss %.6f over %lld tokens (%lld batches of %dx%d, %s)\n", mean, (long long)tokens, (long long)n, B, T,
                data.source.c_str());
    if (!o.grads_out.empty()) std::printf("gradients written to %s\n", o.grads_out.c_str());
  }
}

void setup_eval(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  auto* cmd = app.add_subcommand("eval",
                                 "Mean loss of a checkpoint on sequential batches (llm.c convention), "
                                 "optionally with every parameter's gradient");
  cmd->add_option("--checkpoint", o->checkpoint, "Checkpoint directory (config.json + model.safetensors)")->required();
  cmd->add_option("--data", o->data, "Text or llm.c token file; default: the bundled corpus");
  cmd->add_option("--split", o->split, "Which part of the stream: all (default), train or val (the last 5%)");
  cmd->add_option("--tokenizer", o->tokenizer, "\"byte\" or a SentencePiece .model (default: the run's)");
  cmd->add_option("--batch-size", o->batch_size,
                  "Rows per batch (B); default: the run's own, else " + std::to_string(snip::defaults::kBatchSize));
  cmd->add_option("--seq-len", o->seq_len,
                  "Tokens per row (T); default: the run's own, else min(" + std::to_string(snip::defaults::kSeqLen) +
                      ", max_position_embeddings)");
  cmd->add_option("--batches", o->batches, "Number of batches from the start (default: all whole batches)");
  auto* prec = cmd->add_option("--precision", o->precision, "Uniform GEMM precision: fp32 (default), bf16, fp8, fp4");
  cmd->add_option("--plan", o->plan, "snip-plan/1 file instead of a uniform precision")->excludes(prec);
  cmd->add_option("--recipe", o->recipe,
                  "Scaling recipe: snip, mx, nvfp4, tensor, block:N, block:row, channel (+ :sr) (default: the run's)");
  cmd->add_option("--grads-out", o->grads_out, "Write d(mean loss)/d(parameter) as FP32 safetensors, HF names");
  cmd->add_flag("--json", o->json, "Print one JSON object {loss, tokens, ...}");
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->reads("--checkpoint", o->checkpoint).reads("--data", o->data).reads("--plan", o->plan);
  rules->writes("--grads-out", o->grads_out);
  rules->at_least("--batch-size", o->batch_size, 1)
      .at_least("--seq-len", o->seq_len, 1, "leave it out for the run's own")
      .at_least<int64_t>("--batches", o->batches, 1, "leave it out to evaluate every whole batch")
      .one_of("--split", o->split, {"all", "train", "val"})
      .add([o, r = rules.get()] {
        if (r->given("--recipe") && !r->given("--plan") && (o->precision == "fp32" || o->precision == "bf16"))
          snip::cli::OptionRules::warn("--recipe is ignored with --precision " + o->precision +
                                       " (no scaled format: give --precision fp8 or fp4, or --plan)");
      });
  snip::cli::run_checked(cmd, rules, [o] { run_eval(*o); });
}
SNIP_REGISTER_COMMAND("eval", setup_eval);

}  // namespace
