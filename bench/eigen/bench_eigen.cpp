// Before/after of the code that moved onto Eigen: each path's former hand-written loop (copied
// here as the "loops" twin, on the same parallel_for split) against what the library now runs
// ("eigen"). CPU time is the whole process's (pool threads included). Every pair is
// first checked to agree (the binary refuses to time anything otherwise); run with
// --benchmark_enable_random_interleaving=true so both twins see the same machine load.
//   attention_forward_ref / attention_backward_ref (double; the test oracle of the fast path)
//   swiglu_forward / swiglu_backward (double path): tried and measured slower, so not adopted
//   mean_ci95, spearman (compare and validation statistics)
//   the two reductions of the estimators: ‖u' − u‖² over a layer's update (validate.cpp) and
//   the Hessian block trace vᵀ(g₊ − g₋) (hutchinson.cpp)
#include <benchmark/benchmark.h>

#include <Eigen/Core>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "snip/llama_ops.h"
#include "snip/paired_stats.h"
#include "snip/parallel.h"
#include "snip/validate.h"

namespace {

std::vector<double> randn(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
std::vector<float> randnf(size_t n, uint64_t seed) {
  const std::vector<double> d = randn(n, seed);
  return std::vector<float>(d.begin(), d.end());
}

void require_close(const char* what, const std::vector<double>& a, const std::vector<double>& b, double tol) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / (1 + std::abs(b[i])));
  std::printf("check %s: max |eigen − loops| / (1 + |loops|) = %.2e\n", what, worst);
  if (!(worst <= tol)) {
    std::fprintf(stderr, "%s: the Eigen path disagrees with the loops (%.3e > %.1e); not timing\n", what, worst, tol);
    std::exit(1);
  }
}

// ---- the former loops ----

void attention_forward_loops(double* out, double* probs, const double* q, const double* k, const double* v, int B,
                             int T, int NH, int KVH, int HD) {
  const int rep = NH / KVH;
  const double scale = 1.0 / std::sqrt(double(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  snip::parallel_for(B * NH, int64_t(B) * NH * T * T * HD, [&](int64_t lo, int64_t hi) {
    for (int bh = int(lo); bh < int(hi); ++bh) {
      const int b = bh / NH, h = bh % NH, kh = h / rep;
      double* P = probs + int64_t(bh) * T * T;
      for (int t = 0; t < T; ++t) {
        const double* qt = q + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
        double* pt = P + int64_t(t) * T;
        double mx = -INFINITY;
        for (int u = 0; u <= t; ++u) {
          const double* ku = k + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
          double s = 0;
          for (int d = 0; d < HD; ++d) s += qt[d] * ku[d];
          s *= scale;
          pt[u] = s;
          mx = std::max(mx, s);
        }
        double sum = 0;
        for (int u = 0; u <= t; ++u) {
          pt[u] = std::exp(pt[u] - mx);
          sum += pt[u];
        }
        const double inv = 1.0 / sum;
        for (int u = 0; u <= t; ++u) pt[u] *= inv;
        for (int u = t + 1; u < T; ++u) pt[u] = 0;
        double* ot = out + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
        for (int d = 0; d < HD; ++d) ot[d] = 0;
        for (int u = 0; u <= t; ++u) {
          const double* vu = v + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
          for (int d = 0; d < HD; ++d) ot[d] += pt[u] * vu[d];
        }
      }
    }
  });
}

void attention_backward_loops(double* dq, double* dk, double* dv, const double* dout, const double* probs,
                              const double* q, const double* k, const double* v, int B, int T, int NH, int KVH,
                              int HD) {
  const int rep = NH / KVH;
  const double scale = 1.0 / std::sqrt(double(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  snip::parallel_for(B * KVH, int64_t(B) * NH * T * T * HD, [&](int64_t lo, int64_t hi) {
    for (int bk = int(lo); bk < int(hi); ++bk) {
      const int b = bk / KVH, kh = bk % KVH;
      std::vector<double> dS(T);
      for (int t = 0; t < T; ++t) {
        double* dkt = dk + (int64_t(b) * T + t) * ks + int64_t(kh) * HD;
        double* dvt = dv + (int64_t(b) * T + t) * ks + int64_t(kh) * HD;
        for (int d = 0; d < HD; ++d) dkt[d] = dvt[d] = 0;
      }
      for (int h = kh * rep; h < (kh + 1) * rep; ++h) {
        const double* P = probs + (int64_t(b) * NH + h) * T * T;
        for (int t = 0; t < T; ++t) {
          const double* pt = P + int64_t(t) * T;
          const double* dot = dout + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
          const double* qt = q + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
          double* dqt = dq + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
          double rowsum = 0;
          for (int u = 0; u <= t; ++u) {
            const double* vu = v + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            double* dvu = dv + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            double dp = 0;
            for (int d = 0; d < HD; ++d) dp += dot[d] * vu[d];
            for (int d = 0; d < HD; ++d) dvu[d] += pt[u] * dot[d];
            dS[u] = dp;
            rowsum += pt[u] * dp;
          }
          for (int d = 0; d < HD; ++d) dqt[d] = 0;
          for (int u = 0; u <= t; ++u) {
            const double ds = pt[u] * (dS[u] - rowsum) * scale;
            const double* ku = k + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            double* dku = dk + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            for (int d = 0; d < HD; ++d) {
              dqt[d] += ds * ku[d];
              dku[d] += ds * qt[d];
            }
          }
        }
      }
    }
  });
}

// SwiGLU's double path written with Eigen arrays: measured slower than the library's loop (Eigen's
// vectorized exp for double against glibc's exp), so the library keeps the loop; kept here as
// the record of that measurement.
void swiglu_forward_eigen(double* h, const double* g, const double* u, int64_t n) {
  snip::parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    const Eigen::Map<const Eigen::ArrayXd> G(g + lo, hi - lo), U(u + lo, hi - lo);
    Eigen::Map<Eigen::ArrayXd>(h + lo, hi - lo) = G / (1.0 + (-G).exp()) * U;
  });
}
void swiglu_backward_eigen(double* dg, double* du, const double* dh, const double* g, const double* u, int64_t n) {
  snip::parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    const Eigen::Map<const Eigen::ArrayXd> G(g + lo, hi - lo), U(u + lo, hi - lo), dH(dh + lo, hi - lo);
    const Eigen::ArrayXd s = 1.0 / (1.0 + (-G).exp());
    Eigen::Map<Eigen::ArrayXd>(du + lo, hi - lo) = dH * (G * s);
    Eigen::Map<Eigen::ArrayXd>(dg + lo, hi - lo) = dH * U * s * (1.0 + G * (1.0 - s));
  });
}

