// The BF16-element GEMM for FP8 and BF16 operands (snip/qgemm.h, docs/FORMATS.md section 6.5):
// BF16 codes times scales equal fake_quantize's values; the vdpbf16ps, FMA and scalar kernels
// give the same bits for every thread count; vdpbf16ps is used only where its flushing of
// subnormals cannot change a result; the result is within the documented bound of a double
// evaluation of the same quantized operands; and the BF16 outputs of qlinear_* equal the
// dequantize-then-sgemm path's except where the two FP32 sums straddle a BF16 rounding boundary.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "isa_tiers.h"
#include "snip/elem_format.h"
#include "snip/error.h"
#include "snip/qgemm.h"
#include "snip/qlinear.h"

namespace snip {
namespace {

constexpr double kU = 0x1p-24;  // FP32 unit roundoff

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  return v;
}

float bf16_bits_value(uint16_t h) {
  const uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

struct ModeGuard {
  ~ModeGuard() {
    set_qgemm_mode(QGemmMode::automatic);
    set_quant_threads(0);
  }
};

// One quantized operand as qlinear makes it: BF16 codes and FP32 scales for FP32-scaled FP8
// (snip, tensor), fake-quantized FP32 values otherwise (E8M0-scaled FP8, BF16).
struct Side {
  std::vector<uint16_t> bits;
  std::vector<float> values, scales;
  QuantSpec spec;
  int64_t rows = 0, cols = 0;
  Bf16Operand view(bool reduce_along_cols) const {
    return bf16_operand(bits.empty() ? nullptr : bits.data(), values.empty() ? nullptr : values.data(),
                        scales.empty() ? nullptr : scales.data(), rows, cols, spec, reduce_along_cols);
  }
};

Side quantize(const std::vector<float>& x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key) {
  Side s;
  s.spec = spec, s.rows = rows, s.cols = cols;
  if (spec.scale == ScaleKind::fp32) {
    s.bits.assign(size_t(rows * cols), 0xFFFF);
    s.scales.assign(size_t(e2m1_scale_count(rows, cols, spec)), -1.0f);
    quantize_bf16_codes(s.bits.data(), s.scales.data(), x.data(), rows, cols, spec, key, "test");
  } else {
    s.values.assign(x.size(), 0.0f);
    fake_quantize(s.values.data(), x.data(), rows, cols, spec, key, "test");
  }
  return s;
}

// The exact value of logical element (i, k): element times scale, in double.
double value(const Bf16Operand& o, int64_t i, int64_t k) {
  const int64_t at = i * o.rs + k * o.cs;
  const double e = o.bits ? double(bf16_bits_value(o.bits[at])) : double(o.values[at]);
  const double s = o.scales ? double(o.scales[(i / o.block_i) * o.scale_rs + (k / o.block_k) * o.scale_cs]) : 1.0;
  return e * s;
}

// Exact C in double and the documented bound γ(kc + nch + 1)·Σ_k |a_k·b_k| (FORMATS.md 6.5).
void exact_and_bound(const Bf16Operand& A, const Bf16Operand& B, int64_t M, int64_t N, int64_t K,
                     std::vector<double>* exact, std::vector<double>* bound, std::vector<double>* abs_sum = nullptr) {
  const int64_t kc = qgemm_bf16_chunk(A, B, K);
  const int64_t nch = (K + kc - 1) / kc;
  const double n = double(kc + nch + 1);
  const double gamma = n * kU / (1 - n * kU);
  exact->assign(size_t(M * N), 0.0);
  bound->assign(size_t(M * N), 0.0);
  if (abs_sum) abs_sum->assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      long double sum = 0, abs = 0;  // 64-bit mantissa: far below the FP32 bound
      for (int64_t k = 0; k < K; ++k) {
        const long double p = (long double)value(A, m, k) * value(B, j, k);
        sum += p;
        abs += std::fabs(p);
      }
      (*exact)[size_t(m * N + j)] = double(sum);
      (*bound)[size_t(m * N + j)] = gamma * double(abs) * (1 + 1e-12) + 1e-300;
      if (abs_sum) (*abs_sum)[size_t(m * N + j)] = double(abs);
    }
}

struct GemmSetup {
  Side a, b;
  bool a_cols = true, b_cols = true;
  int64_t M = 0, N = 0, K = 0;
  Bf16Operand va() const { return a.view(a_cols); }
  Bf16Operand vb() const { return b.view(b_cols); }
};

// Operands of GEMM g for a recipe and precision, shaped as qlinear_* passes them.
GemmSetup setup(const char* recipe, Precision p, Gemm g, int64_t M, int64_t N, int64_t K, uint32_t seed) {
  const Recipe r = Recipe::named(recipe);
  GemmSetup s;
  s.M = M, s.N = N, s.K = K;
  const RngKey ka{1, 2, 3, 4}, kb{1, 2, 3, 5};
  switch (g) {
    case Gemm::fprop:  // A = X (M, K), B = W (N, K)
      s.a = quantize(randn(size_t(M * K), seed), M, K, r.spec(p, g, Operand::activation), ka);
      s.b = quantize(randn(size_t(N * K), seed + 1, 0.05f), N, K, r.spec(p, g, Operand::weight), kb);
      break;
    case Gemm::dgrad:  // A = dY (M, K), B(n,k) = W[k][n] stored (K, N)
      s.a = quantize(randn(size_t(M * K), seed, 1e-3f), M, K, r.spec(p, g, Operand::gradient), ka);
      s.b = quantize(randn(size_t(K * N), seed + 1, 0.05f), K, N, r.spec(p, g, Operand::weight), kb);
      s.b_cols = false;
      break;
    case Gemm::wgrad:  // A(m,k) = dY[k][m] stored (K, M), B(n,k) = X[k][n] stored (K, N)
      s.a = quantize(randn(size_t(K * M), seed, 1e-3f), K, M, r.spec(p, g, Operand::gradient), ka);
      s.b = quantize(randn(size_t(K * N), seed + 1), K, N, r.spec(p, g, Operand::activation), kb);
      s.a_cols = s.b_cols = false;
      break;
  }
  return s;
}

std::vector<float> run(const GemmSetup& s) {
  std::vector<float> C(size_t(s.M * s.N), std::nanf(""));
  EXPECT_TRUE(qgemm_bf16(C.data(), s.N, s.M, s.N, s.K, s.va(), s.vb()));
  return C;
}

struct ShapeCase {
  const char* recipe;
  Precision p;
  Gemm g;
  int64_t M, N, K;
};
const ShapeCase kShapes[] = {{"snip", Precision::fp8, Gemm::fprop, 150, 90, 70},
                             {"snip", Precision::fp8, Gemm::fprop, 61, 130, 389},
                             {"snip", Precision::fp8, Gemm::dgrad, 50, 70, 300},
                             {"snip", Precision::fp8, Gemm::wgrad, 70, 45, 261},
                             {"mx", Precision::fp8, Gemm::fprop, 37, 70, 101},
                             {"mx", Precision::fp8, Gemm::wgrad, 30, 20, 96},
                             {"nvfp4", Precision::fp8, Gemm::dgrad, 19, 33, 50},
                             {"tensor", Precision::fp8, Gemm::fprop, 20, 65, 300},
                             {"tensor", Precision::fp8, Gemm::wgrad, 9, 17, 1500},
                             {"snip", Precision::bf16, Gemm::fprop, 40, 129, 257},
                             {"snip", Precision::bf16, Gemm::dgrad, 33, 64, 128},
                             {"snip", Precision::bf16, Gemm::wgrad, 25, 70, 99},
                             // K in several steps (numerics_detail::k_steps) over several tiles of a task: one long
                             // chunk cut into slices whose sums go on from step to step (BF16 and per-tensor FP8 have
                             // one chunk), and chunks grouped with a short last group, with partial panels.
                             {"snip", Precision::bf16, Gemm::wgrad, 100, 70, 777},
                             {"snip", Precision::bf16, Gemm::fprop, 97, 130, 601},
                             {"tensor", Precision::fp8, Gemm::dgrad, 55, 66, 513},
                             {"mx", Precision::fp8, Gemm::fprop, 100, 70, 1000}};

std::string trace(const ShapeCase& c) {
  return std::string(c.recipe) + " " + precision_name(c.p) + " " + gemm_name(c.g) + " " + std::to_string(c.M) + "x" +
         std::to_string(c.N) + "x" + std::to_string(c.K);
}

TEST(QGemmBf16Quantize, CodesTimesScalesAreFakeQuantizeBitForBit) {
  const int64_t rows = 150, cols = 300;  // partial 128-blocks
  const std::vector<float> x = randn(size_t(rows * cols), 1, 0.3f);
  RecipeOptions e5m2;
  e5m2.fp8_gradients_e5m2 = true;
  struct Case {
    const char* name;
    Recipe recipe;
    Gemm g;
    Operand op;
  };
  const Case cases[] = {{"snip X 1x128", Recipe::named("snip"), Gemm::fprop, Operand::activation},
                        {"snip W 128x128", Recipe::named("snip"), Gemm::fprop, Operand::weight},
                        {"snip dY e5m2", Recipe(e5m2), Gemm::dgrad, Operand::gradient},
                        {"snip wgrad X 128x1", Recipe::named("snip"), Gemm::wgrad, Operand::activation},
                        {"tensor", Recipe::named("tensor"), Gemm::fprop, Operand::activation}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const QuantSpec spec = c.recipe.spec(Precision::fp8, c.g, c.op);
    ASSERT_EQ(spec.scale, ScaleKind::fp32);
    const RngKey key{7, 8, 9, 10};
    const Side q = quantize(x, rows, cols, spec, key);
    std::vector<float> y(x.size());
    fake_quantize(y.data(), x.data(), rows, cols, spec, key, "test");
    const Bf16Operand v = q.view(true);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        const float s = v.scales[(r / v.block_i) * v.scale_rs + (k / v.block_k) * v.scale_cs];
        const float got = bf16_bits_value(v.bits[r * cols + k]) * s;
        ASSERT_EQ(got, y[size_t(r * cols + k)]) << "element (" << r << ", " << k << ")";
      }
  }
}

