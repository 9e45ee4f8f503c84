// `snip train`: trains a Llama model on the CPU with every block linear layer's three GEMMs at
// the precision a plan assigns (uniform --precision, or a snip-plan/1 file), with a progress bar
// on a terminal or one JSON line per step, periodic checkpoints and evaluation. Ctrl-C, SIGTERM
// and SIGHUP stop after the current step, save a checkpoint and exit with the shell's status for
// that signal (130, 143, 129: stop_signals.h).
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "command.h"
#include "given_settings.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/adaptive.h"
#include "snip/checkpoint.h"
#include "snip/dataset.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/isa.h"
#include "snip/model_config.h"
#include "snip/plan.h"
#include "snip/planner.h"
#include "snip/recipe_name.h"
#include "snip/recorded_training.h"
#include "snip/store.h"
#include "snip/store_export.h"
#include "snip/trainer.h"
#include "snip/training_session.h"
#include "stop_signals.h"

namespace {

struct TrainOptions {
  std::string preset;
  std::string config;
  std::string data;
  std::string tokenizer = "byte";
  int64_t steps = 0;  // 0: the default (defaults::kTrainSteps) or, on resume, the run's own total
  int batch_size = snip::defaults::kBatchSize;
  int seq_len = 0;  // 0: min(defaults::kSeqLen, max_position_embeddings)
  int grad_accum = 1;
  double lr = snip::defaults::kLearningRate;
  double lr_min = -1;  // < 0: lr / defaults::kLrMinDivisor
  int64_t warmup = snip::defaults::kWarmup;
  std::string schedule = "cosine";
  double weight_decay = snip::defaults::kWeightDecay;
  double beta1 = snip::defaults::kBeta1, beta2 = snip::defaults::kBeta2;
  double clip = snip::defaults::kGradClip;
  std::string precision = snip::defaults::kPrecision;
  std::string plan;
  std::string recipe = snip::defaults::kRecipe;
  std::string resume;
  std::string out;
  bool overwrite = false;  // --out may replace another run's snip checkpoint
  int64_t save_every = 0;
  bool save_every_given = false;  // else a resumed run keeps the interval its checkpoint carries
  bool steps_given = false;       // --steps on the command line (on --resume: the new total)
  int64_t eval_every = snip::defaults::kEvalEvery;
  int eval_batches = snip::defaults::kEvalBatches;
  uint64_t seed = snip::defaults::kSeed;
  bool json = false;
  // Experiment store (storage/): every run is recorded unless --no-db.
  std::string db;
  bool no_db = false;
  std::string name;
  // Adaptive SNIP (METHOD.md section 9): a statistics round + ILP re-solve every N steps.
  std::string method;
  double budget = snip::defaults::kBudget;
  int64_t replan_every = snip::defaults::kReplanEvery;
  int64_t bf16_probe_every = snip::defaults::kBf16ProbeEvery;
  double lambda = snip::defaults::kLambda;
  bool ties = false;
  std::string replan_when = "always";
  double noise_floor = 0;
  std::vector<std::string> given;  // options the user set explicitly
};

// Options that define a run; on --resume they come from the checkpoint, and one given again
// must agree with it (--data is where the corpus is now; its fingerprint must match).
const char* const kRunDefiningOptions[] = {"--data",         "--tokenizer",
                                           "--batch-size",   "--seq-len",
                                           "--grad-accum",   "--lr",
                                           "--lr-min",       "--warmup",
                                           "--schedule",     "--weight-decay",
                                           "--beta1",        "--beta2",
                                           "--clip",         "--precision",
                                           "--recipe",       "--seed",
                                           "--eval-every",   "--eval-batches",
                                           "--method",       "--budget",
                                           "--replan-every", "--bf16-probe-every",
                                           "--lambda",       "--ties",
                                           "--replan-when",  "--noise-floor"};

bool given(const TrainOptions& o, const std::string& name) {
  return std::find(o.given.begin(), o.given.end(), name) != o.given.end();
}

// The run-defining settings given again on a resume, as pointers into the checkpoint's
// training configuration (`stored`, train_config_to_json) and adaptive settings.
std::vector<snip::GivenSetting> given_train_settings(const TrainOptions& o, const nlohmann::json& stored) {
  // The run stores its tokenizer's canonical path (tokenizer_ref): compare the given one as that.
  const std::string tokenizer = given(o, "--tokenizer") ? snip::tokenizer_ref(o.tokenizer).spec : o.tokenizer;
  return snip::cli::given_settings({{"--tokenizer", "/tokenizer", tokenizer},
                                    {"--batch-size", "/batch_size", o.batch_size},
                                    {"--seq-len", "/seq_len", o.seq_len},
                                    {"--grad-accum", "/grad_accum", o.grad_accum},
                                    {"--lr", "/schedule/lr", o.lr},
                                    {"--lr-min", "/schedule/lr_min", o.lr_min},
                                    // a warmup longer than the run was stored as the run's length
                                    {"--warmup", "/schedule/warmup",
                                     stored.contains("steps") && stored["steps"].is_number_integer()
                                         ? std::min<int64_t>(o.warmup, stored["steps"].get<int64_t>())
                                         : o.warmup},
                                    {"--schedule", "/schedule/kind", o.schedule},
                                    {"--weight-decay", "/adamw/weight_decay", o.weight_decay},
                                    {"--beta1", "/adamw/beta1", o.beta1},
                                    {"--beta2", "/adamw/beta2", o.beta2},
                                    {"--clip", "/grad_clip", o.clip},
                                    {"--precision", "/precision", o.precision},
                                    {"--recipe", "/recipe", o.recipe},
                                    {"--seed", "/seed", o.seed},
                                    {"--eval-every", "/eval_every", o.eval_every},
                                    {"--eval-batches", "/eval_batches", o.eval_batches}},
                                   [&o](const std::string& name) { return given(o, name); });
}

std::vector<snip::GivenSetting> given_adaptive_settings(const TrainOptions& o) {
  return snip::cli::given_settings(
      {{"--method", "/method", o.method.empty() ? "" : snip::method_name(snip::parse_method(o.method))},
       {"--budget", "/budget", o.budget},
       {"--replan-every", "/replan_every", o.replan_every},
       {"--bf16-probe-every", "/bf16_probe_every", o.bf16_probe_every},
       {"--lambda", "/lambda", o.lambda},
       {"--ties", "/ties", o.ties},
       {"--replan-when", "/replan_when", o.replan_when},
       {"--noise-floor", "/noise_floor", o.noise_floor}},
      [&o](const std::string& name) { return given(o, name); });
}

// What `snip train --resume` needs besides the directory to reach the same database.
std::string resume_command(const TrainOptions& o, const std::string& out) {
  std::string cmd = "snip train --resume " + snip::cli::shell_quote(out);
  if (o.no_db)
    cmd += " --no-db";
  else if (!o.db.empty())
    cmd += " --db " + snip::cli::shell_quote(o.db);
  return cmd;
}

std::string default_out_dir() {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "checkpoints/run-%Y%m%d-%H%M%S", std::localtime(&now));
  return buf;
}

