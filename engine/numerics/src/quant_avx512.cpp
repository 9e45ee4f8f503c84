// Hand-vectorized AVX-512 element rounding for the quantizer (16 lanes per step): the kernels of
// quant_kernels.h, element for element the portable row_body of quantizer.cpp:
//   v = x ⊘ in (vdivps: FORMATS.md requires the FP32 division for FP32 scales; a multiply by
//   the reciprocal differs in the last bit and SR reads every bit), a = min(|v|, max),
//   e = max(exponent(a), emin), then RNE by the FP32 add trick at 2^(e+23-m), or SR / ties-away
//   on t = a·2^(m-e) with floor (vrndscaleps, the portable trunc for t >= 0), the murmur3 hash
//   of the element index in 16 lanes, and the code: 2·(±r) (r's power-of-two step doubled:
//   the same product) narrowed to bytes (vpmovdb), or the top 16 bits (vpmovdw) for BF16.
//   The element index is one running vector; its high word is per row unless the low word
//   crosses 2^32 within the row (the kWrap loop).
// `vminps` returns its second operand when the first is NaN, as the portable `a < max ? a : max`
// does, and every other operation is the same IEEE operation, so NaN, Inf and subnormal inputs
// give the portable kernels' bits too (the quantizer itself rejects non-finite operands first).
// Tails use masked loads and stores; the masked-off lanes compute on zeros and are discarded.
// The E2M1 codes under RNE take a shorter way to the same bits on CPUs with AVX512-VBMI: a
// 128-entry table lookup on |v|'s FP32 bits (row_e2m1_lut).
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "quant_kernels.h"
#include "snip/isa.h"
#include "snip/qgemm.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SNIP_QUANT_AVX512 1
#endif

namespace snip::detail {

#if defined(SNIP_QUANT_AVX512)

#define SNIP_AVX512 __attribute__((target("avx512f")))

// (GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized and
// -Wuninitialized report once inlined; the value is never read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace {

// murmur3's 32-bit finalizer in 16 lanes.
SNIP_AVX512 inline __attribute__((always_inline)) __m512i fmix32_x16(__m512i h) {
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0x85EBCA6Bu)));
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0xC2B2AE35u)));
  return _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
}

// The same of lo ^ k0, given k0x = k0 ^ (k0 >> 16): the first step
// h ^ (h >> 16) of h = lo ^ k0 is lo ^ (lo >> 16) ^ k0x (a shift distributes over xor).
SNIP_AVX512 inline __attribute__((always_inline)) __m512i fmix32_x16_keyed(__m512i lo, __m512i k0x) {
  __m512i h = _mm512_ternarylogic_epi32(lo, _mm512_srli_epi32(lo, 16), k0x, 0x96);  // a ^ b ^ c
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0x85EBCA6Bu)));
  h = _mm512_xor_si512(h, _mm512_srli_epi32(h, 13));
  h = _mm512_mullo_epi32(h, _mm512_set1_epi32(int(0xC2B2AE35u)));
  return _mm512_xor_si512(h, _mm512_srli_epi32(h, 16));
}

// The per-row constants of the rounding, broadcast once.
struct Consts {
  __m512i emin_b, q_off, inv_off, lo0, k0x, hk_same, hk_wrap, code_offset;
  __m512 maxv, in0, out0;
};

