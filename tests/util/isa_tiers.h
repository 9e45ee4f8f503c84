// The instruction-set tiers this CPU runs (snip/isa.h), for tests that hold every tier's kernels
// to the portable twin's bits, and a guard that restores the tier and GEMM mode a test changed.
#pragma once
#include <cstdlib>
#include <vector>

#include "snip/isa.h"
#include "snip/qgemm.h"

namespace snip::test {

// portable … the CPU's best tier, or SNIP_ISA's when it caps it (whatever a test set since).
inline std::vector<IsaTier> runnable_tiers() {
  const IsaTier top = parse_isa_tier(std::getenv("SNIP_ISA"), cpu_isa_tier());
  std::vector<IsaTier> tiers;
  for (int t = 0; t <= int(top); ++t) tiers.push_back(IsaTier(t));
  return tiers;
}

struct IsaGuard {
  IsaTier saved = isa_tier();
  ~IsaGuard() {
    set_qgemm_mode(QGemmMode::automatic);
    set_isa_tier(saved);
  }
};

}  // namespace snip::test
