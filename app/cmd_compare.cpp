// `snip compare`: the training truth of METHOD.md section 6 — from one checkpoint, train N steps
// under each plan at the same FP4 budget (SNIP at several λ, random, min-err, min-rel-err,
// e-layer-type, e-layer-id, uniform), every arm K times paired by replicate, and print the loss
// gaps to BF16 with 95% intervals and each arm's verdict against SNIP (snip/paired_stats.h).
// The table (with each arm's train-loss curve, its plan and the statistics round the plans came
// from) is stored in the experiment database unless --no-db: from the start, each training as it
// finishes (snip::CompareRecorder), so Ctrl-C/SIGTERM/SIGHUP leave an interrupted compare that
// `--resume ID` continues. `--jobs N` trains independent arms at once.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "command.h"
#include "compare_table.h"
#include "given_settings.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/compare.h"
#include "snip/compare_recorder.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/recorded_training.h"
#include "snip/slurm_compare.h"
#include "snip/store.h"
#include "snip/store_export.h"
#include "stop_signals.h"

namespace {

struct CompareCliOptions {
  std::string checkpoint, recipe, db;
  double budget = snip::defaults::kBudget;
  int64_t steps = snip::defaults::kCompareSteps;
  int seeds = snip::defaults::kCompareRandomSeeds, cooldown = snip::defaults::kCompareCooldown;
  int eval_batches = snip::defaults::kCompareEvalBatches, replicates = snip::defaults::kCompareReplicates;
  bool json = false, no_db = false, oracle = false, list = false, per_role = false;
  int oracle_batches = snip::defaults::kCompareOracleBatches;
  int jobs = 0;        // 0: snip::default_compare_jobs()
  int64_t resume = 0;  // compare id to continue
  std::vector<double> lambdas = snip::CompareOptions{}.lambdas;
  std::vector<std::string> baselines;
  std::string executor = "local";  // or "slurm"
  std::string sbatch_args;
};

// The options that define a compare: on --resume they come from the stored compare, and one
// given again must agree with it (CompareRecorder's settings keys are the option names).
std::vector<snip::GivenSetting> given_compare_settings(const snip::cli::OptionRules& rules,
                                                       const CompareCliOptions& o) {
  return snip::cli::given_settings({{"--budget", "/budget", o.budget},
                                    {"--steps", "/steps", o.steps},
                                    {"--recipe", "/recipe", o.recipe},
                                    {"--seeds", "/seeds", o.seeds},
                                    {"--cooldown", "/cooldown", o.cooldown},
                                    {"--eval-batches", "/eval-batches", o.eval_batches},
                                    {"--replicates", "/replicates", o.replicates},
                                    {"--oracle", "/oracle", o.oracle},
                                    {"--per-role", "/per-role", o.per_role},
                                    {"--oracle-batches", "/oracle-batches", o.oracle_batches},
                                    {"--lambdas", "/lambdas", o.lambdas},
                                    {"--baselines", "/baselines", o.baselines}},
                                   [&rules](const std::string& name) { return rules.given(name); });
}

// A resumed compare is the same compare: every given setting must equal the stored one.
void check_resume_settings(const snip::CompareRecord& c, const snip::cli::OptionRules& rules,
                           const CompareCliOptions& o) {
  std::string clashes;
  std::error_code e1, e2;
  if (rules.given("--checkpoint") &&
      std::filesystem::weakly_canonical(o.checkpoint, e1) != std::filesystem::weakly_canonical(c.checkpoint, e2))
    clashes = "--checkpoint " + o.checkpoint + " but the compare started from " + c.checkpoint;
  const nlohmann::json stored = snip::compare_settings_to_json(snip::compare_options_from_record(c));
  for (const snip::GivenSetting& g : given_compare_settings(rules, o)) {
    const nlohmann::json& have = stored.at(nlohmann::json::json_pointer(g.pointer));
    if (have == g.value || (have.is_number() && g.value.is_number() && have.get<double>() == g.value.get<double>()))
      continue;
    clashes += (clashes.empty() ? "" : "; ") + g.option + " " + g.value.dump() + " but the compare has " + have.dump();
  }
  if (!clashes.empty())
    throw snip::Error("--resume " + std::to_string(c.id) +
                      " continues the stored compare with its own settings, and the command line contradicts "
                      "them: " +
                      clashes + ". Drop these options to continue it as it was, or start a new compare");
}

std::string resume_command(const snip::Store& store, int64_t id) {
  return snip::compare_resume_command(store, id);
}

// The stored compares with their status, newest first (`snip compare --list`).
void list_compares(const snip::Store& store) {
  std::printf("%5s  %-11s  %6s  %6s  %3s  %5s  %s\n", "ID", "STATUS", "BUDGET", "STEPS", "K", "ARMS", "CHECKPOINT");
  for (const auto& c : store.list_compares()) {
    std::printf("%5lld  %-11s  %6.3f  %6lld  %3lld  %5lld  %s\n", (long long)c.id, snip::run_status_name(c.status),
                c.budget, (long long)c.steps, (long long)c.replicates, (long long)c.row_count,
                snip::printable_text(c.checkpoint).c_str());
    if (c.status != snip::RunStatus::finished && !c.status_message.empty())
      std::printf("       %s\n", snip::printable_text(c.status_message).c_str());
  }
}

snip::CompareOptions compare_options(const CompareCliOptions& o) {
  snip::CompareOptions co;
  co.budget = o.budget;
  co.steps = o.steps;
  co.recipe = o.recipe;
  co.random_seeds = o.seeds;
  co.lambdas = o.lambdas;
  co.baselines = o.baselines;
  co.cooldown_steps = o.cooldown;
  co.eval_batches = o.eval_batches;
  co.replicates = o.replicates;
  co.oracle = o.oracle;
  co.per_role = o.per_role;
  co.oracle_batches = o.oracle_batches;
  co.jobs = o.jobs > 0 ? o.jobs : snip::default_compare_jobs();
  return co;
}

void print_report(const std::string& checkpoint, const snip::CompareOptions& co, const snip::CompareReport& rep,
                  std::optional<int64_t> compare_id, const std::string& db_path, bool json) {
  const std::vector<snip::ArmStatistics> stats =
      snip::cli::compare_row_statistics(rep.rows, rep.bf16_row, rep.snip_row);
  if (json) {
    nlohmann::json j = {{"checkpoint", checkpoint},
                        {"start_step", rep.start_step},
                        {"budget", rep.budget},
                        {"steps", co.steps},
                        {"recipe", rep.recipe},
                        {"replicates", rep.replicates},
                        {"snip_reference", rep.rows[rep.snip_row].method},
                        {"noise_floor_train", snip::cli::num_or_null(rep.noise_floor_train)},
                        {"noise_floor_val", snip::cli::num_or_null(rep.noise_floor_val)}};
    j["compare_id"] = compare_id ? nlohmann::json(*compare_id) : nlohmann::json(nullptr);
    j["regret_vs_oracle"] = snip::cli::regret_json(rep.rows, stats, rep.snip_row);
    j["rows"] = nlohmann::json::array();
    for (size_t i = 0; i < rep.rows.size(); ++i) {
      j["rows"].push_back(snip::cli::compare_row_json(rep.rows[i], stats[i], i == rep.snip_row));
      j["rows"].back()["notes"] = rep.rows[i].notes;
    }
    std::cout << snip::cli::json_text(j, 2) << "\n";
    return;
  }
  std::printf("compare: %s from step %lld, %lld steps per plan, %d replicate%s, budget %.3f, recipe %s\n",
              checkpoint.c_str(), (long long)rep.start_step, (long long)co.steps, rep.replicates,
              rep.replicates == 1 ? "" : "s", rep.budget, rep.recipe.c_str());
  snip::cli::print_compare_rows(rep.rows, stats, rep.snip_row);
  snip::cli::print_compare_notes(rep.rows, stats, rep.snip_row);
  if (compare_id)
    std::printf("stored compare %lld in %s (snip show --compare %lld)\n", (long long)*compare_id, db_path.c_str(),
                (long long)*compare_id);
}

// The compare's trainings as a Slurm job array (snip/slurm_compare.h): a new compare's folder
// beside the database, or the stored one of a resumed compare, whose arrays it re-attaches to.
snip::CompareExecutor slurm_executor(snip::Store& store, snip::CompareRecorder& rec, const CompareCliOptions& o,
                                     const snip::cli::OptionRules& rules, snip::cli::StopSignals& signals) {
  snip::SlurmFront f;
  std::error_code ec;
  f.snip_binary = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  f.snip_version = SNIP_VERSION;
  if (rules.given("--sbatch-args")) f.sbatch_args = o.sbatch_args;
  f.stop_requested = [&signals] { return signals.requested(); };
  const std::vector<int64_t> jobs = snip::compare_slurm_jobs(store.compare(rec.id()));
  if (!o.json && !jobs.empty()) {
    std::string list;
    for (int64_t j : jobs) {
      if (!list.empty()) list += ", ";
      list += std::to_string(j);
    }
    std::fprintf(stderr, "re-attaching to Slurm job array%s %s\n", jobs.size() == 1 ? "" : "s", list.c_str());
  }
  if (!o.json) {
    f.on_submitted = [](int64_t job, const std::string& dir) {
      std::fprintf(stderr, "submitted Slurm job array %lld; its tasks write into %s\n", (long long)job, dir.c_str());
    };
    f.on_status = [last = std::string()](const snip::SlurmStatus& st) mutable {
      const std::string now = std::to_string(st.queued) + " queued, " + std::to_string(st.running) + " running";
      if (now == last) return;
      last = now;
      std::fprintf(stderr, "\n  on Slurm: %s, %d finished since the submission", now.c_str(), st.finished);
    };
  }
  return snip::stored_slurm_executor(store, rec.id(), rec.options(), std::move(f));
}

void run_compare_cmd(const CompareCliOptions& o, const snip::cli::OptionRules& rules) {
  const std::string db_path = o.db.empty() ? snip::cli::default_db_path() : o.db;
  if (o.list) {
    list_compares(snip::Store(db_path, {.create = o.db.empty(), .read_only_if_unwritable = true}));
    return;
  }
  int done = 0, total = 0;
  snip::cli::StopSignals signals;  // Ctrl-C, SIGTERM, SIGHUP: stop after the current step
  snip::CompareHooks hooks;
  hooks.stop_requested = [&signals] { return signals.requested(); };
  hooks.progress = [&](int d, int t, const std::string& m) {
    done = d, total = t;
    if (!o.json) std::fprintf(stderr, "\r[%d/%d] %-60s", d, t, m.c_str());
    std::fflush(stderr);
  };
  auto end_progress = [&] {
    if (!o.json) std::fprintf(stderr, "\n");
  };
  if (o.no_db) {
    const snip::CompareOptions co = compare_options(o);
    snip::CompareReport rep;
    signals.set_up_done();  // the compare's own loop asks for a stop between its trainings
    try {
      rep = snip::run_compare(o.checkpoint, co, hooks);
    } catch (const snip::CompareStopped&) {
      end_progress();
      throw snip::cli::Interrupted{"compare stopped by " + signals.name() + " after " + std::to_string(done) + " of " +
                                       std::to_string(total) +
                                       " trainings; with --no-db nothing was kept (without it, an "
                                       "interrupted compare is stored and resumable)",
                                   signals.exit_status()};
    }
    end_progress();
    print_report(o.checkpoint, co, rep, std::nullopt, "", o.json);
    return;
  }
  snip::Store store(db_path,
                    {.create = o.resume == 0, .check_integrity = true});  // a resume needs the compare's database
  std::unique_ptr<snip::CompareRecorder> recorder;
  if (o.resume) {
    check_resume_settings(store.compare(o.resume), rules, o);
    recorder = snip::CompareRecorder::resume(store, o.resume, o.jobs > 0 ? o.jobs : snip::default_compare_jobs());
    if (!o.json)
      std::fprintf(stderr, "resuming compare %lld: trainings kept: %zu; the rest is trained now\n", (long long)o.resume,
                   recorder->stored_trainings());
  } else {
    recorder = std::make_unique<snip::CompareRecorder>(store, o.checkpoint, compare_options(o));
  }
  const int64_t id = recorder->id();
  // The id, before any training: the handle a resume needs (and the sign that Ctrl-C now stops cleanly).
  std::fprintf(stderr,
               "compare %lld: each finished training is stored in %s as it comes; if stopped, continue with: %s\n",
               (long long)id, store.path().c_str(), resume_command(store, id).c_str());
  const bool on_slurm =
      rules.given("--executor") ? o.executor == "slurm" : snip::compare_runs_on_slurm(store.compare(id));
  if (on_slurm) hooks.executor = slurm_executor(store, *recorder, o, rules, signals);
  signals.set_up_done();  // from here the compare's own loop asks for a stop between its trainings
  snip::CompareReport rep;
  try {
    rep = recorder->run(hooks);
  } catch (const snip::CompareStopped&) {
    end_progress();
    const std::string how = signals.name().empty() ? std::string("request") : signals.name();
    store.set_compare_status(id, snip::RunStatus::interrupted,
                             "stopped by " + how + "; continue it with: " + resume_command(store, id));
    const std::string kept =
        done == 0 ? " before its first training finished (nothing trained yet"
                  : " after " + std::to_string(done) + " of " + std::to_string(total) + " trainings (those are kept";
    throw snip::cli::Interrupted{"compare " + std::to_string(id) + " stopped by " + how + kept + " in " + store.path() +
                                     "); continue it with: " + resume_command(store, id),
                                 signals.exit_status()};
  } catch (const std::exception&) {
    end_progress();
    throw;  // marked failed; its finished trainings are kept (snip compare --resume continues it)
  }
  end_progress();
  print_report(o.resume ? recorder->checkpoint() : o.checkpoint, recorder->options(), rep, id, store.path(), o.json);
}

// What to compare from and how: the checkpoint (or a compare to resume), jobs, budget, steps, recipe, replicates.
void add_compare_run_options(CLI::App* cmd, CompareCliOptions& o) {
  cmd->add_option("--checkpoint", o.checkpoint, "Training checkpoint directory (snip train --out)");
  cmd->add_option("--resume", o.resume,
                  "Continue the interrupted compare with this id (snip compare --list) with its stored options: "
                  "only the trainings it has not stored are run, and the result is the uninterrupted compare's");
  cmd->add_flag("--list", o.list, "List the stored compares with their status (running, interrupted, ...)");
  cmd->add_option("--jobs", o.jobs,
                  "Trainings run at once (default: one per hardware thread; each runs its GEMMs on one thread, "
                  "so the results are the same for every --jobs)");
  cmd->add_option("--executor", o.executor,
                  "Where the trainings run: local (this machine, --jobs at once) or slurm (one Slurm job array, a "
                  "task per training, in a work folder beside the database; see docs/CLUSTER.md). A resumed "
                  "compare keeps its executor")
      ->check(CLI::IsMember({"local", "slurm"}));
  cmd->add_option("--sbatch-args", o.sbatch_args,
                  "Extra sbatch arguments for --executor slurm, e.g. \"--partition=cpu --time=2:00:00\"");
  cmd->add_option("--budget", o.budget, "FP4 FLOP fraction rho of every plan")->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--steps", o.steps, "Training steps per plan")->check(CLI::Range(int64_t(1), int64_t(1000000)));
  cmd->add_option("--recipe", o.recipe,
                  "Scaling recipe: snip (tiles), mx (E8M0 1x32), nvfp4, tensor (per-tensor, harsh), or a granularity "
                  "between them: block:N (FP32 scale per 1xN block along the reduction), block:row, channel; "
                  "append :sr for stochastic rounding of FP4 gradients; default: the run's");
  cmd->add_option("--replicates", o.replicates,
                  "Trainings per arm (K): replicate r of every arm starts from the checkpoint's weights perturbed "
                  "by a relative 1e-4 (seed r) with its own stochastic-rounding seed, so arms are paired by r; "
                  "K >= 2 gives 95% Student-t intervals and verdicts, K = 1 no interval");
}

// Which arms (the oracle, SNIP's lambdas, the baselines and their seeds), how they are judged, and
// where the table goes (--db, --no-db, --json).
void add_compare_arm_options(CLI::App* cmd, CompareCliOptions& o) {
  cmd->add_flag("--per-role", o.per_role,
                "SNIP and the cost-based baselines choose fprop and the backward GEMMs (dgrad, wgrad) of each layer "
                "separately, as `snip solve --per-role` (FLOPs split 1/3 : 2/3); compare with the per-role arms");
  cmd->add_flag("--oracle", o.oracle,
                "Add an oracle arm: the same ILP on the measured per-layer loss damage (snip validate's dl_true) "
                "on this checkpoint, and report SNIP's regret to it (paired, with interval)");
  cmd->add_option("--oracle-batches", o.oracle_batches,
                  "Validation batches the oracle's measured damage is averaged over (default 32: one batch's "
                  "damage is dominated by a first-order term whose sign varies by batch; n batches shrink it "
                  "by sqrt(n)); they are the batches after the --eval-batches ones, so no arm is judged on the "
                  "batches the oracle's plan was chosen on");
  cmd->add_option("--lambdas", o.lambdas,
                  "SNIP's quality weights lambda, one arm each, comma-separated (default 0,0.1,0.3,1); the "
                  "reference every verdict is against is lambda 0.1 when listed, else the first")
      ->delimiter(',')
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  cmd->add_option("--baselines", o.baselines,
                  "Baseline arms to train, comma-separated, from random, min-err, min-rel-err, hawq, e-layer-type, "
                  "e-layer-id, uniform-fp8, uniform-fp4 (default: these), and the per-role arms fp4-fprop-only, "
                  "fp4-dgrad-only, fp4-wgrad-only (FP4 in one GEMM role, FP8 in the others; only when named); "
                  "uniform-bf16 and SNIP always run")
      ->delimiter(',');
  cmd->add_option("--seeds", o.seeds, "Seeds of the random baseline")->check(CLI::Range(0, 100));
  cmd->add_option("--cooldown", o.cooldown, "LR cooldown steps before the validation loss")
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--eval-batches", o.eval_batches, "Validation batches")->check(CLI::Range(1, 100000));
  cmd->add_option("--db", o.db, "Experiment database to store the table in (default: the user's workbench database)");
  cmd->add_flag("--no-db", o.no_db, "Do not store the table in a database");
  cmd->add_flag("--json", o.json, "Print one JSON object");
}

std::shared_ptr<snip::cli::OptionRules> compare_rules(CLI::App* cmd, const std::shared_ptr<CompareCliOptions>& opts) {
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->excludes("--db", "--no-db", "--no-db stores nothing; drop one of them");
  rules->excludes("--resume", "--no-db", "a resumed compare is read from and stored in the database; drop --no-db");
  rules->excludes("--resume", "--list", "--list only lists; drop one of them");
  rules->at_least<int64_t>("--resume", opts->resume, 1, "a compare id from snip compare --list");
  rules->at_least<int>("--jobs", opts->jobs, 1, "leave it out for one job per hardware thread");
  rules->ignored_unless("--sbatch-args", {"--executor", "--resume"}, "they are passed to Slurm's sbatch");
  rules->excludes("--list", "--no-db", "--list shows the compares stored in a database; give --db or neither");
  rules->excludes("--list", "--checkpoint", "--list shows every stored compare; drop --checkpoint");
  rules->ignored_unless("--oracle-batches", {"--oracle", "--resume"}, "they are the batches the oracle arm plans on");
  rules->add([opts, r = rules.get(), cmd] {
    if (opts->executor == "slurm" && opts->no_db)
      throw snip::Error(
          "--executor slurm stores each training as it arrives and the job ids a resume needs; "
          "drop --no-db");
    if (opts->executor == "local" && r->given("--executor") && r->given("--sbatch-args"))
      snip::cli::OptionRules::warn("--sbatch-args is ignored with --executor local: nothing is submitted to Slurm");
    if (opts->executor == "slurm" && r->given("--jobs"))
      snip::cli::OptionRules::warn("--jobs is ignored with --executor slurm: Slurm decides how many tasks run at once");
    if (!opts->list && opts->resume == 0 && !r->given("--checkpoint"))
      throw snip::Error("compare: give --checkpoint DIR (a new compare), --resume ID (continue one) or --list");
    if (opts->list)
      for (const CLI::Option* opt : cmd->get_options()) {
        const std::string name = opt->get_lnames().empty() ? "" : "--" + opt->get_lnames().front();
        if (opt->count() > 0 && name != "--list" && name != "--db" && name != "--help")
          snip::cli::OptionRules::warn(name + " is ignored with --list (it only lists the stored compares)");
      }
    if (r->given("--baselines")) {
      bool random = false;
      for (const std::string& b : opts->baselines) random = random || b == "random";
      if (r->given("--seeds") && !random)
        snip::cli::OptionRules::warn("--seeds is ignored: --baselines leaves out random, the only arm it seeds");
      if (random && opts->seeds == 0)
        throw snip::Error("--seeds 0 with --baselines random trains no random arm; give --seeds 1 or more");
    }
  });
  return rules;
}

void setup_compare(CLI::App& app) {
  auto opts = std::make_shared<CompareCliOptions>();
  auto* cmd = app.add_subcommand("compare",
                                 "Training truth: from one checkpoint train N steps under SNIP and every baseline plan "
                                 "at the same FP4 budget, every arm K times (paired replicates), and report loss gaps "
                                 "to BF16 with 95% intervals and each plan's verdict against SNIP");
  add_compare_run_options(cmd, *opts);
  add_compare_arm_options(cmd, *opts);
  auto rules = compare_rules(cmd, opts);
  snip::cli::run_checked(cmd, rules, [opts, rules] { run_compare_cmd(*opts, *rules); });
}
SNIP_REGISTER_COMMAND("compare", setup_compare);

// `snip compare-task`: one training of a compare on Slurm, run by its array task (task.sh).
void setup_compare_task(CLI::App& app) {
  auto work = std::make_shared<std::string>();
  auto task = std::make_shared<int>(-1);
  auto* cmd = app.add_subcommand("compare-task",
                                 "One training of a compare run with --executor slurm (started by its Slurm task; "
                                 "writes its result into the work folder, never a database)");
  cmd->group("");  // not for people: the job array runs it
  cmd->add_option("--work", *work, "The compare's work folder (holds tasks.json)")->required();
  cmd->add_option("--task", *task, "The training's index in tasks.json (SLURM_ARRAY_TASK_ID)")->required();
  auto rules = std::make_shared<snip::cli::OptionRules>(cmd);
  rules->at_least<int>("--task", *task, 0, "SLURM_ARRAY_TASK_ID, an index into the folder's tasks.json");
  snip::cli::run_checked(cmd, rules, [work, task] {
    snip::cli::StopSignals signals;  // scancel's SIGTERM: stop, leave no result
    signals.set_up_done();
    try {
      snip::run_compare_task(*work, *task, SNIP_VERSION, [&signals] { return signals.requested(); });
    } catch (const snip::CompareStopped&) {
      throw snip::cli::Interrupted{
          "training " + std::to_string(*task) + " stopped by " + signals.name() + "; it left no result",
          signals.exit_status()};
    }
  });
}
SNIP_REGISTER_COMMAND("compare-task", setup_compare_task);

}  // namespace
