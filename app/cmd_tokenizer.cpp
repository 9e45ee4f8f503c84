// `snip tokenizer`: train a SentencePiece BPE tokenizer on a corpus, and encode / decode text
// to and from llm.c token files, so data can be tokenized once and reused by `snip train --data`.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/atomic_file.h"
#include "snip/dataset.h"
#include "snip/error.h"

namespace {

struct TokenizerTrainOptions {
  std::string input;  // empty = bundled corpus
  int vocab_size = 4096;
  std::string out;
  std::string model_type = "bpe";
  bool json = false;
};

struct TokenizerEncodeOptions {
  std::string model = "byte";
  std::string input;  // empty = bundled corpus
  std::string out;
  bool json = false;
};

struct TokenizerDecodeOptions {
  std::string model = "byte";
  std::string input;
  std::string out;  // empty = stdout
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_tokenizer_train(const TokenizerTrainOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  snip::train_sentencepiece(o.input, o.vocab_size, o.out, o.model_type);
  const auto tok = snip::make_sentencepiece_tokenizer(o.out + ".model");
  const double secs = seconds_since(t0);
  const std::string input = o.input.empty() ? snip::bundled_corpus_path() : o.input;
  if (o.json) {
    nlohmann::json j = {{"model", o.out + ".model"},
                        {"vocab", o.out + ".vocab"},
                        {"vocab_size", tok->vocab_size()},
                        {"model_type", o.model_type},
                        {"input", input},
                        {"seconds", secs}};
    std::printf("%s\n", snip::cli::json_text(j).c_str());
  } else {
    std::printf("trained %s tokenizer (vocab %d) on %s in %.1f s: wrote %s.model and %s.vocab\n", o.model_type.c_str(),
                tok->vocab_size(), input.c_str(), secs, o.out.c_str(), o.out.c_str());
  }
}

void run_tokenizer_encode(const TokenizerEncodeOptions& o) {
  snip::checked_write_target(o.out);  // before reading and encoding the whole corpus
  const auto t0 = std::chrono::steady_clock::now();
  const auto tok = snip::make_tokenizer(o.model);
  const std::string text = snip::read_text_corpus(o.input);
  const std::vector<int32_t> tokens = tok->encode(text);
  snip::write_token_file(o.out, tokens);
  const double secs = seconds_since(t0);
  const std::string input = o.input.empty() ? snip::bundled_corpus_path() : o.input;
  if (o.json) {
    nlohmann::json j = {{"out", o.out},
                        {"tokens", tokens.size()},
                        {"bytes", text.size()},
                        {"tokenizer", tok->name()},
                        {"vocab_size", tok->vocab_size()},
                        {"input", input},
                        {"seconds", secs}};
    std::printf("%s\n", snip::cli::json_text(j).c_str());
  } else {
    std::printf("encoded %s (%zu bytes) with %s into %zu tokens (%.2f bytes/token) in %.2f s: wrote %s\n",
                input.c_str(), text.size(), tok->name().c_str(), tokens.size(),
                tokens.empty() ? 0.0 : double(text.size()) / double(tokens.size()), secs, o.out.c_str());
  }
}

void run_tokenizer_decode(const TokenizerDecodeOptions& o) {
  const auto tok = snip::make_tokenizer(o.model);
  const std::string text = tok->decode(snip::read_token_file(o.input, tok->vocab_size()));
  if (o.out.empty()) {
    std::fwrite(text.data(), 1, text.size(), stdout);
  } else {
    snip::write_file_atomic(o.out, text);
  }
}

void setup_tokenizer(CLI::App& app) {
  auto* cmd = app.add_subcommand("tokenizer", "Train a SentencePiece tokenizer; encode/decode llm.c token files");
  cmd->require_subcommand(1);

  auto train = std::make_shared<TokenizerTrainOptions>();
  auto* t = cmd->add_subcommand("train", "Train a SentencePiece tokenizer (byte fallback, lossless) on a corpus");
  t->add_option("--input", train->input, "Text corpus: .txt, .txt.gz or a folder of them (default: bundled corpus)");
  t->add_option("--vocab-size", train->vocab_size, "Vocabulary size, 300..65536 (256 byte pieces included)")
      ->capture_default_str();
  t->add_option("--out", train->out, "Output prefix: writes PREFIX.model and PREFIX.vocab")->required();
  t->add_option("--model-type", train->model_type, "bpe or unigram")->capture_default_str();
  t->add_flag("--json", train->json, "Print one JSON object");
  auto train_rules = std::make_shared<snip::cli::OptionRules>(t);
  train_rules->reads("--input", train->input).writes("--out", train->out);
  snip::cli::run_checked(t, train_rules, [train] { run_tokenizer_train(*train); });

  auto enc = std::make_shared<TokenizerEncodeOptions>();
  auto* e = cmd->add_subcommand("encode", "Tokenize a text corpus into an llm.c token file (.bin)");
  e->add_option("--model", enc->model, "'byte' or a SentencePiece .model file")->capture_default_str();
  e->add_option("--input", enc->input, "Text corpus: .txt, .txt.gz or a folder of them (default: bundled corpus)");
  e->add_option("--out", enc->out, "Output llm.c token file (.bin)")->required();
  e->add_flag("--json", enc->json, "Print one JSON object");
  auto enc_rules = std::make_shared<snip::cli::OptionRules>(e);
  enc_rules->reads("--model", enc->model).reads("--input", enc->input).writes("--out", enc->out);
  snip::cli::run_checked(e, enc_rules, [enc] { run_tokenizer_encode(*enc); });

  auto dec = std::make_shared<TokenizerDecodeOptions>();
  auto* d = cmd->add_subcommand("decode", "Turn an llm.c token file back into text");
  d->add_option("--model", dec->model, "'byte' or a SentencePiece .model file")->capture_default_str();
  d->add_option("--input", dec->input, "llm.c token file (.bin)")->required();
  d->add_option("--out", dec->out, "Output text file (default: standard output)");
  auto dec_rules = std::make_shared<snip::cli::OptionRules>(d);
  dec_rules->reads("--model", dec->model).reads("--input", dec->input).writes("--out", dec->out);
  snip::cli::run_checked(d, dec_rules, [dec] { run_tokenizer_decode(*dec); });
}

SNIP_REGISTER_COMMAND("tokenizer", setup_tokenizer);

}  // namespace
