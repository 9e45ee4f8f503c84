// The thread-priority policy (thread_priority.h). sched_setattr(2) goes through syscall(2):
// Debian 12's glibc (2.36) has no sched_setattr wrapper (glibc 2.41 added one), so the call is
// made raw, with the kernel's struct declared here: <linux/sched/types.h>, which has it, clashes
// with glibc's <sched.h>.
#include "thread_priority.h"

#include <dirent.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdlib>

namespace snip::ui {

namespace {
constexpr uint64_t kUiSliceNs = 1'000'000;  // the UI thread's scheduler slice: 1 ms (default 3 ms)
}  // namespace

bool set_scheduler_slice(uint64_t ns) {
#if defined(__linux__) && defined(SYS_sched_setattr)
  // Linux's EEVDF scheduler (6.12+) gives a task that asks for a shorter slice an earlier
  // deadline, so when the UI thread wakes it preempts CPU-bound work (ours or other programs')
  // instead of waiting for a 3 ms slice to run out. No privilege needed; older kernels ignore
  // the slice (or refuse, which changes nothing).
  // struct sched_attr of <linux/sched/types.h>; its layout is the kernel's stable ABI
  // (SCHED_ATTR_SIZE_VER1, 56 bytes).
  struct {
    uint32_t size, sched_policy;
    uint64_t sched_flags;
    int32_t sched_nice;
    uint32_t sched_priority;
    uint64_t sched_runtime, sched_deadline, sched_period;
    uint32_t sched_util_min, sched_util_max;
  } attr{};
  static_assert(sizeof attr == 56);
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  attr.sched_nice = getpriority(PRIO_PROCESS, 0);
  attr.sched_runtime = ns;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
#else
  (void)ns;
  return false;
#endif
}

bool request_short_ui_slice() {
  return set_scheduler_slice(kUiSliceNs);
}

void yield_cpu_to_ui_thread(int nice) {
#if defined(__linux__)
  const pid_t ui_thread = getpid();  // the main thread's tid is the process id
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (dirent* entry = readdir(tasks)) {
      const long tid = std::strtol(entry->d_name, nullptr, 10);
      if (tid <= 0 || tid == ui_thread) continue;
      if (getpriority(PRIO_PROCESS, id_t(tid)) < nice) setpriority(PRIO_PROCESS, id_t(tid), nice);
    }
    closedir(tasks);
  }
#else
  (void)nice;
#endif
}

void lower_this_thread(int nice) {
#if defined(__linux__)
  setpriority(PRIO_PROCESS, id_t(syscall(SYS_gettid)), nice);
#else
  (void)nice;
#endif
}

}  // namespace snip::ui
