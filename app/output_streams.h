// The one place `snip` checks what it writes to standard output and standard error.
//
// SIGPIPE is ignored for the whole process (main), so a reader that goes away (`snip train
// --json | head`) turns the next write into an EPIPE error instead of ending the process with
// nothing saved. Every command's output then goes through stdio, whose error flag this module
// reads:
//  - a command that trains asks output_failed() after each step's output and stops like on
//    SIGTERM (checkpoint saved, run interrupted, resume command printed, exit 141);
//  - main() asks finish_stdout() after every command: a write error on the way (a full disk, a
//    closed pipe, /dev/full) is an error with a non-zero exit status, never exit 0 with a cut
//    output.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>

namespace snip::cli {

// Ignores SIGPIPE (write errors become EPIPE, checked here). Called once, first thing in main.
void ignore_sigpipe();

// Whether a write to stdout has failed so far, or one to stderr because its reader went away
// (a closed or full stderr alone is no reason to stop). Cheap: reads stdio's error flags.
bool output_failed();

// The failed stream and the reason, as a clause ("standard output: Broken pipe — its reader went
// away"), or "" when nothing failed.
std::string output_failure();

// The exit status for the failure: 141 (128 + SIGPIPE, what a shell shows for a process ended
// by a broken pipe) when a reader went away, 1 for any other write error.
int output_failure_status();

// `j` as JSON text for the user (every --json output): a string that is not UTF-8 (a folder
// name in another encoding, stored as the user's bytes) is written as printable_text escapes it
// ("r\xff"), where nlohmann would throw for the whole output. `indent` as for dump().
std::string json_text(const nlohmann::json& j, int indent = -1);

// Flushes stdout; returns 0 when everything written reached it, else prints "error: ..." on
// stderr (where it can) and returns output_failure_status().
int finish_stdout();

}  // namespace snip::cli
