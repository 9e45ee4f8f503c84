// Tokenizers: byte-level (vocab 256, token = byte) and SentencePiece models, plus training a
// SentencePiece model on a corpus. Both map any byte string to ids and back without loss.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string_view>
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
    // Byte pieces <0x00>..<0xFF> (byte_fallback); without them the fast, lossless path is off.
    bool has_bytes = true;
    for (int b = 0; b < 256; ++b) {
      char piece[8];
      std::snprintf(piece, sizeof piece, "<0x%02X>", b);
      byte_ids_[size_t(b)] = sp_.PieceToId(piece);
      has_bytes = has_bytes && sp_.IsByte(byte_ids_[size_t(b)]);
    }
    per_line_ =
        has_bytes && joined == encode_whole(probe) && decode_bytes(joined) == probe && sp_decode(joined) == probe;
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
    for (size_t line = 0; pos < text.size(); ++line) {
      if (line % 4096 == 0) stop_if_requested("tokenizing the corpus");
      size_t end = text.find('\n', pos);
      const bool has_newline = end != std::string::npos;
      if (!has_newline) end = text.size();
      if (end > pos) encode_line(std::string_view(text).substr(pos, end - pos), out);
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
    if (per_line_) return decode_bytes(tokens);
    std::string text;
    const auto status = sp_.Decode(std::vector<int>(tokens.begin(), tokens.end()), &text);
    if (!status.ok()) throw Error("tokenizer " + path_ + ": decoding failed: " + status.ToString());
    return text;
  }
  int vocab_size() const override { return sp_.GetPieceSize(); }
  std::string name() const override { return "sentencepiece:" + path_; }

 private:
  // SentencePiece replaces malformed UTF-8 with U+FFFD before encoding; to stay lossless,
  // bytes that are not part of a valid UTF-8 sequence go straight to their byte pieces.
  void encode_line(std::string_view line, std::vector<int32_t>& out) const {
    size_t run = 0, i = 0;
    auto flush = [&](size_t end) {
      if (end > run) {
        const auto ids = encode_whole(std::string(line.substr(run, end - run)));
        out.insert(out.end(), ids.begin(), ids.end());
      }
    };
    while (i < line.size()) {
      const size_t n = utf8_length(line, i);
      if (n > 0) {
        i += n;
        continue;
      }
      flush(i);
      out.push_back(byte_ids_[static_cast<unsigned char>(line[i])]);
      run = ++i;
    }
    flush(i);
  }

  // Length of the well-formed UTF-8 sequence at s[i] (RFC 3629: no overlongs, no surrogates,
  // nothing above U+10FFFF), or 0 when the byte there does not start one.
  static size_t utf8_length(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return k < s.size() ? static_cast<unsigned char>(s[k]) : 0u; };
    auto cont = [&](size_t k) { return (byte(k) & 0xC0u) == 0x80u; };
    const unsigned c = byte(i);
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
    if (c >= 0xE0 && c <= 0xEF) {
      const unsigned c1 = byte(i + 1);
      const bool ok1 = c == 0xE0 ? (c1 >= 0xA0 && c1 <= 0xBF) : c == 0xED ? (c1 >= 0x80 && c1 <= 0x9F) : cont(i + 1);
      return ok1 && cont(i + 2) ? 3 : 0;
    }
    if (c >= 0xF0 && c <= 0xF4) {
      const unsigned c1 = byte(i + 1);
      const bool ok1 = c == 0xF0 ? (c1 >= 0x90 && c1 <= 0xBF) : c == 0xF4 ? (c1 >= 0x80 && c1 <= 0x8F) : cont(i + 1);
      return ok1 && cont(i + 2) && cont(i + 3) ? 4 : 0;
    }
    return 0;
  }

  std::string sp_decode(const std::vector<int32_t>& tokens) const {
    std::string text;
    if (!sp_.Decode(std::vector<int>(tokens.begin(), tokens.end()), &text).ok()) return {};
    return text;
  }

  // Piece by piece, byte-exact: SentencePiece's own Decode turns byte pieces that do not form
  // valid UTF-8 into U+FFFD, which would break decode(encode(x)) == x for arbitrary bytes.
  // Valid for models like ours (identity normaliser, no dummy prefix): "▁" stands for ' ',
  // "<0xAB>" for the byte 0xAB, control pieces (<unk>, <s>, </s>) for nothing.
  std::string decode_bytes(const std::vector<int32_t>& tokens) const {
    static const std::string kSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
    std::string text;
    for (int32_t id : tokens) {
      if (sp_.IsControl(id) || sp_.IsUnknown(id)) continue;
      const std::string& piece = sp_.IdToPiece(id);
      if (sp_.IsByte(id)) {
        text += char(std::stoi(piece.substr(3, 2), nullptr, 16));
        continue;
      }
      for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, kSpace.size(), kSpace) == 0) {
          text += ' ';
          i += kSpace.size();
        } else {
          text += piece[i++];
        }
      }
    }
    return text;
  }

  std::vector<int32_t> encode_whole(const std::string& text) const {
    std::vector<int> ids;
    const auto status = sp_.Encode(text, &ids);
    if (!status.ok()) throw Error("tokenizer " + path_ + ": encoding failed: " + status.ToString());
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::string path_;
  sentencepiece::SentencePieceProcessor sp_;
  bool per_line_ = false;                // our kind of model: encode() splits at newlines, decode() is byte-exact
  std::vector<int32_t> newline_ids_;     // ids of "\n" alone
  std::array<int32_t, 256> byte_ids_{};  // id of the byte piece <0xAB> for each byte
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

std::unique_ptr<Tokenizer> make_byte_tokenizer() {
  return std::make_unique<ByteTokenizer>();
}

std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_path) {
  return std::make_unique<SentencePieceTokenizer>(model_path);
}

