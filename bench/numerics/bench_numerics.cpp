// Throughput of the numerics kernels, each checked against its reference before it is timed:
//  - fake_quantize per recipe/role in GB/s, single-threaded, as a ratio to memcpy of the same
//    buffer (target: snip FP4 activations >= 0.5× memcpy);
//  - quantized GEMMs (fprop/dgrad/wgrad) as a ratio to plain cblas_sgemm of the same shape
//    (target: FP4 fprop <= 0.4× sgemm time at 1024³, i.e. >= 2.5× faster), at 1024³ and at the
//    small model's shapes; FP4 also on the previous sgemm path (`*_sgemm_path`) in the same run,
//    and the integer E2M1 GEMM alone (`e2m1_kernel_only`);
//  - when built with oneDNN (`libdnnl-dev`, optional; bench_onednn.h), oneDNN's f32, bf16 and
//    u8×s8→s32 matmuls on the same shapes in the same run, and block scales along K emulated as
//    one oneDNN int8 matmul per K block (`onednn_u8s8s32_kblocks128`, against e2m1_kernel_only).
// Ratios are computed from times measured in the same run and printed after the table; run
// with --benchmark_repetitions=5 on a shared machine (the ratios use the fastest repetition).
// The quantize-and-pack and in-cache quantizer cases also time a memcpy right after each
// iteration (PairedMemcpy) and print the median of those paired ratios.
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <immintrin.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "snip/qgemm.h"
#include "snip/qlinear.h"
#include "snip/quant.h"
#ifdef SNIP_BENCH_ONEDNN
#include "bench_onednn.h"
#endif

namespace {

using namespace snip;

// Quantization threads outside the per-thread-count quantize benchmarks (0 = all cores).
// SNIP_BENCH_SINGLE_THREAD=1 (with OPENBLAS_NUM_THREADS=1) makes every kernel single-threaded,
// so CPU-time ratios are exact even on a machine shared with other jobs.
int g_default_threads = 0;

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  return v;
}

// ---- quantize-dequantize vs memcpy ----------------------------------------------------------
constexpr int64_t kRows = 2048, kCols = 2048;  // 16 MiB: larger than the caches

void BM_memcpy(benchmark::State& st) {
  const std::vector<float> x = randn(size_t(kRows * kCols), 1);
  std::vector<float> y(x.size());
  for (auto _ : st) {
    std::memcpy(y.data(), x.data(), x.size() * 4);
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kRows * kCols * 4);
}

// memcpy of its own 16 MiB, timed right after each timed iteration of a kernel that reads as
// many FP32 bytes: per pair, memcpy's time over the kernel's is the kernel's bandwidth as a
// multiple of memcpy's at that moment. The median over the pairs is reported as the counter
// `x_memcpy_paired`, with `pairs`. (memcpy alone runs at 12–29 GB/s in different processes on a
// shared VM; a ratio to a memcpy measured minutes earlier moves with it. The two also evict each
// other's data, so both read from DRAM.) The benchmark's time is the kernel's alone
// (UseManualTime).
class PairedMemcpy {
 public:
  PairedMemcpy() : src_(randn(size_t(kRows * kCols), 9)), dst_(src_.size()) {}
  template <class Kernel>
  void iteration(benchmark::State& st, Kernel&& kernel) {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    kernel();
    benchmark::ClobberMemory();
    const auto t1 = clock::now();
    std::memcpy(dst_.data(), src_.data(), src_.size() * 4);
    benchmark::ClobberMemory();
    const auto t2 = clock::now();
    const double k = std::chrono::duration<double>(t1 - t0).count(), m = std::chrono::duration<double>(t2 - t1).count();
    st.SetIterationTime(k);
    ratios_.push_back(m / k);
  }
  void report(benchmark::State& st) {
    if (ratios_.empty()) return;
    std::sort(ratios_.begin(), ratios_.end());
    const size_t n = ratios_.size();
    st.counters["x_memcpy_paired"] = n % 2 ? ratios_[n / 2] : 0.5 * (ratios_[n / 2 - 1] + ratios_[n / 2]);
    st.counters["pairs"] = double(n);
  }

 private:
  std::vector<float> src_, dst_;
  std::vector<double> ratios_;
};

struct QuantCase {
  const char* recipe;
  Precision p;
  Gemm g;
  Operand op;
};

void BM_quantize(benchmark::State& st, QuantCase c, int threads) {
  set_quant_threads(threads);
  const std::vector<float> x = randn(size_t(kRows * kCols), 2);
  std::vector<float> y(x.size());
  const QuantSpec spec = Recipe::named(c.recipe).spec(c.p, c.g, c.op);
  const RngKey key{1, 2, 3, 4};
  {  // check against the scalar reference on a 256-row slice before timing
    const int64_t rows = 256;
    std::vector<float> a(size_t(rows * kCols)), b(a.size());
    fake_quantize(a.data(), x.data(), rows, kCols, spec, key, "bench");
    fake_quantize_ref(b.data(), x.data(), rows, kCols, spec, key, "bench");
    if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0) {
      st.SkipWithError("fast kernel differs from fake_quantize_ref");
      set_quant_threads(g_default_threads);
      return;
    }
  }
  for (auto _ : st) {
    fake_quantize(y.data(), x.data(), kRows, kCols, spec, key, "bench");
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kRows * kCols * 4);
  set_quant_threads(g_default_threads);
}

