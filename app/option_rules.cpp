#include "option_rules.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "snip/environment.h"
#include "snip/error.h"

namespace snip::cli {

namespace {

std::set<const CLI::App*>& checked_commands() {
  static std::set<const CLI::App*> s;
  return s;
}

std::string join_or(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i) s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return s;
}

// The option's name as the user typed it (its first long name, else its first short name).
std::string option_name(const CLI::Option* opt) {
  if (!opt->get_lnames().empty()) return "--" + opt->get_lnames().front();
  if (!opt->get_snames().empty()) return "-" + opt->get_snames().front();
  return opt->get_name();
}

// Whether two paths name one file: the same file when both exist, else the same absolute path.
bool same_file(const std::string& a, const std::string& b) {
  std::error_code ec;
  if (std::filesystem::exists(a, ec) && std::filesystem::exists(b, ec))
    return std::filesystem::equivalent(a, b, ec) && !ec;
  const auto full = [&](const std::string& p) {
    return std::filesystem::weakly_canonical(std::filesystem::absolute(p, ec), ec).lexically_normal();
  };
  return full(a) == full(b);
}

}  // namespace

bool OptionRules::given(const std::string& name) const {
  return cmd_->count(name) > 0;
}

OptionRules& OptionRules::add(std::function<void()> rule) {
  rules_.push_back(std::move(rule));
  return *this;
}

OptionRules& OptionRules::requires_any(const std::string& name, std::vector<std::string> others, std::string why) {
  return add([=, this] {
    if (!given(name)) return;
    for (const auto& o : others)
      if (given(o)) return;
    throw Error(name + " needs " + join_or(others) + ": " + why);
  });
}

OptionRules& OptionRules::one_of(const std::string& name, const std::string& value, std::vector<std::string> choices) {
  const std::string* v = &value;
  return add([=, this] {
    if (!given(name)) return;
    for (const auto& c : choices)
      if (*v == c) return;
    throw Error(name + " '" + *v + "' is not one of " + join_or(choices));
  });
}

OptionRules& OptionRules::excludes(const std::string& a, const std::string& b, std::string why) {
  return add([=, this] {
    if (given(a) && given(b)) throw Error(a + " and " + b + " cannot be combined: " + why);
  });
}

OptionRules& OptionRules::ignored_unless(const std::string& name, std::vector<std::string> others, std::string why) {
  return add([=, this] {
    if (!given(name)) return;
    for (const auto& o : others)
      if (given(o)) return;
    warn(name + " is ignored without " + join_or(others) + " (" + why + ")");
  });
}

void OptionRules::warn(const std::string& message) {
  std::fprintf(stderr, "warning: %s\n", message.c_str());
}

void OptionRules::fail_range(const std::string& name, const std::string& got, const std::string& want,
                             const std::string& meaning) {
  throw Error(name + " must be " + want + " (got " + got + ")" + (meaning.empty() ? "" : "; " + meaning));
}

// Checks that hold for every option of a type, whatever the command: CLI11 converts "-1" for an
// unsigned option to 2^64-1 and accepts "nan" and "inf" for a double; no snip option means either.
void OptionRules::check_types() const {
  for (const CLI::Option* opt : cmd_->get_options()) {
    if (opt->count() == 0) continue;
    const std::string type = opt->get_type_name();
    for (const std::string& text : opt->results()) {
      if (type == "UINT" && text.find('-') != std::string::npos)
        throw Error(option_name(opt) + " must be a non-negative whole number (got " + text + ")");
      if (type == "UINT" || type == "INT") {  // beyond 64 bits, CLI11 keeps the saturated value
        errno = 0;
        char* end = nullptr;
        if (type == "UINT")
          (void)std::strtoull(text.c_str(), &end, 0);
        else
          (void)std::strtoll(text.c_str(), &end, 0);
        if (errno == ERANGE)
          throw Error(option_name(opt) + " is out of range (got " + text + "; a whole number of at most 64 bits)");
      }
      if (type == "FLOAT") {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (!std::isfinite(v)) throw Error(option_name(opt) + " must be a finite number (got " + text + ")");
      }
    }
  }
}

OptionRules& OptionRules::reads(const std::string& name, const std::string& path) {
  inputs_.emplace_back(name, &path);
  return *this;
}

