// The hand-vectorized AVX-512 rounding kernels (engine/numerics/src/quant_avx512.cpp) against
// the portable kernels they must equal bit for bit, the oracle: every FP32 exponent with edge
// mantissas (zero, subnormal, Inf, NaN), the format grids' ties and their neighbours, scales that
// make every binade reach the grid, per-column scales, stochastic-rounding keys and an element
// index whose low word wraps inside a row, a code offset, every length 0..40 (tails) and unaligned pointers;
// for the E2M1 codes, the BF16 codes and the dequantized values. Then the quantizer's public
// entry points with the dispatch forced to the portable path (QGemmMode::scalar) against the
// default dispatch. And the row-tile kernels (a row of 1 × bc tiles per call) against the
// portable kernels tile by tile.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "isa_tiers.h"
#include "quant_kernels.h"
#include "snip/elem_format.h"
#include "snip/qgemm.h"
#include "snip/quant.h"

namespace snip {
namespace {

using detail::RowParams;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Inputs that reach every branch of the rounding: each FP32 exponent (0: zero/subnormal, 255:
// Inf/NaN) with edge and random mantissas and both signs; each grid point of the format, the
// ties between neighbours and one FP32 ulp either side of them; the E2M1 table's slot edges;
// random normals.
std::vector<float> edge_inputs(ElemFormat f, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v;
  for (uint32_t e = 0; e < 256; ++e)
    for (uint32_t m : {0u, 1u, 0x400000u, 0x7FFFFFu, uint32_t(gen() & 0x7FFFFFu)})
      for (uint32_t s : {0u, 0x80000000u}) v.push_back(from_bits(s | (e << 23) | m));
  const ElemInfo& in = elem_info(f);
  std::vector<float> grid;  // non-negative grid points up to max
  for (int c = 0; c < (1 << (in.code_bits - 1)); ++c) {
    const float g = decode_elem(uint8_t(c), f);
    if (std::isfinite(g)) grid.push_back(g);
  }
  std::sort(grid.begin(), grid.end());
  for (size_t i = 0; i + 1 < grid.size(); ++i) {
    const float mid = 0.5f * (grid[i] + grid[i + 1]);
    for (float x : {grid[i], mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)})
      for (float s : {1.0f, -1.0f}) v.push_back(s * x);
  }
  // Every multiple of 2^21 in the FP32 bits from 0.125 to 8 and one bit either side: the slot
  // edges of the E2M1 table lookup (quant_avx512.cpp), each rounding boundary among them.
  for (uint32_t u = 0x3E000000u; u <= 0x41000000u; u += 1u << 21)
    for (uint32_t b : {u - 1, u, u + 1})
      for (uint32_t s : {0u, 0x80000000u}) v.push_back(from_bits(s | b));
  v.push_back(in.max * 1.5f);
  v.push_back(-in.max * 1.0000001f);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (int i = 0; i < 600; ++i) v.push_back(nd(gen));
  std::shuffle(v.begin(), v.end(), gen);
  return v;
}

RowParams params_for(ElemFormat f, uint32_t k0, uint32_t k1) {
  const ElemInfo& in = elem_info(f);
  return RowParams{in.mbits, uint32_t(in.emin + 127), in.max, k0, k1};
}

struct KernelCase {
  bool divide, vec;
  Rounding r;
  std::string name() const {
    return std::string(divide ? "div" : "mul") + (vec ? "/vec" : "/scalar") + "/" + rounding_name(r);
  }
};
std::vector<KernelCase> kernel_cases() {
  std::vector<KernelCase> out;
  for (bool d : {true, false})
    for (bool v : {false, true})
      for (Rounding r : {Rounding::rne, Rounding::stochastic, Rounding::away}) out.push_back({d, v, r});
  return out;
}

// Runs `call(kernel, y, x, in, out, n, i0)` for the portable and the AVX-512 kernel over
// segments of every length 0..40 plus long ones, at an odd offset, and expects equal bytes.
template <class OutT, class PickP, class PickV, class Call>
void expect_same_bits(PickP pick_portable, PickV pick_avx512, Call call) {
  const std::vector<uint64_t> starts = {0, 5, 0xFFFFFFF0ull, 0x2FFFFFFFAull};  // low-word wrap at 2^32
  for (ElemFormat f : {ElemFormat::e2m1, ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e3m2, ElemFormat::e2m3}) {
    const std::vector<float> x = edge_inputs(f, 17 + uint32_t(f));
    const int64_t n = int64_t(x.size());
    std::mt19937 gen(3);
    std::uniform_real_distribution<float> ud(-20.0f, 20.0f);
    std::vector<float> col_in(x.size()), col_out(x.size());
    for (size_t i = 0; i < x.size(); ++i) {
      col_in[i] = std::ldexp(0.75f + 0.25f * std::fabs(std::sin(float(i))), int(ud(gen)));
      col_out[i] = 1.0f / col_in[i];
    }
    for (const KernelCase& kc : kernel_cases()) {
      const auto port = pick_portable(kc.divide, kc.vec, kc.r);
      const auto vec = pick_avx512(kc.divide, kc.vec, kc.r);
      ASSERT_NE(vec, nullptr);
      for (float scale : {1.0f, 0.37109375f, 1.0f / 3.0f, 0x1p-20f, 0x1p+20f, 3e-39f}) {
        for (uint32_t key : {0u, 0xDEADBEEFu}) {
          RowParams p = params_for(f, key, key * 7u + 1u);
          p.code_offset = key != 0 ? 12 : 0;  // the integer GEMM's A takes codes 2q + 12
          const float s_in = scale, s_out = 1.0f / scale;
          const float* in = kc.vec ? col_in.data() : &s_in;
          const float* out = kc.vec ? col_out.data() : &s_out;
          for (uint64_t i0 : starts) {
            SCOPED_TRACE(std::string(elem_format_name(f)) + "/" + kc.name() + "/scale " + std::to_string(scale) +
                         "/i0 " + std::to_string(i0));
            std::vector<OutT> ya(x.size() + 1, OutT(0x55)), yb(x.size() + 1, OutT(0x55));
            // Every tail length at an odd offset, then the whole row in one call (a single
            // scale is not offset: it is one value, not a column's).
            const float* in1 = kc.vec ? in + 1 : in;
            const float* out1 = kc.vec ? out + 1 : out;
            for (int64_t len = 0; len <= 40; ++len) {
              call(port, ya.data() + 1, x.data() + 1, in1, out1, len, p, i0 + 1);
              call(vec, yb.data() + 1, x.data() + 1, in1, out1, len, p, i0 + 1);
              ASSERT_EQ(std::memcmp(ya.data(), yb.data(), ya.size() * sizeof(OutT)), 0) << "length " << len;
            }
            call(port, ya.data(), x.data(), in, out, n, p, i0);
            call(vec, yb.data(), x.data(), in, out, n, p, i0);
            for (int64_t i = 0; i < n; ++i)
              ASSERT_EQ(std::memcmp(&ya[size_t(i)], &yb[size_t(i)], sizeof(OutT)), 0)
                  << "element " << i << " x = " << x[size_t(i)];
          }
        }
      }
    }
  }
}

bool have_avx512() {
  return detail::avx512_code_kernel(true, false, Rounding::rne) != nullptr;
}

// Both ways to the codes under RNE: the table lookup (E2M1 on a CPU with AVX512-VBMI; other
// formats take the general kernel inside the same call) and the general kernel.
TEST(QuantKernels, Avx512E2M1CodesEqualThePortableKernelsBitForBit) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512F on this CPU";
  for (bool table : {true, false}) {
    SCOPED_TRACE(table ? "table lookup" : "general kernel");
    expect_same_bits<int8_t>(
        detail::pick_code_kernel,
        [table](bool d, bool v, Rounding r) { return detail::avx512_code_kernel(d, v, r, table); },
        [](detail::CodeKernel k, int8_t* y, const float* x, const float* in, const float*, int64_t n,
           const RowParams& p, uint64_t i0) { k(y, x, in, n, p, i0); });
  }
}

TEST(QuantKernels, Avx512Bf16CodesEqualThePortableKernelsBitForBit) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512F on this CPU";
  expect_same_bits<uint16_t>(detail::pick_bf16_code_kernel, detail::avx512_bf16_code_kernel,
                             [](detail::Bf16CodeKernel k, uint16_t* y, const float* x, const float* in, const float*,
                                int64_t n, const RowParams& p, uint64_t i0) { k(y, x, in, n, p, i0); });
}

