// oneDNN 2.6 matmuls for bench_numerics (see bench_onednn.h): f32, bf16 (FP32 accumulation) and
// u8 × s8 → s32 matmuls on a linear layer's GEMM shapes, and block scales along K emulated as one
// int8 matmul per K block. oneDNN runs on OpenMP threads here (Debian's build), so thread counts
// are set with omp_set_num_threads before a primitive is created (oneDNN plans its work split
// when the primitive is made).
#include "bench_onednn.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <oneapi/dnnl/dnnl.hpp>
#include <random>
#include <string>
#include <vector>

namespace snip_bench {
namespace {

using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

dnnl::engine& cpu() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}
dnnl::stream& cpu_stream() {
  static dnnl::stream s(cpu());
  return s;
}

// Y(M,N) = A(M,K)·B(K,N) with A and B in the layouts the layer's data has (`ba`: stored transposed).
struct Problem {
  int64_t M = 0, K = 0, N = 0;
  tag a = tag::ab, b = tag::ab;
};

Problem problem_of(snip::Gemm g, int64_t T, int64_t K, int64_t N) {
  switch (g) {
    case snip::Gemm::fprop:  // X(T,K)·W(N,K)ᵀ
      return {T, K, N, tag::ab, tag::ba};
    case snip::Gemm::dgrad:  // dY(T,N)·W(N,K)
      return {T, N, K, tag::ab, tag::ab};
    case snip::Gemm::wgrad:  // dY(T,N)ᵀ·X(T,K)
      return {N, T, K, tag::ba, tag::ab};
  }
  return {};
}

dt a_type(DnnlKind k) {
  return k == DnnlKind::f32 ? dt::f32 : k == DnnlKind::bf16 ? dt::bf16 : dt::u8;
}
dt b_type(DnnlKind k) {
  return k == DnnlKind::f32 ? dt::f32 : k == DnnlKind::bf16 ? dt::bf16 : dt::s8;
}
dt c_type(DnnlKind k) {
  return k == DnnlKind::int8 ? dt::s32 : dt::f32;
}

// Operand values: N(0,1) for f32/bf16; for int8 the integer ranges of E2M1 codes (2q ∈ [−12, 12];
// A offset into u8 as [0, 24]), held as floats so one reorder converts them exactly.
std::vector<float> operand(size_t n, DnnlKind kind, bool is_a, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  if (kind == DnnlKind::int8) {
    std::uniform_int_distribution<int> d(is_a ? 0 : -12, is_a ? 24 : 12);
    for (float& x : v) x = float(d(gen));
  } else {
    std::normal_distribution<float> d(0.0f, 1.0f);
    for (float& x : v) x = d(gen);
  }
  return v;
}

float bf16_round(float x) {  // RNE to BF16, as oneDNN's f32 → bf16 reorder (finite inputs)
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u;
  std::memcpy(&x, &u, 4);
  return x;
}

// C = A·B in FP32 by OpenBLAS on the natural layouts (exact for the int8 operands: every partial
// sum is an integer below 2^24).
std::vector<float> sgemm_reference(const Problem& p, const std::vector<float>& A, const std::vector<float>& B) {
  std::vector<float> C(size_t(p.M * p.N));
  const bool ta = p.a == tag::ba, tb = p.b == tag::ba;
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(p.M), int(p.N),
              int(p.K), 1, A.data(), ta ? int(p.M) : int(p.K), B.data(), tb ? int(p.K) : int(p.N), 0, C.data(),
              int(p.N));
  return C;
}

// One matmul primitive with its operands: FP32 sources in their natural layouts (a32, b32) and
// the kernel's operands (a, b; b in the layout oneDNN chose), filled by reorders.
struct Matmul {
  DnnlKind kind = DnnlKind::f32;
  dnnl::matmul prim;
  memory a32, b32, a, b, c;
  dnnl::reorder to_a, to_b;
  std::string impl;