TEST(QGemmBf16, KernelsGiveTheSameBitsForAnyThreadCount) {
  ModeGuard guard;
  test::IsaGuard isa;
  for (const ShapeCase& c : kShapes) {
    SCOPED_TRACE(trace(c));
    const GemmSetup s = setup(c.recipe, c.p, c.g, c.M, c.N, c.K, 21);
    set_qgemm_mode(QGemmMode::scalar);
    set_quant_threads(1);
    const std::vector<float> scalar1 = run(s);
    EXPECT_EQ(qgemm_bf16_last_kernel(), Bf16Kernel::scalar);
    set_quant_threads(2);
    const std::vector<float> scalar2 = run(s);
    ASSERT_EQ(0, std::memcmp(scalar1.data(), scalar2.data(), scalar1.size() * 4));
    set_qgemm_mode(QGemmMode::automatic);
    for (IsaTier tier : test::runnable_tiers()) {
      set_isa_tier(tier);
      const Bf16Kernel want = tier >= IsaTier::avx512bf16 ? Bf16Kernel::dpbf16
                              : tier >= IsaTier::avx512   ? Bf16Kernel::fma
                              : tier >= IsaTier::avx2     ? Bf16Kernel::avx2
                                                          : Bf16Kernel::scalar;
      for (int threads : {1, 2, 3}) {
        set_quant_threads(threads);
        const std::vector<float> got = run(s);
        EXPECT_EQ(qgemm_bf16_last_kernel(), want) << isa_tier_name(tier);
        ASSERT_EQ(0, std::memcmp(scalar1.data(), got.data(), scalar1.size() * 4))
            << isa_tier_name(tier) << ", " << threads << " threads";
      }
    }
  }
}

