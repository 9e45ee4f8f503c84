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
#include "snip/run_settings.h"
#include "snip/store.h"
#include "snip/store_export.h"
#include "snip/text.h"
#include "snip/trainer.h"
#include "snip/training_session.h"
#include "stop_signals.h"

namespace {

struct TrainOptions {
  snip::RunSettings run;            // what the run is: the same settings the GUI's Run form fills
  snip::AdaptiveSettings adaptive;  // with --method
  std::string plan;                 // --plan: a snip-plan/1 file, or the id of a plan in the database
  std::string method;               // --method: adaptive planning
  std::string resume;
  std::string out;
  bool overwrite = false;  // --out may replace another run's snip checkpoint
  int64_t save_every = 0;
  bool save_every_given = false;  // else a resumed run keeps the interval its checkpoint carries
  bool steps_given = false;       // --steps on the command line (on --resume: the new total)
  bool json = false;
  // Experiment store (storage/): every run is recorded unless --no-db.
  std::string db;
  bool no_db = false;
  std::string name;
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
                                           "--replan-when",  "--noise-floor",
                                           "--per-role",     "--noise-passes",
                                           "--sigma-eta-rel"};

bool given(const TrainOptions& o, const std::string& name) {
  return std::find(o.given.begin(), o.given.end(), name) != o.given.end();
}

// The run-defining settings given again on a resume, as pointers into the checkpoint's
// training configuration (train_config_to_json) and adaptive settings, checked by the session.
std::vector<snip::GivenSetting> given_train_settings(const TrainOptions& o) {
  // The run stores its tokenizer's canonical path (tokenizer_ref): compare the given one as that.
  const std::string tokenizer = given(o, "--tokenizer") ? snip::tokenizer_ref(o.run.tokenizer).spec : o.run.tokenizer;
  return snip::cli::given_settings({{"--tokenizer", "/tokenizer", tokenizer},
                                    {"--batch-size", "/batch_size", o.run.batch_size},
                                    {"--seq-len", "/seq_len", o.run.seq_len},
                                    {"--grad-accum", "/grad_accum", o.run.grad_accum},
                                    {"--lr", "/schedule/lr", o.run.lr},
                                    {"--lr-min", "/schedule/lr_min", o.run.lr_min},
                                    {"--warmup", "/schedule/warmup", o.run.warmup},
                                    {"--schedule", "/schedule/kind", o.run.schedule},
                                    {"--weight-decay", "/adamw/weight_decay", o.run.weight_decay},
                                    {"--beta1", "/adamw/beta1", o.run.beta1},
                                    {"--beta2", "/adamw/beta2", o.run.beta2},
                                    {"--clip", "/grad_clip", o.run.clip},
                                    {"--precision", "/precision", o.run.precision},
                                    {"--recipe", "/recipe", o.run.recipe},
                                    {"--seed", "/seed", o.run.seed},
                                    {"--eval-every", "/eval_every", o.run.eval_every},
                                    {"--eval-batches", "/eval_batches", o.run.eval_batches}},
                                   [&o](const std::string& name) { return given(o, name); });
}

std::vector<snip::GivenSetting> given_adaptive_settings(const TrainOptions& o) {
  return snip::cli::given_settings(
      {{"--method", "/method", o.method.empty() ? "" : snip::method_name(snip::parse_method(o.method))},
       {"--budget", "/budget", o.adaptive.budget},
       {"--replan-every", "/replan_every", o.adaptive.replan_every},
       {"--bf16-probe-every", "/bf16_probe_every", o.adaptive.bf16_probe_every},
       {"--lambda", "/lambda", o.adaptive.lambda},
       {"--ties", "/ties", o.adaptive.ties},
       {"--per-role", "/per_role", o.adaptive.per_role},
       {"--noise-passes", "/round/noise_passes", o.adaptive.noise_passes},
       {"--sigma-eta-rel", "/round/sigma_eta_rel", o.adaptive.sigma_eta_rel},
       {"--replan-when", "/replan_when", o.adaptive.replan_when},
       {"--noise-floor", "/noise_floor", o.adaptive.noise_floor}},
      [&o](const std::string& name) { return given(o, name); });
}

// What `snip train --resume` needs besides the directory to reach the same database.
std::string resume_command(const TrainOptions& o, const std::string& out) {
  std::string cmd = "snip train --resume " + snip::shell_quote(out);
  if (o.no_db)
    cmd += " --no-db";
  else if (!o.db.empty())
    cmd += " --db " + snip::shell_quote(o.db);
  return cmd;
}

std::string default_out_dir() {
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "checkpoints/run-%Y%m%d-%H%M%S", std::localtime(&now));
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
                   (long long)m.total_steps, m.train_loss, val, smoothed_tps_,
                   snip::format_duration_ms(int64_t(eta * 1000.0)).c_str());
      if (m.step == m.total_steps) std::fprintf(stderr, "\n");
    } else if (m.step % 10 == 0 || m.val_loss || m.step == m.total_steps || m.step == 1) {
      std::fprintf(stderr, "step %lld/%lld loss %.4f%s lr %.2e grad_norm %.3f %.0f tok/s ETA %s\n", (long long)m.step,
                   (long long)m.total_steps, m.train_loss, val, m.lr, m.grad_norm, smoothed_tps_,
                   snip::format_duration_ms(int64_t(eta * 1000.0)).c_str());
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
  if (o.run.steps < 0) throw snip::Error("--steps must be ≥ 0 (got " + std::to_string(o.run.steps) + ")");
  if (o.save_every < 0) throw snip::Error("--save-every must be ≥ 0 (0: save only at the end)");
  if (o.run.eval_every < 0) throw snip::Error("--eval-every must be ≥ 0 (0: never evaluate)");
  if (o.adaptive.replan_every < 0 || o.adaptive.bf16_probe_every < 0)
    throw snip::Error("--replan-every and --bf16-probe-every must be ≥ 0");
}