// ---- GEMMs -------------------------------------------------------------------------------
void BM_sgemm(benchmark::State& st, Gemm g, int64_t T, int64_t K, int64_t N) {
  // A: X (T,K) or dY (T,N); B: W (N,K), or X (T,K) for wgrad.
  const std::vector<float> A = randn(size_t(T * std::max(K, N)), 3), B = randn(size_t(std::max(N, T) * K), 4);
  std::vector<float> C(size_t(std::max(T, N) * std::max(K, N)));
  for (auto _ : st) {
    switch (g) {
      case Gemm::fprop:  // Y(T,N) = X(T,K)·W(N,K)ᵀ
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1, A.data(), int(K), B.data(),
                    int(K), 0, C.data(), int(N));
        break;
      case Gemm::dgrad:  // dX(T,K) = dY(T,N)·W(N,K)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(K), int(N), 1, A.data(), int(N), B.data(),
                    int(K), 0, C.data(), int(K));
        break;
      case Gemm::wgrad:  // dW(N,K) = dY(T,N)ᵀ·X(T,K)
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(K), int(T), 1, A.data(), int(N), B.data(),
                    int(K), 0, C.data(), int(K));
        break;
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(T * K * N) * double(st.iterations()), benchmark::Counter::kIsRate);
}

// Sets the quantized GEMM mode for one benchmark and restores the automatic mode after it.
struct ModeScope {
  explicit ModeScope(QGemmMode m) { set_qgemm_mode(m); }
  ~ModeScope() { set_qgemm_mode(QGemmMode::automatic); }
};

// The checks before a quantized GEMM is timed; "" when they hold, else what differs.
std::string check_qgemm(const std::function<void()>& run, std::vector<float>& out, const Recipe& recipe,
                        const QLinearContext& ctx, Precision p, Gemm g, const std::vector<float>& X,
                        const std::vector<float>& W, int64_t T, int64_t K, int64_t N, QGemmMode mode) {
  if (p == Precision::fp4 && mode != QGemmMode::sgemm) {
    // check: the integer path's VNNI and scalar kernels agree bit for bit, and its BF16 outputs
    // differ from the dequantize-then-sgemm path's in at most 0.1% of the elements (rounding
    // boundaries; tests/numerics/test_qgemm.cpp checks each one).
    std::vector<float> a(out.size()), b(out.size());
    run();
    a = out;
    set_qgemm_mode(QGemmMode::scalar);
    run();
    b = out;
    set_qgemm_mode(QGemmMode::sgemm);
    run();
    set_qgemm_mode(mode);
    int64_t differing = 0;
    for (size_t i = 0; i < out.size(); ++i) differing += a[i] != out[i];
    if (std::memcmp(a.data(), b.data(), a.size() * 4) != 0) {
      return std::string("the VNNI and scalar FP4 kernels differ");
    }
    if (double(differing) > 1e-3 * double(out.size())) {
      return std::string("the integer FP4 path differs from the sgemm path in more than 0.1% of the outputs");
    }
  } else if ((p == Precision::fp8 || p == Precision::bf16) && mode != QGemmMode::sgemm) {
    // check: the BF16-element GEMM's vdpbf16ps and FMA kernels agree bit for bit (the scalar
    // twin is checked in tests/numerics/test_qgemm_bf16.cpp), and its BF16 outputs differ from
    // the dequantize-then-sgemm path's in at most 1% of the elements (rounding boundaries).
    std::vector<float> a;
    run();
    a = out;
    set_qgemm_mode(QGemmMode::fma);
    run();
    const bool same = std::memcmp(a.data(), out.data(), a.size() * 4) == 0;
    set_qgemm_mode(QGemmMode::sgemm);
    run();
    set_qgemm_mode(mode);
    int64_t differing = 0;
    for (size_t i = 0; i < out.size(); ++i) differing += a[i] != out[i];
    if (!same) {
      return std::string("the vdpbf16ps and FMA kernels differ");
    }
    if (double(differing) > 1e-2 * double(out.size())) {
      return std::string("the BF16-element path differs from the sgemm path in more than 1% of the outputs");
    }
  } else {  // check: the fprop output equals BF16(sgemm of the reference-quantized operands)
    if (g == Gemm::fprop) {
      std::vector<float> Xq(X.size()), Wq(W.size()), ref(size_t(T * N));
      fake_quantize_ref(Xq.data(), X.data(), T, K, recipe.spec(p, g, Operand::activation),
                        qlinear_rng_key(ctx, g, Operand::activation), "X");
      fake_quantize_ref(Wq.data(), W.data(), N, K, recipe.spec(p, g, Operand::weight),
                        qlinear_rng_key(ctx, g, Operand::weight), "W");
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1, Xq.data(), int(K), Wq.data(),
                  int(K), 0, ref.data(), int(N));
      QuantSpec bf;
      bf.format = ElemFormat::bf16;
      if (p != Precision::fp32) fake_quantize_ref(ref.data(), ref.data(), T, N, bf, {}, "Y");
      run();
      if (std::memcmp(ref.data(), out.data(), ref.size() * 4) != 0) {
        return std::string("qlinear_fprop differs from sgemm of reference-quantized operands");
      }
    }
  }
  return "";
}