// A default as the help text shows it (%g: 0.1, 0.75)
std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string format_duration(double s) {
  char buf[32];
  const int64_t t = int64_t(s + 0.5);
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%lldh%02lldm", (long long)(t / 3600), (long long)(t / 60 % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldm%02llds", (long long)(t / 60), (long long)(t % 60));
  return buf;
}

// Progress on a terminal: one redrawn line. Elsewhere: a plain line every 10 steps / evaluation.
class Progress {
 public:
  explicit Progress(bool json) : json_(json), tty_(::isatty(STDERR_FILENO) != 0) {}
  void step(const snip::StepMetrics& m) {
    smoothed_tps_ = smoothed_tps_ == 0 ? m.tokens_per_s : 0.9 * smoothed_tps_ + 0.1 * m.tokens_per_s;
    if (m.val_loss) last_val_ = *m.val_loss;
    if (json_) {
      nlohmann::json j{{"step", m.step},
                       {"total_steps", m.total_steps},
                       {"train_loss", m.train_loss},
                       {"lr", m.lr},
                       {"grad_norm", m.grad_norm},
                       {"tokens_per_s", m.tokens_per_s},
                       {"fp4_fraction", m.fp4_fraction},
                       {"tokens_seen", m.tokens_seen}};
      if (m.val_loss) j["val_loss"] = *m.val_loss;
      std::printf("%s\n", snip::cli::json_text(j).c_str());
      std::fflush(stdout);
      return;
    }
    const double step_s = m.tokens_per_s > 0 ? m.step_seconds * m.tokens_per_s / smoothed_tps_ : m.step_seconds;
    const double eta = double(m.total_steps - m.step) * step_s;
    char val[32] = "";
    if (last_val_ >= 0) std::snprintf(val, sizeof val, " val %.4f", last_val_);
    if (tty_) {
      const int width = 24, filled = int(double(width) * double(m.step) / double(std::max<int64_t>(m.total_steps, 1)));
      std::string bar(size_t(filled), '#');
      bar.resize(size_t(width), '.');
      std::fprintf(stderr, "\r[%s] %lld/%lld loss %.4f%s | %.0f tok/s | ETA %s   ", bar.c_str(), (long long)m.step,
                   (long long)m.total_steps, m.train_loss, val, smoothed_tps_, format_duration(eta).c_str());
      if (m.step == m.total_steps) std::fprintf(stderr, "\n");
    } else if (m.step % 10 == 0 || m.val_loss || m.step == m.total_steps || m.step == 1) {
      std::fprintf(stderr, "step %lld/%lld loss %.4f%s lr %.2e grad_norm %.3f %.0f tok/s ETA %s\n", (long long)m.step,
                   (long long)m.total_steps, m.train_loss, val, m.lr, m.grad_norm, smoothed_tps_,
                   format_duration(eta).c_str());
    }
  }
  void end_line() {
    if (tty_ && !json_) std::fprintf(stderr, "\n");
  }

