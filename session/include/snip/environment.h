// The environment variables SNIP Workbench reads, checked once at start-up by both fronts (the
// `snip` CLI and the GUI), before any work: a value the engine would otherwise ignore or
// replace with a default (SNIP_NUM_THREADS=abc, SNIP_NUM_THREADS=0) is an error naming the
// variable and what it takes, never a silent fallback.
#pragma once

namespace snip {

// Throws snip::Error for the first variable that is set to a value its reader does not take.
void check_environment();

}  // namespace snip
