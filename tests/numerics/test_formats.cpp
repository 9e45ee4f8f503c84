// Element formats (FORMATS.md "Element formats", "Rounding"): exhaustive code round trips,
// every RNE midpoint, saturation, signed zeros, subnormals, BF16, and the E2M1 table.
#include <gtest/gtest.h>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <vector>

#include "snip/elem_format.h"
#include "snip/error.h"

namespace snip {
namespace {

const ElemFormat kMinifloats[] = {ElemFormat::e4m3, ElemFormat::e5m2, ElemFormat::e3m2, ElemFormat::e2m3,
                                  ElemFormat::e2m1};

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// All finite non-negative values of f, ascending, from the codes with the sign bit clear.
std::vector<float> positive_grid(ElemFormat f) {
  const ElemInfo& in = elem_info(f);
  std::vector<float> v;
  for (int code = 0; code < (1 << (in.code_bits - 1)); ++code) {
    const float x = decode_elem(uint8_t(code), f);
    if (std::isfinite(x)) v.push_back(x);
  }
  return v;
}

TEST(Formats, TableParameters) {
  // FORMATS.md table: max finite, min normal, min subnormal, emax.
  struct Row {
    ElemFormat f;
    float max, min_normal, min_sub;
    int emax;
  };
  const Row rows[] = {{ElemFormat::e4m3, 448, 0x1p-6f, 0x1p-9f, 8},
                      {ElemFormat::e5m2, 57344, 0x1p-14f, 0x1p-16f, 15},
                      {ElemFormat::e3m2, 28, 0.25f, 0.0625f, 4},
                      {ElemFormat::e2m3, 7.5f, 1, 0.125f, 2},
                      {ElemFormat::e2m1, 6, 1, 0.5f, 2}};
  for (const Row& r : rows) {
    SCOPED_TRACE(elem_format_name(r.f));
    const std::vector<float> g = positive_grid(r.f);
    EXPECT_EQ(g.back(), r.max);
    EXPECT_EQ(elem_info(r.f).max, r.max);
    EXPECT_EQ(elem_info(r.f).emax, r.emax);
    EXPECT_EQ(g[1], r.min_sub);
    const int mbits = elem_info(r.f).mbits;
    EXPECT_EQ(decode_elem(uint8_t(1 << mbits), r.f), r.min_normal);  // exponent field 1, mantissa 0
  }
}

TEST(Formats, E2M1MagnitudesAreTheDocumentedEight) {
  const std::vector<float> expect = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
  EXPECT_EQ(positive_grid(ElemFormat::e2m1), expect);
}

TEST(Formats, EveryCodeDecodesAndReencodesToItself) {
  for (ElemFormat f : kMinifloats) {
    const ElemInfo& in = elem_info(f);
    SCOPED_TRACE(elem_format_name(f));
    int finite = 0;
    for (int code = 0; code < (1 << in.code_bits); ++code) {
      const float v = decode_elem(uint8_t(code), f);
      const bool neg = (code >> (in.code_bits - 1)) & 1;
      const int mag = code & ((1 << (in.code_bits - 1)) - 1);
      const int exp_all = (1 << in.ebits) - 1;
      const int e_field = mag >> in.mbits, m_field = mag & ((1 << in.mbits) - 1);
      if (f == ElemFormat::e4m3 && e_field == exp_all && m_field == (1 << in.mbits) - 1) {
        EXPECT_TRUE(std::isnan(v)) << code;  // S.1111.111
        continue;
      }
      if (f == ElemFormat::e5m2 && e_field == exp_all) {
        if (m_field == 0)
          EXPECT_TRUE(std::isinf(v)) << code;
        else
          EXPECT_TRUE(std::isnan(v)) << code;
        continue;
      }
      ASSERT_TRUE(std::isfinite(v)) << code;
      ++finite;
      EXPECT_EQ(std::signbit(v), neg) << code;  // ±0 keep their sign
      // Value from the field formula written out independently of decode_elem.
      const double expect = e_field == 0 ? m_field * std::pow(2.0, in.emin - in.mbits)
                                         : (1.0 + m_field / std::pow(2.0, in.mbits)) * std::pow(2.0, e_field - in.bias);
      EXPECT_EQ(double(std::fabs(v)), expect) << code;
      EXPECT_EQ(encode_elem(v, f), uint8_t(code)) << code;
      // On-grid values are fixed points of every rounding mode.
      for (Rounding r : {Rounding::rne, Rounding::away, Rounding::stochastic})
        EXPECT_EQ(bits(round_elem_ref(v, f, r, 0xFFFFFFFFu)), bits(v)) << code;
    }
    const int expected_finite = f == ElemFormat::e4m3 ? 254 : f == ElemFormat::e5m2 ? 2 * 124 : (1 << in.code_bits);
    EXPECT_EQ(finite, expected_finite);
  }
}

TEST(Formats, E2M1DocumentedMidpoints) {
  // FORMATS.md: 0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4; above 5 → 6.
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 5.0001f, 100.0f};
  const float out[] = {0, 1, 1, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 9; ++i) {
    EXPECT_EQ(round_elem_ref(in[i], ElemFormat::e2m1), out[i]) << in[i];
    EXPECT_EQ(round_elem_ref(-in[i], ElemFormat::e2m1), -out[i]) << in[i];
  }
}

TEST(Formats, EveryMidpointRoundsToEvenAndAwayRoundsUp) {
  for (ElemFormat f : kMinifloats) {
    SCOPED_TRACE(elem_format_name(f));
    const std::vector<float> g = positive_grid(f);
    for (size_t i = 0; i + 1 < g.size(); ++i) {
      const float lo = g[i], hi = g[i + 1];
      const float mid = (lo + hi) / 2;  // exact: both have few mantissa bits
      ASSERT_TRUE(lo < mid && mid < hi);
      const float even = (encode_elem(lo, f) & 1) == 0 ? lo : hi;  // code LSB = mantissa LSB
      EXPECT_EQ(round_elem_ref(mid, f, Rounding::rne), even) << mid;
      EXPECT_EQ(round_elem_ref(-mid, f, Rounding::rne), -even) << mid;
      EXPECT_EQ(round_elem_ref(mid, f, Rounding::away), hi) << mid;
      EXPECT_EQ(round_elem_ref(-mid, f, Rounding::away), -hi) << mid;
      EXPECT_EQ(round_elem_ref(std::nextafter(mid, 0.0f), f, Rounding::rne), lo) << mid;
      EXPECT_EQ(round_elem_ref(std::nextafter(mid, INFINITY), f, Rounding::rne), hi) << mid;
      EXPECT_EQ(round_elem_ref(std::nextafter(mid, 0.0f), f, Rounding::away), lo) << mid;
    }
  }
}

TEST(Formats, SaturatesInsteadOfOverflowing) {
  for (ElemFormat f : kMinifloats) {
    const float mx = elem_info(f).max;
    for (float v : {mx * 1.01f, mx * 1.5f, mx * 1000.0f, FLT_MAX}) {
      EXPECT_EQ(round_elem_ref(v, f), mx) << elem_format_name(f) << " " << v;
      EXPECT_EQ(round_elem_ref(-v, f), -mx) << elem_format_name(f) << " " << v;
      EXPECT_EQ(round_elem_ref(v, f, Rounding::stochastic, 0), mx);
    }
  }
  // E4M3's would-be 480 (S.1111.111 is NaN) saturates to 448, never to NaN.
  EXPECT_EQ(round_elem_ref(470.0f, ElemFormat::e4m3), 448.0f);
  EXPECT_EQ(encode_elem(448.0f, ElemFormat::e4m3), 0x7E);
  EXPECT_EQ(encode_elem(-448.0f, ElemFormat::e4m3), 0xFE);
  EXPECT_EQ(encode_elem(57344.0f, ElemFormat::e5m2), 0x7B);
}

TEST(Formats, SignedZerosAndUnderflowKeepTheSign) {
  for (ElemFormat f : kMinifloats) {
    EXPECT_EQ(bits(round_elem_ref(0.0f, f)), bits(0.0f));
    EXPECT_EQ(bits(round_elem_ref(-0.0f, f)), bits(-0.0f));
    const float tiny = decode_elem(1, f) * 0.25f;  // a quarter of the smallest subnormal
    EXPECT_EQ(bits(round_elem_ref(-tiny, f)), bits(-0.0f));
    const ElemInfo& in = elem_info(f);
    EXPECT_EQ(encode_elem(-0.0f, f), uint8_t(1u << (in.code_bits - 1)));
  }
}

TEST(Formats, SubnormalsRoundOnTheFixedQuantum) {
  // E4M3 subnormal quantum 2^-9: 2.5·2^-9 → 2·2^-9 (even), 3.5·2^-9 → 4·2^-9 (= 2^-7, even).
  EXPECT_EQ(round_elem_ref(2.5f * 0x1p-9f, ElemFormat::e4m3), 2 * 0x1p-9f);
  EXPECT_EQ(round_elem_ref(3.5f * 0x1p-9f, ElemFormat::e4m3), 4 * 0x1p-9f);
  EXPECT_EQ(round_elem_ref(0.5f * 0x1p-9f, ElemFormat::e4m3), 0.0f);
  EXPECT_EQ(round_elem_ref(0.50001f * 0x1p-9f, ElemFormat::e4m3), 0x1p-9f);
  // The largest subnormal rounds up into the smallest normal across the boundary.
  EXPECT_EQ(round_elem_ref(7.6f * 0x1p-9f, ElemFormat::e4m3), 0x1p-6f);
  EXPECT_EQ(round_elem_ref(0.25f * 0x1p-16f * 3, ElemFormat::e5m2), 0x1p-16f);  // 0.75 quanta → 1
  // FP32 subnormal input: far below any grid, becomes zero.
  EXPECT_EQ(round_elem_ref(1e-40f, ElemFormat::e2m1), 0.0f);
}

TEST(Formats, BF16IsRneOnTheDroppedBitsAndSaturates) {
  EXPECT_EQ(bits(bf16_round(1.0f)), 0x3F800000u);
  EXPECT_EQ(bits(bf16_round(std::bit_cast<float>(0x3F808000u))), 0x3F800000u);  // tie → even (down)
  EXPECT_EQ(bits(bf16_round(std::bit_cast<float>(0x3F818000u))), 0x3F820000u);  // tie → even (up)
  EXPECT_EQ(bits(bf16_round(std::bit_cast<float>(0x3F808001u))), 0x3F810000u);
  EXPECT_EQ(bits(bf16_round(std::bit_cast<float>(0x3F80FFFFu))), 0x3F810000u);
  EXPECT_EQ(bits(bf16_round(std::bit_cast<float>(0x7F7FFFFFu))), 0x7F7F0000u);  // FLT_MAX → BF16 max
  EXPECT_EQ(bits(bf16_round(-FLT_MAX)), 0xFF7F0000u);
  EXPECT_EQ(bits(bf16_round(std::bit_cast<float>(0x00018000u))), 0x00020000u);  // subnormal tie → even
  EXPECT_EQ(bits(bf16_round(-0.0f)), 0x80000000u);
}

TEST(Formats, NamesParseAndRejectUnknowns) {
  for (ElemFormat f : kMinifloats) EXPECT_EQ(parse_elem_format(elem_format_name(f)), f);
  EXPECT_THROW(parse_elem_format("fp16"), Error);
  EXPECT_THROW(parse_rounding("nearest"), Error);
  EXPECT_THROW(parse_e8m0_mode("round"), Error);
  EXPECT_EQ(parse_e8m0_mode("even"), E8M0Mode::even);
  EXPECT_EQ(parse_rounding("away"), Rounding::away);
}

}  // namespace
}  // namespace snip
