// The E2M1 integer GEMM (snip/qgemm.h, docs/FORMATS.md section 6.4): codes equal fake_quantize's
// values; the VNNI and scalar kernels give the same bits, for every thread count; the result is
// within the documented bound of a double evaluation of the same quantized operands; and the
// BF16 outputs of qlinear_* equal the dequantize-then-sgemm path's except where the two FP32
// sums straddle a BF16 rounding boundary.
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

// Restores the automatic mode and the default thread count whatever a test does.
struct ModeGuard {
  ~ModeGuard() {
    set_qgemm_mode(QGemmMode::automatic);
    set_quant_threads(0);
  }
};

struct Quantized {
  std::vector<int8_t> code2;
  std::vector<float> scales;
  QuantSpec spec;
  int64_t rows = 0, cols = 0;
  E2M1Operand view(bool reduce_along_cols) const {
    return e2m1_operand(code2.data(), scales.data(), rows, cols, spec, reduce_along_cols);
  }
};

Quantized quantize(const std::vector<float>& x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key) {
  Quantized q;
  q.spec = spec, q.rows = rows, q.cols = cols;
  q.code2.assign(size_t(rows * cols), 99);
  q.scales.assign(size_t(e2m1_scale_count(rows, cols, spec)), -1.0f);
  quantize_e2m1_code2(q.code2.data(), q.scales.data(), x.data(), rows, cols, spec, key, "test");
  return q;
}

// The exact value of logical element (i, k) of a view: (code/2)·scale, in double.
double value(const E2M1Operand& o, int64_t i, int64_t k) {
  const int c = o.code2[i * o.code_rs + k * o.code_cs];
  return 0.5 * c * double(o.scales[(i / o.block_i) * o.scale_rs + (k / o.block_k) * o.scale_cs]);
}

// Exact C in double, and the documented bound on |C_fp32 − C|: γ(nch+1)·Σ_chunks |S_c·sa·sb/4|.
void exact_and_bound(const E2M1Operand& A, const E2M1Operand& B, int64_t M, int64_t N, int64_t K,
                     std::vector<double>* exact, std::vector<double>* bound) {
  const int64_t kc = qgemm_e2m1_chunk(A, B, K);
  const int64_t nch = (K + kc - 1) / kc;
  const double gamma = double(nch + 1) * kU / (1 - double(nch + 1) * kU);
  exact->assign(size_t(M * N), 0.0);
  bound->assign(size_t(M * N), 0.0);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      // Integer chunk sums (exact), each term S·sa·sb/4 and the sum in long double (64-bit
      // mantissa: ~1e-19 relative, far below the FP32 bound).
      long double sum = 0, abs_terms = 0;
      for (int64_t c = 0; c < nch; ++c) {
        int64_t S = 0;
        for (int64_t k = c * kc; k < std::min(K, (c + 1) * kc); ++k)
          S += int64_t(A.code2[m * A.code_rs + k * A.code_cs]) * B.code2[n * B.code_rs + k * B.code_cs];
        const long double sa = A.scales[(m / A.block_i) * A.scale_rs + (c * kc / A.block_k) * A.scale_cs];
        const long double sb = B.scales[(n / B.block_i) * B.scale_rs + (c * kc / B.block_k) * B.scale_cs];
        const long double term = (long double)S * sa * sb * 0.25L;
        sum += term;
        abs_terms += std::fabs(term);
      }
      (*exact)[size_t(m * N + n)] = double(sum);
      (*bound)[size_t(m * N + n)] = gamma * double(abs_terms) * (1 + 1e-12) + 1e-300;
    }
}

// The next BF16 value above the BF16 value x.
float bf16_step_up(float x) {
  if (x == 0) return 0x1p-133f;  // the smallest BF16 subnormal
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u >> 31) ? u - 0x10000u : u + 0x10000u;
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

// The BF16 rounding of x, widened by one FP32 step outward (x is a double).
float bf16_below(double x) {
  return bf16_round(std::nextafter(float(x), -INFINITY));
}
float bf16_above(double x) {
  return bf16_round(std::nextafter(float(x), INFINITY));
}

