// Scalar element formats, rounding and scale rules (FORMATS.md), written for clarity: the
// reference every fast kernel in quantizer.cpp is tested against bit for bit.
#include "snip/elem_format.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>

#include "snip/error.h"
#include "snip/names.h"

namespace snip {
namespace {

constexpr ElemInfo make_info(int ebits, int mbits, int bias, int emax, float max) {
  return ElemInfo{ebits, mbits, bias, 1 - bias, emax, max, 1 + ebits + mbits};
}

// OCP FP8 "fn" E4M3 has no Inf, so its top binade keeps mantissas 000..110 (max 448);
// E5M2 is IEEE-like (exponent 31 is Inf/NaN, max 57344); the FP6/FP4 formats use every code.
const ElemInfo kInfoE4M3 = make_info(4, 3, 7, 8, 448.0f);
const ElemInfo kInfoE5M2 = make_info(5, 2, 15, 15, 57344.0f);
const ElemInfo kInfoE3M2 = make_info(3, 2, 3, 4, 28.0f);
const ElemInfo kInfoE2M3 = make_info(2, 3, 1, 2, 7.5f);
const ElemInfo kInfoE2M1 = make_info(2, 1, 1, 2, 6.0f);
const ElemInfo kInfoBF16 = make_info(8, 7, 127, 127, 3.3895313892515355e38f);  // 0x7F7F0000

// Unbiased exponent and "mantissa bits non-zero" of a finite positive v (normal or subnormal).
int exponent_of(float v) {
  return std::ilogb(v);
}
bool has_fraction(float v) {
  int e = 0;
  return std::frexp(v, &e) != 0.5f;  // frexp mantissa is 0.5 exactly for powers of two
}

// mix64: the splitmix64 finalizer (a bijection on 64 bits with full avalanche).
uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// fmix32: murmur3's 32-bit finalizer; the per-element mix is kept in 32-bit arithmetic so
// the fast kernel vectorizes it (quantizer.cpp repeats it verbatim).
uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

}  // namespace

const ElemInfo& elem_info(ElemFormat f) {
  switch (f) {
    case ElemFormat::e4m3:
      return kInfoE4M3;
    case ElemFormat::e5m2:
      return kInfoE5M2;
    case ElemFormat::e3m2:
      return kInfoE3M2;
    case ElemFormat::e2m3:
      return kInfoE2M3;
    case ElemFormat::e2m1:
      return kInfoE2M1;
    case ElemFormat::bf16:
      return kInfoBF16;
    case ElemFormat::fp32:
      break;
  }
  SNIP_ASSERT_MSG(false, "elem_info: fp32 is not a minifloat");
  return kInfoBF16;
}

namespace {

constexpr std::array<Named<ElemFormat>, 7> kElemFormatNames{{{ElemFormat::fp32, "fp32"},
                                                             {ElemFormat::bf16, "bf16"},
                                                             {ElemFormat::e4m3, "e4m3"},
                                                             {ElemFormat::e5m2, "e5m2"},
                                                             {ElemFormat::e3m2, "e3m2"},
                                                             {ElemFormat::e2m3, "e2m3"},
                                                             {ElemFormat::e2m1, "e2m1"}}};
constexpr std::array<Named<Rounding>, 3> kRoundingNames{
    {{Rounding::rne, "rne"}, {Rounding::stochastic, "stochastic"}, {Rounding::away, "away"}}};
constexpr std::array<Named<E8M0Mode>, 4> kE8M0ModeNames{
    {{E8M0Mode::floor, "floor"}, {E8M0Mode::ceil, "ceil"}, {E8M0Mode::rceil, "rceil"}, {E8M0Mode::even, "even"}}};

}  // namespace

const char* elem_format_name(ElemFormat f) {
  return name_of(kElemFormatNames, f);
}

ElemFormat parse_elem_format(std::string_view s) {
  return parse_name(kElemFormatNames, s, "element format");
}

const char* rounding_name(Rounding r) {
  return name_of(kRoundingNames, r);
}

Rounding parse_rounding(std::string_view s) {
  return parse_name(kRoundingNames, s, "rounding");
}

const char* e8m0_mode_name(E8M0Mode m) {
  return name_of(kE8M0ModeNames, m);
}

E8M0Mode parse_e8m0_mode(std::string_view s) {
  return parse_name(kE8M0ModeNames, s, "E8M0 scale mode");
}

// Round to the grid: with e = max(exponent(|v|), emin) the grid spacing is q = 2^(e - mbits);
// t = |v|/q is exact in double, so rounding t to an integer is the whole story.
float round_elem_ref(float v, ElemFormat f, Rounding r, uint32_t rand_bits) {
  const ElemInfo& in = elem_info(f);
  double a = std::fabs(double(v));
  if (a > in.max) a = in.max;  // saturate before encoding
  int e = a > 0 ? std::ilogb(a) : in.emin;
  if (e < in.emin) e = in.emin;
  const double q = std::ldexp(1.0, e - in.mbits);
  const double t = a / q;
  double n = 0;
  switch (r) {
    case Rounding::rne:
      n = std::nearbyint(t);
      break;  // default FE_TONEAREST: ties to even
    case Rounding::away:
      n = std::round(t);
      break;  // ties away from zero
    case Rounding::stochastic: {
      const double fl = std::floor(t);
      const double u = double(rand_bits >> 8) * 0x1p-24;
      n = fl + (u < t - fl ? 1.0 : 0.0);
      break;
    }
  }
  return std::copysign(float(n * q), v);
}

float bf16_round(float x) {
  return round_elem_ref(x, ElemFormat::bf16, Rounding::rne);
}

uint8_t encode_elem(float v, ElemFormat f) {
  const ElemInfo& in = elem_info(f);
  SNIP_ASSERT_MSG(in.code_bits <= 8, "encode_elem: 8-bit-or-narrower formats only");
  const uint32_t sign = std::signbit(v) ? 1u : 0u;
  const double a = std::fabs(double(v));
  SNIP_ASSERT_MSG(!std::isnan(v) && a <= in.max, "encode_elem: value must be on the format's grid");
  uint32_t exp_field = 0, mant = 0;
  if (a < std::ldexp(1.0, in.emin)) {  // subnormal (or zero): a = mant · 2^(emin - mbits)
    mant = uint32_t(a / std::ldexp(1.0, in.emin - in.mbits));
  } else {  // normal: a = (1 + mant/2^mbits) · 2^e
    const int e = std::ilogb(a);
    exp_field = uint32_t(e + in.bias);
    mant = uint32_t(a / std::ldexp(1.0, e - in.mbits)) - (1u << in.mbits);
  }
  return uint8_t((sign << (in.ebits + in.mbits)) | (exp_field << in.mbits) | mant);
}

float decode_elem(uint8_t code, ElemFormat f) {
  const ElemInfo& in = elem_info(f);
  SNIP_ASSERT_MSG(in.code_bits <= 8, "decode_elem: 8-bit-or-narrower formats only");
  const uint32_t mant = code & ((1u << in.mbits) - 1);
  const uint32_t exp_field = (code >> in.mbits) & ((1u << in.ebits) - 1);
  const bool neg = (code >> (in.ebits + in.mbits)) & 1;
  const uint32_t exp_all = (1u << in.ebits) - 1;
  double a;
  if (f == ElemFormat::e4m3 && exp_field == exp_all && mant == (1u << in.mbits) - 1) {
    a = NAN;
  } else if (f == ElemFormat::e5m2 && exp_field == exp_all) {
    a = mant == 0 ? INFINITY : NAN;
  } else if (exp_field == 0) {
    a = std::ldexp(double(mant), in.emin - in.mbits);
  } else {
    a = std::ldexp(1.0 + std::ldexp(double(mant), -in.mbits), int(exp_field) - in.bias);
  }
  return float(neg ? -a : a);
}

int e8m0_exponent(float amax, ElemFormat f, E8M0Mode mode) {
  const ElemInfo& in = elem_info(f);
  if (!(amax > 0)) return 0;
  int e = 0;
  switch (mode) {
    case E8M0Mode::floor:
      e = exponent_of(amax) - in.emax;
      break;
    case E8M0Mode::ceil:
      e = exponent_of(amax) + (has_fraction(amax) ? 1 : 0) - in.emax;
      break;
    case E8M0Mode::rceil: {
      const float v = amax / in.max;  // FP32 division, as FORMATS.md says
      e = v > 0 ? exponent_of(v) + (has_fraction(v) ? 1 : 0) : -127;
      break;
    }
    case E8M0Mode::even: {
      // RNE of amax to mbits mantissa bits (may carry into the exponent), then floor.
      const double a = double(amax);
      const int ea = std::ilogb(a);
      const double q = std::ldexp(1.0, ea - in.mbits);
      const double rounded = std::nearbyint(a / q) * q;
      e = std::ilogb(rounded) - in.emax;
      break;
    }
  }
  return e8m0_clamp(e, in);
}

float nvfp4_tensor_factor(float amax_tensor) {
  if (amax_tensor == 0) return 1.0f;
  const float g = 2688.0f / amax_tensor;  // 2688 = 448 · 6
  return g > FLT_MAX ? FLT_MAX : g;
}

Nvfp4BlockScale nvfp4_block_scale(float amax_block, float g) {
  const float mult = g * (1.0f / 6.0f);
  float sb = amax_block * mult;
  if (!(sb < 448.0f)) sb = 448.0f;
  const float s_block = round_elem_ref(sb, ElemFormat::e4m3, Rounding::rne);
  Nvfp4BlockScale s;
  s.dec = s_block * (1.0f / g);
  const float enc = 1.0f / s.dec;
  s.enc = enc > FLT_MAX ? FLT_MAX : enc;
  return s;
}

uint32_t sr_bits(const RngKey& key, uint64_t index) {
  const uint64_t k = mix64(key.seed ^ mix64(key.step ^ mix64((uint64_t(key.layer) << 32) | key.role)));
  const uint32_t lo = uint32_t(index), hi = uint32_t(index >> 32);
  return fmix32(fmix32(lo ^ uint32_t(k)) ^ (hi * 0x9E3779B1u + uint32_t(k >> 32)));
}

}  // namespace snip
