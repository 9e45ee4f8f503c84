// The rule-based baselines of METHOD.md section 8: a fill order over layers (tie groups) per
// pipeline stage, FP4 until the stage meets ρ; pins fixed; everything else FP8.
#include "snip/baselines.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "detail.h"
#include "snip/error.h"
#include "snip/text.h"

namespace snip {

namespace {

struct Unit {
  std::vector<int> layers;  // table indices sharing one precision
  double flops = 0;
  int stage = 0;
  std::optional<Precision> pin;
};

struct Setup {
  std::vector<Unit> units;
  std::vector<int> stage_of;
  int stages = 1;
};

// Validates the request the same way the ILP does (same causes), then groups the layers.
Setup make_setup(const CostTable& costs, const PlanRequest& req) {
  PlanRequest whole = req;
  whole.per_role = false;  // rule baselines assign a layer one precision on every GEMM
  whole.allow_bf16 = false;
  check_feasible(costs, whole);
  Setup s;
  s.stages = req.stages;
  s.stage_of = stage_of_layers(costs, req.stages);
  for (const auto& g : detail::tie_groups(costs, req)) {
    Unit u;
    u.layers = g;
    u.stage = s.stage_of[g.front()];
    for (int i : g) {
      u.flops += costs.layers[i].flops;
      if (auto it = req.pins.find(costs.layers[i].name); it != req.pins.end()) u.pin = it->second;
    }
    s.units.push_back(std::move(u));
  }
  return s;
}

std::vector<RoleChoice> to_choice(const CostTable& costs, const Setup& s, const std::vector<Precision>& unit_prec) {
  std::vector<RoleChoice> choice(costs.layers.size());
  for (size_t u = 0; u < s.units.size(); ++u)
    for (int i : s.units[u].layers) choice[i] = {unit_prec[u], unit_prec[u]};
  return choice;
}

// Fills FP4 in `order` (unit indices) stage by stage until every stage meets ρ. Returns the
// precision per unit and the number of units filled (pins excluded).
std::vector<Precision> fill(const CostTable& costs, const Setup& s, const std::vector<int>& order, double budget,
                            std::vector<int>* filled = nullptr) {
  std::vector<Precision> prec(s.units.size(), Precision::fp8);
  std::vector<double> fp4(s.stages, 0.0), total(s.stages, 0.0);
  for (size_t u = 0; u < s.units.size(); ++u) {
    total[s.units[u].stage] += s.units[u].flops;
    if (s.units[u].pin) {
      prec[u] = *s.units[u].pin;
      if (prec[u] == Precision::fp4) fp4[s.units[u].stage] += s.units[u].flops;
    }
  }
  // Running sums decide when to stop; the exact recomputation below adds more units when
  // rounding in the running sums stopped a hair short.
  std::vector<size_t> next(s.stages, 0);  // position in `order` per stage
  auto advance = [&](int st) {
    for (size_t& k = next[st]; k < order.size(); ++k) {
      const int u = order[k];
      if (s.units[u].stage != st || s.units[u].pin) continue;
      prec[u] = Precision::fp4;
      fp4[st] += s.units[u].flops;
      if (filled) filled->push_back(u);
      ++k;
      return true;
    }
    return false;
  };
  for (int st = 0; st < s.stages; ++st)
    while (fp4[st] < budget * total[st] && advance(st)) {
    }
  for (int guard = 0; guard < int(s.units.size()); ++guard) {
    if (detail::budget_holds(costs, to_choice(costs, s, prec), s.stage_of, s.stages, budget)) break;
    bool any = false;
    for (int st = 0; st < s.stages; ++st) any = advance(st) || any;
    if (!any) break;
  }
  return prec;
}

PlanResult result_of(const CostTable& costs, const PlanRequest& req, const Setup& s, const char* method,
                     const std::vector<Precision>& prec) {
  PlanResult r;
  r.method = method;
  r.status = "rule";
  r.choice = to_choice(costs, s, prec);
  if (req.per_role) r.notes.push_back(std::string(method) + " assigns one precision to all GEMMs of a layer");
  finish_result(r, costs, req);
  return r;
}

// Rank of a layer type in e-layer-type's order: the MLP (gate, up, down), then o, v, k, q.
int type_rank(LayerType t) {
  switch (t) {
    case LayerType::gate:
      return 0;
    case LayerType::up:
      return 1;
    case LayerType::down:
      return 2;
    case LayerType::o:
      return 3;
    case LayerType::v:
      return 4;
    case LayerType::k:
      return 5;
    case LayerType::q:
      return 6;
  }
  return 7;
}

std::string fmt(double v) {
  return format_fixed(v, 4);
}

}  // namespace

PlanResult plan_e_layer_type(const CostTable& costs, const PlanRequest& req) {
  Setup s = make_setup(costs, req);
  std::vector<int> order(s.units.size());
  for (size_t u = 0; u < order.size(); ++u) order[u] = int(u);
  auto key = [&](int u) {
    int rank = 99, block = 0;
    for (int i : s.units[u].layers) {
      rank = std::min(rank, type_rank(costs.layers[i].type));
      block = costs.layers[i].block;
    }
    return std::pair(rank, block);
  };
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  return result_of(costs, req, s, "e-layer-type", fill(costs, s, order, req.budget));
}

PlanResult plan_e_layer_id(const CostTable& costs, const PlanRequest& req) {
  Setup s = make_setup(costs, req);
  // Per stage: distance of each layer's flattened index (block·7 + type) from the stage's
  // middle; the first and last blocks of the stage are the farthest and come last.
  std::vector<int> lo(s.stages, INT32_MAX), hi(s.stages, INT32_MIN), first_block(s.stages, INT32_MAX),
      last_block(s.stages, INT32_MIN);
  auto flat = [&](int i) { return costs.layers[i].block * kLayersPerBlock + int(costs.layers[i].type); };
  for (size_t i = 0; i < costs.layers.size(); ++i) {
    const int st = s.stage_of[i];
    lo[st] = std::min(lo[st], flat(int(i)));
    hi[st] = std::max(hi[st], flat(int(i)));
    first_block[st] = std::min(first_block[st], costs.layers[i].block);
    last_block[st] = std::max(last_block[st], costs.layers[i].block);
  }
  auto key = [&](int u) {
    // 2·|i − middle| in integers; ties go to the lower index.
    int best = INT32_MAX, idx = INT32_MAX;
    for (int i : s.units[u].layers) {
      const int st = s.units[u].stage;
      const int d = std::abs(2 * flat(i) - (lo[st] + hi[st]));
      if (d < best || (d == best && flat(i) < idx)) {
        best = d;
        idx = flat(i);
      }
    }
    return std::pair(best, idx);
  };
  std::vector<int> order(s.units.size());
  for (size_t u = 0; u < order.size(); ++u) order[u] = int(u);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return key(a) < key(b); });
  std::vector<int> filled;
  auto prec = fill(costs, s, order, req.budget, &filled);
  PlanResult r = result_of(costs, req, s, "e-layer-id", prec);
  int spilled = 0;
  std::set<int> blocks;
  for (int u : filled)
    for (int i : s.units[u].layers) {
      const int st = s.stage_of[i], b = costs.layers[i].block;
      if (first_block[st] != last_block[st] && (b == first_block[st] || b == last_block[st])) {
        ++spilled;
        blocks.insert(b);
      }
    }
  if (spilled > 0) {
    std::string bl;
    for (int b : blocks) bl += (bl.empty() ? "" : ", ") + std::to_string(b);
    r.notes.push_back("spill: the middle blocks cannot reach budget " + fmt(req.budget) + "; " +
                      std::to_string(spilled) + " layer(s) of the outer block(s) " + bl + " run in FP4");
    r.plan.provenance["notes"] = r.notes;
    r.plan.provenance["spilled_layers"] = spilled;
  }
  return r;
}