 private:
  bool json_, tty_;
  double smoothed_tps_ = 0;
  double last_val_ = -1;
};

void check_train_options(const TrainOptions& o) {
  if (o.steps < 0) throw snip::Error("--steps must be ≥ 0 (got " + std::to_string(o.steps) + ")");
  if (o.save_every < 0) throw snip::Error("--save-every must be ≥ 0 (0: save only at the end)");
  if (o.eval_every < 0) throw snip::Error("--eval-every must be ≥ 0 (0: never evaluate)");
  if (o.replan_every < 0 || o.bf16_probe_every < 0)
    throw snip::Error("--replan-every and --bf16-probe-every must be ≥ 0");
}

// A saved run is continued with its own settings: the options given again must agree with them.
void check_resume_options(const TrainOptions& o) {
  if (!o.preset.empty() || !o.config.empty())
    throw snip::Error("--resume continues a saved run with its own model; drop --preset/--config");
  const nlohmann::json state = snip::read_trainer_state(o.resume);
  const nlohmann::json stored = state.is_object() && state.contains("config") && state["config"].is_object()
                                    ? state["config"]
                                    : nlohmann::json::object();
  snip::check_given_settings(stored, given_train_settings(o, stored), o.resume);
  // --steps sets the new total: at or below the checkpoint's step there is nothing to train, and
  // the checkpoint would be rewritten with a total below its own step.
  if (o.steps_given && state.contains("step") && state["step"].is_number_integer() &&
      o.steps <= state["step"].get<int64_t>())
    throw snip::Error("--steps " + std::to_string(o.steps) + " is not beyond the checkpoint's step " +
                      std::to_string(state["step"].get<int64_t>()) +
                      ": --steps is the run's new total; give a larger one, or leave it out for the run's own (" +
                      std::to_string(stored.value("steps", int64_t(0))) + ")");
}

