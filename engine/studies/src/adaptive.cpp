// Adaptive SNIP training: periodic statistics rounds, ILP re-planning and BF16 probes around a
// Trainer (adaptive.h; METHOD.md section 9).
#include "snip/adaptive.h"

#include <chrono>

#include "snip/error.h"
#include "snip/names.h"
#include "snip/plan.h"
#include "snip/stats_keys.h"

namespace snip {

AdaptiveController::AdaptiveController(Trainer& trainer, AdaptiveOptions options)
    : trainer_(trainer), options_(std::move(options)) {
  const double rho = options_.request.budget;
  if (!(rho >= 0 && rho <= 1))
    throw Error("adaptive training: the FP4 budget must be in [0, 1] (got " + std::to_string(rho) + ")");
  if (options_.stats.noise_passes < 1) throw Error("adaptive training: noise passes must be ≥ 1");
}

namespace {

constexpr std::array<Named<ReplanWhen>, 2> kReplanWhenNames{
    {{ReplanWhen::always, "always"}, {ReplanWhen::noise, "noise"}}};

}  // namespace

const char* replan_when_name(ReplanWhen w) {
  return name_of(kReplanWhenNames, w);
}

ReplanWhen parse_replan_when(std::string_view s) {
  return parse_name(kReplanWhenNames, s, "re-planning rule",
                    "always re-solves at every round; noise only when a layer's FP4 gradient noise ratio crosses the "
                    "threshold");
}

namespace {

// The layers whose FP4 grad_noise_ratio (METHOD.md 10) is below `threshold`, in round order.
std::vector<std::string> layers_below(const StatsRound& round, double threshold) {
  std::vector<std::string> out;
  for (size_t i : layers_below_noise_threshold(round, threshold)) out.push_back(round.layers[i].name);
  return out;
}

}  // namespace

void AdaptiveController::continue_from(const Plan& plan, int64_t made_at) {
  // What the last solve saw, for replan_when noise: kept with the plan it made.
  last_below_.clear();
  if (plan.provenance.contains("noise_below") && plan.provenance["noise_below"].is_array())
    for (const auto& n : plan.provenance["noise_below"])
      if (n.is_string()) last_below_.push_back(n.get<std::string>());
  PlanResult r;
  r.plan = plan;
  r.budget = options_.request.budget;
  plans_.push_back(std::move(r));
  timeline_.push_back({plans_.size() - 1, made_at + 1, -1});
  last_plan_step_ = made_at;
}

PlanEvent AdaptiveController::replan() {
  PlanEvent ev;
  const auto t0 = std::chrono::steady_clock::now();
  StatsRoundOptions so = options_.stats;
  if (options_.method == Method::hawq && so.hessian_probes == 0) so.hessian_probes = 8;  // hawq's input
  ev.round = collect_stats_round(trainer_, so);
  ev.round_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<std::string> below = layers_below(ev.round, noise_threshold());
  const bool solve = plans_.empty() || options_.replan_when == ReplanWhen::always || below != last_below_;
  if (solve) {
    const PlannerInput input = planner_input_from_stats(ev.round, options_.estimator);
    PlanRequest request = options_.request;
    if (options_.noise_floor > 0) {  // below the floor FP4 is not allowed: such layers stay in FP8
      for (const std::string& name : below)
        if (!request.pins.count(name)) request.pins[name] = Precision::fp8;
      // The floor comes first: with too many layers held out, the budget is what the rest can reach.
      const ModelDims dims = trainer_.config().model.dims();
      std::vector<LinearPrecision> best;
      for (const LinearLayerInfo& l : linear_layers(dims)) {
        const auto pin = request.pins.find(l.name);
        best.push_back(LinearPrecision::uniform(pin == request.pins.end() ? Precision::fp4 : pin->second));
      }
      const double reachable = fp4_flop_fraction(best, dims);
      if (reachable < request.budget) {
        request.budget = reachable;
        ev.budget_capped = true;
      }
    }
    ev.result = make_plan(input, options_.method, request);
    last_below_ = below;
  } else {
    ev.result = plans_.back();  // nothing crossed the threshold: the plan in effect goes on
    ev.replanned = false;
  }
  if (options_.replan_when == ReplanWhen::noise || options_.noise_floor > 0) {
    ev.result.plan.provenance["replanned"] = solve;
    ev.result.plan.provenance["noise_below"] = last_below_;
    if (ev.budget_capped) ev.result.plan.provenance["budget_capped_by_noise_floor"] = true;
  }
  ev.result.plan.recipe = trainer_.config().recipe;
  ev.result.plan.provenance["step"] = trainer_.step_count();
  ev.result.plan.provenance["batch_id"] = ev.round.batch_id;
  ev.result.plan.provenance["lambda"] = options_.estimator.lambda;
  ev.result.plan.provenance["source"] = "adaptive";
  ev.first_step = trainer_.step_count() + 1;
  ev.changed = plans_.empty() || !(plans_.back().plan.layers == ev.result.plan.layers);
  trainer_.set_plan(ev.result.plan);  // applied at the start of the coming step
  if (!timeline_.empty()) timeline_.back().last_step = ev.first_step - 1;
  plans_.push_back(ev.result);
  timeline_.push_back({plans_.size() - 1, ev.first_step, -1});
  last_plan_step_ = trainer_.step_count();
  return ev;
}

ProbeEvent AdaptiveController::probe() {
  // Both forwards on the batch the coming step trains on, with the weights before it. The plan
  // in effect for that step is the trainer's pending one, so resolve the model's precisions
  // from the last plan we made (or the trainer's current precisions).
  std::vector<int32_t> in, tgt;
  peek_next_batch(trainer_, in, tgt);
  Llama& m = trainer_.model();
  const std::vector<LinearPrecision> saved = m.precisions();
  std::vector<LinearPrecision> plan_prec = saved;
  if (!plans_.empty()) plan_prec = resolve_plan(plans_.back().plan, trainer_.config().model.dims(), nullptr);
  ProbeEvent p;
  p.step = trainer_.step_count() + 1;
  m.set_precisions(plan_prec);
  p.quantized_loss = m.forward(in.data(), tgt.data());
  m.set_precisions(std::vector<LinearPrecision>(saved.size(), LinearPrecision::uniform(Precision::bf16)));
  p.bf16_loss = m.forward(in.data(), tgt.data());
  m.set_precisions(saved);
  return p;
}

std::optional<PlanEvent> AdaptiveController::before_step() {
  std::optional<PlanEvent> ev;
  const int64_t s = trainer_.step_count();
  const bool due = last_plan_step_ < 0 || (options_.replan_every > 0 && s - last_plan_step_ >= options_.replan_every);
  if (due) {
    ev = replan();
    if (on_plan_) on_plan_(*ev);
  }
  if (options_.bf16_probe_every > 0 && s % options_.bf16_probe_every == 0) {
    probes_.push_back(probe());
    if (on_probe_) on_probe_(probes_.back());
  }
  return ev;
}

void AdaptiveController::after_step(const StepMetrics& m) {
  if (!timeline_.empty() && m.step >= m.total_steps) timeline_.back().last_step = m.step;
}

bool AdaptiveController::run(const Trainer::Callback& cb) {
  while (trainer_.step_count() < trainer_.config().steps) {
    if (trainer_.stop_requested()) break;
    before_step();
    const StepMetrics m = trainer_.step();
    after_step(m);
    if (cb && !cb(m)) break;
  }
  if (!timeline_.empty() && timeline_.back().last_step < 0) timeline_.back().last_step = trainer_.step_count();
  return trainer_.step_count() >= trainer_.config().steps;
}

}  // namespace snip
