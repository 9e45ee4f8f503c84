// Plans with their solver provenance, one row per (layer, GEMM role) assignment, and the
// plan timeline of a run (which plan was in effect over which steps).
#include <cmath>

#include "snip/error.h"
#include "snip/plan.h"
#include "snip/store.h"
#include "store_impl.h"

namespace snip {

using store_detail::now_ms;
using store_detail::ReadTxn;
using store_detail::Stmt;
using store_detail::WriteTxn;

namespace {

constexpr const char* kPlanColumns =
    "id, run_id, stats_round_id, method, budget, achieved_fp4_fraction, recipe, provenance, options, objective, "
    "predicted_delta_loss, predicted_delta_weight, solver_status, solve_time_s, mip_gap, created_ms";

PlanRecord read_plan_row(const Stmt& st, const std::string& db_path) {
  PlanRecord r;
  r.id = st.column_int64(0);
  const std::string where = db_path + ": plan " + std::to_string(r.id);
  r.solve.run_id = st.column_opt_int64(1);
  r.solve.stats_round_id = st.column_opt_int64(2);
  r.plan.method = st.column_text(3);
  r.plan.budget = st.column_double(4);
  r.plan.achieved_fp4_fraction = st.column_double(5);
  r.plan.recipe = st.column_text(6);
  r.plan.provenance = store_detail::parse_json_column(st.column_text(7), where + " provenance");
  r.solve.options = store_detail::parse_json_column(st.column_text(8), where + " options");
  r.solve.objective = st.column_opt_double(9);
  r.solve.predicted_delta_loss = st.column_opt_double(10);
  r.solve.predicted_delta_weight = st.column_opt_double(11);
  r.solve.solver_status = st.column_text(12);
  r.solve.solve_time_s = st.column_opt_double(13);
  r.solve.mip_gap = st.column_opt_double(14);
  r.created_ms = st.column_int64(15);
  return r;
}

void read_assignments(store_detail::Db& db, PlanRecord& r) {
  Stmt st(db, "SELECT layer, role, precision FROM plan_assignments WHERE plan_id = ?");
  st.bind(1, r.id);
  while (st.step()) {
    const std::string where = db.path() + ": plan " + std::to_string(r.id) + " layer " + st.column_text(0);
    try {
      r.plan.layers[st.column_text(0)][parse_gemm(st.column_text(1))] = parse_precision(st.column_text(2));
    } catch (const Error& e) {
      throw Error(where + ": " + e.what());
    }
  }
}

}  // namespace

int64_t Store::add_plan(const Plan& plan, const PlanSolveInfo& solve) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  if (solve.run_id) store_detail::require_run(db, *solve.run_id);
  if (solve.stats_round_id) {
    Stmt r(db, "SELECT 1 FROM stats_rounds WHERE id = ?");
    r.bind(1, *solve.stats_round_id);
    if (!r.step())
      throw Error(impl_->path + ": the plan names statistics round " + std::to_string(*solve.stats_round_id) +
                  ", which does not exist");
  }
  // The store computes what it can: with the run's model, the achieved fraction from the layers.
  double achieved = plan.achieved_fp4_fraction;
  if (solve.run_id) {
    const ModelDims dims = run(*solve.run_id).spec.dims;
    std::vector<std::string> warnings;
    achieved = fp4_flop_fraction(resolve_plan(plan, dims, &warnings), dims);
    if (std::abs(achieved - plan.achieved_fp4_fraction) > 1e-6)
      throw Error(impl_->path + ": the plan claims an achieved FP4 fraction of " +
                  std::to_string(plan.achieved_fp4_fraction) + " but its layers put " + std::to_string(achieved) +
                  " of run " + std::to_string(*solve.run_id) + "'s linear-layer FLOPs in FP4; nothing was stored");
  }
  Stmt st(db,
          "INSERT INTO plans (run_id, stats_round_id, method, budget, achieved_fp4_fraction, recipe, provenance, "
          "options, objective, predicted_delta_loss, predicted_delta_weight, solver_status, solve_time_s, mip_gap, "
          "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
  st.bind(1, solve.run_id).bind(2, solve.stats_round_id).bind(3, plan.method).bind(4, plan.budget);
  st.bind(5, achieved).bind(6, plan.recipe).bind(7, plan.provenance.dump());
  st.bind(8, solve.options.dump()).bind(9, solve.objective).bind(10, solve.predicted_delta_loss);
  st.bind(11, solve.predicted_delta_weight).bind(12, solve.solver_status).bind(13, solve.solve_time_s);
  st.bind(14, solve.mip_gap).bind(15, now_ms()).run();
  const int64_t id = sqlite3_last_insert_rowid(db.handle());
  Stmt a(db, "INSERT INTO plan_assignments (plan_id, layer, role, precision) VALUES (?, ?, ?, ?)");
  for (const auto& [layer, lp] : plan.layers)
    for (Gemm g : kAllGemms) a.bind(1, id).bind(2, layer).bind(3, gemm_name(g)).bind(4, precision_name(lp[g])).run();
  txn.commit();
  return id;
}

PlanRecord Store::plan(int64_t plan_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  Stmt st(db, std::string("SELECT ") + kPlanColumns + " FROM plans WHERE id = ?");
  st.bind(1, plan_id);
  if (!st.step())
    throw Error(impl_->path + ": plan " + std::to_string(plan_id) + " does not exist (see `snip show --run ID`)");
  PlanRecord r = read_plan_row(st, impl_->path);
  read_assignments(db, r);
  return r;
}

std::vector<PlanRecord> Store::plans(std::optional<int64_t> run_id) const {
  auto& db = impl_->db;
  ReadTxn snapshot(db);
  Stmt st(db, std::string("SELECT ") + kPlanColumns + " FROM plans WHERE ?1 IS NULL OR run_id = ?1 ORDER BY id DESC");
  st.bind(1, run_id);
  std::vector<PlanRecord> out;
  while (st.step()) out.push_back(read_plan_row(st, impl_->path));
  for (auto& r : out) read_assignments(db, r);
  return out;
}

std::vector<LinearPrecision> Store::resolve_plan_for_run(int64_t plan_id, int64_t run_id,
                                                         std::vector<std::string>* warnings) const {
  const PlanRecord p = plan(plan_id);
  const RunInfo r = run(run_id);
  try {
    return resolve_plan(p.plan, r.spec.dims, warnings);
  } catch (const Error& e) {
    throw Error(impl_->path + ": plan " + std::to_string(plan_id) + " against run " + std::to_string(run_id) + " (" +
                r.spec.name + "): " + e.what());
  }
}

void Store::set_plan_in_effect(int64_t run_id, int64_t plan_id, int64_t first_step) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  store_detail::require_run(db, run_id);
  {
    Stmt p(db, "SELECT 1 FROM plans WHERE id = ?");
    p.bind(1, plan_id);
    if (!p.step()) throw Error(impl_->path + ": plan " + std::to_string(plan_id) + " does not exist");
  }
  // Close whatever was in effect before first_step, then open the new entry.
  Stmt close(db,
             "UPDATE plan_timeline SET last_step = ?2 - 1 WHERE run_id = ?1 AND first_step < ?2 AND "
             "(last_step IS NULL OR last_step >= ?2)");
  close.bind(1, run_id).bind(2, first_step).run();
  Stmt ins(db, "INSERT OR REPLACE INTO plan_timeline (run_id, first_step, plan_id, last_step) VALUES (?, ?, ?, NULL)");
  ins.bind(1, run_id).bind(2, first_step).bind(3, plan_id).run();
  txn.commit();
}

void Store::end_plan_timeline(int64_t run_id, int64_t last_step) {
  auto& db = impl_->db;
  WriteTxn txn(db);
  Stmt st(db, "UPDATE plan_timeline SET last_step = ?2 WHERE run_id = ?1 AND last_step IS NULL AND first_step <= ?2");
  st.bind(1, run_id).bind(2, last_step).run();
  txn.commit();
}

std::vector<PlanTimelineEntry> Store::plan_timeline(int64_t run_id) const {
  Stmt st(impl_->db, "SELECT plan_id, first_step, last_step FROM plan_timeline WHERE run_id = ? ORDER BY first_step");
  st.bind(1, run_id);
  std::vector<PlanTimelineEntry> out;
  while (st.step()) out.push_back({st.column_int64(0), st.column_int64(1), st.column_opt_int64(2)});
  return out;
}

}  // namespace snip
