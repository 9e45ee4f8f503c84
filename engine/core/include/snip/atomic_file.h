// Crash-safe file writes: write a temp file beside the target, fsync, rename, fsync the
// directory. A reader sees the old file or the new one, never a half-written one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace snip {

// `path` may be a missing path, a regular file or a symbolic link to one (the link is kept and
// its final target replaced, keeping the target's permission bits). Anything else that exists
// (a directory, a device such as /dev/null, a FIFO, a socket) is refused before any temp file
// is created (checked_write_target). Throws snip::Error naming the path, the OS error and what to do (disk full,
// read-only, ...). On failure the previous file at `path` is untouched and no temp file is left behind. Tests inject
// failures with the environment variable SNIP_FAULT_WRITE=ENOSPC[:substring] (the write fails half-way) or
// EROFS[:substring] (the temp file cannot be created), for paths containing `substring`; see atomic_file.cpp.
void write_file_atomic(const std::string& path, const void* data, size_t size);
inline void write_file_atomic(const std::string& path, std::string_view text) {
  write_file_atomic(path, text.data(), text.size());
}

// The file a write to `path` replaces (the final target when `path` is a symbolic link); throws
// snip::Error saying what is there when it exists and is not a regular file, or when it is a
// database this process has open or an input of the command at hand (write_conflict,
// files_in_use.h). Every writer of a user-named file calls it (write_file_atomic does) before
// creating anything.
std::string checked_write_target(const std::string& path);

// Reads a whole file; throws snip::Error naming the path when it cannot. At most `max_bytes`:
// a longer file is refused before its bytes are read (by its size, or for a pipe as they come),
// the message naming `what_it_is`, the limit and then `fix`. A pipe, FIFO or `<(…)` can be read only once,
// so its bytes (up to 64 MiB) are kept and a second read of it in this process gets the same
// ones. A read interrupted by a signal asks the stop check (error.h) and ends as SetUpStopped.
std::string read_file(const std::string& path, uint64_t max_bytes = UINT64_MAX,
                      const std::string& what_it_is = "the file", const std::string& fix = "");

// `text` without a leading UTF-8 byte-order mark (EF BB BF, which spreadsheet programs on
// Windows write before a CSV): every text format we read starts after it.
inline std::string_view without_utf8_bom(std::string_view text) {
  return text.substr(0, 3) == "\xEF\xBB\xBF" ? text.substr(3) : text;
}

}  // namespace snip