OptionRules& OptionRules::writes(const std::string& name, const std::string& path) {
  for (const auto& [other, other_path] : outputs_)
    add([=, this, p = &path] {
      if (given(name) && given(other) && same_file(*p, *other_path))
        throw Error(name + " and " + other + " name the same file (" + *p +
                    "): one output would replace the other; give each its own path");
    });
  outputs_.emplace_back(name, &path);
  return *this;
}

OptionRules& OptionRules::database(const std::string& name) {
  databases_.push_back(name);
  return *this;
}

std::string OptionRules::value_of(const std::string& name) const {
  const CLI::Option* opt = cmd_->get_option_no_throw(name);
  return opt && opt->count() > 0 && !opt->results().empty() ? opt->results().back() : "";
}

void OptionRules::check_collisions() const {
  for (const auto& [out, out_path] : outputs_) {
    if (!given(out) || out_path->empty() || *out_path == "-") continue;
    const auto refuse = [&, o = out, p = out_path](const std::string& what) {
      throw Error("cannot write " + *p + " (" + o + "): it is " + what + "; writing there would replace it: give " + o +
                  " another path (nothing was written)");
    };
    for (const auto& [in, in_path] : inputs_)
      if (given(in) && !in_path->empty() && same_file(*out_path, *in_path))
        refuse("the input " + *in_path + " (" + in + "), which this command reads");
    for (const std::string& db : databases_) {
      const std::string db_path = value_of(db);
      if (db_path.empty()) continue;
      for (const std::string suffix : {"", "-wal", "-shm", "-journal"})
        if (same_file(*out_path, db_path + suffix))
          refuse("the experiment database " + db_path + " (" + db + ")" +
                 (suffix.empty() ? "" : ", its " + suffix.substr(1) + " file"));
    }
  }
}

std::vector<FileInUse> OptionRules::protect_inputs() const {
  std::vector<FileInUse> held;
  for (const std::string& name : databases_)
    if (const std::string path = value_of(name); !path.empty())
      held.push_back(protect_input(path, "the experiment database " + path + " (" + name + ")"));
  for (const auto& [name, path] : inputs_) {
    if (!given(name) || path->empty()) continue;
    std::error_code ec;
    const bool folder = std::filesystem::is_directory(*path, ec);
    held.push_back(protect_input(*path, (folder ? "the input folder " : "the input ") + *path + " (" + name + ")"));
  }
  return held;
}

void OptionRules::check() const {
  check_types();
  for (const auto& rule : rules_) rule();
  check_collisions();
}

void add_pipeline_options(CLI::App* cmd, PipelineLayout& layout, OptionRules& rules, const std::string& what,
                          bool* given) {
  cmd->add_option("--pipeline-parallel", layout.parallel,
                  "Megatron-LM's --pipeline-model-parallel-size: " + what +
                      " (every stage numbers its blocks from 0, so a plan is the same on every stage)")
      ->capture_default_str();
  cmd->add_option("--virtual-stages", layout.virtual_stages,
                  "Megatron-LM's --num-virtual-stages-per-pipeline-rank (model chunks per stage), with "
                  "--pipeline-parallel")
      ->capture_default_str();
  rules.at_least("--pipeline-parallel", layout.parallel, 1).at_least("--virtual-stages", layout.virtual_stages, 1);
  rules.add([&layout, given, r = &rules] {
    if (given) *given = r->given("--pipeline-parallel") || r->given("--virtual-stages");
    if (r->given("--virtual-stages") && layout.virtual_stages > 1 && layout.parallel < 2)
      throw Error("--virtual-stages " + std::to_string(layout.virtual_stages) +
                  " needs --pipeline-parallel 2 or more: Megatron-LM interleaves virtual stages over pipeline stages");
  });
}

void run_checked(CLI::App* cmd, std::shared_ptr<OptionRules> rules, std::function<void()> body) {
  checked_commands().insert(cmd);
  // Every command's --db is its database, declared or not (the bound string is the option's own).
  if (cmd->get_option_no_throw("--db") != nullptr) rules->database("--db");
  cmd->callback([rules, body = std::move(body)] {
    check_environment();  // SNIP_* variables: a value the engine would ignore is an error, before any work
    rules->check();
    const std::vector<FileInUse> inputs = rules->protect_inputs();
    body();
  });
}

bool has_option_rules(const CLI::App* cmd) {
  return checked_commands().count(cmd) > 0;
}

}  // namespace snip::cli
