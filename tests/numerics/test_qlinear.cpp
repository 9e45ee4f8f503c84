// Recipes and quantized GEMMs (METHOD.md sections 1-2): the spec table per recipe, GEMM and
// operand; fprop/dgrad/wgrad against a double-precision product of the same quantized
// operands; BF16 output rounding; accumulation; the Hadamard rotation cancelling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "snip/elem_format.h"
#include "snip/error.h"
#include "snip/hadamard.h"
#include "snip/qlinear.h"

namespace snip {
namespace {

// Tolerance of an FP32 GEMM against the exact product: |err| <= kGemmRelTol · Σ|a_i·b_i|.
constexpr double kGemmRelTol = 1e-5;

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  return v;
}

TEST(Recipe, SnipSpecsFollowTheReductionDimension) {
  const Recipe r = Recipe::named("snip");
  // fprop reduces over K: X (T,K) 1×128, W 128×128.
  QuantSpec s = r.spec(Precision::fp4, Gemm::fprop, Operand::activation);
  EXPECT_EQ(s.format, ElemFormat::e2m1);
  EXPECT_EQ(s.block_rows, 1);
  EXPECT_EQ(s.block_cols, 128);
  EXPECT_EQ(s.scale, ScaleKind::fp32);
  EXPECT_EQ(s.rounding, Rounding::rne);
  s = r.spec(Precision::fp4, Gemm::fprop, Operand::weight);
  EXPECT_EQ(s.block_rows, 128);
  EXPECT_EQ(s.block_cols, 128);
  // dgrad reduces over N: dY (T,N) 1×128 with stochastic rounding at FP4; W keeps its 2D blocks.
  s = r.spec(Precision::fp4, Gemm::dgrad, Operand::gradient);
  EXPECT_EQ(s.block_rows, 1);
  EXPECT_EQ(s.block_cols, 128);
  EXPECT_EQ(s.rounding, Rounding::stochastic);
  EXPECT_EQ(r.spec(Precision::fp4, Gemm::dgrad, Operand::weight), r.spec(Precision::fp4, Gemm::fprop, Operand::weight));
  // wgrad reduces over T: dY and X in 128×1 tiles (down the columns).
  for (Operand op : {Operand::gradient, Operand::activation}) {
    s = r.spec(Precision::fp4, Gemm::wgrad, op);
    EXPECT_EQ(s.block_rows, 128);
    EXPECT_EQ(s.block_cols, 1);
  }
  // FP8 is E4M3 with RNE everywhere; E5M2 gradients only on request.
  s = r.spec(Precision::fp8, Gemm::dgrad, Operand::gradient);
  EXPECT_EQ(s.format, ElemFormat::e4m3);
  EXPECT_EQ(s.rounding, Rounding::rne);
  RecipeOptions o;
  o.fp8_gradients_e5m2 = true;
  EXPECT_EQ(Recipe(o).spec(Precision::fp8, Gemm::wgrad, Operand::gradient).format, ElemFormat::e5m2);
  EXPECT_EQ(Recipe(o).spec(Precision::fp8, Gemm::wgrad, Operand::activation).format, ElemFormat::e4m3);
  // bf16 is never scaled; fp32 is the identity.
  EXPECT_EQ(r.spec(Precision::bf16, Gemm::fprop, Operand::weight).scale, ScaleKind::none);
  EXPECT_EQ(r.spec(Precision::bf16, Gemm::fprop, Operand::weight).format, ElemFormat::bf16);
  EXPECT_EQ(r.spec(Precision::fp32, Gemm::wgrad, Operand::gradient).format, ElemFormat::fp32);
}

TEST(Recipe, MxNvfp4AndTensor) {
  const Recipe mx = Recipe::named("mx");
  QuantSpec s = mx.spec(Precision::fp8, Gemm::dgrad, Operand::weight);  // W reduced over N: 32×1
  EXPECT_EQ(s.scale, ScaleKind::e8m0);
  EXPECT_EQ(s.e8m0_mode, E8M0Mode::rceil);
  EXPECT_EQ(s.block_rows, 32);
  EXPECT_EQ(s.block_cols, 1);
  EXPECT_EQ(mx.spec(Precision::fp4, Gemm::fprop, Operand::weight).block_cols, 32);
  EXPECT_EQ(mx.spec(Precision::fp4, Gemm::fprop, Operand::weight).block_rows, 1);
  const Recipe nv = Recipe::named("nvfp4");
  s = nv.spec(Precision::fp4, Gemm::fprop, Operand::weight);
  EXPECT_EQ(s.scale, ScaleKind::nvfp4);
  EXPECT_EQ(s.block_rows, 16);
  EXPECT_EQ(s.block_cols, 16);
  s = nv.spec(Precision::fp4, Gemm::wgrad, Operand::gradient);
  EXPECT_EQ(s.block_rows, 16);
  EXPECT_EQ(s.block_cols, 1);
  EXPECT_EQ(s.rounding, Rounding::stochastic);
  EXPECT_EQ(nv.spec(Precision::fp4, Gemm::fprop, Operand::activation).rounding, Rounding::rne);
  EXPECT_EQ(nv.spec(Precision::fp8, Gemm::fprop, Operand::activation),
            mx.spec(Precision::fp8, Gemm::fprop, Operand::activation));
  const Recipe t = Recipe::named("tensor");
  s = t.spec(Precision::fp4, Gemm::wgrad, Operand::activation);
  EXPECT_EQ(s.block_rows, 0);
  EXPECT_EQ(s.block_cols, 0);
  EXPECT_EQ(s.scale, ScaleKind::fp32);
  EXPECT_THROW(Recipe::named("fp4-everything"), Error);
  RecipeOptions bad;
  bad.hadamard_wgrad = true;  // only nvfp4 has it
  EXPECT_THROW(Recipe{bad}, Error);
}

// Double-precision C = op(A)·op(B) from already quantized operands.
std::vector<double> gemm_ref(const std::vector<float>& A, const std::vector<float>& B, int64_t M, int64_t N, int64_t K,
                             bool transA, bool transB, std::vector<double>* abs_sum) {
  std::vector<double> C(size_t(M * N), 0.0);
  abs_sum->assign(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0, aacc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double a = transA ? A[size_t(k * M + i)] : A[size_t(i * K + k)];
        const double b = transB ? B[size_t(j * K + k)] : B[size_t(k * N + j)];
        acc += a * b;
        aacc += std::fabs(a * b);
      }
      C[size_t(i * N + j)] = acc;
      (*abs_sum)[size_t(i * N + j)] = aacc;
    }
  return C;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::vector<double>& abs_sum) {
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), want[i], kGemmRelTol * abs_sum[i] + 1e-30) << "element " << i;
}

