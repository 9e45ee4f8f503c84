// Internal: Store::Impl, shared by the .cpp files that implement the Store's entities
// (run_store, metric_store, stats_store, plan_store, validation_store), and JSON helpers.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "snip/files_in_use.h"
#include "snip/store.h"
#include "sqlite_db.h"

namespace snip {

struct Store::Impl {
  FileInUse use;  // declared before db: released after the connection closes
  store_detail::Db db;
  std::string path;
  int version = 0;
  int busy_timeout_ms = 5000;
  bool read_only = false;
};

namespace store_detail {

// A file or folder path as the store keeps it: absolute and canonical (symbolic links and
// "." / ".." resolved as far as the path exists), so a run, its checkpoints and a compare are
// found again from any working directory. "" stays "".
std::string stored_path(const std::string& path);

// Parses a JSON column; a damaged value is reported with the table, column and row.
nlohmann::json parse_json_column(const std::string& text, const std::string& where);

// Names enter the store here (create_run, set_run_name): one line of printable text, so no
// listing can be forged by a name. Throws snip::Error for a control character.
void check_run_name(const std::string& name);

// Throws snip::Error "<path>: run N does not exist (see `snip runs`)" unless it exists.
void require_run(Db& db, int64_t run_id);

// A process is identified by (host, pid, start time): pids are reused, the start time in
// clock ticks since boot (/proc/<pid>/stat field 22) tells a new process from the old one.
// Runs and compares are owned by one (run_store.cpp).
struct ProcessId {
  int64_t pid = 0;
  std::string host;
  int64_t start = 0;
};
ProcessId this_process();
// Whether the owner of a row last written at heartbeat_ms still lives (another host: its
// heartbeat is recent).
bool process_alive(const ProcessId& owner, int64_t heartbeat_ms);

}  // namespace store_detail
}  // namespace snip
