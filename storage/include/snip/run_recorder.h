// Records a training run's per-step metrics from a step callback without one commit per
// step: rows are buffered and written in one transaction every `flush_rows` rows or every
// `flush_ms` milliseconds, whichever comes first. Independent of the trainer's types: the
// caller copies its step metrics into a MetricRow.
//
// A busy database never stops the run: when another process holds the write lock past the
// store's busy timeout (a sqlite3 shell in a transaction, a backup), the rows stay in memory
// (up to `max_buffered_rows`, then record() waits for the lock), a warning is given once, and
// the write is retried with backoff until the lock is free. No row is dropped.
//
//   snip::Store store(db_path);
//   snip::RunRecorder rec(store, store.create_run(spec));
//   trainer.on_step = [&](const StepMetrics& m) { rec.record({m.step, m.loss, ...}); return !stop; };
//   ... rec.finish();   // or rec.fail(message) / rec.interrupt(reason)
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "snip/store.h"

namespace snip {

struct RecorderOptions {
  int flush_rows = 256;  // write when this many rows are buffered
  int flush_ms = 500;    // ... or when the oldest buffered row is this old
  // While the database is busy: rows kept in memory before record() waits for the lock
  // (about 100 bytes a row), and the delay between retries (doubling up to the maximum).
  size_t max_buffered_rows = 262144;
  int busy_retry_ms = 200;
  int busy_retry_max_ms = 5000;
  // Told once, when the lock is first found held (default: a line on stderr).
  std::function<void(const std::string&)> on_busy = {};
  // The time the flush interval and the retry backoff are measured in (default:
  // steady_clock::now); a test passes a clock it advances itself instead of sleeping.
  std::function<std::chrono::steady_clock::time_point()> clock = {};
};

class RunRecorder {
 public:
  // `store` must outlive the recorder and is used from the recorder's thread only.
  RunRecorder(Store& store, int64_t run_id, const RecorderOptions& options = {});
  // Flushes (one try); a run neither finished nor failed is marked `interrupted` (never throws).
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  void record(const MetricRow& row);  // buffered; flushes when due
  // Writes the buffer now if the database is free; when it is busy the rows stay buffered and
  // false is returned (the next record() or flush() tries again).
  bool flush();
  void flush_now();                                            // writes the buffer, waiting for a busy lock
  void add_checkpoint(int64_t step, const std::string& path);  // flushes first
  void finish();                                               // flush + `finished`
  void fail(const std::string& message);                       // flush + `failed`
  void interrupt(const std::string& reason);                   // flush + `interrupted` (resumable)
  // Runs one store write of this run (a statistics round, a plan, ...), waiting for a busy
  // lock like flush_now(). `write` must be one transaction (one Store write method).
  void write(const std::function<void()>& write);

  int64_t run_id() const { return run_id_; }
  int64_t rows_written() const { return rows_written_; }
  size_t rows_buffered() const { return buffer_.size(); }
  // Writes that found the database locked by another process (each was retried).
  int64_t busy_count() const { return busy_count_; }

 private:
  void close(RunStatus status, const std::string& message, bool wait);
  bool try_flush();  // one attempt; false when busy
  void note_busy(const StoreBusy& e);
  void wait_before_retry();
  std::chrono::steady_clock::time_point now() const;

  Store* store_;
  int64_t run_id_;
  RecorderOptions options_;
  std::vector<MetricRow> buffer_;
  std::chrono::steady_clock::time_point oldest_{};
  int64_t rows_written_ = 0;
  bool closed_ = false;
  // busy-database state
  int64_t busy_count_ = 0;
  bool busy_ = false;  // the last write found the lock held
  bool warned_ = false;
  int retry_ms_ = 0;
  std::chrono::steady_clock::time_point next_try_{};
};

}  // namespace snip
