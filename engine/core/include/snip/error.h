// Errors: bad input is reported with snip::Error (what was wrong, where, how to fix it);
// programmer bugs stop at SNIP_ASSERT with the condition, file and line.
#pragma once
#include <stdexcept>
#include <string>

namespace snip {

// Thrown for every bad input (config, checkpoint, token file, database, infeasible budget,
// NaN in training). The message is written for the user and is printed as is by the CLI
// and shown in the GUI. Callers at the process boundary catch it; nothing below them does.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A stop asked for while a command was still setting up (reading, decompressing or tokenizing a
// corpus), before anything was trained or recorded. The front that installs a stop check (the
// CLI, while its signal handlers are in place) says how the stop was asked for and exits as the
// signal would; the message says what was under way ("while reading the corpus big.txt").
class SetUpStopped : public Error {
 public:
  using Error::Error;
};

// The front's answer to "was a stop asked for?" (nullptr: never). Long set-up work polls it
// through stop_if_requested between chunks, and a read interrupted by a signal asks it too.
void set_stop_check(bool (*check)());
// Throws SetUpStopped("while <during>") when the stop check says so.
void stop_if_requested(const std::string& during);

[[noreturn]] void assert_fail(const char* condition, const char* file, int line, const char* message);

}  // namespace snip

// Invariant that only a bug can break (never used for user input).
#define SNIP_ASSERT(cond)                                                 \
  do {                                                                    \
    if (!(cond)) ::snip::assert_fail(#cond, __FILE__, __LINE__, nullptr); \
  } while (0)
#define SNIP_ASSERT_MSG(cond, msg)                                      \
  do {                                                                  \
    if (!(cond)) ::snip::assert_fail(#cond, __FILE__, __LINE__, (msg)); \
  } while (0)
