// Quantizing straight into the integer GEMM's packed layout (snip/qgemm.h, E2M1Gemm): the packed
// codes, scales and column sums are byte for byte what quantize_e2m1_code2 followed by packing
// produces, for every recipe's FP4 specs, each GEMM's operand orientation, stochastic rounding
// on and off, odd shapes and 1 or 2 threads; and qlinear's FP4 GEMMs (which use it), with the
// Hadamard option on and off, give the bits of the codes-then-pack GEMM. The same for the
// BF16-element GEMM (Bf16Gemm): FP8 with FP32 block scales and BF16 operands.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "isa_tiers.h"
#include "snip/elem_format.h"
#include "snip/error.h"
#include "snip/hadamard.h"
#include "snip/qgemm.h"
#include "snip/qlinear.h"

namespace snip {
namespace {

std::vector<float> randn(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = nd(gen);
  // Some exact zeros and large values: zero codes and saturated blocks take part too.
  for (size_t i = 0; i < n; i += 29) v[i] = 0.0f;
  for (size_t i = 7; i < n; i += 97) v[i] *= 300.0f;
  return v;
}

struct ThreadsGuard {
  ~ThreadsGuard() { set_quant_threads(0); }
};

// One operand as the GEMM sees it: its stored shape and orientation, spec and key.
struct Side {
  const std::vector<float>* x;
  int64_t rows, cols;
  QuantSpec spec;
  RngKey key;
  bool reduce_along_cols;
};

struct Codes {
  std::vector<int8_t> code2;
  std::vector<float> scales;
};
Codes codes_of(const Side& s) {
  Codes c;
  c.code2.assign(size_t(s.rows * s.cols), 99);
  c.scales.assign(size_t(e2m1_scale_count(s.rows, s.cols, s.spec)), -1.0f);
  quantize_e2m1_code2(c.code2.data(), c.scales.data(), s.x->data(), s.rows, s.cols, s.spec, s.key, "test");
  return c;
}

// Packs C(M,N) = A·Bᵀ both ways (the codes A and B packed; a and b quantized straight into the
// layout) with one GEMM class; expects the same bytes and the same product bits.
template <class Gemm, class Operand>
void expect_same_packing_with(int64_t M, int64_t N, int64_t K, const Operand& A, const Operand& B, const Side& a,
                              const Side& b, const std::string& what) {
  Gemm old_path, fused;
  old_path.prepare(M, N, K, A, B);
  old_path.pack_a(A);
  old_path.pack_b(B);
  fused.prepare(M, N, K, A, B);
  fused.quantize_a(a.x->data(), a.rows, a.cols, a.spec, a.key, "A", a.reduce_along_cols);
  fused.quantize_b(b.x->data(), b.rows, b.cols, b.spec, b.key, "B", b.reduce_along_cols);
  EXPECT_EQ(fused.packing_difference(old_path), "") << what;
  std::vector<float> c0(size_t(M * N)), c1(size_t(M * N), -1.0f);
  if constexpr (std::is_void_v<decltype(old_path.run(c0.data(), N))>) {
    old_path.run(c0.data(), N);
    fused.run(c1.data(), N);
  } else {  // the BF16-element GEMM says whether every element was a BF16 value
    ASSERT_TRUE(old_path.run(c0.data(), N)) << what;
    ASSERT_TRUE(fused.run(c1.data(), N)) << what;
  }
  EXPECT_EQ(std::memcmp(c0.data(), c1.data(), c0.size() * 4), 0) << what;
}

void expect_same_packing(int64_t M, int64_t N, int64_t K, const Side& a, const Side& b, const std::string& what) {
  const Codes ca = codes_of(a), cb = codes_of(b);
  const E2M1Operand A = e2m1_operand(ca.code2.data(), ca.scales.data(), a.rows, a.cols, a.spec, a.reduce_along_cols);
  const E2M1Operand B = e2m1_operand(cb.code2.data(), cb.scales.data(), b.rows, b.cols, b.spec, b.reduce_along_cols);
  ASSERT_GT(qgemm_e2m1_chunk(A, B, K), 0) << what;
  expect_same_packing_with<E2M1Gemm>(M, N, K, A, B, a, b, what);
}

// The three GEMMs of a linear layer, C(M,N) = A·Bᵀ: fprop X·Wᵀ, dgrad dY·W, wgrad dYᵀ·X, each
// checked by `check` on the operands `side` quantizes (along K or across it).
template <class Check, class MakeSide>
void for_each_gemm(const Check& check, const MakeSide& side, const std::vector<float>& X, const std::vector<float>& W,
                   const std::vector<float>& dY, int64_t T, int64_t K, int64_t N, const std::string& what) {
  check(T, N, K, side(X, T, K, Gemm::fprop, Operand::activation, true),
        side(W, N, K, Gemm::fprop, Operand::weight, true), what + " fprop");
  check(T, K, N, side(dY, T, N, Gemm::dgrad, Operand::gradient, true),
        side(W, N, K, Gemm::dgrad, Operand::weight, false), what + " dgrad");
  check(N, K, T, side(dY, T, N, Gemm::wgrad, Operand::gradient, false),
        side(X, T, K, Gemm::wgrad, Operand::activation, false), what + " wgrad");
}

const char* const kRecipes[] = {"snip",     "mx",          "nvfp4",     "tensor",  "tensor:sr",
                                "block:32", "block:32:sr", "block:row", "channel", "channel:sr"};

TEST(QGemmPack, QuantizingIntoThePackedLayoutGivesTheBytesOfQuantizeThenPack) {
  ThreadsGuard guard;
  // Odd shapes: partial panels, partial register tiles, chunks not a multiple of 4, batches
  // that do not start on a quad of k; a larger one with several 128-blocks and full quads; and
  // one where every operand has several bands of 128 rows (bands placed whole under RNE, in
  // strips under SR, with a last band cut short, a last panel of 200 − 192 or 302 − 256
  // columns and a last K chunk of 46).
  const int64_t shapes[][3] = {{37, 70, 45}, {130, 200, 67}, {256, 384, 128}, {260, 302, 200}};
  for (const char* name : kRecipes)
    for (const auto& sh : shapes)
      for (int threads : {1, 2}) {
        set_quant_threads(threads);
        const Recipe recipe = Recipe::named(name);
        const int64_t T = sh[0], K = sh[1], N = sh[2];
        const auto X = randn(size_t(T * K), 1), W = randn(size_t(N * K), 2), dY = randn(size_t(T * N), 3);
        auto side = [&](const std::vector<float>& x, int64_t rows, int64_t cols, Gemm g, Operand op, bool along) {
          return Side{
              &x,   rows, cols, recipe.spec(Precision::fp4, g, op), RngKey{5, 6, 7, uint32_t(int(g) * 4 + int(op))},
              along};
        };
        const std::string what = std::string(name) + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                                 " N=" + std::to_string(N) + " threads=" + std::to_string(threads);
        for_each_gemm(expect_same_packing, side, X, W, dY, T, K, N, what);
      }
}

TEST(QGemmPack, BandsTooWideForOneBufferGoThroughStripsWithTheSameBytes) {
  // Under RNE a band of 128 rows goes to the sink whole when its codes fit 1 MiB; at 8,300
  // columns (128 × 8,300 bytes) it goes a strip at a time instead. Both bands of the weight
  // (fprop, and down its rows for dgrad) and of wgrad's X take that path here.
  ThreadsGuard guard;
  const int64_t T = 130, K = 8300, N = 130;
  const auto X = randn(size_t(T * K), 31), W = randn(size_t(N * K), 32), dY = randn(size_t(T * N), 33);
  for (int threads : {1, 2}) {
    set_quant_threads(threads);
    const Recipe recipe = Recipe::named("snip");
    auto side = [&](const std::vector<float>& x, int64_t rows, int64_t cols, Gemm g, Operand op, bool along) {
      return Side{&x,   rows, cols, recipe.spec(Precision::fp4, g, op), RngKey{3, 1, 4, uint32_t(int(g) * 4 + int(op))},
                  along};
    };
    for_each_gemm(expect_same_packing, side, X, W, dY, T, K, N, "snip K=8300 threads=" + std::to_string(threads));
  }
}

TEST(QGemmPack, BatchesOfBColumnsCutInsideA16ColumnGroupGiveTheSameBytes) {
  // 1×32 weight tiles (mx) go to B's sink in batches of whole rows = B's columns; on 2 threads
  // the 1100 rows split at 550, inside a group of 16 columns, so both sides of the cut go
  // column by column while whole groups go 16 at a time (with their column sums).
  ThreadsGuard guard;
  set_quant_threads(2);
  const Recipe recipe = Recipe::named("mx");
  const int64_t T = 20, K = 64, N = 1100;
  const auto X = randn(size_t(T * K), 11), W = randn(size_t(N * K), 12);
  const Side a{&X, T, K, recipe.spec(Precision::fp4, Gemm::fprop, Operand::activation), RngKey{1, 1, 1, 1}, true};
  const Side b{&W, N, K, recipe.spec(Precision::fp4, Gemm::fprop, Operand::weight), RngKey{1, 1, 1, 2}, true};
  ASSERT_EQ(b.spec.block_rows, 1);
  expect_same_packing(T, N, K, a, b, "mx fprop, W 1100x64");
}

// Packs both operands of C = A·Bᵀ straight into the layout, with the GEMM mode given.
void quantize_both(E2M1Gemm& g, QGemmMode mode, int64_t M, int64_t N, int64_t K, const Side& a, const Side& b) {
  set_qgemm_mode(mode);
  const E2M1Operand va = e2m1_operand(nullptr, nullptr, a.rows, a.cols, a.spec, a.reduce_along_cols);
  const E2M1Operand vb = e2m1_operand(nullptr, nullptr, b.rows, b.cols, b.spec, b.reduce_along_cols);
  g.prepare(M, N, K, va, vb);
  g.quantize_a(a.x->data(), a.rows, a.cols, a.spec, a.key, "A", a.reduce_along_cols);
  g.quantize_b(b.x->data(), b.rows, b.cols, b.spec, b.key, "B", b.reduce_along_cols);
  set_qgemm_mode(QGemmMode::automatic);
}

TEST(QGemmPack, VectorPackingEqualsThePortableTwinForcedWithScalarMode) {
  // The same fused packing with every portable path forced (SNIP_QGEMM=scalar: portable rounding
  // kernels, row batches, scalar placement and the column-sum pass) against the default (AVX-512
  // strips, VNNI placement with fused sums where the CPU has them), on operands of several bands.
  ThreadsGuard guard;
  const int64_t T = 260, K = 302, N = 200;
  const auto X = randn(size_t(T * K), 21), W = randn(size_t(N * K), 22), dY = randn(size_t(T * N), 23);
  for (const char* name : {"snip", "nvfp4", "mx", "channel:sr", "block:32:sr"})
    for (int threads : {1, 2}) {
      set_quant_threads(threads);
      const Recipe recipe = Recipe::named(name);
      auto side = [&](const std::vector<float>& x, int64_t rows, int64_t cols, Gemm g, Operand op, bool along) {
        return Side{
            &x, rows, cols, recipe.spec(Precision::fp4, g, op), RngKey{9, 8, 7, uint32_t(int(g) * 4 + int(op))}, along};
      };
      auto check = [&](int64_t M, int64_t n, int64_t k, const Side& a, const Side& b, const std::string& what) {
        E2M1Gemm vec, portable;
        quantize_both(vec, QGemmMode::automatic, M, n, k, a, b);
        quantize_both(portable, QGemmMode::scalar, M, n, k, a, b);
        EXPECT_EQ(vec.packing_difference(portable), "") << what;
      };
      for_each_gemm(check, side, X, W, dY, T, K, N, std::string(name) + " threads=" + std::to_string(threads));
    }
}

TEST(QGemmPack, StochasticRoundingReallyDiffersFromNearest) {
  // The SR cases above compare something: SR codes differ from RNE codes of the same input.
  const auto x = randn(64 * 128, 9);
  Side s{&x,  64, 128, Recipe::named("snip").spec(Precision::fp4, Gemm::fprop, Operand::gradient), RngKey{1, 2, 3, 4},
         true};
  ASSERT_EQ(s.spec.rounding, Rounding::stochastic);
  const Codes sr = codes_of(s);
  s.spec.rounding = Rounding::rne;
  EXPECT_NE(sr.code2, codes_of(s).code2);
}

TEST(QGemmPack, NonFiniteInputIsRefusedNamingTheTensor) {
  const Recipe recipe = Recipe::named("snip");
  const QuantSpec spec = recipe.spec(Precision::fp4, Gemm::wgrad, Operand::activation);
  // One band of 128 rows, and three (the strips of bands) with the Inf in the last band.
  for (const int64_t rows : {40, 300}) {
    auto x = randn(size_t(rows * 64), 4);
    const int64_t bad_row = rows == 40 ? 5 : 290;
    x[size_t(bad_row * 64 + 3)] = std::numeric_limits<float>::infinity();
    const E2M1Operand v = e2m1_operand(nullptr, nullptr, rows, 64, spec, false);
    E2M1Gemm g;
    g.prepare(64, 64, rows, v, v);
    try {
      g.quantize_b(x.data(), rows, 64, spec, {}, "layer0: wgrad operand X", false);
      FAIL() << "no error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("layer0: wgrad operand X: non-finite value inf at element (" +
                                           std::to_string(bad_row) + ", 3)"),
                std::string::npos)
          << e.what();
    }
  }
}

// qlinear's FP4 GEMMs against qgemm_e2m1 on quantize_e2m1_code2's codes of the same operands
// (rotated first when the Hadamard option is on), outputs unrounded.
TEST(QGemmPack, QlinearFp4GemmsGiveTheBitsOfTheCodesThenPackPath) {
  ThreadsGuard guard;
  const int64_t T = 48, K = 96, N = 80;
  const auto X = randn(size_t(T * K), 11), W = randn(size_t(N * K), 12), dY = randn(size_t(T * N), 13);
  for (bool hadamard : {false, true})
    for (int threads : {1, 2}) {
      set_quant_threads(threads);
      RecipeOptions o;
      o.name = "nvfp4";
      o.hadamard_wgrad = hadamard;
      o.bf16_output = false;
      const Recipe recipe(o);
      QLinearContext ctx;
      ctx.recipe = &recipe;
      ctx.seed = 3, ctx.step = 4, ctx.layer = 5;
      auto codes = [&](const std::vector<float>& x, int64_t rows, int64_t cols, Gemm g, Operand op) {
        return codes_of(Side{&x, rows, cols, recipe.spec(Precision::fp4, g, op), qlinear_rng_key(ctx, g, op), true});
      };
      auto view = [&](const Codes& c, int64_t rows, int64_t cols, Gemm g, Operand op, bool along) {
        return e2m1_operand(c.code2.data(), c.scales.data(), rows, cols, recipe.spec(Precision::fp4, g, op), along);
      };
      const std::string what =
          std::string("hadamard=") + (hadamard ? "on" : "off") + " threads=" + std::to_string(threads);
      std::vector<float> got(size_t(std::max({T * N, T * K, N * K}))), want(got.size());

      qlinear_fprop(got.data(), X.data(), W.data(), T, K, N, Precision::fp4, ctx);
      const Codes fx = codes(X, T, K, Gemm::fprop, Operand::activation),
                  fw = codes(W, N, K, Gemm::fprop, Operand::weight);
      qgemm_e2m1(want.data(), N, T, N, K, view(fx, T, K, Gemm::fprop, Operand::activation, true),
                 view(fw, N, K, Gemm::fprop, Operand::weight, true));
      EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(T * N) * 4), 0) << what << " fprop";

