// The SNIP planner: the section-7 ILP on GLPK, its brute-force reference twin, feasibility
// diagnosis with causes, and the method dispatch (make_plan).
#include "snip/planner.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <sstream>

#include "detail.h"
#include "snip/atomic_file.h"
#include "snip/baselines.h"
#include "snip/error.h"
#include "snip/names.h"
#include "snip/recipe_name.h"
#include "snip/text.h"

namespace snip {

namespace {

constexpr std::array<Named<Method>, kAllMethods.size()> kMethodNames{{{Method::snip, "snip"},
                                                                      {Method::min_err, "min-err"},
                                                                      {Method::min_rel_err, "min-rel-err"},
                                                                      {Method::e_layer_type, "e-layer-type"},
                                                                      {Method::e_layer_id, "e-layer-id"},
                                                                      {Method::random, "random"},
                                                                      {Method::uniform_bf16, "uniform-bf16"},
                                                                      {Method::uniform_fp8, "uniform-fp8"},
                                                                      {Method::uniform_fp4, "uniform-fp4"},
                                                                      {Method::hawq, "hawq"},
                                                                      {Method::fp4_fprop_only, "fp4-fprop-only"},
                                                                      {Method::fp4_dgrad_only, "fp4-dgrad-only"},
                                                                      {Method::fp4_wgrad_only, "fp4-wgrad-only"}}};

constexpr bool names_follow_kAllMethods() {
  for (std::size_t i = 0; i < kAllMethods.size(); ++i)
    if (kMethodNames[i].value != kAllMethods[i]) return false;
  return true;
}
static_assert(names_follow_kAllMethods(), "kMethodNames lists every method in kAllMethods order");

}  // namespace

const char* method_name(Method m) {
  return name_of(kMethodNames, m);
}

Method parse_method(std::string_view s) {
  return parse_name(kMethodNames, s, "method");
}

std::string method_names(std::string_view separator) {
  return names_of(kMethodNames, separator);
}

bool method_uses_ilp(Method m) {
  return m == Method::snip || m == Method::min_err || m == Method::min_rel_err || m == Method::hawq;
}

namespace {

std::string fmt(double v, int digits = 4) {
  return format_fixed(v, digits);
}

using detail::budget_holds;
using detail::role_flops;

// One decision of the ILP: a tie group (or a single layer) in one role (or all roles).
struct Slot {
  std::vector<int> layers;  // indices into CostTable::layers
  int role = -1;            // -1: all roles (per-layer plan), 0: fprop, 1: backward
  int stage = 0;
  double flops = 0;
  PerPrecision cost{};
  std::vector<Precision> candidates;
};

struct Model {
  std::vector<Slot> slots;
  std::vector<int> stage_of;  // per table layer
  int stages = 1;
  std::vector<std::string> notes;
};

std::string pinned_summary(const std::vector<std::string>& names, size_t max_names = 3) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < max_names; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > max_names) s += ", ...";
  return s;
}

// The request's numbers and the table's costs as GLPK can take them; throws snip::Error naming
// the cause (GLPK aborts the process on what it does not accept).
void check_request(const CostTable& costs, const PlanRequest& req) {
  if (costs.layers.empty()) throw Error("the cost table has no layers");
  if (!std::isfinite(req.budget) || req.budget < 0 || req.budget > 1)
    throw Error("budget " + fmt(req.budget, 4) +
                " is outside [0, 1]: it is the fraction of linear-layer FLOPs that must run in FP4");
  // GLPK aborts the process on parameters it does not accept; these are refused here first.
  if (!std::isfinite(req.mip_gap) || req.mip_gap < 0 || req.mip_gap >= 1)
    throw Error("MIP gap " + format_g(req.mip_gap) +
                " is outside [0, 1): it is the relative distance from the optimum at which the solver may stop "
                "(0 proves optimality, 0.01 accepts 1%)");
  if (req.time_limit_ms <= 0)
    throw Error("solver time limit " + std::to_string(req.time_limit_ms) +
                " ms must be positive (the default is 20000 ms)");
  if (req.allow_bf16 &&
      (!std::isfinite(req.bf16_max_fraction) || req.bf16_max_fraction < 0 || req.bf16_max_fraction > 1))
    throw Error("the BF16 limit " + fmt(req.bf16_max_fraction) + " is outside [0, 1]");
  if (req.pipeline.split() && req.stages > 1)
    throw Error("stages " + std::to_string(req.stages) + " and " + pipeline_layout_text(req.pipeline) +
                " together: a pipeline layout gives every stage the same plan, so each stage meets the budget when "
                "the whole model does; drop the stages option");
  if (req.per_role && !costs.has_roles)
    throw Error(costs.source +
                ": per-role planning needs costs per GEMM role (a 'role' column with fprop and backward "
                "rows, or statistics); this table has one cost per layer");
  for (const auto& c : costs.layers) {
    for (Precision p : {Precision::fp8, Precision::fp4})
      if (!c.has(p)) throw Error(costs.source + ": " + c.name + " has no " + precision_name(p) + " cost");
    // GLPK aborts the process on non-finite coefficients; refuse them here with a message.
    for (Precision p : {Precision::bf16, Precision::fp8, Precision::fp4})
      for (int r = 0; r < kNumRoles; ++r)
        if (std::isinf(c.cost[r][int(p)]))
          throw Error(costs.source + ": the " + precision_name(p) + " cost of " + c.name +
                      " is infinite (statistics too large to combine?); the planner needs finite costs");
    if (!std::isfinite(c.flops) || !(c.flops > 0))
      throw Error(costs.source + ": " + c.name + " has FLOPs " + std::to_string(c.flops) + "; they must be positive");
  }
  if (req.allow_bf16)
    for (const auto& c : costs.layers)
      if (!c.has(Precision::bf16))
        throw Error(costs.source + ": BF16 as a third choice needs a bf16 cost for every layer; " + c.name +
                    " has none (add bf16 rows, or plan without --allow-bf16)");
}

