// A compare's trainings as one Slurm job array (snip/slurm_compare.h).
#include "snip/slurm_compare.h"

#include <unistd.h>
#include <wordexp.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "snip/atomic_file.h"
#include "snip/blas_threads.h"
#include "snip/checked.h"
#include "snip/compare_recorder.h"
#include "snip/error.h"
#include "snip/plan.h"
#include "snip/store_export.h"

namespace snip {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kTasksFormat = "snip compare tasks 1";
constexpr const char* kResultFormat = "snip compare result 1";

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
  return buf;
}

// A double as the hex of its bits: a result crosses the filesystem without a rounding.
std::string bits_of(double v) {
  uint64_t u;
  std::memcpy(&u, &v, sizeof u);
  return hex64(u);
}

double from_bits(const json& j) {
  const std::string s = j.get<std::string>();
  if (s.size() != 16 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw Error("\"" + s + "\" is not 16 hex digits");
  const uint64_t u = std::stoull(s, nullptr, 16);
  double v;
  std::memcpy(&v, &u, sizeof v);
  return v;
}

// Runs a shell command line; its exit status and its stdout and stderr together.
std::pair<int, std::string> run_command(const std::string& command) {
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) throw Error("cannot run " + command + ": " + std::strerror(errno));
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0), out};
}

// The user's extra sbatch arguments, split as a shell splits words (no command substitution),
// each quoted again.
std::string quoted_sbatch_args(const std::string& args) {
  if (args.find_first_not_of(" \t") == std::string::npos) return "";
  wordexp_t w;
  const int rc = ::wordexp(args.c_str(), &w, WRDE_NOCMD | WRDE_UNDEF);
  if (rc != 0)
    throw Error("--sbatch-args \"" + args +
                "\" cannot be split into arguments (an unbalanced quote, a $(command) or an unset variable); "
                "give plain arguments such as --sbatch-args \"--partition=cpu --time=2:00:00\"");
  std::string out;
  for (size_t i = 0; i < w.we_wordc; ++i) {
    out += ' ';
    out += shell_quote(w.we_wordv[i]);
  }
  ::wordfree(&w);
  return out;
}

std::string fnv1a64_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path);
  uint64_t h = 0xcbf29ce484222325ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), std::streamsize(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) h = (h ^ uint8_t(buf[size_t(i)])) * 0x100000001b3ull;
  }
  return "fnv1a64 " + hex64(h);
}

std::string result_path(const std::string& work, int task) {
  return work + "/results/" + std::to_string(task) + ".json";
}

// Every training of the compare (replicate-major, as run_compare orders them) with what a task
// needs to train it: the same content whoever writes it, so a resume can check the folder's.
json tasks_json(const SlurmCompareOptions& s, const CompareOptions& o, const CompareReport& planned) {
  json j = {{"format", kTasksFormat},
            {"snip_version", s.snip_version},
            {"snip_build", fnv1a64_file(s.snip_binary)},
            {"checkpoint", s.checkpoint},
            {"checkpoint_fingerprint", s.checkpoint_fingerprint},
            {"start_step", planned.start_step},
            {"recipe", planned.recipe},
            {"steps", o.steps},
            {"replicate_rel", bits_of(o.replicate_rel)},
            {"last_window", o.last_window},
            {"cooldown_steps", o.cooldown_steps},
            {"eval_batches", o.eval_batches}};
  json plans = json::array(), tasks = json::array();
  for (size_t row = 0; row < planned.rows.size(); ++row)
    plans.push_back(
        {{"method", planned.rows[row].method}, {"plan", json::parse(plan_to_json(planned.rows[row].plan))}});
  for (int r = 1; r <= o.replicates; ++r)
    for (size_t row = 0; row < planned.rows.size(); ++row)
      if (planned.rows[row].same_plan_as.empty()) tasks.push_back({{"row", row}, {"replicate", r}});
  j["arms"] = plans;
  j["tasks"] = tasks;
  return j;
}