double mean_ci95_loops(const std::vector<double>& values) {  // the half-width, as mean_ci95's
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / double(values.size());
  double ss = 0;
  for (double v : values) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / double(values.size() - 1));
  return snip::student_t_975(int(values.size()) - 1) * sd / std::sqrt(double(values.size()));
}

double update_change_loops(const std::vector<float>& q, const std::vector<float>& c) {
  double d = 0;
  for (size_t i = 0; i < q.size(); ++i) {
    const double x = double(q[i]) - double(c[i]);
    d += x * x;
  }
  return d;
}
double update_change_eigen(const std::vector<float>& q, const std::vector<float>& c) {
  const auto uq = Eigen::Map<const Eigen::VectorXf>(q.data(), Eigen::Index(q.size())).cast<double>();
  const auto uc = Eigen::Map<const Eigen::VectorXf>(c.data(), Eigen::Index(c.size())).cast<double>();
  return (uq - uc).squaredNorm();
}

double block_trace_loops(const std::vector<int8_t>& sign, const std::vector<float>& gp, const std::vector<float>& gm) {
  double acc = 0;
  for (size_t i = 0; i < sign.size(); ++i) acc += sign[i] * (double(gp[i]) - double(gm[i]));
  return acc;
}
double block_trace_eigen(const std::vector<int8_t>& sign, const std::vector<float>& gp, const std::vector<float>& gm) {
  const Eigen::Index n = Eigen::Index(sign.size());
  const auto v = Eigen::Map<const Eigen::Array<int8_t, Eigen::Dynamic, 1>>(sign.data(), n);
  const auto p = Eigen::Map<const Eigen::ArrayXf>(gp.data(), n);
  const auto m = Eigen::Map<const Eigen::ArrayXf>(gm.data(), n);
  return (v.cast<double>() * (p.cast<double>() - m.cast<double>())).sum();
}

// ---- fixtures ----

// The `small` preset's attention at T = 128: 8 heads, 4 kv heads, head dim 32.
constexpr int kB = 1, kT = 128, kNH = 8, kKVH = 4, kHD = 32;
struct Attention {
  std::vector<double> q = randn(size_t(kB) * kT * kNH * kHD, 1), k = randn(size_t(kB) * kT * kKVH * kHD, 2),
                      v = randn(k.size(), 3), dout = randn(q.size(), 4);
  std::vector<double> out = std::vector<double>(q.size()), probs = std::vector<double>(size_t(kB) * kNH * kT * kT);
  std::vector<double> dq = std::vector<double>(q.size()), dk = std::vector<double>(k.size()),
                      dv = std::vector<double>(v.size());
};
constexpr int64_t kSwiGlu = 128 * 688;        // one (BT, F) activation of the small preset at T = 128
constexpr size_t kLayer = size_t(688) * 256;  // one MLP weight of the small preset
constexpr int kReplicates = 8, kLayers = 42;

