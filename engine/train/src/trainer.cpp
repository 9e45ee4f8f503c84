// Trainer: the optimizer-step loop, evaluation, checkpoints and resume (trainer.h).
#include "snip/trainer.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "snip/checked.h"
#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/qlinear.h"

namespace snip {

nlohmann::json train_config_to_json(const TrainConfig& c) {
  return nlohmann::json{{"model", config_to_json(c.model)},
                        {"data_path", c.data_path},
                        {"tokenizer", c.tokenizer},
                        {"tokenizer_fingerprint", c.tokenizer_fingerprint},
                        {"val_fraction", c.val_fraction},
                        {"batch_size", c.batch_size},
                        {"seq_len", c.seq_len},
                        {"grad_accum", c.grad_accum},
                        {"steps", c.steps},
                        {"schedule",
                         {{"kind", c.schedule.kind},
                          {"lr", c.schedule.lr},
                          {"lr_min", c.schedule.lr_min},
                          {"warmup", c.schedule.warmup},
                          {"total", c.schedule.total}}},
                        {"adamw",
                         {{"beta1", c.adamw.beta1},
                          {"beta2", c.adamw.beta2},
                          {"eps", c.adamw.eps},
                          {"weight_decay", c.adamw.weight_decay}}},
                        {"grad_clip", c.grad_clip},
                        {"seed", c.seed},
                        {"eval_every", c.eval_every},
                        {"eval_batches", c.eval_batches},
                        {"plan", nlohmann::json::parse(plan_to_json(c.plan))},
                        {"precision", c.precision},
                        {"recipe", c.recipe}};
}

TrainConfig train_config_from_json(const nlohmann::json& j, const std::string& source) {
  try {
    TrainConfig c;
    c.model = config_from_json(j.at("model"), source + " (model)");
    c.data_path = j.at("data_path").get<std::string>();
    c.tokenizer = j.at("tokenizer").get<std::string>();
    c.tokenizer_fingerprint = j.value("tokenizer_fingerprint", std::string());  // runs saved before had none
    c.val_fraction = j.at("val_fraction").get<double>();
    c.batch_size = json_integer<int>(j.at("batch_size"), source + ": batch_size", 1);
    c.seq_len = json_integer<int>(j.at("seq_len"), source + ": seq_len", 1);
    c.grad_accum = json_integer<int>(j.at("grad_accum"), source + ": grad_accum", 1);
    c.steps = json_integer<int64_t>(j.at("steps"), source + ": steps", 0);
    const auto& s = j.at("schedule");
    c.schedule.kind = s.at("kind").get<std::string>();
    c.schedule.lr = s.at("lr").get<double>();
    c.schedule.lr_min = s.at("lr_min").get<double>();
    c.schedule.warmup = json_integer<int64_t>(s.at("warmup"), source + ": schedule.warmup", 0);
    c.schedule.total = json_integer<int64_t>(s.at("total"), source + ": schedule.total", 0);
    const auto& a = j.at("adamw");
    c.adamw.beta1 = a.at("beta1").get<double>();
    c.adamw.beta2 = a.at("beta2").get<double>();
    c.adamw.eps = a.at("eps").get<double>();
    c.adamw.weight_decay = a.at("weight_decay").get<double>();
    c.grad_clip = j.at("grad_clip").get<double>();
    c.seed = json_integer<uint64_t>(j.at("seed"), source + ": seed");
    c.eval_every = json_integer<int64_t>(j.at("eval_every"), source + ": eval_every", 0);
    c.eval_batches = json_integer<int>(j.at("eval_batches"), source + ": eval_batches", 0);
    c.plan = plan_from_json(j.at("plan").dump(), source + " (plan)");
    c.precision = j.at("precision").get<std::string>();
    c.recipe = j.at("recipe").get<std::string>();
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": training configuration is incomplete or malformed (" + e.what() + ")");
  }
}

