// The instruction-set tiers this CPU runs (snip/isa.h), for tests that hold every tier's kernels
// to the portable twin's bits, and a guard that restores the tier and GEMM mode a test changed.
#pragma once
#include <vector>

#include "snip/isa.h"
#include "snip/qgemm.h"

namespace snip::test {

// portable … the tier in force when the test started (SNIP_ISA may cap it, e.g. in CI's runs).
inline std::vector<IsaTier> runnable_tiers() {
  std::vector<IsaTier> tiers;
  for (int t = 0; t <= int(isa_tier()); ++t) tiers.push_back(IsaTier(t));
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