// The pin of every table layer (none: free), checked against the table.
std::vector<std::optional<Precision>> pins_by_layer(const CostTable& costs, const PlanRequest& req,
                                                    std::vector<std::string>& notes) {
  std::map<std::string, int> index_of;
  for (size_t i = 0; i < costs.layers.size(); ++i) index_of[costs.layers[i].name] = int(i);
  std::vector<std::optional<Precision>> pin(costs.layers.size());
  for (const auto& [name, p] : req.pins) {
    auto it = index_of.find(name);
    if (it == index_of.end())
      throw Error("pin " + name + "=" + precision_name(p) + " names a layer that is not in the cost table (" +
                  std::to_string(costs.layers.size()) + " layers, e.g. " + costs.layers.front().name + ")");
    if (p == Precision::fp32)
      throw Error("pin " + name + "=fp32: fp32 is not a planning choice (use bf16, fp8 or fp4)");
    if (p == Precision::bf16 && !costs.layers[it->second].has(Precision::bf16) && !req.allow_bf16)
      notes.push_back("pin " + name + "=bf16 has no bf16 cost; counted as 0");
    pin[it->second] = p;
  }
  return pin;
}

// One slot per tie group (per role with per_role), with its candidates, FLOPs and costs.
void add_slots(Model& m, const CostTable& costs, const PlanRequest& req,
               const std::vector<std::optional<Precision>>& pin) {
  // Tie groups: q/k/v and gate/up of a block move together.
  const auto groups = detail::tie_groups(costs, req);
  for (const auto& g : groups) {
    std::optional<Precision> gp;
    int pinned_member = -1;
    for (int i : g)
      if (pin[i]) {
        if (gp && *gp != *pin[i])
          throw Error("pins conflict with ties: " + costs.layers[pinned_member].name + " is pinned " +
                      precision_name(*gp) + " but " + costs.layers[i].name + " " + precision_name(*pin[i]) +
                      (costs.layers[pinned_member].block == costs.layers[i].block
                           ? ", and ties keep q/k/v (and gate/up) of a block in one precision"
                           : ", and at " + pipeline_layout_text(req.pipeline) +
                                 " Megatron names both alike on their stages, so they share one precision"));
        gp = pin[i];
        pinned_member = i;
      }
    std::vector<Precision> cand;
    if (gp)
      cand = {*gp};
    else if (req.allow_bf16)
      cand = {Precision::bf16, Precision::fp8, Precision::fp4};
    else
      cand = {Precision::fp8, Precision::fp4};
    for (int role = (req.per_role ? 0 : -1); role < (req.per_role ? kNumRoles : 0); ++role) {
      Slot s;
      s.layers = g;
      s.role = role;
      s.stage = m.stage_of[g.front()];
      s.candidates = cand;
      for (int i : g) {
        const auto& c = costs.layers[i];
        s.flops += role < 0 ? c.flops : role_flops(c.flops, role);
        for (int pi = 0; pi < kNumPrecisions; ++pi) {
          double v = role < 0 ? c.cost[0][pi] + c.cost[1][pi] : c.cost[role][pi];
          if (std::isnan(v) && gp && int(*gp) == pi) v = 0;  // pinned to a precision without a cost
          s.cost[pi] += v;
        }
      }
      m.slots.push_back(std::move(s));
    }
  }
}

// Reachability of the FP4 target, globally and per stage, and of the BF16 limit with the pins.
void check_reachable(const Model& m, const CostTable& costs, const PlanRequest& req,
                     const std::vector<std::optional<Precision>>& pin) {
  // FP4 can go everywhere except pins.
  std::vector<double> stage_total(m.stages, 0.0), stage_max(m.stages, 0.0);
  double bf16_pinned = 0, total = 0;
  for (const auto& s : m.slots) {
    stage_total[s.stage] += s.flops;
    total += s.flops;
    if (std::find(s.candidates.begin(), s.candidates.end(), Precision::fp4) != s.candidates.end())
      stage_max[s.stage] += s.flops;
    if (s.candidates.size() == 1 && s.candidates[0] == Precision::bf16) bf16_pinned += s.flops;
  }
  auto pinned_non_fp4_in = [&](int stage) {
    std::vector<std::string> names;
    for (size_t i = 0; i < pin.size(); ++i)
      if (pin[i] && *pin[i] != Precision::fp4 && (stage < 0 || m.stage_of[i] == stage))
        names.push_back(costs.layers[i].name);
    return names;
  };
  for (int s = 0; s < m.stages; ++s) {
    if (stage_max[s] >= req.budget * stage_total[s]) continue;
    const auto names = pinned_non_fp4_in(m.stages > 1 ? s : -1);
    std::string where = m.stages > 1 ? " in pipeline stage " + std::to_string(s) : "";
    throw Error("budget " + fmt(req.budget) + " is unreachable" + where + ": with the " + std::to_string(names.size()) +
                " pinned non-FP4 layer" + (names.size() == 1 ? "" : "s") + " (" + pinned_summary(names) +
                ") the largest possible FP4 fraction" + (m.stages > 1 ? " there" : "") + " is " +
                fmt(stage_max[s] / stage_total[s]) + "; remove pins or lower the budget");
  }
  if (bf16_pinned > 0 && bf16_pinned > req.bf16_max_fraction * total && req.allow_bf16)
    throw Error("the BF16 pins take " + fmt(bf16_pinned / total) + " of the FLOPs, above the BF16 limit " +
                fmt(req.bf16_max_fraction) + "; raise the limit or remove BF16 pins");
}