// The operand's codes copied with a row stride 3 codes longer than a row (NaN codes in the gap,
// which a reader that strays into them would put in the element range): the element-by-element
// reader packs such a view, the whole-row placement the dense one.
Bf16Operand strided_copy(const Side& s, bool reduce_along_cols, std::vector<uint16_t>& buf) {
  const int64_t ld = s.cols + 3;
  buf.assign(size_t(s.rows * ld), 0x7FC0);
  for (int64_t r = 0; r < s.rows; ++r)
    std::memcpy(buf.data() + r * ld, s.bits.data() + r * s.cols, size_t(s.cols) * sizeof(uint16_t));
  Bf16Operand o = s.view(reduce_along_cols);
  o.bits = buf.data();
  (reduce_along_cols ? o.rs : o.cs) = ld;
  return o;
}

TEST(QGemmBf16, DenseCodeOperandsPackAsTheElementReaderPacksThem) {
  ModeGuard guard;
  int compared = 0;
  for (const ShapeCase& c : kShapes) {
    SCOPED_TRACE(trace(c));
    const GemmSetup s = setup(c.recipe, c.p, c.g, c.M, c.N, c.K, 31);
    if (s.a.bits.empty() || s.b.bits.empty()) continue;  // FP32 values: the element reader only
    std::vector<uint16_t> abuf, bbuf;
    const Bf16Operand A = s.va(), B = s.vb();
    const Bf16Operand As = strided_copy(s.a, s.a_cols, abuf), Bs = strided_copy(s.b, s.b_cols, bbuf);
    for (int threads : {1, 2}) {
      set_quant_threads(threads);
      Bf16Gemm dense, reader;
      dense.prepare(c.M, c.N, c.K, A, B);
      dense.pack_a(A);
      dense.pack_b(B);
      reader.prepare(c.M, c.N, c.K, As, Bs);
      reader.pack_a(As);
      reader.pack_b(Bs);
      EXPECT_EQ(dense.packing_difference(reader), "") << threads << " threads";
      std::vector<float> c0(size_t(c.M * c.N), 1.0f), c1(size_t(c.M * c.N), 2.0f);
      ASSERT_TRUE(dense.run(c0.data(), c.N));
      ASSERT_TRUE(reader.run(c1.data(), c.N));
      EXPECT_EQ(0, std::memcmp(c0.data(), c1.data(), c0.size() * 4)) << threads << " threads";
      ++compared;
    }
  }
  EXPECT_GE(compared, 10);  // every orientation of both operands, odd chunk tails, partial panels
}

