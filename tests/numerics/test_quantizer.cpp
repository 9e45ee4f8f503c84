// Block scaling (FORMATS.md "Scales"): E8M0 modes and NVFP4 order of operations on
// hand-computed cases, partial and zero blocks, non-finite operands, and the fast
// fake_quantize against its scalar twin fake_quantize_ref bit for bit; stochastic rounding's
// neighbours, unbiasedness and independence from the thread count.
#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "snip/elem_format.h"
#include "snip/error.h"
#include "snip/quant.h"

namespace snip {
namespace {

QuantSpec make_spec(ElemFormat f, ScaleKind s, int br, int bc, Rounding r = Rounding::rne,
                    E8M0Mode m = E8M0Mode::rceil) {
  QuantSpec q;
  q.format = f;
  q.scale = s;
  q.block_rows = br;
  q.block_cols = bc;
  q.rounding = r;
  q.e8m0_mode = m;
  return q;
}

std::vector<float> quantize(const std::vector<float>& x, int64_t rows, int64_t cols, const QuantSpec& s,
                            RngKey key = {}) {
  std::vector<float> y(x.size());
  fake_quantize(y.data(), x.data(), rows, cols, s, key, "test");
  return y;
}

// Restores the default thread count when a test ends.
struct ThreadGuard {
  ~ThreadGuard() { set_quant_threads(0); }
};

// A matrix with the awkward cases the kernels must survive: magnitudes spread over many
// binades per row and column, an all-zero block region, ±0, FP32 subnormals, huge values.
std::vector<float> awkward_matrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-12, 12);
  std::vector<float> x(size_t(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[size_t(r * cols + c)] = nd(gen) * std::ldexp(1.0f, ex(gen) / 3 + int(r % 7) - 3);
  for (int64_t r = 0; r < std::min<int64_t>(rows, 20); ++r)
    for (int64_t c = 0; c < std::min<int64_t>(cols, 40); ++c) x[size_t(r * cols + c)] = 0.0f;  // zero region
  if (rows * cols > 100) {
    x[41] = -0.0f;
    x[57] = 1e-41f;  // FP32 subnormal
    x[60] = -3e38f;  // huge
    x[61] = 7e37f;
  }
  return x;
}

// ---- E8M0 ---------------------------------------------------------------------------------
TEST(E8M0, BlockMax957InE4M3) {
  // 957 = 1.869·2^9. floor: e = 9 - 8 = 1, 957/2 = 478.5 saturates to 448 → 896.
  // rceil: v = 957/448 = 2.136 → e = 1 + 1 = 2, 957/4 = 239.25 → 240 → 960 (no saturation).
  // ceil: e = 9 + 1 - 8 = 2 → 960. even: 957 → 960 = 1.875·2^9 at 3 mantissa bits, floor → e = 1 → 896.
  EXPECT_EQ(e8m0_exponent(957, ElemFormat::e4m3, E8M0Mode::floor), 1);
  EXPECT_EQ(e8m0_exponent(957, ElemFormat::e4m3, E8M0Mode::ceil), 2);
  EXPECT_EQ(e8m0_exponent(957, ElemFormat::e4m3, E8M0Mode::rceil), 2);
  EXPECT_EQ(e8m0_exponent(957, ElemFormat::e4m3, E8M0Mode::even), 1);
  const std::vector<float> x = {957.0f, 1.0f};
  const float expect_y[4] = {896, 960, 960, 896};
  const E8M0Mode modes[4] = {E8M0Mode::floor, E8M0Mode::ceil, E8M0Mode::rceil, E8M0Mode::even};
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> y =
        quantize(x, 1, 2, make_spec(ElemFormat::e4m3, ScaleKind::e8m0, 1, 32, Rounding::rne, modes[i]));
    EXPECT_EQ(y[0], expect_y[i]) << e8m0_mode_name(modes[i]);
  }
  // even carries into the next binade: 1000 → 1024 at 3 bits, so e = 10 - 8 = 2 and 1000 survives.
  EXPECT_EQ(e8m0_exponent(1000, ElemFormat::e4m3, E8M0Mode::even), 2);
  EXPECT_EQ(e8m0_exponent(1000, ElemFormat::e4m3, E8M0Mode::floor), 1);
}

// A block max near FLT_MAX: ceil, rceil and even ask for e = 126 in E2M1 (3e38/2^126 = 3.53
// rounds to 4, and 4·2^126 = 2^128 is inf in FP32). e stops at 127 − emax, so every mode gives
// a finite block: the max saturates to 6·2^125 and the small elements keep their scale.
TEST(E8M0, ABlockMaxNearFltMaxStaysFiniteInEveryMode) {
  const std::vector<float> x = {3.0e38f, -3.0e38f, 1.0e37f, 1.0f};
  for (E8M0Mode mode : {E8M0Mode::floor, E8M0Mode::ceil, E8M0Mode::rceil, E8M0Mode::even})
    for (ElemFormat f : {ElemFormat::e2m1, ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e3m2, ElemFormat::e2m3}) {
      const ElemInfo& info = elem_info(f);
      EXPECT_LE(e8m0_exponent(3.0e38f, f, mode), 127 - info.emax) << e8m0_mode_name(mode);
      EXPECT_LE(double(info.max) * std::ldexp(1.0, e8m0_exponent(FLT_MAX, f, mode)), double(FLT_MAX));
      const std::vector<float> y = quantize(x, 1, 4, make_spec(f, ScaleKind::e8m0, 1, 32, Rounding::rne, mode));
      for (float v : y) EXPECT_TRUE(std::isfinite(v)) << e8m0_mode_name(mode) << " " << elem_format_name(f);
      EXPECT_EQ(y[0], -y[1]);
      EXPECT_GT(y[0], 1.0e38f);
    }
  EXPECT_EQ(e8m0_exponent(3.0e38f, ElemFormat::e2m1, E8M0Mode::rceil), 125);
  EXPECT_EQ(e8m0_exponent(3.0e38f, ElemFormat::e2m1, E8M0Mode::floor), 125);  // floor never needed the clamp
}

TEST(E8M0, ExactPowersAndFormatsWithOtherEmax) {
  // amax = 448 exactly: floor and rceil keep e = 0; ceil sees a fraction (1.75) and uses e = 1.
  EXPECT_EQ(e8m0_exponent(448, ElemFormat::e4m3, E8M0Mode::floor), 0);
  EXPECT_EQ(e8m0_exponent(448, ElemFormat::e4m3, E8M0Mode::rceil), 0);
  EXPECT_EQ(e8m0_exponent(448, ElemFormat::e4m3, E8M0Mode::ceil), 1);
  // amax = 256 (no fraction): ceil = floor = 0.
  EXPECT_EQ(e8m0_exponent(256, ElemFormat::e4m3, E8M0Mode::ceil), 0);
  // E2M1, emax 2: amax 6 → floor e = 0, rceil v = 1 → 0; amax 7 → floor 0 (saturates), rceil 1.
  EXPECT_EQ(e8m0_exponent(6, ElemFormat::e2m1, E8M0Mode::floor), 0);
  EXPECT_EQ(e8m0_exponent(6, ElemFormat::e2m1, E8M0Mode::rceil), 0);
  EXPECT_EQ(e8m0_exponent(7, ElemFormat::e2m1, E8M0Mode::floor), 0);
  EXPECT_EQ(e8m0_exponent(7, ElemFormat::e2m1, E8M0Mode::rceil), 1);
  // E5M2 emax 15: amax 1 → floor -15.
  EXPECT_EQ(e8m0_exponent(1, ElemFormat::e5m2, E8M0Mode::floor), -15);
  // Clamping to [-127, 127] and amax = 0 → 0.
  EXPECT_EQ(e8m0_exponent(1e-44f, ElemFormat::e4m3, E8M0Mode::floor), -127);
  EXPECT_EQ(e8m0_exponent(0, ElemFormat::e4m3, E8M0Mode::rceil), 0);
}

TEST(E8M0, RceilNeverSaturatesTheBlockMax) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> u(-30, 30);
  for (ElemFormat f : {ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e2m1, ElemFormat::e3m2, ElemFormat::e2m3}) {
    for (int i = 0; i < 2000; ++i) {
      const float amax = std::ldexp(1.0f + std::fabs(u(gen)) / 31.0f, int(u(gen)));
      const int e = e8m0_exponent(amax, f, E8M0Mode::rceil);
      EXPECT_LE(amax / std::ldexp(1.0f, e), elem_info(f).max) << amax;
      EXPECT_GT(amax / std::ldexp(1.0f, e - 1), elem_info(f).max) << amax;  // and e is the smallest such
    }
  }
}

