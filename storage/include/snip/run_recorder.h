// Records a training run's per-step metrics from a step callback without one commit per
// step: rows are buffered and written in one transaction every `flush_rows` rows or every
// `flush_ms` milliseconds, whichever comes first. Independent of the trainer's types: the
// caller copies its step metrics into a MetricRow.
//
//   snip::Store store(db_path);
//   snip::RunRecorder rec(store, store.create_run(spec));
//   trainer.on_step = [&](const StepMetrics& m) { rec.record({m.step, m.loss, ...}); return !stop; };
//   ... rec.finish();   // or rec.fail(message) / rec.interrupt(reason)
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "snip/store.h"

namespace snip {

struct RecorderOptions {
  int flush_rows = 256;  // write when this many rows are buffered
  int flush_ms = 500;    // ... or when the oldest buffered row is this old
};

class RunRecorder {
 public:
  // `store` must outlive the recorder and is used from the recorder's thread only.
  RunRecorder(Store& store, int64_t run_id, const RecorderOptions& options = {});
  // Flushes; a run neither finished nor failed is marked `interrupted` (never throws).
  ~RunRecorder();
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  void record(const MetricRow& row);                           // buffered; flushes when due
  void flush();                                                // writes the buffer now (one transaction)
  void add_checkpoint(int64_t step, const std::string& path);  // flushes first
  void finish();                                               // flush + `finished`
  void fail(const std::string& message);                       // flush + `failed`
  void interrupt(const std::string& reason);                   // flush + `interrupted` (resumable)

  int64_t run_id() const { return run_id_; }
  int64_t rows_written() const { return rows_written_; }
  size_t rows_buffered() const { return buffer_.size(); }

 private:
  void close(RunStatus status, const std::string& message);

  Store* store_;
  int64_t run_id_;
  RecorderOptions options_;
  std::vector<MetricRow> buffer_;
  std::chrono::steady_clock::time_point oldest_{};
  int64_t rows_written_ = 0;
  bool closed_ = false;
};

}  // namespace snip