// Builds the decision slots and checks the request; throws snip::Error naming the cause.
Model build_model(const CostTable& costs, const PlanRequest& req) {
  check_request(costs, req);
  Model m;
  m.stages = req.stages;
  m.stage_of = stage_of_layers(costs, req.stages);
  const std::vector<std::optional<Precision>> pin = pins_by_layer(costs, req, m.notes);
  add_slots(m, costs, req, pin);
  check_reachable(m, costs, req, pin);
  return m;
}

std::vector<RoleChoice> choice_from_slots(const Model& m, size_t n_layers, const std::vector<Precision>& slot_prec) {
  std::vector<RoleChoice> choice(n_layers, RoleChoice{Precision::fp8, Precision::fp8});
  for (size_t s = 0; s < m.slots.size(); ++s)
    for (int i : m.slots[s].layers) {
      if (m.slots[s].role < 0)
        choice[i] = {slot_prec[s], slot_prec[s]};
      else
        choice[i][m.slots[s].role] = slot_prec[s];
    }
  return choice;
}

bool bf16_holds(const CostTable& costs, const std::vector<RoleChoice>& choice, const PlanRequest& req) {
  if (!req.allow_bf16) return true;
  double bf = 0, all = 0;
  for (size_t i = 0; i < costs.layers.size(); ++i)
    for (int r = 0; r < kNumRoles; ++r) {
      const double f = role_flops(costs.layers[i].flops, r);
      all += f;
      if (choice[i][r] == Precision::bf16) bf += f;
    }
  return bf / all <= req.bf16_max_fraction;
}

double objective_of(const Model& m, const std::vector<Precision>& slot_prec) {
  double obj = 0;
  for (size_t s = 0; s < m.slots.size(); ++s) obj += m.slots[s].cost[int(slot_prec[s])];
  return obj;
}

struct GapTracker {
  double gap = kNaN;
};

void glpk_callback(glp_tree* tree, void* info) {
  auto* t = static_cast<GapTracker*>(info);
  const int reason = glp_ios_reason(tree);
  if (reason == GLP_IBINGO || reason == GLP_ISELECT) t->gap = glp_ios_mip_gap(tree);
}

// The ILP as plain arrays (GLPK's 1-based conventions), built in C++ before GLPK is called.
struct IlpArrays {
  int ncols = 0, nrows = 0;
  std::vector<double> obj;             // [1..ncols]
  std::vector<int> row_type;           // [1..nrows]
  std::vector<double> row_lo, row_hi;  // [1..nrows]
  std::vector<int> ia, ja;             // [1..nnz]
  std::vector<double> ar;              // [1..nnz]
};

struct IlpOutcome {
  bool glpk_failed = false;  // GLPK reported an internal error (glp_error) instead of aborting
  int rc = 0, status = 0;
  std::vector<double> values;  // [1..ncols]
};

// GLPK's answer to an internal error (bad parameter, a state it did not expect) is to print a
// message and abort() the process. Its error hook lets us jump back instead; the environment is
// then inconsistent, so it is freed (glp_free_env) and the next GLPK call starts a fresh one.
extern "C" void glpk_error_hook(void* info) {
  std::longjmp(*static_cast<std::jmp_buf*>(info), 1);
}

// GLPK's terminal output while the planner runs (its error text included, which GLPK prints even
// with output off): kept for the error message instead of reaching the user's terminal.
thread_local char t_glpk_said[512];
extern "C" int glpk_term_hook(void*, const char* s) {
  const size_t used = std::strlen(t_glpk_said);
  if (used + 1 < sizeof t_glpk_said) std::strncat(t_glpk_said, s, sizeof t_glpk_said - used - 1);
  return 1;  // handled: GLPK prints nothing
}

// Every GLPK call of the planner. Between setjmp and the calls that may longjmp back there are
// only C calls and trivially destructible locals, so the jump skips no C++ destructor; all
// C++ containers are owned by the caller and sized before the call.
void run_glpk(const IlpArrays& a, glp_iocp* parm, IlpOutcome* out) {
  static thread_local std::jmp_buf jump;
  static thread_local glp_prob* volatile lp;
  lp = nullptr;
  if (setjmp(jump) != 0) {
    glp_free_env();  // frees the problem too; never glp_delete_prob after a failure
    out->glpk_failed = true;
    return;
  }
  t_glpk_said[0] = '\0';
  glp_term_hook(glpk_term_hook, nullptr);
  glp_error_hook(glpk_error_hook, &jump);
  lp = glp_create_prob();
  glp_set_obj_dir(lp, GLP_MIN);
  if (a.ncols > 0) glp_add_cols(lp, a.ncols);
  for (int c = 1; c <= a.ncols; ++c) {
    glp_set_col_kind(lp, c, GLP_BV);
    glp_set_obj_coef(lp, c, a.obj[size_t(c)]);
  }
  if (a.nrows > 0) glp_add_rows(lp, a.nrows);
  for (int r = 1; r <= a.nrows; ++r)
    glp_set_row_bnds(lp, r, a.row_type[size_t(r)], a.row_lo[size_t(r)], a.row_hi[size_t(r)]);
  if (a.ia.size() > 1) glp_load_matrix(lp, int(a.ia.size()) - 1, a.ia.data(), a.ja.data(), a.ar.data());
  // Cover-cut generation prints even at GLP_MSG_OFF; the term hook keeps it off the terminal.
  if (parm->presolve == GLP_OFF) {  // glp_intopt then needs an optimal LP relaxation first
    glp_smcp smcp;
    glp_init_smcp(&smcp);
    smcp.msg_lev = GLP_MSG_OFF;
    glp_simplex(lp, &smcp);
  }
  out->rc = glp_intopt(lp, parm);
  out->status = glp_mip_status(lp);
  for (int c = 1; c <= a.ncols; ++c) out->values[size_t(c)] = glp_mip_col_val(lp, c);
  glp_delete_prob(lp);
  lp = nullptr;
  glp_error_hook(nullptr, nullptr);
  glp_term_hook(nullptr, nullptr);
}