// The training configuration of a new run from the options.
snip::TrainConfig new_train_config(const TrainOptions& o) {
  if (!o.preset.empty() && !o.config.empty()) throw snip::Error("give either --preset or --config, not both");
  snip::TrainConfig c;
  c.model = o.config.empty() ? snip::preset_config(o.preset.empty() ? snip::defaults::kPreset : o.preset)
                             : snip::read_config_file(o.config);
  c.data_path = o.data;
  c.tokenizer = o.tokenizer;
  c.batch_size = o.batch_size;
  c.seq_len = o.seq_len > 0 ? o.seq_len : std::min(snip::defaults::kSeqLen, c.model.max_position_embeddings);
  c.grad_accum = o.grad_accum;
  c.steps = o.steps > 0 ? o.steps : snip::defaults::kTrainSteps;
  c.schedule.kind = o.schedule;
  c.schedule.lr = o.lr;
  c.schedule.lr_min = o.lr_min >= 0 ? o.lr_min : o.lr / snip::defaults::kLrMinDivisor;
  c.schedule.warmup = o.warmup;  // the session shortens one longer than the run, with a warning
  c.adamw.beta1 = o.beta1, c.adamw.beta2 = o.beta2, c.adamw.weight_decay = o.weight_decay;
  c.grad_clip = o.clip;
  c.seed = o.seed;
  c.eval_every = o.eval_every;
  c.eval_batches = o.eval_batches;
  c.precision = o.precision;
  c.recipe = o.recipe;
  if (!o.plan.empty()) c.plan = snip::read_plan_file(o.plan);
  return c;
}

void print_run_header(const snip::Trainer& trainer, const std::string& out) {
  const auto& cfg = trainer.config();
  const snip::Plan next_plan = trainer.next_plan();  // a resume's --plan takes effect at the next step
  std::fprintf(stderr, "training %lld parameters on %s: %d x %d tokens x %d accum, %lld steps, %s -> %s\n",
               (long long)trainer.model().num_params(), trainer.data().source.c_str(), cfg.batch_size, cfg.seq_len,
               cfg.grad_accum, (long long)cfg.steps,
               next_plan.layers.empty() ? ("uniform " + cfg.precision + ", recipe " + cfg.recipe).c_str()
                                        : ("plan " + next_plan.method + ", recipe " + cfg.recipe).c_str(),
               out.c_str());
}

// The run as the options describe it: the one request both fronts give the training session.
snip::RunRequest run_request(const TrainOptions& o, const std::string& out) {
  snip::RunRequest r;
  if (o.resume.empty()) {
    r.config = new_train_config(o);
  } else {
    check_resume_options(o);
    r.resume_from = o.resume;
    r.resume_total_steps = o.steps;
    r.resume_data = given(o, "--data") ? o.data : "";
    if (!o.plan.empty()) r.resume_plan = snip::read_plan_file(o.plan);  // before the data
    r.given_adaptive = given_adaptive_settings(o);
  }
  if (!o.method.empty()) {  // the option rules refuse the other adaptive options without it (or --resume)
    snip::AdaptiveOptions a;
    a.method = snip::parse_method(o.method);
    a.request.budget = o.budget;
    a.request.ties = o.ties;
    a.estimator.lambda = o.lambda;
    a.replan_every = o.replan_every;
    a.bf16_probe_every = o.bf16_probe_every;
    a.replan_when = snip::parse_replan_when(o.replan_when);
    a.noise_floor = o.noise_floor;
    r.adaptive = a;
  }
  r.db_path = o.no_db ? "" : o.db.empty() ? snip::cli::default_db_path() : o.db;
  // A name derived from the directory is made one printable line; a given --name with a control
  // character is refused by the store.
  r.description.name = o.name.empty() ? snip::printable_text(std::filesystem::path(out).filename().string()) : o.name;
  r.rename_on_resume = !o.name.empty();  // --name renames the continued run
  r.checkpoint_dir = out;
  r.overwrite = o.overwrite;
  if (o.save_every_given) r.save_every = o.save_every;
  r.stop_reason = "stopped by Ctrl-C";
  return r;
}

