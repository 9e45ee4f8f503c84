// The environment variables SNIP Workbench reads, checked once at start-up by both fronts (the
// `snip` CLI and the GUI), before any work: a value the engine would otherwise ignore or
// replace with a default (SNIP_NUM_THREADS=abc, SNIP_NUM_THREADS=0) is an error naming the
// variable and what it takes, never a silent fallback.
#pragma once
#include <string>
#include <vector>

namespace snip {

struct EnvironmentVariable {
  std::string name;
  std::string meaning;  // what it sets and the values it takes
};

// Every variable the engine reads (for help texts and the docs).
const std::vector<EnvironmentVariable>& environment_variables();

// Throws snip::Error for the first variable that is set to a value its reader does not take.
void check_environment();

}  // namespace snip