      qlinear_dgrad(got.data(), dY.data(), W.data(), T, K, N, Precision::fp4, ctx);
      const Codes dy = codes(dY, T, N, Gemm::dgrad, Operand::gradient),
                  dw = codes(W, N, K, Gemm::dgrad, Operand::weight);
      qgemm_e2m1(want.data(), K, T, K, N, view(dy, T, N, Gemm::dgrad, Operand::gradient, true),
                 view(dw, N, K, Gemm::dgrad, Operand::weight, false));
      EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(T * K) * 4), 0) << what << " dgrad";

      qlinear_wgrad(got.data(), dY.data(), X.data(), T, K, N, Precision::fp4, ctx);
      std::vector<float> rdy = dY, rx = X;
      if (hadamard) {
        hadamard16_rows(rdy.data(), T, N);
        hadamard16_rows(rx.data(), T, K);
      }
      const Codes wy = codes(rdy, T, N, Gemm::wgrad, Operand::gradient),
                  wx = codes(rx, T, K, Gemm::wgrad, Operand::activation);
      qgemm_e2m1(want.data(), K, N, K, T, view(wy, T, N, Gemm::wgrad, Operand::gradient, false),
                 view(wx, T, K, Gemm::wgrad, Operand::activation, false));
      EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(N * K) * 4), 0) << what << " wgrad";
    }
}

