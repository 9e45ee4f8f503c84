// Plan comparison by training (compare.h; METHOD.md section 6, training truth).
#include "snip/compare.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <limits>
#include <mutex>
#include <random>
#include <system_error>
#include <thread>

#include "snip/blas_threads.h"
#include "snip/checked.h"
#include "snip/dataset.h"
#include "snip/error.h"
#include "snip/experiment_setup.h"
#include "snip/qlinear.h"
#include "snip/recipe_name.h"
#include "snip/trainer.h"

namespace snip {
namespace {

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
    m.set_quant_key(t.rounding_seed(), uint64_t(t.step_count() + i));
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

// The stochastic-rounding seed of replicate r: distinct per replicate, the same for every arm.
uint64_t rounding_seed_of(uint64_t run_seed, int replicate) {
  return run_seed ^ (0x9E3779B97F4A7C15ull * uint64_t(replicate));
}

// Means over the replicates and the gaps to the BF16 row.
void summarize(CompareReport& rep) {
  for (CompareRow& row : rep.rows) {
    const double k = double(row.replicates.size());
    row.train_loss_last = row.val_loss_plan = row.val_loss_bf16 = 0;
    row.train_curve.assign(row.replicates.front().train_curve.size(), 0.0);
    for (const CompareReplicate& r : row.replicates) {
      row.train_loss_last += r.train_loss_last / k;
      row.val_loss_plan += r.val_loss_plan / k;
      row.val_loss_bf16 += r.val_loss_bf16 / k;
      for (size_t i = 0; i < row.train_curve.size() && i < r.train_curve.size(); ++i)
        row.train_curve[i] += r.train_curve[i] / k;
    }
  }
  const CompareRow& bf16 = rep.rows[rep.bf16_row];
  for (CompareRow& r : rep.rows) {
    r.gap_train = r.train_loss_last - bf16.train_loss_last;
    r.gap_val_plan = r.val_loss_plan - bf16.val_loss_plan;
    r.gap_val_bf16 = r.val_loss_bf16 - bf16.val_loss_bf16;
  }
  const CompareRow& snip = rep.rows[rep.snip_row];
  if (snip.replicates.size() < 2) {
    rep.noise_floor_train = rep.noise_floor_val = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  auto spread = [&](double CompareReplicate::*field) {
    double lo = snip.replicates[0].*field, hi = lo;
    for (const CompareReplicate& r : snip.replicates) lo = std::min(lo, r.*field), hi = std::max(hi, r.*field);
    return hi - lo;
  };
  rep.noise_floor_train = spread(&CompareReplicate::train_loss_last);
  rep.noise_floor_val = spread(&CompareReplicate::val_loss_plan);
}

// The oracle's batches must exist; said before anything is trained.
void check_oracle_batches(const CompareOptions& o, int64_t val_batches) {
  const int64_t need = int64_t(oracle_first_batch(o)) + o.oracle_batches;
  if (need <= val_batches) return;
  if (o.oracle_disjoint)
    throw Error("compare: the oracle measures on " + std::to_string(o.oracle_batches) +
                " validation batches after the " + std::to_string(o.eval_batches) +
                " the arms are evaluated on (so no arm is judged on the batches its plan was chosen on), " +
                std::to_string(need) + " in all, but the checkpoint's data has " + std::to_string(val_batches) +
                "; lower --oracle-batches or --eval-batches");
  throw Error("compare: --oracle-batches " + std::to_string(o.oracle_batches) + " exceeds the " +
              std::to_string(val_batches) + " validation batches of the checkpoint's data; use at most that");
}

// The oracle plan: the ablation truth on the checkpoint (forward loss damage only, no
// weight-update truth: that is what a plan's ΔL costs), then the ILP on it.
PlanResult oracle_plan(const std::string& dir, const std::string& recipe, const CompareOptions& o,
                       const CostTable& like, const PlanRequest& req) {
  ExperimentSetup setup = load_experiment(dir);
  setup.model->set_recipe(Recipe::named(recipe));
  ValidateOptions vo;
  vo.batches = o.oracle_batches;
  vo.first_batch = oracle_first_batch(o);
  vo.weight_truth = false;
  vo.stats = o.stats;
  check_oracle_batches(o, setup.val_batches());
  const ValidationReport truth = run_validation(setup, vo);
  const CostTable table = oracle_cost_table(truth, like);
  PlanResult p = solve_ilp(table, req, &like);
  p.method = "oracle";
  p.notes.push_back("oracle: ILP on the measured ΔL of validation batches " + std::to_string(vo.first_batch) + "–" +
                    std::to_string(vo.first_batch + o.oracle_batches - 1) +
                    (o.oracle_disjoint ? " (after the evaluation's)" : " (overlapping the evaluation's)"));
  return p;
}

// One (arm, replicate) training to do: row index, replicate (from 1).
struct Job {
  size_t row = 0;
  int replicate = 0;
};

// A finished job, handed from a job thread to the thread that runs the compare.
struct JobDone {
  Job job;
  CompareReplicate result;
  std::exception_ptr error;
};

// Starts up to `threads` threads running worker. A thread the system refuses (a thread or memory
// limit) leaves fewer job threads, which give the same results (running counts only those
// started); none at all is an error, never std::terminate with threads left running.
std::vector<std::thread> start_job_threads(int threads, const std::function<void()>& worker, std::mutex& mu,
                                           int& running) {
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    try {
      pool.emplace_back(worker);
    } catch (const std::system_error& e) {
      {
        std::lock_guard<std::mutex> lock(mu);
        running -= threads - t;
      }
      if (pool.empty())
        throw Error(std::string("cannot start a training thread (") + e.what() +
                    "); free memory or raise the process limit, or give --jobs 1");
      break;
    }
  }
  return pool;
}

// Hands a finished job to `done`, or keeps its error: the first that is not a CompareStopped in
// first_error (an error from `done` too, which aborts the other jobs), the first CompareStopped in stopped.
void hand_over(const JobDone& d, const std::function<void(const JobDone&)>& done, std::atomic<bool>& abort,
               std::exception_ptr& first_error, std::exception_ptr& stopped) {
  if (!d.error) {
    try {
      done(d);
    } catch (...) {
      if (!first_error) first_error = std::current_exception();
      abort.store(true);
    }
    return;
  }
  try {
    std::rethrow_exception(d.error);
  } catch (const CompareStopped&) {
    if (!stopped) stopped = d.error;
  } catch (...) {
    if (!first_error) first_error = d.error;
  }
}

// Runs `jobs` on `threads` threads (each pulls the next job in order) and hands every finished
// one to `done` on the calling thread, in the order they finish. A job that throws stops the
// others after their current step; the finished ones are still handed over, then the first
// error that is not a CompareStopped (else the CompareStopped) is rethrown.
void run_jobs(const std::vector<Job>& jobs, int threads, const std::function<bool()>& stop_requested,
              const std::function<CompareReplicate(const Job&, const std::function<bool()>&)>& train,
              const std::function<void(const JobDone&)>& done) {
  std::atomic<size_t> next{0};
  std::atomic<bool> abort{false};
  std::mutex mu;
  std::condition_variable cv;
  std::vector<JobDone> finished;
  int running = threads;
  const std::function<bool()> stop = [&] { return abort.load() || (stop_requested && stop_requested()); };
  auto worker = [&] {
    while (!abort.load()) {
      const size_t i = next.fetch_add(1);
      if (i >= jobs.size()) break;
      JobDone d;
      d.job = jobs[i];
      try {
        d.result = train(d.job, stop);
      } catch (...) {
        d.error = std::current_exception();
        abort.store(true);
      }
      std::lock_guard<std::mutex> lock(mu);
      finished.push_back(std::move(d));
      cv.notify_one();
    }
    std::lock_guard<std::mutex> lock(mu);
    --running;
    cv.notify_one();
  };
  std::vector<std::thread> pool = start_job_threads(threads, worker, mu, running);
  std::exception_ptr first_error, stopped;
  for (;;) {
    std::vector<JobDone> batch;
    bool last = false;
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return !finished.empty() || running == 0; });
      batch.swap(finished);
      last = running == 0;
    }
    for (const JobDone& d : batch) hand_over(d, done, abort, first_error, stopped);
    if (last) break;
  }
  for (std::thread& t : pool) t.join();
  if (first_error) std::rethrow_exception(first_error);
  if (stopped) std::rethrow_exception(stopped);
  if (stop_requested && stop_requested() && next.load() < jobs.size()) throw CompareStopped();
}