namespace {

// The corpus path as stored: absolute, so a resume from another working directory finds it.
std::string absolute_data_path(const std::string& path) {
  if (path.empty()) return path;  // the bundled corpus
  std::error_code ec;
  const std::filesystem::path abs = std::filesystem::absolute(path, ec);
  return ec ? path : abs.lexically_normal().string();
}

Trainer::CorpusFingerprint fingerprint_tokens(const TokenData& d) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64 over the tokens' little-endian 16-bit values
  auto mix = [&h](const std::vector<int32_t>& tokens) {
    for (const int32_t t : tokens) {
      h = (h ^ uint64_t(uint32_t(t) & 0xff)) * 0x100000001b3ull;
      h = (h ^ uint64_t((uint32_t(t) >> 8) & 0xffffff)) * 0x100000001b3ull;
    }
  };
  mix(d.train);
  mix(d.val);
  return {uint64_t(d.train.size() + d.val.size()), h};
}

}  // namespace

std::string Trainer::CorpusFingerprint::hex() const {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", (unsigned long long)hash);
  return buf;
}

std::string Trainer::CorpusFingerprint::str() const {
  return std::to_string(tokens) + " tokens, fnv1a64 " + hex();
}

double Trainer::memory_bytes(const TrainConfig& c) {
  const ModelConfig& mc = c.model;
  const double BT = double(c.batch_size) * c.seq_len;
  const double acts =
      double(mc.num_hidden_layers) * (BT * (6.0 * mc.hidden_size + 4.0 * mc.intermediate_size) +
                                      double(c.batch_size) * mc.num_attention_heads * double(c.seq_len) * c.seq_len) +
      3.0 * BT * mc.vocab_size;
  return 4.0 * (4.0 * double(mc.num_parameters()) + acts);
}

Trainer::Trainer(TrainConfig config) : Trainer(std::move(config), true) {}

