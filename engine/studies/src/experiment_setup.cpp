// Loading a checkpoint for the experiments (experiment_setup.h).
#include "snip/experiment_setup.h"

#include <filesystem>

#include "snip/checked.h"
#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/qlinear.h"

namespace snip {

ExperimentSetup load_experiment(const std::string& dir, const std::string& data_path, int batch_size, int seq_len) {
  if (!std::filesystem::exists(dir + "/trainer_state.json"))
    throw Error(dir + ": no trainer_state.json — not a training checkpoint (make one with `snip train --out DIR`)");
  ExperimentSetup s;
  s.checkpoint = dir;
  const nlohmann::json state = read_run_state(dir);
  const std::string source = dir + "/trainer_state.json";
  s.config = train_config_from_json(state["config"], source);
  s.config.model = read_checkpoint_config(dir);
  try {
    s.step = json_integer<int64_t>(state.at("step"), source + ": step", 0);
    s.position.epoch = json_integer<uint64_t>(state.at("data").at("epoch"), source + ": data.epoch");
    s.position.batch_in_epoch =
        json_integer<uint64_t>(state.at("data").at("batch_in_epoch"), source + ": data.batch_in_epoch");
    s.position.seed = json_integer<uint64_t>(state.at("data").at("seed"), source + ": data.seed");
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed step/data position (" + e.what() + ")");
  }
  // Checkpoints store the corpus's absolute path (older ones the path as given): the same file
  // given relative to the working directory is the same data.
  const auto absolute = [](const std::string& p) {
    std::error_code ec;
    const std::filesystem::path a = std::filesystem::absolute(p, ec);
    return ec ? p : a.lexically_normal().string();
  };
  const bool same_data =
      data_path.empty() || data_path == s.config.data_path || absolute(data_path) == absolute(s.config.data_path);
  if (!data_path.empty()) s.config.data_path = data_path;
  if (batch_size > 0) s.config.batch_size = batch_size;
  if (seq_len > 0) s.config.seq_len = seq_len;
  if (s.config.seq_len > s.config.model.max_position_embeddings)
    throw Error("sequence length " + std::to_string(s.config.seq_len) +
                " exceeds the model's max_position_embeddings " +
                std::to_string(s.config.model.max_position_embeddings) + "; use a smaller --seq-len");
  if (!same_data) s.position = DataPosition{0, 0, s.config.seed};
  s.own_data = same_data;
  // Bounded set-up, before the corpus is read: the trainer's own memory plus what a statistics
  // round adds (a clean and a noisy gradient per precision, the Hessian probes' weight copies):
  // about 24 more bytes per parameter.
  check_fits_in_memory(Trainer::memory_bytes(s.config) + 24.0 * double(s.config.model.num_parameters()),
                       "a statistics round of this model at batch " + std::to_string(s.config.batch_size) + "x" +
                           std::to_string(s.config.seq_len),
                       "use a smaller --batch-size or --seq-len");
  auto tok = make_recorded_tokenizer(s.config.tokenizer, s.config.tokenizer_fingerprint, dir);
  s.data = load_token_data(s.config.data_path, *tok, s.config.model.vocab_size, s.config.val_fraction);
  // Measured as the run's own: the corpus must still be the one it trained on.
  if (same_data)
    if (std::string warning = check_checkpoint_corpus(state["data"], s.data, dir); !warning.empty())
      s.warnings.push_back(std::move(warning));
  const size_t need = size_t(s.config.batch_size) * size_t(s.config.seq_len) + 1;
  if (s.data.train.size() < need)
    throw Error("training data " + s.data.source + " has " + std::to_string(s.data.train.size()) +
                " tokens, fewer than one batch needs (" + std::to_string(need) +
                "); use a smaller --batch-size/--seq-len");
  s.model = std::make_unique<Llama>(s.config.model, s.config.batch_size, s.config.seq_len);
  read_checkpoint_model(dir, *s.model);
  s.model->set_recipe(Recipe::named(s.config.recipe));
  s.model->set_precisions(
      std::vector<LinearPrecision>(size_t(s.model->num_linear_layers()), LinearPrecision::uniform(Precision::bf16)));
  s.opt = std::make_unique<AdamW<float>>(s.model->num_params(), s.config.adamw);
  read_checkpoint_optimizer(dir, *s.model, *s.opt);
  return s;
}

void ExperimentSetup::train_batch(int64_t offset, std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                                  std::string* batch_id) const {
  BatchLoader loader(&data.train, config.batch_size, config.seq_len, config.seed, /*shuffle=*/true);
  loader.seek(position);
  const size_t n = size_t(config.batch_size) * size_t(config.seq_len);
  inputs.resize(n), targets.resize(n);
  for (int64_t i = 0; i < offset; ++i) loader.next(inputs.data(), targets.data());
  const DataPosition p = loader.position();
  loader.next(inputs.data(), targets.data());
  if (batch_id) *batch_id = "train:e" + std::to_string(p.epoch) + ":b" + std::to_string(p.batch_in_epoch);
}

int64_t ExperimentSetup::val_batches() const {
  BatchLoader val(&data.val, config.batch_size, config.seq_len, 0, /*shuffle=*/false);
  return int64_t(val.batches_per_epoch());
}

void ExperimentSetup::val_batch(int64_t i, std::vector<int32_t>& inputs, std::vector<int32_t>& targets) const {
  BatchLoader val(&data.val, config.batch_size, config.seq_len, 0, /*shuffle=*/false);
  if (i >= int64_t(val.batches_per_epoch()))
    throw Error("the validation stream of " + data.source + " has " + std::to_string(val.batches_per_epoch()) +
                " batches of " + std::to_string(config.batch_size) + "x" + std::to_string(config.seq_len) +
                "; ask for fewer batches or use a smaller --batch-size/--seq-len");
  const size_t n = size_t(config.batch_size) * size_t(config.seq_len);
  inputs.resize(n), targets.resize(n);
  for (int64_t k = 0; k <= i; ++k) val.next(inputs.data(), targets.data());
}

}  // namespace snip