struct SpecCase {
  const char* name;
  const char* recipe;
  Gemm g;
  Operand op;
};

TEST(QGemmQuantize, CodesTimesScalesAreFakeQuantizeBitForBit) {
  const int64_t rows = 150, cols = 300;  // partial 128-, 32- and 16-blocks
  const std::vector<float> x = randn(size_t(rows * cols), 1, 0.3f);
  const SpecCase cases[] = {{"snip X 1x128", "snip", Gemm::fprop, Operand::activation},
                            {"snip W 128x128", "snip", Gemm::fprop, Operand::weight},
                            {"snip dY 1x128 SR", "snip", Gemm::dgrad, Operand::gradient},
                            {"snip wgrad X 128x1", "snip", Gemm::wgrad, Operand::activation},
                            {"snip wgrad dY 128x1 SR", "snip", Gemm::wgrad, Operand::gradient},
                            {"mx 1x32 e8m0", "mx", Gemm::fprop, Operand::activation},
                            {"mx wgrad 32x1", "mx", Gemm::wgrad, Operand::gradient},
                            {"nvfp4 W 16x16", "nvfp4", Gemm::fprop, Operand::weight},
                            {"nvfp4 dY 1x16 SR", "nvfp4", Gemm::dgrad, Operand::gradient},
                            {"tensor", "tensor", Gemm::fprop, Operand::activation},
                            {"block:16 W 1x16", "block:16", Gemm::fprop, Operand::weight},
                            {"block:48 dgrad W 48x1", "block:48", Gemm::dgrad, Operand::weight},
                            {"block:row:sr wgrad dY", "block:row:sr", Gemm::wgrad, Operand::gradient},
                            {"channel W", "channel", Gemm::fprop, Operand::weight}};
  for (const SpecCase& c : cases) {
    SCOPED_TRACE(c.name);
    const QuantSpec spec = Recipe::named(c.recipe).spec(Precision::fp4, c.g, c.op);
    const RngKey key{7, 8, 9, 10};
    const Quantized q = quantize(x, rows, cols, spec, key);
    std::vector<float> y(x.size());
    fake_quantize(y.data(), x.data(), rows, cols, spec, key, "test");
    const E2M1Operand v = q.view(true);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t col = 0; col < cols; ++col) {
        const int code = q.code2[size_t(r * cols + col)];
        ASSERT_LE(std::abs(code), 12);
        const float s = v.scales[(r / v.block_i) * v.scale_rs + (col / v.block_k) * v.scale_cs];
        // The product fake_quantize computes (±0 compare equal: a code has no sign of zero).
        ASSERT_EQ(float(code) * 0.5f * s, y[size_t(r * cols + col)]) << "element (" << r << ", " << col << ")";
      }
  }
}

TEST(QGemmQuantize, NonFiniteInputNamesTheTensor) {
  std::vector<float> x(256, 1.0f);
  x[130] = std::nanf("");
  const QuantSpec spec = Recipe::named("snip").spec(Precision::fp4, Gemm::fprop, Operand::activation);
  std::vector<int8_t> codes(x.size());
  std::vector<float> scales(size_t(e2m1_scale_count(2, 128, spec)));
  try {
    quantize_e2m1_code2(codes.data(), scales.data(), x.data(), 2, 128, spec, {}, "layer0: fprop operand X");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer0: fprop operand X: non-finite value"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("element (1, 2)"), std::string::npos) << e.what();
  }
}

// One GEMM configuration: operand A (M, K) and B (N, K) from stored matrices.
struct GemmSetup {
  Quantized a, b;
  bool a_cols = true, b_cols = true;
  int64_t M = 0, N = 0, K = 0;
};