// ---- NVFP4 --------------------------------------------------------------------------------
TEST(NVFP4, HandComputedTwoLevelScaling) {
  // Tensor amax 2688 → g = 1, mult = 1·(1/6). Block A amax 6: 6·(1/6)f = 1.0000000298 → FP32 1
  // → E4M3 1 → dec 1, enc 1: elements are plain E2M1 (2.5 → 2, 5 → 4, 5.1 → 6).
  // Block B amax 100: 16.6667 → E4M3 16 (grid 16, 18, ...) → dec 16, enc 1/16: 100/16 = 6.25 → 6 → 96.
  // Block C amax 2688 → 448 → dec 448: 1000/448 = 2.23 → 2 → 896.
  std::vector<float> x(48, 0.0f);
  x[0] = 6, x[1] = 2.5f, x[2] = 5, x[3] = 5.1f;
  x[16] = 100, x[17] = 30;  // 30/16 = 1.875 → 2 → 32
  x[32] = 2688, x[33] = 1000;
  const std::vector<float> y = quantize(x, 1, 48, make_spec(ElemFormat::e2m1, ScaleKind::nvfp4, 1, 16));
  EXPECT_EQ(y[0], 6);
  EXPECT_EQ(y[1], 2);
  EXPECT_EQ(y[2], 4);
  EXPECT_EQ(y[3], 6);
  EXPECT_EQ(y[16], 96);
  EXPECT_EQ(y[17], 32);
  EXPECT_EQ(y[32], 2688);
  EXPECT_EQ(y[33], 896);
}

