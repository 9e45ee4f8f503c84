// QLinearOperand (snip/qlinear.h): one quantization per operand for both its error norm and the
// quantized GEMMs. The GEMMs on prequantized operands must equal qlinear_* on the source tensors
// bit for bit (every recipe kind, FP8 and FP4, every GEMM path), and the error must be the
// documented sum over qlinear_quantize_operand's output, the same bits for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "snip/hadamard.h"
#include "snip/qgemm.h"
#include "snip/qlinear.h"
#include "snip/thread_pool.h"

namespace snip {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  return v;
}

// ‖q − x‖² in the order QLinearOperand::quantize documents: per row eight partial sums
// (element c into partial c mod 8) combined as ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)), row sums
// added in row order.
double documented_err_sq(const float* q, const float* x, int64_t rows, int64_t cols) {
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t c = 0; c < cols; ++c) {
      const double d = double(q[r * cols + c]) - double(x[r * cols + c]);
      s[c % 8] += d * d;
    }
    total += ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }
  return total;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Restore {
  ~Restore() {
    set_qgemm_mode(QGemmMode::automatic);
    set_quant_threads(0);
  }
};

// T = 160 rows (not a multiple of 128 or 16), K = 200 and N = 72 (not multiples of 8 or 32):
// partial blocks and lane tails everywhere.
constexpr int64_t T = 160, K = 200, N = 72;

TEST(QLinearOperand, GemmsEqualQlinearOnTheSourceTensorsBitForBit) {
  Restore restore;
  const std::vector<float> X = randn(size_t(T * K), 1, 1.0f), W = randn(size_t(N * K), 2, 0.05f),
                           dY = randn(size_t(T * N), 3, 1e-3f);
  std::vector<RecipeOptions> recipes(5);
  recipes[1].name = "mx";
  recipes[2].name = "nvfp4", recipes[2].hadamard_wgrad = true;
  recipes[3].name = "tensor";
  recipes[4].name = "block:row:sr";
  int checked = 0;
  for (QGemmMode mode : {QGemmMode::automatic, QGemmMode::sgemm})
    for (const RecipeOptions& ro : recipes)
      for (Precision p : {Precision::fp8, Precision::fp4, Precision::bf16}) {
        set_qgemm_mode(mode);
        const Recipe recipe(ro);
        const QLinearContext ctx{&recipe, 7, 11, 3, "test.layer"};
        const std::string where = ro.name + " " + precision_name(p) + (mode == QGemmMode::sgemm ? " sgemm" : "");
        QLinearOperand xf, wf, gd, wd, gw, xw;
        xf.quantize(X.data(), T, K, p, Gemm::fprop, Operand::activation, ctx);
        wf.quantize(W.data(), N, K, p, Gemm::fprop, Operand::weight, ctx);
        gd.quantize(dY.data(), T, N, p, Gemm::dgrad, Operand::gradient, ctx);
        wd.quantize(W.data(), N, K, p, Gemm::dgrad, Operand::weight, ctx);
        gw.quantize(dY.data(), T, N, p, Gemm::wgrad, Operand::gradient, ctx);
        xw.quantize(X.data(), T, K, p, Gemm::wgrad, Operand::activation, ctx);
        if (mode == QGemmMode::automatic && p == Precision::fp4) {
          EXPECT_EQ(xf.form(), QLinearOperand::Form::e2m1_codes) << where;
        }
        if (mode == QGemmMode::sgemm) {
          EXPECT_EQ(xf.form(), QLinearOperand::Form::values) << where;
        }
        std::vector<float> y0(size_t(T * N)), dx0(size_t(T * K)), dw0(size_t(N * K));
        std::vector<float> y(y0.size()), dx(dx0.size()), dw(dw0.size()), dx_shared(dx0.size());
        qlinear_fprop(y0.data(), X.data(), W.data(), T, K, N, p, ctx);
        qlinear_dgrad(dx0.data(), dY.data(), W.data(), T, K, N, p, ctx);
        qlinear_wgrad(dw0.data(), dY.data(), X.data(), T, K, N, p, ctx);
        qlinear_fprop(y.data(), xf, wf, ctx);
        qlinear_dgrad(dx.data(), gd, wd, ctx);
        qlinear_wgrad(dw.data(), gw, xw, ctx);
        EXPECT_TRUE(same_bits(y, y0)) << where << " fprop";
        EXPECT_TRUE(same_bits(dx, dx0)) << where << " dgrad";
        EXPECT_TRUE(same_bits(dw, dw0)) << where << " wgrad";
        // a weight quantized for fprop serves dgrad when both quantize it alike
        if (wf.spec() == recipe.spec(p, Gemm::dgrad, Operand::weight) && wf.spec().rounding != Rounding::stochastic) {
          qlinear_dgrad(dx_shared.data(), gd, wf, ctx);
          EXPECT_TRUE(same_bits(dx_shared, dx0)) << where << " dgrad, shared W";
        }
        ++checked;
      }
  EXPECT_EQ(checked, 2 * 5 * 3);
}