// 16 elements from lane values xv (and per-lane scales when kVecScale): the signed rounded
// values ±r as FP32 bits (sign in bit 31), or ±2r when kTimes2 (the E2M1 code 2q). lo: the low
// 32 bits of each lane's element index (SR); kWrap: some lane's index crossed 2^32 within
// the row (its high word is one more: hk_wrap).
template <bool kDivide, Rounding kRound, bool kTimes2, bool kWrap>
SNIP_AVX512 inline __attribute__((always_inline)) __m512i round16(__m512 xv, __m512 in, const Consts& k, __m512i lo) {
  const __m512 v = kDivide ? _mm512_div_ps(xv, in) : _mm512_mul_ps(xv, in);
  const __m512i vb = _mm512_castps_si512(v);
  const __m512i sign = _mm512_and_si512(vb, _mm512_set1_epi32(int(0x80000000u)));
  __m512 a = _mm512_castsi512_ps(_mm512_and_si512(vb, _mm512_set1_epi32(0x7FFFFFFF)));
  a = _mm512_min_ps(a, k.maxv);  // a < max ? a : max (NaN → max)
  const __m512i eb = _mm512_max_epu32(_mm512_srli_epi32(_mm512_castps_si512(a), 23), k.emin_b);
  __m512 r;
  if constexpr (kRound == Rounding::rne) {
    const __m512 big = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(eb, k.q_off), 23));
    r = _mm512_sub_ps(_mm512_add_ps(a, big), big);
    if constexpr (kTimes2) r = _mm512_add_ps(r, r);
  } else {
    // q = 2^(e-m) (2q when kTimes2: q_off is 1 less), 1/q, t = a/q, floor and fraction.
    const __m512 q = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(eb, k.q_off), 23));
    const __m512 inv_q = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_sub_epi32(k.inv_off, eb), 23));
    const __m512 t = _mm512_mul_ps(a, inv_q);
    // floor(t): t is in [0, 2^(m+1)], so this is the portable kernel's float(int(t)).
    const __m512 fl = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    const __m512 frac = _mm512_sub_ps(t, fl);
    __mmask16 up;
    if constexpr (kRound == Rounding::stochastic) {
      const __m512i hk =
          kWrap ? _mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(lo, k.lo0), k.hk_same, k.hk_wrap) : k.hk_same;
      const __m512i h = fmix32_x16(_mm512_xor_si512(fmix32_x16_keyed(lo, k.k0x), hk));
      const __m512 u = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(h, 8)), _mm512_set1_ps(0x1p-24f));
      up = _mm512_cmp_ps_mask(u, frac, _CMP_LT_OQ);
    } else {
      up = _mm512_cmp_ps_mask(frac, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    }
    // fl + 1.0 where up, fl (= fl + 0.0, fl >= 0) elsewhere: the portable kernel's fl + up.
    const __m512 n = _mm512_mask_add_ps(fl, up, fl, _mm512_set1_ps(1.0f));
    r = _mm512_mul_ps(n, q);  // exact: n < 2^(m+2), q a power of two in range
  }
  return _mm512_or_si512(_mm512_castps_si512(r), sign);
}

template <class OutT>
SNIP_AVX512 inline __attribute__((always_inline)) void store16(OutT* y, __m512i sr, __m512 out, __mmask16 mask,
                                                               bool full, const Consts& k) {
  if constexpr (std::is_same_v<OutT, int8_t>) {  // sr is ±2r (kTimes2)
    const __m512i code = _mm512_add_epi32(_mm512_cvttps_epi32(_mm512_castsi512_ps(sr)), k.code_offset);
    if (full)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(y), _mm512_cvtepi32_epi8(code));
    else
      _mm512_mask_cvtepi32_storeu_epi8(y, mask, code);
  } else if constexpr (std::is_same_v<OutT, uint16_t>) {
    const __m512i bits = _mm512_srli_epi32(sr, 16);
    if (full)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), _mm512_cvtepi32_epi16(bits));
    else
      _mm512_mask_cvtepi32_storeu_epi16(y, mask, bits);
  } else {
    const __m512 val = _mm512_mul_ps(_mm512_castsi512_ps(sr), out);
    if (full)
      _mm512_storeu_ps(y, val);
    else
      _mm512_mask_storeu_ps(y, mask, val);
  }
}

