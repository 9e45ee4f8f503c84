// Where a checkpoint may go: what may be replaced there (is_snip_checkpoint), the pre-flight of
// a run's checkpoint location (check_checkpoint_target) and the lock that keeps two runs from
// writing one location (CheckpointLock). checkpoint.h documents the rules.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <set>

#include "snip/atomic_file.h"
#include "snip/checkpoint.h"
#include "snip/error.h"
#include "snip/files_in_use.h"

namespace snip {
namespace fs = std::filesystem;

namespace {

const std::set<std::string>& checkpoint_files() {
  static const std::set<std::string> files = {"config.json", "model.safetensors", "optimizer.safetensors",
                                              "trainer_state.json"};
  return files;
}

std::string kind_of(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(p, ec);
  switch (st.type()) {
    case fs::file_type::regular:
      return "a regular file";
    case fs::file_type::directory:
      return "a folder";
    case fs::file_type::symlink:
      return "a symbolic link";
    case fs::file_type::character:
      return "a character device";
    case fs::file_type::block:
      return "a block device";
    case fs::file_type::fifo:
      return "a named pipe (FIFO)";
    case fs::file_type::socket:
      return "a socket";
    default:
      return "something that is not a folder";
  }
}

bool is_step_name(const std::string& name) {
  return name.size() > 5 && name.rfind("step-", 0) == 0 && name.find_first_not_of("0123456789", 5) == std::string::npos;
}

// `dir` without trailing slashes, a symbolic link at it followed to the folder it names.
std::string resolved(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  if (fs::is_symlink(dir, ec)) {
    const fs::path target = fs::canonical(dir, ec);
    if (ec)
      throw Error("checkpoint location " + dir_in + " is a symbolic link to a missing folder (" +
                  fs::read_symlink(dir, ec).string() + "): create that folder or give another path");
    return target.string();
  }
  return dir;
}

// True when `inner` is `outer` or inside it (both canonical where they exist).
bool is_within(const fs::path& inner, const fs::path& outer) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(inner, ec), b = fs::weakly_canonical(outer, ec);
  auto ia = a.begin();
  for (auto ib = b.begin(); ib != b.end(); ++ib, ++ia) {
    if (ib->empty()) continue;  // trailing separator
    if (ia == a.end() || *ia != *ib) return false;
  }
  return true;
}

bool same_folder(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  const bool eq = fs::equivalent(a, b, ec);
  return !ec && eq;
}

void refuse_reserved_names(const std::string& dir, const std::string& given) {
  const std::string name = fs::path(dir).filename().string();
  if (dir.empty()) throw Error("the checkpoint location is empty: give --out a folder name, e.g. --out ck/run-1");
  if (dir == "/" || name == "." || name == "..")
    throw Error("checkpoint location \"" + given +
                "\" names an existing folder by itself, not a checkpoint folder of its own (snip replaces the "
                "whole checkpoint folder): give --out a new folder name, e.g. --out " +
                (dir == "/" ? std::string("/tmp") : given) + "/run-1");
}

void make_parent(const fs::path& parent, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (!ec) return;
  for (fs::path p = parent; !p.empty() && p != p.root_path(); p = p.parent_path()) {
    if (fs::exists(fs::symlink_status(p, ec)) && !fs::is_directory(p, ec))
      throw Error("cannot save checkpoint " + dir + ": " + p.string() + " is " + kind_of(p) +
                  ", not a folder; give --out a path in a folder");
  }
  throw Error("cannot save checkpoint " + dir + ": cannot create the folder " + parent.string() + ": " + ec.message() +
              " (choose a writable location for the checkpoint)");
}

// What is in an existing folder that is not this run's to replace; "" when it may be replaced.
std::string foreign_contents(const std::string& dir, const CheckpointTargetOptions& o) {
  std::error_code ec;
  if (fs::is_empty(dir, ec) && !ec) return "";
  if (o.per_step) {
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      std::string why;
      if (!is_step_name(name)) return "it holds " + name + ", which is not a step-<N> checkpoint of snip";
      if (!is_snip_checkpoint(it->path().string(), &why)) return name + " is not a snip checkpoint: " + why;
    }
    return "";
  }
  std::string why;
  if (!is_snip_checkpoint(dir, &why, same_folder(dir, o.resumed_from) ? o.resumed_state : nullptr))
    return "it is not a snip checkpoint (" + why +
           ") and snip replaces the whole checkpoint folder, which would delete what is in it";
  if (o.overwrite || same_folder(dir, o.resumed_from)) return "";
  std::string step = "?";
  try {
    step = std::to_string(read_trainer_state(dir).at("step").get<int64_t>());
  } catch (const std::exception&) {
  }
  return "it holds the checkpoint of another run (step " + step + "): give --out a new folder name, continue that " +
         "run with --resume " + dir + ", or pass --overwrite to replace it";
}