GemmSetup setup(const char* recipe, Gemm g, int64_t M, int64_t N, int64_t K, uint32_t seed) {
  const Recipe r = Recipe::named(recipe);
  GemmSetup s;
  s.M = M, s.N = N, s.K = K;
  const RngKey ka{1, 2, 3, 4}, kb{1, 2, 3, 5};
  switch (g) {
    case Gemm::fprop:  // A = X (M,K), B = W (N,K), both along columns
      s.a = quantize(randn(size_t(M * K), seed), M, K, r.spec(Precision::fp4, g, Operand::activation), ka);
      s.b = quantize(randn(size_t(N * K), seed + 1, 0.05f), N, K, r.spec(Precision::fp4, g, Operand::weight), kb);
      break;
    case Gemm::dgrad:  // A = dY (M,K), B(n,k) = W[k][n] stored (K, N)
      s.a = quantize(randn(size_t(M * K), seed, 1e-3f), M, K, r.spec(Precision::fp4, g, Operand::gradient), ka);
      s.b = quantize(randn(size_t(K * N), seed + 1, 0.05f), K, N, r.spec(Precision::fp4, g, Operand::weight), kb);
      s.b_cols = false;
      break;
    case Gemm::wgrad:  // A(m,k) = dY[k][m] stored (K, M), B(n,k) = X[k][n] stored (K, N)
      s.a = quantize(randn(size_t(K * M), seed, 1e-3f), K, M, r.spec(Precision::fp4, g, Operand::gradient), ka);
      s.b = quantize(randn(size_t(K * N), seed + 1), K, N, r.spec(Precision::fp4, g, Operand::activation), kb);
      s.a_cols = s.b_cols = false;
      break;
  }
  return s;
}

std::vector<float> run(const GemmSetup& s) {
  std::vector<float> C(size_t(s.M * s.N), std::nanf(""));
  qgemm_e2m1(C.data(), s.N, s.M, s.N, s.K, s.a.view(s.a_cols), s.b.view(s.b_cols));
  return C;
}

struct ShapeCase {
  const char* recipe;
  Gemm g;
  int64_t M, N, K;
};
const ShapeCase kShapes[] = {{"snip", Gemm::fprop, 150, 90, 70},
                             {"snip", Gemm::fprop, 61, 130, 389},
                             {"snip", Gemm::fprop, 13, 64, 256},
                             {"snip", Gemm::dgrad, 50, 70, 300},
                             {"snip", Gemm::wgrad, 70, 45, 260},
                             {"mx", Gemm::fprop, 37, 70, 100},
                             {"mx", Gemm::wgrad, 30, 20, 96},
                             {"nvfp4", Gemm::fprop, 40, 66, 90},
                             {"nvfp4", Gemm::dgrad, 19, 33, 50},
                             {"tensor", Gemm::fprop, 20, 65, 300},
                             {"tensor", Gemm::wgrad, 9, 17, 5000},
                             // The scaling-granularity family: block lengths that do and do not divide K, whole lines.
                             {"block:16", Gemm::fprop, 30, 40, 300},
                             {"block:48", Gemm::dgrad, 25, 33, 200},
                             {"block:256:sr", Gemm::wgrad, 21, 18, 700},
                             {"block:row", Gemm::fprop, 17, 70, 389},
                             {"channel:sr", Gemm::dgrad, 15, 40, 130},
                             // K in several steps (numerics_detail::k_steps) over several tiles of a
                             // task: chunks grouped with a short last group, and one long chunk cut
                             // into slices whose sums go on from step to step, with partial panels.
                             {"mx", Gemm::fprop, 100, 70, 1000},
                             {"snip", Gemm::wgrad, 97, 130, 900},
                             {"tensor", Gemm::wgrad, 61, 66, 1030}};

TEST(QGemm, EveryTiersKernelGivesThePortableBitsForAnyThreadCount) {
  ModeGuard guard;
  test::IsaGuard isa;
  const std::vector<IsaTier> tiers = test::runnable_tiers();
  if (tiers.size() < 2) GTEST_SKIP() << "this CPU runs only the portable kernel";
  for (const ShapeCase& c : kShapes) {
    SCOPED_TRACE(std::string(c.recipe) + " " + gemm_name(c.g) + " " + std::to_string(c.M) + "x" + std::to_string(c.N) +
                 "x" + std::to_string(c.K));
    const GemmSetup s = setup(c.recipe, c.g, c.M, c.N, c.K, 21);
    set_isa_tier(IsaTier::portable);
    set_quant_threads(1);
    const std::vector<float> portable = run(s);
    for (IsaTier tier : tiers) {
      set_isa_tier(tier);
      for (int threads : {1, 2, 3}) {
        set_quant_threads(threads);
        const std::vector<float> got = run(s);
        ASSERT_EQ(0, std::memcmp(portable.data(), got.data(), portable.size() * 4))
            << isa_tier_name(tier) << ", " << threads << " threads";
      }
    }
  }
}