// x[0, n) through round16 and store16, 16 lanes per step, then a masked tail.
template <bool kDivide, bool kVecScale, Rounding kRound, bool kWrap, class OutT>
SNIP_AVX512 inline __attribute__((always_inline)) void row_loop(OutT* __restrict y, const float* __restrict x,
                                                                const float* __restrict in_s,
                                                                const float* __restrict out_s, int64_t n,
                                                                const Consts& k) {
  constexpr bool kVecOut = kVecScale && std::is_same_v<OutT, float>;
  constexpr bool kTimes2 = std::is_same_v<OutT, int8_t>;
  __m512i lo = _mm512_add_epi32(k.lo0, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
  int64_t c = 0;
  for (; c + 16 <= n; c += 16) {
    const __m512 in = kVecScale ? _mm512_loadu_ps(in_s + c) : k.in0;
    const __m512 out = kVecOut ? _mm512_loadu_ps(out_s + c) : k.out0;
    store16(y + c, round16<kDivide, kRound, kTimes2, kWrap>(_mm512_loadu_ps(x + c), in, k, lo), out, 0xFFFF, true, k);
    lo = _mm512_add_epi32(lo, _mm512_set1_epi32(16));
  }
  if (c < n) {
    const __mmask16 mask = __mmask16((1u << (n - c)) - 1u);
    // Masked-off lanes divide 0 by 1 (never 0/0): no lane computes anything unusual.
    const __m512 in = kVecScale ? _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), mask, in_s + c) : k.in0;
    const __m512 out = kVecOut ? _mm512_maskz_loadu_ps(mask, out_s + c) : k.out0;
    store16(y + c, round16<kDivide, kRound, kTimes2, kWrap>(_mm512_maskz_loadu_ps(mask, x + c), in, k, lo), out, mask,
            false, k);
  }
}

template <bool kDivide, bool kVecScale, Rounding kRound, class OutT>
SNIP_AVX512 inline __attribute__((always_inline)) void row_avx512(OutT* __restrict y, const float* __restrict x,
                                                                  const float* __restrict in_s,
                                                                  const float* __restrict out_s, int64_t n,
                                                                  const RowParams& p, uint64_t i0) {
  const uint32_t m = uint32_t(p.mbits);
  const uint32_t lo0 = uint32_t(i0), hi0 = uint32_t(i0 >> 32);
  constexpr uint32_t kTimes2 = std::is_same_v<OutT, int8_t> ? 1u : 0u;
  Consts k;
  k.emin_b = _mm512_set1_epi32(int(p.emin_biased));
  // RNE: big = 2^(e + 23 - m); SR / away: q = 2^(e - m), or 2q for codes.
  k.q_off = _mm512_set1_epi32(int(kRound == Rounding::rne ? 23u - m : m - kTimes2));
  k.inv_off = _mm512_set1_epi32(int(254u + m));
  k.lo0 = _mm512_set1_epi32(int(lo0));
  k.k0x = _mm512_set1_epi32(int(p.k0 ^ (p.k0 >> 16)));
  k.hk_same = _mm512_set1_epi32(int(hi0 * 0x9E3779B1u + p.k1));
  k.hk_wrap = _mm512_set1_epi32(int((hi0 + 1u) * 0x9E3779B1u + p.k1));
  k.code_offset = _mm512_set1_epi32(p.code_offset);
  k.maxv = _mm512_set1_ps(p.max);
  k.in0 = _mm512_set1_ps(in_s[0]);
  k.out0 = std::is_same_v<OutT, float> ? _mm512_set1_ps(out_s[0]) : _mm512_set1_ps(1.0f);
  // Whether an element index's low word crosses 2^32 in this row (rows of a tensor past 2^32
  // elements): the hash then needs each lane's high word. (Lanes past n in the masked tail
  // compute and are discarded.)
  if (kRound == Rounding::stochastic && n > 0 && uint64_t(lo0) + uint64_t(n - 1) > 0xFFFFFFFFull)
    row_loop<kDivide, kVecScale, kRound, true>(y, x, in_s, out_s, n, k);
  else
    row_loop<kDivide, kVecScale, kRound, false>(y, x, in_s, out_s, n, k);
}

template <bool D, bool V, Rounding R>
SNIP_AVX512 void row_k(float* y, const float* x, const float* in_s, const float* out_s, int64_t n, const RowParams& p,
                       uint64_t i0) {
  row_avx512<D, V, R, float>(y, x, in_s, out_s, n, p, i0);
}
template <bool D, bool V, Rounding R>
SNIP_AVX512 void code_k(int8_t* y, const float* x, const float* in_s, int64_t n, const RowParams& p, uint64_t i0) {
  const float one = 1.0f;
  row_avx512<D, V, R, int8_t>(y, x, in_s, &one, n, p, i0);
}
template <bool D, bool V, Rounding R>
SNIP_AVX512 void bf16_k(uint16_t* y, const float* x, const float* in_s, int64_t n, const RowParams& p, uint64_t i0) {
  const float one = 1.0f;
  row_avx512<D, V, R, uint16_t>(y, x, in_s, &one, n, p, i0);
}