// Solves the arrays; if GLPK's presolver fails on a degenerate problem (e.g. every column fixed
// by the budget row), solves again without it (LP relaxation first, as glp_intopt then needs).
IlpOutcome solve_arrays(const IlpArrays& a, glp_iocp parm) {
  IlpOutcome out;
  out.values.assign(size_t(a.ncols) + 1, 0.0);
  run_glpk(a, &parm, &out);
  if (!out.glpk_failed) return out;
  IlpOutcome retry;
  retry.values.assign(size_t(a.ncols) + 1, 0.0);
  parm.presolve = GLP_OFF;
  run_glpk(a, &parm, &retry);
  return retry;
}

}  // namespace

std::vector<std::vector<int>> detail::tie_groups(const CostTable& costs, const PlanRequest& req) {
  // A pipeline layout ties the layers of one type at one stage-local position: Megatron names
  // them alike on every chunk (plan.h, PipelineLayout).
  int chunk = 0;
  if (req.pipeline.split()) {
    std::set<int> blocks;
    for (const auto& c : costs.layers) blocks.insert(c.block);
    chunk = pipeline_chunk_blocks(*blocks.rbegin() + 1, req.pipeline);
  }
  std::vector<std::vector<int>> groups;
  std::map<std::pair<int, int>, int> group_of;  // (stage-local block, tie class) -> group
  for (size_t i = 0; i < costs.layers.size(); ++i) {
    const auto t = costs.layers[i].type;
    int cls = 10 + int(t);  // its own class: alone unless a pipeline layout ties it
    if (req.ties && (t == LayerType::q || t == LayerType::k || t == LayerType::v)) cls = 0;
    if (req.ties && (t == LayerType::gate || t == LayerType::up)) cls = 1;
    const int block = costs.layers[i].block;
    const auto [it, fresh] = group_of.emplace(std::pair(chunk > 0 ? block % chunk : block, cls), int(groups.size()));
    if (fresh)
      groups.push_back({int(i)});
    else
      groups[size_t(it->second)].push_back(int(i));
  }
  return groups;
}

// The budget check as the user sees it: the exact FP4 fraction of every stage and of the whole
// plan is ≥ ρ, recomputed from the per-layer choice (not from the solver's row activity).
bool detail::budget_holds(const CostTable& costs, const std::vector<RoleChoice>& choice,
                          const std::vector<int>& stage_of, int stages, double budget) {
  if (achieved_fp4_fraction(costs, choice) < budget) return false;
  if (stages <= 1) return true;
  std::vector<double> fp4(stages, 0.0), all(stages, 0.0);
  for (size_t i = 0; i < costs.layers.size(); ++i)
    for (int r = 0; r < kNumRoles; ++r) {
      const double f = role_flops(costs.layers[i].flops, r);
      all[stage_of[i]] += f;
      if (choice[i][r] == Precision::fp4) fp4[stage_of[i]] += f;
    }
  for (int s = 0; s < stages; ++s)
    if (fp4[s] / all[s] < budget) return false;
  return true;
}

std::vector<int> stage_of_layers(const CostTable& costs, int stages) {
  std::set<int> blocks;
  for (const auto& c : costs.layers) blocks.insert(c.block);
  if (stages < 1 || stages > int(blocks.size()))
    throw Error("stages " + std::to_string(stages) + " must be between 1 and the number of blocks (" +
                std::to_string(blocks.size()) + "); each pipeline stage is a run of contiguous blocks");
  // Blocks in order, split as evenly as possible; earlier stages take the extra block.
  std::vector<int> sorted(blocks.begin(), blocks.end());
  std::map<int, int> stage_of_block;
  const int nb = int(sorted.size()), base = nb / stages, extra = nb % stages;
  int pos = 0;
  for (int s = 0; s < stages; ++s) {
    const int len = base + (s < extra ? 1 : 0);
    for (int k = 0; k < len; ++k) stage_of_block[sorted[pos++]] = s;
  }
  std::vector<int> out;
  for (const auto& c : costs.layers) out.push_back(stage_of_block[c.block]);
  return out;
}

double achieved_fp4_fraction(const CostTable& costs, const std::vector<RoleChoice>& choice) {
  SNIP_ASSERT(choice.size() == costs.layers.size());
  double fp4 = 0, all = 0;
  for (size_t i = 0; i < costs.layers.size(); ++i)
    for (int r = 0; r < kNumRoles; ++r) {
      const double f = role_flops(costs.layers[i].flops, r);
      all += f;
      if (choice[i][r] == Precision::fp4) fp4 += f;
    }
  return all > 0 ? fp4 / all : 0.0;
}

void check_feasible(const CostTable& costs, const PlanRequest& request) {
  (void)build_model(costs, request);
}

