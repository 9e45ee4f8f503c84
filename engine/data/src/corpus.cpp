// Corpora: reading text (.txt, .txt.gz, folders), llm.c token files, the bundled corpus, and
// load_token_data which turns any of them into validated train/validation token streams.
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "snip/atomic_file.h"
#include "snip/dataset.h"
#include "snip/error.h"

namespace snip {

namespace {

namespace fs = std::filesystem;

// llm.c token file header: 256 int32 = 1024 bytes; [0] magic, [1] version, [2] token count.
constexpr int32_t kTokenMagic = 20240520;
constexpr size_t kTokenHeaderInts = 256;
constexpr size_t kTokenHeaderBytes = kTokenHeaderInts * sizeof(int32_t);

const char* const kDataHint = "point --data at a .txt/.txt.gz file, a folder of them, or an llm.c .bin token file";

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_token_file_name(const std::string& name) {
  return ends_with(name, ".bin");
}
bool is_text_file_name(const std::string& name) {
  return ends_with(name, ".txt") || ends_with(name, ".txt.gz") || ends_with(name, ".text");
}

// The most text a corpus may hold (after decompression): it is read whole into memory and
// tokenized there (4 bytes a token beside it), so a larger one is refused before it is read.
constexpr uint64_t kMaxCorpusTextBytes = uint64_t(1) << 30;
constexpr uint64_t kMaxTokenFileBytes = kTokenHeaderBytes + (uint64_t(1) << 30);
const char* const kTooLargeHint = "; train on a part of it (e.g. `head -c 1G corpus.txt > part.txt`)";

// Decompresses gzip bytes (all members, as zcat does), to at most `max_bytes` of text. A
// truncated or corrupt stream is an error.
std::string gunzip(const std::string& raw, const std::string& path, uint64_t max_bytes) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 16) != Z_OK) throw Error(path + ": cannot start zlib");
  std::string out;
  std::vector<char> buf(1 << 20);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = uInt(std::min<size_t>(raw.size(), UINT32_MAX));
  size_t fed = z.avail_in;
  int rc = Z_OK;
  try {
    for (;;) {
      z.next_out = reinterpret_cast<Bytef*>(buf.data());
      z.avail_out = uInt(buf.size());
      rc = inflate(&z, Z_NO_FLUSH);
      if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
        throw Error(path + ": corrupt gzip data (" + (z.msg ? z.msg : "zlib error " + std::to_string(rc)) +
                    "); re-download or re-compress it");
      const size_t n = buf.size() - z.avail_out;
      if (out.size() + n > max_bytes)
        throw Error(path + ": the corpus decompresses to more than the " + std::to_string(max_bytes >> 30) +
                    " GiB of text snip reads into memory" + kTooLargeHint);
      if (out.size() + n > out.capacity())  // grown by doubling, but never past the limit
        out.reserve(size_t(std::min<uint64_t>(max_bytes, std::max<uint64_t>(2 * out.capacity(), out.size() + n))));
      out.append(buf.data(), n);
      stop_if_requested("decompressing the corpus " + path);
      if (z.avail_in == 0 && fed < raw.size()) {
        z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()) + fed);
        z.avail_in = uInt(std::min<size_t>(raw.size() - fed, UINT32_MAX));
        fed += z.avail_in;
      }
      if (rc == Z_STREAM_END) {
        if (z.avail_in == 0 && fed == raw.size()) break;
        inflateReset(&z);  // the next gzip member
      } else if (rc == Z_BUF_ERROR && z.avail_in == 0 && n == 0) {
        throw Error(path +
                    ": gzip stream is truncated or corrupt (it ends inside a member); re-download or "
                    "re-compress it");
      }
    }
  } catch (...) {
    inflateEnd(&z);
    throw;
  }
  inflateEnd(&z);
  return out;
}

// One text file; gzip is recognised by its magic bytes 1f 8b, whatever the name says. The file
// is read once (a pipe gives its bytes once), at most `max_bytes` of it.
std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  std::string raw = read_file(path, max_bytes, "the corpus", kTooLargeHint);
  if (raw.size() >= 2 && static_cast<unsigned char>(raw[0]) == 0x1f && static_cast<unsigned char>(raw[1]) == 0x8b)
    return gunzip(raw, path, max_bytes);
  return raw;
}