void BM_qgemm(benchmark::State& st, const char* recipe_name, Precision p, Gemm g, int64_t T, int64_t K, int64_t N,
              QGemmMode mode) {
  const ModeScope scope(mode);
  const Recipe recipe = Recipe::named(recipe_name);
  QLinearContext ctx;
  ctx.recipe = &recipe;
  ctx.seed = 1;
  const std::vector<float> X = randn(size_t(T * K), 5), W = randn(size_t(N * K), 6), dY = randn(size_t(T * N), 7);
  std::vector<float> out(size_t(std::max(T * N, std::max(T * K, N * K))));
  auto run = [&] {
    switch (g) {
      case Gemm::fprop:
        qlinear_fprop(out.data(), X.data(), W.data(), T, K, N, p, ctx);
        break;
      case Gemm::dgrad:
        qlinear_dgrad(out.data(), dY.data(), W.data(), T, K, N, p, ctx);
        break;
      case Gemm::wgrad:
        qlinear_wgrad(out.data(), dY.data(), X.data(), T, K, N, p, ctx);
        break;
    }
  };
  if (const std::string error = check_qgemm(run, out, recipe, ctx, p, g, X, W, T, K, N, mode); !error.empty()) {
    st.SkipWithError(error.c_str());
    return;
  }
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(T * K * N) * double(st.iterations()), benchmark::Counter::kIsRate);
}

// The integer E2M1 GEMM alone on operands quantized once (fprop; snip: 1×128 tiles and 128×128
// weight blocks, mx: 1×32, nvfp4: 1×16 / 16×16), and the quantization straight to codes, to see
// where the time of the FP4 fprop goes.
void BM_e2m1_kernel(benchmark::State& st, const char* recipe_name, int64_t T, int64_t K, int64_t N, QGemmMode mode) {
  const ModeScope scope(mode);
  const Recipe recipe = Recipe::named(recipe_name);
  const QuantSpec sx = recipe.spec(Precision::fp4, Gemm::fprop, Operand::activation),
                  sw = recipe.spec(Precision::fp4, Gemm::fprop, Operand::weight);
  const std::vector<float> X = randn(size_t(T * K), 5), W = randn(size_t(N * K), 6);
  std::vector<int8_t> cx(X.size()), cw(W.size());
  std::vector<float> scx(size_t(e2m1_scale_count(T, K, sx))), scw(size_t(e2m1_scale_count(N, K, sw)));
  quantize_e2m1_code2(cx.data(), scx.data(), X.data(), T, K, sx, {}, "X");
  quantize_e2m1_code2(cw.data(), scw.data(), W.data(), N, K, sw, {}, "W");
  const E2M1Operand A = e2m1_operand(cx.data(), scx.data(), T, K, sx, true);
  const E2M1Operand B = e2m1_operand(cw.data(), scw.data(), N, K, sw, true);
  std::vector<float> C(size_t(T * N));
  for (auto _ : st) {
    qgemm_e2m1(C.data(), N, T, N, K, A, B);
    benchmark::ClobberMemory();
  }
  st.counters["GOP/s"] =
      benchmark::Counter(2.0 * double(T * K * N) * double(st.iterations()), benchmark::Counter::kIsRate);
}

// The BF16-element GEMM alone (run(): widening and kernel) on operands quantized once into
// its packed layout (fprop, `snip` recipe: BF16, or FP8 with 1×128 tiles and 128×128 weight
// blocks), against cblas_sgemm of the same shape in the same run.
void BM_bf16_kernel(benchmark::State& st, Precision p, int64_t T, int64_t K, int64_t N) {
  const Recipe recipe = Recipe::named("snip");
  const QuantSpec sx = recipe.spec(p, Gemm::fprop, Operand::activation),
                  sw = recipe.spec(p, Gemm::fprop, Operand::weight);
  const std::vector<float> X = randn(size_t(T * K), 5), W = randn(size_t(N * K), 6);
  static const float kMarker = 1.0f;  // prepare reads only whether an operand has scales
  const Bf16Operand A =
      bf16_operand(nullptr, nullptr, sx.format == ElemFormat::bf16 ? nullptr : &kMarker, T, K, sx, true);
  const Bf16Operand B =
      bf16_operand(nullptr, nullptr, sw.format == ElemFormat::bf16 ? nullptr : &kMarker, N, K, sw, true);
  Bf16Gemm g;
  g.prepare(T, N, K, A, B);
  g.quantize_a(X.data(), T, K, sx, {}, "X", true);
  g.quantize_b(W.data(), N, K, sw, {}, "W", true);
  std::vector<float> C(size_t(T * N));
  for (auto _ : st) {
    if (!g.run(C.data(), N)) {
      st.SkipWithError("an operand was not BF16-exact");
      return;
    }
    benchmark::ClobberMemory();
  }
  st.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * double(T * K * N) * double(st.iterations()), benchmark::Counter::kIsRate);
}

