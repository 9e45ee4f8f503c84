// The UI thread's scheduler slice: a small Linux-only platform helper (the one raw system call
// of the GUI), kept out of the window code.
#pragma once

namespace snip::ui {

// Asks the scheduler for a short time slice (1 ms; the default is 3 ms) for the calling thread
// (the UI thread), so it runs soon after it wakes even when every core is busy; best effort,
// returns whether the kernel took it. Off Linux, or without SYS_sched_setattr, returns false.
bool request_short_ui_slice();

}  // namespace snip::ui