TEST(NVFP4, SubnormalBlockScaleAndLiteralOrder) {
  // Tensor amax 2688 (g = 1); block amax 0.01: 0.01/6 = 0.00166 → E4M3 subnormal 2^-9 (0.85 quanta → 1).
  // 0.01·2^9 = 5.12 → 6 → 6·2^-9.
  std::vector<float> x(32, 0.0f);
  x[0] = 2688;
  x[16] = 0.01f;
  const std::vector<float> y = quantize(x, 1, 32, make_spec(ElemFormat::e2m1, ScaleKind::nvfp4, 1, 16));
  EXPECT_EQ(y[16], 6 * 0x1p-9f);
  // A tensor amax that is not a power of two: the steps in FORMATS.md's order, literally.
  std::vector<float> z = {1000.0f, 0.3f, -7.7f, 123.4f};
  const float g = 2688.0f / 1000.0f;
  const float mult = g * (1.0f / 6.0f);
  const float s_block = round_elem_ref(std::min(1000.0f * mult, 448.0f), ElemFormat::e4m3);
  const float dec = s_block * (1.0f / g);
  const float enc = 1.0f / dec;
  const std::vector<float> yz = quantize(z, 1, 4, make_spec(ElemFormat::e2m1, ScaleKind::nvfp4, 1, 16));
  for (int i = 0; i < 4; ++i) {
    const float v = std::max(-6.0f, std::min(6.0f, z[size_t(i)] * enc));
    EXPECT_EQ(yz[size_t(i)], round_elem_ref(v, ElemFormat::e2m1) * dec) << i;
  }
  EXPECT_EQ(nvfp4_tensor_factor(0), 1.0f);
  EXPECT_EQ(nvfp4_tensor_factor(1e-45f), FLT_MAX);
}

TEST(NVFP4, OnlyDefinedForE2M1) {
  std::vector<float> x(16, 1.0f), y(16);
  EXPECT_THROW(fake_quantize(y.data(), x.data(), 1, 16, make_spec(ElemFormat::e4m3, ScaleKind::nvfp4, 1, 16), {}, "t"),
               Error);
}

// ---- FP32 scales, partial and zero blocks -------------------------------------------------
TEST(FP32Scale, FollowsTheFormulaWithDivision) {
  const std::vector<float> x = {0.7f, -3.3f, 1.1f, 0.05f};
  const float s = 3.3f / 6.0f;
  const std::vector<float> y = quantize(x, 1, 4, make_spec(ElemFormat::e2m1, ScaleKind::fp32, 0, 0));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[size_t(i)], round_elem_ref(x[size_t(i)] / s, ElemFormat::e2m1) * s) << i;
  EXPECT_NEAR(y[1], -3.3f, 1e-6f);  // the block max maps to ±max and back (up to the scale's rounding)
}