PlanResult plan_random(const CostTable& costs, const PlanRequest& req, uint64_t seed, int max_draws) {
  Setup s = make_setup(costs, req);
  std::mt19937_64 rng(seed);
  // Uniform integer in [0, n) by rejection (no modulo bias), from the exactly specified engine.
  auto uniform_below = [&](uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = rng();
    while (x >= limit);
    return x % n;
  };
  std::vector<Precision> best;
  double best_over = INFINITY;
  int draws = 0;
  for (; draws < std::max(1, max_draws);) {
    ++draws;
    std::vector<int> order(s.units.size());
    for (size_t u = 0; u < order.size(); ++u) order[u] = int(u);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[uniform_below(i)]);  // Fisher–Yates
    auto prec = fill(costs, s, order, req.budget);
    const double over = achieved_fp4_fraction(costs, to_choice(costs, s, prec)) - req.budget;
    if (over < best_over) {
      best_over = over;
      best = prec;
    }
    if (over <= 0.01) break;  // redraw only when the fill overshot ρ by more than 0.01
  }
  PlanResult r = result_of(costs, req, s, "random", best);
  r.notes.push_back("seed " + std::to_string(seed) + ": " + std::to_string(draws) + " draw(s), overshoot " +
                    fmt(best_over) + (best_over > 0.01 ? " (no draw within 0.01; the closest is kept)" : ""));
  r.plan.provenance["notes"] = r.notes;
  r.plan.provenance["draws"] = draws;
  return r;
}

