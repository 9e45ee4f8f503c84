// The blocking thread pool behind parallel_for (parallel.h).
#include "snip/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace snip {
namespace {

// Below this much work a loop runs on the calling thread (waking a worker costs ~10-50 µs).
constexpr int64_t kParallelMinWork = int64_t(1) << 15;

class Pool {
 public:
  explicit Pool(int threads) : threads_(std::max(threads, 1)) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this, i] { worker(i); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  void run(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    std::unique_lock<std::mutex> call(call_mu_);  // one parallel loop at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn, n_ = n, pending_ = threads_ - 1, ++generation_;
    }
    cv_.notify_all();
    chunk(0, n, fn);
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  void chunk(int i, int64_t n, const std::function<void(int64_t, int64_t)>& fn) const {
    const int64_t b = n * i / threads_, e = n * (i + 1) / threads_;
    if (b < e) fn(b, e);
  }
  void worker(int i) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t, int64_t)>* fn;
      int64_t n;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
        if (quit_) return;
        seen = generation_, fn = fn_, n = n_;
      }
      chunk(i, n, *fn);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) done_cv_.notify_one();
      }
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::mutex call_mu_, mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int pending_ = 0;
  uint64_t generation_ = 0;
  bool quit_ = false;
};

Pool& pool() {
  static Pool p(parallel_threads());
  return p;
}

}  // namespace

int parallel_threads() {
  if (const char* s = std::getenv("SNIP_NUM_THREADS"); s && *s) {
    const int n = std::atoi(s);
    if (n >= 1 && n <= 256) return n;
  }
  return std::max(1, int(std::thread::hardware_concurrency()));
}

void parallel_for(int64_t n, int64_t work, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  if (work < kParallelMinWork || n < 2 || pool().threads() < 2) {
    fn(0, n);
    return;
  }
  pool().run(n, fn);
}

}  // namespace snip
