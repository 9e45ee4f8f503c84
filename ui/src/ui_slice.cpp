// request_short_ui_slice: sched_setattr(2) through syscall(2). Debian 12's glibc (2.36) has no
// sched_setattr wrapper (glibc 2.41 added one), so the call is made raw, with the kernel's
// struct declared here: <linux/sched/types.h>, which has it, clashes with glibc's <sched.h>.
#include "ui_slice.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace snip::ui {

namespace {
constexpr uint64_t kUiSliceNs = 1'000'000;  // the UI thread's scheduler slice: 1 ms (default 3 ms)
}  // namespace

bool request_short_ui_slice() {
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
  attr.sched_runtime = kUiSliceNs;
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
#else
  return false;
#endif
}

}  // namespace snip::ui
