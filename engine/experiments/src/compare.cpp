// Plan comparison by training (compare.h; METHOD.md section 6, training truth).
#include "snip/compare.h"

#include <cmath>
#include <random>

#include "snip/error.h"
#include "snip/qlinear.h"
#include "snip/trainer.h"

namespace snip {
namespace {

struct RunResult {
  double train_last = 0, val_plan = 0, val_bf16 = 0;
  std::vector<double> curve;  // train loss per step
};

// Extra optimizer steps on the next training batches with the learning rate decaying linearly
// from the schedule's current value to 0 (the "short LR cooldown" before measuring val loss).
void cooldown(Trainer& t, int n) {
  if (n <= 0) return;
  const TrainConfig& c = t.config();
  const nlohmann::json d = t.trainer_state().at("data");
  BatchLoader loader(&t.data().train, c.batch_size, c.seq_len, c.seed, /*shuffle=*/true);
  loader.seek({d.at("epoch").get<uint64_t>(), d.at("batch_in_epoch").get<uint64_t>(), d.at("seed").get<uint64_t>()});
  std::vector<int32_t> in(size_t(c.batch_size) * c.seq_len), tgt(in.size());
  Llama& m = t.model();
  const double lr0 = c.schedule.at(t.step_count());
  for (int i = 0; i < n; ++i) {
    m.zero_grads();
    m.set_quant_key(c.seed, uint64_t(t.step_count() + i));
    for (int a = 0; a < c.grad_accum; ++a) {
      loader.next(in.data(), tgt.data());
      const double loss = m.forward(in.data(), tgt.data());
      if (!std::isfinite(loss)) throw Error("compare: the loss diverged during the LR cooldown");
      m.backward(1.0 / c.grad_accum);
    }
    clip_grad_global_norm(m.grad_data(), m.num_params(), c.grad_clip);
    t.optimizer().step(m.param_data(), m.grad_data(), m.param_tensors(), lr0 * (1.0 - double(i) / n));
  }
}

RunResult train_plan(const std::string& dir, int64_t start, const Plan& plan, const CompareOptions& o,
                     const std::string& recipe, double perturb_rel, uint64_t perturb_seed) {
  std::unique_ptr<Trainer> t = Trainer::resume(dir, start + o.steps);
  t->model().set_recipe(Recipe::named(recipe));
  if (perturb_rel > 0) {
    std::mt19937_64 rng(perturb_seed);
    std::normal_distribution<double> nd(0.0, 1.0);
    float* p = t->model().param_data();
    for (int64_t i = 0; i < t->model().num_params(); ++i) p[i] = float(p[i] * (1.0 + perturb_rel * nd(rng)));
  }
  t->set_plan(plan);
  std::vector<double> losses;
  for (int64_t s = 0; s < o.steps; ++s) losses.push_back(t->step().train_loss);
  RunResult r;
  const size_t w = std::min(losses.size(), size_t(std::max(1, o.last_window)));
  for (size_t i = losses.size() - w; i < losses.size(); ++i) r.train_last += losses[i] / double(w);
  r.curve = std::move(losses);
  cooldown(*t, o.cooldown_steps);
  r.val_plan = t->evaluate(o.eval_batches);
  const std::vector<LinearPrecision> prec = t->model().precisions();
  t->model().set_precisions(std::vector<LinearPrecision>(prec.size(), LinearPrecision::uniform(Precision::bf16)));
  r.val_bf16 = t->evaluate(o.eval_batches);
  t->model().set_precisions(prec);
  return r;
}

}  // namespace

CompareReport run_compare(const std::string& dir, const CompareOptions& o, const CompareProgress& progress) {
  if (o.steps < 1) throw Error("compare: --steps must be at least 1");
  if (!(o.budget >= 0 && o.budget <= 1)) throw Error("compare: --budget must be in [0, 1]");
  std::unique_ptr<Trainer> t0 = Trainer::resume(dir);
  CompareReport rep;
  rep.start_step = t0->step_count();
  rep.budget = o.budget;
  rep.recipe = o.recipe.empty() ? t0->config().recipe : o.recipe;
  t0->model().set_recipe(Recipe::named(rep.recipe));
  rep.round = collect_stats_round(*t0, o.stats);
  const StatsRound& round = rep.round;
  t0.reset();

  // every plan, in report order
  PlanRequest req;
  req.budget = o.budget;
  struct Arm {
    std::string name;
    PlanResult result;
    std::optional<double> lambda;
    std::optional<uint64_t> seed;
  };
  std::vector<Arm> plans;
  auto add = [&](const std::string& name, const PlannerInput& in, Method m, uint64_t seed = 1,
                 std::optional<double> lambda = std::nullopt) {
    PlanRequest r = req;
    r.seed = seed;
    PlanResult p = make_plan(in, m, r);
    p.plan.recipe = rep.recipe;
    plans.push_back({name, std::move(p), lambda, m == Method::random ? std::optional<uint64_t>(seed) : std::nullopt});
  };
  const PlannerInput base = planner_input_from_stats(round);
  add("uniform-bf16", base, Method::uniform_bf16);
  size_t snip_ref = 0;
  for (double lam : o.lambdas) {
    EstimatorOptions eo;
    eo.lambda = lam;
    char name[32];
    std::snprintf(name, sizeof name, "snip λ=%g", lam);
    if (std::abs(lam - 0.1) < 1e-12) snip_ref = plans.size();
    add(name, planner_input_from_stats(round, eo), Method::snip, 1, lam);
  }
  if (snip_ref == 0) snip_ref = 1;  // no λ = 0.1: the first SNIP plan is the reference
  for (int s = 1; s <= o.random_seeds; ++s) add("random s" + std::to_string(s), base, Method::random, uint64_t(s));
  add("min-err", base, Method::min_err);
  add("min-rel-err", base, Method::min_rel_err);
  add("e-layer-type", base, Method::e_layer_type);
  add("e-layer-id", base, Method::e_layer_id);
  add("uniform-fp8", base, Method::uniform_fp8);
  add("uniform-fp4", base, Method::uniform_fp4);

  const int total = int(plans.size()) + o.control_seeds;
  int done = 0;
  for (const auto& [name, pr, lambda, seed] : plans) {
    CompareRow row;
    row.method = name;
    row.lambda = lambda;
    row.seed = seed;
    row.plan = pr.plan;
    row.achieved_fraction = pr.achieved_fraction;
    row.notes = pr.notes;
    for (const CompareRow& prev : rep.rows)
      if (prev.plan.layers == row.plan.layers) {
        row.same_plan_as = prev.method;
        row.train_loss_last = prev.train_loss_last, row.val_loss_plan = prev.val_loss_plan;
        row.val_loss_bf16 = prev.val_loss_bf16, row.train_curve = prev.train_curve;
        break;
      }
    if (row.same_plan_as.empty()) {
      const RunResult r = train_plan(dir, rep.start_step, row.plan, o, rep.recipe, 0, 0);
      row.train_loss_last = r.train_last, row.val_loss_plan = r.val_plan, row.val_loss_bf16 = r.val_bf16;
      row.train_curve = r.curve;
    }
    rep.rows.push_back(std::move(row));
    if (progress) progress(++done, total, name);
  }
  const CompareRow snip = rep.rows[snip_ref];
  for (int s = 1; s <= o.control_seeds; ++s) {
    CompareRow row;
    char name[64];
    std::snprintf(name, sizeof name, "control s%d (w×(1+%g·ξ))", s, o.control_rel);
    row.method = name;  // the SNIP reference plan (λ = 0.1) from perturbed weights
    row.lambda = snip.lambda;
    row.seed = 1000 + uint64_t(s);
    row.plan = snip.plan;
    row.achieved_fraction = snip.achieved_fraction;
    row.control = true;
    const RunResult r = train_plan(dir, rep.start_step, row.plan, o, rep.recipe, o.control_rel, *row.seed);
    row.train_loss_last = r.train_last, row.val_loss_plan = r.val_plan, row.val_loss_bf16 = r.val_bf16;
    row.train_curve = r.curve;
    rep.noise_floor_train = std::max(rep.noise_floor_train, std::abs(r.train_last - snip.train_loss_last));
    rep.noise_floor_val = std::max(rep.noise_floor_val, std::abs(r.val_plan - snip.val_loss_plan));
    rep.rows.push_back(std::move(row));
    if (progress) progress(++done, total, rep.rows.back().method);
  }
  const CompareRow& bf16 = rep.rows.front();
  const double snip_gap = snip.train_loss_last - bf16.train_loss_last;
  for (CompareRow& r : rep.rows) {
    r.gap_train = r.train_loss_last - bf16.train_loss_last;
    r.gap_val_plan = r.val_loss_plan - bf16.val_loss_plan;
    r.gap_val_bf16 = r.val_loss_bf16 - bf16.val_loss_bf16;
    r.differs_from_snip = !r.control && std::abs(r.gap_train - snip_gap) > rep.noise_floor_train;
  }
  return rep;
}

}  // namespace snip
