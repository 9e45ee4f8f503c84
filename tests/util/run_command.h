// Runs a shell command the way a user's terminal would and keeps what they would see: the exit
// status and stdout+stderr together. Shared by the tests that drive the real `snip` binary.
#pragma once
#include <sys/wait.h>

#include <cstdio>
#include <string>

namespace snip_test {

struct CommandResult {
  int status = -1;  // exit status; -1 when killed by a signal (a crash)
  std::string out;  // stdout and stderr together, as on a terminal
};

namespace detail {
inline CommandResult run_popen(const std::string& cmd) {
  CommandResult r;
  FILE* f = popen(cmd.c_str(), "r");
  char buf[4096];
  size_t n;
  while (f && (n = fread(buf, 1, sizeof buf, f)) > 0) r.out.append(buf, n);
  const int st = f ? pclose(f) : -1;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}
}  // namespace detail

inline CommandResult run_shell(const std::string& command) {
  return detail::run_popen(command + " 2>&1");
}

// The same with only stdout kept (stderr dropped): for commands whose stdout is parsed (--json)
// while progress goes to stderr.
inline CommandResult run_stdout(const std::string& command) {
  return detail::run_popen(command + " 2>/dev/null");
}

}  // namespace snip_test