void finish_result(PlanResult& r, const CostTable& pred, const PlanRequest& req) {
  SNIP_ASSERT(r.choice.size() == pred.layers.size());
  r.budget = req.budget;
  r.achieved_fraction = achieved_fp4_fraction(pred, r.choice);
  double q = 0, dl = 0, dw = 0;
  for (size_t i = 0; i < pred.layers.size(); ++i) {
    const auto& c = pred.layers[i];
    q += c.pred_q[0][int(r.choice[i][0])] + c.pred_q[1][int(r.choice[i][1])];
    dl += c.pred_dl[int(r.choice[i][0])];
    dw += c.pred_dw[int(r.choice[i][1])];
  }
  r.predicted_q = q;
  r.predicted_dl = pred.has_divergences ? dl : kNaN;
  r.predicted_dw = pred.has_divergences ? dw : kNaN;
  Plan& p = r.plan;
  p.layers.clear();
  for (size_t i = 0; i < pred.layers.size(); ++i)
    p.layers[pred.layers[i].name] = LinearPrecision{r.choice[i][0], r.choice[i][1], r.choice[i][1]};
  p.method = r.method;
  p.budget = req.budget;
  p.achieved_fp4_fraction = r.achieved_fraction;
  if (!pred.recipe.empty()) p.recipe = parse_recipe_name(pred.recipe).canonical;
  nlohmann::json prov = nlohmann::json::object();
  prov["costs"] = pred.source;
  prov["status"] = r.status;
  if (!std::isnan(r.objective)) prov["objective"] = r.objective;
  if (!std::isnan(r.mip_gap)) prov["mip_gap"] = r.mip_gap;
  if (std::isfinite(r.predicted_q)) prov["predicted_q"] = r.predicted_q;
  if (std::isfinite(r.predicted_dl)) prov["predicted_dl"] = r.predicted_dl;
  if (std::isfinite(r.predicted_dw)) prov["predicted_dw"] = r.predicted_dw;
  prov["per_role"] = req.per_role;
  prov["ties"] = req.ties;
  prov["stages"] = req.stages;
  if (req.pipeline.split()) prov["pipeline"] = pipeline_layout_json(req.pipeline);
  prov["allow_bf16"] = req.allow_bf16;
  if (req.allow_bf16) prov["bf16_max_fraction"] = req.bf16_max_fraction;
  if (!req.pins.empty()) {
    nlohmann::json pins = nlohmann::json::object();
    for (const auto& [n, pr] : req.pins) pins[n] = precision_name(pr);
    prov["pins"] = pins;
  }
  if (r.method == "random") prov["seed"] = req.seed;
  if (!r.notes.empty()) prov["notes"] = r.notes;
  prov["solver"] = method_uses_ilp(parse_method(r.method)) ? "glpk " + std::string(glp_version()) : "rule";
  p.provenance = prov;
}