Trainer::Trainer(TrainConfig config, bool init_weights) : config_(std::move(config)) {
  config_.model.validate("model config");
  config_.schedule.validate();
  if (config_.batch_size <= 0 || config_.seq_len <= 0 || config_.grad_accum <= 0)
    throw Error("batch size, sequence length and gradient accumulation must be positive");
  if (config_.steps < 0) throw Error("the number of steps must be ≥ 0");
  if (!(config_.adamw.beta1 >= 0 && config_.adamw.beta1 < 1) || !(config_.adamw.beta2 >= 0 && config_.adamw.beta2 < 1))
    throw Error("AdamW beta1 and beta2 must be in [0, 1) (got " + std::to_string(config_.adamw.beta1) + ", " +
                std::to_string(config_.adamw.beta2) + "); typical values are 0.9 and 0.95");
  if (!(config_.adamw.weight_decay >= 0)) throw Error("weight decay must be ≥ 0");
  if (!(config_.grad_clip >= 0)) throw Error("gradient clipping norm must be ≥ 0 (0 disables clipping)");
  if (!(config_.val_fraction > 0 && config_.val_fraction < 1))
    throw Error("validation fraction must be between 0 and 1");
  {  // refuse what cannot fit before allocating it (e.g. the tinyllama-1.1b preset, meant for planning)
    const ModelConfig& mc = config_.model;
    const double need = memory_bytes(config_);
    const double have = double(::sysconf(_SC_PHYS_PAGES)) * double(::sysconf(_SC_PAGE_SIZE));
    if (have > 0 && need > 0.8 * have)
      throw Error("training this model needs about " + std::to_string(int64_t(need / 1e9)) + " GB (" +
                  std::to_string(mc.num_parameters()) + " parameters, batch " + std::to_string(config_.batch_size) +
                  "x" + std::to_string(config_.seq_len) + ") but the machine has " +
                  std::to_string(int64_t(have / 1e9)) +
                  " GB; use a smaller preset or batch (large presets such as "
                  "tinyllama-1.1b are for planning from imported statistics)");
  }
  // A new run records its tokenizer by absolute path and fingerprint; a resumed one is held to it.
  if (config_.tokenizer_fingerprint.empty()) {
    const TokenizerRef ref = tokenizer_ref(config_.tokenizer);
    config_.tokenizer = ref.spec;
    config_.tokenizer_fingerprint = ref.fingerprint;
  }
  auto tokenizer = make_recorded_tokenizer(config_.tokenizer, config_.tokenizer_fingerprint, "the run's tokenizer");
  if (tokenizer->vocab_size() > config_.model.vocab_size)
    throw Error("tokenizer " + tokenizer->name() + " has " + std::to_string(tokenizer->vocab_size()) +
                " tokens but the model's vocab_size is " + std::to_string(config_.model.vocab_size) +
                " — use a config with a vocabulary at least as large");
  config_.data_path = absolute_data_path(config_.data_path);
  data_ = load_token_data(config_.data_path, *tokenizer, config_.model.vocab_size, config_.val_fraction);
  fingerprint_ = fingerprint_tokens(data_);
  // An evaluation takes at most the validation split's whole batches: the configuration says what
  // it will do (the stored run claimed more batches than were ever evaluated).
  if (config_.eval_every > 0 && config_.eval_batches > 0 &&
      data_.val.size() >=
          size_t(config_.batch_size) * size_t(config_.seq_len) + 1) {  // (else check_can_evaluate says so)
    const int64_t available =
        int64_t(BatchLoader(&data_.val, config_.batch_size, config_.seq_len, 0, false).batches_per_epoch());
    if (available > 0 && config_.eval_batches > available) {
      data_warnings_.push_back("--eval-batches " + std::to_string(config_.eval_batches) + " is more than the " +
                               std::to_string(available) + " whole batches of " + std::to_string(config_.batch_size) +
                               "x" + std::to_string(config_.seq_len) + " in the validation split of " + data_.source +
                               ": each evaluation uses all " + std::to_string(available) + " (stored as such)");
      config_.eval_batches = int(available);
    }
  }
  const size_t need = size_t(config_.batch_size) * size_t(config_.seq_len) + 1;
  if (data_.train.size() < need)
    throw Error("training data " + data_.source + " has " + std::to_string(data_.train.size()) +
                " tokens, fewer than one batch needs (" + std::to_string(need) +
                "); use more data or a smaller --batch-size/--seq-len");
  model_ = std::make_unique<Llama>(config_.model, config_.batch_size, config_.seq_len);
  if (init_weights) model_->init_weights(config_.seed);
  opt_ = std::make_unique<AdamW<float>>(model_->num_params(), config_.adamw);
  train_loader_ = std::make_unique<BatchLoader>(&data_.train, config_.batch_size, config_.seq_len, config_.seed, true);
  inputs_.resize(need), targets_.resize(need);
  model_->set_recipe(Recipe::named(config_.recipe));
  std::vector<LinearPrecision> per_layer;
  resolve_and_store_plan(config_.plan, &per_layer);
  model_->set_precisions(per_layer);
}

void Trainer::resolve_and_store_plan(const Plan& plan, std::vector<LinearPrecision>* out) {
  const ModelDims dims = config_.model.dims();
  std::vector<std::string> warnings;
  if (plan.layers.empty()) {
    *out = std::vector<LinearPrecision>(size_t(kLayersPerBlock * dims.num_layers),
                                        LinearPrecision::uniform(parse_precision(config_.precision)));
  } else {
    *out = resolve_plan(plan, dims, &warnings);
  }
  plan_warnings_ = warnings;
}

void Trainer::set_plan(const Plan& plan) {
  std::vector<LinearPrecision> check;
  resolve_and_store_plan(plan, &check);  // validate now, in the caller's thread
  std::lock_guard<std::mutex> lock(plan_mutex_);
  pending_plan_ = plan;
}

Plan Trainer::next_plan() const {
  std::lock_guard<std::mutex> lock(plan_mutex_);
  return pending_plan_ ? *pending_plan_ : config_.plan;
}