void BM_quantize_code2(benchmark::State& st, QuantCase c, int threads) {
  set_quant_threads(threads);
  const std::vector<float> x = randn(size_t(kRows * kCols), 2);
  const QuantSpec spec = Recipe::named(c.recipe).spec(c.p, c.g, c.op);
  std::vector<int8_t> codes(x.size());
  std::vector<float> scales(size_t(e2m1_scale_count(kRows, kCols, spec)));
  for (auto _ : st) {
    quantize_e2m1_code2(codes.data(), scales.data(), x.data(), kRows, kCols, spec, {1, 2, 3, 4}, "bench");
    benchmark::ClobberMemory();
  }
  st.SetBytesProcessed(int64_t(st.iterations()) * kRows * kCols * 4);
  set_quant_threads(g_default_threads);
}

// The same quantization to codes on a 128 × 256 input (128 KiB) that stays in L2 between
// iterations (quantized kRows · kCols / (128 · 256) times per iteration, so as many elements as
// memcpy copies): the quantizer's compute cost without DRAM, against memcpy's DRAM bandwidth.
// (For the stochastically rounded operands this is the floor the SR rule sets: its hash, two
// murmur3 finalizers per element, is fixed by the bit-exact rounding rules.)
void BM_quantize_code2_in_cache(benchmark::State& st, QuantCase c) {
  set_quant_threads(1);
  constexpr int64_t rows = 128, cols = 256;
  const std::vector<float> x = randn(size_t(rows * cols), 4);
  const QuantSpec spec = Recipe::named(c.recipe).spec(c.p, c.g, c.op);
  std::vector<int8_t> codes(x.size());
  std::vector<float> scales(size_t(e2m1_scale_count(rows, cols, spec)));
  constexpr int64_t reps = kRows * kCols / (rows * cols);  // as many elements as memcpy's input
  PairedMemcpy paired;
  for (auto _ : st)
    paired.iteration(st, [&] {
      for (int64_t i = 0; i < reps; ++i)
        quantize_e2m1_code2(codes.data(), scales.data(), x.data(), rows, cols, spec, {1, 2, 3, uint32_t(i)}, "bench");
    });
  paired.report(st);
  st.SetBytesProcessed(int64_t(st.iterations()) * reps * rows * cols * 4);
  set_quant_threads(g_default_threads);
}

// The quantizer's read order alone: max |x| over the kRows × kCols input from DRAM, in row
// order or in strips of 128 rows × `strip` columns (the order of 128 × 128 blocks read one block
// column at a time), 16 lanes per instruction as the AVX-512 quantizer reads. No rounding, no
// stores: what the order costs the memory system. (Registered on CPUs with AVX-512F.)
// (GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized and
// -Wuninitialized report once inlined; the value is never read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
__attribute__((target("avx512f"))) uint32_t max_abs_bits_in_strips(const float* x, int64_t strip) {
  __m512i m = _mm512_setzero_si512();
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t r0 = 0; r0 < kRows; r0 += 128)
    for (int64_t c0 = 0; c0 < kCols; c0 += strip)
      for (int64_t r = r0; r < r0 + 128; ++r) {
        const float* p = x + r * kCols + c0;
        for (int64_t c = 0; c < strip; c += 16)
          m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(p + c), abs_mask));
      }
  return _mm512_reduce_max_epu32(m);
}
#pragma GCC diagnostic pop

void BM_read_order(benchmark::State& st, int64_t strip) {
  const std::vector<float> x = randn(size_t(kRows * kCols), 5);
  PairedMemcpy paired;
  uint32_t sink = 0;
  for (auto _ : st)
    paired.iteration(st, [&] {
      sink ^= max_abs_bits_in_strips(x.data(), strip);
      benchmark::DoNotOptimize(sink);
    });
  paired.report(st);
  st.SetBytesProcessed(int64_t(st.iterations()) * kRows * kCols * 4);
}

