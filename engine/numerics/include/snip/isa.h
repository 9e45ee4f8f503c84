// Instruction-set tiers: one dispatch for every hand-written kernel (the quantized GEMMs, the
// quantizer's rounding and packing, the statistics round's vector sums).
//
// The tiers are ordered; each includes the ones below it:
//   portable    the C++ reference twins (what non-x86 builds run);
//   avx2        AVX2 + FMA (x86-64-v3: Haswell and later, Zen 1 and later);
//   avx512      AVX-512 F/BW/VL/DQ (Skylake-SP and later servers);
//   avx512vnni  + AVX512-VNNI (Cascade Lake, Ice Lake, Zen 4);
//   avx512bf16  + AVX512_BF16 (Cooper Lake, Sapphire Rapids, Zen 4).
// Every tier gives the same bits (docs/FORMATS.md sections 6.4 and 6.5): a tier changes speed only.
//
// The CPU's tier is detected once. SNIP_ISA=portable|avx2|avx512|avx512vnni|avx512bf16|auto
// (unset: auto) caps it, so every tier can be tested and benchmarked on one machine; a tier the
// CPU lacks, or an unknown value, is an error that names the CPU's best tier. SNIP_QGEMM=scalar
// is the same as SNIP_ISA=portable, SNIP_QGEMM=fma caps the tier at avx512vnni (no vdpbf16ps).
#pragma once
#include <cstdint>
#include <string>

namespace snip {

enum class IsaTier : uint8_t { portable = 0, avx2 = 1, avx512 = 2, avx512vnni = 3, avx512bf16 = 4 };

// "portable", "avx2", …: the names SNIP_ISA takes.
const char* isa_tier_name(IsaTier t);

// The best tier this CPU (and this build) runs, detected once.
IsaTier cpu_isa_tier();

// The CPU's model name and the instruction-set extensions the tiers look at, as found, e.g.
// "AMD EPYC 9R14 (avx2 fma avx512f avx512bw avx512vl avx512dq avx512vnni avx512bf16 avx512vbmi)".
std::string cpu_description();

// SNIP_ISA's value as a tier (null, empty or "auto": `best`). An unknown value, or a tier above
// `best`, throws snip::Error naming `best`.
IsaTier parse_isa_tier(const char* value, IsaTier best);

// The tier the kernels use: SNIP_ISA (read once, checked against the CPU) or set_isa_tier's,
// lowered by SNIP_QGEMM's mode (scalar: portable; fma: at most avx512vnni).
IsaTier isa_tier();
inline bool isa_at_least(IsaTier t) {
  return isa_tier() >= t;
}

// Sets the tier for this process (tests, benchmarks). Throws snip::Error above the CPU's tier.
void set_isa_tier(IsaTier t);

// How the precisions' GEMMs run at tier t: the kernel's name and, for a slow tier, the
// expected slowdown against FP32 (empty when it is not slow). precision: "fp4", "fp8", "bf16".
struct PrecisionKernel {
  std::string kernel;
  std::string slow;  // non-empty ("portable") when the kernel is a slow one
};
PrecisionKernel precision_kernel(const std::string& precision, IsaTier t);

// What runs here, one "label: value" per line: the CPU and its extensions, the tier in force
// (and what chose it), and the kernels of the FP4, FP8/BF16 GEMMs, the quantizer and the
// statistics sums at that tier. For `snip info` and the GUI's Help › About.
std::string isa_report();

// ---- Compiler-vectorized loops, one copy per tier ------------------------------------------
// The portable twins are plain C++ loops that the compiler vectorizes. SNIP_TIER_COPIES(RET,
// NAME, PARAMS, body…) compiles one body three times: NAME_portable (the build's baseline, SSE2
// on x86-64), NAME_avx2 and NAME_avx512; SNIP_TIER_PICK(NAME) is the copy of the tier in force,
// so SNIP_ISA=portable runs the baseline copy even on a CPU with AVX-512 (what a CPU without
// AVX2 runs) and every tier can be benchmarked on one machine. All copies do the same IEEE
// operations in the same order (no FMA contraction: -ffp-contract=off, no vectorized
// reductions that reassociate floating-point sums), so they give the same bits. Off x86-64 the
// three copies are the same portable code.
#if defined(__x86_64__)
#define SNIP_COPY_AVX2 __attribute__((target("avx2")))
#define SNIP_COPY_AVX512 __attribute__((target("avx512f")))
#else
#define SNIP_COPY_AVX2
#define SNIP_COPY_AVX512
#endif
// clang-format off
#define SNIP_TIER_COPIES(RET, NAME, PARAMS, ...)       \
  RET NAME##_portable PARAMS __VA_ARGS__                \
  SNIP_COPY_AVX2 RET NAME##_avx2 PARAMS __VA_ARGS__     \
  SNIP_COPY_AVX512 RET NAME##_avx512 PARAMS __VA_ARGS__
// clang-format on
// 0, 1, 2: the portable, avx2 or avx512 copy for the tier in force.
inline int tier_copy() {
  const IsaTier t = isa_tier();
  return t >= IsaTier::avx512 ? 2 : t >= IsaTier::avx2 ? 1 : 0;
}
#define SNIP_TIER_PICK(NAME) \
  (::snip::tier_copy() == 2 ? NAME##_avx512 : ::snip::tier_copy() == 1 ? NAME##_avx2 : NAME##_portable)

// Once per process: the line to show when quantized precisions run on a slow tier (the
// portable twins), else empty. Later calls return empty.
std::string slow_tier_notice_once();

}  // namespace snip
