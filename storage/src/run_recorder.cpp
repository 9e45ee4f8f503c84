// RunRecorder: buffered, transactional recording of per-step metrics (see run_recorder.h).
#include "snip/run_recorder.h"

#include <algorithm>
#include <cstdio>
#include <thread>

namespace snip {

RunRecorder::RunRecorder(Store& store, int64_t run_id, const RecorderOptions& options)
    : store_(&store), run_id_(run_id), options_(options) {
  store_->run(run_id);  // throws snip::Error when the run does not exist
  buffer_.reserve(size_t(std::max(1, options_.flush_rows)));
  retry_ms_ = std::max(1, options_.busy_retry_ms);
}

RunRecorder::~RunRecorder() {
  if (closed_) return;
  try {
    close(RunStatus::interrupted, "the recorder was destroyed before the run finished", /*wait=*/false);
  } catch (...) {
    // A destructor must not throw; the next Store open marks the run interrupted anyway.
  }
}

void RunRecorder::note_busy(const StoreBusy& e) {
  ++busy_count_;
  busy_ = true;
  if (warned_) return;
  warned_ = true;
  const std::string msg = "database " + store_->path() +
                          " is locked by another process; rows are kept in memory and written when it is free (" +
                          e.what() + ")";
  if (options_.on_busy)
    options_.on_busy(msg);
  else
    std::fprintf(stderr, "\nwarning: %s\n", msg.c_str());
}

std::chrono::steady_clock::time_point RunRecorder::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

void RunRecorder::wait_before_retry() {
  std::this_thread::sleep_for(std::chrono::milliseconds(retry_ms_));
  retry_ms_ = std::min(std::max(1, options_.busy_retry_max_ms), retry_ms_ * 2);
}

bool RunRecorder::try_flush() {
  if (buffer_.empty()) return true;
  // While the lock is known to be held, a try does not wait out the whole busy timeout: the
  // training goes on and the rows wait.
  const int timeout = store_->busy_timeout();
  if (busy_) store_->set_busy_timeout(0);
  try {
    store_->append_metrics(run_id_, buffer_);
  } catch (const StoreBusy& e) {
    if (busy_) store_->set_busy_timeout(timeout);
    note_busy(e);
    next_try_ = now() + std::chrono::milliseconds(retry_ms_);
    retry_ms_ = std::min(std::max(1, options_.busy_retry_max_ms), retry_ms_ * 2);
    return false;
  }
  if (busy_) store_->set_busy_timeout(timeout);
  busy_ = false;
  retry_ms_ = std::max(1, options_.busy_retry_ms);
  rows_written_ += int64_t(buffer_.size());
  buffer_.clear();
  return true;
}

void RunRecorder::record(const MetricRow& row) {
  if (buffer_.empty()) oldest_ = now();
  buffer_.push_back(row);
  if (buffer_.size() >= options_.max_buffered_rows) {
    flush_now();  // bounded memory: wait for the lock
    return;
  }
  const auto t = now();
  if (busy_ && t < next_try_) return;
  if (int(buffer_.size()) >= options_.flush_rows || t - oldest_ >= std::chrono::milliseconds(options_.flush_ms))
    flush();
}

bool RunRecorder::flush() {
  return try_flush();
}

void RunRecorder::flush_now() {
  while (!try_flush()) wait_before_retry();
}

void RunRecorder::write(const std::function<void()>& write) {
  for (;;) {
    try {
      write();
      return;
    } catch (const StoreBusy& e) {
      note_busy(e);
    }
    wait_before_retry();
  }
}

void RunRecorder::add_checkpoint(int64_t step, const std::string& path) {
  flush_now();
  write([&] { store_->add_checkpoint(run_id_, step, path); });
}

void RunRecorder::close(RunStatus status, const std::string& message, bool wait) {
  closed_ = true;  // set first: a failing flush must not be retried by the destructor
  try {
    if (wait)
      flush_now();
    else if (!try_flush())
      throw StoreBusy(store_->path() + ": still locked by another process");
  } catch (const std::exception& e) {
    // The last rows are lost (e.g. disk full): the run must not claim to have finished.
    try {
      store_->set_run_status(run_id_, status == RunStatus::finished ? RunStatus::failed : status,
                             std::string("the last ") + std::to_string(buffer_.size()) +
                                 " metrics rows could not be written: " + e.what());
    } catch (...) {
    }
    throw;
  }
  if (wait)
    write([&] { store_->set_run_status(run_id_, status, message); });
  else
    store_->set_run_status(run_id_, status, message);
}

void RunRecorder::finish() {
  close(RunStatus::finished, "", /*wait=*/true);
}
void RunRecorder::fail(const std::string& message) {
  close(RunStatus::failed, message, /*wait=*/true);
}
void RunRecorder::interrupt(const std::string& reason) {
  close(RunStatus::interrupted, reason, /*wait=*/true);
}

}  // namespace snip
