// Parallel loops over contiguous index ranges, on the shared blocking thread pool
// (snip/thread_pool.h): parallel_for for the model's element-wise and attention loops and the
// optimizer, detail::parallel_chunks for kernels that keep per-chunk scratch (the quantizer,
// the quantized GEMMs). One implementation and one grain for both.
// Why not OpenMP: libgomp's workers spin at barriers, and on a shared, loaded 2-core machine
// (builds, the GUI, a second training run) a spinning worker steals the core its partner needs,
// making a tiny step 50× slower. These workers sleep on a condition variable instead.
// Work is split into fixed contiguous chunks, so results never depend on timing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>

#include "snip/thread_pool.h"

namespace snip {

// Below about this many elements touched, a loop runs on the calling thread: waking a worker
// (~10-50 µs) would cost more than it saves.
inline constexpr int64_t kParallelGrain = int64_t(1) << 15;

// Threads used by parallel_for: SNIP_NUM_THREADS if set, else the hardware concurrency.
inline int parallel_threads() {
  return pool_threads();
}

namespace detail {

// Chunks per thread: with more chunks than threads, a thread that starts late (its core is
// busy) leaves its share to the others instead of holding everyone up.
constexpr int kChunksPerThread = 4;

inline int chunks_for_threads(int threads) {
  return threads <= 1 ? 1 : threads * kChunksPerThread;
}

// Calls f(chunk, begin, end) on up to `max_chunks` contiguous chunks of [0, n), each at least
// `grain` long (one chunk, on the calling thread, when n < 2·grain); chunk < max_chunks, so
// per-chunk scratch sized max_chunks suffices. The chunk boundaries depend only on
// (max_chunks, n, grain), never on timing or on which thread runs a chunk. An exception from f
// reaches the caller after every chunk has run (pool_run).
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

}  // namespace detail

// Calls fn(begin, end) on disjoint contiguous chunks covering [0, n), one per thread, when
// `work` (a rough count of elements touched) reaches kParallelGrain; else fn(0, n) here.
inline void parallel_for(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn) {
  const int threads = work < kParallelGrain ? 1 : parallel_threads();
  detail::parallel_chunks(threads, n, 1, [&fn](int, int64_t b, int64_t e) { fn(b, e); });
}

}  // namespace snip