TEST(QuantKernels, Avx512DequantizedValuesEqualThePortableKernelsBitForBit) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512F on this CPU";
  expect_same_bits<float>(detail::pick_row_kernel, detail::avx512_row_kernel,
                          [](detail::RowKernel k, float* y, const float* x, const float* in, const float* out,
                             int64_t n, const RowParams& p, uint64_t i0) { k(y, x, in, out, n, p, i0); });
}

// Whole rows of 1 × bc tiles in one call: the amax of each tile, and the codes / values with
// each tile's own scale, as the portable per-tile kernels give them tile by tile.
TEST(QuantKernels, Avx512TileRowsEqualThePortableKernelsTileByTile) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512F on this CPU";
  const std::vector<float> x = edge_inputs(ElemFormat::e2m1, 41);
  std::mt19937 gen(8);
  std::uniform_real_distribution<float> ud(0.01f, 3.0f);
  for (int64_t bc : {16, 32, 128}) {
    for (int64_t n : {int64_t(1), bc - 1, bc, 3 * bc + 5, int64_t(x.size())}) {
      const int64_t ntiles = (n + bc - 1) / bc;
      std::vector<uint32_t> amax(size_t(ntiles), 7u);
      detail::avx512_tile_amax_kernel()(amax.data(), x.data(), n, bc);
      std::vector<float> in_t(static_cast<size_t>(ntiles)), out_t(static_cast<size_t>(ntiles));
      for (int64_t g = 0; g < ntiles; ++g) {
        uint32_t m = 0;
        for (int64_t c = g * bc; c < std::min(n, (g + 1) * bc); ++c) {
          uint32_t u;
          std::memcpy(&u, &x[size_t(c)], 4);
          m = std::max(m, u & 0x7FFFFFFFu);
        }
        ASSERT_EQ(amax[size_t(g)], m) << "bc " << bc << " n " << n << " tile " << g;
        in_t[size_t(g)] = ud(gen);
        out_t[size_t(g)] = 1.0f / in_t[size_t(g)];
      }
      for (bool divide : {true, false})
        for (Rounding r : {Rounding::rne, Rounding::stochastic, Rounding::away}) {
          SCOPED_TRACE("bc " + std::to_string(bc) + " n " + std::to_string(n) + " " + rounding_name(r));
          const RowParams p = params_for(ElemFormat::e2m1, 0x1234567u, 0x89ABCDEu);
          const uint64_t i0 = 0xFFFFFF00ull;  // the low word wraps inside the row
          std::vector<int8_t> ca(static_cast<size_t>(n)), cb(static_cast<size_t>(n));
          std::vector<uint16_t> ba(static_cast<size_t>(n)), bb(static_cast<size_t>(n));
          std::vector<float> ya(static_cast<size_t>(n)), yb(static_cast<size_t>(n));
          for (int64_t g = 0; g < ntiles; ++g) {
            const int64_t c0 = g * bc, len = std::min(bc, n - c0);
            detail::pick_code_kernel(divide, false, r)(ca.data() + c0, x.data() + c0, &in_t[size_t(g)], len, p,
                                                       i0 + c0);
            detail::pick_bf16_code_kernel(divide, false, r)(ba.data() + c0, x.data() + c0, &in_t[size_t(g)], len, p,
                                                            i0 + c0);
            detail::pick_row_kernel(divide, false, r)(ya.data() + c0, x.data() + c0, &in_t[size_t(g)],
                                                      &out_t[size_t(g)], len, p, i0 + c0);
          }
          detail::avx512_tile_code_kernel(divide, r)(cb.data(), x.data(), in_t.data(), n, bc, p, i0);
          std::vector<int8_t> cg(static_cast<size_t>(n));
          detail::avx512_tile_code_kernel(divide, r, false)(cg.data(), x.data(), in_t.data(), n, bc, p, i0);
          EXPECT_EQ(ca, cg) << "general kernel";
          detail::avx512_tile_bf16_kernel(divide, r)(bb.data(), x.data(), in_t.data(), n, bc, p, i0);
          detail::avx512_tile_row_kernel(divide, r)(yb.data(), x.data(), in_t.data(), out_t.data(), n, bc, p, i0);
          EXPECT_EQ(ca, cb);
          EXPECT_EQ(ba, bb);
          EXPECT_EQ(std::memcmp(ya.data(), yb.data(), size_t(n) * 4), 0);
        }
    }
  }
}