// Regular files in `dir` matching `keep`, sorted by file name (a stable, documented order).
std::vector<std::string> list_files(const std::string& dir, bool (*keep)(const std::string&)) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || !entry.is_regular_file()) continue;
    if (keep(name)) out.push_back(entry.path().string());
  }
  if (ec) throw Error("cannot list folder " + dir + ": " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::string resolve(const std::string& path) {
  return path.empty() ? bundled_corpus_path() : path;
}

std::vector<int32_t> tokenize_checked(const std::string& text, const std::string& source, const Tokenizer& tokenizer,
                                      int vocab_size) {
  std::vector<int32_t> tokens = tokenizer.encode(text);
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab_size)
      throw Error(source + ": tokenizer " + tokenizer.name() + " produced id " + std::to_string(tokens[i]) +
                  " at position " + std::to_string(i) + ", outside the model's vocab_size " +
                  std::to_string(vocab_size));
  return tokens;
}

}  // namespace

std::string bundled_corpus_path() {
  // An installed copy (`cmake --install`) reads the corpus installed beside it,
  // <prefix>/share/snip-workbench/corpus/, so it works once the source tree is gone; a build
  // tree reads the source's resources/.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = exe.parent_path().parent_path() / "share/snip-workbench/corpus/kjv.txt.gz";
    if (fs::exists(installed, ec)) return installed.string();
  }
  return std::string(SNIP_RESOURCE_DIR) + "/corpus/kjv.txt.gz";
}

std::string read_text_corpus(const std::string& path_in) {
  const std::string path = resolve(path_in);
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("corpus " + path + " does not exist; " + kDataHint);
  std::string text;
  if (fs::is_directory(path, ec)) {
    const auto files = list_files(path, is_text_file_name);
    if (files.empty()) throw Error("corpus folder " + path + " has no .txt or .txt.gz files; " + kDataHint);
    uint64_t total = 0;  // refused by the files' sizes before any is read
    for (const auto& f : files) total += uint64_t(fs::file_size(f, ec));
    if (total > kMaxCorpusTextBytes)
      throw Error("corpus folder " + path + " holds " + std::to_string(total) + " bytes, more than the " +
                  std::to_string(kMaxCorpusTextBytes >> 30) + " GiB of text snip reads into memory" + kTooLargeHint);
    for (const auto& f : files) {
      stop_if_requested("reading the corpus " + path);
      if (!text.empty() && text.back() != '\n') text += '\n';
      text += read_text_file(f, kMaxCorpusTextBytes - std::min<uint64_t>(text.size(), kMaxCorpusTextBytes));
    }
  } else {
    text = read_text_file(path, kMaxCorpusTextBytes);
  }
  if (text.empty()) throw Error("corpus " + path + " is empty (0 bytes of text); " + kDataHint);
  return text;
}

std::vector<int32_t> read_token_file(const std::string& path, int vocab_size) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(path + " is a folder, not an llm.c token file");
  const std::string bytes =
      read_file(path, kMaxTokenFileBytes, "the token file", "; use a shard of it (llm.c writes shards of 100M tokens)");
  const std::string hint = " — is it an llm.c token file? (write one with `snip tokenizer encode`)";
  if (bytes.size() < kTokenHeaderBytes)
    throw Error(path + ": truncated header: file is " + std::to_string(bytes.size()) +
                " bytes, the llm.c header alone is " + std::to_string(kTokenHeaderBytes) + hint);
  int32_t header[kTokenHeaderInts];
  std::memcpy(header, bytes.data(), kTokenHeaderBytes);
  if (header[0] != kTokenMagic)
    throw Error(path + ": bad magic " + std::to_string(header[0]) + " (expected " + std::to_string(kTokenMagic) + ")" +
                hint);
  const int32_t version = header[1];
  if (version != 1 && version != 2)
    throw Error(path + ": unsupported token file version " + std::to_string(version) +
                " (1 = uint16 tokens, 2 = uint32 tokens)" + hint);
  if (header[2] < 0) throw Error(path + ": negative token count " + std::to_string(header[2]) + hint);
  const size_t count = size_t(uint32_t(header[2]));
  const size_t width = version == 1 ? 2 : 4;
  const size_t payload = bytes.size() - kTokenHeaderBytes;
  if (payload != count * width)
    throw Error(path + ": header says " + std::to_string(count) + " tokens (" + std::to_string(count * width) +
                " bytes) but " + std::to_string(payload) +
                " bytes follow the header — the file is truncated or corrupt");
  if (count == 0) throw Error(path + ": token file holds 0 tokens (empty corpus); " + kDataHint);
  std::vector<int32_t> tokens(count);
  const char* p = bytes.data() + kTokenHeaderBytes;
  int64_t max_id = -1;
  size_t max_at = 0;
  for (size_t i = 0; i < count; ++i) {
    int64_t id;
    if (width == 2) {
      uint16_t v;
      std::memcpy(&v, p + 2 * i, 2);
      id = v;
    } else {
      uint32_t v;
      std::memcpy(&v, p + 4 * i, 4);
      id = v;
    }
    if (id > max_id) max_id = id, max_at = i;
    tokens[i] = int32_t(id);
  }
  if (max_id >= vocab_size)
    throw Error(path + ": token id " + std::to_string(max_id) + " at position " + std::to_string(max_at) +
                " is >= vocab_size " + std::to_string(vocab_size) +
                " — the file was tokenized with a larger vocabulary; use a model with vocab_size >= " +
                std::to_string(max_id + 1) + " or re-tokenize the text");
  return tokens;
}