// ---- BF16-element GEMM ----------------------------------------------------------------------

// The operand as qgemm_bf16 read it before: FP8 codes and scales from quantize_bf16_codes, BF16
// as fake_quantize's values.
struct Bf16Codes {
  std::vector<uint16_t> bits;
  std::vector<float> values, scales;
  Bf16Operand view(const Side& s) const {
    if (s.spec.format == ElemFormat::bf16)
      return bf16_operand(nullptr, values.data(), nullptr, s.rows, s.cols, s.spec, s.reduce_along_cols);
    return bf16_operand(bits.data(), nullptr, scales.data(), s.rows, s.cols, s.spec, s.reduce_along_cols);
  }
};
Bf16Codes bf16_codes_of(const Side& s) {
  Bf16Codes c;
  if (s.spec.format == ElemFormat::bf16) {
    c.values.resize(size_t(s.rows * s.cols));
    fake_quantize(c.values.data(), s.x->data(), s.rows, s.cols, s.spec, s.key, "test");
    return c;
  }
  c.bits.assign(size_t(s.rows * s.cols), 0xFFFF);
  c.scales.assign(size_t(e2m1_scale_count(s.rows, s.cols, s.spec)), -1.0f);
  quantize_bf16_codes(c.bits.data(), c.scales.data(), s.x->data(), s.rows, s.cols, s.spec, s.key, "test");
  return c;
}

