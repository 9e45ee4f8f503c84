// Adaptive SNIP training (METHOD.md section 9): every `replan_every` steps a statistics round on
// the batch the next step trains on, an ILP plan at the FP4 budget, and the switch to that plan
// at the next step boundary; optionally a BF16 probe every N steps (the live loss gap between
// the quantized forward and the BF16 forward on the same batch).
//
// The controller drives an existing snip::Trainer and reports through callbacks, so the CLI
// (`snip train --method snip --budget R --replan-every N --bf16-probe-every M`), the GUI worker
// and the SQLite recorder can all sit on it:
//
//   snip::AdaptiveOptions ao;  ao.request.budget = 0.75;  ao.replan_every = 100;
//   snip::AdaptiveController ctl(trainer, ao);
//   ctl.on_plan([&](const snip::PlanEvent& e) { store.add_stats_round(e.round, run);
//                                               int64_t id = store.add_plan(e.result.plan);
//                                               store.set_plan_in_effect(run, id, e.first_step); });
//   ctl.on_probe([&](const snip::ProbeEvent& p) { /* bf16_gap metric at p.step */ });
//   ctl.run([&](const snip::StepMetrics& m) { return true; });   // or, step by step:
//   //  while (...) { ctl.before_step(); auto m = trainer.step(); ctl.after_step(m); }
//
// Step numbering: `first_step` is 1-based like StepMetrics::step — the first optimizer step
// trained under the plan. The round that made it ran on that step's (first micro-)batch, with
// the weights and AdamW state from just before it, and changed none of them.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "snip/defaults.h"
#include "snip/grad_noise.h"
#include "snip/planner.h"
#include "snip/stats_round.h"
#include "snip/trainer.h"

namespace snip {

enum class ReplanWhen { always, noise };

struct AdaptiveOptions {
  Method method = Method::snip;  // any planner method; cost-based ones use the round's costs
  PlanRequest request;           // budget ρ, ties, stages, pins, seed ...
  EstimatorOptions estimator;    // λ (default 0.1)
  StatsRoundOptions stats;       // precisions, noise passes, seed (step/lr/batch come from the trainer)
  int64_t replan_every = defaults::kReplanEvery;         // steps between rounds; ≤ 0: plan once, before step 1
  int64_t bf16_probe_every = defaults::kBf16ProbeEvery;  // steps between BF16 probes; ≤ 0: never
  // The gradient noise monitor (METHOD.md 10). replan_when noise: every round is collected as
  // usual, but the plan is re-solved only when the set of layers whose FP4 grad_noise_ratio is
  // below the threshold (noise_floor, or √3 when it is 0) changed since the last solve.
  // noise_floor > 0: layers whose FP4 ratio is below it are kept out of FP4 (pinned to FP8).
  ReplanWhen replan_when = ReplanWhen::always;
  double noise_floor = 0;
};

const char* replan_when_name(ReplanWhen w);        // "always" "noise"
ReplanWhen parse_replan_when(std::string_view s);  // snip::Error naming the choices

struct PlanEvent {
  int64_t first_step = 0;      // first step (1-based) trained under this plan
  PlanResult result;           // the plan and its solve report (status, ρ_achieved, objective, ...)
  StatsRound round;            // the raw statistics it was made from
  double round_seconds = 0;    // wall time of the statistics round
  bool changed = true;         // false when the new plan equals the one in effect
  bool replanned = true;       // false when replan_when noise kept the plan (no layer crossed the threshold)
  bool budget_capped = false;  // the noise floor held out so many layers that the budget was lowered
};

struct ProbeEvent {
  int64_t step = 0;           // the probe ran on the batch of this (1-based) step, before it trained
  double quantized_loss = 0;  // forward under the plan in effect
  double bf16_loss = 0;       // forward with every linear layer in BF16
  double gap() const { return quantized_loss - bf16_loss; }
};

// One entry of the plan timeline: plan index into plans() and the step range [first, last]
// (last = −1 while it is still in effect).
struct PlanSpan {
  size_t plan = 0;
  int64_t first_step = 0;
  int64_t last_step = -1;
};

class AdaptiveController {
 public:
  // Throws snip::Error for a bad budget or method (checked on the first plan), or a
  // replan/probe interval that is not a number of steps.
  AdaptiveController(Trainer& trainer, AdaptiveOptions options);

  // A resumed run: `plan`, made by this run's controller when the trainer had done `made_at`
  // steps, is in effect; the next round (and every probe) comes at the step the uninterrupted
  // run's would. Call before the first before_step().
  void continue_from(const Plan& plan, int64_t made_at);

  void on_plan(std::function<void(const PlanEvent&)> cb) { on_plan_ = std::move(cb); }
  void on_probe(std::function<void(const ProbeEvent&)> cb) { on_probe_ = std::move(cb); }

  // Call before every trainer.step(): when a re-plan is due (the first call, then every
  // replan_every steps) runs a round, solves and hands the plan to Trainer::set_plan, which
  // applies it at the start of the coming step; then the BF16 probe when due. Returns the plan
  // event when one was made.
  std::optional<PlanEvent> before_step();
  // Call after every trainer.step() with its metrics: closes the timeline at the last step.
  void after_step(const StepMetrics& m);
  // Runs the trainer to its total step count with before_step/after_step around every step;
  // `cb` (may be empty) sees every step's metrics and may return false to stop. Returns true
  // when the run reached its total.
  bool run(const Trainer::Callback& cb);

  const std::vector<PlanResult>& plans() const { return plans_; }
  const std::vector<PlanSpan>& timeline() const { return timeline_; }
  const std::vector<ProbeEvent>& probes() const { return probes_; }

 private:
  PlanEvent replan();
  ProbeEvent probe();

  Trainer& trainer_;
  AdaptiveOptions options_;
  std::function<void(const PlanEvent&)> on_plan_;
  std::function<void(const ProbeEvent&)> on_probe_;
  int64_t last_plan_step_ = -1;  // trainer step count when the last plan was made
  // The layers whose FP4 ratio was below the threshold at the last solve (replan_when noise).
  std::vector<std::string> last_below_;
  double noise_threshold() const { return options_.noise_floor > 0 ? options_.noise_floor : kNoiseRatioThreshold; }
  std::vector<PlanResult> plans_;
  std::vector<PlanSpan> timeline_;
  std::vector<ProbeEvent> probes_;
};

}  // namespace snip