void check_existing(const std::string& dir, const std::string& given, const CheckpointTargetOptions& o) {
  if (!o.db_path.empty() && is_within(o.db_path, dir))
    throw Error("cannot save checkpoint " + given + ": it holds the experiment database " + o.db_path +
                ", and snip replaces the whole checkpoint folder: give --out a new folder name, e.g. " + given +
                "/run-1 (nothing was changed)");
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st))
    throw Error("cannot save checkpoint " + given + ": it is " + kind_of(dir) +
                ", not a folder, and snip would replace it: give --out a new folder name (nothing was changed)");
  const std::string foreign = foreign_contents(dir, o);
  if (!foreign.empty())
    throw Error("cannot save checkpoint " + given + ": " + foreign +
                (foreign.find("--out") == std::string::npos ? "; give --out a new folder name" : "") +
                " (nothing was changed)");
}

// Creates and removes `<dir>.tmp-<pid>` (the name write_checkpoint saves into) with a file in it
// written the way checkpoint files are: a read-only place, a full disk at open or a name too
// long shows now, not after the training.
void probe_writable(const std::string& dir, const std::string& given) {
  const std::string probe = dir + ".tmp-" + std::to_string(::getpid());
  std::error_code ec;
  const std::string kept =
      fs::exists(dir, ec) ? "; the previous checkpoint in " + given + " is intact" : "; no checkpoint was written";
  fs::remove_all(probe, ec);
  if (::mkdir(probe.c_str(), 0755) != 0) {
    const int e = errno;
    const std::string why = e == ENAMETOOLONG ? "the name is too long for the file system; choose a shorter --out"
                            : e == EACCES || e == EROFS || e == EPERM
                                ? "the location is read-only or not writable: choose a writable location for the "
                                  "checkpoint (--out)"
                                : "choose another location for the checkpoint (--out)";
    throw Error("cannot save checkpoint " + given + ": cannot create " + probe + ": " + std::strerror(e) + " (" + why +
                ")" + kept);
  }
  try {
    write_file_atomic(probe + "/trainer_state.json", std::string_view("{}\n"));
  } catch (const Error& e) {
    fs::remove_all(probe, ec);
    throw Error("cannot save checkpoint " + given + ": " + e.what() + kept);
  }
  fs::remove_all(probe, ec);
}

// The pid written in a lock file, or "" when the file holds something else.
std::string lock_owner(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string s(buf, n > 0 ? size_t(n) : 0);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s.find_first_not_of("0123456789") == std::string::npos ? s : "";
}

CheckpointLock take_lock(const std::string& dir, const std::string& given) {
  const std::string path = dir + ".lock";
  for (int attempt = 0; attempt < 16; ++attempt) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
      const int e = errno;
      if (e == ELOOP || e == EISDIR)
        throw Error("cannot lock " + given + ": " + path + " is " + kind_of(path) +
                    ", not snip's lock file; move it away or give --out another folder");
      throw Error("cannot save checkpoint " + given + ": cannot create its lock file " + path + ": " +
                  std::strerror(e) + " (choose a writable location for --out)");
    }
    struct stat mine {};
    if (::fstat(fd, &mine) != 0 || !S_ISREG(mine.st_mode)) {
      ::close(fd);
      throw Error("cannot lock " + given + ": " + path + " is " + kind_of(path) +
                  ", not snip's lock file; move it away or give --out another folder");
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const std::string owner = lock_owner(fd);
      ::close(fd);
      throw Error(given + " is in use by another snip run (process " + (owner.empty() ? "?" : owner) + " holds " +
                  path + "): wait until it ends, or give --out another folder");
    }
    // The previous holder removes the file when it lets go: if it did so between our open and
    // our flock, this lock is on a removed file; open the path again.
    struct stat now {};
    if (::stat(path.c_str(), &now) != 0 || now.st_ino != mine.st_ino || now.st_dev != mine.st_dev) {
      ::close(fd);
      continue;
    }
    if (mine.st_size > 0 && lock_owner(fd).empty()) {
      ::close(fd);
      throw Error("cannot lock " + given + ": " + path +
                  " exists and is not snip's lock file; move it away or give --out another folder");
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size())) {
      const int e = errno;
      ::unlink(path.c_str());
      ::close(fd);
      throw Error("cannot save checkpoint " + given + ": cannot write its lock file " + path + ": " + std::strerror(e) +
                  " (choose a writable location for --out)");
    }
    return CheckpointLock(fd, path);
  }
  throw Error("cannot lock " + given + ": " + path + " keeps changing (another snip run starting at the same time?)");
}

}  // namespace

