// See snip/isa.h.
#include "snip/isa.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>

#include "snip/error.h"
#include "snip/names.h"
#include "snip/qgemm.h"

namespace snip {

namespace {

constexpr std::array<Named<IsaTier>, 5> kTierNames{{{IsaTier::portable, "portable"},
                                                    {IsaTier::avx2, "avx2"},
                                                    {IsaTier::avx512, "avx512"},
                                                    {IsaTier::avx512vnni, "avx512vnni"},
                                                    {IsaTier::avx512bf16, "avx512bf16"}}};

#if defined(__x86_64__)
bool cpuid_bf16() {
  // GCC 12's __builtin_cpu_supports has no "avx512bf16": CPUID leaf 7 sub-leaf 1, EAX bit 5.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  __asm__("cpuid" : "=a"(eax), "=b"(ebx), "=c"(ecx), "=d"(edx) : "a"(7), "c"(1));
  return (eax >> 5) & 1u;
}
#endif

struct Features {
  bool avx2 = false, fma = false, avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false,
       avx512vnni = false, avx512bf16 = false, avx512vbmi = false;
};

Features detect() {
  Features f;
#if defined(__x86_64__)
  __builtin_cpu_init();
  // __builtin_cpu_supports checks that the OS saves the wider registers (XGETBV) as well.
  f.avx2 = __builtin_cpu_supports("avx2");
  f.fma = __builtin_cpu_supports("fma");
  f.avx512f = __builtin_cpu_supports("avx512f");
  f.avx512bw = __builtin_cpu_supports("avx512bw");
  f.avx512vl = __builtin_cpu_supports("avx512vl");
  f.avx512dq = __builtin_cpu_supports("avx512dq");
  f.avx512vnni = __builtin_cpu_supports("avx512vnni");
  f.avx512vbmi = __builtin_cpu_supports("avx512vbmi");
  f.avx512bf16 = f.avx512f && cpuid_bf16();
#endif
  return f;
}

const Features& features() {
  static const Features f = detect();
  return f;
}

IsaTier best_of(const Features& f) {
  if (!(f.avx2 && f.fma)) return IsaTier::portable;
  if (!(f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq)) return IsaTier::avx2;
  if (!f.avx512vnni) return IsaTier::avx512;
  if (!f.avx512bf16) return IsaTier::avx512vnni;
  return IsaTier::avx512bf16;
}

// -1: not chosen yet (SNIP_ISA is read on first use).
std::atomic<int> g_tier{-1};
std::atomic<bool> g_noticed{false};

std::string model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 || line.rfind("Model", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) {
        std::string v = line.substr(colon + 1);
        while (!v.empty() && v.front() == ' ') v.erase(v.begin());
        return v;
      }
    }
  return "unknown CPU";
}

}  // namespace

const char* isa_tier_name(IsaTier t) {
  return name_of(kTierNames, t);
}

IsaTier cpu_isa_tier() {
  static const IsaTier t = best_of(features());
  return t;
}

std::string cpu_description() {
  const Features& f = features();
  std::string s;
  auto add = [&](bool has, const char* name) {
    if (has) s += std::string(s.empty() ? "" : " ") + name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.avx512f, "avx512f");
  add(f.avx512bw, "avx512bw");
  add(f.avx512vl, "avx512vl");
  add(f.avx512dq, "avx512dq");
  add(f.avx512vnni, "avx512vnni");
  add(f.avx512bf16, "avx512bf16");
  add(f.avx512vbmi, "avx512vbmi");
  return model_name() + " (" + (s.empty() ? "none of the extensions the kernels use" : s) + ")";
}

IsaTier parse_isa_tier(const char* value, IsaTier best) {
  if (!value || !*value) return best;
  const std::string v(value);
  if (v == "auto") return best;
  if (auto t = find_name(kTierNames, v)) {
    if (*t > best)
      throw Error("SNIP_ISA='" + v + "' asks for instructions this CPU lacks: its best tier is " + isa_tier_name(best) +
                  " (set SNIP_ISA to that or a lower tier, or unset it)");
    return *t;
  }
  throw Error("SNIP_ISA='" + v + "' is not a tier: use " + names_of(kTierNames) + " or auto (this CPU's best is " +
              isa_tier_name(best) + "; or unset it)");
}

