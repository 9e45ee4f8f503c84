// BatchLoader tests: the llm.c sequential layout, each training epoch a permutation of the
// windows, same seed => same batches, seek() reproduces the stream (resume), and the order
// matches an independent Python implementation (tests/dataset/make_batch_order_golden.py).
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "snip/dataset.h"
#include "test_util.h"

namespace {

using snip_test::expect_error;

// Token i has value i, so every row says where in the stream it came from.
std::vector<int32_t> iota_tokens(size_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), 0);
  return t;
}

struct Batch {
  std::vector<int32_t> inputs, targets;
  bool operator==(const Batch&) const = default;
};

Batch next_batch(snip::BatchLoader& loader, int B, int T) {
  Batch b{std::vector<int32_t>(size_t(B * T)), std::vector<int32_t>(size_t(B * T))};
  loader.next(b.inputs.data(), b.targets.data());
  return b;
}

TEST(BatchLoader, SequentialModeFollowsLlmcLayout) {
  const int B = 3, T = 5;
  const auto tokens = iota_tokens(100);
  snip::BatchLoader loader(&tokens, B, T, 42, /*shuffle=*/false);
  EXPECT_EQ(loader.batches_per_epoch(), uint64_t((100 - 1) / (B * T)));  // 6
  for (uint64_t i = 0; i < loader.batches_per_epoch(); ++i) {
    const Batch b = next_batch(loader, B, T);
    // batch i = tokens [i·B·T, (i+1)·B·T + 1): inputs the first B·T, targets shifted by one.
    for (int k = 0; k < B * T; ++k) {
      EXPECT_EQ(b.inputs[size_t(k)], int32_t(i * B * T + k));
      EXPECT_EQ(b.targets[size_t(k)], int32_t(i * B * T + k + 1));
    }
  }
  EXPECT_EQ(loader.position().epoch, 1u);
  EXPECT_EQ(loader.position().batch_in_epoch, 0u);
  EXPECT_EQ(next_batch(loader, B, T).inputs[0], 0);  // wraps to the start
}

TEST(BatchLoader, ShuffledEpochServesEveryWindowOnce) {
  const int B = 4, T = 8;
  const auto tokens = iota_tokens(1001);  // W = 1000/8 = 125 windows, 31 batches, 1 window left out
  snip::BatchLoader loader(&tokens, B, T, 7, /*shuffle=*/true);
  ASSERT_EQ(loader.batches_per_epoch(), 31u);
  std::vector<std::set<int32_t>> starts_per_epoch(2);
  for (int epoch = 0; epoch < 2; ++epoch) {
    for (uint64_t i = 0; i < loader.batches_per_epoch(); ++i) {
      const Batch b = next_batch(loader, B, T);
      for (int r = 0; r < B; ++r) {
        const int32_t start = b.inputs[size_t(r * T)];
        EXPECT_EQ(start % T, 0);
        for (int t = 0; t < T; ++t) {
          EXPECT_EQ(b.inputs[size_t(r * T + t)], start + t);
          EXPECT_EQ(b.targets[size_t(r * T + t)], start + t + 1);
        }
        EXPECT_TRUE(starts_per_epoch[size_t(epoch)].insert(start).second) << "window " << start << " served twice";
      }
    }
  }
  EXPECT_EQ(starts_per_epoch[0].size(), 124u);
  EXPECT_EQ(loader.position().epoch, 2u);
}

TEST(BatchLoader, SameSeedSameBatchesOtherSeedOrEpochDiffers) {
  const int B = 2, T = 16;
  const auto tokens = iota_tokens(5000);
  snip::BatchLoader a(&tokens, B, T, 1337, true), b(&tokens, B, T, 1337, true), c(&tokens, B, T, 1338, true);
  std::vector<Batch> from_a;
  int differ_c = 0;
  for (int i = 0; i < 400; ++i) {  // crosses 2+ epochs (156 batches each)
    from_a.push_back(next_batch(a, B, T));
    EXPECT_EQ(from_a.back(), next_batch(b, B, T)) << "batch " << i;
    differ_c += !(from_a.back() == next_batch(c, B, T));
  }
  EXPECT_GT(differ_c, 390);
  // Epoch 1 is not a replay of epoch 0.
  const uint64_t per = a.batches_per_epoch();
  int same = 0;
  for (uint64_t i = 0; i < per; ++i) same += from_a[i] == from_a[per + i];
  EXPECT_LT(same, 5);
}