void expect_same_bf16_packing(int64_t M, int64_t N, int64_t K, const Side& a, const Side& b, const std::string& what) {
  const Bf16Codes ca = bf16_codes_of(a), cb = bf16_codes_of(b);
  const Bf16Operand A = ca.view(a), B = cb.view(b);
  ASSERT_GT(qgemm_bf16_chunk(A, B, K), 0) << what;
  // Every tier: on avx2, quantize_a writes A straight into the AVX2 kernel's widened tiles.
  test::IsaGuard isa;
  for (IsaTier tier : test::runnable_tiers()) {
    set_isa_tier(tier);
    expect_same_packing_with<Bf16Gemm>(M, N, K, A, B, a, b, what + " " + isa_tier_name(tier));
  }
}

TEST(QGemmPack, Bf16GemmQuantizingIntoThePackedLayoutGivesTheBytesOfQuantizeThenPack) {
  ThreadsGuard guard;
  const int64_t shapes[][3] = {{37, 70, 45}, {130, 200, 67}, {256, 384, 128}};
  struct Case {
    const char* recipe;
    Precision p;
    bool e5m2, sr;
  };
  // FP8 with FP32 scales (snip: 1×128 and 128×128 blocks; tensor), E5M2 gradients, a
  // stochastic-rounding FP8 spec (no recipe has one, the sink must not care), and BF16.
  const Case cases[] = {{"snip", Precision::fp8, false, false},
                        {"tensor", Precision::fp8, false, false},
                        {"snip", Precision::fp8, true, false},
                        {"snip", Precision::fp8, false, true},
                        {"snip", Precision::bf16, false, false}};
  for (const Case& cs : cases)
    for (const auto& sh : shapes)
      for (int threads : {1, 2}) {
        set_quant_threads(threads);
        RecipeOptions o;
        o.name = cs.recipe;
        o.fp8_gradients_e5m2 = cs.e5m2;
        const Recipe recipe(o);
        const int64_t T = sh[0], K = sh[1], N = sh[2];
        const auto X = randn(size_t(T * K), 1), W = randn(size_t(N * K), 2), dY = randn(size_t(T * N), 3);
        auto side = [&](const std::vector<float>& x, int64_t rows, int64_t cols, Gemm g, Operand op, bool along) {
          Side s{&x, rows, cols, recipe.spec(cs.p, g, op), RngKey{5, 6, 7, uint32_t(int(g) * 4 + int(op))}, along};
          if (cs.sr) s.spec.rounding = Rounding::stochastic;
          return s;
        };
        const std::string what = std::string(cs.recipe) + " " + precision_name(cs.p) + (cs.e5m2 ? " e5m2" : "") +
                                 (cs.sr ? " sr" : "") + " T=" + std::to_string(T) + " K=" + std::to_string(K) +
                                 " N=" + std::to_string(N) + " threads=" + std::to_string(threads);
        for_each_gemm(expect_same_bf16_packing, side, X, W, dY, T, K, N, what);
      }
}