PlanResult plan_uniform(const CostTable& costs, const PlanRequest& req, Precision p) {
  PlanRequest any = req;
  any.budget = 0;  // a uniform plan is a reference, not a budget solution; pins still validated
  Setup s = make_setup(costs, any);
  std::vector<Precision> prec(s.units.size(), p);
  for (size_t u = 0; u < s.units.size(); ++u)
    if (s.units[u].pin) prec[u] = *s.units[u].pin;
  const std::string name = std::string("uniform-") + precision_name(p);
  PlanResult r = result_of(costs, req, s, name.c_str(), prec);
  if (!r.meets_budget()) {
    r.notes.push_back(name + " does not meet budget " + fmt(req.budget) + " (FP4 fraction " + fmt(r.achieved_fraction) +
                      "); it is a reference point");
    r.plan.provenance["notes"] = r.notes;
  }
  return r;
}

PlanResult plan_fp4_in_role(const CostTable& costs, const PlanRequest& req, Gemm role) {
  PlanRequest any = req;
  any.budget = 0;  // a reference point, as the uniform plans
  Setup s = make_setup(costs, any);
  std::vector<Precision> prec(s.units.size(), Precision::fp8);
  for (size_t u = 0; u < s.units.size(); ++u)
    if (s.units[u].pin) prec[u] = *s.units[u].pin;
  const std::string name = std::string("fp4-") + gemm_name(role) + "-only";
  PlanResult r;
  r.method = name;
  r.status = "rule";
  r.choice = to_choice(costs, s, prec);
  // The planner's roles are fprop and backward (dgrad and wgrad share a precision and a cost):
  // fp4-fprop-only is a choice like any other; dgrad or wgrad alone is set in the plan after.
  if (role == Gemm::fprop)
    for (const Unit& unit : s.units)
      if (!unit.pin)
        for (int l : unit.layers) r.choice[size_t(l)][int(Role::fprop)] = Precision::fp4;
  finish_result(r, costs, req);
  if (role != Gemm::fprop) {
    double fp4 = 0, all = 0;
    for (const Unit& unit : s.units)
      for (int l : unit.layers) {
        const double f = costs.layers[size_t(l)].flops;  // the layer's 3 GEMMs, a third each
        all += f;
        if (unit.pin) {
          if (*unit.pin == Precision::fp4) fp4 += f;
          continue;
        }
        r.plan.layers[costs.layers[size_t(l)].name][role] = Precision::fp4;
        fp4 += f / 3.0;
      }
    r.achieved_fraction = all > 0 ? fp4 / all : 0.0;
    r.plan.achieved_fp4_fraction = r.achieved_fraction;
    r.predicted_q = r.predicted_dl = r.predicted_dw = kNaN;  // priced only for dgrad and wgrad together
    for (const char* k : {"predicted_q", "predicted_dl", "predicted_dw"}) r.plan.provenance.erase(k);
    r.notes.push_back(name + ": the estimator prices dgrad and wgrad together, so this plan has no prediction");
  }
  if (!r.meets_budget())
    r.notes.push_back(name + " does not meet budget " + fmt(req.budget) + " (FP4 fraction " + fmt(r.achieved_fraction) +
                      "); it is a reference point");
  if (!r.notes.empty()) r.plan.provenance["notes"] = r.notes;
  return r;
}

}  // namespace snip