TEST(QGemmBf16, WithinTheDocumentedBoundOfTheExactProductOfTheSameQuantizedOperands) {
  ModeGuard guard;
  for (const ShapeCase& c : kShapes) {
    SCOPED_TRACE(trace(c));
    const GemmSetup s = setup(c.recipe, c.p, c.g, c.M, c.N, c.K, 31);
    const std::vector<float> C = run(s);
    std::vector<double> exact, bound;
    exact_and_bound(s.va(), s.vb(), s.M, s.N, s.K, &exact, &bound);
    double worst = 0;
    for (size_t i = 0; i < C.size(); ++i) {
      const double err = std::fabs(double(C[i]) - exact[i]);
      ASSERT_LE(err, bound[i]) << "element " << i;
      if (bound[i] > 0) worst = std::max(worst, err / bound[i]);
    }
    EXPECT_GT(worst, 0.0);  // the FP32 roundings are really there
  }
}

// vdpbf16ps treats subnormal inputs and results as zero. Operands whose products or partial
// sums could be subnormal run on the FMA kernel, which gives the IEEE result (the scalar twin's).
TEST(QGemmBf16, SubnormalRangeOperandsAvoidTheFlushingInstruction) {
  ModeGuard guard;
  EXPECT_TRUE(qgemm_bf16_dpbf16_safe(71, 71, false));   // quanta 2^-63 · 2^-63 = 2^-126
  EXPECT_FALSE(qgemm_bf16_dpbf16_safe(71, 70, false));  // 2^-127: a partial sum could be subnormal
  EXPECT_FALSE(qgemm_bf16_dpbf16_safe(200, 200, true));
  EXPECT_TRUE(qgemm_bf16_dpbf16_safe(255, 1, false));  // one operand is all zeros

  const int64_t M = 7, N = 20, K = 33;
  std::vector<float> a = randn(size_t(M * K), 61), b = randn(size_t(N * K), 62);
  for (auto& v : a) v = bf16_round(v * 0x1p-65f);
  for (auto& v : b) v = bf16_round(v * 0x1p-65f);  // products near 2^-130: subnormal
  b[5] = bf16_round(0x1p-130f);                    // and a subnormal element
  Bf16Operand A, B;
  A.values = a.data(), A.rs = K;
  B.values = b.data(), B.rs = K;
  std::vector<float> fast(size_t(M * N)), ref(fast.size());
  ASSERT_TRUE(qgemm_bf16(fast.data(), N, M, N, K, A, B));
  if (isa_tier() >= IsaTier::avx512) {
    EXPECT_EQ(qgemm_bf16_last_kernel(), Bf16Kernel::fma);
  }
  set_qgemm_mode(QGemmMode::scalar);
  ASSERT_TRUE(qgemm_bf16(ref.data(), N, M, N, K, A, B));
  EXPECT_EQ(0, std::memcmp(fast.data(), ref.data(), fast.size() * 4));
  int subnormal_outputs = 0;
  for (float v : ref) subnormal_outputs += v != 0 && std::fabs(v) < 0x1p-126f;
  EXPECT_GT(subnormal_outputs, 0);  // the case is real: a flushing kernel would have lost them

  // The same operands scaled up by 2^64 each are safe and take vdpbf16ps.
  for (auto& v : a) v *= 0x1p64f;
  for (auto& v : b) v *= 0x1p64f;
  set_qgemm_mode(QGemmMode::automatic);
  ASSERT_TRUE(qgemm_bf16(fast.data(), N, M, N, K, A, B));
  if (isa_tier() >= IsaTier::avx512bf16) {
    EXPECT_EQ(qgemm_bf16_last_kernel(), Bf16Kernel::dpbf16);
  }
}