// Runs the steps with the progress display; Ctrl-C, SIGTERM and SIGHUP stop after the current step.
// `stop_status` gets the exit status of the signal that stopped the run (StopSignals::exit_status).
snip::TrainingOutcome train_with_progress(snip::RecordedTraining& training, const TrainOptions& o,
                                          const std::optional<snip::AdaptiveOptions>& adaptive,
                                          snip::cli::StopSignals& stop_signals, int& stop_status,
                                          std::string& stop_why) {
  Progress progress(o.json);
  training.on_step = [&](const snip::StepMetrics& m, const snip::MetricRow&) {
    progress.step(m);
    if (!stop_signals.requested()) return true;
    stop_why = "stopped by " + stop_signals.name();
    training.set_stop_reason(stop_why);
    stop_status = stop_signals.exit_status();
    return false;
  };
  // Also asked between the micro-batches of a long step: a signal never waits for the step.
  training.stop_requested = [&] {
    if (!stop_signals.requested()) return false;
    stop_why = "stopped by " + stop_signals.name();
    training.set_stop_reason(stop_why);
    stop_status = stop_signals.exit_status();
    return true;
  };
  training.on_plan = [&](const snip::PlanEvent& e, int64_t) {
    if (!o.json)
      std::fprintf(stderr, "\nstep %lld: statistics round %.1fs, plan %s at budget %.3f -> FP4 fraction %.4f (%s)%s\n",
                   (long long)e.first_step, e.round_seconds, e.result.method.c_str(), adaptive->request.budget,
                   e.result.achieved_fraction, e.result.status.c_str(),
                   !e.replanned ? ", kept: no layer's FP4 noise ratio crossed the threshold"
                   : e.changed  ? (e.budget_capped ? ", budget lowered: the noise floor holds layers out of FP4" : "")
                   : e.budget_capped ? ", unchanged; budget lowered: the noise floor holds layers out of FP4"
                                     : ", unchanged");
  };
  try {
    const snip::TrainingOutcome outcome = training.run();
    progress.end_line();
    return outcome;
  } catch (const std::exception&) {
    progress.end_line();
    throw;  // NaN/Inf and bad input: the run is marked failed, the last saved checkpoint is kept as it is
  }
}

void run_train(const TrainOptions& o) {
  check_train_options(o);
  // From the start: a signal during set-up stops the run before its first step, recorded and resumable.
  snip::cli::StopSignals stop_signals;
  const std::string out = !o.out.empty() ? o.out : !o.resume.empty() ? o.resume : default_out_dir();
  snip::TrainingSession session(run_request(o, out),
                                [](const std::string& w) { std::fprintf(stderr, "warning: %s\n", w.c_str()); });
  stop_signals.set_up_done();  // a signal now stops after the current step, with its checkpoint
  if (!o.json) {
    print_run_header(session.trainer(), out);
    if (session.store())
      std::fprintf(stderr, "recording run %lld in %s\n", (long long)session.run_id(), session.store()->path().c_str());
  }
  snip::RecordedTraining& training = session.training();
  int stop_status = 0;
  std::string stop_why;
  const snip::TrainingOutcome outcome =
      train_with_progress(training, o, session.adaptive(), stop_signals, stop_status, stop_why);
  if (!outcome.finished) {
    throw snip::cli::Interrupted{stop_why + (stop_why.empty() ? "" : ": ") + "interrupted at step " +
                                     std::to_string(outcome.step) + "; checkpoint saved to " +
                                     snip::printable_text(out) + " (continue with: " + resume_command(o, out) + ")",
                                 stop_status};
  } else if (!o.json) {
    std::fprintf(stderr, "done: %lld steps; checkpoint saved to %s\n", (long long)outcome.step,
                 snip::printable_text(out).c_str());
  }
}

