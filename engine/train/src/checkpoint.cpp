// Checkpoint directories: writing them atomically (temp dir, fsync, swap) and reading every
// part back with shape checks against the config (checkpoint.h).
#include "snip/checkpoint.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <vector>

#include "snip/atomic_file.h"
#include "snip/checked.h"
#include "snip/error.h"
#include "snip/safetensors.h"

namespace snip {

namespace {

// `state` with kStateChecksumKey set to the CRC-32 of the rest (its compact dump, keys sorted).
nlohmann::json with_state_checksum(nlohmann::json state) {
  state.erase(kStateChecksumKey);
  const std::string text = state.dump();
  char buf[16];
  std::snprintf(
      buf, sizeof buf, "%08lx",
      (unsigned long)(crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(text.data()), uInt(text.size())) &
                      0xffffffffu));
  state[kStateChecksumKey] = buf;
  return state;
}

}  // namespace
namespace fs = std::filesystem;

namespace {

std::vector<TensorRef> tensor_refs(const Llama& model, const float* base, const std::string& prefix) {
  std::vector<TensorRef> refs;
  for (const auto& t : model.param_tensors()) refs.push_back({prefix + t.name, t.shape, base + t.offset});
  return refs;
}

// With tie_word_embeddings the output layer is the embedding; an lm_head.weight stored next to
// it (HF writes one) is dropped. Dropping it is right only when it is a copy: a distinct output
// layer would silently become another model, so it is refused.
void check_tied_copy(const SafetensorsFile& f, const std::string& path, const Llama& model, const float* base,
                     const std::string& prefix) {
  for (const auto& t : model.param_tensors()) {
    if (t.name != "model.embed_tokens.weight") continue;
    size_t n = 1;
    for (auto d : t.shape) n *= size_t(d);
    std::vector<float> head(n);
    try {
      f.read_f32(prefix + "lm_head.weight", head.data(), t.shape);
    } catch (const Error& e) {
      throw Error(std::string(e.what()) +
                  " (config.json says tie_word_embeddings = true, so lm_head.weight must be a "
                  "copy of model.embed_tokens.weight)");
    }
    if (std::memcmp(head.data(), base + t.offset, n * sizeof(float)) != 0)
      throw Error(path +
                  ": lm_head.weight differs from model.embed_tokens.weight but config.json says "
                  "tie_word_embeddings = true, so the output layer would be silently replaced by the "
                  "embedding; set tie_word_embeddings to false in config.json to keep the trained lm_head");
  }
}

void read_tensors(const std::string& path, const Llama& model, float* base, const std::string& prefix) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  for (const auto& t : model.param_tensors()) {
    const std::string name = prefix + t.name;
    if (!f.has(name))
      throw Error(path + ": tensor " + name + " is missing — was the checkpoint saved with another config?");
    f.read_f32(name, base + t.offset, t.shape);
  }
  for (const auto& name : f.names()) {
    if (name.rfind(prefix, 0) == 0 && model.find_param(name.substr(prefix.size()))) continue;
    if (name == prefix + "lm_head.weight" && model.config().tie_word_embeddings) {
      check_tied_copy(f, path, model, base, prefix);  // tied: the copy may go only if it is the embedding
      continue;
    }
    throw Error(path + ": unexpected tensor " + name + " — the config does not have it (another model shape?)");
  }
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

}  // namespace

std::string write_model_weights(const std::string& path, const Llama& model) {
  return write_safetensors(path, tensor_refs(model, model.param_data(), ""), {{"format", "pt"}});
}

void write_model_grads(const std::string& path, const Llama& model) {
  write_safetensors(path, tensor_refs(model, model.grad_data(), ""), {{"format", "pt"}, {"content", "gradients"}});
}

void read_model_weights(const std::string& path, Llama& model) {
  read_tensors(path, model, model.param_data(), "");
}

// A process killed while saving leaves `<name>.tmp-<pid>` (a partial checkpoint) behind;
// remove those whose process is gone. `.old-<pid>` directories are left alone: one may hold
// the only copy of the previous checkpoint if the kill came in the middle of the fallback swap.
// Only what a save left is removed: a folder holding nothing but checkpoint files, and not all of
// them (a complete one may be a copy someone keeps, or the only copy of a state).
static bool only_checkpoint_parts(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return false;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    bool ours = false;
    for (const char* f : {"config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"})
      ours |= name == f || name.rfind(std::string(f) + ".tmp.", 0) == 0;
    if (!ours) return false;
  }
  return !ec;
}

