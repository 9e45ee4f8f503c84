// Statistics rounds (METHOD.md section 4) stored losslessly in narrow tables: every global,
// every per-layer scalar, every per-precision value and every vector (as float32 blobs),
// so estimators can be recomputed later from the database alone.
#include <cstring>

#include "snip/error.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip {

using store_detail::now_ms;
using store_detail::ReadTxn;
using store_detail::Stmt;
using store_detail::WriteTxn;

namespace {
// stats_values.precision for precision-independent scalars. Per-precision maps may not use it.
constexpr const char* kScalarTag = "";
}  // namespace

int64_t Store::add_stats_round(const StatsRound& round, std::optional<int64_t> run_id) {
  auto& db = impl_->db;
  for (const auto& l : round.layers)
    if (l.per_precision.count(kScalarTag))
      throw Error("statistics round at step " + std::to_string(round.step) + ": layer " + l.name +
                  " has a per-precision map with an empty precision name");
  WriteTxn txn(db);
  if (run_id) store_detail::require_run(db, *run_id);
  Stmt st(db,
          "INSERT INTO stats_rounds (run_id, step, batch_id, recipe, tokens, hidden, intermediate, num_layers, "
          "num_heads, num_kv_heads, options, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(1, run_id).bind(2, round.step).bind(3, round.batch_id).bind(4, round.recipe).bind(5, round.tokens);
  st.bind(6, round.dims.hidden).bind(7, round.dims.intermediate).bind(8, round.dims.num_layers);
  st.bind(9, round.dims.num_heads).bind(10, round.dims.num_kv_heads).bind(11, round.options.dump());
  st.bind(12, now_ms()).run();
  const int64_t id = sqlite3_last_insert_rowid(db.handle());

  Stmt g(db, "INSERT INTO stats_globals (round_id, key, value) VALUES (?, ?, ?)");
  for (const auto& [k, v] : round.globals) g.bind(1, id).bind(2, k).bind(3, v).run();

  Stmt layer(db, "INSERT INTO stats_layers (round_id, position, name) VALUES (?, ?, ?)");
  Stmt value(db, "INSERT INTO stats_values (round_id, position, precision, key, value) VALUES (?, ?, ?, ?, ?)");
  Stmt vec(db, "INSERT INTO stats_vectors (round_id, position, key, data) VALUES (?, ?, ?, ?)");
  for (size_t pos = 0; pos < round.layers.size(); ++pos) {
    const LayerStats& l = round.layers[pos];
    layer.bind(1, id).bind(2, int64_t(pos)).bind(3, l.name).run();
    for (const auto& [k, v] : l.scalars)
      value.bind(1, id).bind(2, int64_t(pos)).bind(3, kScalarTag).bind(4, k).bind(5, v).run();
    for (const auto& [p, m] : l.per_precision)
      for (const auto& [k, v] : m) value.bind(1, id).bind(2, int64_t(pos)).bind(3, p).bind(4, k).bind(5, v).run();
    // Vectors as raw float32 in host byte order (little-endian on every supported platform).
    for (const auto& [k, v] : l.vectors)
      vec.bind(1, id).bind(2, int64_t(pos)).bind(3, k).bind_blob(4, v.data(), v.size() * sizeof(float)).run();
  }
  txn.commit();
  return id;
}

StatsRound Store::stats_round(int64_t round_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  const std::string where = impl_->path + ": statistics round " + std::to_string(round_id);
  Stmt st(db,
          "SELECT step, batch_id, recipe, tokens, hidden, intermediate, num_layers, num_heads, num_kv_heads, options "
          "FROM stats_rounds WHERE id = ?");
  st.bind(1, round_id);
  if (!st.step()) throw Error(where + " does not exist (list rounds with `snip show --run ID`)");
  StatsRound r;
  r.step = st.column_int64(0);
  r.batch_id = st.column_text(1);
  r.recipe = st.column_text(2);
  r.tokens = st.column_int64(3);
  r.dims.hidden = int(st.column_int64(4));
  r.dims.intermediate = int(st.column_int64(5));
  r.dims.num_layers = int(st.column_int64(6));
  r.dims.num_heads = int(st.column_int64(7));
  r.dims.num_kv_heads = int(st.column_int64(8));
  r.options = store_detail::parse_json_column(st.column_text(9), where + " options");

  Stmt g(db, "SELECT key, value FROM stats_globals WHERE round_id = ?");
  g.bind(1, round_id);
  while (g.step()) r.globals[g.column_text(0)] = g.column_double(1);

  Stmt layers(db, "SELECT position, name FROM stats_layers WHERE round_id = ? ORDER BY position");
  layers.bind(1, round_id);
  while (layers.step()) {
    if (layers.column_int64(0) != int64_t(r.layers.size())) throw Error(where + ": layer positions have a gap");
    LayerStats l;
    l.name = layers.column_text(1);
    r.layers.push_back(std::move(l));
  }
  Stmt values(db, "SELECT position, precision, key, value FROM stats_values WHERE round_id = ?");
  values.bind(1, round_id);
  while (values.step()) {
    auto& l = r.layers.at(size_t(values.column_int64(0)));
    const std::string prec = values.column_text(1);
    if (prec == kScalarTag)
      l.scalars[values.column_text(2)] = values.column_double(3);
    else
      l.per_precision[prec][values.column_text(2)] = values.column_double(3);
  }
  Stmt vecs(db, "SELECT position, key, data FROM stats_vectors WHERE round_id = ?");
  vecs.bind(1, round_id);
  while (vecs.step()) {
    const auto blob = vecs.column_blob(2);
    if (blob.size() % sizeof(float) != 0)
      throw Error(where + ": vector " + vecs.column_text(1) + " has " + std::to_string(blob.size()) +
                  " bytes, not a whole number of float32 values; the database is damaged");
    std::vector<float> v(blob.size() / sizeof(float));
    if (!v.empty()) std::memcpy(v.data(), blob.data(), blob.size());
    r.layers.at(size_t(vecs.column_int64(0))).vectors[vecs.column_text(1)] = std::move(v);
  }
  return r;
}

std::vector<StatsRoundInfo> Store::stats_rounds(std::optional<int64_t> run_id) const {
  Stmt st(impl_->db,
          "SELECT r.id, r.run_id, r.step, r.batch_id, r.recipe, r.tokens, r.created_ms, "
          "(SELECT COUNT(*) FROM stats_layers l WHERE l.round_id = r.id) FROM stats_rounds r "
          "WHERE ?1 IS NULL OR r.run_id = ?1 ORDER BY r.run_id, r.step, r.id");
  st.bind(1, run_id);
  std::vector<StatsRoundInfo> out;
  while (st.step()) {
    StatsRoundInfo i;
    i.id = st.column_int64(0);
    i.run_id = st.column_opt_int64(1);
    i.step = st.column_int64(2);
    i.batch_id = st.column_text(3);
    i.recipe = st.column_text(4);
    i.tokens = st.column_int64(5);
    i.created_ms = st.column_int64(6);
    i.num_layers = int(st.column_int64(7));
    out.push_back(i);
  }
  return out;
}

std::vector<StatsValuePoint> Store::stats_value_series(int64_t run_id, const std::string& key) const {
  Stmt st(impl_->db,
          "SELECT r.id, r.step, v.position, l.name, v.precision, v.value FROM stats_rounds r "
          "JOIN stats_values v ON v.round_id = r.id JOIN stats_layers l ON l.round_id = r.id AND "
          "l.position = v.position WHERE r.run_id = ?1 AND v.key = ?2 AND v.value IS NOT NULL "
          "ORDER BY r.step, r.id, v.position, v.precision");
  st.bind(1, run_id).bind(2, key);
  std::vector<StatsValuePoint> out;
  while (st.step())
    out.push_back({st.column_int64(0), st.column_int64(1), int(st.column_int64(2)), st.column_text(3),
                   st.column_text(4), st.column_double(5)});
  return out;
}

}  // namespace snip