  void convert() {
    if (kind != DnnlKind::f32) to_a.execute(cpu_stream(), a32, a);
    to_b.execute(cpu_stream(), b32, b);
  }
  void run(bool from_f32) {
    if (from_f32) convert();
    prim.execute(cpu_stream(), {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    cpu_stream().wait();
  }
  std::vector<float> result() const {
    std::vector<float> out(c.get_desc().get_size() / 4);
    if (kind == DnnlKind::int8) {
      const auto* s = static_cast<const int32_t*>(c.get_data_handle());
      for (size_t i = 0; i < out.size(); ++i) out[i] = float(s[i]);
    } else {
      std::memcpy(out.data(), c.get_data_handle(), out.size() * 4);
    }
    return out;
  }
};

// `A32`, `B32` must outlive the matmul (its FP32 memories point at them).
Matmul make_matmul(DnnlKind kind, const Problem& p, std::vector<float>& A32, std::vector<float>& B32) {
  const memory::desc a_md({p.M, p.K}, a_type(kind), p.a), b_any({p.K, p.N}, b_type(kind), tag::any),
      c_md({p.M, p.N}, c_type(kind), tag::ab);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), cpu());
  Matmul m;
  m.kind = kind;
  m.prim = dnnl::matmul(pd);
  m.impl = pd.impl_info_str();
  m.a32 = memory({{p.M, p.K}, dt::f32, p.a}, cpu(), A32.data());
  m.b32 = memory({{p.K, p.N}, dt::f32, p.b}, cpu(), B32.data());
  m.a = kind == DnnlKind::f32 ? m.a32 : memory(a_md, cpu());
  m.b = memory(pd.weights_desc(), cpu());
  m.c = memory(pd.dst_desc(), cpu());
  if (kind != DnnlKind::f32) m.to_a = dnnl::reorder(m.a32, m.a);
  m.to_b = dnnl::reorder(m.b32, m.b);
  m.convert();
  return m;
}

// Runs `make` and its result with `threads` OpenMP threads (oneDNN splits the work when the
// primitive is created), restoring the previous count.
template <class F>
auto with_threads(int threads, F make) {
  const int before = omp_get_max_threads();
  omp_set_num_threads(threads);
  auto out = make();
  omp_set_num_threads(before);
  return out;
}

// The thread counts whose results are compared with one thread's (4 oversubscribes 2 cores on
// purpose: oneDNN may split the reduction when it has more threads than output tiles).
constexpr int kCheckedThreads[] = {2, 4};

// "same bits 1/2/4 threads", or how many outputs differ from one thread's.
std::string thread_bits_label(const std::vector<float>& one, const std::vector<std::vector<float>>& others) {
  std::string label;
  for (size_t t = 0; t < others.size(); ++t) {
    size_t differ = 0;
    for (size_t i = 0; i < one.size(); ++i) differ += std::memcmp(&one[i], &others[t][i], 4) != 0;
    if (differ)
      label += (label.empty() ? "" : ", ") + std::to_string(kCheckedThreads[t]) +
               " threads: " + std::to_string(differ) + " of " + std::to_string(one.size()) +
               " outputs differ from 1 thread's";
  }
  return label.empty() ? "same bits 1/2/4 threads" : label;
}

// A result computed with 1 thread and with each of kCheckedThreads, as a thread_bits_label.
template <class F>
std::string thread_bits(F compute) {
  const std::vector<float> one = with_threads(1, compute);
  std::vector<std::vector<float>> others;
  for (int t : kCheckedThreads) others.push_back(with_threads(t, compute));
  return thread_bits_label(one, others);
}

// Largest |x − ref| relative to the largest |ref|.
double max_rel_diff(const std::vector<float>& x, const std::vector<float>& ref) {
  double d = 0, r = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    d = std::max(d, double(std::fabs(x[i] - ref[i])));
    r = std::max(r, double(std::fabs(ref[i])));
  }
  return r > 0 ? d / r : d;
}

}  // namespace

const char* dnnl_kind_name(DnnlKind k) {
  return k == DnnlKind::f32 ? "f32" : k == DnnlKind::bf16 ? "bf16" : "u8s8s32";
}

