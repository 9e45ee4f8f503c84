// See output_streams.h.
#include "output_streams.h"

#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>

#include "snip/store_export.h"

namespace snip::cli {

namespace {

bool valid_utf8(const std::string& s) {
  try {
    (void)nlohmann::json(s).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

nlohmann::json with_printable_strings(const nlohmann::json& j, int depth) {
  if (j.is_string()) {
    const std::string& s = j.get_ref<const std::string&>();
    return valid_utf8(s) ? j : nlohmann::json(snip::printable_text(s));
  }
  if (depth > 256) return j;  // our outputs nest a few levels
  if (j.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : j) out.push_back(with_printable_strings(v, depth + 1));
    return out;
  }
  if (j.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = j.begin(); it != j.end(); ++it)
      out[valid_utf8(it.key()) ? it.key() : snip::printable_text(it.key())] =
          with_printable_strings(it.value(), depth + 1);
    return out;
  }
  return j;
}

}  // namespace

std::string json_text(const nlohmann::json& j, int indent) {
  try {
    return j.dump(indent);
  } catch (const nlohmann::json::type_error&) {  // 316: a string that is not UTF-8
    return with_printable_strings(j, 0).dump(indent);
  }
}

namespace {

// The errno of the first failure seen, per stream (0: none seen, or not known).
int g_errno[2] = {0, 0};

// Whether `fd`'s reader went away: a pipe or socket whose other end is closed polls POLLERR.
bool reader_gone(int fd) {
  pollfd p{fd, 0, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLERR) != 0;
}

// Whether what `fd` writes to has no room left: a file on a full file system, or /dev/full.
// Asked when a stream failed and the errno of the failed write is gone (stdio reports the
// failure later, and calls in between may have reset errno).
bool no_space_left(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return false;
  if (S_ISCHR(st.st_mode)) return major(st.st_rdev) == 1 && minor(st.st_rdev) == 7;  // /dev/full
  struct statvfs vfs {};
  return S_ISREG(st.st_mode) && ::fstatvfs(fd, &vfs) == 0 && vfs.f_bavail == 0;
}

bool stream_failed(std::FILE* f, int index) {
  if (!std::ferror(f)) return false;
  if (g_errno[index] == 0) {
    const int fd = ::fileno(f);
    g_errno[index] = reader_gone(fd) ? EPIPE : no_space_left(fd) ? ENOSPC : errno != 0 ? errno : EIO;
  }
  return true;
}

// Flushes `f`, keeping the errno of a failed flush.
void flush(std::FILE* f, int index) {
  errno = 0;
  if (std::fflush(f) != 0 && g_errno[index] == 0)
    g_errno[index] = errno != 0 ? errno : no_space_left(::fileno(f)) ? ENOSPC : EIO;
}

}  // namespace

void ignore_sigpipe() {
  struct sigaction sa {};
  sa.sa_handler = SIG_IGN;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGPIPE, &sa, nullptr);
}

bool output_failed() {
  const bool out = stream_failed(stdout, 0) || std::cout.fail();
  // stderr only carries progress and messages: a closed or full one is no reason to stop, but a
  // reader that went away (`2>&1 | head`) is the same request as on stdout.
  const bool err = stream_failed(stderr, 1) && g_errno[1] == EPIPE;
  return out || err;
}

namespace {
bool stdout_failed() {
  return stream_failed(stdout, 0) || std::cout.fail();
}
}  // namespace

std::string output_failure() {
  if (!output_failed()) return "";
  const bool out = std::ferror(stdout) || std::cout.fail();
  const int e = out ? g_errno[0] : g_errno[1];
  std::string s = std::string(out ? "standard output" : "standard error") + ": " + std::strerror(e != 0 ? e : EIO);
  if (e == EPIPE) s += " — its reader went away (a pipe into head, a closed terminal or socket)";
  if (e == ENOSPC || e == EDQUOT) s += " — the disk is full";
  return s;
}

int output_failure_status() {
  const bool out = std::ferror(stdout) || std::cout.fail();
  return (out ? g_errno[0] : g_errno[1]) == EPIPE ? 128 + SIGPIPE : 1;
}

int finish_stdout() {
  flush(stdout, 0);  // first: std::cout (synchronised with stdio) would flush it and lose the errno
  std::cout.flush();
  if (!stdout_failed()) return 0;
  std::fprintf(stderr, "error: writing the output failed (%s); the output is incomplete\n", output_failure().c_str());
  return output_failure_status();
}

}  // namespace snip::cli