// An FP4 operand (kRows × kCols) quantized into the integer GEMM's packed layout, as the GEMM
// reads it: straight into the layout (E2M1Gemm::quantize_a/_b, what qlinear does) or, the
// previous way, to row-major codes that are then packed. As A or B, reduced along its columns
// or down its rows: each FP4 operand of a training step (fprop's X and W, dgrad's dY and W,
// wgrad's dY and X). The fused bytes are checked against the two-pass ones first.
void BM_quantize_pack(benchmark::State& st, QuantCase c, bool as_a, bool along_cols, bool fused, int threads) {
  set_quant_threads(threads);
  const std::vector<float> x = randn(size_t(kRows * kCols), 3);
  const QuantSpec spec = Recipe::named(c.recipe).spec(c.p, c.g, c.op);
  std::vector<int8_t> codes(x.size());
  std::vector<float> scales(size_t(e2m1_scale_count(kRows, kCols, spec)));
  const E2M1Operand view = e2m1_operand(codes.data(), scales.data(), kRows, kCols, spec, along_cols);
  const int64_t n = along_cols ? kRows : kCols, k = along_cols ? kCols : kRows;
  E2M1Gemm g;
  g.prepare(n, n, k, view, view);
  auto two_pass = [&](E2M1Gemm& to) {
    quantize_e2m1_code2(codes.data(), scales.data(), x.data(), kRows, kCols, spec, {1, 2, 3, 4}, "bench");
    if (as_a)
      to.pack_a(view);
    else
      to.pack_b(view);
  };
  auto one_pass = [&](E2M1Gemm& to) {
    if (as_a)
      to.quantize_a(x.data(), kRows, kCols, spec, {1, 2, 3, 4}, "bench", along_cols);
    else
      to.quantize_b(x.data(), kRows, kCols, spec, {1, 2, 3, 4}, "bench", along_cols);
  };
  {
    E2M1Gemm check;
    check.prepare(n, n, k, view, view);
    two_pass(check);
    // The other side packed the same way in both, so only this side can differ.
    if (as_a) {
      check.pack_b(view);
      g.pack_b(view);
    } else {
      check.pack_a(view);
      g.pack_a(view);
    }
    one_pass(g);
    if (!g.packing_difference(check).empty()) {
      st.SkipWithError("quantizing into the packed layout differs from quantize-then-pack");
      return;
    }
  }
  PairedMemcpy paired;
  for (auto _ : st)
    paired.iteration(st, [&] {
      if (fused)
        one_pass(g);
      else
        two_pass(g);
    });
  paired.report(st);
  st.SetBytesProcessed(int64_t(st.iterations()) * kRows * kCols * 4);
  set_quant_threads(g_default_threads);
}

// ---- one transformer block's linear layers, as a training step runs them ------------------
// The 7 linear layers of a `small` block (C=256, 4 kv heads of 32, F=688) at B·T = 2048 tokens
// (the bench_train step), each through fprop, dgrad and wgrad (accumulating, as the model
// does): plain cblas_sgemm for fp32 (the model's fp32 path), qlinear_* with the snip recipe
// otherwise. Quantization and OpenBLAS both use all threads, so this shows what the training
// step pays per block, thread wake-ups and OpenBLAS's yielding worker included.
struct BlockLinear {
  int64_t K, N;
};
constexpr BlockLinear kBlockLinears[] = {{256, 256}, {256, 128}, {256, 128}, {256, 256},
                                         {256, 688}, {256, 688}, {688, 256}};
constexpr int64_t kBlockTokens = 2048;

double process_cpu_seconds() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

void BM_block(benchmark::State& st, Precision p) {
  const int64_t T = kBlockTokens;
  const Recipe recipe = Recipe::named("snip");
  QLinearContext ctx;
  ctx.recipe = &recipe;
  ctx.seed = 1;
  struct Layer {
    std::vector<float> X, W, dY, Y, dX, dW;
  };
  std::vector<Layer> layers;
  uint32_t seed = 10;
  for (const BlockLinear& l : kBlockLinears) {
    Layer a;
    a.X = randn(size_t(T * l.K), seed++), a.W = randn(size_t(l.N * l.K), seed++), a.dY = randn(size_t(T * l.N), seed++);
    for (float& w : a.W) w *= 0.05f;
    a.Y.resize(size_t(T * l.N)), a.dX.resize(size_t(T * l.K)), a.dW.assign(size_t(l.N * l.K), 0.0f);
    layers.push_back(std::move(a));
  }
  auto run = [&] {
    for (size_t i = 0; i < layers.size(); ++i) {
      const int K = int(kBlockLinears[i].K), N = int(kBlockLinears[i].N);
      Layer& a = layers[i];
      ctx.layer = uint32_t(i);
      if (p == Precision::fp32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), N, K, 1, a.X.data(), K, a.W.data(), K, 0,
                    a.Y.data(), N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), K, N, 1, a.dY.data(), N, a.W.data(), K, 0,
                    a.dX.data(), K);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, N, K, int(T), 1, a.dY.data(), N, a.X.data(), K, 1,
                    a.dW.data(), K);
      } else {
        qlinear_fprop(a.Y.data(), a.X.data(), a.W.data(), T, K, N, p, ctx);
        qlinear_dgrad(a.dX.data(), a.dY.data(), a.W.data(), T, K, N, p, ctx);
        qlinear_wgrad(a.dW.data(), a.dY.data(), a.X.data(), T, K, N, p, ctx, /*accumulate=*/true);
      }
    }
  };
  run();  // warm-up: workspaces, OpenBLAS buffers
  const double cpu0 = process_cpu_seconds();
  for (auto _ : st) {
    run();
    benchmark::ClobberMemory();
  }
  st.counters["process_cpu_ms"] = 1e3 * (process_cpu_seconds() - cpu0) / double(st.iterations());
  st.SetLabel(std::string("snip ") + precision_name(p));
}

