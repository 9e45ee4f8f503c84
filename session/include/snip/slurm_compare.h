// A compare's trainings as one Slurm job array (`snip compare --executor slurm`). The compare
// plans its arms here, as on one machine; its trainings then run as tasks of `sbatch --array`,
// each one (arm, replicate) training by `snip compare-task` with the binary that submitted it.
//
// The work folder (on a filesystem the cluster's nodes share, beside the database) holds:
//   tasks.json          every training of the compare: the checkpoint and its fingerprint, the
//                       options a training reads, each arm's plan, and the submitting snip's
//                       version and build fingerprint. Written once; a resume must make the same.
//   task.sh             the batch script: exec snip compare-task --work DIR --task $SLURM_ARRAY_TASK_ID
//   results/N.json      training N's result, written atomically by its task (the losses' bits).
//   logs/JOB_N.{out,err} each task's output.
// Tasks never open the database: the submitting process stores each result as it arrives, as a
// local compare does, and stores every array's job id so that `snip compare --resume ID`
// re-attaches to tasks still queued or running and resubmits only the trainings without a
// result. No Qt.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "snip/compare.h"
#include "snip/store.h"

namespace snip {

// Where a compare's trainings are on Slurm, after every poll.
struct SlurmStatus {
  int queued = 0, running = 0, finished = 0;  // finished: since this process submitted or re-attached
  std::vector<std::string> trainings;         // "<arm> replicate <r>: <Slurm state>" of each one waited for
};

struct SlurmCompareOptions {
  std::string work_dir;     // the work folder (created when missing)
  std::string sbatch_args;  // extra sbatch arguments, split like a shell does (quotes kept)
  std::string snip_binary;  // the `snip` every task runs (absolute path); tasks check they are this build
  std::string snip_version;
  std::string checkpoint;              // the compare's checkpoint, as stored
  std::string checkpoint_fingerprint;  // checkpoint_fingerprint(checkpoint), as stored
  std::vector<int64_t> jobs;           // arrays submitted before (a resume re-attaches to them)
  // A new array was submitted: store its id (before any of its results is awaited).
  std::function<void(int64_t job_id)> on_submitted;
  std::function<void(const SlurmStatus&)> on_status;
  std::function<bool()> stop_requested;
  int poll_ms = 1000;
};

// The executor run_compare calls (CompareHooks::executor). Throws snip::Error, after every
// finished training is handed over, naming each training without a result and why (its Slurm
// state and the last lines of its stderr), and the command that resubmits only those.
CompareExecutor slurm_compare_executor(SlurmCompareOptions options, CompareOptions compare);

// What a front (the CLI, the GUI's compare worker) gives a compare it runs on Slurm.
struct SlurmFront {
  std::string snip_binary;  // the `snip` the tasks run (the CLI: itself; the GUI: the one beside it)
  std::string snip_version;
  std::optional<std::string> sbatch_args;  // given now: replaces the stored ones
  std::function<bool()> stop_requested;
  std::function<void(int64_t job, const std::string& work_dir)> on_submitted;  // after it is stored
  std::function<void(const SlurmStatus&)> on_status;
};

// Stored compare `compare_id`'s trainings on Slurm: its stored Slurm options (the work folder
// beside the database, the sbatch arguments, the arrays submitted before, which it re-attaches
// to), made and stored when it has none; each new array's id is stored as it is submitted.
CompareExecutor stored_slurm_executor(Store& store, int64_t compare_id, const CompareOptions& compare,
                                      SlurmFront front);
// Whether stored compare `c` runs its trainings on Slurm (a resume keeps its executor).
bool compare_runs_on_slurm(const CompareRecord& c);
// The Slurm job arrays stored compare `c` submitted, oldest first.
std::vector<int64_t> compare_slurm_jobs(const CompareRecord& c);

// The default work folder of compare `id` stored in `db_path`: "<db_path>.slurm/compare-<id>".
std::string slurm_work_dir(const std::string& db_path, int64_t id);

// The fingerprint of the running executable: "fnv1a64 <hex>" of /proc/self/exe.
std::string own_build_fingerprint();

// Runs training `task` of the work folder (`snip compare-task`): checks that this snip is the
// submitter's (version and build), that the checkpoint is the compare's (by fingerprint; the
// corpus is checked by the trainer), trains, and writes results/<task>.json atomically. Throws
// snip::Error saying what differs; CompareStopped on a stop request.
void run_compare_task(const std::string& work_dir, int task, const std::string& snip_version,
                      const std::function<bool()>& stop_requested = {});

}  // namespace snip
