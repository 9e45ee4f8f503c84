// The shared thread pool (snip/thread_pool.h) that runs the quantization kernels' chunks:
// every task runs exactly once, nested and concurrent loops fall back to the calling thread
// instead of deadlocking, and fake_quantize called from several threads at once (the pool
// busy with one of them) gives the same bits as a single-threaded call.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "snip/quant.h"
#include "snip/thread_pool.h"

namespace snip {
namespace {

TEST(ThreadPool, EveryTaskRunsExactlyOnce) {
  for (int ntasks : {0, 1, 2, 3, 7, 64, 257}) {
    std::vector<std::atomic<int>> runs(size_t(ntasks) + 1);
    for (int rep = 0; rep < 20; ++rep) pool_run(ntasks, [&](int i) { runs[size_t(i)]++; });
    for (int i = 0; i < ntasks; ++i) EXPECT_EQ(runs[size_t(i)].load(), 20) << "task " << i << " of " << ntasks;
    EXPECT_EQ(runs[size_t(ntasks)].load(), 0) << "a task index out of range ran";
  }
}

// A task that throws (a SNIP_ASSERT deep in a kernel, say) does not end the process on a worker
// thread: every other task still runs, the caller gets the exception, and the pool keeps working.
TEST(ThreadPool, ATasksExceptionReachesTheCallerAfterEveryTaskRan) {
  for (int ntasks : {1, 2, 7, 64}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(ntasks));
    try {
      pool_run(ntasks, [&](int i) {
        runs[size_t(i)]++;
        if (i == ntasks / 2) throw std::runtime_error("task " + std::to_string(i));
      });
      ADD_FAILURE() << "no exception from " << ntasks << " tasks";
    } catch (const std::runtime_error& e) {
      EXPECT_EQ(std::string(e.what()), "task " + std::to_string(ntasks / 2));
    }
    for (int i = 0; i < ntasks; ++i) EXPECT_EQ(runs[size_t(i)].load(), 1) << "task " << i << " of " << ntasks;
    std::atomic<int> after{0};
    pool_run(ntasks, [&](int) { after++; });
    EXPECT_EQ(after.load(), ntasks);
  }
  // nested: the inner loop's exception reaches the inner caller, which is an outer task
  std::atomic<int> caught{0};
  pool_run(4, [&](int) {
    try {
      pool_run(3, [](int i) {
        if (i == 2) throw std::runtime_error("inner");
      });
    } catch (const std::runtime_error&) {
      caught++;
    }
  });
  EXPECT_EQ(caught.load(), 4);
}

TEST(ThreadPool, NestedLoopRunsInlineWithoutDeadlock) {
  std::atomic<int> inner{0};
  pool_run(4, [&](int) { pool_run(5, [&](int) { inner++; }); });
  EXPECT_EQ(inner.load(), 20);
}

TEST(ThreadPool, ConcurrentCallersAllFinish) {
  std::atomic<int64_t> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 3; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 300; ++rep) pool_run(6, [&](int i) { sum += i + 1; });
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(sum.load(), int64_t(3) * 300 * 21);
}

// Regression: the quantizer used to start its own threads per call; on the shared pool a call
// that finds the pool busy runs its chunks itself, with the same chunk boundaries.
TEST(ThreadPool, ConcurrentFakeQuantizeGivesSingleThreadBits) {
  const int64_t rows = 512, cols = 384;
  std::mt19937 gen(3);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (float& v : x) v = nd(gen);
  QuantSpec spec;
  spec.format = ElemFormat::e2m1;
  spec.scale = ScaleKind::fp32;
  spec.block_rows = 1;
  spec.block_cols = 128;
  spec.rounding = Rounding::stochastic;
  const RngKey key{1, 2, 3, 4};

  set_quant_threads(1);
  std::vector<float> want(x.size());
  fake_quantize(want.data(), x.data(), rows, cols, spec, key, "x");
  set_quant_threads(0);

  std::vector<std::vector<float>> got(4, std::vector<float>(x.size()));
  std::vector<std::thread> callers;
  for (float* out : {got[0].data(), got[1].data(), got[2].data(), got[3].data()})
    callers.emplace_back([&, out] {
      for (int rep = 0; rep < 10; ++rep) fake_quantize(out, x.data(), rows, cols, spec, key, "x");
    });
  for (auto& c : callers) c.join();
  for (const auto& g : got) EXPECT_EQ(std::memcmp(g.data(), want.data(), x.size() * 4), 0);
}

}  // namespace
}  // namespace snip