void check_all() {
  Attention a, b;
  attention_forward_loops(a.out.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), kB, kT, kNH, kKVH, kHD);
  snip::ops::attention_forward_ref(b.out.data(), b.probs.data(), b.q.data(), b.k.data(), b.v.data(), kB, kT, kNH, kKVH,
                                   kHD);
  require_close("attention_forward_ref out", b.out, a.out, 1e-12);
  require_close("attention_forward_ref probs", b.probs, a.probs, 1e-12);
  attention_backward_loops(a.dq.data(), a.dk.data(), a.dv.data(), a.dout.data(), a.probs.data(), a.q.data(), a.k.data(),
                           a.v.data(), kB, kT, kNH, kKVH, kHD);
  snip::ops::attention_backward_ref(b.dq.data(), b.dk.data(), b.dv.data(), b.dout.data(), a.probs.data(), b.q.data(),
                                    b.k.data(), b.v.data(), kB, kT, kNH, kKVH, kHD);
  require_close("attention_backward_ref dq", b.dq, a.dq, 1e-12);
  require_close("attention_backward_ref dk", b.dk, a.dk, 1e-12);
  require_close("attention_backward_ref dv", b.dv, a.dv, 1e-12);

  const std::vector<double> g = randn(kSwiGlu, 5), u = randn(kSwiGlu, 6), dh = randn(kSwiGlu, 7);
  std::vector<double> h1(kSwiGlu), h2(kSwiGlu), dg1(kSwiGlu), dg2(kSwiGlu), du1(kSwiGlu), du2(kSwiGlu);
  snip::ops::swiglu_forward(h1.data(), g.data(), u.data(), kSwiGlu);
  swiglu_forward_eigen(h2.data(), g.data(), u.data(), kSwiGlu);
  require_close("swiglu_forward<double> (not adopted)", h2, h1, 1e-15);
  snip::ops::swiglu_backward(dg1.data(), du1.data(), dh.data(), g.data(), u.data(), kSwiGlu);
  swiglu_backward_eigen(dg2.data(), du2.data(), dh.data(), g.data(), u.data(), kSwiGlu);
  require_close("swiglu_backward<double> dg", dg2, dg1, 1e-15);
  require_close("swiglu_backward<double> du", du2, du1, 1e-15);

  const std::vector<double> reps = randn(kReplicates, 8);
  require_close("mean_ci95 half-width", {snip::mean_ci95(reps).ci95}, {mean_ci95_loops(reps)}, 1e-15);
  const std::vector<float> uq = randnf(kLayer, 9), uc = randnf(kLayer, 10);
  require_close("update change ‖u'−u‖²", {update_change_eigen(uq, uc)}, {update_change_loops(uq, uc)}, 1e-12);
  std::vector<int8_t> sign(kLayer);
  for (size_t i = 0; i < kLayer; ++i) sign[i] = (i * 2654435761u) >> 31 & 1 ? 1 : -1;
  require_close("block trace vᵀ(g₊−g₋)", {block_trace_eigen(sign, uq, uc)}, {block_trace_loops(sign, uq, uc)}, 1e-12);
}

// ---- benchmarks: loops and eigen twins ----

void BM_attention_forward_ref_loops(benchmark::State& st) {
  Attention a;
  for (auto _ : st) {
    attention_forward_loops(a.out.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), kB, kT, kNH, kKVH, kHD);
    benchmark::DoNotOptimize(a.out.data());
  }
}
void BM_attention_forward_ref_eigen(benchmark::State& st) {
  Attention a;
  for (auto _ : st) {
    snip::ops::attention_forward_ref(a.out.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), kB, kT, kNH,
                                     kKVH, kHD);
    benchmark::DoNotOptimize(a.out.data());
  }
}
void BM_attention_backward_ref_loops(benchmark::State& st) {
  Attention a;
  snip::ops::attention_forward_ref(a.out.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), kB, kT, kNH, kKVH,
                                   kHD);
  for (auto _ : st) {
    attention_backward_loops(a.dq.data(), a.dk.data(), a.dv.data(), a.dout.data(), a.probs.data(), a.q.data(),
                             a.k.data(), a.v.data(), kB, kT, kNH, kKVH, kHD);
    benchmark::DoNotOptimize(a.dq.data());
  }
}
void BM_attention_backward_ref_eigen(benchmark::State& st) {
  Attention a;
  snip::ops::attention_forward_ref(a.out.data(), a.probs.data(), a.q.data(), a.k.data(), a.v.data(), kB, kT, kNH, kKVH,
                                   kHD);
  for (auto _ : st) {
    snip::ops::attention_backward_ref(a.dq.data(), a.dk.data(), a.dv.data(), a.dout.data(), a.probs.data(), a.q.data(),
                                      a.k.data(), a.v.data(), kB, kT, kNH, kKVH, kHD);
    benchmark::DoNotOptimize(a.dq.data());
  }
}