void BM_dnnl_matmul(benchmark::State& st, DnnlKind kind, snip::Gemm g, int64_t T, int64_t K, int64_t N, bool from_f32) {
  const Problem p = problem_of(g, T, K, N);
  std::vector<float> A = operand(size_t(p.M * p.K), kind, true, 11), B = operand(size_t(p.K * p.N), kind, false, 12);
  Matmul m = make_matmul(kind, p, A, B);
  // check: against sgemm of the same (for bf16: BF16-rounded) operands; int8 exactly.
  {
    m.run(false);
    std::vector<float> Ar = A, Br = B;
    if (kind == DnnlKind::bf16) {
      for (float& x : Ar) x = bf16_round(x);
      for (float& x : Br) x = bf16_round(x);
    }
    const std::vector<float> ref = sgemm_reference(p, Ar, Br), got = m.result();
    const double rel = max_rel_diff(got, ref);
    if (kind == DnnlKind::int8 ? rel != 0 : rel > 1e-4) {
      st.SkipWithError(("oneDNN matmul differs from sgemm: max rel diff " + std::to_string(rel)).c_str());
      return;
    }
  }
  st.SetLabel(m.impl + "; " + thread_bits([&] {
                Matmul t = make_matmul(kind, p, A, B);
                t.run(false);
                return t.result();
              }));
  for (auto _ : st) {
    m.run(from_f32);
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(T * K * N) * double(st.iterations()), benchmark::Counter::kIsRate);
}

namespace {

// Block scales along K by oneDNN: one u8×s8 → s32 matmul per K block, then an FP32 pass that
// adds that block's exact sums times the weight block's scale (per column) times the activation
// tile's scale (per row) to the blocks before, in a fixed order. oneDNN 2.6 cannot do the pass
// inside the matmul on its fast kernels: a per-row multiplier is only a binary post-op, and that
// (like runtime per-column output scales with a sum post-op) sends the matmul to its reference
// or plain-gemm kernel (ref_int8 ran 500× slower than sgemm here). Activations are stored block
// by block ((M, kblock) dense slices: strided slices also leave the brgemm kernel), as a
// quantizer would write them for this scheme.
struct KBlockMatmul {
  int64_t M, K, N, kblock, nkb;
  std::vector<uint8_t> A;                                // nkb dense (M, kblock) slices of the (M, K) codes + 12
  std::vector<int8_t> W;                                 // (N, K) codes
  std::vector<std::vector<float>> row_scale, col_scale;  // [kb]: sa[·, kb] (M), sw[j/128, kb] (N)
  dnnl::matmul prim;
  std::vector<memory> a_slices, w_packed;
  memory p;              // (M, N) s32: one block's exact sums
  std::vector<float> c;  // (M, N) FP32 result
  std::string impl;

