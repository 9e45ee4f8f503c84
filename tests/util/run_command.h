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

inline CommandResult run_shell(const std::string& command) {
  CommandResult r;
  const std::string cmd = command + " 2>&1";
  FILE* f = popen(cmd.c_str(), "r");
  char buf[4096];
  while (f && fgets(buf, sizeof buf, f)) r.out += buf;
  const int st = f ? pclose(f) : -1;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace snip_test