bool terminal(const std::string& state) {
  static const std::set<std::string> live = {"PENDING",     "RUNNING",   "CONFIGURING", "COMPLETING",
                                             "SUSPENDED",   "REQUEUED",  "RESIZING",    "REQUEUE_HOLD",
                                             "REQUEUE_FED", "SIGNALING", "STAGE_OUT",   "STOPPED"};
  return !live.count(state);
}

// Slurm's state of every task of array `job` it still knows ("" for none): task -> state.
std::map<int, std::string> array_states(int64_t job) {
  const auto [status, out] = run_command("squeue -h -r -t all -o '%i %T' -j " + std::to_string(job));
  std::map<int, std::string> states;
  if (status != 0) return states;  // "Invalid job id": the controller no longer knows the job
  std::istringstream in(out);
  std::string id, state;
  const std::string prefix = std::to_string(job) + "_";
  while (in >> id >> state)
    if (id.rfind(prefix, 0) == 0 && id.find('[') == std::string::npos)
      states[std::stoi(id.substr(prefix.size()))] = state;
  return states;
}

std::string tail_of(const std::string& path, int lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) all.push_back(l);
  std::string out;
  for (size_t i = all.size() > size_t(lines) ? all.size() - size_t(lines) : 0; i < all.size(); ++i)
    out += (out.empty() ? "" : " | ") + all[i];
  return out;
}

CompareReplicate read_result(const std::string& path, int task, const json& tasks) {
  const json j = parse_json_strict(read_file(path, 64 << 20, "a training result"), path);
  try {
    if (j.at("format") != kResultFormat || j.at("task").get<int>() != task ||
        j.at("snip_build") != tasks.at("snip_build") ||
        j.at("checkpoint_fingerprint") != tasks.at("checkpoint_fingerprint"))
      throw Error("it is the result of another training or another compare");
    CompareReplicate r;
    r.train_loss_last = from_bits(j.at("train_loss_last"));
    r.val_loss_plan = from_bits(j.at("val_loss_plan"));
    r.val_loss_bf16 = from_bits(j.at("val_loss_bf16"));
    for (const json& x : j.at("train_curve")) r.train_curve.push_back(from_bits(x));
    return r;
  } catch (const std::exception& e) {
    throw Error(path + ": not a result of this compare's training " + std::to_string(task) + " (" + e.what() +
                "); delete it and resume the compare to train it again");
  }
}

// One compare's trainings on Slurm: the folder, the submitted arrays, the wait.
class SlurmRun {
 public:
  SlurmRun(SlurmCompareOptions s, const CompareOptions& o, const CompareReport& planned)
      : s_(std::move(s)), planned_(planned), tasks_(tasks_json(s_, o, planned)) {
    prepare_folder();
    const json& list = tasks_.at("tasks");
    for (size_t i = 0; i < list.size(); ++i)
      index_[{list[i].at("row").get<size_t>(), list[i].at("replicate").get<int>()}] = int(i);
  }

  void execute(const std::vector<CompareTraining>& todo,
               const std::function<void(size_t, const CompareReplicate&)>& done);

 private:
  void prepare_folder();
  int64_t submit(const std::vector<int>& tasks);
  std::string label(int task) const {
    const json& t = tasks_.at("tasks").at(size_t(task));
    return planned_.rows.at(t.at("row").get<size_t>()).method + " replicate " +
           std::to_string(t.at("replicate").get<int>());
  }
  bool take_result(size_t k, int task, const std::function<void(size_t, const CompareReplicate&)>& done) {
    std::error_code ec;
    if (!fs::exists(result_path(s_.work_dir, task), ec)) return false;
    done(k, read_result(result_path(s_.work_dir, task), task, tasks_));
    return true;
  }

  SlurmCompareOptions s_;
  const CompareReport& planned_;
  json tasks_;
  std::map<std::pair<size_t, int>, int> index_;  // (row, replicate) -> task
};