void write_token_file(const std::string& path, const std::vector<int32_t>& tokens) {
  if (tokens.size() > size_t(INT32_MAX))
    throw Error(path + ": " + std::to_string(tokens.size()) +
                " tokens exceed the llm.c header's int32 count; split the corpus");
  int32_t max_id = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0)
      throw Error(path + ": cannot write negative token id " + std::to_string(tokens[i]) + " at position " +
                  std::to_string(i));
    max_id = std::max(max_id, tokens[i]);
  }
  const int32_t version = max_id < 65536 ? 1 : 2;
  const size_t width = version == 1 ? 2 : 4;
  std::string bytes(kTokenHeaderBytes + tokens.size() * width, '\0');
  int32_t header[kTokenHeaderInts] = {};
  header[0] = kTokenMagic;
  header[1] = version;
  header[2] = int32_t(tokens.size());
  std::memcpy(bytes.data(), header, kTokenHeaderBytes);
  char* p = bytes.data() + kTokenHeaderBytes;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (width == 2) {
      const uint16_t v = uint16_t(tokens[i]);
      std::memcpy(p + 2 * i, &v, 2);
    } else {
      const uint32_t v = uint32_t(tokens[i]);
      std::memcpy(p + 4 * i, &v, 4);
    }
  }
  write_file_atomic(path, bytes.data(), bytes.size());
}

TokenData load_token_data(const std::string& path_in, const Tokenizer& tokenizer, int vocab_size, double val_fraction) {
  if (!(val_fraction >= 0.0 && val_fraction < 1.0))
    throw Error("validation fraction " + std::to_string(val_fraction) + " is out of range: use a value in [0, 1)");
  if (vocab_size <= 0) throw Error("vocab_size " + std::to_string(vocab_size) + " must be positive");
  const std::string path = resolve(path_in);
  TokenData data;
  data.source = path_in.empty() ? "bundled:kjv" : path_in;
  data.vocab_size = vocab_size;

  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error("data " + path + " does not exist; " + kDataHint);
  std::vector<int32_t> tokens;
  if (fs::is_directory(path, ec)) {
    // A folder of llm.c shards (*.bin) is concatenated in name order; otherwise it is text.
    const auto shards = list_files(path, is_token_file_name);
    const auto texts = list_files(path, is_text_file_name);
    if (!shards.empty() && !texts.empty())
      throw Error("data folder " + path + " mixes .bin token files and text files; keep one kind per folder");
    if (!shards.empty()) {
      for (const auto& f : shards) {
        auto part = read_token_file(f, vocab_size);
        tokens.insert(tokens.end(), part.begin(), part.end());
      }
    } else {
      if (tokenizer.vocab_size() > vocab_size)
        throw Error("tokenizer " + tokenizer.name() + " has " + std::to_string(tokenizer.vocab_size()) +
                    " tokens but the model's vocab_size is " + std::to_string(vocab_size) + "; make them match");
      tokens = tokenize_checked(read_text_corpus(path), path, tokenizer, vocab_size);
    }
  } else if (is_token_file_name(path)) {
    tokens = read_token_file(path, vocab_size);
  } else {
    if (tokenizer.vocab_size() > vocab_size)
      throw Error("tokenizer " + tokenizer.name() + " has " + std::to_string(tokenizer.vocab_size()) +
                  " tokens but the model's vocab_size is " + std::to_string(vocab_size) + "; make them match");
    tokens = tokenize_checked(read_text_corpus(path), path, tokenizer, vocab_size);
  }
  if (tokens.size() < 2)
    throw Error("corpus " + path + " has " + std::to_string(tokens.size()) +
                " token(s); at least 2 are needed for one input/target pair; " + kDataHint);

  // Validation is the tail of the stream: the last floor(N · val_fraction) tokens.
  const size_t n_val = size_t(double(tokens.size()) * val_fraction);
  const size_t n_train = tokens.size() - n_val;
  data.val.assign(tokens.begin() + int64_t(n_train), tokens.end());
  tokens.resize(n_train);
  data.train = std::move(tokens);
  return data;
}

}  // namespace snip
