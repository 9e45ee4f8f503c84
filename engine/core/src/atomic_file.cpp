// Crash-safe whole-file writes (temp + fsync + rename) and whole-file reads.
#include "snip/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include "snip/error.h"
#include "snip/files_in_use.h"

namespace snip {

namespace {
std::string dir_of(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

// Fault injection for the reliability tests (tests/reliability/, docs/BAD_INPUT.md), for machines
// where a full or read-only file system cannot be mounted:
//   SNIP_FAULT_WRITE=ENOSPC[:substring]   the write() fails with ENOSPC after half of the bytes
//   SNIP_FAULT_WRITE=EROFS[:substring]    the open() of the temp file fails with EROFS
// for every path containing `substring` (every path when it is left out). Unset: no effect.
int injected_fault(const std::string& path, bool at_open) {
  const char* spec = std::getenv("SNIP_FAULT_WRITE");
  if (spec == nullptr || *spec == '\0') return 0;
  const std::string s(spec);
  const auto colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  if (colon != std::string::npos && path.find(s.substr(colon + 1)) == std::string::npos) return 0;
  if (kind == "ENOSPC") return at_open ? 0 : ENOSPC;
  if (kind == "EROFS") return at_open ? EROFS : 0;
  return 0;
}

// What to do about a failed write, and that an existing file at `path` was kept.
std::string advice(int e, const std::string& path) {
  struct stat st {};
  const std::string kept = ::stat(path.c_str(), &st) == 0 ? "; the previous " + path + " is intact" : "";
  if (e == ENOSPC || e == EDQUOT) return " (the disk is full: free some space or write somewhere else" + kept + ")";
  if (e == ENOENT || e == ENOTDIR)
    return " (the folder " + dir_of(path) + " does not exist: create it first, or write somewhere else)";
  if (e == EROFS || e == EACCES || e == EPERM)
    return " (the location is read-only or not writable: choose a writable directory" + kept + ")";
  return kept.empty() ? "" : " (" + kept.substr(2) + ")";
}

std::string file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device (like /dev/null)";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

// The file a write to `path` must replace: `path` itself, or the final target of a chain of
// symbolic links (a link stays a link; its target gets the new contents, as editors and cp do).
std::string follow_links(const std::string& path) {
  std::string p = path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return p;
    char buf[4096];
    const ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) return p;
    const std::string link(buf, size_t(n));
    p = link[0] == '/' ? link : dir_of(p) + "/" + link;
  }
  throw Error("cannot write " + path + ": too many levels of symbolic links (a link loop?); nothing was written");
}
}  // namespace

std::string checked_write_target(const std::string& path) {
  if (path.empty()) throw Error("cannot write a file with an empty name: give a file path");
  const std::string target = follow_links(path);
  if (const std::string why = write_conflict(path); !why.empty())
    throw Error("cannot write " + path + ": " + why + ": give another file path (nothing was written)");
  struct stat st {};
  // lstat of the resolved name; stat of the given one catches what readlink cannot name (the
  // kernel's links in /proc, e.g. /dev/stdout -> /proc/self/fd/1 -> "pipe:[…]").
  bool named = ::lstat(target.c_str(), &st) == 0;
  if (!named || S_ISREG(st.st_mode)) {
    struct stat via_link {};
    if (::stat(path.c_str(), &via_link) != 0 || S_ISREG(via_link.st_mode)) return target;  // missing: created
    st = via_link;
    named = false;
  }
  const std::string via = target == path || !named ? "" : " (the symbolic link points to " + target + ")";
  throw Error("cannot write " + path + ": it is " + file_kind(st.st_mode) + via +
              ", not a regular file; snip replaces the file it writes, so it only writes regular files or new "
              "paths: give a file path (nothing was written)");
}

namespace {
// The permission bits the new file gets: those of the file it replaces (else 0644 less umask).
void keep_mode(int fd, const std::string& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::fchmod(fd, st.st_mode & 07777);
}
}  // namespace