void SlurmRun::prepare_folder() {
  const std::string& w = s_.work_dir;
  std::error_code ec;
  fs::create_directories(w + "/results", ec);
  if (!ec) fs::create_directories(w + "/logs", ec);
  if (ec) throw Error("cannot create the Slurm work folder " + w + ": " + ec.message());
  const std::string tasks_path = w + "/tasks.json";
  if (fs::exists(tasks_path, ec)) {
    const json have = parse_json_strict(read_file(tasks_path, 256 << 20, "the compare's task list"), tasks_path);
    json want = tasks_;
    if (have.value("snip_build", "") != want["snip_build"])
      throw Error(w + " holds trainings submitted by another snip build (" + have.value("snip_build", "?") +
                  "; this one is " + want["snip_build"].get<std::string>() +
                  "): their results cannot be mixed. Resume with the snip that started the compare, or start a new "
                  "compare");
    if (have != want)
      throw Error(w +
                  "/tasks.json describes other trainings than this compare's (another compare, or changed plans); "
                  "give the compare its own folder, or start a new compare");
  } else {
    write_file_atomic(tasks_path, tasks_.dump(1) + "\n");
  }
  write_file_atomic(w + "/task.sh",
                    "#!/bin/sh\n# One training of a snip compare: task $SLURM_ARRAY_TASK_ID of tasks.json.\nexec " +
                        shell_quote(s_.snip_binary) + " compare-task --work " + shell_quote(w) +
                        " --task \"$SLURM_ARRAY_TASK_ID\"\n");
}

int64_t SlurmRun::submit(const std::vector<int>& tasks) {
  std::string list;
  for (int t : tasks) {
    if (!list.empty()) list += ',';
    list += std::to_string(t);
  }
  const std::string& w = s_.work_dir;
  const std::string cmd = "sbatch --parsable --job-name=snip-compare --array=" + list +
                          " --output=" + shell_quote(w + "/logs/%A_%a.out") +
                          " --error=" + shell_quote(w + "/logs/%A_%a.err") + quoted_sbatch_args(s_.sbatch_args) + " " +
                          shell_quote(w + "/task.sh");
  const auto [status, out] = run_command(cmd);
  char* end = nullptr;
  const long long id = std::strtoll(out.c_str(), &end, 10);
  if (status != 0 || id <= 0 || end == out.c_str())
    throw Error("sbatch refused the compare's job array (exit " + std::to_string(status) + "): " + out +
                (status == 127 ? " (is Slurm's client, Debian's slurm-client, installed?)" : "") +
                "; fix the cluster or --sbatch-args, then resume the compare");
  if (s_.on_submitted) s_.on_submitted(id);
  s_.jobs.push_back(id);
  return id;
}

