// RunRecorder: buffered, transactional recording of per-step metrics (see run_recorder.h).
#include "snip/run_recorder.h"

namespace snip {

RunRecorder::RunRecorder(Store& store, int64_t run_id, const RecorderOptions& options)
    : store_(&store), run_id_(run_id), options_(options) {
  store_->run(run_id);  // throws snip::Error when the run does not exist
  buffer_.reserve(size_t(std::max(1, options_.flush_rows)));
}

RunRecorder::~RunRecorder() {
  if (closed_) return;
  try {
    close(RunStatus::interrupted, "the recorder was destroyed before the run finished");
  } catch (...) {
    // A destructor must not throw; the next Store open marks the run interrupted anyway.
  }
}

void RunRecorder::record(const MetricRow& row) {
  if (buffer_.empty()) oldest_ = std::chrono::steady_clock::now();
  buffer_.push_back(row);
  const auto age = std::chrono::steady_clock::now() - oldest_;
  if (int(buffer_.size()) >= options_.flush_rows || age >= std::chrono::milliseconds(options_.flush_ms)) flush();
}

void RunRecorder::flush() {
  if (buffer_.empty()) return;
  store_->append_metrics(run_id_, buffer_);
  rows_written_ += int64_t(buffer_.size());
  buffer_.clear();
}

void RunRecorder::add_checkpoint(int64_t step, const std::string& path) {
  flush();
  store_->add_checkpoint(run_id_, step, path);
}

void RunRecorder::close(RunStatus status, const std::string& message) {
  closed_ = true;  // set first: a failing flush must not be retried by the destructor
  try {
    flush();
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
  store_->set_run_status(run_id_, status, message);
}

void RunRecorder::finish() {
  close(RunStatus::finished, "");
}
void RunRecorder::fail(const std::string& message) {
  close(RunStatus::failed, message);
}
void RunRecorder::interrupt(const std::string& reason) {
  close(RunStatus::interrupted, reason);
}

}  // namespace snip
