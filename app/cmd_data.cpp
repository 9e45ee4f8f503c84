// `snip data`: inspect a training corpus the way the trainer will see it: token counts of the
// train/validation split, and the exact batches a seed produces.
#include <chrono>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/dataset.h"
#include "snip/defaults.h"
#include "snip/error.h"

namespace {

struct DataSource {
  std::string data;  // empty = bundled corpus
  std::string tokenizer = "byte";
  int vocab_size = 0;  // 0 = the tokenizer's
  double val_fraction = 0.05;
};

struct DataInfoOptions {
  DataSource src;
  bool json = false;
};

struct DataPeekOptions {
  DataSource src;
  int batch_size = snip::defaults::kBatchSize;  // the trainer's defaults: the batch `snip train` sees
  int seq_len = snip::defaults::kSeqLen;
  uint64_t seed = snip::defaults::kSeed;
  uint64_t batch = 0;
  bool val = false;
  bool json = false;
};

void add_source_options(CLI::App* cmd, DataSource& s) {
  cmd->add_option("--data", s.data,
                  "Corpus: .txt/.txt.gz, folder of them, or llm.c .bin token file(s) (default: bundled corpus)");
  cmd->add_option("--tokenizer", s.tokenizer, "'byte' or a SentencePiece .model file")->capture_default_str();
  cmd->add_option("--vocab-size", s.vocab_size, "Model vocabulary (default: the tokenizer's)");
  cmd->add_option("--val-fraction", s.val_fraction, "Tail fraction of the stream used for validation")
      ->capture_default_str();
}

std::shared_ptr<snip::cli::OptionRules> source_rules(CLI::App* cmd, const DataSource& s) {
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->at_least("--vocab-size", s.vocab_size, 1, "leave it out for the tokenizer's vocabulary")
      .between("--val-fraction", s.val_fraction, 0.0, 0.999, "the validation split is a tail fraction of the stream");
  return rules;
}

snip::TokenData load(const DataSource& s, const snip::Tokenizer& tok) {
  return snip::load_token_data(s.data, tok, s.vocab_size > 0 ? s.vocab_size : tok.vocab_size(), s.val_fraction);
}

void run_data_info(const DataInfoOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto tok = snip::make_tokenizer(o.src.tokenizer);
  const snip::TokenData d = load(o.src, *tok);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (o.json) {
    nlohmann::json j = {{"source", d.source},         {"tokenizer", tok->name()},
                        {"vocab_size", d.vocab_size}, {"train_tokens", d.train.size()},
                        {"val_tokens", d.val.size()}, {"seconds", secs}};
    std::printf("%s\n", snip::cli::json_text(j).c_str());
    return;
  }
  std::printf(
      "source      %s\ntokenizer   %s\nvocab size  %d\ntrain       %zu tokens\nvalidation  %zu tokens\n"
      "loaded in   %.3f s\n",
      d.source.c_str(), tok->name().c_str(), d.vocab_size, d.train.size(), d.val.size(), secs);
}

void run_data_peek(const DataPeekOptions& o) {
  const auto tok = snip::make_tokenizer(o.src.tokenizer);
  const snip::TokenData d = load(o.src, *tok);
  const auto& stream = o.val ? d.val : d.train;
  // Training batches are shuffled by the seed; validation is read sequentially (llm.c).
  snip::BatchLoader loader(&stream, o.batch_size, o.seq_len, o.seed, /*shuffle=*/!o.val);
  const uint64_t per_epoch = loader.batches_per_epoch();
  loader.seek({o.batch / per_epoch, o.batch % per_epoch, o.seed});
  std::vector<int32_t> inputs(size_t(o.batch_size) * o.seq_len), targets(inputs.size());
  loader.next(inputs.data(), targets.data());
  nlohmann::json rows = nlohmann::json::array();
  for (int b = 0; b < o.batch_size; ++b) {
    std::vector<int32_t> row(inputs.begin() + b * o.seq_len, inputs.begin() + (b + 1) * o.seq_len);
    rows.push_back({{"text", tok->decode(row)}, {"tokens", row}});
  }
  if (o.json) {
    nlohmann::json j = {{"batch", o.batch}, {"batches_per_epoch", per_epoch}, {"seed", o.seed}, {"rows", rows}};
    std::printf("%s\n", snip::cli::json_text(j).c_str());
    return;
  }
  std::printf("batch %llu (epoch %llu, %llu batches per epoch, seed %llu), %d rows of %d tokens:\n",
              (unsigned long long)o.batch, (unsigned long long)(o.batch / per_epoch), (unsigned long long)per_epoch,
              (unsigned long long)o.seed, o.batch_size, o.seq_len);
  for (int b = 0; b < o.batch_size; ++b) {
    std::string text = rows[size_t(b)]["text"].get<std::string>();
    for (char& c : text)
      if (c == '\n') c = ' ';
    std::printf("  [%d] %s\n", b, text.c_str());
  }
}

void setup_data(CLI::App& app) {
  auto* cmd = app.add_subcommand("data", "Inspect a training corpus: train/validation token counts and batches");
  cmd->require_subcommand(1);

  auto info = std::make_shared<DataInfoOptions>();
  auto* i = cmd->add_subcommand("info", "Load and tokenize a corpus; print its train/validation split");
  add_source_options(i, info->src);
  i->add_flag("--json", info->json, "Print one JSON object");
  snip::cli::run_checked(i, source_rules(i, info->src), [info] { run_data_info(*info); });

  auto peek = std::make_shared<DataPeekOptions>();
  auto* p = cmd->add_subcommand("peek", "Print one batch exactly as the trainer would see it for a seed");
  add_source_options(p, peek->src);
  p->add_option("--batch-size", peek->batch_size, "Rows per batch (B)")->capture_default_str();
  p->add_option("--seq-len", peek->seq_len, "Tokens per row (T)")->capture_default_str();
  p->add_option("--seed", peek->seed, "Data-order seed")->capture_default_str();
  p->add_option("--batch", peek->batch, "Global batch index (epochs wrap)")->capture_default_str();
  p->add_flag("--val", peek->val, "Read the validation stream sequentially (eval order)");
  p->add_flag("--json", peek->json, "Print one JSON object");
  auto peek_rules = source_rules(p, peek->src);
  peek_rules->at_least("--batch-size", peek->batch_size, 1).at_least("--seq-len", peek->seq_len, 1);
  peek_rules->add([r = peek_rules.get(), peek] {
    if (peek->val && r->given("--seed"))
      snip::cli::OptionRules::warn("--seed is ignored with --val (validation is read in order, never shuffled)");
  });
  snip::cli::run_checked(p, peek_rules, [peek] { run_data_peek(*peek); });
}

SNIP_REGISTER_COMMAND("data", setup_data);

}  // namespace
