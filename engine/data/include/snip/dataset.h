// Training data: tokenizers, token streams from text / llm.c token files, the bundled corpus,
// and deterministic batching whose position is part of a checkpoint.
#pragma once
#include <cstdint>
#include <memory>
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
// "byte" or a path to a .model file.
std::unique_ptr<Tokenizer> make_tokenizer(const std::string& spec);

// A tokenized corpus split into train and validation streams.
struct TokenData {
  std::vector<int32_t> train;
  std::vector<int32_t> val;
  std::string source;     // what was loaded (path or "bundled:kjv")
  int vocab_size = 256;   // vocabulary the tokens come from
};

// Loads `path`: an llm.c token file (*.bin: 1024-byte header of int32 {20240520, version,
// count, ...}, then uint16 tokens), a plain text file (.txt or .txt.gz), or a folder of text files.
// Empty path = the bundled corpus. Text is tokenized with `tokenizer`. The last `val_fraction`
// of the stream is validation. Token ids >= vocab_size, bad magic, truncated files and empty
// corpora are errors (snip::Error saying which file and what to do).
TokenData load_token_data(const std::string& path, const Tokenizer& tokenizer, int vocab_size,
                          double val_fraction = 0.05);

// Path of the bundled corpus (resources/corpus/...).
std::string bundled_corpus_path();

// Writes tokens as an llm.c token file (atomic).
void write_token_file(const std::string& path, const std::vector<int32_t>& tokens);

// Where a loader is in its stream; saved in trainer_state.json.
struct DataPosition {
  uint64_t epoch = 0;
  uint64_t batch_in_epoch = 0;
  uint64_t seed = 0;
};

// Deterministic batches of B rows × T tokens from a token stream. Training order: windows
// of T+1 tokens at offsets chosen by a seeded permutation per epoch (same seed => same order).
// Sequential mode (for eval, llm.c convention): batch i takes tokens [i·B·T, (i+1)·B·T + 1).
class BatchLoader {
 public:
  BatchLoader(const std::vector<int32_t>* tokens, int B, int T, uint64_t seed, bool shuffle);
  // inputs (B,T) and targets (B,T) (targets = inputs shifted by one).
  void next(int32_t* inputs, int32_t* targets);
  DataPosition position() const;
  void seek(const DataPosition& pos);
  uint64_t batches_per_epoch() const;
};

}  // namespace snip