// Trains every arm's replicates that `hooks.stored` does not have, on o.jobs threads; rows with
// an earlier row's plan are skipped (they copy its replicates). Replicate-major: with one job,
// an interrupted compare has whole replicates.
void train_arms(const std::string& dir, const CompareOptions& o, CompareReport& rep, const CompareHooks& hooks) {
  std::vector<Job> todo;
  int total = 0, done = 0;
  for (CompareRow& row : rep.rows) row.replicates.assign(size_t(o.replicates), CompareReplicate{});
  for (int r = 1; r <= o.replicates; ++r)
    for (size_t i = 0; i < rep.rows.size(); ++i) {
      CompareRow& row = rep.rows[i];
      if (!row.same_plan_as.empty()) continue;
      ++total;
      std::optional<CompareReplicate> kept = hooks.stored ? hooks.stored(row, r) : std::nullopt;
      if (kept) {
        row.replicates[size_t(r - 1)] = std::move(*kept);
        ++done;
      } else {
        todo.push_back({i, r});
      }
    }
  const CompareProgress& progress = hooks.progress;
  auto label = [&](const Job& j) {
    return rep.rows[j.row].method + " (replicate " + std::to_string(j.replicate) + "/" + std::to_string(o.replicates) +
           ")";
  };
  if (progress && done > 0) progress(done, total, "kept from the stored compare");
  // OpenBLAS's thread count is process-wide and FP32 GEMM bits may depend on it: one thread for
  // every job count, so --jobs never changes a result.
  BlasSingleThreaded single_threaded_blas;
  auto train = [&](const Job& j, const std::function<bool()>& stop) {
    return train_compare_replicate(dir, rep.start_step, rep.rows[j.row].plan, o, rep.recipe, j.replicate, stop);
  };
  auto finished = [&](const JobDone& d) {
    CompareRow& row = rep.rows[d.job.row];
    row.replicates[size_t(d.job.replicate - 1)] = d.result;
    if (hooks.on_replicate) hooks.on_replicate(row, d.job.replicate, d.result);
    if (progress) progress(++done, total, label(d.job));
  };
  const int threads = std::max(1, std::min<int>(o.jobs, int(todo.size())));
  if (hooks.executor) {
    std::vector<CompareTraining> trainings;
    for (const Job& j : todo) trainings.push_back({j.row, j.replicate});
    hooks.executor(rep, trainings, [&](size_t i, const CompareReplicate& r) {
      finished(JobDone{todo.at(i), r, nullptr});
    });
  } else if (threads <= 1) {  // on this thread, like every compare before --jobs
    for (const Job& j : todo) {
      if (hooks.stop_requested && hooks.stop_requested()) throw CompareStopped();
      JobDone d{j, train(j, hooks.stop_requested), nullptr};
      finished(d);
    }
  } else {
    run_jobs(todo, threads, hooks.stop_requested, train, finished);
  }
}

}  // namespace