TEST(QGemmBf16, FP32ValuesThatAreNotBf16ValuesAreRefused) {
  const int64_t M = 3, N = 4, K = 5;
  std::vector<float> a(size_t(M * K), 1.0f), b(size_t(N * K), 1.0f);
  a[7] = 1.0f + 0x1p-20f;
  Bf16Operand A, B;
  A.values = a.data(), A.rs = K;
  B.values = b.data(), B.rs = K;
  std::vector<float> C(size_t(M * N));
  EXPECT_FALSE(qgemm_bf16(C.data(), N, M, N, K, A, B));
  a[7] = 1.0f;
  EXPECT_TRUE(qgemm_bf16(C.data(), N, M, N, K, A, B));
  EXPECT_EQ(C[0], 5.0f);
}

// An mx FP8 block so small that its E8M0-scaled values are FP32 subnormals BF16 cannot hold:
// qlinear runs that GEMM on the dequantize-then-sgemm path (the same bits as SNIP_QGEMM=sgemm).
TEST(QGemmBf16, QlinearFallsBackToSgemmForValuesBf16CannotHold) {
  ModeGuard guard;
  const int64_t T = 8, K = 64, N = 16;
  std::vector<float> X = randn(size_t(T * K), 71), W = randn(size_t(N * K), 72, 0.05f);
  for (int64_t k = 0; k < 32; ++k) X[size_t(k)] *= 0x1p-125f;  // block (0, 0): amax ~2^-124
  const Recipe recipe = Recipe::named("mx");
  QLinearContext ctx;
  ctx.recipe = &recipe;
  std::vector<float> fast(size_t(T * N)), slow(fast.size());
  qlinear_fprop(fast.data(), X.data(), W.data(), T, K, N, Precision::fp8, ctx);
  set_qgemm_mode(QGemmMode::sgemm);
  qlinear_fprop(slow.data(), X.data(), W.data(), T, K, N, Precision::fp8, ctx);
  EXPECT_EQ(fast, slow);
}