namespace {

// The ILP of a Model in GLPK's arrays, built once per solve_ilp: a re-solve after a tolerance
// slip changes only the budget rows' lower bounds (set_budget_rows).
//
// Formulation: pinned slots are constants; a free slot s gets a binary y4_s (FP4) and, with
// BF16 allowed, yb_s (BF16) with y4_s + yb_s ≤ 1; FP8 is the remaining choice. Costs are
// relative to FP8:  Σ_s c_s(fp8) + Σ_s (c_s(fp4) − c_s(fp8))·y4_s + (c_s(bf16) − c_s(fp8))·yb_s.
// Symmetry tightening: inside a stage, free slots with identical FLOPs are interchangeable for
// every constraint, so some optimum puts FP4 on a prefix of them sorted by FP4 cost increase;
// the rows y4_(k) ≥ y4_(k+1) say so and spare branch-and-bound from exploring equal-weight
// permutations (a 560-layer Llama has only three distinct layer sizes).
struct Ilp {
  IlpArrays a;
  std::vector<int> col4, colb;  // per slot: the column of y4_s and yb_s (0: none, the slot is pinned)
  std::vector<int> budget_row;  // per stage
  std::vector<double> stage_total, stage_pinned_fp4;  // FLOPs per stage: all, pinned FP4
  double total = 0, pinned_bf16 = 0;                  // FLOPs: all, pinned BF16
  double scale = 1;  // FLOP rows are in units of the total FLOPs: coefficients O(1e-3..1) keep
                     // GLPK's tolerances meaningful
};

// The columns: one y4_s per free slot, and a yb_s when BF16 is a third choice.
void add_columns(Ilp& ilp, const Model& m) {
  ilp.col4.assign(m.slots.size(), 0), ilp.colb.assign(m.slots.size(), 0);
  ilp.stage_total.assign(size_t(m.stages), 0.0), ilp.stage_pinned_fp4.assign(size_t(m.stages), 0.0);
  int ncols = 0;
  for (size_t s = 0; s < m.slots.size(); ++s) {
    const Slot& sl = m.slots[s];
    ilp.stage_total[sl.stage] += sl.flops;
    ilp.total += sl.flops;
    if (sl.candidates.size() == 1) {
      if (sl.candidates[0] == Precision::fp4) ilp.stage_pinned_fp4[sl.stage] += sl.flops;
      if (sl.candidates[0] == Precision::bf16) ilp.pinned_bf16 += sl.flops;
      continue;
    }
    ilp.col4[s] = ++ncols;
    ilp.colb[s] = sl.candidates.size() == 3 ? ++ncols : 0;
  }
  IlpArrays& a = ilp.a;
  a.ncols = ncols;
  a.obj.assign(size_t(ncols) + 1, 0.0);
  for (size_t s = 0; s < m.slots.size(); ++s) {
    const auto& c = m.slots[s].cost;
    const double c8 = c[int(Precision::fp8)];
    if (ilp.col4[s]) a.obj[size_t(ilp.col4[s])] = c[int(Precision::fp4)] - c8;
    if (ilp.colb[s]) a.obj[size_t(ilp.colb[s])] = c[int(Precision::bf16)] - c8;
  }
  ilp.scale = 1.0 / ilp.total;
}

int add_row(IlpArrays& a, int type, double lo, double hi) {
  a.row_type.push_back(type);
  a.row_lo.push_back(lo);
  a.row_hi.push_back(hi);
  return ++a.nrows;
}

void add_entry(IlpArrays& a, int r, int c, double v) {
  a.ia.push_back(r);
  a.ja.push_back(c);
  a.ar.push_back(v);
}

// Σ_{s in stage} F_s·y4_s ≥ ρ·Σ_{s in stage} F_s − (pinned FP4 FLOPs of the stage)
void set_budget_rows(Ilp& ilp, double budget) {
  for (size_t st = 0; st < ilp.budget_row.size(); ++st)
    ilp.a.row_lo[size_t(ilp.budget_row[st])] = (budget * ilp.stage_total[st] - ilp.stage_pinned_fp4[st]) * ilp.scale;
}

void add_budget_rows(Ilp& ilp, const Model& m, double budget) {
  ilp.budget_row.resize(size_t(m.stages));
  for (int st = 0; st < m.stages; ++st) ilp.budget_row[size_t(st)] = add_row(ilp.a, GLP_LO, 0.0, 0.0);
  set_budget_rows(ilp, budget);
  for (size_t s = 0; s < m.slots.size(); ++s)
    if (ilp.col4[s])
      add_entry(ilp.a, ilp.budget_row[size_t(m.slots[s].stage)], ilp.col4[s], m.slots[s].flops * ilp.scale);
}

// Σ F_s·yb_s ≤ β·Σ F_s − (pinned BF16 FLOPs);  y4_s + yb_s ≤ 1
void add_bf16_rows(Ilp& ilp, const Model& m, double bf16_max_fraction) {
  const int bf_row = add_row(ilp.a, GLP_UP, 0.0, (bf16_max_fraction * ilp.total - ilp.pinned_bf16) * ilp.scale);
  for (size_t s = 0; s < m.slots.size(); ++s)
    if (ilp.colb[s]) {
      add_entry(ilp.a, bf_row, ilp.colb[s], m.slots[s].flops * ilp.scale);
      const int one = add_row(ilp.a, GLP_UP, 0.0, 1.0);
      add_entry(ilp.a, one, ilp.col4[s], 1.0);
      add_entry(ilp.a, one, ilp.colb[s], 1.0);
    }
}

// The symmetry-tightening rows y4_(k) ≥ y4_(k+1) of every (stage, FLOPs) class of free slots.
void add_symmetry_rows(Ilp& ilp, const Model& m) {
  std::map<std::pair<int, double>, std::vector<size_t>> classes;  // (stage, FLOPs) -> free slots
  for (size_t s = 0; s < m.slots.size(); ++s)
    if (ilp.col4[s]) classes[{m.slots[s].stage, m.slots[s].flops}].push_back(s);
  auto d = [&](size_t s) { return m.slots[s].cost[int(Precision::fp4)] - m.slots[s].cost[int(Precision::fp8)]; };
  for (auto& [key, members] : classes) {
    std::stable_sort(members.begin(), members.end(), [&](size_t x, size_t y) { return d(x) < d(y); });
    for (size_t k = 0; k + 1 < members.size(); ++k) {
      const int r = add_row(ilp.a, GLP_LO, 0.0, 0.0);
      add_entry(ilp.a, r, ilp.col4[members[k]], 1.0);
      add_entry(ilp.a, r, ilp.col4[members[k + 1]], -1.0);
    }
  }
}

Ilp build_ilp(const Model& m, const PlanRequest& req) {
  Ilp ilp;
  add_columns(ilp, m);
  IlpArrays& a = ilp.a;
  a.ia = {0}, a.ja = {0}, a.ar = {0.0};
  a.row_type = {0}, a.row_lo = {0.0}, a.row_hi = {0.0};
  add_budget_rows(ilp, m, req.budget);
  if (req.allow_bf16)
    add_bf16_rows(ilp, m, req.bf16_max_fraction);
  else
    add_symmetry_rows(ilp, m);
  return ilp;
}

// One GLPK solve with the planner's settings; throws snip::Error when GLPK fails or finds no plan.
struct IlpSolved {
  IlpOutcome out;
  double gap = kNaN;  // the MIP gap reported to the user: 0 when proven optimal
};

IlpSolved solve_once(const Ilp& ilp, const PlanRequest& req) {
  glp_iocp parm;
  glp_init_iocp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  parm.mip_gap = req.mip_gap;
  parm.tol_int = 1e-9;  // a 0.99999 "integral" FP4 indicator would let the rounded plan miss ρ
  parm.tm_lim = req.time_limit_ms;
  parm.cov_cuts = GLP_ON;
  parm.br_tech = GLP_BR_PCH;
  GapTracker tracker;
  parm.cb_func = glpk_callback;
  parm.cb_info = &tracker;
  IlpSolved r{solve_arrays(ilp.a, parm)};
  const IlpOutcome& out = r.out;
  if (out.glpk_failed) {
    std::string said = t_glpk_said;
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    for (char& ch : said)
      if (ch == '\n') ch = ' ';
    throw Error("the ILP solver (GLPK) failed on this request (budget " + fmt(req.budget) + ", " +
                std::to_string(ilp.a.ncols) + " free choices; GLPK said: " + said +
                "); please report this with the statistics or cost file, and try another budget or fewer pins "
                "meanwhile");
  }
  if (out.status != GLP_OPT && out.status != GLP_FEAS) {
    if (out.rc == GLP_ETMLIM)
      throw Error("the ILP found no plan within the time limit of " + std::to_string(req.time_limit_ms) +
                  " ms; raise the limit or allow a MIP gap");
    throw Error("the ILP has no solution for budget " + fmt(req.budget) + " (GLPK status " +
                std::to_string(out.status) + ", code " + std::to_string(out.rc) + ")");
  }
  r.gap = (out.status == GLP_OPT && out.rc == 0) ? (req.mip_gap > 0 ? std::min(tracker.gap, req.mip_gap) : 0.0)
                                                 : tracker.gap;
  if (std::isnan(r.gap)) r.gap = 0.0;
  return r;
}

// Each slot's precision in a solution: its pin, FP4 or BF16 where the indicator is set, else FP8.
std::vector<Precision> slot_precisions(const Model& m, const Ilp& ilp, const IlpOutcome& out) {
  std::vector<Precision> prec(m.slots.size(), Precision::fp8);
  for (size_t s = 0; s < m.slots.size(); ++s) {
    if (!ilp.col4[s])
      prec[s] = m.slots[s].candidates[0];
    else if (out.values[size_t(ilp.col4[s])] > 0.5)
      prec[s] = Precision::fp4;
    else if (ilp.colb[s] && out.values[size_t(ilp.colb[s])] > 0.5)
      prec[s] = Precision::bf16;
  }
  return prec;
}

std::string method_of(const CostTable& costs) {
  return costs.kind == "min-err" || costs.kind == "min-rel-err" || costs.kind == "hawq" ? costs.kind : "snip";
}

}  // namespace