// 528 × 200 and 528 × 136 operands: more than twice the quantizer's parallel grain (2^15
// elements), so its own per-thread statistics would split into chunks with 2 threads.
TEST(QLinearOperand, ErrorIsTheDocumentedSumOverTheQuantizedOperandForAnyThreadCount) {
  Restore restore;
  constexpr int64_t T = 528, N = 136;
  const std::vector<float> X = randn(size_t(T * K), 4, 1.0f), dY = randn(size_t(T * N), 5, 1e-3f);
  RecipeOptions nv;
  nv.name = "nvfp4", nv.hadamard_wgrad = true;
  for (const RecipeOptions& ro : {RecipeOptions{}, RecipeOptions{"mx"}, nv})
    for (Precision p : {Precision::fp8, Precision::fp4})
      for (Gemm g : {Gemm::fprop, Gemm::wgrad})
        for (Operand op : {Operand::activation, Operand::gradient}) {
          const Recipe recipe(ro);
          const QLinearContext ctx{&recipe, 7, 11, 3, "test.layer"};
          const bool grad = op == Operand::gradient;
          const float* src = grad ? dY.data() : X.data();
          const int64_t cols = grad ? N : K;
          const std::string where = ro.name + " " + precision_name(p) + " " + gemm_name(g) + " " + operand_name(op);
          // the reference: the GEMM's own quantized operand, and the source in its coordinates
          std::vector<float> q(size_t(T * cols)), x(src, src + T * cols);
          qlinear_quantize_operand(q.data(), src, T, cols, p, g, op, ctx);
          if (g == Gemm::wgrad && p == Precision::fp4 && ro.hadamard_wgrad) hadamard16_rows(x.data(), T, cols);
          const double want = documented_err_sq(q.data(), x.data(), T, cols);
          EXPECT_GT(want, 0.0) << where;
          for (int threads : {1, 2}) {
            set_quant_threads(threads);
            QLinearOperand o;
            EXPECT_EQ(o.quantize(src, T, cols, p, g, op, ctx), want) << where << " threads " << threads;
            std::vector<float> row(static_cast<size_t>(cols));
            o.decode_row(row.data(), T - 1);
            // the same values (E2M1 codes carry no sign of zero: −0 decodes as +0)
            for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(row[size_t(c)], q[size_t((T - 1) * cols + c)]) << where;
          }
        }
}

// Rows whose length is not a multiple of eight: the vectorized whole groups and the scalar
// tail still add element c into partial c mod 8 (FP8 codes, FP4 codes and BF16 values).
TEST(QLinearOperand, ErrorOfRowsWithAPartialGroupOfEightIsTheDocumentedSum) {
  const Recipe recipe;
  const QLinearContext ctx{&recipe, 7, 11, 3, "test.layer"};
  for (int64_t cols : {int64_t(5), int64_t(53), int64_t(131)}) {
    const int64_t rows = 9;
    const std::vector<float> x = randn(size_t(rows * cols), 8, 1.0f);
    for (Precision p : {Precision::fp8, Precision::fp4, Precision::bf16}) {
      std::vector<float> q(x.size());
      qlinear_quantize_operand(q.data(), x.data(), rows, cols, p, Gemm::fprop, Operand::activation, ctx);
      QLinearOperand o;
      EXPECT_EQ(o.quantize(x.data(), rows, cols, p, Gemm::fprop, Operand::activation, ctx),
                documented_err_sq(q.data(), x.data(), rows, cols))
          << precision_name(p) << " cols " << cols;
    }
  }
}

TEST(QLinearOperand, NonFiniteInputIsRejectedLikeTheGemms) {
  const Recipe recipe;
  const QLinearContext ctx{&recipe, 1, 2, 0, "model.layers.0.mlp.up_proj"};
  std::vector<float> x(size_t(4 * 32), 1.0f);
  x[37] = std::numeric_limits<float>::quiet_NaN();
  for (Precision p : {Precision::fp8, Precision::fp4}) {
    QLinearOperand o;
    try {
      o.quantize(x.data(), 4, 32, p, Gemm::fprop, Operand::activation, ctx);
      ADD_FAILURE() << "no error for " << precision_name(p);
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find("model.layers.0.mlp.up_proj"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("non-finite"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace snip
