// Opening a store: file checks before SQLite touches anything, connection settings (WAL,
// foreign keys, busy timeout), schema version checks and forward migrations.
#include "snip/store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "schema.h"
#include "snip/checked.h"
#include "snip/error.h"
#include "snip/files_in_use.h"
#include "snip/store_export.h"
#include "store_impl.h"

namespace snip {

using store_detail::Db;
using store_detail::Stmt;
using store_detail::WriteTxn;

std::string default_database_path() {
  std::filesystem::path dir;
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg && *xdg) {
    dir = std::filesystem::path(xdg) / "snip-workbench";
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dir = std::filesystem::path(home) / ".local" / "share" / "snip-workbench";
  } else {
    dir = std::filesystem::current_path() / ".snip-workbench";
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  return (dir / "workbench.db").string();
}

namespace store_detail {

nlohmann::json parse_json_column(const std::string& text, const std::string& where) {
  try {
    return parse_json_strict(text, where);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "; the database was edited or damaged");
  }
}

void check_run_name(const std::string& name) {
  // printable_text changes exactly what a listing could not show as it is.
  if (printable_text(name) != name)
    throw Error("run name \"" + printable_text(name) +
                "\" contains a control character (a newline, tab, escape, ...), a bidirectional mark or override, "
                "an invisible character, or bytes that are not UTF-8; a run name is one line of printable UTF-8 text: "
                "choose another --name");
  // At least one visible character: blank names (spaces, no-break spaces) cannot be told apart.
  bool visible = false;
  for (size_t i = 0; i < name.size() && !visible; ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (c == ' ') continue;
    if (c == 0xc2 && i + 1 < name.size() && static_cast<unsigned char>(name[i + 1]) == 0xa0) {  // U+00A0
      ++i;
      continue;
    }
    if (c == 0xe3 && name.compare(i, 3, "\xE3\x80\x80") == 0) {  // U+3000 ideographic space
      i += 2;
      continue;
    }
    visible = true;
  }
  if (!name.empty() && !visible)
    throw Error("run name \"" + name + "\" has no visible character; choose another --name");
}

void require_run(Db& db, int64_t run_id) {
  Stmt st(db, "SELECT 1 FROM runs WHERE id = ?");
  st.bind(1, run_id);
  if (!st.step())
    throw Error(db.path() + ": run " + std::to_string(run_id) + " does not exist (list runs with `snip runs --db " +
                db.path() + "`)");
}

}  // namespace store_detail

namespace {

uint32_t be32(const unsigned char* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// Checks an existing file before SQLite opens it, so a file that is not a database or is
// truncated is reported without SQLite writing anything (no WAL switch, no journal).
// The 100-byte SQLite header: magic at 0, page size at 16 (big-endian, 1 = 65536), change
// counter at 24, page count at 28, "version-valid-for" at 92 (page count is valid when it
// equals the change counter).
void check_existing_file(const std::string& path, uintmax_t size, bool check_size) {
  if (size == 0) return;  // an empty file is a new database
  unsigned char h[100] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot be read (" + std::strerror(errno) + "); check its permissions");
  in.read(reinterpret_cast<char*>(h), sizeof h);
  const auto got = in.gcount();
  static const char kMagic[16] = "SQLite format 3";  // with its terminating NUL: 16 bytes
  if (got < 16 || std::memcmp(h, kMagic, 16) != 0)
    throw Error(path +
                ": not a SQLite database (it does not start with the SQLite header); was another file "
                "passed with --db? The file was not modified.");
  if (got < 100)
    throw Error(path + ": truncated SQLite database (" + std::to_string(size) +
                " bytes, shorter than its header); restore it from a copy. The file was not modified.");
  uint32_t page_size = uint32_t(h[16]) << 8 | h[17];
  if (page_size == 1) page_size = 65536;
  if (page_size < 512 || (page_size & (page_size - 1)) != 0)
    throw Error(path + ": damaged SQLite header (page size " + std::to_string(page_size) +
                "); restore it from a copy. The file was not modified.");
  const uint32_t change_counter = be32(h + 24), page_count = be32(h + 28), valid_for = be32(h + 92);
  const bool truncated = check_size && (size % page_size != 0 || (page_count != 0 && change_counter == valid_for &&
                                                                  size < uintmax_t(page_count) * page_size));
  if (truncated)
    throw Error(path + ": truncated SQLite database (" + std::to_string(size) + " bytes, its header says " +
                std::to_string(uintmax_t(page_count) * page_size) +
                "); it was cut short by a copy or a full disk — restore it from a copy. The file was not modified.");
}

// Whether this process may write the database at `path` and create its -wal/-shm beside it
// (a missing file: whether its folder takes a new file).
std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%03o", unsigned(mode & 0777));
  return buf;
}

bool folder_writable(const std::string& path) {
  std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (dir.empty()) dir = ".";
  return ::access(dir.c_str(), W_OK | X_OK) == 0;
}
bool location_writable(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && ::access(path.c_str(), W_OK) != 0) return false;
  return folder_writable(path);
}

