// What `snip collect` and `snip validate` open before they measure a checkpoint: the database
// (checked like every writer's, before the work), the run the checkpoint belongs to, and the
// experiment set-up. A measurement on another corpus (--data) belongs to no run; the command says so.
#pragma once
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "snip/experiment_setup.h"
#include "snip/recorded_training.h"
#include "snip/store.h"

namespace snip::cli {

struct Measurement {
  std::unique_ptr<Store> store;  // null without --db
  std::optional<int64_t> run_id;
  ExperimentSetup setup;
};

// `what` names the measurement in the note ("round", "validation").
inline Measurement open_measurement(const std::string& db, const std::string& checkpoint, const std::string& data,
                                    int batch_size, int seq_len, const char* what) {
  Measurement m;
  if (!db.empty()) {
    m.store = std::make_unique<Store>(db, StoreOptions{.check_integrity = true});
    m.run_id = find_run_of_checkpoint(*m.store, checkpoint);
  }
  m.setup = load_experiment(checkpoint, data, batch_size, seq_len);
  for (const std::string& w : m.setup.warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
  std::string note;
  m.run_id = run_of_measurement(m.run_id, m.setup.own_data, m.setup.data.source, &note);
  if (!note.empty()) std::fprintf(stderr, "note: the %s was %s\n", what, note.c_str());
  return m;
}

}  // namespace snip::cli