// E2M1 codes under round-to-nearest-even by a table lookup: bit for bit what round16 and
// store16 give, in fewer instructions per element. For v = x ⊘ in, the code depends only on
// where |v| lies among the E2M1 rounding boundaries (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5 and
// the clamp at 6), on whether |v| is exactly a boundary (a tie), and on v's sign. Every one of
// these boundaries is a multiple of 2^21 in the FP32 bits, so for u = bits(|v|) clamped to
// [0.25, 6] the slot u >> 21 (one of 500..518) fixes the code between boundaries. The table
// index (vpermi2b: 128 bytes, bits 0-6 of each index byte) is the slot mod 128, with bit 5
// flipped for a tie (u's low 21 bits are zero) and bit 6 for a negative v. The 19 slots mod
// 128 are 116..127 and 0..6; flipping bit 5, bit 6 or both moves them to 84..95 and 32..38,
// 52..63 and 64..70, 20..31 and 96..102: 76 distinct indices. The table holds the general
// kernel's code of one representative input per index, plus the code offset. NaN takes the
// clamp (vpminud on the bits, as vminps returns max), as in round16.
#define SNIP_AVX512_VBMI __attribute__((target("avx512f,avx512bw,avx512dq,avx512vbmi")))

struct E2M1Lut {
  __m512i lo, hi;  // table bytes 0-63, 64-127
};

// Whether p is E2M1's rounding (the only format the table holds).
inline bool e2m1_lut_fits(const RowParams& p) {
  return p.mbits == 1 && p.emin_biased == 127 && p.max == 6.0f;
}

// The table index of 16 lanes of v, in the low byte of each 32-bit lane (higher bytes are
// not index bits: the narrowing drops them).
SNIP_AVX512_VBMI inline __attribute__((always_inline)) __m512i e2m1_lut_index(__m512 v) {
  const __m512i vb = _mm512_castps_si512(v);
  const __m512i a = _mm512_and_si512(vb, _mm512_set1_epi32(0x7FFFFFFF));
  const __m512i u = _mm512_max_epu32(_mm512_min_epu32(a, _mm512_set1_epi32(0x40C00000)),  // 6
                                     _mm512_set1_epi32(0x3E800000));                      // 0.25
  __m512i i = _mm512_srli_epi32(u, 21);
  i = _mm512_mask_xor_epi32(i, _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x1FFFFF)), i, _mm512_set1_epi32(32));
  return _mm512_mask_xor_epi32(i, _mm512_movepi32_mask(vb), i, _mm512_set1_epi32(64));
}

// The table for p's code offset: the general kernel's codes of one input per index (built once).
SNIP_AVX512_VBMI E2M1Lut e2m1_lut(int32_t code_offset) {
  alignas(64) static const std::array<int8_t, 128> base = [] {
    std::array<float, 128> rep{};  // indices no slot reaches: 0.0f
    for (uint32_t slot = 500; slot <= 518; ++slot)
      for (uint32_t flip = 0; flip < 4; ++flip) {  // bit 0: tie, bit 1: negative
        const uint32_t u = (slot << 21) | ((flip & 1u) ? 0u : 1u) | ((flip & 2u) ? 0x80000000u : 0u);
        std::memcpy(&rep[(slot ^ (flip << 5)) & 127u], &u, 4);
      }
    std::array<int8_t, 128> t{};
    const float one = 1.0f;
    code_k<true, false, Rounding::rne>(t.data(), rep.data(), &one, 128, RowParams{1, 127, 6.0f, 0, 0, 0}, 0);
    return t;
  }();
  const __m512i off = _mm512_set1_epi8(char(code_offset));
  return {_mm512_add_epi8(_mm512_load_si512(base.data()), off),
          _mm512_add_epi8(_mm512_load_si512(base.data() + 64), off)};
}

