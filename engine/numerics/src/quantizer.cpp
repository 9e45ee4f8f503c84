// Block-scaled fake quantization (FORMATS.md "Scales", METHOD.md section 2): the fast,
// vectorized and multi-threaded fake_quantize, and its scalar twin fake_quantize_ref.
//
// A QuantSpec tiles a (rows, cols) row-major matrix into (br, bc) blocks. Each block gets
// one scale from its max magnitude amax; each element becomes
//     x̂ = R(clamp(x ⊘ in, ±max)) · out
// where ⊘ is FP32 division for FP32 scales (in = out = amax/max, FORMATS.md insists on the
// division) and multiplication otherwise (E8M0: in = 2^-e, out = 2^e, which is exactly the
// division by 2^e; NVFP4: in = enc, out = dec), and R rounds to the element grid.
//
// The fast element rounding uses FP32 arithmetic only, so it vectorizes:
//   e = max(exponent(a), emin), grid spacing q = 2^(e - m) built from exponent bits;
//   RNE:  R(a) = (a + 2^(e+23-m)) - 2^(e+23-m)   (the FP32 add rounds to nearest even at q)
//   SR / ties-away: t = a·(1/q) (exact), fl = trunc(t), R(a) = (fl + up)·q.
// The scalar twin rounds in double with nearbyint / round / floor (elem_format.cpp); tests
// check the two bit for bit.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "code_sink.h"
#include "float_bits.h"
#include "parallel.h"
#include "quant_kernels.h"
#include "snip/elem_format.h"
#include "snip/error.h"
#include "snip/isa.h"
#include "snip/quant.h"
#include "snip/thread_pool.h"

