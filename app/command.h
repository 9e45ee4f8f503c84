// The `snip` command-line tool: each subcommand lives in its own cmd_<name>.cpp and
// registers itself here with a static SNIP_REGISTER_COMMAND, so areas add commands
// without touching a shared file.
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace snip::cli {

// Called once at start-up to add a subcommand (options, help text and callback) to the app.
using CommandSetup = std::function<void(CLI::App& app)>;

struct CommandRegistration {
  std::string name;
  CommandSetup setup;
};

std::vector<CommandRegistration>& command_registry();

struct Registrar {
  Registrar(std::string name, CommandSetup setup) { command_registry().push_back({std::move(name), std::move(setup)}); }
};

// Default database path (XDG data dir): $XDG_DATA_HOME/snip-workbench/workbench.db or
// ~/.local/share/snip-workbench/workbench.db; the directory is created when missing.
std::string default_db_path();

}  // namespace snip::cli

#define SNIP_CONCAT_INNER(a, b) a##b
#define SNIP_CONCAT(a, b) SNIP_CONCAT_INNER(a, b)
#define SNIP_REGISTER_COMMAND(name, fn) static ::snip::cli::Registrar SNIP_CONCAT(snip_cmd_, __LINE__)(name, fn)