struct GemmCase {
  const char* recipe;
  Precision p;
  bool hadamard;
};

TEST(QLinear, AllThreeGemmsMatchDoubleProductsOfTheSameQuantizedOperands) {
  const int64_t T = 150, K = 70, N = 90;  // partial 128- and 16-blocks everywhere
  const std::vector<float> X = randn(size_t(T * K), 1), W = randn(size_t(N * K), 2, 0.05f),
                           dY = randn(size_t(T * N), 3, 1e-3f);
  const GemmCase cases[] = {
      {"snip", Precision::fp4, false},  {"snip", Precision::fp8, false}, {"snip", Precision::bf16, false},
      {"snip", Precision::fp32, false}, {"mx", Precision::fp4, false},   {"mx", Precision::fp8, false},
      {"nvfp4", Precision::fp4, false}, {"nvfp4", Precision::fp4, true}, {"tensor", Precision::fp4, false}};
  for (const GemmCase& gc : cases) {
    SCOPED_TRACE(std::string(gc.recipe) + " " + precision_name(gc.p) + (gc.hadamard ? " +RHT" : ""));
    RecipeOptions ro;
    ro.name = gc.recipe;
    ro.hadamard_wgrad = gc.hadamard;
    ro.bf16_output = false;
    const Recipe recipe(ro);
    QLinearContext ctx;
    ctx.recipe = &recipe;
    ctx.seed = 99;
    ctx.step = 4;
    ctx.layer = 12;
    ctx.layer_name = "model.layers.1.mlp.up_proj";
    auto quantized = [&](const std::vector<float>& src, int64_t rows, int64_t cols, Gemm g, Operand op) {
      std::vector<float> q(src.size());
      qlinear_quantize_operand(q.data(), src.data(), rows, cols, gc.p, g, op, ctx);
      return q;
    };
    std::vector<double> abs_sum;
    // fprop Y = Q(X)·Q(W)ᵀ
    std::vector<float> Y(size_t(T * N));
    qlinear_fprop(Y.data(), X.data(), W.data(), T, K, N, gc.p, ctx);
    expect_close(Y,
                 gemm_ref(quantized(X, T, K, Gemm::fprop, Operand::activation),
                          quantized(W, N, K, Gemm::fprop, Operand::weight), T, N, K, false, true, &abs_sum),
                 abs_sum);
    // dgrad dX = Q(dY)·Q(W)
    std::vector<float> dX(size_t(T * K));
    qlinear_dgrad(dX.data(), dY.data(), W.data(), T, K, N, gc.p, ctx);
    expect_close(dX,
                 gemm_ref(quantized(dY, T, N, Gemm::dgrad, Operand::gradient),
                          quantized(W, N, K, Gemm::dgrad, Operand::weight), T, K, N, false, false, &abs_sum),
                 abs_sum);
    // wgrad dW = Q(dY)ᵀ·Q(X)
    std::vector<float> dW(size_t(N * K));
    qlinear_wgrad(dW.data(), dY.data(), X.data(), T, K, N, gc.p, ctx);
    expect_close(dW,
                 gemm_ref(quantized(dY, T, N, Gemm::wgrad, Operand::gradient),
                          quantized(X, T, K, Gemm::wgrad, Operand::activation), N, K, T, true, false, &abs_sum),
                 abs_sum);
    // fp32 is exact up to FP32 summation; every quantized precision really changes the product.
    std::vector<float> Y32(size_t(T * N));
    QLinearContext c32 = ctx;
    qlinear_fprop(Y32.data(), X.data(), W.data(), T, K, N, Precision::fp32, c32);
    if (gc.p == Precision::fp32)
      EXPECT_EQ(Y, Y32);
    else
      EXPECT_NE(Y, Y32);
  }
}