IsaTier isa_tier() {
  int t = g_tier.load(std::memory_order_relaxed);
  if (t < 0) {
    const int from_env = int(parse_isa_tier(std::getenv("SNIP_ISA"), cpu_isa_tier()));
    g_tier.compare_exchange_strong(t, from_env);
    t = g_tier.load();
  }
  switch (qgemm_mode()) {
    case QGemmMode::scalar:
      return IsaTier::portable;
    case QGemmMode::fma:
      return IsaTier(std::min(t, int(IsaTier::avx512vnni)));
    default:
      return IsaTier(t);
  }
}

void set_isa_tier(IsaTier t) {
  if (t > cpu_isa_tier())
    throw Error(std::string("the ") + isa_tier_name(t) + " tier needs instructions this CPU lacks: its best tier is " +
                isa_tier_name(cpu_isa_tier()));
  g_tier.store(int(t));
}

PrecisionKernel precision_kernel(const std::string& precision, IsaTier t) {
  PrecisionKernel k;
  const bool sgemm = qgemm_mode() == QGemmMode::sgemm;
  if (precision == "fp4") {
    if (sgemm) return {"dequantize, then FP32 cblas_sgemm (SNIP_QGEMM=sgemm)", ""};
    if (t >= IsaTier::avx512vnni) return {"integer E2M1 GEMM, AVX512-VNNI vpdpbusd", ""};
    if (t >= IsaTier::avx2) return {"integer E2M1 GEMM, AVX2 vpmaddubsw", ""};
    return {"integer E2M1 GEMM, portable C++", "portable"};
  }
  if (sgemm) return {"dequantize, then FP32 cblas_sgemm (SNIP_QGEMM=sgemm)", ""};
  if (t >= IsaTier::avx512bf16)
    return {"BF16-element GEMM, AVX512_BF16 vdpbf16ps (FMA kernel for subnormal ranges)", ""};
  if (t >= IsaTier::avx512) return {"BF16-element GEMM, AVX-512 FMA", ""};
  if (t >= IsaTier::avx2) return {"BF16-element GEMM, AVX2 FMA", ""};
  return {"BF16-element GEMM, portable C++", "portable"};
}

std::string isa_report() {
  const IsaTier t = isa_tier(), best = cpu_isa_tier();
  std::string why = t == best ? "the CPU's best" : std::string("the CPU's best is ") + isa_tier_name(best);
  if (const char* e = std::getenv("SNIP_ISA"); e && *e) why += std::string("; SNIP_ISA=") + e;
  if (const char* e = std::getenv("SNIP_QGEMM"); e && *e) why += std::string("; SNIP_QGEMM=") + e;
  std::string r = "CPU: " + cpu_description() + "\n";
  r += std::string("instruction-set tier: ") + isa_tier_name(t) + " (" + why + ")\n";
  r += "FP4 GEMMs: " + precision_kernel("fp4", t).kernel + "\n";
  r += "FP8 and BF16 GEMMs: " + precision_kernel("bf16", t).kernel + "\n";
  r += std::string("quantizer and statistics sums: ") +
       (t >= IsaTier::avx512 ? "AVX-512"
        : t >= IsaTier::avx2 ? "AVX2"
                             : "portable C++, compiler-vectorized for the CPU") +
       "\n";
  r += "FP32 GEMMs: OpenBLAS (its own CPU detection; OPENBLAS_CORETYPE overrides it)\n";
  if (precision_kernel("fp4", t).slow.size())
    r += "note: the portable kernels give the same bits, several times slower than FP32\n";
  return r;
}

std::string slow_tier_notice_once() {
  if (isa_tier() != IsaTier::portable || qgemm_mode() == QGemmMode::sgemm) return {};
  if (g_noticed.exchange(true)) return {};
  return std::string("note: the quantized GEMMs run on the portable kernels (") +
         (cpu_isa_tier() == IsaTier::portable ? "this CPU has no AVX2+FMA" : "SNIP_ISA or SNIP_QGEMM asks for them") +
         "): expect FP4, FP8 and BF16 steps about 3-4x slower than FP32 (README, Performance)";
}

}  // namespace snip
