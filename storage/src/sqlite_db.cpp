// Internal sqlite3 wrapper: statements, transactions and error messages for the store.
#include "sqlite_db.h"

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>

#include "snip/error.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip::store_detail {

std::string stored_path(const std::string& path) {
  if (path.empty()) return path;
  std::error_code ec;
  const std::filesystem::path full = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? path : full.string();
}

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// ---- Db -------------------------------------------------------------------------------

Db::~Db() {
  if (db_) sqlite3_close_v2(db_);
}

void Db::open(const std::string& path, int flags) {
  open(path, path, flags);
}

void Db::open(const std::string& uri, const std::string& path, int flags) {
  path_ = path;
  const int rc = sqlite3_open_v2(uri.c_str(), &db_, flags | SQLITE_OPEN_EXRESCODE, nullptr);
  if (rc != SQLITE_OK) fail(rc, "opening the database");
}

void Db::fail(int rc, std::string_view doing) const {
  const int primary = rc & 0xff;
  std::string msg = path_ + ": " + std::string(doing) + " failed: ";
  msg += db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
  switch (primary) {
    case SQLITE_NOTADB:
      msg += " — the file is not a SQLite database (was another file passed with --db?); it was not modified";
      break;
    case SQLITE_CORRUPT:
      msg += " — the database is damaged (truncated or overwritten); restore it from a copy, or pass a new --db";
      break;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      msg += " — another process held the database lock past the busy timeout; retry when it is idle";
      throw StoreBusy(msg);
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
      msg +=
          " — the database or its directory cannot be written (read-only location?); the store needs to write "
          "the file and its -wal/-shm files beside it: pass --db with a writable path";
      break;
    case SQLITE_FULL:
      msg += " — the disk is full; the last transaction was rolled back, free space and retry";
      break;
    case SQLITE_IOERR: {
      // SQLite says only "disk I/O error"; the operating system's errno says which.
      const int sys = db_ ? sqlite3_system_errno(db_) : 0;
      if (sys == ENOSPC || sys == EDQUOT)
        msg += " — " + std::string(std::strerror(sys)) +
               ": the disk is full; nothing was written, free space (or pass --db on another disk) and retry";
      else if (sys == EROFS)
        msg += " — " + std::string(std::strerror(sys)) +
               ": the database's location is read-only; pass --db with a writable path";
      else if (sys != 0)
        msg += " — an I/O error occurred: " + std::string(std::strerror(sys)) + " (disk removed or failing?)";
      else
        msg += " — an I/O error occurred (disk removed or full?)";
      break;
    }
    default:
      break;
  }
  throw Error(msg);
}

void Db::exec(std::string_view sql) {
  std::string s(sql);
  char* err = nullptr;
  const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
  if (err) sqlite3_free(err);
  if (rc != SQLITE_OK) fail(rc, "executing '" + s.substr(0, 60) + "'");
}

int64_t Db::query_int64(std::string_view sql) {
  Stmt st(*this, sql);
  if (!st.step()) return 0;
  return st.column_int64(0);
}

// ---- Stmt -----------------------------------------------------------------------------

Stmt::Stmt(Db& db, std::string_view sql) : db_(&db), sql_(sql) {
  const int rc = sqlite3_prepare_v2(db.handle(), sql.data(), int(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) db.fail(rc, "preparing '" + sql_.substr(0, 60) + "'");
}

Stmt::~Stmt() {
  sqlite3_finalize(stmt_);
}

Stmt& Stmt::bind(int i, int64_t v) {
  sqlite3_bind_int64(stmt_, i, v);
  return *this;
}
Stmt& Stmt::bind(int i, double v) {
  sqlite3_bind_double(stmt_, i, v);
  return *this;
}
Stmt& Stmt::bind(int i, std::string_view v) {
  sqlite3_bind_text(stmt_, i, v.data(), int(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Stmt& Stmt::bind(int i, std::optional<double> v) {
  return v ? bind(i, *v) : bind_null(i);
}
Stmt& Stmt::bind(int i, std::optional<int64_t> v) {
  return v ? bind(i, *v) : bind_null(i);
}
Stmt& Stmt::bind_null(int i) {
  sqlite3_bind_null(stmt_, i);
  return *this;
}
Stmt& Stmt::bind_blob(int i, const void* data, size_t size) {
  // A zero-length blob must stay a blob, not NULL: pass a non-null pointer.
  static const char empty = 0;
  sqlite3_bind_blob64(stmt_, i, size ? data : &empty, size, SQLITE_TRANSIENT);
  return *this;
}

bool Stmt::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  sqlite3_reset(stmt_);
  db_->fail(rc, "running '" + sql_.substr(0, 60) + "'");
}

void Stmt::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

bool Stmt::is_null(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
int64_t Stmt::column_int64(int col) const {
  return sqlite3_column_int64(stmt_, col);
}
double Stmt::column_double(int col) const {
  return is_null(col) ? std::numeric_limits<double>::quiet_NaN() : sqlite3_column_double(stmt_, col);
}
std::optional<double> Stmt::column_opt_double(int col) const {
  if (is_null(col)) return std::nullopt;
  return sqlite3_column_double(stmt_, col);
}
std::optional<int64_t> Stmt::column_opt_int64(int col) const {
  if (is_null(col)) return std::nullopt;
  return sqlite3_column_int64(stmt_, col);
}
std::string Stmt::column_text(int col) const {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
  return p ? std::string(p, size_t(sqlite3_column_bytes(stmt_, col))) : std::string();
}
std::vector<uint8_t> Stmt::column_blob(int col) const {
  const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(stmt_, col));
  const int n = sqlite3_column_bytes(stmt_, col);
  return p ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

// ---- transactions ---------------------------------------------------------------------

WriteTxn::WriteTxn(Db& db) : db_(db), outer_(db.txn_depth == 0) {
  // Every write of the store runs in one of these: a connection opened read-only refuses here,
  // in words, instead of SQLite's "attempt to write a readonly database" on the statement.
  if (db_.handle() && sqlite3_db_readonly(db_.handle(), "main") == 1)
    throw Error(db_.path() +
                ": the database is open read-only (you cannot write the file), so nothing was saved; copy it to a "
                "writable folder and open the copy");
  db_.exec(outer_ ? "BEGIN IMMEDIATE" : "SAVEPOINT snip_nested");
  ++db_.txn_depth;
}

void WriteTxn::commit() {
  SNIP_ASSERT(!done_);
  db_.exec(outer_ ? "COMMIT" : "RELEASE snip_nested");
  done_ = true;
  --db_.txn_depth;
}

WriteTxn::~WriteTxn() {
  if (done_) return;
  --db_.txn_depth;
  // Never throws from a destructor: a failed rollback leaves SQLite to roll back on close.
  if (outer_) {
    sqlite3_exec(db_.handle(), "ROLLBACK", nullptr, nullptr, nullptr);
  } else {
    sqlite3_exec(db_.handle(), "ROLLBACK TO snip_nested; RELEASE snip_nested", nullptr, nullptr, nullptr);
  }
}

ReadTxn::ReadTxn(Db& db) : db_(db), outer_(db.txn_depth == 0) {
  if (outer_) db_.exec("BEGIN DEFERRED");
  ++db_.txn_depth;
}

ReadTxn::~ReadTxn() {
  --db_.txn_depth;
  if (outer_) sqlite3_exec(db_.handle(), "COMMIT", nullptr, nullptr, nullptr);
}

}  // namespace snip::store_detail