// What may be swapped out and removed: a snip checkpoint or an empty folder (never the user's files).
static bool replaceable(const std::string& dir, std::string* why_not) {
  std::error_code ec;
  if (fs::is_directory(fs::symlink_status(dir, ec)) && fs::is_empty(dir, ec) && !ec) return true;
  return is_snip_checkpoint(dir, why_not);
}

static void remove_stale_temp_dirs(const fs::path& parent, const std::string& name) {
  std::error_code ec;
  const std::string prefix = name + ".tmp-";
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string entry = it->path().filename().string();
    if (entry.rfind(prefix, 0) != 0) continue;
    const std::string digits = entry.substr(prefix.size());
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid <= 0 || pid == ::getpid()) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;  // still alive (or not ours)
    if (!only_checkpoint_parts(it->path())) continue;
    if (is_snip_checkpoint(it->path().string())) continue;  // complete: maybe the only copy of a state; kept
    std::error_code rm;
    fs::remove_all(it->path(), rm);
  }
}

// dir_in without trailing slashes; a symbolic link's target (the folder it names is replaced; the link stays).
static std::string resolved_checkpoint_dir(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code link_ec;
  if (fs::is_symlink(dir, link_ec)) {
    const fs::path real = fs::canonical(dir, link_ec);
    if (!link_ec) dir = real.string();
  }
  return dir;
}

// The checkpoint's four files in tmp, the state last (it names the others' checksums).
static void write_checkpoint_files(const std::string& tmp, const Llama& model, const AdamW<float>& opt,
                                   const nlohmann::json& trainer_state) {
  write_config_file(tmp + "/config.json", model.config());
  const std::string model_crc = write_model_weights(tmp + "/model.safetensors", model);
  std::vector<TensorRef> moments = tensor_refs(model, opt.m(), "exp_avg.");
  for (auto& r : tensor_refs(model, opt.v(), "exp_avg_sq.")) moments.push_back(r);
  const std::string optimizer_crc = write_safetensors(tmp + "/optimizer.safetensors", moments,
                                                      {{"optimizer", "AdamW"}, {"t", std::to_string(opt.t())}});
  // The state names its files' checksums, under its own: the files of one checkpoint vouch for
  // each other, so removing or renaming one file's checksum key does not pass unnoticed.
  nlohmann::json state = trainer_state;
  state[kCheckpointFilesKey] = {{"model.safetensors", model_crc}, {"optimizer.safetensors", optimizer_crc}};
  write_file_atomic(tmp + "/trainer_state.json", with_state_checksum(state).dump(2) + "\n");
  fsync_dir(tmp);
}

// Swap the finished directory tmp in at dir: atomically exchange with an existing one (Linux
// renameat2 RENAME_EXCHANGE), else rename aside and in.
static void swap_in_checkpoint(const std::string& tmp, const std::string& dir,
                               const std::function<Error(const std::string&)>& failed, std::string& why_not) {
  std::error_code ec;
  if (fs::exists(fs::path(dir))) {
    if (::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) {
      // `tmp` now holds what was at `dir`: removed only if it is still a checkpoint (something
      // else may have been put there since the check above: swap back and keep it).
      if (!replaceable(tmp, &why_not)) {
        ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE);
        throw Error("cannot save checkpoint " + dir + ": " + dir +
                    " changed while saving and is not a snip checkpoint (" + why_not +
                    "); it was left as it is, the new checkpoint is in " + tmp);
      }
      fs::remove_all(tmp, ec);
    } else {
      const std::string old = dir + ".old-" + std::to_string(::getpid());
      fs::remove_all(old, ec);
      if (::rename(dir.c_str(), old.c_str()) != 0) {
        const int e = errno;
        fs::remove_all(tmp, ec);
        throw failed(std::string("cannot replace it: ") + std::strerror(e));
      }
      if (::rename(tmp.c_str(), dir.c_str()) != 0) {
        const int e = errno;
        ::rename(old.c_str(), dir.c_str());  // put the previous checkpoint back
        fs::remove_all(tmp, ec);
        throw failed(std::string("cannot replace it: ") + std::strerror(e));
      }
      if (replaceable(old, nullptr)) fs::remove_all(old, ec);
    }
  } else if (::rename(tmp.c_str(), dir.c_str()) != 0) {
    const int e = errno;
    fs::remove_all(tmp, ec);
    throw failed(std::string("cannot rename ") + tmp + " to it: " + std::strerror(e));
  }
}

