// The files this process holds open through SQLite, so no other code of ours opens them raw;
// and the inputs of the command at hand, so none of its writes replaces them.
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
  friend FileInUse protect_input(const std::string&, std::string);
  // Registers `path` in the inputs' or the databases' table (the caller holds the table's lock).
  static FileInUse enter(bool input, const std::string& path, std::string what);
  unsigned long long dev_ = 0, ino_ = 0;
  bool active_ = false;
  bool input_ = false;  // in the inputs' table (protect_input), not the databases'
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

// Inputs: what a command reads (a `--in` file, a checkpoint's folder), which none of its own
// writes may replace. Unlike a database, an input may be read raw any number of times; only
// write_file_atomic (through checked_write_target) asks. `path` is a file or a folder; a folder
// protects every file in it and refuses new ones too (a checkpoint is the folder as a whole).
// `what` names it for the error ("the input matrix m.f32 (--in)"). Registered while the returned
// handle lives; a missing path registers nothing.
FileInUse protect_input(const std::string& path, std::string what);

// Why `path` may not become a file or folder of ours because of SQLite, as a clause ("it is a
// SQLite database; …"), or "": it is a SQLite database (its header; a database this process has
// open is not read), or it bears the name SQLite gives the write-ahead log, shared-memory index
// or rollback journal of a database beside it ("w.db-wal" next to w.db), which SQLite takes as
// that database's own and deletes or rolls back when it opens or closes w.db.
std::string sqlite_conflict(const std::string& path);
// The part of sqlite_conflict that is about the name: `path` is named as the WAL, index or
// journal of a database beside it. "" when not.
std::string sqlite_sidecar_conflict(const std::string& path);
// Before a database `db` is opened: a file or folder bearing the name of one of its WAL, index
// or journal that SQLite would take for its own and delete (another SQLite database, a folder),
// as a sentence naming it and what to do; "" when there is none (or `db` is open here already).
std::string foreign_sqlite_sidecars(const std::string& db);

// Why a write to `path` would destroy something this process holds (a database it has open, an
// input, or a file in an input folder), as a clause ("it is …; writing there would replace it"),
// or "" when nothing does.
std::string write_conflict(const std::string& path);

}  // namespace snip
