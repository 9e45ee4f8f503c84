// StopSignals: the one place the `snip` commands that train handle the signals that ask a
// process to end. While an instance lives, SIGINT (Ctrl-C), SIGTERM (kill, timeout, systemd,
// job schedulers) and SIGHUP (the terminal went away) only set a flag: the command stops after
// the current step, saves its checkpoint, flushes its metric rows and marks the run
// interrupted. The first signal says so on stderr at once and puts the default actions back, so
// a second one of any of the three ends the process at once. A signal ignored when the command started (SIGHUP under
// nohup, SIGINT in a background job) stays ignored. The previous handlers are restored on
// destruction.
//
// A failed write to stdout or stderr counts as a stop request too (output_streams.h): SIGPIPE
// is ignored, so `snip train --json | head` stops like on SIGTERM, saves, says how to resume
// and exits 141 (128 + SIGPIPE) instead of dying with nothing saved.
#pragma once
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include "output_streams.h"
#include "snip/error.h"

namespace snip::cli {

class StopSignals {
 public:
  StopSignals() {
    received().store(0);
    struct sigaction sa {};
    sa.sa_handler = &StopSignals::on_signal;
    sigemptyset(&sa.sa_mask);
    unsigned handled = 0;
    for (int i = 0; i < kCount; ++i) {
      sigaction(kSignals[i], &sa, &previous_[i]);
      if (previous_[i].sa_handler == SIG_IGN)
        sigaction(kSignals[i], &previous_[i], nullptr);
      else
        handled |= 1u << i;
    }
    handled_mask().store(handled);
    snip::set_stop_check(&StopSignals::requested);  // set-up work (reading a corpus) asks it too
  }
  ~StopSignals() {
    snip::set_stop_check(nullptr);
    for (int i = 0; i < kCount; ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // Set-up is over (the run or compare is recorded and its own loop asks requested()): reads
  // from here on, e.g. of the checkpoint being replaced by the last save, are never cut short.
  void set_up_done() { snip::set_stop_check(nullptr); }

  static bool requested() { return received().load() != 0 || output_failed(); }
  // The shell's status for a process ended by that signal (128 + its number: 130 for Ctrl-C,
  // 143 for SIGTERM, 129 for SIGHUP), which a command stopped by it exits with after saving
  // (Interrupted), so `snip train ... && next` does not go on with an unfinished run.
  static int exit_status() { return received().load() != 0 ? 128 + received().load() : output_failure_status(); }
  // How the stop was asked for, for the run's message: "Ctrl-C", "SIGTERM", "SIGHUP" ("" if not).
  static std::string name() {
    switch (received().load()) {
      case SIGINT:
        return "Ctrl-C";
      case SIGTERM:
        return "SIGTERM";
      case SIGHUP:
        return "SIGHUP";
      default:
        return output_failed() ? "a failed write (" + output_failure() + ")" : "";
    }
  }

 private:
  static constexpr int kCount = 3;
  static constexpr int kSignals[kCount] = {SIGINT, SIGTERM, SIGHUP};

  static std::atomic<int>& received() {
    static std::atomic<int> sig{0};  // lock-free: safe to store from a signal handler
    return sig;
  }
  static std::atomic<unsigned>& handled_mask() {
    static std::atomic<unsigned> mask{0};
    return mask;
  }
  static void on_signal(int sig) {
    int none = 0;
    received().compare_exchange_strong(none, sig);
    // Said at once (write(2) is async-signal-safe): a step can be long, and silence would look
    // like the signal was lost.
    static constexpr char kSaid[] =
        "\nstopping after the current step or micro-batch (its checkpoint and rows are kept); a second signal "
        "ends it at once\n";
    [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, kSaid, sizeof kSaid - 1);
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    const unsigned handled = handled_mask().load();
    for (int i = 0; i < kCount; ++i)
      if (handled & (1u << i)) sigaction(kSignals[i], &dfl, nullptr);  // async-signal-safe
  }

  struct sigaction previous_[kCount] {};
};

// Thrown by a command that a signal stopped after it saved what it had (a checkpoint, the
// finished trainings of a compare): main() prints the message as it is (not as an error) and
// exits with `status` (StopSignals::exit_status).
struct Interrupted {
  std::string message;
  int status;
};

}  // namespace snip::cli