TEST(QLinear, FastGemmsMatchTheirScalarTwins) {
  // Same quantized operands bit for bit (fake_quantize == fake_quantize_ref), so only the FP32
  // summation order differs: ‖fast − ref‖ <= kGemmRelTol·‖ref‖. (The Hadamard option is left out:
  // its fast and reference rotations differ in the last bit, which may flip a rounding.)
  const int64_t T = 96, K = 40, N = 72;
  const std::vector<float> X = randn(size_t(T * K), 11), W = randn(size_t(N * K), 12, 0.1f),
                           dY = randn(size_t(T * N), 13, 1e-2f);
  for (const char* name : {"snip", "mx", "nvfp4", "tensor"}) {
    for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp8, Precision::fp4}) {
      SCOPED_TRACE(std::string(name) + " " + precision_name(p));
      RecipeOptions ro;
      ro.name = name;
      ro.bf16_output = false;
      const Recipe recipe(ro);
      QLinearContext ctx;
      ctx.recipe = &recipe;
      ctx.seed = 3;
      auto rel = [](const std::vector<float>& a, const std::vector<float>& b) {
        double d = 0, n = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          d += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
          n += double(b[i]) * b[i];
        }
        return std::sqrt(d / n);
      };
      std::vector<float> f(size_t(T * N)), r(size_t(T * N));
      qlinear_fprop(f.data(), X.data(), W.data(), T, K, N, p, ctx);
      qlinear_fprop_ref(r.data(), X.data(), W.data(), T, K, N, p, ctx);
      EXPECT_LE(rel(f, r), kGemmRelTol);
      f.assign(size_t(T * K), 0), r.assign(size_t(T * K), 0);
      qlinear_dgrad(f.data(), dY.data(), W.data(), T, K, N, p, ctx);
      qlinear_dgrad_ref(r.data(), dY.data(), W.data(), T, K, N, p, ctx);
      EXPECT_LE(rel(f, r), kGemmRelTol);
      f.assign(size_t(N * K), 1), r.assign(size_t(N * K), 1);
      qlinear_wgrad(f.data(), dY.data(), X.data(), T, K, N, p, ctx, true);
      qlinear_wgrad_ref(r.data(), dY.data(), X.data(), T, K, N, p, ctx, true);
      EXPECT_LE(rel(f, r), kGemmRelTol);
    }
  }
}