CompareReplicate train_compare_replicate(const std::string& dir, int64_t start, const Plan& plan,
                                         const CompareOptions& o, const std::string& recipe, int replicate,
                                         const std::function<bool()>& stop_requested) {
  std::unique_ptr<Trainer> t = Trainer::resume(dir, start + o.steps);
  t->model().set_recipe(Recipe::named(recipe));
  t->set_rounding_seed(rounding_seed_of(t->config().seed, replicate));
  if (o.replicate_rel > 0) {
    std::mt19937_64 rng{uint64_t(replicate)};
    std::normal_distribution<double> nd(0.0, 1.0);
    float* p = t->model().param_data();
    for (int64_t i = 0; i < t->model().num_params(); ++i) p[i] = float(p[i] * (1.0 + o.replicate_rel * nd(rng)));
  }
  t->set_plan(plan);
  std::vector<double> losses;
  for (int64_t s = 0; s < o.steps; ++s) {
    if (stop_requested && stop_requested()) throw CompareStopped();
    losses.push_back(t->step().train_loss);
  }
  CompareReplicate r;
  const size_t w = std::min(losses.size(), size_t(std::max(1, o.last_window)));
  for (size_t i = losses.size() - w; i < losses.size(); ++i) r.train_loss_last += losses[i] / double(w);
  r.train_curve = std::move(losses);
  cooldown(*t, o.cooldown_steps);
  r.val_loss_plan = t->evaluate(o.eval_batches);
  const std::vector<LinearPrecision> prec = t->model().precisions();
  t->model().set_precisions(std::vector<LinearPrecision>(prec.size(), LinearPrecision::uniform(Precision::bf16)));
  r.val_loss_bf16 = t->evaluate(o.eval_batches);
  t->model().set_precisions(prec);
  return r;
}