void write_file_atomic(const std::string& requested, const void* data, size_t size) {
  // No thread may open `requested` as a database between the check and the rename.
  const auto hold = hold_files_in_use();
  // Refused before anything is created: a directory, device, FIFO or socket is never replaced.
  const std::string path = checked_write_target(requested);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int open_fault = injected_fault(path, /*at_open=*/true);
  int fd = open_fault ? (errno = open_fault, -1) : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    const int e = errno;
    throw Error("cannot write " + path + ": " + std::strerror(e) + advice(e, path));
  }
  keep_mode(fd, path);
  // An injected ENOSPC lets the first half be written, as a disk that fills up mid-file does.
  const int write_fault = injected_fault(path, /*at_open=*/false);
  const size_t limit = write_fault ? size / 2 : size;
  const char* p = static_cast<const char*>(data);
  size_t left = size;
  while (left > 0) {
    const size_t done = size - left;
    ssize_t n = done >= limit ? (errno = write_fault, -1) : ::write(fd, p, limit - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      throw Error("cannot write " + path + ": " + std::strerror(e) + advice(e, path));
    }
    p += n;
    left -= size_t(n);
  }
  if (::fsync(fd) != 0) {
    int e = errno;
    ::close(fd);
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path + ": fsync failed: " + std::strerror(e) + advice(e, path));
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    throw Error("cannot write " + path + ": rename failed: " + std::strerror(e) + advice(e, path));
  }
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace {

// Bytes of the pipes read so far, by device and inode: a pipe gives its bytes once.
struct PipeKey {
  dev_t dev;
  ino_t ino;
  bool operator<(const PipeKey& o) const { return dev != o.dev ? dev < o.dev : ino < o.ino; }
};
constexpr uint64_t kKeptPipeBytes = uint64_t(64) << 20;
std::mutex g_pipes_mutex;
std::map<PipeKey, std::optional<std::string>>& read_pipes() {
  static std::map<PipeKey, std::optional<std::string>> pipes;  // nullopt: too long to keep
  return pipes;
}

std::string too_long(const std::string& path, const std::string& what_it_is, uint64_t max_bytes) {
  char limit[32];
  std::snprintf(limit, sizeof limit, "%.3g", double(max_bytes) / double(1 << 30));
  return path + ": " + what_it_is + " is longer than the " + limit + " GiB snip reads into memory";
}

}  // namespace

std::string read_file(const std::string& path, uint64_t max_bytes, const std::string& what_it_is,
                      const std::string& fix) {
  // Opening and closing a database this process has open would drop its SQLite locks
  // (files_in_use.h), so such a file is refused unopened.
  const auto hold = hold_files_in_use();
  if (const std::string what = file_in_use(path); !what.empty())
    throw Error("cannot read " + path + ": it is " + what +
                ", which this program has open, not the file expected here; was it passed by mistake?");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error("cannot read " + path + ": it is a directory, not a file");
    if (S_ISREG(st.st_mode) && uint64_t(st.st_size) > max_bytes)
      throw Error(too_long(path, what_it_is, max_bytes) + " (it is " + std::to_string(uint64_t(st.st_size)) +
                  " bytes)" + fix);
  }
  const bool pipe = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode);
  const PipeKey key{st.st_dev, st.st_ino};
  if (pipe) {
    std::lock_guard lock(g_pipes_mutex);
    const auto it = read_pipes().find(key);
    if (it != read_pipes().end()) {
      if (it->second) return *it->second;
      throw Error("cannot read " + path +
                  " a second time: it is a pipe, whose bytes come once, and they were too many to keep (over 64 MiB); "
                  "give a regular file instead");
    }
  }
  struct Fd {  // closed on every way out
    int fd = -1;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } f;
  while ((f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC)) < 0 && errno == EINTR)
    stop_if_requested("opening " + path);
  if (f.fd < 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
  std::string out;
  if (S_ISREG(st.st_mode)) out.reserve(size_t(st.st_size));
  std::vector<char> buf(size_t(1) << 20);
  for (;;) {
    const ssize_t n = ::read(f.fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) {
      stop_if_requested("reading " + path);
      continue;
    }
    if (n < 0) throw Error("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    stop_if_requested("reading " + path);  // a signal that came before the read began
    if (out.size() + uint64_t(n) > max_bytes)
      throw Error(too_long(path, what_it_is, max_bytes) + " (more than " + std::to_string(max_bytes) +
                  " bytes came through it)" + fix);
    out.append(buf.data(), size_t(n));
  }
  if (pipe) {
    std::lock_guard lock(g_pipes_mutex);
    read_pipes()[key] = out.size() > kKeptPipeBytes ? std::nullopt : std::optional<std::string>(out);
  }
  return out;
}

}  // namespace snip
