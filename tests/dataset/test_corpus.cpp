// Corpus tests: llm.c token files (layout, validation), text files, gzip, folders, the
// train/validation split, and the bundled corpus.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <numeric>

#include "snip/atomic_file.h"
#include "snip/dataset.h"
#include "test_util.h"

namespace {

using snip_test::expect_error;

class CorpusTest : public snip_test::ScratchDirTest {
 protected:
  // A raw llm.c file: header ints {magic, version, count} then `payload` bytes.
  void write_raw_token_file(const std::string& name, int32_t magic, int32_t version, int32_t count,
                            const std::string& payload) {
    std::string bytes(1024, '\0');
    const int32_t h[3] = {magic, version, count};
    std::memcpy(bytes.data(), h, sizeof h);
    snip::write_file_atomic(path(name), bytes + payload);
  }
  void write_gzip(const std::string& name, const std::string& text) {
    gzFile gz = gzopen(path(name).c_str(), "wb");
    ASSERT_NE(gz, nullptr);
    ASSERT_EQ(gzwrite(gz, text.data(), unsigned(text.size())), int(text.size()));
    ASSERT_EQ(gzclose(gz), Z_OK);
  }
};

std::string u16(std::initializer_list<uint16_t> v) {
  std::string s;
  for (uint16_t x : v) s.append(reinterpret_cast<const char*>(&x), 2);
  return s;
}

TEST_F(CorpusTest, TokenFileHasLlmcLayoutAndRoundTrips) {
  const std::vector<int32_t> tokens = {0, 1, 255, 256, 65535, 7};
  snip::write_token_file(path("t.bin"), tokens);
  const std::string bytes = snip::read_file(path("t.bin"));
  ASSERT_EQ(bytes.size(), 1024 + 2 * tokens.size());
  int32_t h[256];
  std::memcpy(h, bytes.data(), 1024);
  EXPECT_EQ(h[0], 20240520);
  EXPECT_EQ(h[1], 1);
  EXPECT_EQ(h[2], 6);
  for (int i = 3; i < 256; ++i) EXPECT_EQ(h[i], 0);
  uint16_t t4;
  std::memcpy(&t4, bytes.data() + 1024 + 8, 2);
  EXPECT_EQ(t4, 65535);
  EXPECT_EQ(snip::read_token_file(path("t.bin"), 65536), tokens);
}

TEST_F(CorpusTest, TokenIdsAbove16BitsUseVersion2) {
  const std::vector<int32_t> tokens = {3, 70000, 128255};
  snip::write_token_file(path("t2.bin"), tokens);
  int32_t h[3];
  std::memcpy(h, snip::read_file(path("t2.bin")).data(), sizeof h);
  EXPECT_EQ(h[1], 2);
  EXPECT_EQ(snip::read_token_file(path("t2.bin"), 128256), tokens);
  expect_error([&] { snip::write_token_file(path("neg.bin"), {1, -5}); }, {"negative", "-5"});
  EXPECT_FALSE(std::filesystem::exists(path("neg.bin")));
}

TEST_F(CorpusTest, TokenFileErrors) {
  write_raw_token_file("magic.bin", 12345, 1, 2, u16({1, 2}));
  expect_error([&] { snip::read_token_file(path("magic.bin"), 256); }, {"magic.bin", "bad magic 12345", "20240520"});
  snip::write_file_atomic(path("short.bin"), std::string(100, '\0'));
  expect_error([&] { snip::read_token_file(path("short.bin"), 256); }, {"short.bin", "truncated header"});
  write_raw_token_file("count.bin", 20240520, 1, 5, u16({1, 2, 3}));
  expect_error([&] { snip::read_token_file(path("count.bin"), 256); }, {"count.bin", "5 tokens", "6 bytes"});
  write_raw_token_file("version.bin", 20240520, 7, 1, u16({1}));
  expect_error([&] { snip::read_token_file(path("version.bin"), 256); }, {"version 7"});
  write_raw_token_file("empty.bin", 20240520, 1, 0, "");
  expect_error([&] { snip::read_token_file(path("empty.bin"), 256); }, {"empty.bin", "0 tokens"});
  write_raw_token_file("vocab.bin", 20240520, 1, 4, u16({10, 300, 20, 299}));
  expect_error([&] { snip::read_token_file(path("vocab.bin"), 256); },
               {"vocab.bin", "token id 300 at position 1", ">= vocab_size 256", "vocab_size >= 301"});
  expect_error([&] { snip::read_token_file(dir_.string(), 256); }, {"is a folder"});
  // Every truncation of a valid file is caught (header or count check), never read past.
  snip::write_token_file(path("ok.bin"), {1, 2, 3, 4});
  const std::string ok = snip::read_file(path("ok.bin"));
  for (size_t len = 0; len < ok.size(); len += (len < 1024 ? 97 : 1)) {
    snip::write_file_atomic(path("cut.bin"), ok.substr(0, len));
    EXPECT_THROW(snip::read_token_file(path("cut.bin"), 256), snip::Error) << len;
  }
  // The same file is fine with a large enough vocabulary.
  EXPECT_EQ(snip::read_token_file(path("vocab.bin"), 301), (std::vector<int32_t>{10, 300, 20, 299}));
  // load_token_data goes through the same checks.
  auto byte = snip::make_byte_tokenizer();
  expect_error([&] { snip::load_token_data(path("vocab.bin"), *byte, 256); }, {"token id 300"});
  expect_error([&] { snip::load_token_data(path("magic.bin"), *byte, 256); }, {"bad magic"});
}

TEST_F(CorpusTest, TextGzipAndFoldersReadInNameOrder) {
  snip::write_file_atomic(path("plain.txt"), std::string("hello\nworld"));
  EXPECT_EQ(snip::read_text_corpus(path("plain.txt")), "hello\nworld");
  write_gzip("z.txt.gz", "compressed text\n");
  EXPECT_EQ(snip::read_text_corpus(path("z.txt.gz")), "compressed text\n");

  std::filesystem::create_directories(dir_ / "folder");
  snip::write_file_atomic(path("folder/b.txt"), std::string("second\n"));
  snip::write_file_atomic(path("folder/a.txt"), std::string("first"));  // no trailing newline: one is added
  snip::write_file_atomic(path("folder/notes.md"), std::string("ignored"));
  snip::write_file_atomic(path("folder/.hidden.txt"), std::string("ignored"));
  gzFile gz = gzopen(path("folder/c.txt.gz").c_str(), "wb");
  gzputs(gz, "third");
  gzclose(gz);
  EXPECT_EQ(snip::read_text_corpus(path("folder")), "first\nsecond\nthird");
}

TEST_F(CorpusTest, FolderOfTokenShardsIsConcatenated) {
  std::filesystem::create_directories(dir_ / "shards");
  snip::write_token_file(path("shards/s_001.bin"), {4, 5, 6});
  snip::write_token_file(path("shards/s_000.bin"), {1, 2, 3});
  auto byte = snip::make_byte_tokenizer();
  const auto d = snip::load_token_data(path("shards"), *byte, 256, 0.0);
  EXPECT_EQ(d.train, (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(d.val.empty());
  snip::write_file_atomic(path("shards/x.txt"), std::string("text"));
  expect_error([&] { snip::load_token_data(path("shards"), *byte, 256); }, {"mixes"});
}

TEST_F(CorpusTest, EmptyAndMissingCorporaAreErrors) {
  auto byte = snip::make_byte_tokenizer();
  snip::write_file_atomic(path("empty.txt"), std::string());
  expect_error([&] { snip::load_token_data(path("empty.txt"), *byte, 256); }, {"empty.txt", "empty"});
  write_gzip("empty.txt.gz", "");
  expect_error([&] { snip::load_token_data(path("empty.txt.gz"), *byte, 256); }, {"empty.txt.gz", "empty"});
  snip::write_file_atomic(path("one.txt"), std::string("x"));
  expect_error([&] { snip::load_token_data(path("one.txt"), *byte, 256); }, {"one.txt", "1 token"});
  std::filesystem::create_directories(dir_ / "nothing");
  expect_error([&] { snip::load_token_data(path("nothing"), *byte, 256); }, {"nothing", "no .txt"});
  expect_error([&] { snip::load_token_data(path("missing.txt"), *byte, 256); }, {"missing.txt", "does not exist"});
}

TEST_F(CorpusTest, CorruptGzipIsAnError) {
  std::string text;
  for (int i = 0; i < 2000; ++i) text += "line " + std::to_string(i) + "\n";
  write_gzip("t.txt.gz", text);
  const std::string gz = snip::read_file(path("t.txt.gz"));
  snip::write_file_atomic(path("cut.txt.gz"), gz.substr(0, gz.size() / 2));
  expect_error([&] { snip::read_text_corpus(path("cut.txt.gz")); }, {"cut.txt.gz", "gzip"});
  std::string flipped = gz;
  flipped[gz.size() / 2] ^= 0x55;
  flipped[gz.size() / 2 + 1] ^= 0x55;
  snip::write_file_atomic(path("flip.txt.gz"), flipped);
  expect_error([&] { snip::read_text_corpus(path("flip.txt.gz")); }, {"flip.txt.gz", "gzip"});
}

TEST_F(CorpusTest, ValidationIsTheTailOfTheStream) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += char('a' + i % 26);
  snip::write_file_atomic(path("c.txt"), text);
  auto byte = snip::make_byte_tokenizer();
  const auto d = snip::load_token_data(path("c.txt"), *byte, 256, 0.1);
  EXPECT_EQ(d.train.size(), 900u);
  EXPECT_EQ(d.val.size(), 100u);
  std::vector<int32_t> all = d.train;
  all.insert(all.end(), d.val.begin(), d.val.end());
  EXPECT_EQ(all, byte->encode(text));
  EXPECT_EQ(d.source, path("c.txt"));
  EXPECT_EQ(d.vocab_size, 256);
  expect_error([&] { snip::load_token_data(path("c.txt"), *byte, 256, 1.0); }, {"validation fraction"});
  expect_error([&] { snip::load_token_data(path("c.txt"), *byte, 256, -0.1); }, {"validation fraction"});
  // A model vocabulary smaller than the tokenizer's is refused before anything is trained.
  expect_error([&] { snip::load_token_data(path("c.txt"), *byte, 128); }, {"vocab_size is 128"});
}

TEST(BundledCorpus, LoadsWithTheDocumentedSizeAndSplit) {
  EXPECT_TRUE(std::filesystem::exists(snip::bundled_corpus_path())) << snip::bundled_corpus_path();
  auto byte = snip::make_byte_tokenizer();
  const auto d = snip::load_token_data("", *byte, 256);
  EXPECT_EQ(d.source, "bundled:kjv");
  // resources/corpus/README.md: 4,236,033 bytes of ASCII text; the last 5% is validation.
  const size_t total = d.train.size() + d.val.size();
  EXPECT_EQ(total, 4236033u);
  EXPECT_EQ(d.val.size(), size_t(double(total) * 0.05));
  const std::string head = byte->decode({d.train.begin(), d.train.begin() + 100});
  EXPECT_EQ(head.rfind("Genesis 1\n\n1 In the beginning God created the heaven and the earth.", 0), 0u) << head;
  const std::string tail = byte->decode({d.val.end() - 20, d.val.end()});
  EXPECT_EQ(tail, "with you all. Amen.\n");
  for (int32_t t : d.train) ASSERT_TRUE(t == '\n' || (t >= 32 && t < 127)) << t;
}

}  // namespace