// The AVX2 and portable kernels' int16 lanes hold the sums of up to 32 and 28 quads of k before
// widening: K long enough for several widenings per chunk, with every code at its extreme (±12
// against 0 or 24 after the offset), is where an overflow or a lost widening would show.
TEST(QGemm, Int16SumsAreExactAtTheExtremeCodesOnEveryTier) {
  ModeGuard guard;
  test::IsaGuard isa;
  const int64_t M = 7, N = 70, K = 4096;
  std::vector<int8_t> a(size_t(M * K)), b(size_t(N * K));
  // Rows 0 and 1 of A and columns 0 and 1 of B are constant (+12 and −12: every product of row 0
  // and column 0 is the largest, 24·12 after the offset); the rest mix signs.
  for (size_t i = 0; i < a.size(); ++i) a[i] = int64_t(i) < K ? 12 : int64_t(i) < 2 * K ? -12 : (i / 5) % 2 ? 12 : -12;
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = int64_t(i) < K ? 12 : int64_t(i) < 2 * K ? -12 : (i / 3) % 3 == 0 ? -12 : 12;
  std::vector<float> sa(size_t(M), 1.0f), sb(size_t(N), 1.0f);
  E2M1Operand A, B;
  A.code2 = a.data(), A.code_rs = K, A.scales = sa.data(), A.scale_rs = 1, A.block_i = 1, A.block_k = K;
  B.code2 = b.data(), B.code_rs = K, B.scales = sb.data(), B.scale_rs = 1, B.block_i = 1, B.block_k = K;
  std::vector<float> got(size_t(M * N)), want(got.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      int64_t s = 0;
      for (int64_t k = 0; k < K; ++k) s += int64_t(a[size_t(m * K + k)]) * b[size_t(n * K + k)];
      want[size_t(m * N + n)] = float(s) * 0.25f;
    }
  for (IsaTier tier : test::runnable_tiers()) {
    set_isa_tier(tier);
    qgemm_e2m1(got.data(), N, M, N, K, A, B);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(got[i], want[i]) << isa_tier_name(tier) << ", output " << i;
  }
}

TEST(QGemm, WithinTheDocumentedBoundOfTheExactProductOfTheSameQuantizedOperands) {
  ModeGuard guard;
  for (QGemmMode mode : {QGemmMode::automatic, QGemmMode::scalar}) {
    set_qgemm_mode(mode);
    for (const ShapeCase& c : kShapes) {
      SCOPED_TRACE(std::string(c.recipe) + " " + gemm_name(c.g) + " K=" + std::to_string(c.K));
      const GemmSetup s = setup(c.recipe, c.g, c.M, c.N, c.K, 31);
      const std::vector<float> C = run(s);
      std::vector<double> exact, bound;
      exact_and_bound(s.a.view(s.a_cols), s.b.view(s.b_cols), s.M, s.N, s.K, &exact, &bound);
      double worst = 0;  // largest error as a fraction of its bound
      for (size_t i = 0; i < C.size(); ++i) {
        const double err = std::fabs(double(C[i]) - exact[i]);
        ASSERT_LE(err, bound[i]) << "element " << i;
        if (bound[i] > 0) worst = std::max(worst, err / bound[i]);
      }
      // The FP32 roundings are really there, except with mx's power-of-two scales, where every
      // chunk term is exact and these few-chunk sums happen to be too.
      if (std::string(c.recipe) != "mx") {
        EXPECT_GT(worst, 0.0);
      }
    }
  }
}

