// The process-wide blocking thread pool shared by the model's element-wise loops
// (snip/parallel.h) and the quantization kernels (snip_numerics).
//
// Why one pool, and why blocking: on a 2-core machine OpenBLAS keeps one worker spinning on
// sched_yield for ~0.1 s after every GEMM, and every extra runnable thread (a per-call
// std::thread, OpenMP's spinning workers, a second pool) competes with it and with its
// partner for the two cores. These workers sleep on a condition variable between loops, after
// spinning at most 50 µs for the next one (and the caller as long for a worker's last task):
// a training step runs ~600 short loops, and waking a sleeping thread each time cost ~8% of a
// quantized step's wall time (thread_pool.cpp).
//
// Tasks are claimed dynamically (an atomic counter): when a worker wakes late because the
// other core is busy, the calling thread simply runs more of the tasks itself instead of
// waiting. Which thread runs a task never changes its result: callers give every task a
// fixed range of the work.
#pragma once
#include <functional>

namespace snip {

// Threads of the shared pool, the caller included: SNIP_NUM_THREADS if set (1-256), else
// the hardware concurrency.
int pool_threads();

// SNIP_NUM_THREADS's value as a thread count: 0 when null or empty (all cores), else a decimal
// whole number in [1, 256]; anything else throws snip::Error naming the variable and the range.
int parse_thread_count(const char* value);

// Calls task(i) once for every i in [0, ntasks), on the pool's threads and the calling one,
// and returns when all have finished. If tasks throw, every task still runs and the first
// exception is rethrown here afterwards (never on a worker thread). Runs every task on the calling
// thread, in order, when ntasks < 2, when the pool has one thread, or when the pool is
// already running a loop (a nested call or a concurrent caller), so it never deadlocks.
void pool_run(int ntasks, const std::function<void(int)>& task);

}  // namespace snip
