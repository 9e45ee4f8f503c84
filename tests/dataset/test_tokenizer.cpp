// Tokenizer tests: byte-level is the identity on bytes; SentencePiece models trained by
// train_sentencepiece are lossless (byte fallback, identity normaliser), and bad models or
// vocab sizes are clear errors.
#include <gtest/gtest.h>
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <filesystem>
#include <random>

#include "snip/atomic_file.h"
#include "snip/dataset.h"
#include "test_util.h"

namespace {

using snip_test::expect_error;

TEST(ByteTokenizer, EncodesEveryByteToItsValueAndBack) {
  auto tok = snip::make_byte_tokenizer();
  std::string all;
  for (int i = 0; i < 256; ++i) all += char(i);
  const auto ids = tok->encode(all);
  ASSERT_EQ(ids.size(), 256u);
  for (int i = 0; i < 256; ++i) EXPECT_EQ(ids[size_t(i)], i);
  EXPECT_EQ(tok->decode(ids), all);
  EXPECT_EQ(tok->vocab_size(), 256);
  EXPECT_EQ(tok->name(), "byte");
  expect_error([&] { tok->decode({65, 256}); }, {"256", "position 1"});
  expect_error([&] { tok->decode({-1}); }, {"-1"});
}

TEST(MakeTokenizer, ByteSpecAndMissingModel) {
  EXPECT_EQ(snip::make_tokenizer("byte")->name(), "byte");
  EXPECT_EQ(snip::make_tokenizer("")->name(), "byte");
  expect_error([] { snip::make_tokenizer("/nonexistent/tok.model"); }, {"/nonexistent/tok.model", "does not exist"});
}

class SentencePieceTest : public snip_test::ScratchDirTest {};

TEST_F(SentencePieceTest, GarbageModelFileIsAnError) {
  snip::write_file_atomic(path("bad.model"), std::string("this is not a protobuf"));
  expect_error([&] { snip::make_sentencepiece_tokenizer(path("bad.model")); }, {"bad.model", "cannot be loaded"});
}

TEST_F(SentencePieceTest, TrainedModelIsLosslessOnAnyText) {
  // Train on the first ~300 KB of the bundled corpus (fast: well under a second).
  const std::string corpus = snip::read_text_corpus("").substr(0, 300000);
  snip::write_file_atomic(path("train.txt"), corpus);
  snip::train_sentencepiece(path("train.txt"), 400, path("tok"));
  ASSERT_TRUE(std::filesystem::exists(path("tok.model")));
  ASSERT_TRUE(std::filesystem::exists(path("tok.vocab")));
  auto tok = snip::make_tokenizer(path("tok.model"));
  EXPECT_EQ(tok->vocab_size(), 400);
  EXPECT_EQ(tok->name(), "sentencepiece:" + path("tok.model"));
  EXPECT_EQ(snip::make_tokenizer(tok->name())->name(), tok->name());  // names saved in checkpoints load back

  // Compresses English (merges were learned) and round-trips exactly, newlines, runs of
  // spaces and bytes never seen in training included.
  const std::string english = corpus.substr(1000, 20000);
  const auto ids = tok->encode(english);
  EXPECT_LT(ids.size(), english.size() * 7 / 10);
  EXPECT_EQ(tok->decode(ids), english);
  const std::string odd = "  leading\n\n\ttabs  and   spaces\r\nUnicode: \xC3\xA9\xE2\x82\xAC \x01\xFF end\n";
  EXPECT_EQ(tok->decode(tok->encode(odd)), odd);
  for (int32_t id : tok->encode(odd)) EXPECT_TRUE(id >= 0 && id < 400);
  // Malformed UTF-8 (SentencePiece alone would turn it into U+FFFD): overlong, surrogate,
  // truncated sequence, bytes that never start one.
  const std::string malformed = "a\xC0\x80 b\xED\xA0\x80 c\xE2\x82\nd\xF5\xFE\x80 e\xF0\x9F\x98\x80";
  EXPECT_EQ(tok->decode(tok->encode(malformed)), malformed);
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::string random(size_t(rng() % 40), '\0');
    for (char& c : random) c = char(trial % 2 ? rng() : "ab \n\xC3\xA9\xE2\x82\xAC"[rng() % 10]);
    ASSERT_EQ(tok->decode(tok->encode(random)), random) << "trial " << trial;
  }

  // Line-wise encoding (the fast path) equals encoding each line separately plus the newline.
  const auto a = tok->encode("And God said");
  const auto nl = tok->encode("\n");
  const auto b = tok->encode("Let there be light");
  std::vector<int32_t> joined = a;
  joined.insert(joined.end(), nl.begin(), nl.end());
  joined.insert(joined.end(), b.begin(), b.end());
  EXPECT_EQ(tok->encode("And God said\nLet there be light"), joined);

  expect_error([&] { tok->decode({400}); }, {"400"});
}

// A model made elsewhere with SentencePiece's defaults (NFKC, dummy prefix, no byte fallback)
// must behave exactly as SentencePiece itself does: the line-wise fast path is not used.
TEST_F(SentencePieceTest, ForeignModelMatchesSentencePieceItself) {
  const std::string corpus = snip::read_text_corpus("").substr(0, 200000);
  snip::write_file_atomic(path("train.txt"), corpus);
  const auto status = sentencepiece::SentencePieceTrainer::Train(
      "--input=" + path("train.txt") + " --model_prefix=" + path("foreign") + " --vocab_size=300 --minloglevel=2");
  ASSERT_TRUE(status.ok()) << status.ToString();
  auto tok = snip::make_tokenizer(path("foreign.model"));
  sentencepiece::SentencePieceProcessor sp;
  ASSERT_TRUE(sp.Load(path("foreign.model")).ok());
  const std::string text = "In the  beginning\nGod created\n\n  the heaven";
  std::vector<int> expected;
  ASSERT_TRUE(sp.Encode(text, &expected).ok());
  const auto ids = tok->encode(text);
  EXPECT_EQ(ids, std::vector<int32_t>(expected.begin(), expected.end()));
  std::string decoded;
  ASSERT_TRUE(sp.Decode(expected, &decoded).ok());
  // SentencePiece drops the dummy-prefix space on decode; a piece-by-piece decode would not.
  EXPECT_EQ(tok->decode(ids), decoded);
  EXPECT_EQ(decoded.rfind("In the", 0), 0u) << decoded;
}

TEST_F(SentencePieceTest, BadTrainingRequestsAreErrors) {
  snip::write_file_atomic(path("t.txt"), std::string("some text\n"));
  expect_error([&] { snip::train_sentencepiece(path("t.txt"), 100, path("x")); }, {"vocab size 100"});
  expect_error([&] { snip::train_sentencepiece(path("t.txt"), 70000, path("x")); }, {"70000"});
  expect_error([&] { snip::train_sentencepiece(path("t.txt"), 400, path("x"), "wordpiece"); }, {"wordpiece"});
  // Far too little text for 400 pieces: SentencePiece's refusal is passed on, nothing written.
  expect_error([&] { snip::train_sentencepiece(path("t.txt"), 400, path("x")); }, {"failed"});
  EXPECT_FALSE(std::filesystem::exists(path("x.model")));
  expect_error([&] { snip::train_sentencepiece(path("missing.txt"), 400, path("x")); }, {"missing.txt"});
}

}  // namespace