// Collects each benchmark's real time per iteration so ratios can be printed at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> seconds, cpu_seconds, process_cpu_ms, paired;
  std::map<std::string, int> pairs;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      if (r.error_occurred || r.run_type != Run::RT_Iteration) continue;
      std::string name = r.benchmark_name();
      for (const std::string suffix : {"/real_time", "/manual_time"})
        if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
          name.resize(name.size() - suffix.size());
      // With --benchmark_repetitions=n keep the fastest repetition: on a machine shared with
      // other jobs the minimum is the least disturbed estimate of the kernel's own cost.
      const double real = r.GetAdjustedRealTime() * benchmark::GetTimeUnitMultiplier(r.time_unit);
      const double cpu = r.GetAdjustedCPUTime() * benchmark::GetTimeUnitMultiplier(r.time_unit);
      if (!seconds.count(name) || real < seconds[name]) seconds[name] = real;
      if (!cpu_seconds.count(name) || cpu < cpu_seconds[name]) cpu_seconds[name] = cpu;
      if (auto c = r.counters.find("process_cpu_ms"); c != r.counters.end())
        if (!process_cpu_ms.count(name) || c->second < process_cpu_ms[name]) process_cpu_ms[name] = c->second;
      if (auto c = r.counters.find("x_memcpy_paired"); c != r.counters.end()) {  // the last repetition's
        paired[name] = c->second;
        pairs[name] = int(r.counters.at("pairs"));
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
};

struct Ratio {
  std::string name, reference;
  bool throughput;  // true: reference_time / time (fraction of memcpy bandwidth); false: time / reference_time
};
std::vector<Ratio> g_ratios;

// The quantizer against memcpy: every recipe's operands, 1 and 2 threads, to codes, in cache, read order.
void register_quantizer() {
  benchmark::RegisterBenchmark("quant/memcpy", BM_memcpy)->UseRealTime()->Unit(benchmark::kMicrosecond);
  const std::pair<const char*, QuantCase> quant_cases[] = {
      {"snip_fp4_activation_1x128", {"snip", Precision::fp4, Gemm::fprop, Operand::activation}},
      {"snip_fp4_weight_128x128", {"snip", Precision::fp4, Gemm::fprop, Operand::weight}},
      {"snip_fp4_gradient_1x128_sr", {"snip", Precision::fp4, Gemm::dgrad, Operand::gradient}},
      {"snip_fp4_wgrad_x_128x1", {"snip", Precision::fp4, Gemm::wgrad, Operand::activation}},
      {"snip_fp8_activation_1x128", {"snip", Precision::fp8, Gemm::fprop, Operand::activation}},
      {"mx_fp8_activation_1x32", {"mx", Precision::fp8, Gemm::fprop, Operand::activation}},
      {"mx_fp4_activation_1x32", {"mx", Precision::fp4, Gemm::fprop, Operand::activation}},
      {"nvfp4_fp4_activation_1x16", {"nvfp4", Precision::fp4, Gemm::fprop, Operand::activation}},
      {"nvfp4_fp4_weight_16x16", {"nvfp4", Precision::fp4, Gemm::fprop, Operand::weight}},
      {"tensor_fp4_activation", {"tensor", Precision::fp4, Gemm::fprop, Operand::activation}},
      {"bf16", {"snip", Precision::bf16, Gemm::fprop, Operand::activation}},
  };
  for (const auto& [name, c] : quant_cases) {
    const std::string n = std::string("quant/") + name + "/threads:1";
    benchmark::RegisterBenchmark(n.c_str(), BM_quantize, c, 1)->UseRealTime()->Unit(benchmark::kMicrosecond);
    g_ratios.push_back({n, "quant/memcpy", true});
  }
  {
    const std::string n = "quant/snip_fp4_activation_1x128/threads:2";
    benchmark::RegisterBenchmark(n.c_str(), BM_quantize, quant_cases[0].second, 2)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    g_ratios.push_back({n, "quant/memcpy", true});
  }

  for (int threads : {1, 2}) {
    const std::string n = "quant/snip_fp4_activation_1x128_to_codes/threads:" + std::to_string(threads);
    benchmark::RegisterBenchmark(n.c_str(), BM_quantize_code2, quant_cases[0].second, threads)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    g_ratios.push_back({n, "quant/memcpy", true});
  }
  for (const auto& [name, c] :
       {std::pair<const char*, QuantCase>{"snip_fp4_activation_1x128", quant_cases[0].second},
        {"snip_fp4_gradient_1x128_sr", quant_cases[2].second},
        {"snip_fp4_wgrad_dy_128x1_sr", {"snip", Precision::fp4, Gemm::wgrad, Operand::gradient}}}) {
    const std::string n = std::string("quant/in_cache/") + name + "_to_codes/threads:1";
    benchmark::RegisterBenchmark(n.c_str(), BM_quantize_code2_in_cache, c)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    g_ratios.push_back({n, "quant/memcpy", true});
  }
  for (int64_t strip : {kCols, int64_t(128), int64_t(1024)}) {
    if (!__builtin_cpu_supports("avx512f")) break;
    const std::string n =
        strip == kCols ? std::string("quant/read_order/rows") : "quant/read_order/strips_128x" + std::to_string(strip);
    benchmark::RegisterBenchmark(n.c_str(), BM_read_order, strip)->UseManualTime()->Unit(benchmark::kMicrosecond);
    g_ratios.push_back({n, "quant/memcpy", true});
  }
}

