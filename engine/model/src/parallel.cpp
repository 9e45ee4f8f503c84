// parallel_for on the shared blocking thread pool (snip/thread_pool.h, in snip_core, which
// the quantization kernels use too: one set of sleeping workers for the whole process).
#include "snip/parallel.h"

#include "snip/thread_pool.h"

namespace snip {
namespace {

// Below this much work a loop runs on the calling thread (waking a worker costs ~10-50 µs).
constexpr int64_t kParallelMinWork = int64_t(1) << 15;

}  // namespace

int parallel_threads() {
  return pool_threads();
}

void parallel_for(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int threads = parallel_threads();
  if (work < kParallelMinWork || n < 2 || threads < 2) {
    fn(0, n);
    return;
  }
  // Fixed chunks (one per thread), so results never depend on which thread runs which.
  pool_run(threads, [&](int i) {
    const int64_t b = n * i / threads, e = n * (i + 1) / threads;
    if (b < e) fn(b, e);
  });
}

}  // namespace snip