void SlurmRun::execute(const std::vector<CompareTraining>& todo,
                       const std::function<void(size_t, const CompareReplicate&)>& done) {
  std::map<size_t, std::pair<int, int64_t>> waiting;  // todo index -> (task, job)
  std::map<size_t, int> unseen;                       // polls that found no Slurm record of the task
  std::vector<std::string> failed;
  std::vector<int> to_submit;
  std::vector<size_t> to_submit_k;
  std::map<int64_t, std::map<int, std::string>> known;
  for (int64_t job : s_.jobs) known[job] = array_states(job);
  for (size_t k = 0; k < todo.size(); ++k) {
    const int task = index_.at({todo[k].row, todo[k].replicate});
    if (take_result(k, task, done)) continue;  // finished while no one waited
    int64_t live_job = 0;
    for (const auto& [job, states] : known)
      if (auto it = states.find(task); it != states.end() && !terminal(it->second)) live_job = job;
    if (live_job) {
      waiting[k] = {task, live_job};  // re-attach
    } else {
      to_submit.push_back(task);
      to_submit_k.push_back(k);
    }
  }
  if (!to_submit.empty()) {
    const int64_t job = submit(to_submit);
    for (size_t i = 0; i < to_submit.size(); ++i) waiting[to_submit_k[i]] = {to_submit[i], job};
  }
  int finished = 0;
  while (!waiting.empty()) {
    if (s_.stop_requested && s_.stop_requested()) throw CompareStopped();
    std::map<int64_t, std::map<int, std::string>> states;
    for (const auto& [k, tj] : waiting) states.try_emplace(tj.second, std::map<int, std::string>{});
    for (auto& [job, st] : states) st = array_states(job);
    SlurmStatus status;
    status.finished = finished;
    for (auto it = waiting.begin(); it != waiting.end();) {
      const auto [task, job] = it->second;
      if (take_result(it->first, task, done)) {
        ++finished;
        it = waiting.erase(it);
        continue;
      }
      const auto st = states[job].find(task);
      const std::string state = st == states[job].end() ? "" : st->second;
      if (!state.empty() && !terminal(state)) {
        (state == "RUNNING" || state == "COMPLETING" ? status.running : status.queued)++;
        status.trainings.push_back(label(task) + ": " + state);
        unseen.erase(it->first);
        ++it;
        continue;
      }
      if (state.empty() && ++unseen[it->first] < 3) {  // a record can lag behind sbatch: look again
        ++status.queued;
        status.trainings.push_back(label(task) + ": SUBMITTED");
        ++it;
        continue;
      }
      if (take_result(it->first, task, done)) {  // written between the first look and squeue's answer
        ++finished;
        it = waiting.erase(it);
        continue;
      }
      const std::string err = s_.work_dir + "/logs/" + std::to_string(job) + "_" + std::to_string(task) + ".err";
      const std::string tail = tail_of(err, 3);
      failed.push_back(label(task) + " (Slurm job " + std::to_string(job) + "_" + std::to_string(task) + ": " +
                       (state.empty() ? "no record: cancelled before it started, or the controller forgot it" : state) +
                       (tail.empty() ? "" : "; stderr: " + tail) + ")");
      it = waiting.erase(it);
    }
    status.finished = finished;
    if (s_.on_status) s_.on_status(status);
    if (!waiting.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(s_.poll_ms));
  }
  if (!failed.empty()) {
    std::string list;
    for (const std::string& f : failed) list += "\n  " + f;
    throw Error(std::to_string(failed.size()) + " training" + (failed.size() == 1 ? "" : "s") +
                " of the compare ended on Slurm without a result:" + list +
                "\nevery other training is stored; resume the compare to submit only these again");
  }
}

}  // namespace

bool compare_runs_on_slurm(const CompareRecord& c) {
  return c.options.contains("slurm") && c.options["slurm"].is_object();
}

std::vector<int64_t> compare_slurm_jobs(const CompareRecord& c) {
  if (!compare_runs_on_slurm(c) || !c.options["slurm"].contains("jobs")) return {};
  return c.options["slurm"]["jobs"].get<std::vector<int64_t>>();
}

CompareExecutor stored_slurm_executor(Store& store, int64_t compare_id, const CompareOptions& compare,
                                      SlurmFront front) {
  const CompareRecord c = store.compare(compare_id);
  json options = c.options;
  json& slurm = options["slurm"];
  if (!slurm.is_object()) slurm = json::object();
  if (!slurm.contains("work_dir")) slurm["work_dir"] = slurm_work_dir(store.path(), compare_id);
  if (front.sbatch_args || !slurm.contains("sbatch_args")) slurm["sbatch_args"] = front.sbatch_args.value_or("");
  if (!slurm.contains("jobs")) slurm["jobs"] = json::array();
  store.set_compare_options(compare_id, options);
  SlurmCompareOptions s;
  s.work_dir = slurm["work_dir"].get<std::string>();
  s.sbatch_args = slurm["sbatch_args"].get<std::string>();
  s.jobs = slurm["jobs"].get<std::vector<int64_t>>();
  s.snip_binary = front.snip_binary;
  s.snip_version = front.snip_version;
  s.checkpoint = c.checkpoint;
  s.checkpoint_fingerprint = c.checkpoint_fingerprint;
  s.stop_requested = front.stop_requested;
  s.on_status = front.on_status;
  s.on_submitted = [&store, compare_id, dir = s.work_dir, told = front.on_submitted](int64_t job) {
    json now = store.compare(compare_id).options;
    now["slurm"]["jobs"].push_back(job);
    store.set_compare_options(compare_id, now);
    if (told) told(job, dir);
  };
  return slurm_compare_executor(std::move(s), compare);
}