// v = x ⊘ in for x[c, c + 16).
template <bool kDivide, bool kVecScale>
SNIP_AVX512 inline __attribute__((always_inline)) __m512 scaled(const float* x, const float* in_s, __m512 in0,
                                                                int64_t c) {
  const __m512 in = kVecScale ? _mm512_loadu_ps(in_s + c) : in0;
  return kDivide ? _mm512_div_ps(_mm512_loadu_ps(x + c), in) : _mm512_mul_ps(_mm512_loadu_ps(x + c), in);
}

// E2M1 codes of x[0, n) by the table: 64 elements per step (four index vectors narrowed to one
// byte vector, one lookup), then 16, then a masked tail.
template <bool kDivide, bool kVecScale>
SNIP_AVX512_VBMI inline __attribute__((always_inline)) void row_e2m1_lut(int8_t* __restrict y,
                                                                         const float* __restrict x,
                                                                         const float* __restrict in_s, int64_t n,
                                                                         const E2M1Lut& t) {
  const __m512 in0 = _mm512_set1_ps(in_s[0]);
  // Byte 0 of each 32-bit lane of two vectors, in order: bytes 0-31 of the result.
  const __m512i low_bytes = _mm512_setr_epi32(0x0C080400, 0x1C181410, 0x2C282420, 0x3C383430, 0x4C484440, 0x5C585450,
                                              0x6C686460, 0x7C787470, 0, 0, 0, 0, 0, 0, 0, 0);
  int64_t c = 0;
  for (; c + 64 <= n; c += 64) {
    const __m512i i0 = e2m1_lut_index(scaled<kDivide, kVecScale>(x, in_s, in0, c));
    const __m512i i1 = e2m1_lut_index(scaled<kDivide, kVecScale>(x, in_s, in0, c + 16));
    const __m512i i2 = e2m1_lut_index(scaled<kDivide, kVecScale>(x, in_s, in0, c + 32));
    const __m512i i3 = e2m1_lut_index(scaled<kDivide, kVecScale>(x, in_s, in0, c + 48));
    const __m512i i01 = _mm512_permutex2var_epi8(i0, low_bytes, i1);
    const __m512i i23 = _mm512_permutex2var_epi8(i2, low_bytes, i3);
    const __m512i idx = _mm512_shuffle_i64x2(i01, i23, 0x44);  // 128-bit lanes 0, 1 of each
    _mm512_storeu_si512(y + c, _mm512_permutex2var_epi8(t.lo, idx, t.hi));
  }
  for (; c + 16 <= n; c += 16) {
    const __m512i i = e2m1_lut_index(scaled<kDivide, kVecScale>(x, in_s, in0, c));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + c), _mm512_cvtepi32_epi8(_mm512_permutex2var_epi8(t.lo, i, t.hi)));
  }
  if (c < n) {
    const __mmask16 mask = __mmask16((1u << (n - c)) - 1u);
    // Masked-off lanes divide 0 by 1, as in row_avx512.
    const __m512 in = kVecScale ? _mm512_mask_loadu_ps(_mm512_set1_ps(1.0f), mask, in_s + c) : in0;
    const __m512 xv = _mm512_maskz_loadu_ps(mask, x + c);
    const __m512i i = e2m1_lut_index(kDivide ? _mm512_div_ps(xv, in) : _mm512_mul_ps(xv, in));
    _mm512_mask_cvtepi32_storeu_epi8(y + c, mask, _mm512_permutex2var_epi8(t.lo, i, t.hi));
  }
}

// The E2M1 code kernels under RNE by the table (other formats: the general kernel).
template <bool D, bool V>
SNIP_AVX512_VBMI void code_lut_k(int8_t* y, const float* x, const float* in_s, int64_t n, const RowParams& p,
                                 uint64_t i0) {
  if (!e2m1_lut_fits(p)) {
    const float one = 1.0f;
    row_avx512<D, V, Rounding::rne, int8_t>(y, x, in_s, &one, n, p, i0);
    return;
  }
  row_e2m1_lut<D, V>(y, x, in_s, n, e2m1_lut(p.code_offset));
}