PlanResult solve_ilp(const CostTable& costs, const PlanRequest& req, const CostTable* prediction) {
  const auto t0 = std::chrono::steady_clock::now();
  const Model m = build_model(costs, req);
  PlanResult result;
  result.method = method_of(costs);
  result.notes = m.notes;
  std::vector<Precision> best;
  double gap = 0.0;
  int glpk_status = GLP_OPT;
  Ilp ilp = build_ilp(m, req);
  if (ilp.a.ncols == 0) {
    // Everything is pinned: nothing to solve (feasibility was checked by build_model).
    for (const Slot& s : m.slots) best.push_back(s.candidates[0]);
  } else {
    // Floating-point guard: GLPK accepts row activities within its tolerance (1e-7 relative),
    // so a plan may miss ρ by a hair. Each re-solve demands a little more: just above that
    // tolerance, then coarser. Plans with a fraction in [ρ, ρ + raise) are excluded from that
    // re-solve, so the note says by how much the budget was raised.
    const double kRaises[] = {0.0, 2e-7, 1e-6, 1e-5, 1e-4};
    for (const double raise : kRaises) {
      set_budget_rows(ilp, req.budget + raise);
      const IlpSolved solved = solve_once(ilp, req);
      glpk_status = solved.out.status;
      gap = solved.gap;
      std::vector<Precision> prec = slot_precisions(m, ilp, solved.out);
      const auto choice = choice_from_slots(m, costs.layers.size(), prec);
      if (budget_holds(costs, choice, m.stage_of, m.stages, req.budget) && bf16_holds(costs, choice, req)) {
        best = std::move(prec);
        if (raise > 0)
          result.notes.push_back(
              "GLPK's tolerance let the budget slip by rounding; re-solved with the budget raised by " +
              format_g(raise));
        break;
      }
    }
  }
  if (best.empty())
    throw Error("the ILP solution misses budget " + fmt(req.budget) + " after re-solving; please report this");

  result.choice = choice_from_slots(m, costs.layers.size(), best);
  result.objective = objective_of(m, best);
  result.status = gap == 0.0 ? "optimal" : "feasible";
  result.mip_gap = gap;
  result.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (glpk_status != GLP_OPT) result.notes.push_back("time limit reached; MIP gap " + fmt(gap, 6));
  finish_result(result, prediction ? *prediction : costs, req);
  return result;
}

PlanResult solve_exhaustive_ref(const CostTable& costs, const PlanRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  Model m = build_model(costs, req);
  SNIP_ASSERT_MSG(m.slots.size() <= 20, "solve_exhaustive_ref: too many decisions to enumerate");
  const size_t n = m.slots.size();
  std::vector<size_t> digit(n, 0);
  std::vector<Precision> prec(n), best;
  double best_obj = INFINITY;
  while (true) {
    for (size_t s = 0; s < n; ++s) prec[s] = m.slots[s].candidates[digit[s]];
    const auto choice = choice_from_slots(m, costs.layers.size(), prec);
    if (budget_holds(costs, choice, m.stage_of, m.stages, req.budget) && bf16_holds(costs, choice, req)) {
      const double obj = objective_of(m, prec);
      if (obj < best_obj) {
        best_obj = obj;
        best = prec;
      }
    }
    size_t s = 0;
    while (s < n && ++digit[s] == m.slots[s].candidates.size()) digit[s++] = 0;
    if (s == n) break;
  }
  if (best.empty()) throw Error("no assignment meets budget " + fmt(req.budget));
  PlanResult r;
  r.method = method_of(costs);
  r.choice = choice_from_slots(m, costs.layers.size(), best);
  r.objective = best_obj;
  r.status = "optimal";
  r.mip_gap = 0;
  r.notes = m.notes;
  r.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  finish_result(r, costs, req);
  return r;
}