void Trainer::apply_pending_plan() {
  std::optional<Plan> plan;
  {
    std::lock_guard<std::mutex> lock(plan_mutex_);
    plan.swap(pending_plan_);
  }
  if (!plan) return;
  std::vector<LinearPrecision> per_layer;
  resolve_and_store_plan(*plan, &per_layer);
  model_->set_precisions(per_layer);
  config_.plan = *plan;
}

void Trainer::set_paused(bool paused) {
  paused_.store(paused);
  resume_cv_.notify_all();
}

StepMetrics Trainer::step() {
  apply_pending_plan();
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t step_no = step_ + 1;
  const std::string where = "step " + std::to_string(step_no) + ": ";
  Llama& m = *model_;
  m.zero_grads();
  m.set_quant_key(rounding_seed(), uint64_t(step_));
  double loss_sum = 0;
  // A failed step leaves the trainer as it was before it (weights, moments and data position),
  // so the state can still be saved as the last good one.
  const DataPosition start = train_loader_->position();
  try {
    for (int a = 0; a < config_.grad_accum; ++a) {
      if (a > 0 && interrupt_ && interrupt_()) {
        train_loader_->seek(start);
        m.zero_grads();
        throw StepInterrupted();
      }
      train_loader_->next(inputs_.data(), targets_.data());
      const double loss = m.forward(inputs_.data(), targets_.data());
      if (!std::isfinite(loss)) {
        std::string culprit = m.first_nonfinite_param(/*values=*/true);
        culprit = culprit.empty() ? "first non-finite tensor: " + m.first_nonfinite_activation()
                                  : "non-finite weight: " + culprit;
        throw Error(where + "the training loss is " + (std::isnan(loss) ? "NaN" : "infinite") + " (" + culprit +
                    "). Training stopped before the update; the last saved checkpoint, if any, is kept. "
                    "Try a lower learning rate or a higher precision for that layer.");
      }
      m.backward(1.0 / config_.grad_accum);
      loss_sum += loss;
    }
  } catch (const Error& e) {
    train_loader_->seek(start);
    const std::string msg = e.what();
    if (msg.rfind("step ", 0) == 0) throw;
    throw Error(where + msg + " (training stopped before the update; the last saved checkpoint, if any, is kept)");
  }
  const double gnorm = clip_grad_global_norm(m.grad_data(), m.num_params(), config_.grad_clip);
  if (!std::isfinite(gnorm)) {
    train_loader_->seek(start);
    throw Error(where + "the gradient of " + m.first_nonfinite_param(/*values=*/false) +
                " is not finite. Training stopped before the update; the last saved checkpoint, if any, is kept.");
  }
  const double lr = config_.schedule.at(step_);
  opt_->step(m.param_data(), m.grad_data(), m.param_tensors(), lr);
  step_ = step_no;
  const int64_t tokens = int64_t(config_.batch_size) * config_.seq_len * config_.grad_accum;
  tokens_seen_ += tokens;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  StepMetrics r;
  r.step = step_;
  r.total_steps = config_.steps;
  r.train_loss = loss_sum / config_.grad_accum;
  r.lr = lr;
  r.grad_norm = gnorm;
  r.step_seconds = secs;
  r.tokens_per_s = secs > 0 ? double(tokens) / secs : 0;
  r.fp4_fraction = fp4_flop_fraction(m.precisions(), config_.model.dims());
  r.tokens_seen = tokens_seen_;
  if (config_.eval_every > 0 && (step_ % config_.eval_every == 0 || step_ == config_.steps))
    r.val_loss = evaluate(config_.eval_batches);
  return r;
}