// Every cache line of x[0, n) (x need not start on a line: then n floats span one more).
inline void prefetch_lines(const float* x, int64_t n) {
  const uintptr_t end = reinterpret_cast<uintptr_t>(x + n);
  for (uintptr_t a = reinterpret_cast<uintptr_t>(x) & ~uintptr_t(63); a < end; a += 64)
    __builtin_prefetch(reinterpret_cast<const void*>(a));
}

// Tiles of bc (a multiple of 16) along the row, each with its own scalar scales: the per-tile
// kernel inlined once per tile, so a row of tiles costs one call. Each tile first prefetches
// the same tile of x + n (the next row of a row-major tensor, or the next strip's row), so the
// next call's first pass (its maxima) finds its data in cache rather than waiting for DRAM.
// (Prefetches never fault, also past the end of x.)
template <bool D, Rounding R, class OutT>
SNIP_AVX512 inline __attribute__((always_inline)) void tiles_avx512(OutT* y, const float* x, const float* in_t,
                                                                    const float* out_t, int64_t n, int64_t bc,
                                                                    const RowParams& p, uint64_t i0) {
  for (int64_t c0 = 0, g = 0; c0 < n; c0 += bc, ++g) {
    const int64_t len = n - c0 < bc ? n - c0 : bc;
    prefetch_lines(x + n + c0, len);
    row_avx512<D, false, R, OutT>(y + c0, x + c0, in_t + g, out_t + g, len, p, i0 + c0);
  }
}
template <bool D, Rounding R>
SNIP_AVX512 void tile_row_k(float* y, const float* x, const float* in_t, const float* out_t, int64_t n, int64_t bc,
                            const RowParams& p, uint64_t i0) {
  tiles_avx512<D, R, float>(y, x, in_t, out_t, n, bc, p, i0);
}
template <bool D, Rounding R>
SNIP_AVX512 void tile_code_k(int8_t* y, const float* x, const float* in_t, int64_t n, int64_t bc, const RowParams& p,
                             uint64_t i0) {
  tiles_avx512<D, R, int8_t>(y, x, in_t, in_t, n, bc, p, i0);  // out_t is never read for codes
}
template <bool D>
SNIP_AVX512_VBMI void tile_code_lut_k(int8_t* y, const float* x, const float* in_t, int64_t n, int64_t bc,
                                      const RowParams& p, uint64_t i0) {
  if (!e2m1_lut_fits(p)) {
    tiles_avx512<D, Rounding::rne, int8_t>(y, x, in_t, in_t, n, bc, p, i0);
    return;
  }
  const E2M1Lut t = e2m1_lut(p.code_offset);
  for (int64_t c0 = 0, g = 0; c0 < n; c0 += bc, ++g) {
    const int64_t len = n - c0 < bc ? n - c0 : bc;
    prefetch_lines(x + n + c0, len);  // as tiles_avx512
    row_e2m1_lut<D, false>(y + c0, x + c0, in_t + g, len, t);
  }
}
template <bool D, Rounding R>
SNIP_AVX512 void tile_bf16_k(uint16_t* y, const float* x, const float* in_t, int64_t n, int64_t bc, const RowParams& p,
                             uint64_t i0) {
  tiles_avx512<D, R, uint16_t>(y, x, in_t, in_t, n, bc, p, i0);
}

// max |x| bits per tile: unsigned max of the bits with the sign cleared (a reduction by max is
// exact in any order).
SNIP_AVX512 void tile_amax(uint32_t* amax, const float* x, int64_t n, int64_t bc) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  for (int64_t c0 = 0, g = 0; c0 < n; c0 += bc, ++g) {
    const int64_t len = n - c0 < bc ? n - c0 : bc;
    __m512i m = _mm512_setzero_si512();
    int64_t c = 0;
    for (; c + 16 <= len; c += 16) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(x + c0 + c), abs_mask));
    if (c < len) {
      const __mmask16 mask = __mmask16((1u << (len - c)) - 1u);
      m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(mask, x + c0 + c), abs_mask));
    }
    amax[g] = _mm512_reduce_max_epu32(m);
  }
}

