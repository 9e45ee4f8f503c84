// Tokenizers: byte-level (vocab 256, token = byte) and SentencePiece models, plus training a
// SentencePiece model on a corpus. Both map any byte string to ids and back without loss.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <unordered_map>

#include "snip/atomic_file.h"
#include "snip/dataset.h"
#include "snip/error.h"

namespace snip {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
    return ids;
  }
  std::string decode(const std::vector<int32_t>& tokens) const override {
    std::string text(tokens.size(), '\0');
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] < 0 || tokens[i] > 255)
        throw Error("byte tokenizer: cannot decode token id " + std::to_string(tokens[i]) + " at position " +
                    std::to_string(i) + " (byte ids are 0..255; were these tokens made by another tokenizer?)");
      text[i] = static_cast<char>(tokens[i]);
    }
    return text;
  }
  int vocab_size() const override { return 256; }
  std::string name() const override { return "byte"; }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const std::string& path) : path_(path) {
    if (!std::filesystem::is_regular_file(path))
      throw Error("tokenizer model " + path + " does not exist; pass 'byte' or a SentencePiece .model file " +
                  "(train one with `snip tokenizer train`)");
    const auto status = sp_.Load(path);
    if (!status.ok())
      throw Error("tokenizer model " + path + " cannot be loaded as a SentencePiece model: " + status.ToString());
    newline_ids_ = encode_whole("\n");
    const std::string probe = "In the  beginning\n\nGod, 1611:\n said";
    std::vector<int32_t> joined;
    for (const char* part : {"In the  beginning", "\n", "\n", "God, 1611:", "\n", " said"}) {
      const auto ids = encode_whole(part);
      joined.insert(joined.end(), ids.begin(), ids.end());
    }
    per_line_ = joined == encode_whole(probe) && decode(joined) == probe;
  }
  // Encoding a multi-megabyte text as one SentencePiece "sentence" is ~4x slower than line by
  // line. For models trained by train_sentencepiece (identity normaliser, no dummy prefix, no
  // piece containing a newline) both give the same ids; other models (e.g. NFKC, dummy prefix)
  // may not, so the constructor probes and falls back to whole-text encoding.
  std::vector<int32_t> encode(const std::string& text) const override {
    if (!per_line_) return encode_whole(text);
    std::vector<int32_t> out;
    out.reserve(text.size() / 2);
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      const bool has_newline = end != std::string::npos;
      if (!has_newline) end = text.size();
      if (end > pos) {
        const auto ids = encode_whole(text.substr(pos, end - pos));
        out.insert(out.end(), ids.begin(), ids.end());
      }
      if (has_newline) out.insert(out.end(), newline_ids_.begin(), newline_ids_.end());
      pos = end + 1;
    }
    return out;
  }
  std::string decode(const std::vector<int32_t>& tokens) const override {
    const int vocab = vocab_size();
    for (size_t i = 0; i < tokens.size(); ++i)
      if (tokens[i] < 0 || tokens[i] >= vocab)
        throw Error("tokenizer " + path_ + ": cannot decode token id " + std::to_string(tokens[i]) + " at position " +
                    std::to_string(i) + " (vocab size " + std::to_string(vocab) + ")");
    std::string text;
    const auto status = sp_.Decode(std::vector<int>(tokens.begin(), tokens.end()), &text);
    if (!status.ok()) throw Error("tokenizer " + path_ + ": decoding failed: " + status.ToString());
    return text;
  }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  std::string name() const override { return "sentencepiece:" + path_; }

 private:
  std::vector<int32_t> encode_whole(const std::string& text) const {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) throw Error("tokenizer " + path_ + ": encoding failed: " + status.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
  bool per_line_ = false;            // encode() may split at newlines (see encode)
  std::vector<int32_t> newline_ids_;  // ids of "\n" alone
};

// Feeds the corpus to the trainer one line at a time (SentencePiece trains on "sentences").
class LineIterator final : public sentencepiece::SentenceIterator {
 public:
  explicit LineIterator(const std::string& text) : text_(text) { Next(); }
  bool done() const override { return done_; }
  void Next() override {
    // Skip empty lines: they carry nothing to learn and SentencePiece would count them.
    while (pos_ < text_.size()) {
      size_t end = text_.find('\n', pos_);
      if (end == std::string::npos) end = text_.size();
      line_.assign(text_, pos_, end - pos_);
      pos_ = end + 1;
      if (!line_.empty()) return;
    }
    done_ = true;
  }
  const std::string& value() const override { return line_; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::string& text_;
  size_t pos_ = 0;
  std::string line_;
  bool done_ = false;
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_path) {
  return std::make_unique<SentencePieceTokenizer>(model_path);
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec.empty() || spec == "byte") return make_byte_tokenizer();
  return make_sentencepiece_tokenizer(spec);
}

void train_sentencepiece(const std::string& text_path, int vocab_size, const std::string& out_prefix,
                         const std::string& model_type) {
  // 256 byte-fallback pieces + <unk>, <s>, </s> + some merges; 65536 keeps ids within llm.c's uint16.
  if (vocab_size < 300 || vocab_size > 65536)
    throw Error("tokenizer vocab size " + std::to_string(vocab_size) +
                " is out of range: use 300..65536 (256 byte pieces are always included; token files store uint16 ids)");
  if (model_type != "bpe" && model_type != "unigram")
    throw Error("tokenizer model type '" + model_type + "' is unknown: use bpe or unigram");
  if (out_prefix.empty()) throw Error("tokenizer output prefix is empty: pass --out PREFIX (writes PREFIX.model)");
  const std::string text = read_text_corpus(text_path);

  const std::unordered_map<std::string, std::string> args = {
      {"model_type", model_type},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},             // every byte is representable: no <unk> in practice
      {"normalization_rule_name", "identity"},  // keep the text as is (no NFKC, no case folding)
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},  // training lines and the encoded stream start words the same way
      {"split_digits", "true"},
      {"character_coverage", "1.0"},
      {"input_sentence_size", "2000000"},
      {"shuffle_input_sentence", "true"},
      {"max_sentence_length", "16384"},
      {"num_threads", "2"},
      {"minloglevel", "1"},
      // No model_prefix: the model comes back in memory and is written atomically below.
  };
  LineIterator lines(text);
  std::string model;
  const auto status = sentencepiece::SentencePieceTrainer::Train(args, &lines, &model);
  if (!status.ok())
    throw Error("training the SentencePiece tokenizer on " + (text_path.empty() ? "the bundled corpus" : text_path) +
                " failed: " + status.ToString() + " (a smaller --vocab-size often helps on small corpora)");
  write_file_atomic(out_prefix + ".model", model);

  // The .vocab file lists "piece<TAB>score" per id, as spm_train writes it (for people, not for us).
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok()) throw Error("trained SentencePiece model cannot be reloaded");
  std::string vocab;
  for (int i = 0; i < sp.GetPieceSize(); ++i) vocab += sp.IdToPiece(i) + "\t" + std::to_string(sp.GetScore(i)) + "\n";
  write_file_atomic(out_prefix + ".vocab", vocab);
}

}  // namespace snip