// qlinear_* on the BF16-element GEMM vs the dequantize-then-sgemm path, BF16 outputs (as the
// FP4 test in test_qgemm.cpp): both within their bounds of the exact product of the same
// quantized operands, so an output may differ only where the two FP32 sums straddle a BF16
// rounding boundary; those are counted.
TEST(QGemmBf16, QlinearBf16OutputsDifferFromTheSgemmPathOnlyAtRoundingBoundaries) {
  ModeGuard guard;
  const int64_t T = 200, K = 384, N = 160;
  const std::vector<float> X = randn(size_t(T * K), 41), W = randn(size_t(N * K), 42, 0.05f),
                           dY = randn(size_t(T * N), 43, 1e-3f);
  int64_t differing = 0, total = 0, apart = 0;
  struct Case {
    const char* recipe;
    Precision p;
  };
  for (const Case& rc : {Case{"snip", Precision::fp8}, Case{"mx", Precision::fp8}, Case{"nvfp4", Precision::fp8},
                         Case{"tensor", Precision::fp8}, Case{"snip", Precision::bf16}}) {
    const Recipe recipe = Recipe::named(rc.recipe);
    QLinearContext ctx;
    ctx.recipe = &recipe;
    ctx.seed = 5;
    ctx.step = 2;
    for (Gemm g : kAllGemms) {
      SCOPED_TRACE(std::string(rc.recipe) + " " + precision_name(rc.p) + " " + gemm_name(g));
      const int64_t differing_before = differing;
      const int64_t rows = g == Gemm::wgrad ? N : T, cols = g == Gemm::fprop ? N : K;
      std::vector<float> fast(size_t(rows * cols)), slow(fast.size());
      auto call = [&](std::vector<float>& out) {
        switch (g) {
          case Gemm::fprop:
            qlinear_fprop(out.data(), X.data(), W.data(), T, K, N, rc.p, ctx);
            break;
          case Gemm::dgrad:
            qlinear_dgrad(out.data(), dY.data(), W.data(), T, K, N, rc.p, ctx);
            break;
          case Gemm::wgrad:
            qlinear_wgrad(out.data(), dY.data(), X.data(), T, K, N, rc.p, ctx);
            break;
        }
      };
      set_qgemm_mode(QGemmMode::automatic);
      call(fast);
      set_qgemm_mode(QGemmMode::sgemm);
      call(slow);
      const Operand oa = g == Gemm::fprop ? Operand::activation : Operand::gradient;
      const Operand ob = g == Gemm::wgrad ? Operand::activation : Operand::weight;
      const QuantSpec sa = recipe.spec(rc.p, g, oa), sb = recipe.spec(rc.p, g, ob);
      const RngKey ka = qlinear_rng_key(ctx, g, oa), kb = qlinear_rng_key(ctx, g, ob);
      GemmSetup s;
      switch (g) {
        case Gemm::fprop:
          s.a = quantize(X, T, K, sa, ka), s.b = quantize(W, N, K, sb, kb);
          s.M = T, s.N = N, s.K = K;
          break;
        case Gemm::dgrad:
          s.a = quantize(dY, T, N, sa, ka), s.b = quantize(W, N, K, sb, kb), s.b_cols = false;
          s.M = T, s.N = K, s.K = N;
          break;
        case Gemm::wgrad:
          s.a = quantize(dY, T, N, sa, ka), s.b = quantize(X, T, K, sb, kb), s.a_cols = s.b_cols = false;
          s.M = N, s.N = K, s.K = T;
          break;
      }
      std::vector<double> exact, bound, abs_sum;
      exact_and_bound(s.va(), s.vb(), s.M, s.N, s.K, &exact, &bound, &abs_sum);
      const double gk = double(s.K + 2) * kU / (1 - double(s.K + 2) * kU);
      for (size_t i = 0; i < exact.size(); ++i) {
        ++total;
        if (fast[i] == slow[i]) continue;
        ++differing;
        const double bf = bound[i], bs = gk * abs_sum[i] * (1 + 1e-12) + 1e-300;
        ASSERT_GE(fast[i], bf16_round(std::nextafter(float(exact[i] - bf), -INFINITY))) << "output " << i;
        ASSERT_LE(fast[i], bf16_round(std::nextafter(float(exact[i] + bf), INFINITY))) << "output " << i;
        ASSERT_GE(slow[i], bf16_round(std::nextafter(float(exact[i] - bs), -INFINITY))) << "output " << i;
        ASSERT_LE(slow[i], bf16_round(std::nextafter(float(exact[i] + bs), INFINITY))) << "output " << i;
        uint32_t lo, hi;
        const float flo = std::min(fast[i], slow[i]), fhi = std::max(fast[i], slow[i]);
        std::memcpy(&lo, &flo, 4);
        std::memcpy(&hi, &fhi, 4);
        const bool one_step = (flo >= 0 && hi == lo + 0x10000u) || (fhi <= 0 && lo == hi + 0x10000u);
        if (!one_step) {
          ++apart;  // only where the products (almost) cancel
          EXPECT_LE(std::fabs(exact[i]), bf + bs) << "output " << i;
        }
      }
      std::printf("  %s %s %s: %lld of %lld differ\n", rc.recipe, precision_name(rc.p), gemm_name(g),
                  (long long)(differing - differing_before), (long long)exact.size());
    }
  }
  std::printf("BF16 outputs differing from the sgemm path: %lld of %lld (%lld by more than one BF16 step)\n",
              (long long)differing, (long long)total, (long long)apart);
  RecordProperty("bf16_outputs_differing", std::to_string(differing));
  EXPECT_LT(double(differing - apart), 1e-2 * double(total));
}

