// Training data: tokenizers, token streams from text / llm.c token files, the bundled corpus,
// and deterministic batching whose position is part of a checkpoint.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace snip {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  virtual std::string decode(const std::vector<int32_t>& tokens) const = 0;
  virtual int vocab_size() const = 0;
  virtual std::string name() const = 0;  // "byte" or "sentencepiece:<model path>"
};

// Byte-level tokenizer: vocab 256, token = byte value.
std::unique_ptr<Tokenizer> make_byte_tokenizer();
// SentencePiece model file (.model). Throws snip::Error when it cannot be loaded.
std::unique_ptr<Tokenizer> make_sentencepiece_tokenizer(const std::string& model_path);
// "byte" (or empty), a path to a .model file, or a Tokenizer::name() ("sentencepiece:<path>").
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

// A tokenizer as a run records it, so the run means the same tokenizer from any working
// directory: `spec` is "byte" or the model file's absolute, canonical path, and `fingerprint`
// its size and FNV-1a 64 hash ("" for byte).
struct TokenizerRef {
  std::string spec;
  std::string fingerprint;
};
TokenizerRef tokenizer_ref(const std::string& spec);
// The recorded tokenizer: loads `spec` and, when `fingerprint` is not empty (older runs have
// none), refuses a model file that is not the one the run was trained with, naming `source`.
std::unique_ptr<Tokenizer> make_recorded_tokenizer(const std::string& spec, const std::string& fingerprint,
                                                   const std::string& source);

// A tokenized corpus split into train and validation streams.
struct TokenData {
  std::vector<int32_t> train;
  std::vector<int32_t> val;
  std::string source;    // what was loaded (path or "bundled:kjv")
  int vocab_size = 256;  // vocabulary the tokens come from
};

// Loads `path`: an llm.c token file (*.bin: 1024-byte header of int32 {20240520, version,
// count, ...}, then uint16 tokens), a plain text file (.txt or .txt.gz), or a folder of text files.
// Empty path = the bundled corpus. Text is tokenized with `tokenizer`. The last `val_fraction`
// of the stream is validation. Token ids >= vocab_size, bad magic, truncated files and empty
// corpora are errors (snip::Error saying which file and what to do).
TokenData load_token_data(const std::string& path, const Tokenizer& tokenizer, int vocab_size,
                          double val_fraction = 0.05);

// Path of the bundled corpus: <prefix>/share/snip-workbench/corpus/ of an installed copy, else the
// source tree's resources/corpus/.
std::string bundled_corpus_path();

// Writes tokens as an llm.c token file (atomic): version 1 (uint16 tokens) when every id fits
// in 16 bits, else version 2 (uint32 tokens, llm.c's Llama-3 layout). Negative ids are an error.
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens);

// Reads an llm.c token file (version 1: uint16 tokens, version 2: uint32 tokens) and checks the
// magic, the version, the count against the file size, and every id < vocab_size.
std::vector<int32_t> read_token_file(const std::string& path, int vocab_size);

// The raw text of a .txt / .txt.gz file (gzip detected by its magic bytes) or of a folder of
// them (sorted by file name, joined with a newline where a file does not end in one).
// Empty path = the bundled corpus. Throws snip::Error when unreadable or empty.
std::string read_text_corpus(const std::string& path);

// Trains a SentencePiece model on the text of `text_path` (anything read_text_corpus reads) and
// writes `out_prefix`.model and `out_prefix`.vocab. Byte fallback is on and normalisation is
// the identity, so decode(encode(text)) == text for any input, newlines included.
// model_type: "bpe" (default) or "unigram". vocab_size in [300, 65536].
void train_sentencepiece(const std::string& text_path, int vocab_size, const std::string& out_prefix,
                         const std::string& model_type = "bpe");

// Where a loader is in its stream; saved in trainer_state.json.
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t batch_in_epoch = 0;
  uint64_t seed = 0;
};

// Deterministic batches of B rows × T tokens from a token stream. Training order: windows
// of T+1 tokens at offsets chosen by a seeded permutation per epoch (same seed => same order).
// Sequential mode (for eval, llm.c convention): batch i takes tokens [i·B·T, (i+1)·B·T + 1).
// Details: shuffle mode cuts the stream into W = (N-1)/T windows starting at k·T (each window
// holds T inputs plus the next token as the last target), serves B windows per batch and
// floor(W/B) batches per epoch; the epoch's order is a Fisher-Yates shuffle driven by
// splitmix64(seed, epoch), so it is the same on every platform and compiler. After the last
// batch of an epoch the loader moves to batch 0 of the next one (sequential mode wraps too).
// seek() adopts pos.seed, so a loader restored from a checkpoint replays that run's stream.
// `tokens` must outlive the loader. Streams shorter than B·T+1 tokens are a snip::Error.
class BatchLoader {
 public:
  BatchLoader(const std::vector<int32_t>* tokens, int B, int T, uint64_t seed, bool shuffle);
  // inputs (B,T) and targets (B,T) (targets = inputs shifted by one).
  void next(int32_t* inputs, int32_t* targets);
  DataPosition position() const;
  void seek(const DataPosition& pos);
  uint64_t batches_per_epoch() const;

 private:
  // Row-window starts of the current epoch, in the order they are served (shuffle mode).
  void build_epoch_order();

  const std::vector<int32_t>* tokens_;
  size_t B_, T_;
  uint64_t seed_;
  bool shuffle_;
  uint64_t windows_ = 0;  // windows of T+1 tokens at stride T (shuffle mode)
  uint64_t batches_ = 0;  // batches per epoch
  DataPosition pos_;
  std::optional<uint64_t> order_epoch_;  // epoch whose order_ is built (no sentinel: every epoch is valid)
  std::vector<uint64_t> order_;          // window indices in serving order
};

}  // namespace snip
