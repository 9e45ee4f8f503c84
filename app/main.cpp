// `snip`: the headless command-line front of SNIP Workbench. Every subcommand runs on the
// same engine and store as the GUI; errors from bad input are printed, never crashes.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <functional>

#include "command.h"
#include "option_rules.h"
#include "snip/error.h"
#include "snip/store.h"
#include "stop_signals.h"

namespace snip::cli {

std::vector<CommandRegistration>& command_registry() {
  static std::vector<CommandRegistration> registry;
  return registry;
}

std::string default_db_path() {
  return snip::default_database_path();
}

std::string default_corpus_path() {
  return std::string(SNIP_RESOURCE_DIR) + "/corpus/kjv.txt.gz";
}

std::string shell_quote(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](unsigned char c) {
    return std::isalnum(c) || std::strchr("_./:=@%+,-", c) != nullptr;
  });
  if (plain) return word;
  std::string q = "'";
  for (char c : word) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace snip::cli

int main(int argc, char** argv) {
  CLI::App app{"snip: FP8/FP4 mixed-precision Llama training and the SNIP layer-precision planner (headless)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "snip 0.1.0");
  auto& registry = snip::cli::command_registry();
  std::sort(registry.begin(), registry.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  for (auto& reg : registry) reg.setup(app);
  // Option validation is decided in one place (option_rules.h): a command that runs without it
  // is a programming error, caught at start-up rather than by a user's unchecked option.
  const std::function<bool(const CLI::App*)> named = [](const CLI::App* a) { return !a->get_name().empty(); };
  std::function<bool(const CLI::App*)> all_checked = [&](const CLI::App* cmd) {
    const auto subs = cmd->get_subcommands(named);
    if (subs.empty()) return snip::cli::has_option_rules(cmd);
    for (const CLI::App* sub : subs)
      if (!all_checked(sub)) {
        std::fprintf(stderr, "internal error: snip %s runs without option validation (snip::cli::run_checked)\n",
                     sub->get_name().c_str());
        return false;
      }
    return true;
  };
  if (!all_checked(&app)) return 70;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const snip::cli::Interrupted& stop) {
    std::fprintf(stderr, "%s\n", stop.message.c_str());
    return stop.status;
  } catch (const snip::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