// max |x| bits of a strip, per column (bc == 1: 64 columns at a time, rows inner, so each
// column's maximum stays in a register) or per bc-wide block (rows inner, 16 lanes per step).
SNIP_AVX512 void strip_amax(uint32_t* amax, const float* x, int64_t ld, int64_t rows, int64_t w, int64_t bc) {
  const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
  auto lanes = [](int64_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1u); };
  if (bc == 1) {
    for (int64_t c0 = 0; c0 < w; c0 += 64) {
      const __mmask16 k0 = lanes(w - c0), k1 = lanes(w - c0 - 16 > 0 ? w - c0 - 16 : 0),
                      k2 = lanes(w - c0 - 32 > 0 ? w - c0 - 32 : 0), k3 = lanes(w - c0 - 48 > 0 ? w - c0 - 48 : 0);
      __m512i m0 = _mm512_setzero_si512(), m1 = m0, m2 = m0, m3 = m0;
      const float* p = x + c0;
      for (int64_t r = 0; r < rows; ++r, p += ld) {
        m0 = _mm512_max_epu32(m0, _mm512_and_si512(_mm512_maskz_loadu_epi32(k0, p), abs_mask));
        m1 = _mm512_max_epu32(m1, _mm512_and_si512(_mm512_maskz_loadu_epi32(k1, p + 16), abs_mask));
        m2 = _mm512_max_epu32(m2, _mm512_and_si512(_mm512_maskz_loadu_epi32(k2, p + 32), abs_mask));
        m3 = _mm512_max_epu32(m3, _mm512_and_si512(_mm512_maskz_loadu_epi32(k3, p + 48), abs_mask));
      }
      _mm512_mask_storeu_epi32(amax + c0, k0, m0);
      _mm512_mask_storeu_epi32(amax + c0 + 16, k1, m1);
      _mm512_mask_storeu_epi32(amax + c0 + 32, k2, m2);
      _mm512_mask_storeu_epi32(amax + c0 + 48, k3, m3);
    }
    return;
  }
  for (int64_t c0 = 0, g = 0; c0 < w; c0 += bc, ++g) {
    const int64_t len = w - c0 < bc ? w - c0 : bc;
    __m512i m = _mm512_setzero_si512();
    const float* p = x + c0;
    for (int64_t r = 0; r < rows; ++r, p += ld) {
      int64_t c = 0;
      for (; c + 16 <= len; c += 16) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512(p + c), abs_mask));
      if (c < len) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_maskz_loadu_epi32(lanes(len - c), p + c), abs_mask));
    }
    amax[g] = _mm512_reduce_max_epu32(m);
  }
}

// table[divide][rounding] of one tile-kernel family.
template <class K, template <bool, Rounding> class F>
K pick_tiles(bool divide, Rounding r) {
  static const K table[2][3] = {
      {F<false, Rounding::rne>::fn, F<false, Rounding::stochastic>::fn, F<false, Rounding::away>::fn},
      {F<true, Rounding::rne>::fn, F<true, Rounding::stochastic>::fn, F<true, Rounding::away>::fn}};
  return table[divide ? 1 : 0][int(r)];
}
template <bool D, Rounding R>
struct TileRowF {
  static constexpr TileRowKernel fn = tile_row_k<D, R>;
};
template <bool D, Rounding R>
struct TileCodeF {
  static constexpr TileCodeKernel fn = tile_code_k<D, R>;
};
template <bool D, Rounding R>
struct TileBf16F {
  static constexpr TileBf16Kernel fn = tile_bf16_k<D, R>;
};

