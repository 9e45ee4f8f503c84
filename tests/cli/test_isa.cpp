// The instruction-set tiers as a user meets them (snip/isa.h): `snip info` names the CPU's
// extensions, the tier in force and each precision's kernel; SNIP_ISA forces a lower tier and a
// wrong value is refused before any work, naming the CPU's best tier; a run on the slow portable
// tier says so once. The real `snip` binary; the kernels' bits are tested in tests/numerics and,
// on an emulated CPU without AVX-512, in tests/emulated.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "run_command.h"
#include "snip/isa.h"
#include "temp_dir.h"

namespace {

using snip_test::TempDir;

const std::string kSnip = SNIP_BIN;

snip_test::CommandResult sh(const std::string& command) {
  return snip_test::run_shell(command);
}

size_t count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

TEST(InstructionSetTiers, InfoNamesTheCpuTheTierAndEachPrecisionsKernel) {
  const auto r = sh("env -u SNIP_ISA -u SNIP_QGEMM " + kSnip + " info");
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string best = snip::isa_tier_name(snip::cpu_isa_tier());
  EXPECT_NE(r.out.find("CPU: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("instruction-set tier: " + best + " (the CPU's best)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FP4 GEMMs: integer E2M1 GEMM"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("FP8 and BF16 GEMMs: BF16-element GEMM"), std::string::npos) << r.out;

  const auto p = sh("SNIP_ISA=portable " + kSnip + " info");
  ASSERT_EQ(p.status, 0) << p.out;
  EXPECT_NE(p.out.find("instruction-set tier: portable"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("FP4 GEMMs: integer E2M1 GEMM, portable C++"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("SNIP_ISA=portable"), std::string::npos) << p.out;  // says what chose it
}

TEST(InstructionSetTiers, AWrongTierIsRefusedBeforeAnyWorkNamingTheCpusBest) {
  TempDir dir;
  const std::string best = snip::isa_tier_name(snip::cpu_isa_tier());
  const std::string out = (dir.path / "ck").string();
  const auto r = sh("SNIP_ISA=avx9000 " + kSnip + " train --preset tiny --steps 1 --no-db --out " + out);
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("SNIP_ISA='avx9000' is not a tier"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("this CPU's best is " + best), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists(out));
  // A tier above the CPU's (only where there is one: the emulated tests check it on a CPU
  // without AVX-512).
  if (snip::cpu_isa_tier() < snip::IsaTier::avx512bf16) {
    const auto above = sh("SNIP_ISA=avx512bf16 " + kSnip + " info");
    EXPECT_EQ(above.status, 1) << above.out;
    EXPECT_NE(above.out.find("its best tier is " + best), std::string::npos) << above.out;
  }
}

TEST(InstructionSetTiers, ARunOnThePortableTierSaysSoOnce) {
  TempDir dir;
  const std::string args =
      " train --preset tiny --batch-size 2 --seq-len 32 --eval-every 0 --precision fp4 --steps 2 --no-db --out ";
  const auto slow = sh("SNIP_ISA=portable " + kSnip + args + (dir.path / "a").string());
  ASSERT_EQ(slow.status, 0) << slow.out;
  EXPECT_EQ(count(slow.out, "run on the portable kernels"), 1u) << slow.out;
  EXPECT_NE(slow.out.find("3-4x slower than FP32"), std::string::npos) << slow.out;
  if (snip::cpu_isa_tier() == snip::IsaTier::portable) return;
  const auto fast = sh("env -u SNIP_ISA -u SNIP_QGEMM " + kSnip + args + (dir.path / "b").string());
  ASSERT_EQ(fast.status, 0) << fast.out;
  EXPECT_EQ(count(fast.out, "portable kernels"), 0u) << fast.out;
}

}  // namespace