// What `snip train` accepts: values where 0 or a negative number would silently mean a default,
// and the options that only matter together (adaptive planning) or decide the same thing.
std::shared_ptr<snip::cli::OptionRules> train_rules(CLI::App* cmd, const TrainOptions& o) {
  auto r = std::make_shared<snip::cli::OptionRules>(cmd);
  // The adaptive options need a method, or a --resume whose checkpoint carries one (the resume
  // then checks each given value against the run's own: resumed_adaptive_options).
  const std::vector<std::string> adaptive = {"--method", "--resume"};
  r->at_least<int64_t>("--steps", o.steps, 1,
                       "leave it out for the default (" + std::to_string(snip::defaults::kTrainSteps) +
                           ", or the run's own total on --resume)")
      .at_least("--batch-size", o.batch_size, 1)
      .at_least("--seq-len", o.seq_len, 1,
                "leave it out for min(" + std::to_string(snip::defaults::kSeqLen) + ", max_position_embeddings)")
      .at_least("--grad-accum", o.grad_accum, 1)
      .at_least("--lr-min", o.lr_min, 0.0, "leave it out for lr/10")
      .at_least("--eval-batches", o.eval_batches, 1, "use --eval-every 0 to train without evaluation")
      .between("--budget", o.budget, 0.0, 1.0, "it is the fraction of linear-layer FLOPs that must run in FP4")
      .at_least("--lambda", o.lambda, 0.0)
      .requires_any("--budget", adaptive, "it is the FP4 target of adaptive planning (e.g. --method snip)")
      .requires_any("--replan-every", adaptive,
                    "re-planning needs a planning method (e.g. --method snip --budget 0.75 --replan-every 50)")
      .requires_any("--bf16-probe-every", adaptive, "the BF16 probe is part of adaptive planning")
      .requires_any("--lambda", adaptive, "lambda weights dW in SNIP's re-planning objective")
      .requires_any("--ties", adaptive, "ties constrain the plans adaptive planning makes")
      .requires_any("--replan-when", adaptive, "it decides when adaptive planning re-solves the plan")
      .requires_any("--noise-floor", adaptive, "it keeps noisy layers out of FP4 in adaptive planning")
      .at_least("--noise-floor", o.noise_floor, 0.0, "0 turns it off; the monitor's threshold is 1.732 (√3)")
      .excludes("--plan", "--precision",
                "both set every layer's precision; --precision is the uniform choice when there is no plan")
      .excludes("--plan", "--method",
                "--plan fixes the precisions while --method re-plans them; give the plan or the method")
      .excludes("--db", "--no-db", "--no-db records nothing; drop one of them")
      .excludes("--precision", "--method",
                "--method plans every layer's precision before step 1, so --precision would never be used")
      .ignored_unless("--overwrite", {"--out"}, "it lets --out replace another run's checkpoint")
      .add([&o, r = r.get()] {
        // Names checked before the corpus is read (they were refused only after loading it).
        if (!o.method.empty()) (void)snip::parse_method(o.method);
        if (r->given("--replan-when")) (void)snip::parse_replan_when(o.replan_when);
        if (r->given("--precision")) (void)snip::parse_precision(o.precision);
        if (r->given("--recipe")) (void)snip::parse_recipe_name(o.recipe);
        if (r->given("--eval-batches") && r->given("--eval-every") && o.eval_every == 0)
          snip::cli::OptionRules::warn("--eval-batches is ignored with --eval-every 0 (no evaluation)");
        if (r->given("--recipe") && !r->given("--plan") && !r->given("--method") && !r->given("--resume") &&
            (o.precision == "fp32" || o.precision == "bf16"))
          snip::cli::OptionRules::warn("--recipe is ignored with --precision " + o.precision +
                                       " (no scaled format: give --precision fp8 or fp4, --plan or --method)");
        if (r->given("--lambda") && r->given("--method") && o.method != "snip")
          snip::cli::OptionRules::warn("--lambda is ignored with --method " + o.method +
                                       " (it weights dW in SNIP's objective only)");
        if (r->given("--no-db") && r->given("--name"))
          throw snip::Error("--name and --no-db cannot be combined: --name names the run in the database");
        if (r->given("--lr-min") && r->given("--lr") && o.lr_min > o.lr)
          throw snip::Error("--lr-min " + std::to_string(o.lr_min) + " is above --lr " + std::to_string(o.lr) +
                            "; the cosine schedule decays from --lr down to --lr-min");
        if (r->given("--lr-min") && o.schedule == "constant")
          snip::cli::OptionRules::warn("--lr-min is ignored with --schedule constant (the rate stays at --lr)");
      });
  return r;
}

