// A process-wide table of (device, inode) → what holds the file; see files_in_use.h.
#include "snip/files_in_use.h"

#include <sys/stat.h>

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
std::map<std::pair<unsigned long long, unsigned long long>, Entry>& table() {
  static std::map<std::pair<unsigned long long, unsigned long long>, Entry> t;
  return t;
}

bool identity(const std::string& path, unsigned long long& dev, unsigned long long& ino) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return false;
  dev = st.st_dev;
  ino = st.st_ino;
  return true;
}

std::string lookup(const std::string& path) {
  unsigned long long dev = 0, ino = 0;
  if (!identity(path, dev, ino)) return "";
  const auto it = table().find({dev, ino});
  return it == table().end() ? "" : it->second.what;
}

}  // namespace

FileInUse::FileInUse(FileInUse&& other) noexcept
    : dev_(other.dev_), ino_(other.ino_), active_(std::exchange(other.active_, false)) {}

FileInUse& FileInUse::operator=(FileInUse&& other) noexcept {
  if (this != &other) {
    FileInUse old(std::move(*this));
    dev_ = other.dev_;
    ino_ = other.ino_;
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

FileInUse::~FileInUse() {
  if (!active_) return;
  std::lock_guard lock(table_mutex());
  const auto it = table().find({dev_, ino_});
  if (it != table().end() && --it->second.count == 0) table().erase(it);
}

FileInUse open_file_in_use(const std::string& path, std::string what, const std::function<void()>& open_it) {
  std::lock_guard lock(table_mutex());
  open_it();
  FileInUse use;
  if (!identity(path, use.dev_, use.ino_)) return use;  // vanished at once: nothing to protect
  Entry& e = table()[{use.dev_, use.ino_}];
  if (e.count++ == 0) e.what = std::move(what);
  use.active_ = true;
  return use;
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

}  // namespace snip