// Quantize-and-pack of every GEMM operand, fused and not, against memcpy.
void register_pack() {
  struct PackCase {
    const char* name;
    QuantCase c;
    bool as_a, along_cols;
  };
  const PackCase pack_cases[] = {
      {"fprop_x_1x128_as_A", {"snip", Precision::fp4, Gemm::fprop, Operand::activation}, true, true},
      {"fprop_w_128x128_as_B", {"snip", Precision::fp4, Gemm::fprop, Operand::weight}, false, true},
      {"dgrad_dy_1x128_sr_as_A", {"snip", Precision::fp4, Gemm::dgrad, Operand::gradient}, true, true},
      {"dgrad_w_128x128_as_B", {"snip", Precision::fp4, Gemm::dgrad, Operand::weight}, false, false},
      {"wgrad_dy_128x1_sr_as_A", {"snip", Precision::fp4, Gemm::wgrad, Operand::gradient}, true, false},
      {"wgrad_x_128x1_as_B", {"snip", Precision::fp4, Gemm::wgrad, Operand::activation}, false, false}};
  for (const PackCase& pc : pack_cases)
    for (int threads : {1, 2})
      for (bool fused : {true, false}) {
        const std::string n = std::string("quant/pack_") + pc.name + (fused ? "" : "_quantize_then_pack") +
                              "/threads:" + std::to_string(threads);
        benchmark::RegisterBenchmark(n.c_str(), BM_quantize_pack, pc.c, pc.as_a, pc.along_cols, fused, threads)
            ->UseManualTime()
            ->Unit(benchmark::kMicrosecond);
        g_ratios.push_back({n, "quant/memcpy", true});
      }
}

// The GEMM kernels alone (E2M1, oneDNN's int8, the BF16-element kernel) and a whole block.
void register_kernels() {
  for (const char* recipe : {"snip", "mx", "nvfp4"}) {
    const std::string prefix = std::string(recipe) == "snip" ? "" : std::string(recipe) + "_";  // names kept
    const std::string n = "gemm/1024^3/fprop/" + prefix + "e2m1_kernel_only";
    benchmark::RegisterBenchmark(n.c_str(), BM_e2m1_kernel, recipe, 1024, 1024, 1024, QGemmMode::automatic)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    g_ratios.push_back({n, "gemm/1024^3/fprop/sgemm", false});
  }
#ifdef SNIP_BENCH_ONEDNN
  // Block scales along K by oneDNN: one int8 matmul per K block (128: snip tiles and weight
  // blocks; 32: MX; 16: NVFP4), kernel only like e2m1_kernel_only.
  for (int64_t kblock : {128, 32, 16}) {
    const std::string n = "gemm/1024^3/fprop/onednn_u8s8s32_kblocks" + std::to_string(kblock);
    benchmark::RegisterBenchmark(n.c_str(), snip_bench::BM_dnnl_int8_kblocks, 1024, 1024, 1024, kblock)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
    g_ratios.push_back({n, "gemm/1024^3/fprop/sgemm", false});
  }
#endif

  // The training step's fprop shapes (small preset, 2048 tokens): the BF16-element kernel alone.
  for (const auto& [K, N] : {std::pair<int64_t, int64_t>{256, 256}, {256, 688}, {688, 256}}) {
    const std::string base = "gemm/T2048_K" + std::to_string(K) + "_N" + std::to_string(N) + "/fprop/";
    benchmark::RegisterBenchmark((base + "sgemm").c_str(), BM_sgemm, Gemm::fprop, int64_t(2048), K, N)
        ->UseRealTime()
        ->Unit(benchmark::kMicrosecond);
    for (Precision p : {Precision::bf16, Precision::fp8}) {
      const std::string n = base + precision_name(p) + "_kernel_only";
      benchmark::RegisterBenchmark(n.c_str(), BM_bf16_kernel, p, int64_t(2048), K, N)
          ->UseRealTime()
          ->Unit(benchmark::kMicrosecond);
      g_ratios.push_back({n, base + "sgemm", false});
    }
  }

  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp8, Precision::fp4}) {
    const std::string n = std::string("block/T2048_small/") + precision_name(p);
    benchmark::RegisterBenchmark(n.c_str(), BM_block, p)->UseRealTime()->Unit(benchmark::kMillisecond);
    if (p != Precision::fp32) g_ratios.push_back({n, "block/T2048_small/fp32", false});
  }
}