TEST(QLinear, Bf16OutputIsTheRoundedFp32OutputAndAccumulateAddsIt) {
  const int64_t T = 64, K = 48, N = 32;
  const std::vector<float> X = randn(size_t(T * K), 4), W = randn(size_t(N * K), 5), dY = randn(size_t(T * N), 6);
  RecipeOptions with, without;
  without.bf16_output = false;
  const Recipe rw(with), rwo(without);
  QLinearContext cw, cwo;
  cw.recipe = &rw;
  cwo.recipe = &rwo;
  std::vector<float> a(size_t(T * N)), b(size_t(T * N));
  qlinear_fprop(a.data(), X.data(), W.data(), T, K, N, Precision::fp8, cw);
  qlinear_fprop(b.data(), X.data(), W.data(), T, K, N, Precision::fp8, cwo);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], bf16_round(b[i]));
  // wgrad accumulate: dW_acc = dW0 + bf16(product), the running sum stays FP32.
  std::vector<float> prod(size_t(N * K)), acc = randn(size_t(N * K), 7);
  const std::vector<float> acc0 = acc;
  qlinear_wgrad(prod.data(), dY.data(), X.data(), T, K, N, Precision::fp4, cw);
  qlinear_wgrad(acc.data(), dY.data(), X.data(), T, K, N, Precision::fp4, cw, true);
  for (size_t i = 0; i < acc.size(); ++i) ASSERT_EQ(acc[i], acc0[i] + prod[i]);
}

TEST(QLinear, NonFiniteOperandNamesLayerGemmAndStep) {
  const int64_t T = 8, K = 16, N = 4;
  std::vector<float> X(size_t(T * K), 1.0f), W(size_t(N * K), 1.0f), Y(size_t(T * N));
  W[5] = NAN;
  const Recipe r = Recipe::named("snip");
  QLinearContext ctx;
  ctx.recipe = &r;
  ctx.step = 321;
  ctx.layer_name = "model.layers.2.self_attn.q_proj";
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp8, Precision::fp4}) {
    try {
      qlinear_fprop(Y.data(), X.data(), W.data(), T, K, N, p, ctx);
      ADD_FAILURE() << "no error at " << precision_name(p);
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("model.layers.2.self_attn.q_proj"), std::string::npos) << m;
      EXPECT_NE(m.find("fprop"), std::string::npos) << m;
      EXPECT_NE(m.find("step 321"), std::string::npos) << m;
    }
  }
}

TEST(Hadamard, FastMatchesRefAndIsOrthogonal) {
  const int64_t rows = 50, cols = 33;  // 3 full groups + a partial group left as is
  const std::vector<float> x = randn(size_t(rows * cols), 8);
  std::vector<float> fast = x, ref = x;
  hadamard16_rows(fast.data(), rows, cols);
  hadamard16_rows_ref(ref.data(), rows, cols);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_NEAR(fast[i], ref[i], 1e-5f * 4) << i;
  for (int64_t i = 48 * cols; i < rows * cols; ++i) EXPECT_EQ(fast[size_t(i)], x[size_t(i)]);
  // Norm preserved per column within each group (orthogonality).
  for (int64_t c = 0; c < cols; ++c) {
    double n0 = 0, n1 = 0;
    for (int64_t r = 0; r < 16; ++r) {
      n0 += double(x[size_t(r * cols + c)]) * x[size_t(r * cols + c)];
      n1 += double(fast[size_t(r * cols + c)]) * fast[size_t(r * cols + c)];
    }
    EXPECT_NEAR(n0, n1, 1e-5 * n0);
  }
  // Applying M to both operands leaves AᵀB unchanged.
  const std::vector<float> y = randn(size_t(rows * cols), 9);
  std::vector<float> yr = y;
  hadamard16_rows(yr.data(), rows, cols);
  double before = 0, after = 0;
  for (int64_t r = 0; r < rows; ++r) {
    before += double(x[size_t(r * cols + 3)]) * y[size_t(r * cols + 5)];
    after += double(fast[size_t(r * cols + 3)]) * yr[size_t(r * cols + 5)];
  }
  EXPECT_NEAR(before, after, 1e-4);
}

}  // namespace
}  // namespace snip
