// The shared blocking thread pool (thread_pool.h).
#include "snip/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "snip/error.h"

namespace snip {
namespace {

class Pool {
 public:
  explicit Pool(int threads) : threads_(std::max(threads, 1)) {
    for (int i = 1; i < threads_; ++i) workers_.emplace_back([this] { worker(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    wake_cv_.notify_all();
    for (auto& w : workers_) w.join();
  }
  int threads() const { return threads_; }

  // False when another loop is running (the caller then runs the tasks itself).
  bool try_run(int ntasks, const std::function<void(int)>& task) {
    bool expected = false;
    if (!busy_.compare_exchange_strong(expected, true, std::memory_order_acquire)) return false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      task_ = &task;
      ntasks_ = ntasks;
      next_.store(0, std::memory_order_relaxed);
      finished_ = 0;
      ++generation_;
      pending_.store(ntasks, std::memory_order_relaxed);
      gen_.store(generation_, std::memory_order_release);
    }
    wake_cv_.notify_all();
    const int mine = claim(task, ntasks);
    {
      std::unique_lock<std::mutex> lock(mu_);
      finished_ += mine;
      pending_.fetch_sub(mine, std::memory_order_release);
      if (!(finished_ == ntasks_ && active_ == 0)) {
        lock.unlock();
        spin_until([&] { return pending_.load(std::memory_order_acquire) == 0; });
        lock.lock();
      }
      // Wait for the tasks in flight on workers, and for every worker that joined this loop
      // to leave it, so none can touch `task` or the counter after we return.
      done_cv_.wait(lock, [&] { return finished_ == ntasks_ && active_ == 0; });
      task_ = nullptr;  // closed: a worker waking late for this loop finds nothing to do
    }
    busy_.store(false, std::memory_order_release);
    return true;
  }

 private:
  int claim(const std::function<void(int)>& task, int ntasks) {
    int done = 0;
    for (int i; (i = next_.fetch_add(1, std::memory_order_relaxed)) < ntasks; ++done) task(i);
    return done;
  }

  // Waits up to kSpin for ready() before the caller sleeps on a condition variable. The model,
  // the quantizer and the quantized GEMMs run ~600 short loops per training step; waking a
  // sleeping worker and then the sleeping caller took tens of microseconds each on a VM, and
  // the loops ran about 8% of their time on one core (an FP4 step: 0.64× FP32's wall time but
  // 0.55× its CPU time; spinning first: 0.57×, as its CPU time). The bound keeps it from what
  // libgomp's unbounded spinning did on a shared, loaded machine (thread_pool.h): at most 50 µs
  // per wait, then the same blocking wait as before.
  template <class Ready>
  static void spin_until(Ready&& ready) {
    constexpr auto kSpin = std::chrono::microseconds(50);
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1;; ++i) {
      if (ready()) return;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
      if (i % 32 == 0 && std::chrono::steady_clock::now() >= until) return;
    }
  }

  void worker() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (!(quit_ || generation_ != seen)) {
        lock.unlock();
        spin_until([&] { return gen_.load(std::memory_order_acquire) != seen; });
        lock.lock();
      }
      wake_cv_.wait(lock, [&] { return quit_ || generation_ != seen; });
      if (quit_) return;
      seen = generation_;
      if (task_ == nullptr) continue;
      const std::function<void(int)>* task = task_;
      const int ntasks = ntasks_;
      ++active_;
      pending_.fetch_add(1, std::memory_order_relaxed);
      lock.unlock();
      const int mine = claim(*task, ntasks);
      lock.lock();
      finished_ += mine;
      --active_;
      pending_.fetch_sub(mine + 1, std::memory_order_release);
      if (finished_ == ntasks_ && active_ == 0) done_cv_.notify_one();
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<bool> busy_{false};
  std::atomic<int> next_{0};
  std::atomic<uint64_t> gen_{0};  // generation_, for a worker spinning without the lock
  std::atomic<int> pending_{0};   // tasks not finished + workers inside the loop, for the spinning caller
  std::mutex mu_;
  std::condition_variable wake_cv_, done_cv_;
  // Guarded by mu_:
  const std::function<void(int)>* task_ = nullptr;
  int ntasks_ = 0;
  int finished_ = 0;  // tasks completed in the current loop
  int active_ = 0;    // workers inside the current loop
  uint64_t generation_ = 0;
  bool quit_ = false;
};

Pool& pool() {
  static Pool p(pool_threads());
  return p;
}

}  // namespace

int parse_thread_count(const char* value) {
  if (!value || !*value) return 0;
  const std::string v(value);
  const bool digits = v.size() <= 3 && std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int n = digits ? std::stoi(v) : 0;
  if (n < 1 || n > 256)
    throw Error("SNIP_NUM_THREADS='" + v +
                "' is not a thread count: give a whole number from 1 to 256 (or unset it for all cores)");
  return n;
}

int pool_threads() {
  if (const char* s = std::getenv("SNIP_NUM_THREADS"); s && *s) {
    // A bad value was refused at start-up (check_environment); a library user gets all cores.
    try {
      return parse_thread_count(s);
    } catch (const Error&) {
    }
  }
  // Asked once: glibc reads /sys/devices/system/cpu/online on every call, and the quantizer
  // and the GEMMs ask for the thread count on every call (a statistics round: thousands of
  // times, ~10% of its CPU time in those reads).
  static const int hardware = std::max(1, int(std::thread::hardware_concurrency()));
  return hardware;
}

void pool_run(int ntasks, const std::function<void(int)>& task) {
  if (ntasks <= 0) return;
  // An exception must not leave a worker thread (std::terminate) nor skip the join: each task
  // runs guarded, the first exception is kept and rethrown here once every task has run.
  struct Guard {
    const std::function<void(int)>& task;
    std::mutex mu;
    std::exception_ptr first;
    void operator()(int i) {
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!first) first = std::current_exception();
      }
    }
  } guard{task, {}, nullptr};
  const std::function<void(int)> guarded = [&guard](int i) { guard(i); };  // one pointer: no allocation
  if (!(ntasks >= 2 && pool().threads() >= 2 && pool().try_run(ntasks, guarded)))
    for (int i = 0; i < ntasks; ++i) guarded(i);
  if (guard.first) std::rethrow_exception(guard.first);
}

}  // namespace snip
