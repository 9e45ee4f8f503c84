// Checkpoint directories a Hugging Face user recognizes:
//   config.json           the model config (HF names)
//   model.safetensors     FP32 weights, HF tensor names (model.embed_tokens.weight, ...)
//   optimizer.safetensors AdamW moments: "exp_avg.<name>" and "exp_avg_sq.<name>" for every weight
//   trainer_state.json    step, data position, RNG state, current plan, recipe, hyper-parameters
// The directory is written as a whole into a temporary sibling and swapped in atomically, so a
// reader (or a crash) sees the previous checkpoint or the new one, never a mix.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

#include "snip/llama.h"
#include "snip/optimizer.h"

namespace snip {

// Weights only (e.g. for `snip eval` or --grads-out): HF names.
std::string write_model_weights(const std::string& path, const Llama& model);  // returns the data checksum
// Reads and checks every tensor's name and shape against the model's config. Throws snip::Error
// naming the file, tensor and both shapes. lm_head.weight may be absent when tied.
void read_model_weights(const std::string& path, Llama& model);
// Gradients of every parameter with HF names (what `snip eval --grads-out` writes).
void write_model_grads(const std::string& path, const Llama& model);

// Writes a complete checkpoint directory atomically (temp dir + fsync + swap). Only a missing
// path, an empty directory or a snip checkpoint (is_snip_checkpoint) is ever replaced: anything
// else at `dir` is left as it is and snip::Error says what is there. A symbolic link at `dir` is
// followed (the directory it points to is replaced; the link stays).
void write_checkpoint(const std::string& dir, const Llama& model, const AdamW<float>& opt,
                      const nlohmann::json& trainer_state);
// True when `dir` is a directory holding a snip checkpoint and nothing else: config.json,
// model.safetensors, trainer_state.json (a JSON object with step, config and data) and
// optionally optimizer.safetensors. Else false, and `why_not` (when given) says what is there.
// `state`: dir's trainer_state.json as the caller already read it (not parsed again).
bool is_snip_checkpoint(const std::string& dir, std::string* why_not = nullptr, const nlohmann::json* state = nullptr);

// What a run's checkpoint location may replace (check_checkpoint_target).
struct CheckpointTargetOptions {
  bool overwrite = false;    // another run's snip checkpoint may be replaced (`snip train --overwrite`)
  std::string resumed_from;  // the checkpoint this run continues from: it may be replaced
  const nlohmann::json* resumed_state = nullptr;  // its trainer state as the resume read it (not parsed again)
  std::string db_path;                            // the run's experiment database: a folder holding it is never used
  bool per_step = false;  // `dir` holds step-<N> checkpoints (the GUI's layout), not one checkpoint
};

// Holds `<dir>.lock` (an flock, with the owner's pid in the file) while alive, so a second run
// with the same checkpoint location is refused. The kernel drops the lock when the owner dies,
// so a lock file left by a killed run is taken over. Move-only; releasing removes the file.
class CheckpointLock {
 public:
  CheckpointLock() = default;
  CheckpointLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  CheckpointLock(CheckpointLock&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }
  CheckpointLock& operator=(CheckpointLock&& o) noexcept;
  CheckpointLock(const CheckpointLock&) = delete;
  CheckpointLock& operator=(const CheckpointLock&) = delete;
  ~CheckpointLock() { release(); }
  void release();
  bool held() const { return fd_ >= 0; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// The pre-flight of a checkpoint location, called before step 1 by every front that trains
// (snip train, the GUI's worker): refuses, with what is there and what to do,
//   - "", ".", "..", "/" and a path whose parent cannot be made a folder (a file in the way);
//   - an existing regular file, device, FIFO, ... (only folders hold checkpoints);
//   - a folder holding `options.db_path`, or anything that is not a snip checkpoint
//     (per_step: anything but step-<N> checkpoints), so nothing of the user's is replaced;
//   - a snip checkpoint of another run, unless it is options.resumed_from or options.overwrite;
//   - a location another live run holds (its lock), or where the checkpoint cannot be written
//     (read-only, name too long: a probe directory is created and removed beside it).
// Returns the lock on the location; keep it until the run's last checkpoint is saved.
[[nodiscard]] CheckpointLock check_checkpoint_target(const std::string& dir, const CheckpointTargetOptions& options);

// The pre-flight of a folder another writer fills (`snip export --to tensorboard --out DIR`):
// refuses a folder that is, or lies inside, a snip checkpoint (the run's next save would refuse
// the foreign files and end with no checkpoint), a folder a live run holds (its lock, for it or
// any folder above it), and a name SQLite reserves (sqlite_conflict). Returns the folder's lock,
// which keeps a run from starting there while the files are written.
[[nodiscard]] CheckpointLock claim_output_folder(const std::string& dir);

// Loads the parts of a checkpoint; each throws snip::Error naming what is missing or wrong.
ModelConfig read_checkpoint_config(const std::string& dir, const nlohmann::json* state = nullptr);
// The key under which save_checkpoint records the CRC-32 of trainer_state.json's other contents;
// read_trainer_state verifies it (and returns the state without it).
inline constexpr const char* kStateChecksumKey = "snip_crc32";
// The key under which trainer_state.json names the data checksums of the checkpoint's
// safetensors files (kDataChecksumKey of each), verified by read_trainer_state.
inline constexpr const char* kCheckpointFilesKey = "snip_files";
nlohmann::json read_trainer_state(const std::string& dir);
// The same, refusing a file that is not a snip trainer state (no config, step or data position):
// what every reader that resumes or continues a run needs, checked before it loads anything else.
nlohmann::json read_run_state(const std::string& dir);
void read_checkpoint_model(const std::string& dir, Llama& model);
void read_checkpoint_optimizer(const std::string& dir, const Llama& model, AdamW<float>& opt);

}  // namespace snip
