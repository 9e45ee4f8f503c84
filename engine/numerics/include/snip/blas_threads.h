// OpenBLAS's worker threads: how long they spin after a GEMM before they sleep.
//
// OpenBLAS (Debian's pthread build) keeps each worker spinning on sched_yield for 2^28 cycles
// (~0.1 s) after every GEMM. A training step alternates GEMMs with element-wise loops on our own
// pool (snip/thread_pool.h), so for most of a step the spinner holds the core a pool worker
// needs. Unless OPENBLAS_THREAD_TIMEOUT is set in the environment, the workers are restarted
// before main() with OpenBLAS's shortest timeout (2^4 cycles: they sleep right after a GEMM and
// are woken for the next, ~10–50 µs): measured 10–15% off an FP32 step of the small preset
// (bench/train/RESULTS.md). Results are unchanged (OpenBLAS splits GEMMs the same way).
#pragma once
#include <string>

namespace snip {

// What was done at start-up, for logs and benchmarks: e.g. "OPENBLAS_THREAD_TIMEOUT=4 (set by
// snip)", "OPENBLAS_THREAD_TIMEOUT=28 (from the environment)" or "left as is: ...".
std::string blas_thread_setup();

// OpenBLAS single-threaded while any instance lives (nested and concurrent instances counted; the
// thread count is restored after the last one). OpenBLAS's thread count is process-wide, so
// every part of snip that needs it pinned goes through this one counter: the attention loops on
// the pool (a GEMM another thread starts meanwhile still computes, on one thread), and a compare
// whose parallel trainings must give the bits of a serial one.
class BlasSingleThreaded {
 public:
  BlasSingleThreaded();
  ~BlasSingleThreaded();
  BlasSingleThreaded(const BlasSingleThreaded&) = delete;
  BlasSingleThreaded& operator=(const BlasSingleThreaded&) = delete;
};

// True when snip set OPENBLAS_THREAD_TIMEOUT in this process's environment (it was not set
// before): child processes that should see the user's environment unset it.
bool blas_thread_timeout_set_by_snip();

}  // namespace snip
