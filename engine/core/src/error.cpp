// Assertion failure reporting for SNIP_ASSERT; the set-up stop check.
#include "snip/error.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace snip {

namespace {
std::atomic<bool (*)()> g_stop_check{nullptr};
}  // namespace

void set_stop_check(bool (*check)()) {
  g_stop_check.store(check);
}

void stop_if_requested(const std::string& during) {
  bool (*check)() = g_stop_check.load();
  if (check && check()) throw SetUpStopped("while " + during);
}

void assert_fail(const char* condition, const char* file, int line, const char* message) {
  std::fprintf(stderr, "internal error: assertion `%s` failed at %s:%d%s%s\n", condition, file, line,
               message ? ": " : "", message ? message : "");
  std::abort();
}

}  // namespace snip
