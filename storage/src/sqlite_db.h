// Internal: a thin RAII layer over the sqlite3 C API (connection, prepared statement,
// transactions) that turns every SQLite error into a snip::Error naming the database file,
// what was being done, and what to do about it. Not part of the public API.
#pragma once
#include <sqlite3.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace snip::store_detail {

class Db;

// A prepared statement; bind parameters are 1-based as in SQLite.
class Stmt {
 public:
  Stmt(Db& db, std::string_view sql);
  ~Stmt();
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, int64_t v);
  Stmt& bind(int i, int v) { return bind(i, int64_t(v)); }
  Stmt& bind(int i, double v);  // NaN is stored as NULL by SQLite; read back as NaN by column_double
  Stmt& bind(int i, std::string_view v);
  Stmt& bind(int i, const std::string& v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, const char* v) { return bind(i, std::string_view(v)); }
  Stmt& bind(int i, std::optional<double> v);
  Stmt& bind(int i, std::optional<int64_t> v);
  Stmt& bind_null(int i);
  Stmt& bind_blob(int i, const void* data, size_t size);

  bool step();  // true: a row is available; false: done. Throws snip::Error on failure.
  void run() {
    step();
    reset();
  }  // executes a statement that returns no rows
  void reset();

  bool is_null(int col) const;
  int64_t column_int64(int col) const;
  double column_double(int col) const;  // NULL -> NaN (NaN is stored as NULL)
  std::optional<double> column_opt_double(int col) const;
  std::optional<int64_t> column_opt_int64(int col) const;
  std::string column_text(int col) const;
  std::vector<uint8_t> column_blob(int col) const;

 private:
  Db* db_;
  sqlite3_stmt* stmt_ = nullptr;
  std::string sql_;
};

class Db {
 public:
  Db() = default;
  ~Db();
  Db(const Db&) = delete;
  Db& operator=(const Db&) = delete;

  void open(const std::string& path, int flags);
  // Opens `uri` (an SQLite file: URI); messages name `path`.
  void open(const std::string& uri, const std::string& path, int flags);
  sqlite3* handle() const { return db_; }
  const std::string& path() const { return path_; }
  void exec(std::string_view sql);
  int64_t query_int64(std::string_view sql);  // first column of the first row
  [[noreturn]] void fail(int rc, std::string_view doing) const;

  int txn_depth = 0;  // nesting of WriteTxn / ReadTxn on this connection

 private:
  sqlite3* db_ = nullptr;
  std::string path_;
};

// A write transaction: BEGIN IMMEDIATE when outermost (takes the write lock up front, so a
// concurrent writer waits in the busy handler instead of failing on lock upgrade), a
// SAVEPOINT when nested. Rolls back when destroyed without commit().
class WriteTxn {
 public:
  explicit WriteTxn(Db& db);
  ~WriteTxn();
  void commit();
  WriteTxn(const WriteTxn&) = delete;
  WriteTxn& operator=(const WriteTxn&) = delete;

 private:
  Db& db_;
  bool outer_;
  bool done_ = false;
};

// A read snapshot across several queries (BEGIN DEFERRED when outermost; nothing when nested).
class ReadTxn {
 public:
  explicit ReadTxn(Db& db);
  ~ReadTxn();
  ReadTxn(const ReadTxn&) = delete;
  ReadTxn& operator=(const ReadTxn&) = delete;

 private:
  Db& db_;
  bool outer_;
};

int64_t now_ms();  // Unix time in milliseconds

}  // namespace snip::store_detail