// `path` as an SQLite URI ("file:" + the path with %, ? and # escaped), for opening flags a
// plain file name cannot carry.
std::string file_uri(const std::string& path, const std::string& query) {
  std::string uri = "file:";
  for (const char c : path) {
    if (c == '%' || c == '?' || c == '#') {
      static const char* hex = "0123456789ABCDEF";
      uri += '%';
      uri += hex[(unsigned char)c >> 4];
      uri += hex[(unsigned char)c & 15];
    } else {
      uri += c;
    }
  }
  return uri + query;
}

// A read-only open that failed: with a write-ahead log pending in a folder the user cannot write,
// say so and how to read it (SQLite must create the -shm index beside it); else rethrow `e`.
[[noreturn]] void throw_pending_wal(const std::string& path, const Error& e) {
  std::error_code ec;
  if (std::filesystem::exists(path + "-wal", ec) && !folder_writable(path))
    throw Error(path + ": its latest changes are still in its write-ahead log (" + path +
                "-wal), which cannot be read in a folder you cannot write (SQLite must create its -shm index beside "
                "it); copy the database together with its -wal file to a writable folder and open the copy. Nothing "
                "was changed. (" +
                e.what() + ")");
  throw e;
}

// A path SQLite cannot open, a database named as another's WAL, index or journal, or one beside a
// file or folder SQLite would take for its own WAL, index or journal: refused before SQLite opens
// (and deletes) anything.
void refuse_sqlite_names(const std::string& path) {
  // SQLite's Unix VFS opens paths of at most 512 bytes (MAX_PATHNAME), after making them absolute;
  // a longer one fails as "unable to open database file", which reads like a permission problem.
  std::error_code abs_ec;
  const std::string absolute = std::filesystem::absolute(path, abs_ec).lexically_normal().string();
  if (!abs_ec && absolute.size() >= 512)
    throw Error(path + ": the database's full path is " + std::to_string(absolute.size()) +
                " bytes long, and SQLite opens paths of at most 511: use a folder with a shorter path; nothing was "
                "changed");
  if (std::string why = sqlite_sidecar_conflict(path); !why.empty())
    throw Error(path + " cannot be an experiment database: " + why + "; nothing was changed");
  if (std::string why = foreign_sqlite_sidecars(path); !why.empty()) throw Error(why);
}

void check_readable_location(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  refuse_sqlite_names(path);
  const auto st = fs::status(path, ec);
  if (!fs::exists(st)) throw Error(path + ": no such database (pass an existing --db file)");
  if (fs::is_directory(st)) throw Error(path + ": is a directory; --db needs a database file path");
  const auto size = fs::file_size(path, ec);
  if (ec) throw Error(path + ": cannot be read (" + ec.message() + ")");
  std::error_code wal_ec;
  const auto wal_size = fs::file_size(path + "-wal", wal_ec);
  if (file_in_use(path).empty()) check_existing_file(path, size, /*check_size=*/wal_ec || wal_size == 0);
}

