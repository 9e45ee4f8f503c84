// The scaling-granularity family of recipes (block:N, block:row, channel, tensor, each with
// ':sr'; docs/FORMATS.md section 7): the spec table along each GEMM's reduction dimension, block
// boundaries against quantizing every block on its own, and the FP4 integer GEMM taking its
// exact-chunk path for every block length and agreeing with the double-precision reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "snip/error.h"
#include "snip/qgemm.h"
#include "snip/qlinear.h"

namespace snip {
namespace {

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  return v;
}

// Rows of very different magnitudes, and a spike every 37 elements, so a scale taken over the
// wrong span shows in the output.
std::vector<float> uneven(int64_t rows, int64_t cols, uint32_t seed) {
  std::vector<float> x = randn(size_t(rows * cols), seed);
  for (int64_t i = 0; i < rows * cols; ++i) {
    x[size_t(i)] *= std::ldexp(1.0f, int((i / cols) % 9) - 4);
    if (i % 37 == 5) x[size_t(i)] *= 50.0f;
  }
  return x;
}

void expect_blocks(const QuantSpec& s, int rows, int cols) {
  EXPECT_EQ(s.block_rows, rows);
  EXPECT_EQ(s.block_cols, cols);
}

TEST(RecipeFamily, BlockSpecsRunAlongTheReductionDimension) {
  const Recipe r = Recipe::named("block:32");
  EXPECT_EQ(r.name(), "block:32");
  for (Precision p : {Precision::fp8, Precision::fp4}) {
    SCOPED_TRACE(precision_name(p));
    expect_blocks(r.spec(p, Gemm::fprop, Operand::activation), 1, 32);  // X (T,K) along K
    expect_blocks(r.spec(p, Gemm::fprop, Operand::weight), 1, 32);      // W (N,K) along K: 1D, not 2D
    expect_blocks(r.spec(p, Gemm::dgrad, Operand::gradient), 1, 32);    // dY (T,N) along N
    expect_blocks(r.spec(p, Gemm::dgrad, Operand::weight), 32, 1);      // W (N,K) down N
    expect_blocks(r.spec(p, Gemm::wgrad, Operand::gradient), 32, 1);    // dY down T
    expect_blocks(r.spec(p, Gemm::wgrad, Operand::activation), 32, 1);  // X down T
    EXPECT_EQ(r.spec(p, Gemm::fprop, Operand::activation).scale, ScaleKind::fp32);
    for (Gemm g : kAllGemms)
      for (Operand op : {Operand::activation, Operand::weight, Operand::gradient})
        EXPECT_EQ(r.spec(p, g, op).rounding, Rounding::rne);
  }
  const Recipe row = Recipe::named("block:row");
  expect_blocks(row.spec(Precision::fp4, Gemm::fprop, Operand::activation), 1, 0);  // one scale per token
  expect_blocks(row.spec(Precision::fp4, Gemm::fprop, Operand::weight), 1, 0);      // per output channel
  expect_blocks(row.spec(Precision::fp4, Gemm::wgrad, Operand::activation), 0, 1);  // per column over T
  const Recipe ch = Recipe::named("channel");
  expect_blocks(ch.spec(Precision::fp4, Gemm::fprop, Operand::weight), 1, 0);
  expect_blocks(ch.spec(Precision::fp4, Gemm::dgrad, Operand::weight), 0, 1);
  expect_blocks(ch.spec(Precision::fp4, Gemm::fprop, Operand::activation), 0, 0);
  expect_blocks(ch.spec(Precision::fp4, Gemm::dgrad, Operand::gradient), 0, 0);
  expect_blocks(ch.spec(Precision::fp8, Gemm::wgrad, Operand::activation), 0, 0);
  // The named per-tensor recipe is unchanged by the family.
  EXPECT_EQ(Recipe::named("tensor").spec(Precision::fp4, Gemm::dgrad, Operand::gradient).rounding, Rounding::rne);
}

TEST(RecipeFamily, SrRoundsOnlyFp4GradientsStochastically) {
  for (const char* name : {"block:16:sr", "block:row:sr", "channel:sr", "tensor:sr"}) {
    SCOPED_TRACE(name);
    const Recipe r = Recipe::named(name);
    EXPECT_EQ(r.name(), name);
    for (Gemm g : {Gemm::dgrad, Gemm::wgrad}) {
      EXPECT_EQ(r.spec(Precision::fp4, g, Operand::gradient).rounding, Rounding::stochastic);
      EXPECT_EQ(r.spec(Precision::fp8, g, Operand::gradient).rounding, Rounding::rne);
    }
    EXPECT_EQ(r.spec(Precision::fp4, Gemm::wgrad, Operand::activation).rounding, Rounding::rne);
    EXPECT_EQ(r.spec(Precision::fp4, Gemm::fprop, Operand::weight).rounding, Rounding::rne);
    // Everything but the rounding equals the RNE twin.
    std::string rne = name;
    rne.resize(rne.size() - 3);
    QuantSpec s = r.spec(Precision::fp4, Gemm::wgrad, Operand::gradient);
    s.rounding = Rounding::rne;
    EXPECT_EQ(s, Recipe::named(rne).spec(Precision::fp4, Gemm::wgrad, Operand::gradient));
  }
}

TEST(RecipeFamily, BadNamesAndOptionsThrow) {
  EXPECT_THROW(Recipe::named("block:1"), Error);
  EXPECT_THROW(Recipe::named("snip:sr"), Error);
  RecipeOptions o;
  o.name = "block:16";
  o.hadamard_wgrad = true;  // an nvfp4 option
  EXPECT_THROW(Recipe{o}, Error);
}

// Every block of a block:N (or whole-line) operand is quantized exactly as that block alone,
// extracted and quantized with one per-tensor scale: the block boundaries fall every N elements
// along the reduction dimension, starting at 0, with a partial last block.
TEST(RecipeFamily, EachBlockQuantizesLikeItselfAlone) {
  const int64_t rows = 37, cols = 300;  // 300 is no multiple of 16, 32, 48 or 128
  const std::vector<float> x = uneven(rows, cols, 3);
  for (const char* name : {"block:16", "block:32", "block:48", "block:128", "block:row", "channel"})
    for (Precision p : {Precision::fp4, Precision::fp8})
      for (Gemm g : {Gemm::fprop, Gemm::wgrad}) {  // along the columns, then down the rows
        const Operand op = std::string(name) == "channel" ? Operand::weight : Operand::activation;
        SCOPED_TRACE(std::string(name) + " " + precision_name(p) + " " + gemm_name(g));
        const QuantSpec spec = Recipe::named(name).spec(p, g, op);
        const bool down = g == Gemm::wgrad;
        const int64_t line = down ? rows : cols, lines = down ? cols : rows;
        const int64_t len =
            (down ? spec.block_rows : spec.block_cols) <= 0 ? line : (down ? spec.block_rows : spec.block_cols);
        std::vector<float> y(x.size());
        fake_quantize(y.data(), x.data(), rows, cols, spec, RngKey{}, "test");
        QuantSpec alone = spec;
        alone.block_rows = alone.block_cols = 0;  // one scale for the extracted block
        int64_t blocks = 0;
        for (int64_t l = 0; l < lines; ++l)
          for (int64_t b0 = 0; b0 < line; b0 += len, ++blocks) {
            const int64_t n = std::min(len, line - b0);
            std::vector<float> in(static_cast<size_t>(n)), out(static_cast<size_t>(n));
            auto at = [&](int64_t i) { return size_t(down ? (b0 + i) * cols + l : l * cols + b0 + i); };
            for (int64_t i = 0; i < n; ++i) in[size_t(i)] = x[at(i)];
            fake_quantize(out.data(), in.data(), 1, n, alone, RngKey{}, "block");
            for (int64_t i = 0; i < n; ++i)
              ASSERT_EQ(0, std::memcmp(&out[size_t(i)], &y[at(i)], 4))
                  << "line " << l << ", block at " << b0 << ", element " << i;
          }
        EXPECT_EQ(blocks, lines * ((line + len - 1) / len));
      }
}

// The integer E2M1 GEMM sums exact chunks inside both operands' blocks: for every member of
// the family each GEMM's operand pair nests (chunk = the block length, or min(K, 4096) for whole
// lines), so qlinear takes the integer path, and its result equals the double-precision product
// of the same quantized operands up to FP32 accumulation over the chunks.
TEST(RecipeFamily, Fp4IntegerGemmNestsAndMatchesTheReference) {
  const int64_t T = 45, K = 300, N = 70;
  const std::vector<float> X = uneven(T, K, 11), W = randn(size_t(N * K), 12, 0.05f),
                           dY = randn(size_t(T * N), 13, 1e-3f);
  for (const char* name : {"block:16", "block:48", "block:128:sr", "block:row", "channel:sr", "tensor:sr"}) {
    SCOPED_TRACE(name);
    RecipeOptions ro;
    ro.name = name;
    ro.bf16_output = false;  // compare the FP32 sums themselves
    const Recipe r(ro);
    const std::string fam = name;
    const int64_t block =
        fam.rfind("block:", 0) == 0 && fam.find("row") == std::string::npos ? std::stoll(fam.substr(6)) : 0;
    auto view = [&](Gemm g, Operand op, int64_t rows, int64_t cols, bool along_cols) {
      return e2m1_operand(nullptr, nullptr, rows, cols, r.spec(Precision::fp4, g, op), along_cols);
    };
    // fprop reduces over K, dgrad over N, wgrad over T.
    const int64_t fprop_chunk = qgemm_e2m1_chunk(view(Gemm::fprop, Operand::activation, T, K, true),
                                                 view(Gemm::fprop, Operand::weight, N, K, true), K);
    const int64_t dgrad_chunk = qgemm_e2m1_chunk(view(Gemm::dgrad, Operand::gradient, T, N, true),
                                                 view(Gemm::dgrad, Operand::weight, N, K, false), N);
    const int64_t wgrad_chunk = qgemm_e2m1_chunk(view(Gemm::wgrad, Operand::gradient, T, N, false),
                                                 view(Gemm::wgrad, Operand::activation, T, K, false), T);
    EXPECT_EQ(fprop_chunk, block ? std::min(block, K) : K);
    EXPECT_EQ(dgrad_chunk, block ? std::min(block, N) : N);
    EXPECT_EQ(wgrad_chunk, block ? std::min(block, T) : T);

    QLinearContext ctx;
    ctx.recipe = &r;
    ctx.seed = 5;
    std::vector<float> fast, ref;
    auto check = [&](const char* what, int64_t reduce, const std::vector<float>& a, const std::vector<float>& b) {
      SCOPED_TRACE(what);
      ASSERT_EQ(a.size(), b.size());
      // A loose FP32 bound: relative 1e-5 of the largest magnitude, against double sums.
      double scale = 0;
      for (float v : b) scale = std::max(scale, double(std::fabs(v)));
      for (size_t i = 0; i < a.size(); ++i)
        ASSERT_NEAR(a[i], b[i], 1e-5 * scale * std::sqrt(double(reduce)) + 1e-30) << "element " << i;
    };
    fast.assign(size_t(T * N), 0), ref = fast;
    qlinear_fprop(fast.data(), X.data(), W.data(), T, K, N, Precision::fp4, ctx);
    qlinear_fprop_ref(ref.data(), X.data(), W.data(), T, K, N, Precision::fp4, ctx);
    check("fprop", K, fast, ref);
    fast.assign(size_t(T * K), 0), ref = fast;
    qlinear_dgrad(fast.data(), dY.data(), W.data(), T, K, N, Precision::fp4, ctx);
    qlinear_dgrad_ref(ref.data(), dY.data(), W.data(), T, K, N, Precision::fp4, ctx);
    check("dgrad", N, fast, ref);
    fast.assign(size_t(N * K), 0), ref = fast;
    qlinear_wgrad(fast.data(), dY.data(), X.data(), T, K, N, Precision::fp4, ctx);
    qlinear_wgrad_ref(ref.data(), dY.data(), X.data(), T, K, N, Precision::fp4, ctx);
    check("wgrad", T, fast, ref);
  }
}

}  // namespace
}  // namespace snip
