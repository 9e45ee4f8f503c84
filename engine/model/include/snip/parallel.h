// Parallel loops for the model's element-wise and attention code, on the shared blocking
// thread pool of snip_core (snip/thread_pool.h; the quantization kernels use the same workers).
// Why not OpenMP: libgomp's workers spin at barriers, and on a shared, loaded 2-core machine
// (builds, the GUI, a second training run) a spinning worker steals the core its partner needs,
// making a tiny step 50× slower. These workers sleep on a condition variable instead.
// Work is split into fixed contiguous chunks, so results never depend on timing.
#pragma once
#include <cstdint>
#include <functional>

namespace snip {

// Threads used by parallel_for: SNIP_NUM_THREADS if set, else the hardware concurrency.
int parallel_threads();
// Calls fn(begin, end) on disjoint contiguous chunks covering [0, n), in parallel when
// `work` (a rough count of elements touched) is large enough to pay for waking the workers.
void parallel_for(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace snip