bool Trainer::run(int64_t save_every, const std::string& out_dir) {
  if (step_ < config_.steps) check_can_evaluate();
  while (step_ < config_.steps) {
    {
      std::unique_lock<std::mutex> lock(pause_mutex_);
      resume_cv_.wait(lock, [&] { return !paused_.load() || stop_.load(); });
    }
    if (stop_.load()) break;
    const StepMetrics m = step();
    const bool go_on = callback_ ? callback_(m) : true;
    if (save_every > 0 && !out_dir.empty() && step_ % save_every == 0) save_checkpoint(out_dir);
    if (!go_on) break;
  }
  return step_ >= config_.steps;
}

void Trainer::check_can_evaluate() const {
  if (config_.eval_every <= 0) return;
  if (config_.eval_batches <= 0)
    throw Error("--eval-every " + std::to_string(config_.eval_every) +
                " asks for a validation loss but --eval-batches is " + std::to_string(config_.eval_batches) +
                "; give --eval-batches ≥ 1, or --eval-every 0 to train without evaluating");
  const size_t need = size_t(config_.batch_size) * size_t(config_.seq_len) + 1;
  if (data_.val.size() < need)
    throw Error("validation stream of " + data_.source + " has " + std::to_string(data_.val.size()) +
                " tokens, fewer than one batch of " + std::to_string(config_.batch_size) + "x" +
                std::to_string(config_.seq_len) + " needs (" + std::to_string(need) +
                "); use more data or a smaller --batch-size/--seq-len, or --eval-every 0 to train without "
                "evaluating");
}

double Trainer::evaluate(int batches) {
  if (batches <= 0) throw Error("an evaluation needs at least one batch (got " + std::to_string(batches) + ")");
  BatchLoader val(&data_.val, config_.batch_size, config_.seq_len, 0, /*shuffle=*/false);
  const int64_t n = std::min<int64_t>(batches, int64_t(val.batches_per_epoch()));
  if (n <= 0)
    throw Error("validation stream of " + data_.source + " has " + std::to_string(data_.val.size()) +
                " tokens, fewer than one batch of " + std::to_string(config_.batch_size) + "x" +
                std::to_string(config_.seq_len) + "; use more data or a smaller batch");
  std::vector<int32_t> in(inputs_.size()), tgt(targets_.size());
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) {
    val.next(in.data(), tgt.data());
    sum += model_->forward(in.data(), tgt.data());
  }
  return sum / double(n);
}

nlohmann::json Trainer::trainer_state() const {
  const DataPosition pos = train_loader_->position();
  TrainConfig cfg = config_;
  return nlohmann::json{{"format", "snip-trainer-state/1"},
                        {"step", step_},
                        {"tokens_seen", tokens_seen_},
                        {"data",
                         {{"source", data_.source},
                          {"path", config_.data_path},
                          {"fingerprint", {{"tokens", fingerprint_.tokens}, {"fnv1a64", fingerprint_.hex()}}},
                          {"epoch", pos.epoch},
                          {"batch_in_epoch", pos.batch_in_epoch},
                          {"seed", pos.seed}}},
                        // Stochastic rounding is counter-based: its state is (seed, step).
                        {"rng", {{"seed", config_.seed}, {"step", step_}}},
                        {"adamw_t", opt_->t()},
                        {"recipe", config_.recipe},
                        {"plan", nlohmann::json::parse(plan_to_json(config_.plan))},
                        {"config", train_config_to_json(cfg)},
                        {"extra", extra_}};
}

void Trainer::save_checkpoint(const std::string& dir) const {
  write_checkpoint(dir, *model_, *opt_, trainer_state());
}

namespace {

// The corpus fingerprint a checkpoint stored, if any (older checkpoints have none).
std::optional<Trainer::CorpusFingerprint> stored_fingerprint(const nlohmann::json& data, const std::string& source) {
  if (!data.is_object() || !data.contains("fingerprint")) return std::nullopt;
  try {
    const nlohmann::json& f = data.at("fingerprint");
    Trainer::CorpusFingerprint fp;
    fp.tokens = f.at("tokens").get<uint64_t>();
    fp.hash = std::stoull(f.at("fnv1a64").get<std::string>(), nullptr, 16);
    return fp;
  } catch (const std::exception& e) {
    throw Error(source + ": malformed corpus fingerprint (" + e.what() + ")");
  }
}

}  // namespace

