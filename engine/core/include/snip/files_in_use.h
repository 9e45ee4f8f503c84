// The files this process holds open through SQLite, so no other code of ours opens them raw.
//
// POSIX record locks belong to the process, not to the descriptor: closing *any* descriptor of
// a file drops every lock the process holds on it. SQLite's WAL mode relies on them: each
// connection holds a shared lock on the database file, and a connection that closes while it
// can take the exclusive lock believes it is the last one, checkpoints ignoring everyone's read
// marks and deletes the WAL and its index. So a process that opens and closes a database file
// it already has open (to read its header, to read it as a plan passed by mistake, to replace it
// with an export) silently drops its connections' locks, and the next process to close a
// connection can corrupt what this one reads ("How To Corrupt An SQLite Database File", 2.2).
// The store registers every database it opens here; read_file, write_file_atomic and the
// store's own header check ask first and never open a registered file.
#pragma once
#include <functional>
#include <mutex>
#include <string>

namespace snip {

// A registration, removed when destroyed. Move-only.
class FileInUse {
 public:
  FileInUse() = default;
  FileInUse(FileInUse&& other) noexcept;
  FileInUse& operator=(FileInUse&& other) noexcept;
  FileInUse(const FileInUse&) = delete;
  FileInUse& operator=(const FileInUse&) = delete;
  ~FileInUse();

 private:
  friend FileInUse open_file_in_use(const std::string&, std::string, const std::function<void()>&);
  unsigned long long dev_ = 0, ino_ = 0;
  bool active_ = false;
};

// Runs `open_it` (which may read `path` raw when file_in_use(path) is empty: nothing of this
// process holds it yet) and then registers `path` as used for `what` (e.g. "the experiment
// database a.db"), as one step with respect to every other thread's open_file_in_use,
// file_in_use, read_file and write_file_atomic. `path` must exist once `open_it` returns.
FileInUse open_file_in_use(const std::string& path, std::string what, const std::function<void()>& open_it);

// Holds the table: while the returned lock lives no thread registers a file, so a raw reader
// or writer that found `path` free (file_in_use) can open and close it safely.
[[nodiscard]] std::unique_lock<std::recursive_mutex> hold_files_in_use();

// What this process uses `path` for (through symbolic links; a database's -wal, -shm and
// -journal files count as the database), or "" when nothing.
std::string file_in_use(const std::string& path);

}  // namespace snip
