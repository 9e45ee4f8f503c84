// The workbench's one thread-priority policy: the UI thread stays responsive however busy the
// cores are, and the engine's work yields to it. (Linux only; elsewhere every call is a no-op.)
//
// - The UI thread asks for a short scheduler slice (1 ms; the default is 3 ms), so it runs soon
//   after it wakes (request_short_ui_slice).
// - A training run's threads (its worker, the engine's pool threads, the BLAS threads) run at
//   nice +5 (kTrainingNice): every thread but the UI thread (yield_cpu_to_ui_thread).
// - A compare's threads run at nice +10 (kCompareNice): it yields to the UI and to a training
//   run (lower_this_thread; the job threads it starts inherit it).
// Not SCHED_IDLE (QThread::IdlePriority): that starved training behind any other busy process of
// the same session (measured: no step in 120 s beside a compiler).
#pragma once
#include <cstdint>

namespace snip::ui {

inline constexpr int kTrainingNice = 5;
inline constexpr int kCompareNice = 10;

// The calling thread's scheduler slice: `ns` nanoseconds, 0 = the kernel's default. Best effort:
// returns whether the kernel took it (off Linux, or without SYS_sched_setattr: false).
bool set_scheduler_slice(uint64_t ns);
// The UI thread's 1 ms slice.
bool request_short_ui_slice();
// Every thread of the process except the main (UI) thread to at least `nice` (Linux applies nice
// per thread; new threads inherit it). A thread that refuses, or has exited, is skipped.
void yield_cpu_to_ui_thread(int nice = kTrainingNice);
// The calling thread to `nice`.
void lower_this_thread(int nice);

}  // namespace snip::ui
