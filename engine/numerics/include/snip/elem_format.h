// Element-level number formats (FORMATS.md "Element formats", "Rounding", "Scales"): the
// parameters of each minifloat, scalar encode/decode to bit codes, scalar rounding with
// saturation, and the scalar scale rules (E8M0 modes, NVFP4 two-level scaling). These are
// the obviously-correct building blocks; quant.h's block kernels are checked against them.
#pragma once
#include <cstdint>

#include "snip/quant.h"

namespace snip {

// A sign + `ebits` exponent + `mbits` mantissa minifloat. emin = 1 - bias is the exponent of
// the smallest normal; values below 2^emin are subnormal with quantum 2^(emin - mbits).
struct ElemInfo {
  int ebits = 0;
  int mbits = 0;
  int bias = 0;
  int emin = 0;       // 1 - bias
  int emax = 0;       // exponent of the largest power of two (FORMATS.md "emax")
  float max = 0;      // largest finite magnitude (saturation bound)
  int code_bits = 0;  // 1 + ebits + mbits
};

// Parameters of `f`; fp32 has none (asserts). bf16 is included (8/7, bias 127).
const ElemInfo& elem_info(ElemFormat f);

// Rounds the (already scaled) FP32 value v to format f: |v| is clamped to f's max first
// (saturation), then rounded to the format's grid with `r` (rne, ties-away, or stochastic
// using the 32 random bits `rand_bits`: round up iff (rand_bits >> 8)·2^-24 < fractional
// distance). The sign is kept, so −0.1 may become −0. v must be finite. Scalar, in double.
float round_elem_ref(float v, ElemFormat f, Rounding r = Rounding::rne, uint32_t rand_bits = 0);

// BF16 round-to-nearest-even of x, saturating to ±BF16 max (≈3.39e38).
float bf16_round(float x);

// Bit code of an element value already on f's grid (|v| <= max), in the low code_bits bits:
// sign | exponent field | mantissa field. f must be an 8-bit-or-narrower format.
uint8_t encode_elem(float v, ElemFormat f);
// Value of a code (low code_bits bits). E4M3 S.1111.111 and E5M2 exponent 31 decode to
// NaN / ±Inf as the formats define; the FP4/FP6 formats have no special codes.
float decode_elem(uint8_t code, ElemFormat f);

// Exponent e of the E8M0 scale 2^e for a block with max magnitude `amax` (FORMATS.md
// "E8M0 scale"), clamped to [-127, 127]; amax = 0 gives 0.
int e8m0_exponent(float amax, ElemFormat f, E8M0Mode mode);
// e clamped to [−127, 127 − emax_elem]: the top keeps the largest element times 2^e finite in
// FP32 (max_elem < 2^(emax_elem+1)), so a block whose amax is near FLT_MAX saturates to a finite
// value instead of rounding up to 2^128 = inf (ceil, rceil and even can ask for more).
inline int e8m0_clamp(int e, const ElemInfo& info) {
  const int top = 127 - info.emax;
  return e < -127 ? -127 : e > top ? top : e;
}

// NVFP4 two-level scaling (FORMATS.md steps 1-4): the tensor factor g, and per block the
// decode scale `dec` (x̂ = q·dec) and encode scale `enc` (q = E2M1(clamp(x·enc, ±6))).
float nvfp4_tensor_factor(float amax_tensor);  // g = 2688 / amax (1 if 0, capped at FLT_MAX)
struct Nvfp4BlockScale {
  float dec = 1;
  float enc = 1;
};
Nvfp4BlockScale nvfp4_block_scale(float amax_block, float g);

// 32 random bits for element `index` of the tensor keyed by `key` (counter-based: a pure
// function of (seed, step, layer, role, index), so it never depends on thread count).
uint32_t sr_bits(const RngKey& key, uint64_t index);

}  // namespace snip
