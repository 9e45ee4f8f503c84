// RunSettings -> TrainConfig and AdaptiveOptions: the one place both fronts' run settings take
// their defaults and are checked.
#include "snip/run_settings.h"

#include <algorithm>
#include <cmath>

#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/recipe_name.h"

namespace snip {

TrainConfig train_config(const RunSettings& s) {
  if (!s.preset.empty() && !s.config_path.empty()) throw Error("give either a model preset or a config.json, not both");
  TrainConfig c;
  c.model = s.config_path.empty() ? preset_config(s.preset.empty() ? defaults::kPreset : s.preset)
                                  : read_config_file(s.config_path);
  c.data_path = s.data;
  c.tokenizer = s.tokenizer;
  c.steps = s.steps > 0 ? s.steps : defaults::kTrainSteps;
  c.batch_size = s.batch_size;
  const int positions = c.model.max_position_embeddings;
  c.seq_len = s.seq_len > 0 ? s.seq_len : std::min(defaults::kSeqLen, positions);
  if (positions > 0 && c.seq_len > positions)
    throw Error("sequence length " + std::to_string(c.seq_len) + " exceeds max_position_embeddings = " +
                std::to_string(positions) + " of the model: choose T ≤ " + std::to_string(positions));
  c.grad_accum = s.grad_accum;
  c.schedule.kind = s.schedule;
  c.schedule.lr = s.lr;
  c.schedule.lr_min = s.lr_min >= 0 ? s.lr_min : s.lr / defaults::kLrMinDivisor;
  c.schedule.total = c.steps;
  // The default warmup fits the run; a given one longer than the run is shortened by the session,
  // which says so.
  c.schedule.warmup = s.warmup >= 0 ? s.warmup : std::min(defaults::kWarmup, c.steps);
  c.schedule.validate();  // an unknown kind, a rate that is not positive, a final rate above the peak
  c.adamw.beta1 = s.beta1, c.adamw.beta2 = s.beta2, c.adamw.weight_decay = s.weight_decay;
  c.grad_clip = s.clip;
  c.seed = s.seed;
  c.eval_every = s.eval_every;
  c.eval_batches = s.eval_batches;
  c.precision = precision_name(parse_precision(s.precision));
  c.recipe = parse_recipe_name(s.recipe).canonical;
  if (s.plan && s.adaptive)
    throw Error("a fixed plan and adaptive planning both set every layer's precision; give one of them");
  if (s.plan) c.plan = *s.plan;
  if (s.adaptive) c.precision = "bf16";  // until the first plan, made before step 1
  return c;
}

AdaptiveOptions adaptive_options(const AdaptiveSettings& a) {
  if (!std::isfinite(a.budget) || a.budget < 0 || a.budget > 1)
    throw Error("budget " + std::to_string(a.budget) + " is outside [0, 1]: it is the FP4 fraction of linear FLOPs");
  AdaptiveOptions o;
  o.method = parse_method(a.method);
  o.request.budget = a.budget;
  o.request.ties = a.ties;
  o.request.per_role = a.per_role;
  o.estimator.lambda = a.lambda;
  o.replan_every = a.replan_every;
  o.bf16_probe_every = a.bf16_probe_every;
  o.replan_when = parse_replan_when(a.replan_when);
  o.noise_floor = a.noise_floor;
  o.stats.noise_passes = a.noise_passes;
  o.stats.sigma_eta_rel = a.sigma_eta_rel;
  return o;
}

}  // namespace snip