int default_compare_jobs() {
  return std::max(1, int(std::thread::hardware_concurrency()));
}

CostTable oracle_cost_table(const ValidationReport& truth, const CostTable& like) {
  CostTable t = like;
  t.kind = "oracle";
  t.source =
      "measured ΔL, " + std::to_string(truth.batches) + " validation batches at step " + std::to_string(truth.step);
  t.has_roles = false;
  for (CostLayer& c : t.layers) {
    for (int r = 0; r < kNumRoles; ++r) c.cost[r].fill(kNaN);
    c.cost[0][int(Precision::bf16)] = 0;
    c.cost[1][int(Precision::bf16)] = 0;
    for (Precision p : {Precision::fp8, Precision::fp4}) {
      const AblationEntry* e = nullptr;
      for (const AblationEntry& x : truth.entries)
        if (x.layer == c.name && x.precision == p) e = &x;
      if (!e || !e->values.count("dl_true"))
        throw Error("oracle: the ablation truth has no " + std::string(precision_name(p)) + " entry for " + c.name);
      c.cost[0][int(p)] = e->values.at("dl_true");
      c.cost[1][int(p)] = 0;
    }
  }
  return t;
}

const std::vector<std::string>& compare_baseline_names() {
  static const std::vector<std::string> names = {"random",         "min-err",        "min-rel-err",   "hawq",
                                                 "e-layer-type",   "e-layer-id",     "uniform-fp8",   "uniform-fp4",
                                                 "fp4-fprop-only", "fp4-dgrad-only", "fp4-wgrad-only"};
  return names;
}

const std::vector<std::string>& compare_role_arm_names() {
  static const std::vector<std::string> names = {"fp4-fprop-only", "fp4-dgrad-only", "fp4-wgrad-only"};
  return names;
}

namespace {

// Whether the arm `name` ("random s2", "min-err", ...) is one of o.baselines (empty: all but the
// per-role arms).
bool baseline_selected(const CompareOptions& o, const std::string& name) {
  if (o.baselines.empty()) {
    const auto& roles = compare_role_arm_names();
    return std::find(roles.begin(), roles.end(), name) == roles.end();
  }
  const std::string family = name.rfind("random", 0) == 0 ? "random" : name;
  return std::find(o.baselines.begin(), o.baselines.end(), family) != o.baselines.end();
}

void check_baselines(const CompareOptions& o) {
  const auto& known = compare_baseline_names();
  for (const std::string& b : o.baselines)
    if (std::find(known.begin(), known.end(), b) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw Error("compare: unknown baseline '" + b + "': use some of " + list +
                  " (uniform-bf16 and the SNIP arms always run)");
    }
}

}  // namespace