std::string check_checkpoint_corpus(const nlohmann::json& state_data, const TokenData& data, const std::string& dir) {
  const std::optional<Trainer::CorpusFingerprint> saved = stored_fingerprint(state_data, dir + "/trainer_state.json");
  if (!saved)
    return dir + " was saved without a corpus fingerprint (by an older snip): whether " + data.source +
           " is still the corpus the run trained on cannot be checked";
  const Trainer::CorpusFingerprint now = fingerprint_tokens(data);
  if (saved->tokens != now.tokens || saved->hash != now.hash)
    throw Error("the corpus " + data.source + " is not the one " + dir +
                " was trained on: the checkpoint's corpus is " + saved->str() + ", this one is " + now.str() +
                " (edited or replaced since?) — restore the original corpus (or pass --data with it), or start a new "
                "run on this one");
  return "";
}

namespace {

// Where a resumed run reads its corpus: `override_path`, else the absolute path the checkpoint
// stored, else (older checkpoints) the configured path as it was given.
std::string resume_data_path(const nlohmann::json& data, const TrainConfig& cfg, const std::string& override_path) {
  if (!override_path.empty()) return override_path;
  if (data.is_object() && data.contains("path") && data["path"].is_string()) return data["path"].get<std::string>();
  return cfg.data_path;
}

}  // namespace

std::unique_ptr<Trainer> Trainer::resume(const std::string& dir, int64_t total_steps, const std::string& data_path,
                                         const nlohmann::json* given_state) {
  const nlohmann::json state = given_state ? *given_state : read_run_state(dir);
  const ModelConfig model_cfg = read_checkpoint_config(dir, &state);
  const std::string source = dir + "/trainer_state.json";
  TrainConfig cfg = train_config_from_json(state["config"], source);
  if (!(cfg.model == model_cfg))
    throw Error(dir +
                ": config.json differs from the model config in trainer_state.json — the checkpoint is inconsistent");
  if (total_steps > 0) cfg.steps = total_steps, cfg.schedule.total = total_steps;
  const std::optional<CorpusFingerprint> saved = stored_fingerprint(state["data"], source);
  cfg.data_path = resume_data_path(state["data"], cfg, data_path);
  if (!cfg.data_path.empty() && !std::filesystem::exists(cfg.data_path))
    throw Error("the corpus of " + dir + " (" + cfg.data_path + ") does not exist — was it moved or deleted? " +
                "Put it back, or pass --data with its new location" +
                (saved ? " (it must be the same corpus: " + saved->str() + ")" : std::string()));
  std::unique_ptr<Trainer> t(new Trainer(cfg, /*init_weights=*/false));
  if (std::string warning = check_checkpoint_corpus(state["data"], t->data_, dir); !warning.empty())
    t->resume_warnings_.push_back(std::move(warning));
  if (state.contains("extra") && state["extra"].is_object()) t->extra_ = state["extra"];
  t->resumed_state_ = state;
  read_checkpoint_model(dir, *t->model_);
  read_checkpoint_optimizer(dir, *t->model_, *t->opt_);
  try {
    t->step_ = json_integer<int64_t>(state.at("step"), source + ": step", 0);
    t->tokens_seen_ = json_integer<int64_t>(state.at("tokens_seen"), source + ": tokens_seen", 0);
    DataPosition pos;
    pos.epoch = json_integer<uint64_t>(state.at("data").at("epoch"), source + ": data.epoch");
    pos.batch_in_epoch =
        json_integer<uint64_t>(state.at("data").at("batch_in_epoch"), source + ": data.batch_in_epoch");
    pos.seed = json_integer<uint64_t>(state.at("data").at("seed"), source + ": data.seed");
    t->train_loader_->seek(pos);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": malformed step/data position (" + e.what() + ")");
  }
  return t;
}

}  // namespace snip