TEST(Blocks, EveryBlockIsQuantizedFromItsOwnAmax) {
  // Partial last blocks included: a 37×150 matrix in 16×16, 1×32, 32×1, 1×128 and 128×128 blocks.
  const int64_t rows = 37, cols = 150;
  const std::vector<float> x = awkward_matrix(rows, cols, 3);
  const int shapes[][2] = {{16, 16}, {1, 32}, {32, 1}, {1, 128}, {128, 128}, {5, 7}};
  for (ScaleKind sk : {ScaleKind::fp32, ScaleKind::e8m0}) {
    for (auto& sh : shapes) {
      const QuantSpec spec = make_spec(ElemFormat::e4m3, sk, sh[0], sh[1]);
      const std::vector<float> y = quantize(x, rows, cols, spec);
      for (int64_t r0 = 0; r0 < rows; r0 += sh[0]) {
        for (int64_t c0 = 0; c0 < cols; c0 += sh[1]) {
          const int64_t br = std::min<int64_t>(sh[0], rows - r0), bc = std::min<int64_t>(sh[1], cols - c0);
          std::vector<float> blk(size_t(br * bc));
          for (int64_t r = 0; r < br; ++r)
            for (int64_t c = 0; c < bc; ++c) blk[size_t(r * bc + c)] = x[size_t((r0 + r) * cols + c0 + c)];
          const std::vector<float> yb = quantize(blk, br, bc, make_spec(ElemFormat::e4m3, sk, 0, 0));
          for (int64_t r = 0; r < br; ++r)
            for (int64_t c = 0; c < bc; ++c)
              ASSERT_EQ(std::bit_cast<uint32_t>(yb[size_t(r * bc + c)]),
                        std::bit_cast<uint32_t>(y[size_t((r0 + r) * cols + c0 + c)]))
                  << "block " << sh[0] << "x" << sh[1] << " at (" << r0 + r << ", " << c0 + c << ")";
        }
      }
    }
  }
}

TEST(Blocks, ZeroBlocksStayZeroWithSignedZeros) {
  std::vector<float> x(64, 0.0f);
  x[3] = -0.0f;
  for (ScaleKind sk : {ScaleKind::fp32, ScaleKind::e8m0, ScaleKind::nvfp4}) {
    QuantStats st;
    std::vector<float> y(64, 1.0f);
    fake_quantize(y.data(), x.data(), 4, 16, make_spec(ElemFormat::e2m1, sk, 1, 16), {}, "zeros", &st);
    for (int i = 0; i < 64; ++i)
      EXPECT_EQ(std::bit_cast<uint32_t>(y[size_t(i)]), std::bit_cast<uint32_t>(x[size_t(i)]));
    EXPECT_EQ(st.zeros, 64);
    EXPECT_EQ(st.err_sq, 0.0);
  }
}

// ---- Non-finite operands ------------------------------------------------------------------
TEST(NonFinite, NamesTheTensorAndTheElement) {
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    for (ElemFormat f : {ElemFormat::fp32, ElemFormat::bf16, ElemFormat::e4m3, ElemFormat::e2m1}) {
      for (int blk : {0, 1, 16}) {
        std::vector<float> x(12 * 20, 0.5f), y(x.size());
        x[3 * 20 + 7] = bad;
        const QuantSpec spec = make_spec(f, f == ElemFormat::e2m1 ? ScaleKind::nvfp4 : ScaleKind::fp32, blk, 16);
        for (int ref = 0; ref < 2; ++ref) {
          try {
            if (ref)
              fake_quantize_ref(y.data(), x.data(), 12, 20, spec, {}, "model.layers.3.mlp.up_proj fprop X");
            else
              fake_quantize(y.data(), x.data(), 12, 20, spec, {}, "model.layers.3.mlp.up_proj fprop X");
            ADD_FAILURE() << "no error for " << bad << " in " << elem_format_name(f);
          } catch (const Error& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find("model.layers.3.mlp.up_proj fprop X"), std::string::npos) << m;
            EXPECT_NE(m.find("(3, 7)"), std::string::npos) << m;
          }
        }
      }
    }
  }
}

