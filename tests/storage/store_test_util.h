// Helpers shared by the storage tests: a temporary directory removed at the end, file
// bytes for "the original file is untouched" checks, raw SQLite access, and small
// deterministic fixtures (a run spec, a statistics round, a plan).
#pragma once
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "snip/plan.h"
#include "snip/stats.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace snip_test {

inline std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
}

// Runs SQL on a raw connection (outside the Store), e.g. to forge old or future databases.
inline void raw_exec(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path.c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  ASSERT_EQ(rc, SQLITE_OK) << msg;
}

inline std::string raw_query_text(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open(db_path.c_str(), &db);
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
    const auto* t = sqlite3_column_text(st, 0);
    out = t ? reinterpret_cast<const char*>(t) : "";
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return out;
}

inline snip::ModelDims tiny_dims(int blocks = 2) {
  return {64, 172, blocks, 4, 2};
}

inline snip::RunSpec tiny_spec(const std::string& name = "tiny") {
  snip::RunSpec s;
  s.name = name;
  s.dims = tiny_dims();
  s.model_config = {{"hidden_size", 64}, {"vocab_size", 256}, {"max_position_embeddings", 128}};
  s.train_config = {{"lr", 3e-3}, {"steps", 200}, {"batch_size", 8}, {"replan_every", 50}};
  s.data_source = "resources/corpus/kjv.txt.gz";
  s.recipe = "snip";
  s.seed = 1234;
  s.method = "snip";
  s.notes = "first try, λ = 0.1";
  return s;
}

// A step's metrics as a pure function of the step, so any row can be checked on its own.
inline snip::MetricRow row_for_step(int64_t step) {
  snip::MetricRow r;
  r.step = step;
  r.train_loss = 5.0 / double(1 + step) + 0.001 * double(step % 7);
  if (step % 10 == 0) r.val_loss = r.train_loss + 0.25;
  r.lr = 3e-3 * double(step % 100) / 100.0;
  r.grad_norm = 1.0 + double(step % 13) / 13.0;
  r.tokens_per_s = 10000.0 + double(step);
  r.fp4_fraction = 0.75;
  if (step % 25 == 0) r.bf16_gap = 0.01 * double(step % 3);
  return r;
}

inline snip::StatsRound sample_round(const snip::ModelDims& dims, int64_t step) {
  snip::StatsRound r;
  r.step = step;
  r.batch_id = "train:e0:b" + std::to_string(step);
  r.dims = dims;
  r.tokens = 4096;
  r.recipe = "snip";
  r.globals = {{"loss0", 3.141592653589793}, {"curvature_c", 1.0 / 3.0}, {"sigma_eps", 1e-300}};
  r.options = {{"noise_passes", 3}, {"sigma_eta_rel", 1e-2}, {"exact", false}};
  for (const auto& info : snip::linear_layers(dims)) {
    snip::LayerStats l;
    l.name = info.name;
    l.scalars = {{"x_norm", 1.0 + info.index / 7.0}, {"w_norm", 0.1 * (info.index + 1)}, {"jac_sq", 2.5e-7}};
    l.per_precision["fp8"] = {{"dy_err", 1e-3 * (info.index + 1)}, {"first_order", -1.25e-9}};
    l.per_precision["fp4"] = {{"dy_err", 1e-2 * (info.index + 1)}, {"first_order", 3.0e-8}};
    std::vector<float> gamma(size_t(info.out_features));
    for (size_t i = 0; i < gamma.size(); ++i) gamma[i] = float(i) * 0.37f + float(info.index) / 3.0f;
    l.vectors["gamma"] = gamma;
    l.vectors["empty"] = {};
    r.layers.push_back(std::move(l));
  }
  return r;
}

inline snip::Plan sample_plan(const snip::ModelDims& dims) {
  snip::Plan p;
  for (const auto& info : snip::linear_layers(dims)) {
    const bool mlp =
        info.type == snip::LayerType::gate || info.type == snip::LayerType::up || info.type == snip::LayerType::down;
    p.layers[info.name] = mlp ? snip::LinearPrecision::uniform(snip::Precision::fp4)
                              : snip::LinearPrecision{snip::Precision::fp8, snip::Precision::fp4, snip::Precision::fp8};
  }
  p.method = "snip";
  p.budget = 0.75;
  // what the layers give on this model (the store refuses a claim they contradict)
  p.achieved_fp4_fraction = snip::fp4_flop_fraction(snip::resolve_plan(p, dims, nullptr), dims);
  p.recipe = "snip";
  p.provenance = {{"lambda", 0.1}, {"solver", "glpk"}};
  return p;
}

}  // namespace snip_test
