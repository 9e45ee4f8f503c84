// A stored, finished run of the `tiny` shape with `steps` metric rows (test data), for the GUI
// tests that need a database with something in it; written through a connection of its own, as
// the headless `snip train` writes. Returns the run's id.
#pragma once
#include <QString>
#include <optional>
#include <string>
#include <vector>

#include "snip/model_config.h"
#include "snip/store.h"

namespace snip_test {

inline int64_t stored_finished_run(const QString& db, const std::string& name = "a run", int steps = 200) {
  snip::Store store(db.toStdString());
  snip::RunSpec spec;
  spec.name = name;
  spec.dims = snip::preset_config("tiny").dims();
  spec.method = "uniform-bf16";
  const int64_t id = store.create_run(spec);
  std::vector<snip::MetricRow> rows;
  for (int s = 1; s <= steps; ++s)
    rows.push_back(snip::MetricRow{s, 5.0 / s, std::nullopt, 1e-3, 1.0, 1000, 0.0, std::nullopt});
  store.append_metrics(id, rows);
  store.set_run_status(id, snip::RunStatus::finished);
  return id;
}

}  // namespace snip_test