struct SwiGlu {
  std::vector<double> g = randn(kSwiGlu, 5), u = randn(kSwiGlu, 6), dh = randn(kSwiGlu, 7);
  std::vector<double> h = std::vector<double>(kSwiGlu), dg = h, du = h;
};
void BM_swiglu_ref_loops(benchmark::State& st) {
  SwiGlu s;
  for (auto _ : st) {
    snip::ops::swiglu_forward(s.h.data(), s.g.data(), s.u.data(), kSwiGlu);
    snip::ops::swiglu_backward(s.dg.data(), s.du.data(), s.dh.data(), s.g.data(), s.u.data(), kSwiGlu);
    benchmark::DoNotOptimize(s.dg.data());
  }
}
void BM_swiglu_ref_eigen(benchmark::State& st) {
  SwiGlu s;
  for (auto _ : st) {
    swiglu_forward_eigen(s.h.data(), s.g.data(), s.u.data(), kSwiGlu);
    swiglu_backward_eigen(s.dg.data(), s.du.data(), s.dh.data(), s.g.data(), s.u.data(), kSwiGlu);
    benchmark::DoNotOptimize(s.dg.data());
  }
}

void BM_mean_ci95_loops(benchmark::State& st) {
  const std::vector<double> reps = randn(kReplicates, 8);
  for (auto _ : st) benchmark::DoNotOptimize(mean_ci95_loops(reps));
}
void BM_mean_ci95_eigen(benchmark::State& st) {
  const std::vector<double> reps = randn(kReplicates, 8);
  for (auto _ : st) benchmark::DoNotOptimize(snip::mean_ci95(reps));
}
void BM_spearman_eigen(benchmark::State& st) {  // no loops twin kept: ranking (std::sort) dominates
  const std::vector<double> a = randn(kLayers, 11), b = randn(kLayers, 12);
  for (auto _ : st) benchmark::DoNotOptimize(snip::spearman(a, b));
}

void BM_update_change_loops(benchmark::State& st) {
  const std::vector<float> q = randnf(kLayer, 9), c = randnf(kLayer, 10);
  for (auto _ : st) benchmark::DoNotOptimize(update_change_loops(q, c));
}
void BM_update_change_eigen(benchmark::State& st) {
  const std::vector<float> q = randnf(kLayer, 9), c = randnf(kLayer, 10);
  for (auto _ : st) benchmark::DoNotOptimize(update_change_eigen(q, c));
}
std::vector<int8_t> signs() {
  std::vector<int8_t> s(kLayer);
  for (size_t i = 0; i < kLayer; ++i) s[i] = (i * 2654435761u) >> 31 & 1 ? 1 : -1;
  return s;
}
void BM_block_trace_loops(benchmark::State& st) {
  const std::vector<float> gp = randnf(kLayer, 9), gm = randnf(kLayer, 10);
  const std::vector<int8_t> s = signs();
  for (auto _ : st) benchmark::DoNotOptimize(block_trace_loops(s, gp, gm));
}
void BM_block_trace_eigen(benchmark::State& st) {
  const std::vector<float> gp = randnf(kLayer, 9), gm = randnf(kLayer, 10);
  const std::vector<int8_t> s = signs();
  for (auto _ : st) benchmark::DoNotOptimize(block_trace_eigen(s, gp, gm));
}

BENCHMARK(BM_attention_forward_ref_loops)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_attention_forward_ref_eigen)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_attention_backward_ref_loops)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_attention_backward_ref_eigen)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_swiglu_ref_loops)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_swiglu_ref_eigen)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_mean_ci95_loops)->MeasureProcessCPUTime();
BENCHMARK(BM_mean_ci95_eigen)->MeasureProcessCPUTime();
BENCHMARK(BM_spearman_eigen)->MeasureProcessCPUTime();
BENCHMARK(BM_update_change_loops)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_update_change_eigen)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_block_trace_loops)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();
BENCHMARK(BM_block_trace_eigen)->Unit(benchmark::kMicrosecond)->MeasureProcessCPUTime();

}  // namespace

int main(int argc, char** argv) {
  check_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