// Restores the default dispatch when a test ends.
struct ModeGuard {
  ~ModeGuard() { set_qgemm_mode(QGemmMode::automatic); }
};

TEST(QuantKernels, EveryTierGivesThePortableCodesAndValues) {
  ModeGuard guard;
  test::IsaGuard isa;
  const int64_t rows = 131, cols = 260;  // partial blocks and vector tails everywhere
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(size_t(rows * cols));
  for (size_t i = 0; i < x.size(); ++i) x[i] = nd(gen) * std::ldexp(1.0f, int(i % 11) - 5);
  for (size_t i = 0; i < x.size(); i += 37) x[i] = 0.0f;
  struct SpecCase {
    ElemFormat f;
    ScaleKind s;
    int br, bc;
    Rounding r;
  };
  const SpecCase cases[] = {{ElemFormat::e2m1, ScaleKind::fp32, 1, 128, Rounding::rne},
                            {ElemFormat::e2m1, ScaleKind::fp32, 1, 128, Rounding::stochastic},
                            {ElemFormat::e2m1, ScaleKind::fp32, 128, 128, Rounding::rne},
                            {ElemFormat::e2m1, ScaleKind::fp32, 128, 1, Rounding::stochastic},
                            {ElemFormat::e2m1, ScaleKind::e8m0, 1, 32, Rounding::away},
                            {ElemFormat::e2m1, ScaleKind::nvfp4, 16, 16, Rounding::stochastic},
                            {ElemFormat::e4m3, ScaleKind::fp32, 1, 128, Rounding::rne},
                            {ElemFormat::e5m2, ScaleKind::e8m0, 128, 1, Rounding::stochastic}};
  for (const SpecCase& c : cases) {
    QuantSpec spec;
    spec.format = c.f, spec.scale = c.s, spec.block_rows = c.br, spec.block_cols = c.bc, spec.rounding = c.r;
    SCOPED_TRACE(std::string(elem_format_name(c.f)) + " " + std::to_string(c.br) + "x" + std::to_string(c.bc) + " " +
                 rounding_name(c.r));
    const RngKey key{77, 3, 2, 1};
    const size_t ns = size_t(e2m1_scale_count(rows, cols, spec));
    auto run = [&](IsaTier tier, std::vector<float>& y, std::vector<int8_t>& code2, std::vector<uint16_t>& bf,
                   std::vector<float>& scales) {
      set_isa_tier(tier);
      y.assign(x.size(), 0.0f);
      fake_quantize(y.data(), x.data(), rows, cols, spec, key, "t");
      scales.assign(ns, 0.0f);
      if (c.f == ElemFormat::e2m1) {
        code2.assign(x.size(), 99);
        quantize_e2m1_code2(code2.data(), scales.data(), x.data(), rows, cols, spec, key, "t");
      }
      bf.assign(x.size(), 0xAAAA);
      quantize_bf16_codes(bf.data(), scales.data(), x.data(), rows, cols, spec, key, "t");
    };
    std::vector<float> y_auto, y_port, s_auto, s_port;
    std::vector<int8_t> c_auto, c_port;
    std::vector<uint16_t> b_auto, b_port;
    run(IsaTier::portable, y_port, c_port, b_port, s_port);
    for (IsaTier tier : test::runnable_tiers()) {
      SCOPED_TRACE(isa_tier_name(tier));
      run(tier, y_auto, c_auto, b_auto, s_auto);
      EXPECT_EQ(std::memcmp(y_auto.data(), y_port.data(), x.size() * 4), 0);
      EXPECT_EQ(c_auto, c_port);
      EXPECT_EQ(b_auto, b_port);
      EXPECT_EQ(std::memcmp(s_auto.data(), s_port.data(), ns * 4), 0);
    }
    // The codes are not trivially equal: SR and the scales really produce a spread of codes.
    if (c.f == ElemFormat::e2m1) {
      int distinct = 0;
      for (int code = -12; code <= 12; ++code) distinct += std::count(c_auto.begin(), c_auto.end(), code) > 0;
      EXPECT_GE(distinct, 10);
    }
  }
}

}  // namespace
}  // namespace snip
