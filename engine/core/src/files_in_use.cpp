// A process-wide table of (device, inode) → what holds the file; see files_in_use.h.
#include "snip/files_in_use.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <string_view>
#include <utility>

namespace snip {

namespace {

struct Entry {
  std::string what;
  int count = 0;
};

// Recursive: open_file_in_use's callback may ask file_in_use (the store's header check does).
std::recursive_mutex& table_mutex() {
  static std::recursive_mutex m;
  return m;
}
using Table = std::map<std::pair<unsigned long long, unsigned long long>, Entry>;
Table& table() {  // databases
  static Table t;
  return t;
}
Table& inputs() {  // protect_input: files and folders (a folder's entry covers what is in it)
  static Table t;
  return t;
}

bool identity(const std::string& path, unsigned long long& dev, unsigned long long& ino) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  dev = st.st_dev;
  ino = st.st_ino;
  return true;
}

std::string lookup(const std::string& path, const Table& t = table()) {
  unsigned long long dev = 0, ino = 0;
  if (!identity(path, dev, ino)) return "";
  const auto it = t.find({dev, ino});
  return it == t.end() ? "" : it->second.what;
}

void release(Table& t, unsigned long long dev, unsigned long long ino) {
  const auto it = t.find({dev, ino});
  if (it != t.end() && --it->second.count == 0) t.erase(it);
}

}  // namespace

FileInUse::FileInUse(FileInUse&& other) noexcept
    : dev_(other.dev_), ino_(other.ino_), active_(std::exchange(other.active_, false)), input_(other.input_) {}

FileInUse& FileInUse::operator=(FileInUse&& other) noexcept {
  if (this != &other) {
    FileInUse old(std::move(*this));
    dev_ = other.dev_;
    ino_ = other.ino_;
    active_ = std::exchange(other.active_, false);
    input_ = other.input_;
  }
  return *this;
}

FileInUse::~FileInUse() {
  if (!active_) return;
  std::lock_guard lock(table_mutex());
  release(input_ ? inputs() : table(), dev_, ino_);
}

FileInUse FileInUse::enter(bool input, const std::string& path, std::string what) {
  FileInUse use;
  if (!identity(path, use.dev_, use.ino_)) return use;  // missing (or vanished at once): nothing to protect
  Entry& e = (input ? inputs() : table())[{use.dev_, use.ino_}];
  if (e.count++ == 0) e.what = std::move(what);
  use.active_ = true;
  use.input_ = input;
  return use;
}

FileInUse open_file_in_use(const std::string& path, std::string what, const std::function<void()>& open_it) {
  std::lock_guard lock(table_mutex());
  open_it();
  return FileInUse::enter(false, path, std::move(what));
}

std::unique_lock<std::recursive_mutex> hold_files_in_use() {
  return std::unique_lock(table_mutex());
}

std::string file_in_use(const std::string& path) {
  std::lock_guard lock(table_mutex());
  if (std::string what = lookup(path); !what.empty()) return what;
  for (std::string_view suffix : {"-wal", "-shm", "-journal"}) {
    if (path.size() > suffix.size() && std::string_view(path).substr(path.size() - suffix.size()) == suffix) {
      std::string what = lookup(path.substr(0, path.size() - suffix.size()));
      if (!what.empty()) return what + " (its " + std::string(suffix.substr(1)) + " file)";
    }
  }
  return "";
}

FileInUse protect_input(const std::string& path, std::string what) {
  std::lock_guard lock(table_mutex());
  return FileInUse::enter(true, path, std::move(what));
}

namespace {

constexpr std::string_view kSqliteSidecars[] = {"-wal", "-shm", "-journal"};

const char* sidecar_role(std::string_view suffix) {
  return suffix == "-wal" ? "write-ahead log" : suffix == "-shm" ? "shared-memory index" : "rollback journal";
}

// True when `path` is a regular file that starts with SQLite's 16-byte header. A database this
// process has open counts without being read (a raw open and close would drop its locks).
bool is_sqlite_database(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  if (!lookup(path).empty()) return true;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return false;
  char header[16] = {};
  const bool yes = ::pread(fd, header, sizeof header, 0) == ssize_t(sizeof header) &&
                   std::memcmp(header, "SQLite format 3", 16) == 0;
  ::close(fd);
  return yes;
}

}  // namespace

std::string sqlite_sidecar_conflict(const std::string& path) {
  std::lock_guard lock(table_mutex());
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  for (std::string_view suffix : kSqliteSidecars) {
    if (p.size() <= suffix.size() || std::string_view(p).substr(p.size() - suffix.size()) != suffix) continue;
    const std::string stem = p.substr(0, p.size() - suffix.size());
    if (!is_sqlite_database(stem)) continue;
    const char* role = sidecar_role(suffix);
    return "it is the name SQLite gives the " + std::string(role) + " of the database " + stem +
           ", which SQLite would take as that database's own and delete or roll back; choose a name that does not "
           "end in " +
           std::string(suffix);
  }
  return "";
}

std::string sqlite_conflict(const std::string& path) {
  std::lock_guard lock(table_mutex());
  if (std::string why = sqlite_sidecar_conflict(path); !why.empty()) return why;
  if (is_sqlite_database(path))
    return "it is a SQLite database (an experiment store?); snip never replaces one with another file";
  return "";
}

std::string foreign_sqlite_sidecars(const std::string& db) {
  std::lock_guard lock(table_mutex());
  if (!lookup(db).empty()) return "";
  for (std::string_view suffix : kSqliteSidecars) {
    const std::string side = db + std::string(suffix);
    struct stat st {};
    if (::lstat(side.c_str(), &st) != 0) continue;
    std::string what;
    if (S_ISDIR(st.st_mode))
      what = "a folder";
    else if (!S_ISREG(st.st_mode))
      what = "not a regular file";
    else if (is_sqlite_database(side))
      what = "a SQLite database of its own";
    else
      continue;
    const char* role = sidecar_role(suffix);
    return side + " is " + what + ", but SQLite takes a file of that name for the " + role + " of " + db +
           " and would delete or replay it when opening " + db + ": rename " + side +
           " (or use another database name); nothing was changed";
  }
  return "";
}

std::string write_conflict(const std::string& path) {
  std::lock_guard lock(table_mutex());
  if (std::string what = file_in_use(path); !what.empty())
    return "it is " + what + ", which this program has open; writing there would replace it";
  if (std::string what = lookup(path, inputs()); !what.empty())
    return "it is " + what + ", which this command reads; writing there would replace it";
  // A new or replaced file inside an input folder (a checkpoint takes no foreign files).
  const std::filesystem::path p(path);
  const std::string parent = p.has_parent_path() ? p.parent_path().string() : ".";
  if (std::string what = lookup(parent, inputs()); !what.empty()) {
    struct stat st {};
    if (::stat(parent.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return "it is inside " + what + ", which this command reads as a whole; a file written there would change it";
  }
  return sqlite_conflict(path);
}

}  // namespace snip