void check_location(const std::string& path, const StoreOptions& options) {
  namespace fs = std::filesystem;
  std::error_code ec;
  refuse_sqlite_names(path);
  const fs::path p(path);
  const auto st = fs::status(p, ec);
  fs::path dir = p.parent_path();
  if (dir.empty()) dir = ".";
  if (fs::exists(st)) {
    if (fs::is_directory(st)) throw Error(path + ": is a directory; --db needs a database file path");
    // The size check is skipped while a non-empty WAL exists: a checkpoint writes page 1
    // (with the new page count) before the pages that grow the file, so a live writer, or a
    // writer killed mid-checkpoint, leaves a file that is legitimately shorter than its
    // header until SQLite replays the WAL.
    std::error_code wal_ec, size_ec;
    const auto wal_size = fs::file_size(path + "-wal", wal_ec);
    const bool wal_pending = !wal_ec && wal_size > 0;
    const auto size = fs::file_size(p, size_ec);
    if (size_ec) throw Error(path + ": cannot be read (" + size_ec.message() + ")");
    // A database this process already has open was checked when it was opened, and opening it
    // again raw would drop that connection's locks (files_in_use.h).
    if (file_in_use(path).empty()) check_existing_file(path, size, /*check_size=*/!wal_pending);
    if (::access(path.c_str(), R_OK | W_OK) != 0)
      throw Error(path + ": the database file is read-only (" + std::strerror(errno) +
                  "); the store writes to it (runs, metrics, WAL): make it writable or copy it elsewhere");
    // Its -wal and -shm must be writable too: left by another user's process (a reader of the
    // database), they would make every write fail as if the folder were read-only.
    for (const char* suffix : {"-wal", "-shm"}) {
      const std::string side = path + suffix;
      struct stat sst {};
      if (::stat(side.c_str(), &sst) != 0 || ::access(side.c_str(), R_OK | W_OK) == 0) continue;
      const bool pending = std::string(suffix) == "-wal" && sst.st_size > 0;
      throw Error(side + " cannot be written by you (it belongs to user id " + std::to_string(sst.st_uid) + ", mode " +
                  octal_mode(sst.st_mode) +
                  "), so the database cannot be written either: a process of that user opened the database. " +
                  (pending ? "It holds changes not yet in the database file: let that user open the database "
                             "once more (which moves them in), then remove it"
                           : "It holds no data: when no process has the database open, remove " + path + "-wal and " +
                                 path + "-shm (SQLite makes them again)") +
                  "; nothing was changed");
    }
  } else {
    if (!options.create) throw Error(path + ": no such database (pass an existing --db file)");
    if (!fs::is_directory(dir, ec))
      throw Error(path + ": directory " + dir.string() + " does not exist; create it or pass another --db");
  }
  // WAL mode creates <db>-wal and <db>-shm beside the database, so the directory must be writable.
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(path + ": directory " + dir.string() + " is read-only (" + std::strerror(errno) +
                "); the store needs to create the database and its -wal/-shm files there: pass --db with a "
                "writable location");
}