TEST(QGemmBf16, QlinearScalarFmaAndAutomaticModesGiveTheSameBits) {
  ModeGuard guard;
  const int64_t T = 77, K = 200, N = 90;
  const std::vector<float> X = randn(size_t(T * K), 51), W = randn(size_t(N * K), 52, 0.05f),
                           dY = randn(size_t(T * N), 53, 1e-3f);
  for (const char* name : {"snip", "mx"})
    for (Precision p : {Precision::fp8, Precision::bf16}) {
      SCOPED_TRACE(std::string(name) + " " + precision_name(p));
      const Recipe recipe = Recipe::named(name);
      QLinearContext ctx;
      ctx.recipe = &recipe;
      std::vector<std::vector<float>> fprops, wgrads;
      for (QGemmMode m : {QGemmMode::automatic, QGemmMode::fma, QGemmMode::scalar}) {
        set_qgemm_mode(m);
        std::vector<float> y(size_t(T * N)), dw(size_t(N * K), 0.5f);
        qlinear_fprop(y.data(), X.data(), W.data(), T, K, N, p, ctx);
        qlinear_wgrad(dw.data(), dY.data(), X.data(), T, K, N, p, ctx, true);
        fprops.push_back(y);
        wgrads.push_back(dw);
      }
      EXPECT_EQ(fprops[0], fprops[1]);
      EXPECT_EQ(fprops[0], fprops[2]);
      EXPECT_EQ(wgrads[0], wgrads[1]);
      EXPECT_EQ(wgrads[0], wgrads[2]);
    }
}

}  // namespace
}  // namespace snip