// Adaptive planning (METHOD.md 9, 10): the method, its budget, λ, ties, when to re-plan and probe.
void add_adaptive_options(CLI::App* cmd, TrainOptions& opts) {
  TrainOptions* o = &opts;
  cmd->add_option("--method", o->method,
                  "Adaptive planning (paper section 'periodic re-planning'): the method whose plan is re-made from "
                  "each statistics round, one of " +
                      snip::method_names());
  cmd->add_option("--budget", o->budget,
                  "Efficiency target rho for --method: the fraction of linear-layer FLOPs that must run in FP4 (0..1, "
                  "default " +
                      format_number(snip::defaults::kBudget) + ")");
  cmd->add_option("--replan-every", o->replan_every,
                  "Steps between statistics rounds (1 clean + 3 backward-noise + 3 forward-noise passes) and ILP "
                  "re-solves (default " +
                      std::to_string(snip::defaults::kReplanEvery) + "; 0: plan once before the first step)");
  cmd->add_option("--bf16-probe-every", o->bf16_probe_every,
                  "Every N steps, also run a BF16 forward on the same batch and record the live loss gap (default " +
                      std::to_string(snip::defaults::kBf16ProbeEvery) + "; 0: never)");
  cmd->add_option("--lambda", o->lambda,
                  "Weight of the backward weight divergence in SNIP's objective Q = dL + lambda*dW (default " +
                      format_number(snip::defaults::kLambda) +
                      "; "
                      "lambda=1 is not neutral)");
  cmd->add_flag("--ties", o->ties, "Tie q/k/v and gate/up to one precision each (fused kernels)");
  cmd->add_option("--replan-when", o->replan_when,
                  "With --method: always (re-solve at every statistics round) or noise (re-solve only when a layer's "
                  "FP4 gradient noise ratio crosses the threshold, √3 or --noise-floor; METHOD.md 10)");
  cmd->add_option("--noise-floor", o->noise_floor,
                  "With --method: keep layers whose FP4 gradient noise ratio is below this out of FP4 (e.g. 1.732 = "
                  "√3; default 0: off)");
}