// A plan given by --plan: a snip-plan/1 file, or (digits that name no file) a plan of the
// database, as the GUI's "Stored plan" takes it. Its id is returned in *plan_id.
snip::Plan given_plan(const TrainOptions& o, std::optional<int64_t>* plan_id) {
  const bool digits =
      !o.plan.empty() && o.plan.size() <= 18 && o.plan.find_first_not_of("0123456789") == std::string::npos;
  std::error_code ec;
  if (!digits || std::filesystem::exists(o.plan, ec)) return snip::read_plan_file(o.plan);
  if (o.no_db) throw snip::Error("--plan " + o.plan + " names a plan of the database, and --no-db opens none");
  snip::Store store(o.db.empty() ? snip::cli::default_db_path() : o.db,
                    snip::StoreOptions{.create = false, .read_only_if_unwritable = true});
  *plan_id = std::stoll(o.plan);
  return store.plan(**plan_id).plan;
}

// The run the options describe: the same settings the GUI's Run form fills.
snip::RunSettings run_settings(const TrainOptions& o, std::optional<int64_t>* plan_id) {
  snip::RunSettings s = o.run;
  if (!o.plan.empty()) s.plan = given_plan(o, plan_id);
  if (!o.method.empty()) {
    s.adaptive = o.adaptive;
    s.adaptive->method = o.method;
  }
  return s;
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
  const snip::RunSettings settings = run_settings(o, &r.description.plan_id);
  if (o.resume.empty()) {
    r.config = snip::train_config(settings);
  } else {
    r.resume_from = o.resume;
    r.given_train = given_train_settings(o);
    r.resume_total_steps = o.steps_given ? o.run.steps : 0;
    r.resume_data = given(o, "--data") ? o.run.data : "";
    r.resume_plan = settings.plan;
    r.given_adaptive = given_adaptive_settings(o);
  }
  if (settings.adaptive) r.adaptive = snip::adaptive_options(*settings.adaptive);
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
  r->at_least<int64_t>("--steps", o.run.steps, 1,
                       "leave it out for the default (" + std::to_string(snip::defaults::kTrainSteps) +
                           ", or the run's own total on --resume)")
      .at_least("--batch-size", o.run.batch_size, 1)
      .at_least("--seq-len", o.run.seq_len, 1,
                "leave it out for min(" + std::to_string(snip::defaults::kSeqLen) + ", max_position_embeddings)")
      .at_least("--grad-accum", o.run.grad_accum, 1)
      .at_least("--lr-min", o.run.lr_min, 0.0, "leave it out for lr/10")
      .at_least<int64_t>("--warmup", o.run.warmup, 0)
      .at_least("--eval-batches", o.run.eval_batches, 1, "use --eval-every 0 to train without evaluation")
      .between("--budget", o.adaptive.budget, 0.0, 1.0, "it is the fraction of linear-layer FLOPs that must run in FP4")
      .at_least("--lambda", o.adaptive.lambda, 0.0)
      .requires_any("--budget", adaptive, "it is the FP4 target of adaptive planning (e.g. --method snip)")
      .requires_any("--replan-every", adaptive,
                    "re-planning needs a planning method (e.g. --method snip --budget 0.75 --replan-every 50)")
      .requires_any("--bf16-probe-every", adaptive, "the BF16 probe is part of adaptive planning")
      .requires_any("--lambda", adaptive, "lambda weights dW in SNIP's re-planning objective")
      .requires_any("--ties", adaptive, "ties constrain the plans adaptive planning makes")
      .requires_any("--replan-when", adaptive, "it decides when adaptive planning re-solves the plan")
      .requires_any("--noise-floor", adaptive, "it keeps noisy layers out of FP4 in adaptive planning")
      .requires_any("--per-role", adaptive, "it lets adaptive planning choose each GEMM role apart")
      .requires_any("--noise-passes", adaptive, "it sets the statistics rounds of adaptive planning")
      .requires_any("--sigma-eta-rel", adaptive, "it sets the statistics rounds of adaptive planning")
      .between("--noise-passes", o.adaptive.noise_passes, 1, 1000)
      .between("--sigma-eta-rel", o.adaptive.sigma_eta_rel, 1e-6, 1.0)
      .at_least("--noise-floor", o.adaptive.noise_floor, 0.0, "0 turns it off; the monitor's threshold is 1.732 (√3)")
      .excludes("--plan", "--precision",
                "both set every layer's precision; --precision is the uniform choice when there is no plan")
      .excludes("--plan", "--method",
                "--plan fixes the precisions while --method re-plans them; give the plan or the method")
      .excludes("--db", "--no-db", "--no-db records nothing; drop one of them")
      .excludes("--resume", "--preset", "--resume continues a saved run with its own model")
      .excludes("--resume", "--config", "--resume continues a saved run with its own model")
      .excludes("--precision", "--method",
                "--method plans every layer's precision before step 1, so --precision would never be used")
      .ignored_unless("--overwrite", {"--out"}, "it lets --out replace another run's checkpoint")
      .add([&o, r = r.get()] {
        // Names checked before the corpus is read.
        if (!o.method.empty()) (void)snip::parse_method(o.method);
        if (r->given("--replan-when")) (void)snip::parse_replan_when(o.adaptive.replan_when);
        if (r->given("--precision")) (void)snip::parse_precision(o.run.precision);
        if (r->given("--recipe")) (void)snip::parse_recipe_name(o.run.recipe);
        if (r->given("--eval-batches") && r->given("--eval-every") && o.run.eval_every == 0)
          snip::cli::OptionRules::warn("--eval-batches is ignored with --eval-every 0 (no evaluation)");
        if (r->given("--recipe") && !r->given("--plan") && !r->given("--method") && !r->given("--resume") &&
            (o.run.precision == "fp32" || o.run.precision == "bf16"))
          snip::cli::OptionRules::warn("--recipe is ignored with --precision " + o.run.precision +
                                       " (no scaled format: give --precision fp8 or fp4, --plan or --method)");
        if (r->given("--lambda") && r->given("--method") && o.method != "snip")
          snip::cli::OptionRules::warn("--lambda is ignored with --method " + o.method +
                                       " (it weights dW in SNIP's objective only)");
        if (r->given("--no-db") && r->given("--name"))
          throw snip::Error("--name and --no-db cannot be combined: --name names the run in the database");
        if (r->given("--lr-min") && r->given("--lr") && o.run.lr_min > o.run.lr)
          throw snip::Error("--lr-min " + std::to_string(o.run.lr_min) + " is above --lr " + std::to_string(o.run.lr) +
                            "; the cosine schedule decays from --lr down to --lr-min");
        if (r->given("--lr-min") && o.run.schedule == "constant")
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
  cmd->add_option("--budget", o->adaptive.budget,
                  "Efficiency target rho for --method: the fraction of linear-layer FLOPs that must run in FP4 (0..1, "
                  "default " +
                      snip::format_g(snip::defaults::kBudget) + ")");
  cmd->add_option("--replan-every", o->adaptive.replan_every,
                  "Steps between statistics rounds (1 clean + 3 backward-noise + 3 forward-noise passes) and ILP "
                  "re-solves (default " +
                      std::to_string(snip::defaults::kReplanEvery) + "; 0: plan once before the first step)");
  cmd->add_option("--bf16-probe-every", o->adaptive.bf16_probe_every,
                  "Every N steps, also run a BF16 forward on the same batch and record the live loss gap (default " +
                      std::to_string(snip::defaults::kBf16ProbeEvery) + "; 0: never)");
  cmd->add_option("--lambda", o->adaptive.lambda,
                  "Weight of the backward weight divergence in SNIP's objective Q = dL + lambda*dW (default " +
                      snip::format_g(snip::defaults::kLambda) +
                      "; "
                      "lambda=1 is not neutral)");
  cmd->add_flag("--ties", o->adaptive.ties, "Tie q/k/v and gate/up to one precision each (fused kernels)");
  cmd->add_flag("--per-role", o->adaptive.per_role,
                "Plan fprop and the backward GEMMs (dgrad, wgrad) of each layer apart (FLOPs 1/3 : 2/3)");
  cmd->add_option("--noise-passes", o->adaptive.noise_passes,
                  "Backward- and forward-noise passes of each statistics round (default " +
                      std::to_string(snip::StatsRoundOptions{}.noise_passes) + ")");
  cmd->add_option("--sigma-eta-rel", o->adaptive.sigma_eta_rel,
                  "Forward-noise scale of each statistics round, relative to a layer's output RMS (default " +
                      snip::format_g(snip::StatsRoundOptions{}.sigma_eta_rel) + ")");
  cmd->add_option("--replan-when", o->adaptive.replan_when,
                  "With --method: always (re-solve at every statistics round) or noise (re-solve only when a layer's "
                  "FP4 gradient noise ratio crosses the threshold, √3 or --noise-floor; METHOD.md 10)");
  cmd->add_option("--noise-floor", o->adaptive.noise_floor,
                  "With --method: keep layers whose FP4 gradient noise ratio is below this out of FP4 (e.g. 1.732 = "
                  "√3; default 0: off)");
}

void setup_train(CLI::App& app) {
  auto o = std::make_shared<TrainOptions>();
  auto* cmd = app.add_subcommand(
      "train", "Train a Llama model with each linear layer's fprop/dgrad/wgrad GEMMs in emulated BF16/FP8/FP4");
  cmd->add_option(
      "--preset", o->run.preset,
      "Model preset: tiny, small, medium, tinyllama-1.1b (default " + std::string(snip::defaults::kPreset) + ")");
  cmd->add_option("--config", o->run.config_path, "Hugging Face config.json of a Llama model (instead of --preset)");
  cmd->add_option("--data", o->run.data,
                  "Training text (.txt, .txt.gz, a folder of text) or llm.c token file (.bin); default: bundled KJV");
  cmd->add_option("--tokenizer", o->run.tokenizer, "\"byte\" (vocab 256) or a SentencePiece .model file");
  cmd->add_option(
      "--steps", o->run.steps,
      "Optimizer steps (default " + std::to_string(snip::defaults::kTrainSteps) + "; on --resume the run's own total)");
  cmd->add_option("--batch-size", o->run.batch_size, "Rows per micro-batch (B)");
  cmd->add_option(
      "--seq-len", o->run.seq_len,
      "Tokens per row (T); default min(" + std::to_string(snip::defaults::kSeqLen) + ", max_position_embeddings)");
  cmd->add_option("--grad-accum", o->run.grad_accum, "Micro-batches per optimizer step (gradient accumulation)");
  cmd->add_option("--lr", o->run.lr, "Peak learning rate");
  cmd->add_option("--lr-min", o->run.lr_min, "Final learning rate of the cosine schedule (default lr/10)");
  cmd->add_option("--warmup", o->run.warmup,
                  "Linear warmup steps (default " + std::to_string(snip::defaults::kWarmup) +
                      ", or the whole run when it is shorter)");
  cmd->add_option("--schedule", o->run.schedule, "Learning-rate schedule: cosine or constant");
  cmd->add_option("--weight-decay", o->run.weight_decay, "AdamW decoupled weight decay (matrices only)");
  cmd->add_option("--beta1", o->run.beta1, "AdamW beta1");
  cmd->add_option("--beta2", o->run.beta2, "AdamW beta2");
  cmd->add_option("--clip", o->run.clip, "Gradient clipping by global norm (0 disables)");
  cmd->add_option("--precision", o->run.precision,
                  "Uniform precision of every linear GEMM when no --plan: fp32 (exact), bf16, fp8 (E4M3), fp4 (E2M1)");
  cmd->add_option("--plan", o->plan,
                  "snip-plan/1 JSON assigning fprop/dgrad/wgrad precisions per layer (layers left out run BF16), or "
                  "the id of a plan in the database (snip show --run ID lists them)");
  cmd->add_option("--recipe", o->run.recipe,
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
  cmd->add_option("--eval-every", o->run.eval_every, "Validation loss every N steps (0: never)");
  cmd->add_option("--eval-batches", o->run.eval_batches, "Sequential validation batches per evaluation");
  cmd->add_option("--seed", o->run.seed, "Seed of the weights, the data order and stochastic rounding");
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