// ---- Fast kernels vs the scalar reference --------------------------------------------------
struct Case {
  QuantSpec spec;
  std::string name;
};
std::vector<Case> all_cases() {
  std::vector<Case> cases;
  const int shapes[][2] = {{1, 16}, {1, 32}, {1, 128}, {16, 1}, {128, 1}, {16, 16}, {128, 128}, {0, 0}, {1, 0}, {3, 5}};
  for (ElemFormat f : {ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e3m2, ElemFormat::e2m3, ElemFormat::e2m1}) {
    for (Rounding r : {Rounding::rne, Rounding::stochastic, Rounding::away}) {
      for (auto& sh : shapes) {
        std::vector<std::pair<ScaleKind, E8M0Mode>> scales = {
            {ScaleKind::none, E8M0Mode::rceil}, {ScaleKind::fp32, E8M0Mode::rceil}, {ScaleKind::e8m0, E8M0Mode::floor},
            {ScaleKind::e8m0, E8M0Mode::ceil},  {ScaleKind::e8m0, E8M0Mode::rceil}, {ScaleKind::e8m0, E8M0Mode::even}};
        if (f == ElemFormat::e2m1) scales.push_back({ScaleKind::nvfp4, E8M0Mode::rceil});
        for (auto [sk, mode] : scales) {
          Case c{make_spec(f, sk, sh[0], sh[1], r, mode), ""};
          c.name = std::string(elem_format_name(f)) + "/" + rounding_name(r) + "/" + std::to_string(sh[0]) + "x" +
                   std::to_string(sh[1]) + "/scale" + std::to_string(int(sk)) + "/" + e8m0_mode_name(mode);
          cases.push_back(c);
        }
      }
    }
  }
  QuantSpec bf;
  bf.format = ElemFormat::bf16;
  cases.push_back({bf, "bf16"});
  QuantSpec f32;
  cases.push_back({f32, "fp32"});
  return cases;
}

TEST(FastVsRef, BitIdenticalOnEveryFormatScaleBlockAndRounding) {
  const int64_t rows = 45, cols = 150;  // partial blocks for every block shape
  const std::vector<float> x = awkward_matrix(rows, cols, 11);
  const RngKey key{1234, 7, 3, 2};
  for (const Case& c : all_cases()) {
    SCOPED_TRACE(c.name);
    std::vector<float> y_fast(x.size()), y_ref(x.size()), y_stats(x.size());
    fake_quantize(y_fast.data(), x.data(), rows, cols, c.spec, key, "t");
    QuantStats st_ref, st_fast;
    const bool has_codes = c.spec.format != ElemFormat::bf16 && c.spec.format != ElemFormat::fp32;
    std::vector<uint8_t> codes_ref(x.size()), codes_fast(x.size());
    fake_quantize_ref(y_ref.data(), x.data(), rows, cols, c.spec, key, "t", &st_ref,
                      has_codes ? codes_ref.data() : nullptr);
    fake_quantize(y_stats.data(), x.data(), rows, cols, c.spec, key, "t", &st_fast,
                  has_codes ? codes_fast.data() : nullptr);
    ASSERT_EQ(std::memcmp(y_fast.data(), y_ref.data(), x.size() * 4), 0);
    ASSERT_EQ(std::memcmp(y_stats.data(), y_ref.data(), x.size() * 4), 0);
    EXPECT_EQ(codes_fast, codes_ref);
    EXPECT_EQ(st_fast.saturated, st_ref.saturated);
    EXPECT_EQ(st_fast.zeros, st_ref.zeros);
    EXPECT_EQ(st_fast.count, st_ref.count);
    EXPECT_EQ(st_fast.max_abs_err, st_ref.max_abs_err);
    // Values near FLT_MAX may round up past it under ceil/rceil/even (x̂ = q·2^e overflows, as in
    // any FP32 implementation of these scales), so the error sums can be +Inf in both.
    if (std::isinf(st_ref.err_sq))
      EXPECT_EQ(st_fast.err_sq, st_ref.err_sq);
    else
      EXPECT_NEAR(st_fast.err_sq, st_ref.err_sq, 1e-12 * st_ref.err_sq);
    EXPECT_NEAR(st_fast.ref_sq, st_ref.ref_sq, 1e-12 * st_ref.ref_sq);
    if (has_codes)
      for (size_t i = 0; i < x.size(); ++i) {
        // The codes decode to the unscaled element values: x̂ / scale is on the grid.
        ASSERT_TRUE(std::isfinite(decode_elem(codes_ref[i], c.spec.format))) << i;
      }
  }
}

TEST(FastVsRef, InPlaceAliasingGivesTheSameResult) {
  const int64_t rows = 64, cols = 256;
  const std::vector<float> x = awkward_matrix(rows, cols, 5);
  for (const QuantSpec& spec : {make_spec(ElemFormat::e2m1, ScaleKind::fp32, 1, 128, Rounding::stochastic),
                                make_spec(ElemFormat::e4m3, ScaleKind::fp32, 128, 128),
                                make_spec(ElemFormat::e2m1, ScaleKind::nvfp4, 16, 1, Rounding::stochastic)}) {
    std::vector<float> y(x.size()), z = x;
    fake_quantize(y.data(), x.data(), rows, cols, spec, {9, 1, 2, 3}, "t");
    QuantStats st;
    fake_quantize(z.data(), z.data(), rows, cols, spec, {9, 1, 2, 3}, "t", &st);
    EXPECT_EQ(std::memcmp(y.data(), z.data(), x.size() * 4), 0);
  }
}