// Opens the connection: read-only (immutable when nothing lives outside the file) or read-write.
void open_connection(Db& db, const std::string& path, const StoreOptions& options, bool read_only) {
  if (read_only) {
    check_readable_location(path);
    // A WAL database read-only: SQLite reads it through its -shm, which it cannot create in a
    // read-only folder. With no -wal file nothing committed lives outside the database file, so
    // it is read as immutable (no -shm, no locks) then. The same when the reader cannot write the
    // database file (another user's database in a shared folder): the -wal and -shm SQLite would
    // create would be the reader's, and the owner could no longer write its own database.
    std::error_code ec;
    const bool wal = std::filesystem::exists(path + "-wal", ec);
    const bool leaves_nothing = !folder_writable(path) || ::access(path.c_str(), W_OK) != 0;
    try {
      db.open(file_uri(path, !wal && leaves_nothing ? "?immutable=1" : ""), path,
              SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX);
    } catch (const Error& e) {
      throw_pending_wal(path, e);
    }
    return;
  }
  check_location(path, options);
  // NOMUTEX: a Store is used from one thread at a time (store.h), so SQLite's per-call
  // connection mutex is pure overhead (~5% of an insert).
  db.open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (options.create ? SQLITE_OPEN_CREATE : 0));
}

// The file's schema version, once its header says it is a SNIP Workbench store this build can
// open (and, read-only, one that needs no upgrade); empty: a new file.
struct StoreHeader {
  int64_t version = 0;
  bool empty = false;
};

StoreHeader check_header(Db& db, const std::string& path, bool read_only, int latest) {
  // Reading the header and the schema catches "not a database" and damage before any write.
  int64_t version = 0;
  try {
    version = db.query_int64("PRAGMA user_version");
  } catch (const Error& e) {
    if (read_only) throw_pending_wal(path, e);
    throw;
  }
  const int64_t app_id = db.query_int64("PRAGMA application_id");
  const int64_t tables = db.query_int64("SELECT count(*) FROM sqlite_schema");
  if (version > latest)
    throw Error(path + ": written by a newer SNIP Workbench (schema version " + std::to_string(version) +
                ", this build reads up to " + std::to_string(latest) +
                "); it was not opened or modified — use a newer snip, or pass another --db");
  if (version < 0)  // SQLite stores any 32-bit value; no SNIP Workbench wrote a negative one
    throw Error(path + ": schema version " + std::to_string(version) +
                " is not one SNIP Workbench writes (the header was changed by another tool or is damaged); it was not "
                "opened or modified — restore it from a copy, or pass another --db");
  const bool empty = tables == 0 && version == 0;
  if (!empty && app_id != store_detail::kApplicationId)
    throw Error(path +
                ": a SQLite database of another program (not a SNIP Workbench store); it was not modified — "
                "pass another --db");
  if (read_only) {
    if (empty) throw Error(path + ": an empty file, not a SNIP Workbench database; pass another --db");
    if (version < latest)
      throw Error(path + ": written by an older SNIP Workbench (schema version " + std::to_string(version) +
                  ") and opened read-only, so it cannot be upgraded here; open it once where it can be written (or "
                  "copy it to a writable folder) to upgrade it");
  }
  return {version, empty};
}

void check_integrity(Db& db, const std::string& path) {
  // (A page SQLite cannot even parse throws from the query itself, with the same advice.)
  Stmt st(db, "PRAGMA quick_check(1)");
  const std::string verdict = st.step() ? st.column_text(0) : "no answer";
  if (verdict != "ok")
    throw Error(path + ": the database is damaged (SQLite's quick_check: " + verdict +
                "); it was not modified — restore it from a copy, or pass another --db");
}

// WAL: readers never block the writer and see only committed transactions. synchronous =
// NORMAL in WAL mode is safe against process crashes (kill -9); a power loss may drop the
// last transactions but never corrupts the file.
void set_write_pragmas(Db& db, const std::string& path) {
  {
    Stmt st(db, "PRAGMA journal_mode = WAL");
    if (!st.step() || st.column_text(0) != "wal")
      throw Error(path + ": cannot switch the database to WAL mode (is it on a network file system?)");
  }
  db.exec("PRAGMA synchronous = NORMAL");
  // A 100k-step run is ~7 MB of metrics pages: keep them in this connection's cache (64 MB)
  // and read through a memory map, so redrawing a curve does not re-read the file.
  db.exec("PRAGMA cache_size = -65536");
  db.exec("PRAGMA mmap_size = 268435456");
}