TEST(BatchLoader, SeekReproducesTheStreamAcrossEpochs) {
  const int B = 3, T = 7;
  const auto tokens = iota_tokens(700);  // 98 windows, 32 batches per epoch
  for (bool shuffle : {true, false}) {
    snip::BatchLoader straight(&tokens, B, T, 99, shuffle);
    std::vector<snip::DataPosition> positions;
    std::vector<Batch> batches;
    for (int i = 0; i < 100; ++i) {
      positions.push_back(straight.position());
      batches.push_back(next_batch(straight, B, T));
    }
    for (int resume_at : {0, 1, 31, 32, 33, 64, 77}) {
      // A loader built with another seed adopts the checkpoint's seed on seek().
      snip::BatchLoader resumed(&tokens, B, T, 12345, shuffle);
      next_batch(resumed, B, T);  // some unrelated history that seek() must forget
      resumed.seek(positions[size_t(resume_at)]);
      EXPECT_EQ(resumed.position().seed, 99u);
      for (int i = resume_at; i < 100; ++i)
        ASSERT_EQ(next_batch(resumed, B, T), batches[size_t(i)])
            << "shuffle=" << shuffle << " resume at " << resume_at << ", batch " << i;
    }
  }
}

TEST(BatchLoader, EndOfEpochPositionIsNormalisedBySeek) {
  const auto tokens = iota_tokens(200);
  snip::BatchLoader a(&tokens, 2, 4, 5, true), b(&tokens, 2, 4, 5, true);
  const uint64_t per = a.batches_per_epoch();
  b.seek({0, per, 5});  // "after the last batch of epoch 0" == start of epoch 1
  EXPECT_EQ(b.position().epoch, 1u);
  EXPECT_EQ(b.position().batch_in_epoch, 0u);
  a.seek({1, 0, 5});
  EXPECT_EQ(next_batch(a, 2, 4), next_batch(b, 2, 4));
}

TEST(BatchLoader, BadArgumentsAreErrors) {
  const auto tokens = iota_tokens(64);
  expect_error([&] { snip::BatchLoader(&tokens, 4, 16, 0, true); }, {"64 tokens", "needs 65", "--batch-size"});
  expect_error([&] { snip::BatchLoader(&tokens, 0, 16, 0, true); }, {"must both be positive"});
  expect_error([&] { snip::BatchLoader(&tokens, 2, -1, 0, false); }, {"must both be positive"});
  snip::BatchLoader ok(&tokens, 2, 8, 0, true);
  expect_error([&] { ok.seek({0, 1000, 0}); }, {"batch 1000", "another batch size"});
}

// The shuffle is defined by the header comment, not by this build: a Python twin computes it.
TEST(BatchLoader, OrderMatchesIndependentImplementation) {
  std::ifstream in(std::string(SNIP_TEST_DATA_DIR) + "/batch_order.json");
  ASSERT_TRUE(in) << "missing tests/dataset/data/batch_order.json";
  const auto golden = nlohmann::json::parse(in);
  const int T = 2;
  int checked = 0;
  for (const auto& c : golden["cases"]) {
    const uint64_t seed = std::stoull(c["seed"].get<std::string>());
    const uint64_t epoch = c["epoch"].get<uint64_t>();
    const size_t windows = c["windows"].get<size_t>();
    const auto tokens = iota_tokens(windows * T + 1);  // exactly `windows` windows
    snip::BatchLoader loader(&tokens, 1, T, seed, true);
    loader.seek({epoch, 0, seed});
    for (const auto& w : c["order"]) {
      ASSERT_EQ(next_batch(loader, 1, T).inputs[0], w.get<int32_t>() * T) << "seed " << seed << " epoch " << epoch;
      ++checked;
    }
  }
  EXPECT_GT(checked, 200);
}

}  // namespace
