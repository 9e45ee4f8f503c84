// Option validation for every `snip` subcommand, decided in one place: each command declares
// its rules next to its options (ranges, "requires", "excludes", "ignored unless") and runs
// through run_checked(), which checks them before the command does anything. Besides the
// declared rules, every command gets the same type-wide checks: an unsigned option given a
// negative number (CLI11 would wrap -1 to 2^64-1) and a floating-point option given NaN or an
// infinity are errors. Errors are snip::Error ("error: ..." and exit 1 from main.cpp); a
// harmless contradiction is a "warning: ..." line on stderr, so --json output stays clean.
#pragma once
#include <CLI/CLI.hpp>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "snip/files_in_use.h"
#include "snip/plan.h"

namespace snip::cli {

class OptionRules {
 public:
  explicit OptionRules(CLI::App* cmd) : cmd_(cmd) {}

  // True when the user gave the option on the command line.
  bool given(const std::string& name) const;

  // `value` (the option's bound variable, read when check() runs) must be ≥ lo when given.
  template <class T>
  OptionRules& at_least(const std::string& name, const T& value, T lo, std::string meaning = "") {
    const T* v = &value;
    return add([=, this] {
      if (given(name) && !(*v >= lo)) fail_range(name, show(*v), "≥ " + show(lo), meaning);
    });
  }
  template <class T>
  OptionRules& at_least(const std::string& name, const std::optional<T>& value, T lo, std::string meaning = "") {
    const std::optional<T>* v = &value;
    return add([=, this] {
      if (given(name) && *v && !(**v >= lo)) fail_range(name, show(**v), "≥ " + show(lo), meaning);
    });
  }
  // `value` must be one of `choices` when given.
  OptionRules& one_of(const std::string& name, const std::string& value, std::vector<std::string> choices);
  // `value` must lie in [lo, hi] when given.
  template <class T>
  OptionRules& between(const std::string& name, const T& value, T lo, T hi, std::string meaning = "") {
    const T* v = &value;
    return add([=, this] {
      if (given(name) && !(*v >= lo && *v <= hi))
        fail_range(name, show(*v), "between " + show(lo) + " and " + show(hi), meaning);
    });
  }
  // Giving `name` without any of `others` is an error (`why` says what `name` is for).
  OptionRules& requires_any(const std::string& name, std::vector<std::string> others, std::string why);
  // Giving both is an error: they decide the same thing (`why` says how to choose).
  OptionRules& excludes(const std::string& a, const std::string& b, std::string why);
  // Giving `name` without any of `others` has no effect: a printed warning.
  OptionRules& ignored_unless(const std::string& name, std::vector<std::string> others, std::string why);
  // Any other check of this command's options (throws snip::Error or prints a warning).
  OptionRules& add(std::function<void()> rule);
  // `name` (bound to `path`) names something the command reads: a file, or a folder read whole
  // (a checkpoint). While the command runs, none of its writes may replace it or put a file in
  // the folder (snip::protect_input), so an output named like an input is refused before
  // anything is written.
  OptionRules& reads(const std::string& name, const std::string& path);
  // `name` (bound to `path`) names a file the command writes: two outputs naming the same file
  // are an error.
  OptionRules& writes(const std::string& name, const std::string& path);
  // `name` names the command's experiment database. Every command's --db is declared so by
  // run_checked, used or ignored: no output may be the database or its WAL, index or journal.
  OptionRules& database(const std::string& name);
  // The protections of every given input, for run_checked to hold while the command runs.
  std::vector<FileInUse> protect_inputs() const;

  // The type-wide checks, then every declared rule in declaration order.
  void check() const;

  static void warn(const std::string& message);

 private:
  template <class T>
  static std::string show(const T& v) {
    if constexpr (std::is_floating_point_v<T>) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", double(v));
      return buf;
    } else {
      return std::to_string(v);
    }
  }
  [[noreturn]] static void fail_range(const std::string& name, const std::string& got, const std::string& want,
                                      const std::string& meaning);
  void check_types() const;
  // Every given output against every given input and the database (and its sidecar files): the
  // same file, by identity when both exist, else by absolute path.
  void check_collisions() const;

  CLI::App* cmd_;
  std::vector<std::function<void()>> rules_;
  std::vector<std::pair<std::string, const std::string*>> inputs_, outputs_;
  std::vector<std::string> databases_;
  std::string value_of(const std::string& name) const;
};

// --pipeline-parallel P and --virtual-stages V: Megatron-LM's pipeline layout (snip/plan.h), with
// their rules (each ≥ 1; virtual stages only with P > 1, as Megatron takes them). `what` says what
// the layout does in this command, for --help; *given (if any) tells, once the rules have run,
// whether either option was on the command line.
void add_pipeline_options(CLI::App* cmd, PipelineLayout& layout, OptionRules& rules, const std::string& what,
                          bool* given = nullptr);

// The one way a subcommand runs: its option rules first, then its body.
void run_checked(CLI::App* cmd, std::shared_ptr<OptionRules> rules, std::function<void()> body);

// Every subcommand registered through run_checked (main.cpp refuses to start with one that is
// not, so no command can skip option validation).
bool has_option_rules(const CLI::App* cmd);

}  // namespace snip::cli