std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec) {
  if (spec.empty() || spec == "byte") return make_byte_tokenizer();
  // Accept Tokenizer::name() too, so a name saved in a checkpoint recreates its tokenizer.
  const std::string prefix = "sentencepiece:";
  if (spec.rfind(prefix, 0) == 0) return make_sentencepiece_tokenizer(spec.substr(prefix.size()));
  return make_sentencepiece_tokenizer(spec);
}

namespace {

std::string model_path_of(const std::string& spec) {
  const std::string prefix = "sentencepiece:";
  return spec.rfind(prefix, 0) == 0 ? spec.substr(prefix.size()) : spec;
}

std::string file_fingerprint(const std::string& path) {
  const std::string bytes = read_file(path);
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : bytes) h = (h ^ uint64_t(uint8_t(c))) * 0x100000001b3ull;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%zu bytes, fnv1a64 %016llx", bytes.size(), (unsigned long long)h);
  return buf;
}

}  // namespace

TokenizerRef tokenizer_ref(const std::string& spec) {
  if (spec.empty() || spec == "byte") return {"byte", ""};
  const std::string path = model_path_of(spec);
  std::error_code ec;
  const std::filesystem::path canonical = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  const std::string full = ec ? path : canonical.string();
  make_sentencepiece_tokenizer(path);  // the usual errors (missing, not a model) first
  return {full, file_fingerprint(full)};
}

std::unique_ptr<Tokenizer> make_recorded_tokenizer(const std::string& spec, const std::string& fingerprint,
                                                   const std::string& source) {
  auto tok = make_tokenizer(spec);
  if (!fingerprint.empty() && spec != "byte" && !spec.empty()) {
    const std::string now = file_fingerprint(model_path_of(spec));
    if (now != fingerprint)
      throw Error(source + ": the tokenizer model " + model_path_of(spec) +
                  " is not the one this run was trained with (it was " + fingerprint + ", it is now " + now +
                  "); put the original file back at that path");
  }
  return tok;
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
  checked_write_target(out_prefix + ".model");  // both refused (a directory, a device) before training
  checked_write_target(out_prefix + ".vocab");
  const std::string text = read_text_corpus(text_path);

  const std::unordered_map<std::string, std::string> args = {
      {"model_type", model_type},
      {"vocab_size", std::to_string(vocab_size)},
      {"byte_fallback", "true"},                // every byte is representable: no <unk> in practice
      {"normalization_rule_name", "identity"},  // keep the text as is (no NFKC, no case folding)
      {"remove_extra_whitespaces", "false"},
      {"add_dummy_prefix", "false"},  // training lines and the encoded stream start words the same way
      {"split_digits", "true"},
      {"character_coverage", "0.9995"},  // rarer characters are spelled with byte pieces
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
  if (!status.ok()) {
    const std::string why = status.ToString();
    const std::string hint = why.find("too high") != std::string::npos ? " (use a smaller --vocab-size or more text)"
                             : why.find("required_chars") != std::string::npos ? " (use a larger --vocab-size)"
                                                                               : "";
    throw Error("training the SentencePiece tokenizer on " + (text_path.empty() ? "the bundled corpus" : text_path) +
                " failed: " + why + hint);
  }
  write_file_atomic(out_prefix + ".model", model);

  // The .vocab file lists "piece<TAB>score" per id, as spm_train writes it (for people, not for us).
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.LoadFromSerializedProto(model).ok()) throw Error("trained SentencePiece model cannot be reloaded");
  std::string vocab;
  for (int i = 0; i < sp.GetPieceSize(); ++i) vocab += sp.IdToPiece(i) + "\t" + std::to_string(sp.GetScore(i)) + "\n";
  write_file_atomic(out_prefix + ".vocab", vocab);
}

}  // namespace snip