PlannerInput planner_input_from_stats(const StatsRound& round, const EstimatorOptions& options) {
  const Estimates est = estimate_divergences(round, options);
  PlannerInput in;
  in.snip = cost_table_from_estimates(est, CostKind::snip);
  in.min_err = cost_table_from_estimates(est, CostKind::min_err);
  in.min_rel_err = cost_table_from_estimates(est, CostKind::min_rel_err);
  const std::string src = "statistics step " + std::to_string(round.step);
  in.snip.source = in.min_err->source = in.min_rel_err->source = src;
  // The plans carry the recipe their statistics were measured under (an exporter maps it).
  in.snip.recipe = in.min_err->recipe = in.min_rel_err->recipe = round.recipe;
  for (const CostTable* t : {&in.snip, &*in.min_err, &*in.min_rel_err}) check_cost_values(*t);
  bool traced = !est.layers.empty();
  for (const LayerEstimate& e : est.layers) traced = traced && !std::isnan(e.hawq[int(Precision::fp4)]);
  if (traced) {
    in.hawq = cost_table_from_estimates(est, CostKind::hawq);
    in.hawq->source = src;
    in.hawq->recipe = round.recipe;
  }
  return in;
}

PlannerInput planner_input_from_costs(CostTable imported) {
  check_cost_values(imported);
  PlannerInput in;
  in.snip = std::move(imported);
  return in;
}

PlannerInput read_planner_input(const std::string& stats_path, const std::string& costs_path,
                                const EstimatorOptions& options) {
  if (stats_path.empty() == costs_path.empty())
    throw Error("give exactly one source of costs: a statistics file (--stats) or a cost CSV (--costs)");
  if (!costs_path.empty()) return planner_input_from_costs(read_cost_csv(costs_path));
  PlannerInput in = planner_input_from_stats(stats_from_json(read_file(stats_path), stats_path), options);
  in.snip.source = in.min_err->source = in.min_rel_err->source = stats_path;
  if (in.hawq) in.hawq->source = stats_path;
  return in;
}

std::pair<std::string, Precision> parse_pin(const std::string& text) {
  const auto eq = text.rfind('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw Error("pin '" + text + "' must be LAYER=PRECISION, e.g. model.layers.0.mlp.down_proj=fp8");
  const std::string name = text.substr(0, eq);
  if (!parse_layer_module_name(name))
    throw Error("pin '" + text + "': '" + name + "' is not a linear layer name (e.g. model.layers.0.self_attn.q_proj)");
  try {
    return {name, parse_precision(text.substr(eq + 1))};
  } catch (const Error& e) {
    throw Error("pin '" + text + "': " + e.what());
  }
}

void add_pin(std::map<std::string, Precision>& pins, const std::string& text) {
  const auto [name, p] = parse_pin(text);
  const auto [it, added] = pins.emplace(name, p);
  if (!added && it->second != p)
    throw Error("pins contradict each other: " + name + " is pinned to both " + precision_name(it->second) + " and " +
                precision_name(p) + "; keep one --pin per layer");
}

PlanResult make_plan(const PlannerInput& input, Method method, const PlanRequest& req) {
  const auto t0 = std::chrono::steady_clock::now();
  PlanResult r;
  switch (method) {
    case Method::snip:
      return solve_ilp(input.snip, req, &input.snip);
    case Method::min_err:
    case Method::min_rel_err: {
      const auto& t = method == Method::min_err ? input.min_err : input.min_rel_err;
      if (!t)
        throw Error(std::string(method_name(method)) +
                    " needs the operand quantization errors of a statistics round; imported cost files carry only "
                    "one cost per layer (use --stats, or --method snip on the imported costs)");
      SNIP_ASSERT(t->layers.size() == input.snip.layers.size());
      return solve_ilp(*t, req, &input.snip);
    }
    case Method::hawq: {
      if (!input.hawq)
        throw Error(
            "hawq needs each layer's weight-Hessian trace, which this statistics round does not have; collect one "
            "with `snip collect --hessian-probes 8` (snip compare collects its own)");
      SNIP_ASSERT(input.hawq->layers.size() == input.snip.layers.size());
      PlanResult h = solve_ilp(*input.hawq, req, &input.snip);
      h.method = method_name(Method::hawq);
      return h;
    }
    case Method::e_layer_type:
      r = plan_e_layer_type(input.snip, req);
      break;
    case Method::e_layer_id:
      r = plan_e_layer_id(input.snip, req);
      break;
    case Method::random:
      r = plan_random(input.snip, req, req.seed);
      break;
    case Method::uniform_bf16:
      r = plan_uniform(input.snip, req, Precision::bf16);
      break;
    case Method::uniform_fp8:
      r = plan_uniform(input.snip, req, Precision::fp8);
      break;
    case Method::uniform_fp4:
      r = plan_uniform(input.snip, req, Precision::fp4);
      break;
    case Method::fp4_fprop_only:
      r = plan_fp4_in_role(input.snip, req, Gemm::fprop);
      break;
    case Method::fp4_dgrad_only:
      r = plan_fp4_in_role(input.snip, req, Gemm::dgrad);
      break;
    case Method::fp4_wgrad_only:
      r = plan_fp4_in_role(input.snip, req, Gemm::wgrad);
      break;
  }
  r.solve_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<std::vector<size_t>> group_identical_plans(const std::vector<PlanResult>& results) {
  std::vector<std::vector<size_t>> groups;
  for (size_t i = 0; i < results.size(); ++i) {
    bool placed = false;
    for (auto& g : groups)
      if (results[g.front()].plan.layers == results[i].plan.layers) {
        g.push_back(i);
        placed = true;
        break;
      }
    if (!placed) groups.push_back({i});
  }
  return groups;
}

}  // namespace snip