std::string slurm_work_dir(const std::string& db_path, int64_t id) {
  return fs::absolute(db_path).lexically_normal().string() + ".slurm/compare-" + std::to_string(id);
}

std::string own_build_fingerprint() {
  return fnv1a64_file("/proc/self/exe");
}

CompareExecutor slurm_compare_executor(SlurmCompareOptions options, CompareOptions compare) {
  return [options = std::move(options), compare = std::move(compare)](
             const CompareReport& planned, const std::vector<CompareTraining>& todo,
             const std::function<void(size_t, const CompareReplicate&)>& done) {
    SlurmRun run(options, compare, planned);
    run.execute(todo, done);
  };
}

void run_compare_task(const std::string& work_dir, int task, const std::string& snip_version,
                      const std::function<bool()>& stop_requested) {
  const std::string path = work_dir + "/tasks.json";
  const json t = parse_json_strict(read_file(path, 256 << 20, "the compare's task list"), path);
  if (t.value("format", "") != kTasksFormat)
    throw Error(path + " is not a snip compare's task list (its format is not \"" + kTasksFormat + "\")");
  const std::string build = own_build_fingerprint();
  if (t.at("snip_version") != snip_version || t.at("snip_build") != build)
    throw Error("this snip (version " + snip_version + ", build " + build + ") is not the one that submitted the " +
                "compare (version " + t.at("snip_version").get<std::string>() + ", build " +
                t.at("snip_build").get<std::string>() +
                "): install that same snip binary on every node, at the path the compare was submitted with");
  const json& tasks = t.at("tasks");
  if (task < 0 || size_t(task) >= tasks.size())
    throw Error("task " + std::to_string(task) + " is not a training of " + path + " (it has " +
                std::to_string(tasks.size()) + ")");
  const std::string checkpoint = t.at("checkpoint").get<std::string>();
  const std::string have = checkpoint_fingerprint(checkpoint);
  if (have != t.at("checkpoint_fingerprint"))
    throw Error("the checkpoint " + checkpoint + " on this node is " + have + ", not the compare's " +
                t.at("checkpoint_fingerprint").get<std::string>() +
                ": give every node the same copy of the checkpoint (a shared filesystem)");
  CompareOptions o;
  o.steps = t.at("steps").get<int64_t>();
  o.replicate_rel = from_bits(t.at("replicate_rel"));
  o.last_window = t.at("last_window").get<int>();
  o.cooldown_steps = t.at("cooldown_steps").get<int>();
  o.eval_batches = t.at("eval_batches").get<int>();
  const size_t row = tasks[size_t(task)].at("row").get<size_t>();
  const int replicate = tasks[size_t(task)].at("replicate").get<int>();
  const json& arm = t.at("arms").at(row);
  const Plan plan = plan_from_json(arm.at("plan").dump(), path + " arm " + arm.at("method").get<std::string>());
  BlasSingleThreaded single_threaded_blas;  // as every local compare: FP32 GEMM bits do not depend on --jobs
  const CompareReplicate r = train_compare_replicate(checkpoint, t.at("start_step").get<int64_t>(), plan, o,
                                                     t.at("recipe").get<std::string>(), replicate, stop_requested);
  json j = {{"format", kResultFormat},
            {"task", task},
            {"method", arm.at("method")},
            {"replicate", replicate},
            {"snip_build", build},
            {"checkpoint_fingerprint", have},
            {"host",
             [] {
               char h[256] = {};
               ::gethostname(h, sizeof h - 1);
               return std::string(h);
             }()},
            {"train_loss_last", bits_of(r.train_loss_last)},
            {"val_loss_plan", bits_of(r.val_loss_plan)},
            {"val_loss_bf16", bits_of(r.val_loss_bf16)}};
  json curve = json::array();
  for (double x : r.train_curve) curve.push_back(bits_of(x));
  j["train_curve"] = curve;
  write_file_atomic(result_path(work_dir, task), j.dump() + "\n");
}

}  // namespace snip