namespace snip {

namespace {

std::atomic<int> g_quant_threads{0};

using numerics_detail::fbits;
using numerics_detail::ffrom;

constexpr uint32_t kAbsMask = 0x7FFFFFFFu;
constexpr uint32_t kInfBits = 0x7F800000u;  // |x| bits >= this: Inf or NaN

}  // namespace

void set_quant_threads(int n) {
  g_quant_threads.store(n > 0 ? n : 0);
}
int quant_threads() {
  const int n = g_quant_threads.load();
  if (n > 0) return n;
  return std::min(pool_threads(), 64);
}

// ---------------------------------------------------------------------------------------------
// One binary, per-tier kernels: SNIP_TIER_COPIES, snip/isa.h.

// Fast kernels. Each is compiled for the SSE2 baseline, AVX2 and AVX-512 (the default build
// has no -march) and the copy of the instruction-set tier in force runs (SNIP_TIER_PICK). All
// copies do the same IEEE operations in the same order (no FMA contraction, see CMakeLists.txt),
// so they give the same bits; the AVX-512 copy makes the stochastic-rounding kernels (two
// 32-bit multiply hashes per element, compute-bound) ~1.4× faster than AVX2. These are the
// portable kernels: at tier avx512 and above the quantizer runs the hand-vectorized copies in
// quant_avx512.cpp instead (same bits, tested against these).
namespace detail {

inline uint32_t fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

// y[c] = sign(v)·R(min(|v|, max))·out with v = x[c]/in (kDivide) or x[c]·in. kVecScale: in and
// out are per-column arrays, else scalars in_s[0], out_s[0]. i0: tensor index of x[0] (SR key).
// OutT float: y[c] is the dequantized value. OutT int8_t: y[c] = 2·(signed rounded value), the
// E2M1 code the integer GEMM reads (out_s unused): the same rounding, so the same values.
// OutT uint16_t: y[c] = the BF16 bits of the signed rounded value (exact: formats of at most 7
// mantissa bits and FP32's exponent range), the FP8 code the BF16 GEMM reads (out_s unused).
template <bool kDivide, bool kVecScale, Rounding kRound, class OutT = float>
inline __attribute__((always_inline)) void row_body(OutT* __restrict y, const float* __restrict x,
                                                    const float* __restrict in_s, const float* __restrict out_s,
                                                    int64_t n, const RowParams& p, uint64_t i0) {
  const int m = p.mbits;
  const uint32_t emin_b = p.emin_biased;
  const float maxv = p.max;
  const uint32_t k0 = p.k0, k1 = p.k1;
  const uint32_t lo0 = uint32_t(i0), hi0 = uint32_t(i0 >> 32);
  // The high word's term of the hash, hi·0x9E3779B1 + k1, for hi = hi0 and for hi0 + 1 (the
  // low word wrapped inside this row): one multiply per row instead of one per element.
  const uint32_t hk_same = hi0 * 0x9E3779B1u + k1, hk_wrap = (hi0 + 1u) * 0x9E3779B1u + k1;
  const float in0 = in_s[0], out0 = out_s[0];
  for (int64_t c = 0; c < n; ++c) {
    const float in = kVecScale ? in_s[c] : in0;
    float out = out0;  // the code kernels pass one dummy out value: never index it
    if constexpr (kVecScale && std::is_same_v<OutT, float>) out = out_s[c];
    const float v = kDivide ? x[c] / in : x[c] * in;
    const uint32_t vb = fbits(v);
    float a = ffrom(vb & kAbsMask);
    a = a < maxv ? a : maxv;  // saturate before rounding
    uint32_t eb = fbits(a) >> 23;
    eb = eb > emin_b ? eb : emin_b;
    float r;
    if constexpr (kRound == Rounding::rne) {
      const float big = ffrom((eb + 23 - uint32_t(m)) << 23);  // 2^(e+23-m): its FP32 ulp is q
      r = (a + big) - big;
    } else {
      const float q = ffrom((eb - uint32_t(m)) << 23);             // 2^(e-m)
      const float inv_q = ffrom((254u - eb + uint32_t(m)) << 23);  // 2^(m-e), exact
      const float t = a * inv_q;
      const float fl = float(int32_t(t));
      const float frac = t - fl;
      float up;
      if constexpr (kRound == Rounding::stochastic) {
        const uint32_t lo = lo0 + uint32_t(c);
        const uint32_t h = fmix32(fmix32(lo ^ k0) ^ (lo < lo0 ? hk_wrap : hk_same));
        const float u = float(int32_t(h >> 8)) * 0x1p-24f;
        up = u < frac ? 1.0f : 0.0f;
      } else {
        up = frac >= 0.5f ? 1.0f : 0.0f;
      }
      r = (fl + up) * q;
    }
    if constexpr (std::is_same_v<OutT, int8_t>) {
      y[c] = int8_t(int32_t(ffrom(fbits(r) | (vb & ~kAbsMask)) * 2.0f) + p.code_offset);
    } else if constexpr (std::is_same_v<OutT, uint16_t>) {
      y[c] = uint16_t((fbits(r) | (vb & ~kAbsMask)) >> 16);
    } else {
      y[c] = ffrom(fbits(r) | (vb & ~kAbsMask)) * out;
    }
  }
}

#define SNIP_ROW_KERNEL(NAME, DIV, VEC, ROUND)                                                                        \
  SNIP_TIER_COPIES(void, NAME,                                                                                        \
                   (float* __restrict y, const float* __restrict x, const float* in_s, const float* out_s, int64_t n, \
                    const RowParams& p, uint64_t i0),                                                                 \
                   { row_body<DIV, VEC, ROUND>(y, x, in_s, out_s, n, p, i0); })
SNIP_ROW_KERNEL(row_div_s_rne, true, false, Rounding::rne)
SNIP_ROW_KERNEL(row_div_s_sr, true, false, Rounding::stochastic)
SNIP_ROW_KERNEL(row_div_s_away, true, false, Rounding::away)
SNIP_ROW_KERNEL(row_div_v_rne, true, true, Rounding::rne)
SNIP_ROW_KERNEL(row_div_v_sr, true, true, Rounding::stochastic)
SNIP_ROW_KERNEL(row_div_v_away, true, true, Rounding::away)
SNIP_ROW_KERNEL(row_mul_s_rne, false, false, Rounding::rne)
SNIP_ROW_KERNEL(row_mul_s_sr, false, false, Rounding::stochastic)
SNIP_ROW_KERNEL(row_mul_s_away, false, false, Rounding::away)
SNIP_ROW_KERNEL(row_mul_v_rne, false, true, Rounding::rne)
SNIP_ROW_KERNEL(row_mul_v_sr, false, true, Rounding::stochastic)
SNIP_ROW_KERNEL(row_mul_v_away, false, true, Rounding::away)
#undef SNIP_ROW_KERNEL

// The same kernels writing E2M1 codes 2q (quantize_e2m1_code2), plus RowParams::code_offset.
#define SNIP_CODE_KERNEL(NAME, DIV, VEC, ROUND)                                                                        \
  SNIP_TIER_COPIES(void, NAME,                                                                                         \
                   (int8_t* __restrict y, const float* __restrict x, const float* in_s, int64_t n, const RowParams& p, \
                    uint64_t i0),                                                                                      \
                   {                                                                                                   \
                     const float one = 1.0f;                                                                           \
                     row_body<DIV, VEC, ROUND, int8_t>(y, x, in_s, &one, n, p, i0);                                    \
                   })
SNIP_CODE_KERNEL(code_div_s_rne, true, false, Rounding::rne)
SNIP_CODE_KERNEL(code_div_s_sr, true, false, Rounding::stochastic)
SNIP_CODE_KERNEL(code_div_s_away, true, false, Rounding::away)
SNIP_CODE_KERNEL(code_div_v_rne, true, true, Rounding::rne)
SNIP_CODE_KERNEL(code_div_v_sr, true, true, Rounding::stochastic)
SNIP_CODE_KERNEL(code_div_v_away, true, true, Rounding::away)
SNIP_CODE_KERNEL(code_mul_s_rne, false, false, Rounding::rne)
SNIP_CODE_KERNEL(code_mul_s_sr, false, false, Rounding::stochastic)
SNIP_CODE_KERNEL(code_mul_s_away, false, false, Rounding::away)
SNIP_CODE_KERNEL(code_mul_v_rne, false, true, Rounding::rne)
SNIP_CODE_KERNEL(code_mul_v_sr, false, true, Rounding::stochastic)
SNIP_CODE_KERNEL(code_mul_v_away, false, true, Rounding::away)
#undef SNIP_CODE_KERNEL

// The same kernels writing BF16 codes (quantize_bf16_codes).
#define SNIP_BF16_KERNEL(NAME, DIV, VEC, ROUND)                                                      \
  SNIP_TIER_COPIES(void, NAME,                                                                       \
                   (uint16_t* __restrict y, const float* __restrict x, const float* in_s, int64_t n, \
                    const RowParams& p, uint64_t i0),                                                \
                   {                                                                                 \
                     const float one = 1.0f;                                                         \
                     row_body<DIV, VEC, ROUND, uint16_t>(y, x, in_s, &one, n, p, i0);                \
                   })
SNIP_BF16_KERNEL(bf16c_div_s_rne, true, false, Rounding::rne)
SNIP_BF16_KERNEL(bf16c_div_s_sr, true, false, Rounding::stochastic)
SNIP_BF16_KERNEL(bf16c_div_s_away, true, false, Rounding::away)
SNIP_BF16_KERNEL(bf16c_div_v_rne, true, true, Rounding::rne)
SNIP_BF16_KERNEL(bf16c_div_v_sr, true, true, Rounding::stochastic)
SNIP_BF16_KERNEL(bf16c_div_v_away, true, true, Rounding::away)
SNIP_BF16_KERNEL(bf16c_mul_s_rne, false, false, Rounding::rne)
SNIP_BF16_KERNEL(bf16c_mul_s_sr, false, false, Rounding::stochastic)
SNIP_BF16_KERNEL(bf16c_mul_s_away, false, false, Rounding::away)
SNIP_BF16_KERNEL(bf16c_mul_v_rne, false, true, Rounding::rne)
SNIP_BF16_KERNEL(bf16c_mul_v_sr, false, true, Rounding::stochastic)
SNIP_BF16_KERNEL(bf16c_mul_v_away, false, true, Rounding::away)
#undef SNIP_BF16_KERNEL

Bf16CodeKernel pick_bf16_code_kernel(bool divide, bool vec, Rounding r) {
  static const Bf16CodeKernel table[3][2][2][3] = {
      {{{bf16c_mul_s_rne_portable, bf16c_mul_s_sr_portable, bf16c_mul_s_away_portable},
        {bf16c_mul_v_rne_portable, bf16c_mul_v_sr_portable, bf16c_mul_v_away_portable}},
       {{bf16c_div_s_rne_portable, bf16c_div_s_sr_portable, bf16c_div_s_away_portable},
        {bf16c_div_v_rne_portable, bf16c_div_v_sr_portable, bf16c_div_v_away_portable}}},
      {{{bf16c_mul_s_rne_avx2, bf16c_mul_s_sr_avx2, bf16c_mul_s_away_avx2},
        {bf16c_mul_v_rne_avx2, bf16c_mul_v_sr_avx2, bf16c_mul_v_away_avx2}},
       {{bf16c_div_s_rne_avx2, bf16c_div_s_sr_avx2, bf16c_div_s_away_avx2},
        {bf16c_div_v_rne_avx2, bf16c_div_v_sr_avx2, bf16c_div_v_away_avx2}}},
      {{{bf16c_mul_s_rne_avx512, bf16c_mul_s_sr_avx512, bf16c_mul_s_away_avx512},
        {bf16c_mul_v_rne_avx512, bf16c_mul_v_sr_avx512, bf16c_mul_v_away_avx512}},
       {{bf16c_div_s_rne_avx512, bf16c_div_s_sr_avx512, bf16c_div_s_away_avx512},
        {bf16c_div_v_rne_avx512, bf16c_div_v_sr_avx512, bf16c_div_v_away_avx512}}}};
  return table[tier_copy()][divide ? 1 : 0][vec ? 1 : 0][int(r)];
}

CodeKernel pick_code_kernel(bool divide, bool vec, Rounding r) {
  static const CodeKernel table[3][2][2][3] = {
      {{{code_mul_s_rne_portable, code_mul_s_sr_portable, code_mul_s_away_portable},
        {code_mul_v_rne_portable, code_mul_v_sr_portable, code_mul_v_away_portable}},
       {{code_div_s_rne_portable, code_div_s_sr_portable, code_div_s_away_portable},
        {code_div_v_rne_portable, code_div_v_sr_portable, code_div_v_away_portable}}},
      {{{code_mul_s_rne_avx2, code_mul_s_sr_avx2, code_mul_s_away_avx2},
        {code_mul_v_rne_avx2, code_mul_v_sr_avx2, code_mul_v_away_avx2}},
       {{code_div_s_rne_avx2, code_div_s_sr_avx2, code_div_s_away_avx2},
        {code_div_v_rne_avx2, code_div_v_sr_avx2, code_div_v_away_avx2}}},
      {{{code_mul_s_rne_avx512, code_mul_s_sr_avx512, code_mul_s_away_avx512},
        {code_mul_v_rne_avx512, code_mul_v_sr_avx512, code_mul_v_away_avx512}},
       {{code_div_s_rne_avx512, code_div_s_sr_avx512, code_div_s_away_avx512},
        {code_div_v_rne_avx512, code_div_v_sr_avx512, code_div_v_away_avx512}}}};
  return table[tier_copy()][divide ? 1 : 0][vec ? 1 : 0][int(r)];
}

RowKernel pick_row_kernel(bool divide, bool vec, Rounding r) {
  static const RowKernel table[3][2][2][3] = {
      {{{row_mul_s_rne_portable, row_mul_s_sr_portable, row_mul_s_away_portable},
        {row_mul_v_rne_portable, row_mul_v_sr_portable, row_mul_v_away_portable}},
       {{row_div_s_rne_portable, row_div_s_sr_portable, row_div_s_away_portable},
        {row_div_v_rne_portable, row_div_v_sr_portable, row_div_v_away_portable}}},
      {{{row_mul_s_rne_avx2, row_mul_s_sr_avx2, row_mul_s_away_avx2},
        {row_mul_v_rne_avx2, row_mul_v_sr_avx2, row_mul_v_away_avx2}},
       {{row_div_s_rne_avx2, row_div_s_sr_avx2, row_div_s_away_avx2},
        {row_div_v_rne_avx2, row_div_v_sr_avx2, row_div_v_away_avx2}}},
      {{{row_mul_s_rne_avx512, row_mul_s_sr_avx512, row_mul_s_away_avx512},
        {row_mul_v_rne_avx512, row_mul_v_sr_avx512, row_mul_v_away_avx512}},
       {{row_div_s_rne_avx512, row_div_s_sr_avx512, row_div_s_away_avx512},
        {row_div_v_rne_avx512, row_div_v_sr_avx512, row_div_v_away_avx512}}}};
  return table[tier_copy()][divide ? 1 : 0][vec ? 1 : 0][int(r)];
}

// Max of |x| as FP32 bits (order-preserving for non-negative floats; >= kInfBits: non-finite).
SNIP_TIER_COPIES(uint32_t, amax_bits, (const float* __restrict x, int64_t n), {
  uint32_t mx = 0;
  for (int64_t c = 0; c < n; ++c) {
    const uint32_t a = fbits(x[c]) & kAbsMask;
    mx = a > mx ? a : mx;
  }
  return mx;
})
uint32_t amax_bits(const float* x, int64_t n) {
  return SNIP_TIER_PICK(amax_bits)(x, n);
}

// colmax[c] = max(colmax[c], |x[c]| bits).
SNIP_TIER_COPIES(void, colmax_update, (uint32_t* __restrict colmax, const float* __restrict x, int64_t n), {
  for (int64_t c = 0; c < n; ++c) {
    const uint32_t a = fbits(x[c]) & kAbsMask;
    colmax[c] = a > colmax[c] ? a : colmax[c];
  }
})
void colmax_update(uint32_t* colmax, const float* x, int64_t n) {
  SNIP_TIER_PICK(colmax_update)(colmax, x, n);
}

// BF16 RNE on the 16 dropped bits, saturating to ±0x7F7F0000; returns |x| bits max (finiteness).
// OutT float: y[c] is the rounded value; OutT uint16_t: its BF16 bits (the BF16 GEMM's codes).
template <class OutT>
inline __attribute__((always_inline)) uint32_t bf16_body(OutT* __restrict y, const float* __restrict x, int64_t n) {
  uint32_t mx = 0;
  for (int64_t c = 0; c < n; ++c) {
    const uint32_t u = fbits(x[c]);
    const uint32_t a = u & kAbsMask;
    mx = a > mx ? a : mx;
    uint32_t r = (a + 0x7FFFu + ((a >> 16) & 1u)) & 0xFFFF0000u;
    r = r < 0x7F7F0000u ? r : 0x7F7F0000u;
    if constexpr (std::is_same_v<OutT, uint16_t>)
      y[c] = uint16_t((r | (u & ~kAbsMask)) >> 16);
    else
      y[c] = ffrom(r | (u & ~kAbsMask));
  }
  return mx;
}

SNIP_TIER_COPIES(uint32_t, bf16_row, (float* __restrict y, const float* __restrict x, int64_t n),
                 { return bf16_body(y, x, n); })
uint32_t bf16_row(float* y, const float* x, int64_t n) {
  return SNIP_TIER_PICK(bf16_row)(y, x, n);
}

SNIP_TIER_COPIES(uint32_t, bf16_bits_row, (uint16_t* __restrict y, const float* __restrict x, int64_t n),
                 { return bf16_body(y, x, n); })
uint32_t bf16_bits_row(uint16_t* y, const float* x, int64_t n) {
  return SNIP_TIER_PICK(bf16_bits_row)(y, x, n);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
namespace {

using detail::RowParams;

struct BlockGeometry {
  int64_t br, bc, nbr, nbc;
};
BlockGeometry geometry(const QuantSpec& spec, int64_t rows, int64_t cols) {
  BlockGeometry g;
  g.br = spec.block_rows <= 0 ? rows : std::min<int64_t>(spec.block_rows, rows);
  g.bc = spec.block_cols <= 0 ? cols : std::min<int64_t>(spec.block_cols, cols);
  g.nbr = (rows + g.br - 1) / g.br;
  g.nbc = (cols + g.bc - 1) / g.bc;
  return g;
}

void check_spec(const QuantSpec& spec) {
  if (spec.scale == ScaleKind::nvfp4 && spec.format != ElemFormat::e2m1)
    throw Error(std::string("NVFP4 two-level scaling is defined for e2m1 elements only, not ") +
                elem_format_name(spec.format) + ": use scale fp32 or e8m0 for other formats");
  if (spec.block_rows < 0 || spec.block_cols < 0)
    throw Error("quantization block shape must be >= 0 (0 = whole dimension)");
}

// (in, out) of a block with max magnitude amax (see the file comment).
struct Scale {
  float in = 1, out = 1;
};
Scale block_scale(const QuantSpec& spec, const ElemInfo& info, float amax, float nvfp4_g) {
  Scale s;
  switch (spec.scale) {
    case ScaleKind::none:
      break;
    case ScaleKind::fp32: {
      float v = amax / info.max;  // FP32 division; amax = 0 (or an underflowing amax) -> 1
      if (!(v > 0)) v = 1.0f;
      s.in = s.out = v;
      break;
    }
    case ScaleKind::e8m0: {
      const int e = e8m0_exponent(amax, spec.format, spec.e8m0_mode);
      s.in = std::ldexp(1.0f, -e);
      s.out = std::ldexp(1.0f, e);
      break;
    }
    case ScaleKind::nvfp4: {
      const Nvfp4BlockScale b = nvfp4_block_scale(amax, nvfp4_g);
      s.in = b.enc;
      s.out = b.dec;
      break;
    }
  }
  return s;
}

// Fast twins of the scalar scale rules (e8m0_exponent, nvfp4_block_scale) on FP32 bits, for
// the kernels that compute one scale per 16 or 32 elements; subnormal inputs (rare) take the
// scalar rule. Tests check them against the scalar rules through fake_quantize_ref.
inline int e8m0_exponent_fast(float amax, const QuantSpec& spec, const ElemInfo& info) {
  const uint32_t b = fbits(amax);
  if (b == 0) return 0;
  if (b < 0x00800000u) return e8m0_exponent(amax, spec.format, spec.e8m0_mode);
  const int exp = int(b >> 23) - 127;
  const bool frac = (b & 0x7FFFFFu) != 0;
  int e = 0;
  switch (spec.e8m0_mode) {
    case E8M0Mode::floor:
      e = exp - info.emax;
      break;
    case E8M0Mode::ceil:
      e = exp + (frac ? 1 : 0) - info.emax;
      break;
    case E8M0Mode::rceil: {
      const uint32_t vb = fbits(amax / info.max);
      if (vb < 0x00800000u) return e8m0_exponent(amax, spec.format, spec.e8m0_mode);
      e = int(vb >> 23) - 127 + ((vb & 0x7FFFFFu) != 0 ? 1 : 0);
      break;
    }
    case E8M0Mode::even: {  // RNE of the FP32 mantissa to mbits bits; a carry bumps the exponent
      const int sh = 23 - info.mbits;
      const uint32_t r = (b + (1u << (sh - 1)) - 1u + ((b >> sh) & 1u)) & ~((1u << sh) - 1u);
      e = int(r >> 23) - 127 - info.emax;
      break;
    }
  }
  return e8m0_clamp(e, info);
}

// 2^e for e in [-127, 127] (2^-127 is the one subnormal).
inline float pow2(int e) {
  return e >= -126 ? ffrom(uint32_t(127 + e) << 23) : std::ldexp(1.0f, e);
}

// NVFP4 per-tensor constants (FORMATS.md steps 1, 2 and the 1/g of step 4).
struct Nvfp4Tensor {
  float g = 1, mult = 1.0f / 6.0f, inv_g = 1;
};
Nvfp4Tensor nvfp4_tensor(float g) {
  return Nvfp4Tensor{g, g * (1.0f / 6.0f), 1.0f / g};
}

// E4M3 RNE of a non-negative finite a <= 448 by the FP32 add trick (see the file comment).
inline float e4m3_rne_fast(float a) {
  uint32_t eb = fbits(a) >> 23;
  eb = eb > 121u ? eb : 121u;                 // emin -6 → biased 121
  const float big = ffrom((eb + 20u) << 23);  // 2^(e + 23 - 3)
  return (a + big) - big;
}

Scale block_scale_fast(const QuantSpec& spec, const ElemInfo& info, float amax, const Nvfp4Tensor& nv) {
  Scale s;
  switch (spec.scale) {
    case ScaleKind::none:
      break;
    case ScaleKind::fp32: {
      float v = amax / info.max;
      if (!(v > 0)) v = 1.0f;
      s.in = s.out = v;
      break;
    }
    case ScaleKind::e8m0: {
      const int e = e8m0_exponent_fast(amax, spec, info);
      s.in = pow2(-e);
      s.out = pow2(e);
      break;
    }
    case ScaleKind::nvfp4: {
      float sb = amax * nv.mult;
      if (!(sb < 448.0f)) sb = 448.0f;
      s.out = e4m3_rne_fast(sb) * nv.inv_g;
      const float enc = 1.0f / s.out;
      s.in = enc > FLT_MAX ? FLT_MAX : enc;
      break;
    }
  }
  return s;
}

[[noreturn]] void throw_nonfinite(const float* x, int64_t rows, int64_t cols, const char* name) {
  const int64_t n = rows * cols;
  int64_t i = 0;
  while (i < n && std::isfinite(x[i])) ++i;
  SNIP_ASSERT(i < n);
  throw Error(std::string(name ? name : "tensor") + ": non-finite value " + std::to_string(x[i]) + " at element (" +
              std::to_string(i / cols) + ", " + std::to_string(i % cols) + ") of the " + std::to_string(rows) + "x" +
              std::to_string(cols) +
              " operand; it cannot be quantized (training diverged? lower the learning rate "
              "or check the input data)");
}

struct StatsAcc {
  double err_sq = 0, ref_sq = 0, max_abs = 0;
  int64_t sat = 0, zeros = 0;
  void add(const StatsAcc& o) {
    err_sq += o.err_sq;
    ref_sq += o.ref_sq;
    max_abs = std::max(max_abs, o.max_abs);
    sat += o.sat;
    zeros += o.zeros;
  }
};

// Slow-path finish of one segment for stats/codes: r holds the signed rounded values (scaled
// domain), so y = r·out is the same FP32 product the fast kernel computes. y may alias x, so every
// pass that reads x runs before y is written. The statistics are those of a single pass in
// element order, bit for bit: the two double sums (err², ref²) keep element order in their own
// loop; the maximum and the counts do not depend on order and run branch-free in another (this
// function was 18% of a statistics round's CPU as one loop with a division and branches per
// element).
void finish_segment(float* y, const float* r, const float* x, const float* in_s, const float* out_s, bool vec,
                    bool divide, int64_t n, const ElemInfo& info, ElemFormat fmt, StatsAcc* acc, uint8_t* codes) {
  const float in0 = in_s[0], out0 = out_s[0];
  if (acc) {
    double mx = acc->max_abs;
    int64_t sat = 0, zeros = 0;
    const float fmax = float(info.max);
    for (int64_t c = 0; c < n; ++c) {
      const float in = vec ? in_s[c] : in0;
      const float out = vec ? out_s[c] : out0;
      const float v = divide ? x[c] / in : x[c] * in;
      const double d = double(r[c] * out) - double(x[c]);
      const double ad = std::fabs(d);
      mx = ad > mx ? ad : mx;
      sat += std::fabs(v) > fmax ? 1 : 0;
      zeros += r[c] == 0 ? 1 : 0;
    }
    double err = acc->err_sq, ref = acc->ref_sq;
    for (int64_t c = 0; c < n; ++c) {
      const float out = vec ? out_s[c] : out0;
      const double xc = double(x[c]);
      const double d = double(r[c] * out) - xc;
      err += d * d;
      ref += xc * xc;
    }
    acc->err_sq = err, acc->ref_sq = ref, acc->max_abs = mx;
    acc->sat += sat, acc->zeros += zeros;
  }
  if (codes)
    for (int64_t c = 0; c < n; ++c) codes[c] = encode_elem(r[c], fmt);
  if (vec) {
    for (int64_t c = 0; c < n; ++c) y[c] = r[c] * out_s[c];
  } else {
    for (int64_t c = 0; c < n; ++c) y[c] = r[c] * out0;
  }
}

void fill_stats(QuantStats* stats, const StatsAcc& acc, int64_t n) {
  if (!stats) return;
  stats->err_sq = acc.err_sq;
  stats->ref_sq = acc.ref_sq;
  stats->max_abs_err = acc.max_abs;
  stats->saturated = acc.sat;
  stats->zeros = acc.zeros;
  stats->count = n;
}

void reject_codes_for(const QuantSpec& spec, const uint8_t* codes) {
  if (codes && (spec.format == ElemFormat::fp32 || spec.format == ElemFormat::bf16))
    throw Error(std::string("element codes are one byte per element; format ") + elem_format_name(spec.format) +
                " has none (use e4m3, e5m2, e3m2, e2m3 or e2m1)");
}

uint64_t rng_key64(const RngKey& key) {
  // k0/k1 of sr_bits: recovered from sr_bits itself would be circular, so repeat the mix.
  auto mix64 = [](uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  return mix64(key.seed ^ mix64(key.step ^ mix64((uint64_t(key.layer) << 32) | key.role)));
}

constexpr int64_t kGrainElems = kParallelGrain;  // elements per chunk at least (snip/parallel.h)

}  // namespace

namespace {

// Where the code sink of fake_quantize_impl writes: per element (row-major like x) either the
// E2M1 code 2q (int8, code2) or the BF16 bits of q (bf16), and each block's decode scale `out`
// at [block_row · nbc + block_col].
// With `rows` set, the codes go to that sink in batches of finished rows instead (code2 and
// bf16 then only say which codes: non-null for E2M1 or BF16).
struct Code2Sink {
  int8_t* code2 = nullptr;
  uint16_t* bf16 = nullptr;
  float* scales = nullptr;
  numerics_detail::RowCodeSink* rows = nullptr;
};

void fake_quantize_impl(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                        const char* tensor_name, QuantStats* stats, uint8_t* codes, const Code2Sink* sink);

}  // namespace

void fake_quantize(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                   const char* tensor_name, QuantStats* stats, uint8_t* codes) {
  fake_quantize_impl(y, x, rows, cols, spec, key, tensor_name, stats, codes, nullptr);
}

int64_t e2m1_scale_count(int64_t rows, int64_t cols, const QuantSpec& spec) {
  if (rows <= 0 || cols <= 0) return 0;
  const BlockGeometry g = geometry(spec, rows, cols);
  return g.nbr * g.nbc;
}

void quantize_e2m1_code2(int8_t* code2, float* scales, const float* x, int64_t rows, int64_t cols,
                         const QuantSpec& spec, const RngKey& key, const char* tensor_name) {
  SNIP_ASSERT_MSG(spec.format == ElemFormat::e2m1 && spec.scale != ScaleKind::none,
                  "quantize_e2m1_code2: the spec must be a scaled e2m1 spec");
  const Code2Sink sink{code2, nullptr, scales};
  // y is never written in sink mode; x stands in so the segment pointers stay valid arithmetic.
  fake_quantize_impl(const_cast<float*>(x), x, rows, cols, spec, key, tensor_name, nullptr, nullptr, &sink);
}

void quantize_bf16_codes(uint16_t* bits, float* scales, const float* x, int64_t rows, int64_t cols,
                         const QuantSpec& spec, const RngKey& key, const char* tensor_name) {
  SNIP_ASSERT_MSG(spec.format != ElemFormat::fp32 && spec.format != ElemFormat::bf16 && spec.scale != ScaleKind::none,
                  "quantize_bf16_codes: the spec must be a scaled FP8/FP6/FP4 spec");
  const Code2Sink sink{nullptr, bits, scales};
  fake_quantize_impl(const_cast<float*>(x), x, rows, cols, spec, key, tensor_name, nullptr, nullptr, &sink);
}

void numerics_detail::quantize_codes_into(RowCodeSink& sink, bool bf16, float* scales, const float* x, int64_t rows,
                                          int64_t cols, const QuantSpec& spec, const RngKey& key,
                                          const char* tensor_name) {
  const bool scaled =
      spec.format != ElemFormat::fp32 && spec.format != ElemFormat::bf16 && spec.scale != ScaleKind::none;
  SNIP_ASSERT_MSG(bf16 ? scaled || spec.format == ElemFormat::bf16 : scaled && spec.format == ElemFormat::e2m1,
                  "quantize_codes_into: the spec must be a scaled spec (e2m1 for E2M1 codes) or bf16 for BF16 codes");
  // Non-null markers only: with a row sink the codes go to the sink's batches.
  static int8_t code_marker;
  static uint16_t bf16_marker;
  const Code2Sink s{bf16 ? nullptr : &code_marker, bf16 ? &bf16_marker : nullptr, scales, &sink};
  fake_quantize_impl(const_cast<float*>(x), x, rows, cols, spec, key, tensor_name, nullptr, nullptr, &s);
}

namespace {

// One fake_quantize (or code-sink) call, in named stages. The fields are what every stage
// reads: the operands, the spec's constants, the chosen kernels and the per-chunk statistics.
class QuantizeCall {
 public:
  QuantizeCall(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
               const char* tensor_name, QuantStats* stats, uint8_t* codes, const Code2Sink* sink)
      : y_(y),
        x_(x),
        rows_(rows),
        cols_(cols),
        spec_(spec),
        key_(key),
        name_(tensor_name),
        stats_(stats),
        codes_(codes),
        sink_(sink),
        slow_(stats != nullptr || codes != nullptr),
        // The slow path (stats, codes) keeps one chunk per thread so its per-chunk sums add up
        // in the same order as before the pool.
        nchunks_(slow_ ? quant_threads() : detail::chunks_for_threads(quant_threads())),
        accs_(size_t(nchunks_) + 1) {}

  void run() {
    const int64_t n = rows_ * cols_;
    if (stats_) {
      *stats_ = QuantStats{};
      stats_->count = n;
    }
    if (n == 0) return;
    if (spec_.format == ElemFormat::fp32) {
      copy_fp32();
    } else if (spec_.format == ElemFormat::bf16) {
      round_bf16();
    } else {
      prepare_scaled();
      if (geo_.br == 1 && geo_.bc > 1)
        quantize_row_tiles();
      else if (geo_.nbr >= 2)
        quantize_bands();
      else
        quantize_one_band();
    }
    StatsAcc all;
    for (auto& a : accs_) all.add(a);
    fill_stats(stats_, all, n);
  }

 private:
  // FP32: the identity, after the finiteness check (and ‖x‖² for the statistics).
  void copy_fp32() {
    const int64_t n = rows_ * cols_;
    detail::parallel_chunks(nchunks_, n, kGrainElems, [&](int t, int64_t b, int64_t e) {
      if (detail::amax_bits(x_ + b, e - b) >= kInfBits) bad_ = true;
      if (stats_)
        for (int64_t i = b; i < e; ++i) accs_[t].ref_sq += double(x_[i]) * double(x_[i]);
      if (y_ != x_) std::memcpy(y_ + b, x_ + b, size_t(e - b) * sizeof(float));
    });
    throw_if_bad();
  }

  // BF16: round to nearest even, unscaled.
  void round_bf16() {
    if (sink_ && sink_->rows) {
      round_bf16_into_sink();
      return;
    }
    const int64_t n = rows_ * cols_;
    const ElemInfo& info = elem_info(spec_.format);
    if (!slow_) {
      detail::parallel_chunks(nchunks_, n, kGrainElems, [&](int, int64_t b, int64_t e) {
        if (detail::bf16_row(y_ + b, x_ + b, e - b) >= kInfBits) bad_ = true;
      });
    } else {
      detail::parallel_chunks(nchunks_, n, kGrainElems, [&](int t, int64_t b, int64_t e) {
        std::vector<float> r(size_t(e - b));
        if (detail::bf16_row(r.data(), x_ + b, e - b) >= kInfBits) {
          bad_ = true;
          return;
        }
        const float one = 1.0f;
        finish_segment(y_ + b, r.data(), x_ + b, &one, &one, false, false, e - b, info, spec_.format, &accs_[t],
                       nullptr);
      });
    }
    throw_if_bad();
  }

  // BF16 bits of whole rows into the row sink's batches.
  void round_bf16_into_sink() {
    detail::parallel_chunks(nchunks_, rows_, std::max<int64_t>(1, kGrainElems / cols_),
                            [&](int, int64_t rb, int64_t re) {
                              Scratch scr;
                              for (int64_t r = rb; r < re; ++r) {
                                uint16_t* to = static_cast<uint16_t*>(batch_at(scr, r, 0));
                                if (detail::bf16_bits_row(to, x_ + r * cols_, cols_) >= kInfBits) {
                                  bad_ = true;
                                  return;
                                }
                              }
                              flush(scr);
                            });
    throw_if_bad();
  }

  // Block-scaled formats: block geometry, kernel choice, the RNG key, the NVFP4 tensor factor.
  void prepare_scaled() {
    info_ = &elem_info(spec_.format);
    geo_ = geometry(spec_, rows_, cols_);
    const uint64_t k = rng_key64(key_);
    params_ = RowParams{info_->mbits, uint32_t(info_->emin + 127), info_->max, uint32_t(k), uint32_t(k >> 32)};
    divide_ = spec_.scale == ScaleKind::fp32;
    // Column tiles: one scale per column within a band. (Expanding 1×16 / 1×32 tile scales to
    // columns for one call per row was measured 1.3-1.6× slower than one call per tile.)
    vec_ = geo_.bc == 1 && geo_.nbc > 1;
    if (detail::use_avx512_quant_kernels()) {  // same bits, 16 lanes by hand (quant_avx512.cpp)
      kernel_ = detail::avx512_row_kernel(divide_, vec_, spec_.rounding);
      code_kernel_ = detail::avx512_code_kernel(divide_, vec_, spec_.rounding);
      bf16_code_kernel_ = detail::avx512_bf16_code_kernel(divide_, vec_, spec_.rounding);
      if (geo_.bc > 1 && geo_.bc % 16 == 0) {  // whole rows of tiles (or block rows) per call
        tile_amax_ = detail::avx512_tile_amax_kernel();
        tile_row_ = detail::avx512_tile_row_kernel(divide_, spec_.rounding);
        tile_code_ = detail::avx512_tile_code_kernel(divide_, spec_.rounding);
        tile_bf16_ = detail::avx512_tile_bf16_kernel(divide_, spec_.rounding);
      }
      strip_amax_ = detail::avx512_strip_amax_kernel();
    } else {
      kernel_ = detail::pick_row_kernel(divide_, vec_, spec_.rounding);
      code_kernel_ = detail::pick_code_kernel(divide_, vec_, spec_.rounding);
      bf16_code_kernel_ = detail::pick_bf16_code_kernel(divide_, vec_, spec_.rounding);
    }
    row_grain_ = std::max<int64_t>(1, kGrainElems / cols_);
    if (sink_ && sink_->rows && sink_->code2) {
      int offset = 0;
      direct_ = sink_->rows->direct_rows(direct_ld_, offset);
      if (direct_) params_.code_offset = offset;
    }
    if (spec_.scale == ScaleKind::nvfp4) nv_ = nvfp4_tensor(nvfp4_tensor_factor(ffrom(tensor_amax_bits())));
  }

  // max |x| over the whole tensor as FP32 bits; throws for non-finite input.
  uint32_t tensor_amax_bits() {
    std::vector<uint32_t> part(size_t(nchunks_), 0);
    detail::parallel_chunks(nchunks_, rows_ * cols_, kGrainElems,
                            [&](int t, int64_t b, int64_t e) { part[t] = detail::amax_bits(x_ + b, e - b); });
    const uint32_t m = *std::max_element(part.begin(), part.end());
    if (m >= kInfBits) throw_nonfinite(x_, rows_, cols_, name_);
    return m;
  }

  // One worker's scratch: the slow path's buffers and, with a row sink, the batch of finished
  // rows [b_r0, b_r0 + b_n) not yet handed over (each worker's rows come in increasing order).
  // The batch lives in a thread-local buffer (a worker flushes before its thread runs another).
  struct Scratch {
    std::vector<float> rbuf, ones;
    uint8_t* batch = nullptr;
    int64_t b_r0 = 0, b_n = 0, b_cap = 0;
  };

  // Where the codes of (r, c0) go in the worker's batch; a new row past a full batch flushes it.
  // At most 64 rows (the packers' transposes work on 64 × 64 tiles) and about 128 KiB.
  void* batch_at(Scratch& sc, int64_t r, int64_t c0) {
    const int64_t esz = sink_->code2 ? 1 : 2;
    if (sc.b_cap == 0) {
      thread_local std::vector<uint8_t> buf;
      sc.b_cap = std::clamp<int64_t>((int64_t(1) << 17) / (cols_ * esz), 4, 64);
      if (int64_t(buf.size()) < sc.b_cap * cols_ * esz) buf.resize(size_t(sc.b_cap * cols_ * esz));
      sc.batch = buf.data();
    }
    if (sc.b_n == 0 || r >= sc.b_r0 + sc.b_n) {
      if (sc.b_n == sc.b_cap) flush(sc);
      if (sc.b_n == 0) sc.b_r0 = r;
      SNIP_ASSERT(r == sc.b_r0 + sc.b_n);
      ++sc.b_n;
    }
    return sc.batch + ((r - sc.b_r0) * cols_ + c0) * esz;
  }

  // Where the codes of (r, c0) go: straight to the sink's rows when it takes them so
  // (RowCodeSink::direct_rows), else the worker's batch.
  void* row_dest(Scratch& sc, int64_t r, int64_t c0) {
    if (direct_) return direct_ + r * direct_ld_ + c0;
    return batch_at(sc, r, c0);
  }

  void flush(Scratch& sc) {
    if (!sink_ || !sink_->rows || sc.b_n == 0) return;
    sink_->rows->place(sc.b_r0, sc.b_r0 + sc.b_n, sc.batch, cols_);
    sc.b_n = 0;
  }

  // One segment of one row with its scales (in_s/out_s: one per column when vseg, else one):
  // into the code sink, through the fast kernel, or through the slow finish (stats, codes).
  void segment(int t, int64_t i0, const float* in_s, const float* out_s, bool vseg, int64_t len, Scratch& sc) {
    const float* xseg = x_ + i0;
    float* yseg = y_ + i0;
    if (sink_) {  // codes of the same signed rounded values r the dequantizing paths scale
      void* to = sink_->rows ? row_dest(sc, i0 / cols_, i0 % cols_) : nullptr;
      if (sink_->code2)
        code_kernel_(to ? static_cast<int8_t*>(to) : sink_->code2 + i0, xseg, in_s, len, params_, uint64_t(i0));
      else
        bf16_code_kernel_(to ? static_cast<uint16_t*>(to) : sink_->bf16 + i0, xseg, in_s, len, params_, uint64_t(i0));
      return;
    }
    std::vector<float>& rbuf = sc.rbuf;
    std::vector<float>& ones = sc.ones;
    if (!slow_) {
      kernel_(yseg, xseg, in_s, out_s, len, params_, uint64_t(i0));
      return;
    }
    if (int64_t(rbuf.size()) < len) rbuf.resize(size_t(len));
    if (int64_t(ones.size()) < len) ones.assign(size_t(len), 1.0f);
    kernel_(rbuf.data(), xseg, in_s, ones.data(), len, params_, uint64_t(i0));
    finish_segment(yseg, rbuf.data(), xseg, in_s, out_s, vseg, divide_, len, *info_, spec_.format,
                   stats_ ? &accs_[t] : nullptr, codes_ ? codes_ + i0 : nullptr);
  }

  // Row r of a band whose block scales (one per block column) are in_b/out_b.
  void band_row(int t, int64_t r, const float* in_b, const float* out_b, Scratch& sc) {
    if (vec_) {
      segment(t, r * cols_, in_b, out_b, true, cols_, sc);
      return;
    }
    if (tile_amax_ && !slow_) {
      tile_row(r, in_b, out_b, sc);
      return;
    }
    for (int64_t g = 0; g < geo_.nbc; ++g) {
      const int64_t c0 = g * geo_.bc, len = std::min(geo_.bc, cols_ - c0);
      segment(t, r * cols_ + c0, in_b + g, out_b + g, false, len, sc);
    }
  }

  // 1×bc tiles along rows: amax, scale and rounding fused per tile while it is in L1.
  void quantize_row_tiles() {
    if (tile_amax_ && !slow_) {
      quantize_tile_rows();
      return;
    }
    detail::parallel_chunks(nchunks_, rows_, row_grain_, [&](int t, int64_t rb, int64_t re) {
      Scratch scr;
      for (int64_t r = rb; r < re; ++r) {
        for (int64_t g = 0; g < geo_.nbc; ++g) {
          const int64_t c0 = g * geo_.bc, len = std::min(geo_.bc, cols_ - c0);
          const uint32_t am = detail::amax_bits(x_ + r * cols_ + c0, len);
          if (am >= kInfBits) {
            bad_ = true;
            return;
          }
          const Scale s = block_scale_fast(spec_, *info_, ffrom(am), nv_);
          if (sink_) sink_->scales[r * geo_.nbc + g] = s.out;
          segment(t, r * cols_ + c0, &s.in, &s.out, false, len, scr);
        }
      }
      flush(scr);
    });
    throw_if_bad();
  }

  // The same, a row at a time: every tile's amax, then every tile's scales, then one rounding
  // call over the row (the row is still in L1).
  void quantize_tile_rows() {
    detail::parallel_chunks(nchunks_, rows_, row_grain_, [&](int, int64_t rb, int64_t re) {
      Scratch scr;
      std::vector<uint32_t> amax(size_t(geo_.nbc));
      std::vector<float> s_in(size_t(geo_.nbc)), s_out(size_t(geo_.nbc));
      for (int64_t r = rb; r < re; ++r) {
        tile_amax_(amax.data(), x_ + r * cols_, cols_, geo_.bc);
        for (int64_t g = 0; g < geo_.nbc; ++g) {
          if (amax[size_t(g)] >= kInfBits) {
            bad_ = true;
            return;
          }
          const Scale s = block_scale_fast(spec_, *info_, ffrom(amax[size_t(g)]), nv_);
          s_in[size_t(g)] = s.in;
          s_out[size_t(g)] = s.out;
        }
        if (sink_) std::copy(s_out.begin(), s_out.end(), sink_->scales + r * geo_.nbc);
        tile_row(r, s_in.data(), s_out.data(), scr);
      }
      flush(scr);
    });
    throw_if_bad();
  }

  // Row r through the tile kernels, block column g with scales in_t[g], out_t[g].
  void tile_row(int64_t r, const float* in_t, const float* out_t, Scratch& sc) {
    const float* xr = x_ + r * cols_;
    const uint64_t i0 = uint64_t(r * cols_);
    if (!sink_) {
      tile_row_(y_ + r * cols_, xr, in_t, out_t, cols_, geo_.bc, params_, i0);
      return;
    }
    void* to = sink_->rows ? row_dest(sc, r, 0) : nullptr;
    if (sink_->code2)
      tile_code_(to ? static_cast<int8_t*>(to) : sink_->code2 + i0, xr, in_t, cols_, geo_.bc, params_, i0);
    else
      tile_bf16_(to ? static_cast<uint16_t*>(to) : sink_->bf16 + i0, xr, in_t, cols_, geo_.bc, params_, i0);
  }

  // Bands of br rows (br×bc blocks, br×1 column tiles): per band, its column maxima and scales
  // (band_scales, one read in row order), then the rounding pass row by row while the band is
  // still in L2/L3 (one DRAM read). With a sink that takes the band whole (whole_band_blocks),
  // the band's codes go to a local buffer and then to the sink in one place_block call. Row
  // order is what makes that faster than strips of whole blocks (quantize_band_strips, kept for
  // SR): a pure read of a 2048 × 2048 FP32 matrix from DRAM in strips of 128 rows × 128 (or
  // 1024) columns takes 1.8–2.2× as long as in row order, and prefetching the next strip makes
  // it slower still (bench/numerics/RESULTS.md, quant/read_order). The same kernels on the same
  // elements with the same scales and element indices in every path, so the same codes.
  void quantize_bands() {
    const bool whole = whole_band_blocks();
    if (const int64_t w = whole ? 0 : strip_width(); w > 0) {
      quantize_band_strips(w);
      return;
    }
    const int64_t band_grain = std::max<int64_t>(1, kGrainElems / (geo_.br * cols_));
    detail::parallel_chunks(nchunks_, geo_.nbr, band_grain, [&](int t, int64_t bb, int64_t be) {
      Scratch scr;
      int8_t* codes = nullptr;  // whole: the band's codes, from a cache-line boundary
      if (whole) {
        thread_local std::vector<int8_t> buf;
        if (int64_t(buf.size()) < geo_.br * cols_ + 64) buf.resize(size_t(geo_.br * cols_ + 64));
        codes = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
      }
      std::vector<uint32_t> colmax(static_cast<size_t>(cols_));
      std::vector<float> s_in(static_cast<size_t>(geo_.nbc)), s_out(static_cast<size_t>(geo_.nbc));
      for (int64_t band = bb; band < be; ++band) {
        const int64_t r0 = band * geo_.br, r1 = std::min(rows_, r0 + geo_.br);
        if (!band_scales(band, r0, r1, colmax.data(), s_in.data(), s_out.data())) {
          bad_ = true;
          return;
        }
        if (!whole) {
          for (int64_t r = r0; r < r1; ++r) band_row(t, r, s_in.data(), s_out.data(), scr);
          continue;
        }
        for (int64_t r = r0; r < r1; ++r) band_codes(codes + (r - r0) * cols_, r, 0, cols_, s_in.data());
        sink_->rows->place_block(r0, r1, 0, cols_, codes, cols_);
      }
      flush(scr);
    });
    throw_if_bad();
  }

  // One band's column maxima (in row order: one sequential read), then its block scales: s_in
  // for the rounding and s_out (one per block column), the decode scales also to the sink.
  // False when the band holds a non-finite value. colmax: scratch of cols_ entries.
  bool band_scales(int64_t band, int64_t r0, int64_t r1, uint32_t* colmax, float* s_in, float* s_out) {
    std::fill(colmax, colmax + cols_, 0u);
    for (int64_t r = r0; r < r1; ++r) detail::colmax_update(colmax, x_ + r * cols_, cols_);
    for (int64_t g = 0; g < geo_.nbc; ++g) {
      const int64_t c0 = g * geo_.bc, c1 = std::min(cols_, c0 + geo_.bc);
      uint32_t m = 0;
      for (int64_t c = c0; c < c1; ++c) m = std::max(m, colmax[c]);
      if (m >= kInfBits) return false;
      const Scale sc = block_scale_fast(spec_, *info_, ffrom(m), nv_);
      s_in[g] = sc.in;
      s_out[g] = sc.out;
      if (sink_) sink_->scales[band * geo_.nbc + g] = sc.out;
    }
    return true;
  }

  // Whether the AVX-512 code kernels hand each band to the sink whole (one place_block per band,
  // the strip as wide as the matrix) rather than in strips: E2M1 codes into a sink that takes
  // blocks, column tiles or blocks of a multiple of 16 columns, a band's codes within 1 MiB, and
  // rounding other than SR. (SR's hash makes its rounding compute-bound: the strips' DRAM reads,
  // prefetched a strip ahead, hide behind it and each strip's codes are placed from L1; whole
  // bands were 0–10 % slower there. RNE is light and waits on DRAM, where row order pays.)
  bool whole_band_blocks() const {
    return band_blocks_possible() && spec_.rounding != Rounding::stochastic && geo_.br * cols_ <= (int64_t(1) << 20) &&
           sink_->rows->takes_blocks(cols_);
  }

  // What every hand-over of bands in blocks (RowCodeSink::place_block) needs: E2M1 codes into a
  // row sink, the AVX-512 kernels, and column tiles or blocks of a multiple of 16 columns.
  bool band_blocks_possible() const {
    return sink_ && sink_->rows && sink_->code2 && !slow_ && !direct_ && strip_amax_ && (vec_ || tile_code_);
  }

  // Codes of source row r, columns [c0, c0 + len), at `to`: column tiles with per-column scales
  // s_in, or blocks with one scale per block (s_in: the scales from column c0's on).
  void band_codes(int8_t* to, int64_t r, int64_t c0, int64_t len, const float* s_in) {
    const int64_t i0 = r * cols_ + c0;
    if (vec_)
      code_kernel_(to, x_ + i0, s_in, len, params_, uint64_t(i0));
    else
      tile_code_(to, x_ + i0, s_in, len, geo_.bc, params_, uint64_t(i0));
  }

  // The strip width (source columns) when the bands go to the sink a strip of whole blocks at a
  // time (RowCodeSink::place_block), else 0: E2M1 codes into a sink that takes blocks, the
  // AVX-512 kernels, and blocks of bc >= 16 columns (a multiple of 16) or column tiles: 128
  // columns of column tiles (fewer rounding calls per element than 64, each with its per-call
  // constants), 64 columns of blocks if bc divides 64, else one block. The strip's codes must
  // fit a local buffer (16 KiB for 128 × 128 blocks).
  int64_t strip_width() const {
    if (!band_blocks_possible()) return 0;
    const int64_t w = vec_ ? 128 : geo_.bc >= 64 || 64 % geo_.bc != 0 ? geo_.bc : 64;
    if (geo_.br * w > (int64_t(1) << 20) || !sink_->rows->takes_blocks(w)) return 0;
    return w;
  }

  // Bands as strips of whole blocks: per strip, its block (or column) maxima, scales and codes
  // while the strip is in L1/L2, then the strip to the sink, which places it (and, for B, sums
  // it) from L1. The same kernels on the same elements with the same scales and element indices
  // as band_row, so the same codes; the next strip is prefetched while this one is rounded.
  void quantize_band_strips(int64_t w) {
    const int64_t band_grain = std::max<int64_t>(1, kGrainElems / (geo_.br * cols_));
    const int64_t nstrips = (cols_ + w - 1) / w;
    detail::parallel_chunks(nchunks_, geo_.nbr, band_grain, [&](int, int64_t bb, int64_t be) {
      thread_local std::vector<int8_t> buf;  // the strip's codes, from a cache-line boundary
      if (int64_t(buf.size()) < geo_.br * w + 64) buf.resize(size_t(geo_.br * w + 64));
      int8_t* const tile = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
      std::vector<float> s_in(static_cast<size_t>(w));
      for (int64_t band = bb; band < be; ++band) {
        const int64_t r0 = band * geo_.br, r1 = std::min(rows_, r0 + geo_.br);
        for (int64_t st = 0; st < nstrips; ++st) {
          const int64_t c0 = st * w, cw = std::min(w, cols_ - c0);
          if (!strip_scales(band, r0, r1, c0, cw, s_in.data())) {
            bad_ = true;
            return;
          }
          // The strip after this one, or the next band's first (rows past be are another
          // chunk's: not prefetched).
          const bool last = st + 1 == nstrips;
          const int64_t pr0 = last ? r1 : r0, pc0 = last ? 0 : c0 + w;
          const int64_t pr1 = last ? (band + 1 < be ? std::min(rows_, r1 + geo_.br) : r1) : r1;
          for (int64_t r = r0; r < r1; ++r) {
            band_codes(tile + (r - r0) * w, r, c0, cw, s_in.data());
            // (the tile kernels prefetch x + cw themselves)
            if (vec_ && pr0 + (r - r0) < pr1)
              prefetch_lines(x_ + (pr0 + r - r0) * cols_ + pc0, std::min(w, cols_ - pc0));
          }
          sink_->rows->place_block(r0, r1, c0, c0 + cw, tile, w);
        }
      }
    });
    throw_if_bad();
  }

  // One strip's maxima and scales: s_in for the rounding (one per column tile or block of the
  // strip), the decode scales to the sink. False when the strip holds a non-finite value.
  bool strip_scales(int64_t band, int64_t r0, int64_t r1, int64_t c0, int64_t cw, float* s_in) {
    uint32_t amax[128];  // a strip is at most 128 column tiles, or blocks of >= 16 columns
    const int64_t nb = vec_ ? cw : (cw + geo_.bc - 1) / geo_.bc, b0 = vec_ ? c0 : c0 / geo_.bc;
    SNIP_ASSERT(nb <= 128);
    strip_amax_(amax, x_ + r0 * cols_ + c0, cols_, r1 - r0, cw, vec_ ? 1 : geo_.bc);
    for (int64_t j = 0; j < nb; ++j) {
      if (amax[j] >= kInfBits) return false;
      const Scale sc = block_scale_fast(spec_, *info_, ffrom(amax[j]), nv_);
      s_in[j] = sc.in;
      sink_->scales[band * geo_.nbc + b0 + j] = sc.out;
    }
    return true;
  }

  // Every cache line of x[0, n) (x need not start on a line).
  static void prefetch_lines(const float* x, int64_t n) {
    const uintptr_t end = reinterpret_cast<uintptr_t>(x + n);
    for (uintptr_t a = reinterpret_cast<uintptr_t>(x) & ~uintptr_t(63); a < end; a += 64)
      __builtin_prefetch(reinterpret_cast<const void*>(a));
  }

  // Per-block amax over one band (per tensor, or blocks taller than the matrix) from
  // per-thread partial column maxima.
  std::vector<uint32_t> one_band_block_amax() {
    const int64_t nblocks = geo_.nbr * geo_.nbc;
    std::vector<std::vector<uint32_t>> parts(static_cast<size_t>(nchunks_));
    detail::parallel_chunks(nchunks_, rows_, row_grain_, [&](int t, int64_t rb, int64_t re) {
      std::vector<uint32_t>& part = parts[t];
      part.assign(size_t(nblocks), 0);
      std::vector<uint32_t> colmax(size_t(cols_), 0);
      int64_t band = rb / geo_.br;
      auto flush = [&] {
        for (int64_t g = 0; g < geo_.nbc; ++g) {
          const int64_t c0 = g * geo_.bc, c1 = std::min(cols_, c0 + geo_.bc);
          uint32_t m = part[band * geo_.nbc + g];
          for (int64_t c = c0; c < c1; ++c) m = std::max(m, colmax[c]);
          part[band * geo_.nbc + g] = m;
        }
        std::fill(colmax.begin(), colmax.end(), 0u);
      };
      for (int64_t r = rb; r < re; ++r) {
        if (r / geo_.br != band) {
          flush();
          band = r / geo_.br;
        }
        detail::colmax_update(colmax.data(), x_ + r * cols_, cols_);
      }
      flush();
    });
    std::vector<uint32_t> block_amax(static_cast<size_t>(nblocks), 0u);
    for (auto& part : parts)
      for (size_t i = 0; i < part.size(); ++i) block_amax[i] = std::max(block_amax[i], part[i]);
    return block_amax;
  }

  // One band: (A) per-block amax, (B) one scale per block, (C) quantize row by row.
  void quantize_one_band() {
    const std::vector<uint32_t> block_amax = one_band_block_amax();
    for (uint32_t m : block_amax)
      if (m >= kInfBits) throw_nonfinite(x_, rows_, cols_, name_);
    const size_t nblocks = block_amax.size();
    std::vector<float> s_in(nblocks), s_out(nblocks);
    for (size_t i = 0; i < nblocks; ++i) {
      const Scale s = block_scale_fast(spec_, *info_, ffrom(block_amax[i]), nv_);
      s_in[i] = s.in;
      s_out[i] = s.out;
      if (sink_) sink_->scales[i] = s.out;
    }
    detail::parallel_chunks(nchunks_, rows_, row_grain_, [&](int t, int64_t rb, int64_t re) {
      Scratch scr;
      for (int64_t r = rb; r < re; ++r) {
        const int64_t band = r / geo_.br;
        band_row(t, r, s_in.data() + band * geo_.nbc, s_out.data() + band * geo_.nbc, scr);
      }
      flush(scr);
    });
  }

  void throw_if_bad() {
    if (bad_) throw_nonfinite(x_, rows_, cols_, name_);
  }

  float* const y_;
  const float* const x_;
  const int64_t rows_, cols_;
  const QuantSpec& spec_;
  const RngKey& key_;
  const char* const name_;
  QuantStats* const stats_;
  uint8_t* const codes_;
  const Code2Sink* const sink_;
  const bool slow_;
  const int nchunks_;
  std::vector<StatsAcc> accs_;
  std::atomic<bool> bad_{false};
  // Block-scaled formats (prepare_scaled).
  const ElemInfo* info_ = nullptr;
  BlockGeometry geo_{};
  RowParams params_{};
  bool divide_ = false, vec_ = false;
  detail::RowKernel kernel_ = nullptr;
  detail::CodeKernel code_kernel_ = nullptr;
  detail::Bf16CodeKernel bf16_code_kernel_ = nullptr;
  uint8_t* direct_ = nullptr;  // set: the codes go straight to the sink's rows (row_dest)
  int64_t direct_ld_ = 0;
  detail::TileAmaxKernel tile_amax_ = nullptr;  // set: whole rows of 1×bc tiles per call
  detail::TileRowKernel tile_row_ = nullptr;
  detail::TileCodeKernel tile_code_ = nullptr;
  detail::TileBf16Kernel tile_bf16_ = nullptr;
  detail::StripAmaxKernel strip_amax_ = nullptr;  // set: bands may go to the sink in strips
  int64_t row_grain_ = 1;
  Nvfp4Tensor nv_;
};

void fake_quantize_impl(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                        const char* tensor_name, QuantStats* stats, uint8_t* codes, const Code2Sink* sink) {
  SNIP_ASSERT(rows >= 0 && cols >= 0);
  check_spec(spec);
  reject_codes_for(spec, codes);
  QuantizeCall(y, x, rows, cols, spec, key, tensor_name, stats, codes, sink).run();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The scalar twin: block by block, element by element, no shortcuts.
void fake_quantize_ref(float* y, const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                       const char* tensor_name, QuantStats* stats, uint8_t* codes) {
  SNIP_ASSERT(rows >= 0 && cols >= 0);
  check_spec(spec);
  reject_codes_for(spec, codes);
  const int64_t n = rows * cols;
  if (stats) *stats = QuantStats{};
  if (stats) stats->count = n;
  if (n == 0) return;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) throw_nonfinite(x, rows, cols, tensor_name);
  StatsAcc acc;
  auto record = [&](float xv, float yv, bool sat, bool zero) {
    const double d = double(yv) - double(xv);
    acc.err_sq += d * d;
    acc.ref_sq += double(xv) * double(xv);
    acc.max_abs = std::max(acc.max_abs, std::fabs(d));
    acc.sat += sat;
    acc.zeros += zero;
  };
  if (spec.format == ElemFormat::fp32) {
    for (int64_t i = 0; i < n; ++i) {
      const float xv = x[i];
      y[i] = xv;
      record(xv, xv, false, false);
    }
    fill_stats(stats, acc, n);
    return;
  }
  const ElemInfo& info = elem_info(spec.format);
  if (spec.format == ElemFormat::bf16) {
    for (int64_t i = 0; i < n; ++i) {
      const float xv = x[i];
      const float yv = bf16_round(xv);
      y[i] = yv;
      record(xv, yv, std::fabs(xv) > info.max, yv == 0);
    }
    fill_stats(stats, acc, n);
    return;
  }
  const BlockGeometry geo = geometry(spec, rows, cols);
  float g = 1.0f;
  if (spec.scale == ScaleKind::nvfp4) {
    float amax_t = 0;
    for (int64_t i = 0; i < n; ++i) amax_t = std::max(amax_t, std::fabs(x[i]));
    g = nvfp4_tensor_factor(amax_t);
  }
  const bool divide = spec.scale == ScaleKind::fp32;
  for (int64_t bi = 0; bi < geo.nbr; ++bi) {
    for (int64_t bj = 0; bj < geo.nbc; ++bj) {
      const int64_t r0 = bi * geo.br, r1 = std::min(rows, r0 + geo.br);
      const int64_t c0 = bj * geo.bc, c1 = std::min(cols, c0 + geo.bc);
      float amax = 0;
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t c = c0; c < c1; ++c) amax = std::max(amax, std::fabs(x[r * cols + c]));
      const Scale s = block_scale(spec, info, amax, g);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t c = c0; c < c1; ++c) {
          const int64_t i = r * cols + c;
          const float xv = x[i];
          const float v = divide ? xv / s.in : xv * s.in;
          const uint32_t rb = spec.rounding == Rounding::stochastic ? sr_bits(key, uint64_t(i)) : 0u;
          const float q = round_elem_ref(v, spec.format, spec.rounding, rb);
          const float yv = q * s.out;
          if (codes) codes[i] = encode_elem(q, spec.format);
          record(xv, yv, std::fabs(v) > info.max, q == 0);
          y[i] = yv;
        }
      }
    }
  }
  fill_stats(stats, acc, n);
}

}  // namespace snip