TEST(QGemm, ChunksMustNestInBothOperandsBlocks) {
  E2M1Operand a, b;
  a.block_k = 128, b.block_k = 128;
  EXPECT_EQ(qgemm_e2m1_chunk(a, b, 1024), 128);
  b.block_k = 1024;  // one block along K: any chunk nests
  EXPECT_EQ(qgemm_e2m1_chunk(a, b, 1024), 128);
  a.block_k = 5000, b.block_k = 5000;
  EXPECT_EQ(qgemm_e2m1_chunk(a, b, 5000), 4096);
  a.block_k = 48, b.block_k = 32;  // 48 is not a multiple of 32
  EXPECT_EQ(qgemm_e2m1_chunk(a, b, 1024), 0);
}

TEST(QGemm, ModeFromEnvironmentValue) {
  EXPECT_EQ(parse_qgemm_mode(nullptr), QGemmMode::automatic);
  EXPECT_EQ(parse_qgemm_mode(""), QGemmMode::automatic);
  EXPECT_EQ(parse_qgemm_mode("auto"), QGemmMode::automatic);
  EXPECT_EQ(parse_qgemm_mode("scalar"), QGemmMode::scalar);
  EXPECT_EQ(parse_qgemm_mode("sgemm"), QGemmMode::sgemm);
  EXPECT_EQ(parse_qgemm_mode("fma"), QGemmMode::fma);
  try {
    parse_qgemm_mode("fast");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "SNIP_QGEMM='fast' is not a GEMM mode: use auto, fma, scalar or sgemm (or unset it)");
  }
}

