// A fork-join over contiguous index ranges for the quantization kernels, on the shared
// blocking thread pool of snip_core (snip/thread_pool.h). Earlier versions spawned and joined
// std::threads on every call: ~400 thread starts per training step, each of which had to win
// a core from OpenBLAS's yielding worker before the caller could go on.
#pragma once
#include <algorithm>
#include <cstdint>

#include "snip/thread_pool.h"

namespace snip::detail {

// Chunks per thread: with more chunks than threads, a thread that starts late (its core is
// busy) leaves its share to the others instead of holding everyone up.
constexpr int kChunksPerThread = 4;

inline int chunks_for_threads(int threads) {
  return threads <= 1 ? 1 : threads * kChunksPerThread;
}

// Calls f(chunk, begin, end) on up to `max_chunks` contiguous chunks of [0, n), each at least
// `grain` long (one chunk, on the calling thread, when n < 2·grain); chunk < max_chunks, so
// per-chunk scratch sized max_chunks suffices. The chunk boundaries depend only on
// (max_chunks, n, grain), never on timing or on which thread runs a chunk. f must not throw.
template <class F>
void parallel_chunks(int max_chunks, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  const int64_t chunks =
      std::min<int64_t>(std::max(max_chunks, 1), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (chunks <= 1) {
    f(0, int64_t(0), n);
    return;
  }
  pool_run(int(chunks), [&f, n, chunks](int c) { f(c, n * c / chunks, n * (c + 1) / chunks); });
}

}  // namespace snip::detail