void setup_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  auto* cmd = app.add_subcommand(
      "train", "Train a Llama model with each linear layer's fprop/dgrad/wgrad GEMMs in emulated BF16/FP8/FP4");
  cmd->add_option(
      "--preset", o->preset,
      "Model preset: tiny, small, medium, tinyllama-1.1b (default " + std::string(snip::defaults::kPreset) + ")");
  cmd->add_option("--config", o->config, "Hugging Face config.json of a Llama model (instead of --preset)");
  cmd->add_option("--data", o->data,
                  "Training text (.txt, .txt.gz, a folder of text) or llm.c token file (.bin); default: bundled KJV");
  cmd->add_option("--tokenizer", o->tokenizer, "\"byte\" (vocab 256) or a SentencePiece .model file");
  cmd->add_option(
      "--steps", o->steps,
      "Optimizer steps (default " + std::to_string(snip::defaults::kTrainSteps) + "; on --resume the run's own total)");
  cmd->add_option("--batch-size", o->batch_size, "Rows per micro-batch (B)");
  cmd->add_option(
      "--seq-len", o->seq_len,
      "Tokens per row (T); default min(" + std::to_string(snip::defaults::kSeqLen) + ", max_position_embeddings)");
  cmd->add_option("--grad-accum", o->grad_accum, "Micro-batches per optimizer step (gradient accumulation)");
  cmd->add_option("--lr", o->lr, "Peak learning rate");
  cmd->add_option("--lr-min", o->lr_min, "Final learning rate of the cosine schedule (default lr/10)");
  cmd->add_option("--warmup", o->warmup, "Linear warmup steps");
  cmd->add_option("--schedule", o->schedule, "Learning-rate schedule: cosine or constant");
  cmd->add_option("--weight-decay", o->weight_decay, "AdamW decoupled weight decay (matrices only)");
  cmd->add_option("--beta1", o->beta1, "AdamW beta1");
  cmd->add_option("--beta2", o->beta2, "AdamW beta2");
  cmd->add_option("--clip", o->clip, "Gradient clipping by global norm (0 disables)");
  cmd->add_option("--precision", o->precision,
                  "Uniform precision of every linear GEMM when no --plan: fp32 (exact), bf16, fp8 (E4M3), fp4 (E2M1)");
  cmd->add_option("--plan", o->plan,
                  "snip-plan/1 JSON assigning fprop/dgrad/wgrad precisions per layer (layers left out run BF16)");
  cmd->add_option("--recipe", o->recipe,
                  "Scaling recipe of the quantized GEMMs: snip, mx, nvfp4, tensor, or block:N (2-4096), block:row, "
                  "channel, each with an optional :sr (stochastic rounding of FP4 gradients); docs/FORMATS.md 4.1");
  cmd->add_option("--resume", o->resume, "Continue the run saved in this checkpoint directory (bit-exact)");
  cmd->add_option("--out", o->out,
                  "Checkpoint directory (default checkpoints/run-<time>, or the --resume directory); it must be "
                  "new, empty, or this run's checkpoint");
  cmd->add_flag("--overwrite", o->overwrite,
                "Let --out replace another run's snip checkpoint (never a folder with other files)");
  cmd->add_option("--save-every", o->save_every,
                  "Also save a checkpoint every N steps (0: only at the end; on --resume: the run's own interval)");
  cmd->add_option("--eval-every", o->eval_every, "Validation loss every N steps (0: never)");
  cmd->add_option("--eval-batches", o->eval_batches, "Sequential validation batches per evaluation");
  cmd->add_option("--seed", o->seed, "Seed of the weights, the data order and stochastic rounding");
  cmd->add_flag("--json", o->json, "Print one JSON object per step on stdout instead of a progress bar");
  cmd->add_option("--db", o->db, "Experiment database to record the run in (default: the user's workbench database)");
  cmd->add_flag("--no-db", o->no_db, "Do not record the run in a database");
  cmd->add_option("--name", o->name, "Run name in the database (default: the checkpoint directory's name)");
  add_adaptive_options(cmd, *o);
  snip::cli::run_checked(cmd, train_rules(cmd, *o), [o, cmd] {
    o->given.clear();
    o->save_every_given = cmd->count("--save-every") > 0;
    o->steps_given = cmd->count("--steps") > 0;
    for (const char* name : kRunDefiningOptions)
      if (cmd->count(name) > 0) o->given.push_back(name);
    run_train(*o);
  });
}
SNIP_REGISTER_COMMAND("train", setup_train);

}  // namespace