bool is_snip_checkpoint(const std::string& dir, std::string* why_not, const nlohmann::json* given_state) {
  const auto no = [&](const std::string& why) {
    if (why_not) *why_not = why;
    return false;
  };
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return no(dir + " is " + kind_of(dir) + ", not a folder");
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (checkpoint_files().count(name) == 0) return no("it holds " + name + ", which snip did not write");
    if (!fs::is_regular_file(fs::symlink_status(it->path(), ec)))
      return no(name + " is " + kind_of(it->path()) + ", not a regular file");
  }
  if (ec) return no("it cannot be listed: " + ec.message());
  for (const char* need : {"config.json", "model.safetensors", "trainer_state.json"})
    if (!fs::exists(fs::path(dir) / need)) return no(std::string(need) + " is missing");
  try {
    const nlohmann::json state = given_state ? *given_state : read_trainer_state(dir);
    if (!state.is_object() || !state.contains("step") || !state.contains("config") || !state.contains("data"))
      return no("trainer_state.json is not a snip trainer state");
  } catch (const std::exception&) {
    return no("trainer_state.json is not valid JSON");
  }
  return true;
}

CheckpointLock& CheckpointLock::operator=(CheckpointLock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

void CheckpointLock::release() {
  if (fd_ < 0) return;
  ::unlink(path_.c_str());  // while still held: a waiter that opened this file sees it was removed
  ::close(fd_);
  fd_ = -1;
}

CheckpointLock check_checkpoint_target(const std::string& given, const CheckpointTargetOptions& options) {
  std::string trimmed = given;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  refuse_reserved_names(trimmed, given);
  const std::string dir = resolved(trimmed);
  refuse_reserved_names(dir, given);
  if (const std::string why = sqlite_conflict(dir); !why.empty())
    throw Error("cannot save checkpoints in " + given + ": " + why + " (nothing was written)");
  const fs::path target(dir);
  make_parent(target.has_parent_path() ? target.parent_path() : fs::path("."), given);
  probe_writable(dir, given);
  CheckpointLock lock = take_lock(dir, given);
  check_existing(dir, given, options);
  return lock;
}

}  // namespace snip

namespace snip {

CheckpointLock claim_output_folder(const std::string& given) {
  std::string trimmed = given;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  refuse_reserved_names(trimmed, given);
  const std::string dir = resolved(trimmed);
  if (const std::string why = sqlite_conflict(dir); !why.empty())
    throw Error("cannot write into " + given + ": " + why + " (nothing was written)");
  // The folder and every folder above it: none may be a checkpoint or held by a live run.
  for (fs::path p = fs::path(dir); !p.empty(); p = p.parent_path()) {
    std::error_code ec;
    if (fs::is_directory(p, ec) && is_snip_checkpoint(p.string()))
      throw Error("cannot write into " + given + ": " + (p.string() == dir ? "it is" : "it lies inside") +
                  " the snip checkpoint " + p.string() +
                  ", which holds a run's files and nothing else (a foreign file would make the run's next save "
                  "fail); give --out a folder of its own (nothing was written)");
    const std::string lock = p.string() + ".lock";
    if (p.string() != dir && ::access(lock.c_str(), F_OK) == 0) {
      const int fd = ::open(lock.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
      if (fd >= 0) {
        const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0;
        const std::string owner = held ? lock_owner(fd) : "";
        ::close(fd);
        if (held)
          throw Error("cannot write into " + given + ": it lies inside " + p.string() +
                      ", which is in use by another snip run (process " + (owner.empty() ? "?" : owner) + " holds " +
                      lock + "); wait until it ends, or give --out a folder of its own");
      }
    }
    if (p == p.parent_path()) break;
  }
  return take_lock(dir, given);
}

}  // namespace snip
