// A minimal fork-join over contiguous index ranges for the quantization kernels. Threads
// are spawned per call and joined before returning (no idle spinning threads that would
// compete with OpenBLAS's own threads during the GEMM that follows).
#pragma once
#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "snip/quant.h"

namespace snip::detail {

// Calls f(thread_index, begin, end) on up to `threads` contiguous chunks of [0, n), each at
// least `grain` long; thread_index < threads. f must not throw.
template <class F>
void parallel_chunks(int threads, int64_t n, int64_t grain, F&& f) {
  if (n <= 0) return;
  int64_t chunks = std::min<int64_t>(std::max(threads, 1), std::max<int64_t>(1, n / std::max<int64_t>(1, grain)));
  if (chunks <= 1) {
    f(0, int64_t(0), n);
    return;
  }
  std::vector<std::thread> pool;
  pool.reserve(size_t(chunks - 1));
  for (int64_t t = 1; t < chunks; ++t)
    pool.emplace_back([&f, t, n, chunks] { f(int(t), n * t / chunks, n * (t + 1) / chunks); });
  f(0, int64_t(0), n / chunks);
  for (auto& th : pool) th.join();
}

}  // namespace snip::detail
