// Deterministic batching: seeded per-epoch shuffles of T+1-token windows for training, and
// llm.c's sequential layout for evaluation. The position (epoch, batch, seed) is the whole
// state, so seek() after a restart replays exactly the batches a straight run would see.
#include <algorithm>
#include <cstring>

#include "snip/dataset.h"
#include "snip/error.h"

namespace snip {

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a fixed, portable 64-bit mixer. std::shuffle and the
// std distributions are implementation-defined, so they would break cross-build determinism.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform integer in [0, n) by rejection (no modulo bias).
uint64_t uniform_below(uint64_t& state, uint64_t n) {
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t r;
  do r = splitmix64(state);
  while (r >= limit);
  return r % n;
}

}  // namespace

BatchLoader::BatchLoader(const std::vector<int32_t>* tokens, int B, int T, uint64_t seed, bool shuffle)
    : tokens_(tokens), B_(size_t(B > 0 ? B : 0)), T_(size_t(T > 0 ? T : 0)), seed_(seed), shuffle_(shuffle) {
  SNIP_ASSERT(tokens != nullptr);
  if (B <= 0 || T <= 0)
    throw Error("batch size " + std::to_string(B) + " and sequence length " + std::to_string(T) +
                " must both be positive");
  const size_t n = tokens->size();
  if (n < B_ * T_ + 1)
    throw Error("the token stream has " + std::to_string(n) + " tokens but one batch of B=" + std::to_string(B) +
                " rows × T=" + std::to_string(T) + " needs " + std::to_string(B_ * T_ + 1) +
                "; use a smaller --batch-size / --seq-len or more data");
  windows_ = (n - 1) / T_;
  batches_ = shuffle_ ? windows_ / B_ : (n - 1) / (B_ * T_);
  pos_.seed = seed_;
}

uint64_t BatchLoader::batches_per_epoch() const {
  return batches_;
}

DataPosition BatchLoader::position() const {
  return pos_;
}

void BatchLoader::seek(const DataPosition& pos) {
  if (pos.batch_in_epoch > batches_)
    throw Error("data position (epoch " + std::to_string(pos.epoch) + ", batch " + std::to_string(pos.batch_in_epoch) +
                ") is past the " + std::to_string(batches_) +
                " batches of an epoch of this data — was the checkpoint trained on other data or another batch size?");
  seed_ = pos.seed;
  pos_ = pos;
  if (pos_.batch_in_epoch == batches_) pos_ = {pos.epoch + 1, 0, pos.seed};
  order_epoch_.reset();  // the seed may have changed: rebuild lazily
}

void BatchLoader::build_epoch_order() {
  order_.resize(windows_);
  for (uint64_t i = 0; i < windows_; ++i) order_[i] = i;
  // Fisher-Yates with a stream seeded by (seed, epoch): each epoch is an independent permutation.
  uint64_t state = seed_;
  const uint64_t epoch_key = splitmix64(state) ^ (pos_.epoch * 0xD1B54A32D192ED03ull);
  state = epoch_key;
  for (uint64_t i = windows_; i > 1; --i) std::swap(order_[i - 1], order_[uniform_below(state, i)]);
  order_epoch_ = pos_.epoch;
}

void BatchLoader::next(int32_t* inputs, int32_t* targets) {
  const int32_t* tok = tokens_->data();
  if (shuffle_) {
    if (order_epoch_ != pos_.epoch) build_epoch_order();
    for (size_t b = 0; b < B_; ++b) {
      // Window k holds tokens [k·T, k·T + T]: inputs are the first T, targets the last T.
      const size_t start = size_t(order_[pos_.batch_in_epoch * B_ + b]) * T_;
      std::memcpy(inputs + b * T_, tok + start, T_ * sizeof(int32_t));
      std::memcpy(targets + b * T_, tok + start + 1, T_ * sizeof(int32_t));
    }
  } else {
    // llm.c: batch i reads tokens [i·B·T, (i+1)·B·T + 1) as B rows of T, targets shifted by one.
    const size_t start = size_t(pos_.batch_in_epoch) * B_ * T_;
    std::memcpy(inputs, tok + start, B_ * T_ * sizeof(int32_t));
    std::memcpy(targets, tok + start + 1, B_ * T_ * sizeof(int32_t));
  }
  if (++pos_.batch_in_epoch == batches_) {
    ++pos_.epoch;
    pos_.batch_in_epoch = 0;
  }
}

}  // namespace snip