// Every quantized GEMM of 1024³ and the small model's shapes against sgemm, each GEMM role.
void register_gemms() {
  struct Shape {
    const char* name;
    int64_t T, K, N;
  };
  // 1024³, and the small model (C=256, F=688, 4096 tokens per step): q/k/v/o (K=N=256),
  // gate/up (K=256, N=688), down (K=688, N=256).
  const Shape shapes[] = {{"1024^3", 1024, 1024, 1024},
                          {"T4096_K256_N256", 4096, 256, 256},
                          {"T4096_K256_N688", 4096, 256, 688},
                          {"T4096_K688_N256", 4096, 688, 256}};
  for (const Shape& s : shapes) {
    for (Gemm g : kAllGemms) {
      if (std::string(s.name) == "1024^3" && g != Gemm::fprop) continue;
      const std::string base = std::string("gemm/") + s.name + "/" + gemm_name(g);
      benchmark::RegisterBenchmark((base + "/sgemm").c_str(), BM_sgemm, g, s.T, s.K, s.N)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
      struct Variant {
        const char* recipe;
        Precision p;
        QGemmMode mode;
        const char* suffix;
      };
      // FP4 twice: the integer path (the default) and the previous dequantize-then-sgemm path,
      // interleaved in the same run.
      const Variant variants[] = {{"snip", Precision::fp4, QGemmMode::automatic, ""},
                                  {"snip", Precision::fp4, QGemmMode::sgemm, "_sgemm_path"},
                                  {"snip", Precision::fp8, QGemmMode::automatic, ""},
                                  {"snip", Precision::fp8, QGemmMode::sgemm, "_sgemm_path"},
                                  {"snip", Precision::fp8, QGemmMode::fma, "_fma_kernel"},
                                  {"snip", Precision::bf16, QGemmMode::automatic, ""},
                                  {"snip", Precision::bf16, QGemmMode::sgemm, "_sgemm_path"},
                                  {"nvfp4", Precision::fp4, QGemmMode::automatic, ""},
                                  {"mx", Precision::fp4, QGemmMode::automatic, ""},
                                  {"mx", Precision::fp8, QGemmMode::automatic, ""}};
      for (const auto& [recipe, p, mode, suffix] : variants) {
        const std::string n = base + "/" + recipe + "_" + precision_name(p) + suffix;
        benchmark::RegisterBenchmark(n.c_str(), BM_qgemm, recipe, p, g, s.T, s.K, s.N, mode)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        g_ratios.push_back({n, base + "/sgemm", false});
      }
#ifdef SNIP_BENCH_ONEDNN
      // oneDNN on the same GEMM: the kernel alone on operands already converted (weights in its
      // preferred layout), and bf16 / f32 starting from the FP32 operands as a training step has them.
      using snip_bench::DnnlKind;
      const std::pair<DnnlKind, bool> dnnl_variants[] = {{DnnlKind::f32, false},
                                                         {DnnlKind::bf16, false},
                                                         {DnnlKind::int8, false},
                                                         {DnnlKind::f32, true},
                                                         {DnnlKind::bf16, true}};
      for (const auto& [kind, from_f32] : dnnl_variants) {
        const std::string n = base + "/onednn_" + snip_bench::dnnl_kind_name(kind) + (from_f32 ? "_from_f32" : "");
        benchmark::RegisterBenchmark(n.c_str(), snip_bench::BM_dnnl_matmul, kind, g, s.T, s.K, s.N, from_f32)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
        g_ratios.push_back({n, base + "/sgemm", false});
      }
#endif
    }
  }
}

void register_all() {
  register_quantizer();
  register_pack();
  register_kernels();
  register_gemms();
}

}  // namespace

int main(int argc, char** argv) {
  if (const char* e = std::getenv("SNIP_BENCH_SINGLE_THREAD"); e && std::string(e) == "1") {
    g_default_threads = 1;
    set_quant_threads(1);
  }
  register_all();
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  std::printf("\nRatios (measured in this run; fastest repetition of each benchmark):\n");
  for (const Ratio& r : g_ratios) {
    auto a = reporter.seconds.find(r.name), b = reporter.seconds.find(r.reference);
    if (a == reporter.seconds.end() || b == reporter.seconds.end()) continue;
    // Single-threaded kernels: CPU time too (robust against other load on the machine).
    if (r.throughput && reporter.paired.count(r.name))  // (its CPU time includes the paired memcpy)
      std::printf("  %-55s %6.2f x memcpy bandwidth (real time), paired %5.2f x (median of %d alternations)\n",
                  r.name.c_str(), b->second / a->second, reporter.paired[r.name], reporter.pairs[r.name]);
    else if (r.throughput)
      std::printf("  %-55s %6.2f x memcpy bandwidth (real time), %6.2f x (CPU time)\n", r.name.c_str(),
                  b->second / a->second, reporter.cpu_seconds[r.reference] / reporter.cpu_seconds[r.name]);
    else if (reporter.process_cpu_ms.count(r.name) && reporter.process_cpu_ms.count(r.reference))
      std::printf("  %-55s %6.3f x fp32 block time (real), %6.3f x (process CPU time, all threads)\n", r.name.c_str(),
                  a->second / b->second, reporter.process_cpu_ms[r.name] / reporter.process_cpu_ms[r.reference]);
    else
      std::printf("  %-55s %6.3f x sgemm time (real), %6.3f x (CPU time of the calling thread)\n", r.name.c_str(),
                  a->second / b->second, reporter.cpu_seconds[r.name] / reporter.cpu_seconds[r.reference]);
  }
  benchmark::Shutdown();
  return 0;
}