// qlinear_* through the integer path vs the dequantize-then-sgemm path, BF16 outputs. Both are
// within their bounds of the exact product of the same quantized operands (the sgemm path's
// operands are fl(q·s), relative error <= u each), so a BF16 output may differ only by one BF16
// step, and only when the boundary between the two BF16 values lies within the sum of the two
// bounds of the exact value.
TEST(QGemm, QlinearBf16OutputsDifferFromTheSgemmPathOnlyAtRoundingBoundaries) {
  ModeGuard guard;
  const int64_t T = 200, K = 384, N = 160;
  const std::vector<float> X = randn(size_t(T * K), 41), W = randn(size_t(N * K), 42, 0.05f),
                           dY = randn(size_t(T * N), 43, 1e-3f);
  int64_t differing = 0, total = 0, apart = 0;  // apart: more than one BF16 step (near 0)
  for (const char* name : {"snip", "mx", "nvfp4", "tensor"}) {
    const Recipe recipe = Recipe::named(name);
    QLinearContext ctx;
    ctx.recipe = &recipe;
    ctx.seed = 5;
    ctx.step = 2;
    for (Gemm g : kAllGemms) {
      SCOPED_TRACE(std::string(name) + " " + gemm_name(g));
      const int64_t differing_before = differing, apart_before = apart;
      const int64_t rows = g == Gemm::wgrad ? N : T, cols = g == Gemm::dgrad ? K : g == Gemm::wgrad ? K : N;
      std::vector<float> fast(size_t(rows * cols)), slow(fast.size());
      auto call = [&](std::vector<float>& out) {
        switch (g) {
          case Gemm::fprop:
            qlinear_fprop(out.data(), X.data(), W.data(), T, K, N, Precision::fp4, ctx);
            break;
          case Gemm::dgrad:
            qlinear_dgrad(out.data(), dY.data(), W.data(), T, K, N, Precision::fp4, ctx);
            break;
          case Gemm::wgrad:
            qlinear_wgrad(out.data(), dY.data(), X.data(), T, K, N, Precision::fp4, ctx);
            break;
        }
      };
      set_qgemm_mode(QGemmMode::automatic);
      call(fast);
      set_qgemm_mode(QGemmMode::sgemm);
      call(slow);
      // The exact product of the quantized operands and the bounds: integer path as documented,
      // sgemm path γ(K+2)·Σ|a·b| (K-term FP32 sum of products of operands rounded once each).
      QuantSpec sa, sb;
      Gemm gg = g;
      Operand oa = g == Gemm::fprop ? Operand::activation : Operand::gradient;
      Operand ob = g == Gemm::wgrad ? Operand::activation : Operand::weight;
      sa = recipe.spec(Precision::fp4, gg, oa), sb = recipe.spec(Precision::fp4, gg, ob);
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
      std::vector<double> exact, bound;
      const E2M1Operand va = s.a.view(s.a_cols), vb = s.b.view(s.b_cols);
      exact_and_bound(va, vb, s.M, s.N, s.K, &exact, &bound);
      const double gk = double(s.K + 2) * kU / (1 - double(s.K + 2) * kU);
      for (int64_t m = 0; m < s.M; ++m)
        for (int64_t n = 0; n < s.N; ++n) {
          const size_t i = size_t(m * s.N + n);
          ++total;
          if (fast[i] == slow[i]) continue;
          ++differing;
          double abs_sum = 0;
          for (int64_t k = 0; k < s.K; ++k) abs_sum += std::fabs(value(va, m, k) * value(vb, n, k));
          // Each output is the BF16 rounding of a value within its path's bound of the exact
          // one, so the exact value lies within the bounds of the boundary between them.
          const double bf = bound[i], bs = gk * abs_sum * (1 + 1e-12) + 1e-300;
          ASSERT_GE(fast[i], bf16_below(exact[i] - bf)) << "output " << i;
          ASSERT_LE(fast[i], bf16_above(exact[i] + bf)) << "output " << i;
          ASSERT_GE(slow[i], bf16_below(exact[i] - bs)) << "output " << i;
          ASSERT_LE(slow[i], bf16_above(exact[i] + bs)) << "output " << i;
          if (bf16_step_up(std::min(fast[i], slow[i])) != std::max(fast[i], slow[i])) {
            // More than one BF16 step apart: only where the products cancel (almost) exactly,
            // so that the sgemm path's rounding noise is as large as the value itself; an
            // exact 0 stays exactly 0 on the integer path.
            ++apart;
            EXPECT_LE(std::fabs(exact[i]), bf + bs) << "output " << i;
            if (exact[i] == 0) {
              EXPECT_EQ(fast[i], 0.0f) << "output " << i;
            }
          }
        }
      std::printf("  %s %s: %lld differing, %lld by more than one step\n", name, gemm_name(g),
                  (long long)(differing - differing_before), (long long)(apart - apart_before));
    }
  }
  std::printf(
      "BF16 outputs differing from the sgemm path: %lld of %lld (%lld by more than one BF16 step, where the "
      "exact value is 0 or nearly)\n",
      (long long)differing, (long long)total, (long long)apart);
  RecordProperty("bf16_outputs_differing", std::to_string(differing));
  // The one-step differences (the two FP32 sums straddle a BF16 rounding boundary) are rare.
  EXPECT_LT(double(differing - apart), 1e-3 * double(total));
}

TEST(QGemm, QlinearScalarModeGivesTheSameBits) {
  ModeGuard guard;
  const int64_t T = 77, K = 200, N = 90;
  const std::vector<float> X = randn(size_t(T * K), 51), W = randn(size_t(N * K), 52, 0.05f),
                           dY = randn(size_t(T * N), 53, 1e-3f);
  const Recipe recipe = Recipe::named("snip");
  QLinearContext ctx;
  ctx.recipe = &recipe;
  std::vector<float> a(size_t(N * K), 0.5f), b(a);
  set_qgemm_mode(QGemmMode::automatic);
  qlinear_fprop(a.data(), X.data(), W.data(), T, K, N, Precision::fp4, ctx);
  set_qgemm_mode(QGemmMode::scalar);
  qlinear_fprop(b.data(), X.data(), W.data(), T, K, N, Precision::fp4, ctx);
  EXPECT_EQ(a, b);
  set_qgemm_mode(QGemmMode::automatic);
  qlinear_wgrad(a.data(), dY.data(), X.data(), T, K, N, Precision::fp4, ctx, true);
  set_qgemm_mode(QGemmMode::scalar);
  qlinear_wgrad(b.data(), dY.data(), X.data(), T, K, N, Precision::fp4, ctx, true);
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace snip