// ---- Stochastic rounding --------------------------------------------------------------------
TEST(Stochastic, OnlyNeighboursAndUnbiased) {
  // One value between two E2M1 neighbours, repeated: every output is one of the two, and the
  // mean lands on the value within 5 standard errors.
  for (float v : {2.3f, 0.1f, 4.9f, -1.2f, 5.999f}) {
    const int64_t n = 200000;
    std::vector<float> x(static_cast<size_t>(n), v), y(static_cast<size_t>(n));
    fake_quantize(y.data(), x.data(), 1, n, make_spec(ElemFormat::e2m1, ScaleKind::none, 0, 0, Rounding::stochastic),
                  {42, 0, 0, 0}, "sr");
    const float lo = round_elem_ref(v, ElemFormat::e2m1, Rounding::stochastic, 0xFFFFFFFFu);  // never rounds up
    const float hi = round_elem_ref(v, ElemFormat::e2m1, Rounding::stochastic, 0);            // always rounds up
    ASSERT_NE(lo, hi);
    double sum = 0;
    for (float q : y) {
      ASSERT_TRUE(q == lo || q == hi) << q;
      sum += q;
    }
    const double p = (double(v) - lo) / (double(hi) - lo);
    const double se = std::fabs(double(hi) - lo) * std::sqrt(p * (1 - p) / double(n));
    EXPECT_NEAR(sum / double(n), double(v), 5 * se + 1e-9) << v;
  }
}

TEST(Stochastic, SameBitsForAnyThreadCountAndKeySensitive) {
  ThreadGuard guard;
  const int64_t rows = 700, cols = 300;  // > several thread grains
  std::vector<float> x = awkward_matrix(rows, cols, 17);
  x[60] = x[61] = 1.0f;  // drop the near-FLT_MAX outliers: per-tensor scales would flush everything else to 0
  for (const QuantSpec& spec : {make_spec(ElemFormat::e2m1, ScaleKind::fp32, 1, 128, Rounding::stochastic),
                                make_spec(ElemFormat::e2m1, ScaleKind::nvfp4, 16, 1, Rounding::stochastic),
                                make_spec(ElemFormat::e4m3, ScaleKind::e8m0, 0, 0, Rounding::stochastic)}) {
    set_quant_threads(1);
    const std::vector<float> y1 = quantize(x, rows, cols, spec, {5, 6, 7, 8});
    for (int t : {2, 3, 8}) {
      set_quant_threads(t);
      const std::vector<float> yt = quantize(x, rows, cols, spec, {5, 6, 7, 8});
      EXPECT_EQ(std::memcmp(y1.data(), yt.data(), x.size() * 4), 0) << t << " threads";
    }
    // Each key field changes the draws.
    for (RngKey k : {RngKey{6, 6, 7, 8}, RngKey{5, 7, 7, 8}, RngKey{5, 6, 8, 8}, RngKey{5, 6, 7, 9}}) {
      const std::vector<float> yk = quantize(x, rows, cols, spec, k);
      int64_t differ = 0;
      for (size_t i = 0; i < yk.size(); ++i) differ += yk[i] != y1[i];
      EXPECT_GT(differ, int64_t(x.size() / 50)) << "key " << k.seed << " " << k.step << " " << k.layer << " " << k.role;
    }
  }
}

TEST(Stochastic, BitsAreUniformEnough) {
  // A cheap sanity check of the counter hash: the top bit and a low bit are each ~50% set
  // over consecutive indices (a broken mix gives 0% or 100%).
  const RngKey key{1, 2, 3, 4};
  int top = 0, low = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const uint32_t b = sr_bits(key, uint64_t(i));
    top += b >> 31;
    low += (b >> 8) & 1;
  }
  EXPECT_NEAR(top / double(n), 0.5, 0.01);
  EXPECT_NEAR(low / double(n), 0.5, 0.01);
  EXPECT_NE(sr_bits(key, 1ull << 32), sr_bits(key, 0));
}

}  // namespace
}  // namespace snip