// The schema steps from the file's version to latest, in one write transaction.
void migrate(Db& db, const std::string& path, int latest) {
  WriteTxn txn(db);
  // Another process may have migrated between our check and the write lock.
  const int64_t now_version = db.query_int64("PRAGMA user_version");
  if (now_version < 0 || now_version > latest)
    throw Error(path + ": migrated to a newer schema by another process while opening");
  for (int64_t v = now_version; v < latest; ++v) {
    db.exec(store_detail::schema_steps()[size_t(v)]);
  }
  db.exec("PRAGMA application_id = " + std::to_string(store_detail::kApplicationId));
  db.exec("PRAGMA user_version = " + std::to_string(latest));
  txn.commit();
}

}  // namespace

Store::Store(const std::string& path, const StoreOptions& options) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  Db& db = impl_->db;
  const bool read_only = options.read_only ||
                         (options.read_only_if_unwritable && std::filesystem::exists(path) && !location_writable(path));
  impl_->read_only = read_only;
  impl_->use =
      open_file_in_use(path, "the experiment database " + path, [&] { open_connection(db, path, options, read_only); });
  sqlite3_busy_timeout(db.handle(), options.busy_timeout_ms);
  impl_->busy_timeout_ms = options.busy_timeout_ms;
  sqlite3_extended_result_codes(db.handle(), 1);
  db.exec("PRAGMA foreign_keys = ON");

  const int latest = int(store_detail::schema_steps().size());
  static_assert(kSchemaVersion == 5, "update schema.cpp together with kSchemaVersion");
  SNIP_ASSERT(latest == kSchemaVersion);
  const StoreHeader header = check_header(db, path, read_only, latest);
  if (read_only) {
    impl_->version = latest;
    return;
  }
  if (options.check_integrity && !header.empty) check_integrity(db, path);
  set_write_pragmas(db, path);
  if (header.version < latest) migrate(db, path, latest);
  impl_->version = latest;
  if (options.mark_dead_runs_interrupted) {
    mark_dead_runs_interrupted();
    mark_dead_compares_interrupted();
  }
}

Store::~Store() = default;
Store::Store(Store&&) noexcept = default;
Store& Store::operator=(Store&&) noexcept = default;

bool Store::read_only() const {
  return impl_->read_only;
}

const std::string& Store::path() const {
  return impl_->path;
}
void Store::set_busy_timeout(int ms) {
  impl_->busy_timeout_ms = std::max(0, ms);
  sqlite3_busy_timeout(impl_->db.handle(), impl_->busy_timeout_ms);
}
int Store::busy_timeout() const {
  return impl_->busy_timeout_ms;
}
int Store::schema_version() const {
  return impl_->version;
}
uint64_t Store::change_counter() const {
  const auto data_version = uint64_t(impl_->db.query_int64("PRAGMA data_version"));
  const auto own = uint64_t(sqlite3_total_changes64(impl_->db.handle()));
  return (data_version << 40) ^ own;
}

Store::Transaction::Transaction(Store& store) : store_(&store) {
  store_->impl_->db.exec(store_->impl_->db.txn_depth == 0 ? "BEGIN IMMEDIATE" : "SAVEPOINT snip_user");
  ++store_->impl_->db.txn_depth;
}

void Store::Transaction::commit() {
  SNIP_ASSERT(!done_);
  auto& db = store_->impl_->db;
  db.exec(db.txn_depth == 1 ? "COMMIT" : "RELEASE snip_user");
  --db.txn_depth;
  done_ = true;
}

Store::Transaction::~Transaction() {
  if (done_) return;
  auto& db = store_->impl_->db;
  const bool outer = db.txn_depth == 1;
  --db.txn_depth;
  sqlite3_exec(db.handle(), outer ? "ROLLBACK" : "ROLLBACK TO snip_user; RELEASE snip_user", nullptr, nullptr, nullptr);
}

}  // namespace snip