int oracle_first_batch(const CompareOptions& o) {
  return o.oracle_disjoint ? o.eval_batches : 0;
}

void check_compare_options(const CompareOptions& o) {
  check_baselines(o);
  if (o.steps < 1) throw Error("compare: --steps must be at least 1");
  if (o.replicates < 1)
    throw Error("compare: --replicates must be at least 1 (3 or more give 95% intervals; 1 gives no interval)");
  if (!(o.budget >= 0 && o.budget <= 1)) throw Error("compare: --budget must be in [0, 1]");
  if (o.oracle && o.oracle_batches < 1) throw Error("compare: --oracle-batches must be at least 1");
  if (o.jobs < 1) throw Error("compare: --jobs must be at least 1");
  if (!o.recipe.empty()) parse_recipe_name(o.recipe);
}

namespace {

// Bounded set-up: the job threads' trainers and every replicate's curve, refused before any work.
void check_compare_fits(const CompareOptions& o, const Trainer& t0) {
  const size_t baselines = o.baselines.empty() ? compare_baseline_names().size() - compare_role_arm_names().size() +
                                                     size_t(std::max(0, o.random_seeds))
                                               : o.baselines.size() + size_t(std::max(0, o.random_seeds));
  const double arms = double(o.lambdas.size() + baselines + 2);
  const double trainings = arms * o.replicates;
  const double threads = std::min<double>(o.jobs, trainings);
  const double per_job =
      Trainer::memory_bytes(t0.config()) + 4.0 * double(t0.data().train.size() + t0.data().val.size());
  const double curves = trainings * double(o.steps) * 16.0;
  check_fits_in_memory(threads * per_job + curves,
                       "a compare of about " + std::to_string(int64_t(trainings)) + " trainings on " +
                           std::to_string(int64_t(threads)) + " job threads",
                       "give fewer --jobs (each holds a whole trainer), fewer --replicates or fewer --steps");
}

// Every arm is evaluated on the same --eval-batches whole validation batches; more than the split
// holds were quietly fewer (Trainer::evaluate takes what there is): refused before any work.
void check_eval_batches(const CompareOptions& o, const Trainer& t0) {
  const TrainConfig& c = t0.config();
  const int64_t available =
      int64_t(BatchLoader(&t0.data().val, c.batch_size, c.seq_len, 0, /*shuffle=*/false).batches_per_epoch());
  if (available > 0 && o.eval_batches > available)
    throw Error("compare: --eval-batches " + std::to_string(o.eval_batches) + " is more than the " +
                std::to_string(available) + " whole validation batches of " + std::to_string(c.batch_size) + "x" +
                std::to_string(c.seq_len) + " in " + t0.data().source + "; give at most " + std::to_string(available));
}

// Appends the arm `name` with plan p under the compare's recipe, noting an earlier row with the same plan.
void add_compare_row(CompareReport& rep, const std::string& name, PlanResult p, Method m, uint64_t seed,
                     std::optional<double> lambda) {
  p.plan.recipe = rep.recipe;
  CompareRow row;
  row.method = name;
  row.lambda = lambda;
  if (m == Method::random) row.seed = seed;
  row.plan = std::move(p.plan);
  row.achieved_fraction = p.achieved_fraction;
  row.notes = std::move(p.notes);
  for (const CompareRow& prev : rep.rows)
    if (prev.plan.layers == row.plan.layers) {
      row.same_plan_as = prev.method;
      break;
    }
  rep.rows.push_back(std::move(row));
}

// Every arm's plan from the statistics round, in report order.
void plan_arms(const std::string& dir, const CompareOptions& o, CompareReport& rep, const CompareHooks& hooks) {
  const CompareProgress& progress = hooks.progress;
  const StatsRound& round = rep.round;
  PlanRequest req;
  req.budget = o.budget;
  req.per_role = o.per_role;
  auto add = [&](const std::string& name, const PlannerInput& in, Method m, uint64_t seed = 1,
                 std::optional<double> lambda = std::nullopt) {
    if (m != Method::snip && m != Method::uniform_bf16 && !baseline_selected(o, name)) return;
    PlanRequest r = req;
    r.seed = seed;
    add_compare_row(rep, name, make_plan(in, m, r), m, seed, lambda);
  };
  const PlannerInput base = planner_input_from_stats(round);
  add("uniform-bf16", base, Method::uniform_bf16);
  rep.bf16_row = 0;
  bool have_ref = false;
  for (double lam : o.lambdas) {
    EstimatorOptions eo;
    eo.lambda = lam;
    char name[32];
    std::snprintf(name, sizeof name, "snip λ=%g", lam);
    if (std::abs(lam - defaults::kLambda) < 1e-12 && !have_ref) rep.snip_row = rep.rows.size(), have_ref = true;
    add(name, planner_input_from_stats(round, eo), Method::snip, 1, lam);
  }
  if (!have_ref) rep.snip_row = 1;  // no SNIP arm at the default λ: the first SNIP plan is the reference
  if (rep.snip_row >= rep.rows.size()) throw Error("compare: give at least one SNIP λ");
  for (int s = 1; s <= o.random_seeds; ++s) add("random s" + std::to_string(s), base, Method::random, uint64_t(s));
  add("min-err", base, Method::min_err);
  add("min-rel-err", base, Method::min_rel_err);
  add("hawq", base, Method::hawq);
  add("e-layer-type", base, Method::e_layer_type);
  add("e-layer-id", base, Method::e_layer_id);
  add("uniform-fp8", base, Method::uniform_fp8);
  add("uniform-fp4", base, Method::uniform_fp4);
  add("fp4-fprop-only", base, Method::fp4_fprop_only);
  add("fp4-dgrad-only", base, Method::fp4_dgrad_only);
  add("fp4-wgrad-only", base, Method::fp4_wgrad_only);
  if (o.oracle) {
    if (progress) progress(0, 0, "oracle: measuring every layer's loss damage");
    add_compare_row(rep, "oracle", oracle_plan(dir, rep.recipe, o, base.snip, req), Method::snip, 1, std::nullopt);
    rep.oracle_row = rep.rows.size() - 1;
  }
}

}  // namespace