void write_checkpoint(const std::string& dir_in, const Llama& model, const AdamW<float>& opt,
                      const nlohmann::json& trainer_state) {
  const std::string dir = resolved_checkpoint_dir(dir_in);
  const fs::path target(dir);
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  // Every failure names the checkpoint, the cause and what was kept (disk full, read-only, ...).
  const bool had_previous = fs::exists(target, ec);
  const auto failed = [&](const std::string& why) {
    return Error("cannot save checkpoint " + dir + ": " + why +
                 (had_previous ? "; the previous checkpoint in " + dir + " is intact" : "; no checkpoint was written"));
  };
  // A checkpoint with a NaN/Inf weight would replace the last good one with one that cannot train.
  if (const std::string bad = model.first_nonfinite_param(/*values=*/true); !bad.empty())
    throw failed("weight " + bad + " is not finite (training diverged?); it was not saved");
  // The swap below removes what was at `dir`: only ever a checkpoint (check_checkpoint_target
  // refuses the rest before training; this is the last guard).
  std::string why_not;
  if (had_previous && !replaceable(dir, &why_not))
    throw Error("cannot save checkpoint " + dir + ": " + dir + " is not a snip checkpoint (" + why_not +
                "), so it was left as it is and nothing was saved; save to a new folder");
  fs::create_directories(parent, ec);
  if (ec)
    throw failed("cannot create " + parent.string() + ": " + ec.message() +
                 " (choose a writable location for the checkpoint)");
  remove_stale_temp_dirs(parent, target.filename().string());
  const std::string tmp = dir + ".tmp-" + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  if (!fs::create_directory(tmp, ec) || ec)
    throw failed("cannot create " + tmp + ": " + (ec ? ec.message() : "exists") + " (is " + parent.string() +
                 " writable? choose a writable location for the checkpoint)");
  // The new folder keeps the permissions of the one it replaces (a private 0700 stays private).
  if (had_previous) {
    std::error_code mode_ec;
    const fs::perms mode = fs::status(dir, mode_ec).permissions();
    if (!mode_ec) fs::permissions(tmp, mode, mode_ec);
  }
  try {
    write_checkpoint_files(tmp, model, opt, trainer_state);
  } catch (const Error& e) {
    fs::remove_all(tmp, ec);
    throw failed(e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  swap_in_checkpoint(tmp, dir, failed, why_not);
  fsync_dir(parent.string());
}

ModelConfig read_checkpoint_config(const std::string& dir, const nlohmann::json* given_state) {
  if (!fs::is_directory(dir))
    throw Error("checkpoint " + dir + " is not a directory (expected config.json, model.safetensors, ...)");
  const ModelConfig config = read_config_file(dir + "/config.json");
  // A training checkpoint's two records of the model must agree, for every reader (eval used
  // an edited config.json silently while resume refused it).
  std::error_code ec;
  if (given_state || fs::exists(dir + "/trainer_state.json", ec)) {
    const nlohmann::json state = given_state ? *given_state : read_trainer_state(dir);
    if (state.is_object() && state.contains("config") && state["config"].is_object() &&
        state["config"].contains("model") &&
        !(config_from_json(state["config"]["model"], dir + "/trainer_state.json (model)") == config))
      throw Error(dir +
                  ": config.json differs from the model config in trainer_state.json — the checkpoint is "
                  "inconsistent (edited or damaged after it was saved); restore it from a copy");
  }
  return config;
}

nlohmann::json read_trainer_state(const std::string& dir) {
  const std::string path = dir + "/trainer_state.json";
  nlohmann::json state = parse_json_strict(read_file(path), path);
  bool checked = false;  // the state's own checksum was there and agreed
  // The checksum recorded when it was saved: an edited value (a learning rate, the step, the data
  // position) would silently change the run a resume continues.
  if (state.is_object() && state.contains(kStateChecksumKey)) {
    const nlohmann::json recorded = state[kStateChecksumKey];
    if (!(with_state_checksum(state)[kStateChecksumKey] == recorded))
      throw Error(path + ": its contents do not match the checksum recorded when it was saved (" +
                  std::string(kStateChecksumKey) +
                  ") — the file was edited or damaged; restore the checkpoint from a "
                  "copy (settings a resume may change are given as options: --steps, --plan)");
    state.erase(kStateChecksumKey);
    checked = true;
  }
  // The files vouch for each other (save_checkpoint): the state names each safetensors file's
  // checksum under its own, so a file whose recorded checksum is not the one named (its key
  // removed or renamed, the file swapped in from elsewhere) is refused, and so is a state that
  // names them but lost its own checksum (a state without either is an older snip's, or another
  // tool's, and its values are checked one by one).
  if (state.is_object() && state.contains(kCheckpointFilesKey)) {
    if (!checked)
      throw Error(path + ": it names its files' checksums (" + std::string(kCheckpointFilesKey) +
                  ") but records none of its own (" + std::string(kStateChecksumKey) +
                  "): the file was edited (its checksum removed); restore the checkpoint from a copy");
    if (!state[kCheckpointFilesKey].is_object())
      throw Error(path + ": " + std::string(kCheckpointFilesKey) + " is not an object");
    std::error_code ec;
    for (const auto& [file, crc] : state[kCheckpointFilesKey].items()) {
      const std::string file_path = dir + "/" + file;
      if (!std::filesystem::exists(file_path, ec)) continue;  // its reader says it is missing
      const std::optional<std::string> recorded = recorded_data_checksum(file_path);
      if (!recorded) continue;  // an unreadable header: its reader says what is wrong
      if (!crc.is_string() || *recorded != crc.get<std::string>())
        throw Error(file_path + ": it records " +
                    (recorded->empty() ? std::string("no checksum") : "checksum " + *recorded) +
                    ", but the checkpoint's trainer_state.json names " + crc.dump() +
                    " for it: the file was replaced or edited after the checkpoint was saved; restore the checkpoint "
                    "from a copy");
    }
    state.erase(kCheckpointFilesKey);  // like its checksum, the writer's own: not part of the state
  }
  return state;
}

nlohmann::json read_run_state(const std::string& dir) {
  nlohmann::json state = read_trainer_state(dir);
  if (!state.is_object() || !state.contains("config") || !state.contains("step") || !state.contains("data"))
    throw Error(dir + "/trainer_state.json: not a snip trainer state (missing config/step/data)");
  return state;
}

void read_checkpoint_model(const std::string& dir, Llama& model) {
  read_model_weights(dir + "/model.safetensors", model);
}

void read_checkpoint_optimizer(const std::string& dir, const Llama& model, AdamW<float>& opt) {
  const std::string path = dir + "/optimizer.safetensors";
  const SafetensorsFile f = SafetensorsFile::open(path);
  for (const auto& t : model.param_tensors()) {
    for (const auto& [prefix, base] : {std::pair<std::string, float*>{"exp_avg.", opt.m()}, {"exp_avg_sq.", opt.v()}}) {
      if (!f.has(prefix + t.name)) throw Error(path + ": tensor " + prefix + t.name + " is missing");
      f.read_f32(prefix + t.name, base + t.offset, t.shape);
    }
  }
  auto it = f.metadata().find("t");
  if (it == f.metadata().end()) throw Error(path + ": metadata \"t\" (AdamW step count) is missing");
  // A whole number ≥ 0 with nothing after it: stoll alone would take "-5" or "12abc".
  const std::string& t = it->second;
  if (t.empty() || t.size() > 18 || t.find_first_not_of("0123456789") != std::string::npos)
    throw Error(path + ": metadata \"t\" = \"" + t + "\" is not a non-negative integer (the AdamW step count)");
  opt.set_t(std::stoll(t));
}

}  // namespace snip