// qlinear's FP8 and BF16 GEMMs against qgemm_bf16 on the codes / values of the same operands.
TEST(QGemmPack, QlinearFp8AndBf16GemmsGiveTheBitsOfTheCodesThenPackPath) {
  ThreadsGuard guard;
  const int64_t T = 48, K = 160, N = 80;
  const auto X = randn(size_t(T * K), 21), W = randn(size_t(N * K), 22), dY = randn(size_t(T * N), 23);
  for (const char* name : {"snip", "mx"})
    for (Precision p : {Precision::fp8, Precision::bf16})
      for (int threads : {1, 2}) {
        set_quant_threads(threads);
        RecipeOptions o;
        o.name = name;
        o.bf16_output = false;
        const Recipe recipe(o);
        QLinearContext ctx;
        ctx.recipe = &recipe;
        ctx.seed = 3, ctx.step = 4, ctx.layer = 5;
        auto side = [&](const std::vector<float>& x, int64_t rows, int64_t cols, Gemm g, Operand op, bool along) {
          return Side{&x, rows, cols, recipe.spec(p, g, op), qlinear_rng_key(ctx, g, op), along};
        };
        // E8M0-scaled FP8 (mx) is packed from its folded values, as before.
        auto operand = [&](const Side& s, Bf16Codes& c) {
          if (s.spec.scale == ScaleKind::e8m0) {
            c.values.resize(size_t(s.rows * s.cols));
            fake_quantize(c.values.data(), s.x->data(), s.rows, s.cols, s.spec, s.key, "test");
            return bf16_operand(nullptr, c.values.data(), nullptr, s.rows, s.cols, s.spec, s.reduce_along_cols);
          }
          c = bf16_codes_of(s);
          return c.view(s);
        };
        const std::string what = std::string(name) + " " + precision_name(p) + " threads=" + std::to_string(threads);
        std::vector<float> got(size_t(std::max({T * N, T * K, N * K}))), want(got.size());
        Bf16Codes c1, c2;

        qlinear_fprop(got.data(), X.data(), W.data(), T, K, N, p, ctx);
        ASSERT_TRUE(qgemm_bf16(want.data(), N, T, N, K,
                               operand(side(X, T, K, Gemm::fprop, Operand::activation, true), c1),
                               operand(side(W, N, K, Gemm::fprop, Operand::weight, true), c2)));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(T * N) * 4), 0) << what << " fprop";

        qlinear_dgrad(got.data(), dY.data(), W.data(), T, K, N, p, ctx);
        ASSERT_TRUE(qgemm_bf16(want.data(), K, T, K, N,
                               operand(side(dY, T, N, Gemm::dgrad, Operand::gradient, true), c1),
                               operand(side(W, N, K, Gemm::dgrad, Operand::weight, false), c2)));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(T * K) * 4), 0) << what << " dgrad";

        qlinear_wgrad(got.data(), dY.data(), X.data(), T, K, N, p, ctx);
        ASSERT_TRUE(qgemm_bf16(want.data(), K, N, K, T,
                               operand(side(dY, T, N, Gemm::wgrad, Operand::gradient, false), c1),
                               operand(side(X, T, K, Gemm::wgrad, Operand::activation, false), c2)));
        EXPECT_EQ(std::memcmp(got.data(), want.data(), size_t(N * K) * 4), 0) << what << " wgrad";
      }
}

}  // namespace
}  // namespace snip
