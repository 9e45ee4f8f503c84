// The hand-over buffer between the training thread and the UI: the worker appends each step's
// metrics under a mutex (cheap, never blocks on the UI), the UI takes the rows it has not seen
// yet on its refresh timer. Append-only, so a reader only copies what is new.
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "snip/store_types.h"

namespace snip::ui {

class LiveMetrics {
 public:
  // A new run of the database `database`; `rows` are the steps it already has (a resumed run's
  // rows up to its checkpoint). Each reset is a new generation: a view adopts a run once.
  void reset(int64_t run_id, std::vector<snip::MetricRow> rows = {}, std::string database = {}) {
    std::lock_guard lock(mu_);
    run_id_ = run_id;
    rows_ = std::move(rows);
    database_ = std::move(database);
    ended_ = false;
    ++generation_;
  }
  // The run's training returned (finished, stopped or failed): its final status is in the store.
  void end() {
    std::lock_guard lock(mu_);
    ended_ = true;
  }
  bool ended() const {
    std::lock_guard lock(mu_);
    return ended_;
  }
  uint64_t generation() const {
    std::lock_guard lock(mu_);
    return generation_;
  }
  std::string database() const {
    std::lock_guard lock(mu_);
    return database_;
  }
  void append(const snip::MetricRow& row) {
    std::lock_guard lock(mu_);
    rows_.push_back(row);
  }
  // Rows [from, end) and the run they belong to.
  std::vector<snip::MetricRow> take_from(size_t from, int64_t* run_id) const {
    std::lock_guard lock(mu_);
    if (run_id) *run_id = run_id_;
    if (from >= rows_.size()) return {};
    return std::vector<snip::MetricRow>(rows_.begin() + std::ptrdiff_t(from), rows_.end());
  }
  size_t size() const {
    std::lock_guard lock(mu_);
    return rows_.size();
  }
  int64_t run_id() const {
    std::lock_guard lock(mu_);
    return run_id_;
  }

 private:
  mutable std::mutex mu_;
  int64_t run_id_ = 0;
  std::vector<snip::MetricRow> rows_;
  std::string database_;
  bool ended_ = false;
  uint64_t generation_ = 0;
};

}  // namespace snip::ui