void check_compare_setup(const std::string& checkpoint, const CompareOptions& o) {
  check_compare_options(o);
  const std::unique_ptr<Trainer> t0 = Trainer::resume(checkpoint);
  check_compare_fits(o, *t0);
  check_eval_batches(o, *t0);
}

CompareReport run_compare(const std::string& dir, const CompareOptions& o, const CompareHooks& hooks) {
  check_compare_options(o);
  std::unique_ptr<Trainer> t0 = Trainer::resume(dir);
  check_compare_fits(o, *t0);
  check_eval_batches(o, *t0);
  CompareReport rep;
  rep.start_step = t0->step_count();
  rep.budget = o.budget;
  rep.replicates = o.replicates;
  rep.recipe = parse_recipe_name(o.recipe.empty() ? t0->config().recipe : o.recipe).canonical;
  t0->model().set_recipe(Recipe::named(rep.recipe));
  StatsRoundOptions so = o.stats;
  if (so.hessian_probes == 0) so.hessian_probes = 8;  // the hawq arm's weight-Hessian traces
  so.interrupt = hooks.stop_requested;                // a stop during the round stops the compare
  try {
    rep.round = collect_stats_round(*t0, so);
  } catch (const StepInterrupted&) {
    throw CompareStopped();
  }
  t0.reset();

  plan_arms(dir, o, rep, hooks);
  if (hooks.planned) hooks.planned(rep);
  train_arms(dir, o, rep, hooks);
  for (CompareRow& row : rep.rows)
    if (!row.same_plan_as.empty())
      for (const CompareRow& prev : rep.rows)
        if (prev.method == row.same_plan_as) row.replicates = prev.replicates;
  summarize(rep);
  return rep;
}

}  // namespace snip