// table[divide][vec][rounding] of one kernel family.
template <class K, template <bool, bool, Rounding> class F>
K pick(bool divide, bool vec, Rounding r) {
  static const K table[2][2][3] = {
      {{F<false, false, Rounding::rne>::fn, F<false, false, Rounding::stochastic>::fn,
        F<false, false, Rounding::away>::fn},
       {F<false, true, Rounding::rne>::fn, F<false, true, Rounding::stochastic>::fn,
        F<false, true, Rounding::away>::fn}},
      {{F<true, false, Rounding::rne>::fn, F<true, false, Rounding::stochastic>::fn,
        F<true, false, Rounding::away>::fn},
       {F<true, true, Rounding::rne>::fn, F<true, true, Rounding::stochastic>::fn, F<true, true, Rounding::away>::fn}}};
  return table[divide ? 1 : 0][vec ? 1 : 0][int(r)];
}
template <bool D, bool V, Rounding R>
struct RowF {
  static constexpr RowKernel fn = row_k<D, V, R>;
};
template <bool D, bool V, Rounding R>
struct CodeF {
  static constexpr CodeKernel fn = code_k<D, V, R>;
};
template <bool D, bool V, Rounding R>
struct Bf16F {
  static constexpr Bf16CodeKernel fn = bf16_k<D, V, R>;
};

bool cpu_has_avx512f() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

// The table lookup's instructions (vpermi2b, vpmovd2m): AVX512-VBMI, -BW and -DQ.
bool cpu_has_avx512_vbmi() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq");
}

}  // namespace

#pragma GCC diagnostic pop

RowKernel avx512_row_kernel(bool divide, bool vec, Rounding r) {
  return cpu_has_avx512f() ? pick<RowKernel, RowF>(divide, vec, r) : nullptr;
}
CodeKernel avx512_code_kernel(bool divide, bool vec, Rounding r, bool table) {
  if (!cpu_has_avx512f()) return nullptr;
  if (r == Rounding::rne && table && cpu_has_avx512_vbmi())
    return divide ? (vec ? code_lut_k<true, true> : code_lut_k<true, false>)
                  : (vec ? code_lut_k<false, true> : code_lut_k<false, false>);
  return pick<CodeKernel, CodeF>(divide, vec, r);
}
Bf16CodeKernel avx512_bf16_code_kernel(bool divide, bool vec, Rounding r) {
  return cpu_has_avx512f() ? pick<Bf16CodeKernel, Bf16F>(divide, vec, r) : nullptr;
}
TileAmaxKernel avx512_tile_amax_kernel() {
  return cpu_has_avx512f() ? tile_amax : nullptr;
}
StripAmaxKernel avx512_strip_amax_kernel() {
  return cpu_has_avx512f() ? strip_amax : nullptr;
}
TileRowKernel avx512_tile_row_kernel(bool divide, Rounding r) {
  return cpu_has_avx512f() ? pick_tiles<TileRowKernel, TileRowF>(divide, r) : nullptr;
}
TileCodeKernel avx512_tile_code_kernel(bool divide, Rounding r, bool table) {
  if (!cpu_has_avx512f()) return nullptr;
  if (r == Rounding::rne && table && cpu_has_avx512_vbmi())
    return divide ? tile_code_lut_k<true> : tile_code_lut_k<false>;
  return pick_tiles<TileCodeKernel, TileCodeF>(divide, r);
}
TileBf16Kernel avx512_tile_bf16_kernel(bool divide, Rounding r) {
  return cpu_has_avx512f() ? pick_tiles<TileBf16Kernel, TileBf16F>(divide, r) : nullptr;
}
bool use_avx512_quant_kernels() {
  return isa_at_least(IsaTier::avx512);
}

#else  // no x86-64 GCC/Clang: the portable kernels only

RowKernel avx512_row_kernel(bool, bool, Rounding) {
  return nullptr;
}
CodeKernel avx512_code_kernel(bool, bool, Rounding, bool) {
  return nullptr;
}
Bf16CodeKernel avx512_bf16_code_kernel(bool, bool, Rounding) {
  return nullptr;
}
TileAmaxKernel avx512_tile_amax_kernel() {
  return nullptr;
}
StripAmaxKernel avx512_strip_amax_kernel() {
  return nullptr;
}
TileRowKernel avx512_tile_row_kernel(bool, Rounding) {
  return nullptr;
}
TileCodeKernel avx512_tile_code_kernel(bool, Rounding, bool) {
  return nullptr;
}
TileBf16Kernel avx512_tile_bf16_kernel(bool, Rounding) {
  return nullptr;
}
bool use_avx512_quant_kernels() {
  return false;
}

#endif

}  // namespace snip::detail
