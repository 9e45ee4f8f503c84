// `snip`: the headless command-line front of SNIP Workbench. Every subcommand runs on the
// same engine and store as the GUI; errors from bad input are printed, never crashes.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "command.h"
#include "option_rules.h"
#include "output_streams.h"
#include "snip/error.h"
#include "snip/store.h"
#include "snip/store_export.h"
#include "stop_signals.h"

namespace snip::cli {

std::vector<CommandRegistration>& command_registry() {
  static std::vector<CommandRegistration> registry;
  return registry;
}

std::string default_db_path() {
  return snip::default_database_path();
}

namespace {

// Whole numbers on the command line are decimal, whatever the option: CLI11 reads "0100" as
// octal (64) and "0x10" as hex. A transform on every integer option of every command (one rule,
// not one per option) strips leading zeros and refuses any other notation.
// Real numbers likewise: decimal notation only (CLI11 took hexadecimal floats), no spaces around
// them (it took a leading one and refused a trailing one with a raw message), -0 is 0, and a
// value too small for a double is an error instead of a silent 0.
std::string decimal_real_number(std::string text) {
  const bool decimal = !text.empty() && text.find_first_of("xXpP \t") == std::string::npos;
  errno = 0;
  char* end = nullptr;
  const double v = decimal ? std::strtod(text.c_str(), &end) : 0.0;
  if (!decimal || end == text.c_str() || *end != '\0')
    throw CLI::ValidationError("must be a number in decimal notation, like 0.5 or 1e-3 (got '" + text + "')");
  if (errno == ERANGE && std::abs(v) < 1.0)
    throw CLI::ValidationError("is too small for a double (got " + text + "); give 0 or a larger value");
  return v == 0.0 ? std::string("0") : text;
}

void decimal_whole_numbers(CLI::App* app) {
  for (CLI::Option* opt : app->get_options()) {
    const std::string type = opt->get_type_name();
    if (type == "FLOAT") opt->transform(decimal_real_number, "", "");
    if (type != "INT" && type != "UINT") continue;
    opt->transform(
        [](const std::string& text) {
          const size_t i = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
          const bool digits = i < text.size() && std::all_of(text.begin() + std::ptrdiff_t(i), text.end(),
                                                             [](char c) { return c >= '0' && c <= '9'; });
          if (!digits) throw CLI::ValidationError("must be a whole number in decimal digits (got " + text + ")");
          const size_t first = text.find_first_not_of('0', i);  // leading zeros go (no octal)
          return text.substr(0, i) + text.substr(first == std::string::npos ? text.size() - 1 : first);
        },
        "", "");
  }
  for (CLI::App* sub : app->get_subcommands([](CLI::App*) { return true; })) decimal_whole_numbers(sub);
}

}  // namespace

}  // namespace snip::cli

int main(int argc, char** argv) {
  snip::cli::ignore_sigpipe();  // a closed reader is a write error, checked (output_streams.h)
  CLI::App app{"snip: FP8/FP4 mixed-precision Llama training and the SNIP layer-precision planner (headless)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "snip " SNIP_VERSION " (snip info shows the CPU and kernels)");
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
  snip::cli::decimal_whole_numbers(&app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ConversionError& e) {
    // CLI11 says "Could not convert: --jobs = 2147483648": say what is wrong and what to do.
    std::string what = e.what();
    const std::string prefix = "Could not convert: ";
    if (what.rfind(prefix, 0) == 0) {
      what = what.substr(prefix.size());
      const size_t eq = what.find(" = ");
      if (eq != std::string::npos) what = what.substr(0, eq) + " " + what.substr(eq + 3);
      what += " is not a value this option can hold (too large, or not of its kind: see --help)";
    }
    std::fprintf(stderr, "error: %s\n", what.c_str());
    return 1;
  } catch (const CLI::ParseError& e) {
    const int status = app.exit(e);  // --help and --version print to stdout: a failed write is an error
    const int written = snip::cli::finish_stdout();
    return status != 0 ? status : written;
  } catch (const snip::cli::Interrupted& stop) {
    std::fprintf(stderr, "%s\n", snip::printable_message(stop.message).c_str());
    return stop.status;
  } catch (const snip::SetUpStopped& stop) {  // a signal while a corpus was read: nothing began
    std::fprintf(stderr, "stopped by %s %s, before anything was trained or recorded\n",
                 snip::cli::StopSignals::name().c_str(), snip::printable_message(stop.what()).c_str());
    return snip::cli::StopSignals::exit_status();
  } catch (const std::exception& e) {  // snip::Error and any other: bytes from a damaged file escaped
    std::fprintf(stderr, "error: %s\n", snip::printable_message(e.what()).c_str());
    return 1;
  }
  return snip::cli::finish_stdout();
}
