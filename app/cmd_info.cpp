// `snip info`: what this machine runs — the CPU's instruction-set extensions, the kernel tier
// in force (SNIP_ISA) and the kernel each precision's GEMMs use (snip/isa.h).
#include <cstdio>
#include <memory>

#include "command.h"
#include "option_rules.h"
#include "snip/isa.h"

namespace {

void setup_info(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Show the CPU's instruction sets and the kernel each precision runs on");
  snip::cli::run_checked(cmd, std::make_shared<snip::cli::OptionRules>(cmd),
                         [] { std::printf("snip %s\n%s", SNIP_VERSION, snip::isa_report().c_str()); });
}

}  // namespace

SNIP_REGISTER_COMMAND("info", setup_info);