  KBlockMatmul(int64_t m, int64_t k, int64_t n, int64_t kb) : M(m), K(k), N(n), kblock(kb), nkb(k / kb) {
    std::mt19937 gen(21);
    std::uniform_int_distribution<int> da(0, 24), dw(-12, 12);
    std::uniform_real_distribution<float> ds(0.5f, 2.0f);
    A.resize(size_t(M * K)), W.resize(size_t(N * K)), c.resize(size_t(M * N));
    for (auto& x : A) x = uint8_t(da(gen));
    for (auto& x : W) x = int8_t(dw(gen));
    std::vector<float> wblock(size_t((N + 127) / 128 * nkb));
    for (float& s : wblock) s = ds(gen);
    row_scale.assign(size_t(nkb), std::vector<float>(size_t(M)));
    col_scale.assign(size_t(nkb), std::vector<float>(size_t(N)));
    for (int64_t b = 0; b < nkb; ++b) {
      for (float& s : row_scale[size_t(b)]) s = ds(gen);
      for (int64_t j = 0; j < N; ++j) col_scale[size_t(b)][size_t(j)] = wblock[size_t(j / 128 * nkb + b)];
    }
    const memory::desc a_md({M, kblock}, dt::u8, tag::ab), w_md({kblock, N}, dt::s8, memory::dims{1, K}),
        w_any({kblock, N}, dt::s8, tag::any), p_md({M, N}, dt::s32, tag::ab);
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, w_any, p_md), cpu());
    prim = dnnl::matmul(pd);
    impl = pd.impl_info_str();
    p = memory(p_md, cpu());
    for (int64_t b = 0; b < nkb; ++b) {
      a_slices.emplace_back(a_md, cpu(), A.data() + b * M * kblock);
      memory w_user(w_md, cpu(), W.data() + b * kblock);
      w_packed.emplace_back(pd.weights_desc(), cpu());
      dnnl::reorder(w_user, w_packed.back()).execute(cpu_stream(), w_user, w_packed.back());
    }
    cpu_stream().wait();
  }
  // A's element (i, k) (A is stored block by block).
  uint8_t a(int64_t i, int64_t k) const { return A[size_t((k / kblock) * M * kblock + i * kblock + k % kblock)]; }
  void run() {
    for (int64_t b = 0; b < nkb; ++b) {
      prim.execute(cpu_stream(),
                   {{DNNL_ARG_SRC, a_slices[size_t(b)]}, {DNNL_ARG_WEIGHTS, w_packed[size_t(b)]}, {DNNL_ARG_DST, p}});
      cpu_stream().wait();
      const auto* P = static_cast<const int32_t*>(p.get_data_handle());
      const float* cs = col_scale[size_t(b)].data();
      const float* rs = row_scale[size_t(b)].data();
      float* C = c.data();
      const bool first = b == 0;
#pragma omp parallel for schedule(static)
      for (int64_t i = 0; i < M; ++i) {
        const int32_t* pi = P + i * N;
        float* ci = C + i * N;
        const float sa = rs[i];
        if (first)
          for (int64_t j = 0; j < N; ++j) ci[j] = float(pi[j]) * cs[j] * sa;
        else
          for (int64_t j = 0; j < N; ++j) ci[j] = float(pi[j]) * cs[j] * sa + ci[j];
      }
    }
  }
  std::vector<float> result() const {
    return c;
  }
  // The same sum in FP32, block by block: each block's exact integer product (sgemm of the codes:
  // integers below 2^24), times the column scale, times the row scale, plus the blocks before.
  std::vector<float> reference() const {
    std::vector<float> Af(size_t(M * K)), Wf(W.begin(), W.end()), P(size_t(M * N)), C(size_t(M * N), 0.0f);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) Af[size_t(i * K + k)] = float(a(i, k));
    for (int64_t b = 0; b < nkb; ++b) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(M), int(N), int(kblock), 1, Af.data() + b * kblock,
                  int(K), Wf.data() + b * kblock, int(K), 0, P.data(), int(N));
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
          const size_t ij = size_t(i * N + j);
          C[ij] = P[ij] * col_scale[size_t(b)][size_t(j)] * row_scale[size_t(b)][size_t(i)] + C[ij];
        }
    }
    return C;
  }
};

}  // namespace

void BM_dnnl_int8_kblocks(benchmark::State& st, int64_t M, int64_t K, int64_t N, int64_t kblock) {
  KBlockMatmul m(M, K, N, kblock);
  m.run();
  const std::vector<float> got = m.result(), ref = m.reference();
  const double rel = max_rel_diff(got, ref);
  if (rel > 1e-5) {
    st.SkipWithError(
        ("per-K-block oneDNN emulation differs from the FP32 block sum: max rel diff " + std::to_string(rel)).c_str());
    return;
  }
  size_t same_as_ref = 0;
  for (size_t i = 0; i < got.size(); ++i) same_as_ref += std::memcmp(&got[i], &ref[i], 4) == 0;
  const std::string bits = thread_bits([&] {
    KBlockMatmul t(M, K, N, kblock);
    t.run();
    return t.result();
  });
  st.SetLabel(m.impl + "; " + bits + "; " + std::to_string(same_as_ref * 100 / got.size()) +
              "% same bits as (P*sw)*sa+C in FP32");
  for (auto _ : st) {
    m.run();
    benchmark::ClobberMemory();
  }
  st.counters["GOP/s"] =
      benchmark::Counter(2.0 * double(M * K * N) * double(st.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace snip_bench
