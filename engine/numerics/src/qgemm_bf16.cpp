// BF16-element GEMM for FP8 and BF16 operands (snip/qgemm.h, docs/FORMATS.md section 6.5).
//
// Packing. A (M, K) becomes BF16 bits, row-major, each K chunk padded to an even length with
// zeros; B (N, K) becomes panels of 64 columns, [panel][chunk][K/2][64][2] BF16, so one 64-byte
// load is 16 columns × 2 consecutive k, the layout of vdpbf16ps's operand. Zero padding adds
// fma(0, 0, s) = s (s is never −0: it starts at +0 and an exact cancellation gives +0 under
// round-to-nearest). While packing, each operand's smallest non-zero BF16 exponent and whether
// it has a subnormal are recorded; they decide whether vdpbf16ps is safe (qgemm_bf16_dpbf16_safe).
// Codes stored as one dense matrix (quantize_bf16_codes, QLinearOperand) are placed by whole
// source rows, as the quantizer's row sinks place them, and their range is one vectorized pass;
// strided views and FP32 values go through an element reader that records the range as it reads.
//
// Kernels. A 6 × 64 output tile keeps 24 FP32 accumulators (6 rows × 4 vectors of 16 columns)
// for one chunk: per k pair, 4 loads of B, 6 broadcasts of an A pair, 24 vdpbf16ps. At the end
// of the chunk each accumulator S is scaled into the FP32 tile in memory:
// tile = tile + S·fl(sa·sb). The FMA kernel widens each BF16 pair to two FP32 vectors and does
// the two fmas of vdpbf16ps's definition (odd element first); the scalar kernel does the same
// with std::fma. All three give the same bits.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "code_sink.h"
#include "float_bits.h"
#include "packed_gemm.h"
#include "parallel.h"
#include "qgemm_common.h"
#include "snip/error.h"
#include "snip/isa.h"
#include "snip/qgemm.h"
#include "snip/thread_pool.h"

namespace snip {

namespace {

constexpr int kNR = numerics_detail::kPanel;
constexpr int kTileRowsMax = numerics_detail::kTileRows;
constexpr int kAw = 8;  // floats per k in the FMA kernels' widened A (a tile's 6 rows, 2 zeros)

thread_local Bf16Kernel g_last_kernel = Bf16Kernel::scalar;

using numerics_detail::fbits;
using numerics_detail::ffrom;
inline float bf16_value(uint16_t h) {
  return ffrom(uint32_t(h) << 16);
}

// What packing learned about one operand's elements.
struct ElemRange {
  int emin = 255;          // smallest BF16 biased exponent of a non-zero element (255: none)
  int emax = 0;            // largest biased exponent of a non-zero element (255: an infinity or NaN)
  bool subnormal = false;  // a non-zero element with exponent field 0
  bool inexact = false;    // an FP32 value that is not a BF16 value
  void add(const ElemRange& o) {
    emin = std::min(emin, o.emin);
    emax = std::max(emax, o.emax);
    subnormal |= o.subnormal;
    inexact |= o.inexact;
  }
};

// Reads elements of an operand as BF16 bits and records their range.
struct ElemReader {
  const Bf16Operand& o;
  ElemRange r;
  uint16_t operator()(int64_t i, int64_t k) {
    const int64_t at = i * o.rs + k * o.cs;
    uint16_t h;
    if (o.bits) {
      h = o.bits[at];
    } else {
      const uint32_t u = fbits(o.values[at]);
      r.inexact |= (u & 0xFFFFu) != 0;
      h = uint16_t(u >> 16);
    }
    if (h & 0x7FFFu) {
      const int e = (h >> 7) & 0xFF;
      if (e == 0) r.subnormal = true;
      r.emin = std::min(r.emin, e == 0 ? 255 : e);
      r.emax = std::max(r.emax, e);
    }
    return h;
  }
};

// d[u] = element u of the contiguous run of `len` elements at flat index `at` of the operand's
// source, recording the range. Branch-free so the compiler vectorizes it (packing reads every
// element of both operands once).
void read_run(uint16_t* __restrict d, const Bf16Operand& o, int64_t at, int64_t len, ElemRange& r) {
  uint32_t low = 0, emin = 255, emax = 0, sub = 0;
  auto note = [&](uint32_t h) {
    const uint32_t e = (h >> 7) & 0xFFu;
    const uint32_t nz = (h & 0x7FFFu) != 0 ? 1u : 0u;
    sub |= nz & (e == 0 ? 1u : 0u);
    const uint32_t ee = nz && e != 0 ? e : 255u;
    emin = ee < emin ? ee : emin;
    emax = e > emax ? e : emax;
  };
  if (o.bits) {
    const uint16_t* src = o.bits + at;
    for (int64_t u = 0; u < len; ++u) {
      const uint32_t h = src[u];
      note(h);
      d[u] = uint16_t(h);
    }
  } else {
    const float* src = o.values + at;
    for (int64_t u = 0; u < len; ++u) {
      const uint32_t w = fbits(src[u]);
      low |= w & 0xFFFFu;
      const uint32_t h = w >> 16;
      note(h);
      d[u] = uint16_t(h);
    }
  }
  r.inexact |= low != 0;
  r.subnormal |= sub != 0;
  r.emin = std::min(r.emin, int(emin));
  r.emax = std::max(r.emax, int(emax));
}

using numerics_detail::grow;

// The element type of packed_gemm.h's skeleton: A and B as BF16 bits, B in pairs of k, FP32
// sums, B's scales as they are.
struct Bf16Elems {
  using ACode = uint16_t;
  using BCode = uint16_t;
  using Sum = float;
  static constexpr int kGroup = 2;
  static constexpr int kAOffset = 0;
  static float b_scale(float s) { return s; }
};

// Everything the kernels read, packed once per GEMM, and what packing learned about A's and B's
// elements.
struct Packed : numerics_detail::PackedOperands<Bf16Elems> {
  ElemRange ra, rb;
};

// A (M, K) row-major by chunks. When the reduction runs down the source's rows (cs != 1), the
// source is read in 64 × 64 tiles so each cache line of it is read once.
ElemRange pack_a(Packed& P, const Bf16Operand& A, int nchunks) {
  const int64_t lda = P.nch * P.kcp;
  std::vector<ElemRange> ranges(size_t(std::max(nchunks, 1)));
  const int64_t groups = (P.M + 63) / 64;
  detail::parallel_chunks(nchunks, groups, 1, [&](int t, int64_t g0, int64_t g1) {
    ElemReader rd{A, {}};
    uint16_t tile[64][64];
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t m0 = g * 64, mn = std::min<int64_t>(64, P.M - m0);
      if (A.cs == 1) {
        for (int64_t m = m0; m < m0 + mn; ++m)
          for (int64_t c = 0; c < P.nch; ++c)
            read_run(P.a.data() + m * lda + c * P.kcp, A, m * A.rs + c * P.kc, P.chunk_len(c), rd.r);
      } else {
        for (int64_t kb = 0; kb < P.K; kb += 64) {
          const int64_t kn = std::min<int64_t>(64, P.K - kb);
          uint16_t run[64];
          for (int64_t kk = 0; kk < kn; ++kk) {
            if (A.rs == 1) {  // 64 rows of A are 64 adjacent elements of each source row
              read_run(run, A, (kb + kk) * A.cs + m0, mn, rd.r);
              for (int64_t mm = 0; mm < mn; ++mm) tile[mm][kk] = run[mm];
            } else {
              for (int64_t mm = 0; mm < mn; ++mm) tile[mm][kk] = rd(m0 + mm, kb + kk);
            }
          }
          numerics_detail::store_a_tile(P, tile, m0, mn, kb, kn);
        }
      }
      numerics_detail::finish_a_rows(P, A, m0, m0 + mn);
    }
    ranges[size_t(t)].add(rd.r);
  });
  ElemRange all;
  for (const ElemRange& r : ranges) all.add(r);
  return all;
}

// B (N, K) into 64-column panels of k pairs.
ElemRange pack_b(Packed& P, const Bf16Operand& B, int nchunks) {
  const int64_t kq = P.kcp / 2;
  std::vector<ElemRange> ranges(size_t(std::max(nchunks, 1)));
  detail::parallel_chunks(nchunks, P.npanel, 1, [&](int t, int64_t p0, int64_t p1) {
    ElemReader rd{B, {}};
    std::vector<uint16_t> row_buf;
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ncols = std::min<int64_t>(kNR, P.N - p * kNR);
      for (int64_t c = 0; c < P.nch; ++c) {
        const int64_t k0 = c * P.kc, len = P.chunk_len(c);
        uint16_t* dst = P.b.data() + (p * P.nch + c) * kq * kNR * 2;
        std::memset(dst, 0, size_t(kq * kNR * 2) * sizeof(uint16_t));
        if (B.cs == 1) {
          std::vector<uint16_t>& run = row_buf;
          if (int64_t(run.size()) < len) run.resize(size_t(len));
          for (int j = 0; j < ncols; ++j) {
            read_run(run.data(), B, (p * kNR + j) * B.rs + k0, len, rd.r);
            for (int64_t u = 0; u < len; ++u) dst[(u / 2) * kNR * 2 + j * 2 + (u % 2)] = run[size_t(u)];
          }
        } else if (B.rs == 1) {
          uint16_t run[kNR];
          for (int64_t u = 0; u < len; ++u) {
            read_run(run, B, (k0 + u) * B.cs + p * kNR, ncols, rd.r);
            uint16_t* d = dst + (u / 2) * kNR * 2 + (u % 2);
            for (int j = 0; j < ncols; ++j) d[j * 2] = run[j];
          }
        } else {
          for (int64_t u = 0; u < len; ++u) {
            uint16_t* d = dst + (u / 2) * kNR * 2 + (u % 2);
            for (int j = 0; j < ncols; ++j) d[j * 2] = rd(p * kNR + j, k0 + u);
          }
        }
      }
    }
    numerics_detail::set_b_scales(P, B, p0, p1);
    ranges[size_t(t)].add(rd.r);
  });
  ElemRange all;
  for (const ElemRange& r : ranges) all.add(r);
  return all;
}

// ---- Quantizing straight into the packed layout (as qgemm.cpp's E2M1 sinks) ----------------

}  // namespace

namespace detail {
// The smallest non-zero normal magnitude's bits (0x7FFF: none, bits 0-14), whether a subnormal
// is among the n BF16 values (bit 16) and the largest magnitude's exponent (bits 17-24): a min, a
// max and an or over 16-bit lanes, so every tier's copy vectorizes it (and an order-free reduction
// gives the same answer in every copy).
SNIP_TIER_COPIES(uint32_t, bf16_range_bits, (const uint16_t* __restrict h, int64_t n), {
  uint16_t mn = 0x7FFF, mx = 0, sub = 0;
  for (int64_t u = 0; u < n; ++u) {
    const uint16_t a = uint16_t(h[u] & 0x7FFFu);
    const uint16_t normal = a >= 0x80u ? a : uint16_t(0x7FFF);
    mn = normal < mn ? normal : mn;
    mx = a > mx ? a : mx;
    sub |= uint16_t(uint16_t(a - 1u) < 0x7Fu ? 1u : 0u);
  }
  return uint32_t(mn) | (uint32_t(sub) << 16) | (uint32_t(mx >> 7) << 17);
})
uint32_t bf16_range_bits(const uint16_t* h, int64_t n) {
  return SNIP_TIER_PICK(bf16_range_bits)(h, n);
}
}  // namespace detail

namespace {

// The range of n BF16 codes, as read_run records it.
ElemRange range_of_bits(const uint16_t* codes, int64_t n) {
  const uint32_t bits = detail::bf16_range_bits(codes, n);
  ElemRange r;
  r.emin = int((bits & 0x7FFFu) >> 7);  // 0x7FFF >> 7 = 255: no non-zero normal element
  r.subnormal = ((bits >> 16) & 1u) != 0;
  r.emax = int(bits >> 17);
  return r;
}

// A sink that records the range of each batch of codes it places (once per batch of rows).
class RangeSink : public numerics_detail::PackedSink<Packed> {
 protected:
  RangeSink(Packed& P, bool rows_are_i) : PackedSink(P, rows_are_i) {}
  // The range of the codes merged into `into` under the sink's lock.
  void note(const uint16_t* codes, int64_t n, ElemRange& into) {
    const ElemRange r = range_of_bits(codes, n);
    const std::lock_guard<std::mutex> lock(mu_);
    into.add(r);
  }

 private:
  std::mutex mu_;
};

class ASink16 final : public RangeSink {
 public:
  ASink16(Packed& P, bool rows_are_i) : RangeSink(P, rows_are_i) {}
  void place(int64_t r0, int64_t r1, const void* codes, int64_t ld) override {
    const uint16_t* src = static_cast<const uint16_t*>(codes);
    note(src, (r1 - r0) * ld, P_.ra);
    numerics_detail::place_a(P_, rows_are_i_, r0, r1, src, ld);
  }
};

// Two source rows of 8 codes (k = 2q, 2q+1 of 8 columns) as 16 elements of the panel layout.
inline void interleave2x8(uint16_t* d, const uint16_t* s0, const uint16_t* s1) {
#if defined(__SSE2__)
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(r0, r1));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 8), _mm_unpackhi_epi16(r0, r1));
#else
  for (int j = 0; j < 8; ++j) d[2 * j] = s0[j], d[2 * j + 1] = s1[j];
#endif
}

// Source rows r0 … r1−1 of B's codes (row stride ld; B's columns when rows_are_i, else B's k)
// into B's panels; padding stays as it was (zero_b_padding).
void place_b16(Packed& P, bool rows_are_i, int64_t r0, int64_t r1, const uint16_t* src, int64_t ld) {
  numerics_detail::place_b<2, 8>(P.b.data(), P, r0, r1, src, ld, rows_are_i,
                                 [](uint16_t* d, const uint16_t* s, int64_t ld2, int64_t w) {
                                   for (int64_t j = 0; j < w; j += 8) interleave2x8(d + 2 * j, s + j, s + ld2 + j);
                                 });
}

class BSink16 final : public RangeSink {
 public:
  BSink16(Packed& P, bool rows_are_i) : RangeSink(P, rows_are_i) {}
  void place(int64_t r0, int64_t r1, const void* codes, int64_t ld) override {
    const uint16_t* src = static_cast<const uint16_t*>(codes);
    note(src, (r1 - r0) * ld, P_.rb);
    place_b16(P_, rows_are_i_, r0, r1, src, ld);
  }
};

// Whether an operand is BF16 codes stored as one dense row-major matrix, (I, K) (rows_are_i) or
// (K, I): then packing is the sinks' placement of whole source rows, and the element range one
// vectorized pass over the codes (qgemm_bf16's operands from quantize_bf16_codes and
// QLinearOperand). Other views (strided, FP32 values) go through the element reader above.
bool dense_bits(const Bf16Operand& o, int64_t I, int64_t K, bool* rows_are_i) {
  if (!o.bits) return false;
  if (o.cs == 1 && o.rs == K) {
    *rows_are_i = true;
    return true;
  }
  if (o.rs == 1 && o.cs == I) {
    *rows_are_i = false;
    return true;
  }
  return false;
}

// Whole source rows of a dense code matrix (`rows` of `ld` codes) through `place`, in batches
// of 64 rows (the sinks' batch size), in parallel over batches: each batch writes its own
// rows (A) or k pairs (B) of the packed layout.
template <class Place>
void place_rows(int64_t rows, int nchunks, Place&& place) {
  const int64_t batches = (rows + 63) / 64;
  detail::parallel_chunks(nchunks, batches, 1, [&](int, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) place(b * 64, std::min(rows, b * 64 + 64));
  });
}

ElemRange pack_a_dense(Packed& P, const Bf16Operand& A, bool rows_are_i, int nchunks) {
  const int64_t rows = rows_are_i ? P.M : P.K, ld = rows_are_i ? P.K : P.M;
  place_rows(rows, nchunks,
             [&](int64_t r0, int64_t r1) { numerics_detail::place_a(P, rows_are_i, r0, r1, A.bits + r0 * ld, ld); });
  numerics_detail::finish_a(P, A);
  return range_of_bits(A.bits, P.M * P.K);
}

ElemRange pack_b_dense(Packed& P, const Bf16Operand& B, bool rows_are_i, int nchunks) {
  const int64_t rows = rows_are_i ? P.N : P.K, ld = rows_are_i ? P.K : P.N;
  numerics_detail::zero_b_padding(P);
  place_rows(rows, nchunks, [&](int64_t r0, int64_t r1) { place_b16(P, rows_are_i, r0, r1, B.bits + r0 * ld, ld); });
  numerics_detail::set_b_scales(P, B, 0, P.npanel);
  return range_of_bits(B.bits, P.N * P.K);
}

// The arguments of one 64-column panel × mr-row tile, and for the FMA kernels its widened operands.
struct TileArgs : numerics_detail::TileBase<Bf16Elems> {
  const float* aw;  // the tile in the widened A (widen_operands)
  const float* bw;  // the panel in the widened B ([chunk][k pair][odd, even][64] FP32)
};

// Portable kernel: the operations of the definition, the 64 columns of a row side by side so
// the compiler vectorizes them (each column's sum still runs over k in order). Where every
// product of two elements is exact in FP32 (products_exact), fma(a, b, s) = fl(fl(a·b) + s), so
// the kernel multiplies and adds: a CPU without FMA (SSE2) vectorizes that, not std::fma.
// B's chunk is widened to FP32 once per tile ([k pair][odd, even][64]), so the rows' inner
// loops are plain loads, multiplies and adds.
template <bool kExactProducts>
void tile_scalar_rows(float* ct, const TileArgs& t, int mr) {
  for (int r = 0; r < mr; ++r) std::fill(ct + r * t.ldo, ct + r * t.ldo + kNR, 0.0f);
  const int64_t kq = t.kcp / 2;
  thread_local std::vector<float> bw;
  if (int64_t(bw.size()) < kq * 2 * kNR) bw.resize(size_t(kq * 2 * kNR));
  for (int64_t c = 0; c < t.nch; ++c) {
    const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 1) / 2;
    const uint16_t* bc = t.b + c * kq * kNR * 2;
    for (int64_t q = 0; q < nq; ++q) {
      float* w = bw.data() + q * 2 * kNR;
      const uint16_t* bq = bc + q * kNR * 2;
      for (int j = 0; j < kNR; ++j) w[j] = bf16_value(bq[2 * j + 1]), w[kNR + j] = bf16_value(bq[2 * j]);
    }
    for (int r = 0; r < mr; ++r) {
      const uint16_t* ar = t.a + r * t.lda + c * t.kcp;
      const float sar = t.sa[r * t.nch + c];
      float s[kNR] = {};
      for (int64_t q = 0; q < nq; ++q) {
        const float ao = bf16_value(ar[2 * q + 1]), ae = bf16_value(ar[2 * q]);
        const float* w = bw.data() + q * 2 * kNR;
        for (int j = 0; j < kNR; ++j) {
          const float bo = w[j], be = w[kNR + j];
          if constexpr (kExactProducts) {
            s[j] = s[j] + ao * bo;
            s[j] = s[j] + ae * be;
          } else {
            s[j] = std::fma(ae, be, std::fma(ao, bo, s[j]));
          }
        }
      }
      float* o = ct + r * t.ldo;
      for (int j = 0; j < kNR; ++j) {
        const float p = sar * t.sb[c * kNR + j];
        const float term = s[j] * p;
        o[j] = o[j] + term;
      }
    }
  }
}
void tile_scalar(float* ct, const TileArgs& t, int mr, bool products_exact) {
  SNIP_ASSERT(t.ks.c0 == 0 && t.ks.c1 == t.nch && t.ks.g0 == 0 && t.ks.g1 < 0);  // one step: the whole of K
  if (products_exact)
    tile_scalar_rows<true>(ct, t, mr);
  else
    tile_scalar_rows<false>(ct, t, mr);
}

#if defined(__x86_64__)
// Named accumulators and inline asm for the dot-product instruction, as in qgemm.cpp's VNNI
// kernel: GCC 12 spilled an accumulator array to the stack on every iteration.
// (GCC 12's _mm512_slli_epi32 starts from _mm512_undefined_epi32(), which -Wmaybe-uninitialized
// reports once per inlined call; the value is never read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SNIP_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define SNIP_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define SNIP_DPBF16(acc, a, b) asm("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))

// The scale stage shared by both AVX-512 kernels: tile += S·fl(sa·sb) per accumulator, the
// tile starting at +0 (the first chunk adds its term to a +0 register: zeroing the tile in
// memory first compiled to a `rep stos` that took ~9% of the kernel's time at the small
// model's shapes).
#define SNIP_SCALE1(r, j)                                                    \
  {                                                                          \
    const __m512 term = _mm512_mul_ps(acc##r##j, _mm512_mul_ps(sar, sb##j)); \
    float* o = ct + r * t.ldo + 16 * j;                                      \
    const __m512 prev = c == 0 ? zero : _mm512_loadu_ps(o);                  \
    _mm512_storeu_ps(o, _mm512_add_ps(prev, term));                          \
  }
#define SNIP_SCALE(r)                                                       \
  if constexpr (MR > r) {                                                   \
    const __m512 sar = _mm512_set1_ps(t.sa[r * t.nch + c]);                 \
    SNIP_SCALE1(r, 0) SNIP_SCALE1(r, 1) SNIP_SCALE1(r, 2) SNIP_SCALE1(r, 3) \
  }
// A chunk's sums start at +0, or go on from the last step's (t.part); a chunk that goes on in
// the next step keeps them there instead of scaling them.
#define SNIP_DECL(r)                                                             \
  __m512 acc##r##0 = zero, acc##r##1 = zero, acc##r##2 = zero, acc##r##3 = zero; \
  if (MR > r && qb > 0) {                                                        \
    const float* z = t.part + r * kNR;                                           \
    acc##r##0 = _mm512_loadu_ps(z), acc##r##1 = _mm512_loadu_ps(z + 16);         \
    acc##r##2 = _mm512_loadu_ps(z + 32), acc##r##3 = _mm512_loadu_ps(z + 48);    \
  }
#define SNIP_KEEP(r)                                                          \
  if constexpr (MR > r) {                                                     \
    float* z = t.part + r * kNR;                                              \
    _mm512_storeu_ps(z, acc##r##0), _mm512_storeu_ps(z + 16, acc##r##1);      \
    _mm512_storeu_ps(z + 32, acc##r##2), _mm512_storeu_ps(z + 48, acc##r##3); \
  }

template <int MR>
SNIP_BF16_TARGET void tile_dpbf16(float* ct, const TileArgs& t) {
  const __m512 zero = _mm512_setzero_ps();
  const int64_t kq = t.kcp / 2;
  if (t.ks.c0 == 0 && t.ks.g0 == 0) numerics_detail::prefetch_tile_for_write(ct, t.ldo, MR);
  for (int64_t c = t.ks.c0; c < t.ks.c1; ++c) {
    const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 1) / 2, qb = t.ks.begin(c), qe = t.ks.end(c, nq);
    const uint16_t* bq = t.b + c * kq * kNR * 2 + qb * 128;
    const uint16_t* ap = t.a + c * t.kcp + qb * 2;
    SNIP_ROWS(SNIP_DECL)
    for (int64_t q = qb; q < qe; ++q, ap += 2, bq += 128) {
      const __m512 b0 = _mm512_castsi512_ps(_mm512_loadu_si512(bq));
      const __m512 b1 = _mm512_castsi512_ps(_mm512_loadu_si512(bq + 32));
      const __m512 b2 = _mm512_castsi512_ps(_mm512_loadu_si512(bq + 64));
      const __m512 b3 = _mm512_castsi512_ps(_mm512_loadu_si512(bq + 96));
#define SNIP_ROW(r)                                               \
  if constexpr (MR > r) {                                         \
    int32_t a2;                                                   \
    std::memcpy(&a2, ap + r * t.lda, 4);                          \
    const __m512 av = _mm512_castsi512_ps(_mm512_set1_epi32(a2)); \
    SNIP_DPBF16(acc##r##0, av, b0);                               \
    SNIP_DPBF16(acc##r##1, av, b1);                               \
    SNIP_DPBF16(acc##r##2, av, b2);                               \
    SNIP_DPBF16(acc##r##3, av, b3);                               \
  }
      SNIP_ROWS(SNIP_ROW)
#undef SNIP_ROW
    }
    if (qe < nq) {
      SNIP_ROWS(SNIP_KEEP)
      continue;
    }
    const float* sb = t.sb + c * kNR;
    const __m512 sb0 = _mm512_loadu_ps(sb), sb1 = _mm512_loadu_ps(sb + 16), sb2 = _mm512_loadu_ps(sb + 32),
                 sb3 = _mm512_loadu_ps(sb + 48);
    SNIP_ROWS(SNIP_SCALE)
  }
}

// Both operands widened to FP32 (BF16 bits << 16, exact) once per GEMM for the FMA kernels (A
// and B in each kernel's layout, below). The kernels' inner loops are then FP32 loads,
// broadcasts and FMAs, as in an FP32 GEMM: no mask or shift per B vector, and no broadcast from
// a general register (on AVX-512 CPUs that takes the port of the second FMA unit). Widening per
// tile instead redid A once per panel (3.5% of an AVX2 BF16 step).
// A for the AVX-512 kernel: [M][lda].
__attribute__((target("avx2"))) void widen_bits(float* __restrict w, const uint16_t* __restrict a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = uint32_t(a[i]) << 16;
    std::memcpy(w + i, &bits, 4);
  }
}
// o[i·kAw + r] = v[r][i] for i, r < 8: an 8 × 8 transpose (v[r]'s element i → row i's
// element r), one k of a widened A tile per stored vector.
__attribute__((target("avx2"))) inline void store_transposed8x8(float* o, const __m256 v[8]) {
  const __m256 t0a = _mm256_unpacklo_ps(v[0], v[1]), t1a = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2a = _mm256_unpacklo_ps(v[2], v[3]), t3a = _mm256_unpackhi_ps(v[2], v[3]);
  const __m256 t4a = _mm256_unpacklo_ps(v[4], v[5]), t5a = _mm256_unpackhi_ps(v[4], v[5]);
  const __m256 t6a = _mm256_unpacklo_ps(v[6], v[7]), t7a = _mm256_unpackhi_ps(v[6], v[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0a, t2a, 0x44), u1 = _mm256_shuffle_ps(t0a, t2a, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1a, t3a, 0x44), u3 = _mm256_shuffle_ps(t1a, t3a, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4a, t6a, 0x44), u5 = _mm256_shuffle_ps(t4a, t6a, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5a, t7a, 0x44), u7 = _mm256_shuffle_ps(t5a, t7a, 0xEE);
  _mm256_storeu_ps(o + 0 * kAw, _mm256_permute2f128_ps(u0, u4, 0x20));
  _mm256_storeu_ps(o + 1 * kAw, _mm256_permute2f128_ps(u1, u5, 0x20));
  _mm256_storeu_ps(o + 2 * kAw, _mm256_permute2f128_ps(u2, u6, 0x20));
  _mm256_storeu_ps(o + 3 * kAw, _mm256_permute2f128_ps(u3, u7, 0x20));
  _mm256_storeu_ps(o + 4 * kAw, _mm256_permute2f128_ps(u0, u4, 0x31));
  _mm256_storeu_ps(o + 5 * kAw, _mm256_permute2f128_ps(u1, u5, 0x31));
  _mm256_storeu_ps(o + 6 * kAw, _mm256_permute2f128_ps(u2, u6, 0x31));
  _mm256_storeu_ps(o + 7 * kAw, _mm256_permute2f128_ps(u3, u7, 0x31));
}
// Eight BF16 codes widened to FP32 (their bits << 16).
__attribute__((target("avx2"))) inline __m256 widen8(const uint16_t* c) {
  return _mm256_castsi256_ps(
      _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))), 16));
}
// A for the AVX2 kernel: rows m0 … m1−1 (m0 a multiple of 6) into their tiles, each [lda][kAw]
// (a k's 6 row elements side by side, 2 zeros after them: the 8 × 8 transposes below write whole
// vectors); rows past M are zeros. Its broadcasts then read one stream, not 6 rows lda apart
// (on a weight-gradient GEMM, lda = tokens, in the same few L1 sets). On AVX-512, whose kernel
// does twice the work per broadcast, the larger copy cost more than it saved.
__attribute__((target("avx2"))) void widen_rows(float* __restrict w, const uint16_t* __restrict a, int64_t lda,
                                                int64_t m0, int64_t m1, int64_t M) {
  for (int64_t t0 = m0; t0 < m1; t0 += kTileRowsMax) {
    float* wt = w + (t0 / kTileRowsMax) * lda * kAw;
    const int rows = int(std::min<int64_t>(kTileRowsMax, M - t0));
    int64_t k = 0;
    for (; k + 8 <= lda; k += 8) {
      __m256 v[8];
      for (int r = 0; r < 8; ++r) v[r] = r < rows ? widen8(a + (t0 + r) * lda + k) : _mm256_setzero_ps();
      store_transposed8x8(wt + k * kAw, v);
    }
    for (; k < lda; ++k)
      for (int r = 0; r < kAw; ++r) {
        const uint32_t bits = r < rows ? uint32_t(a[(t0 + r) * lda + k]) << 16 : 0;
        std::memcpy(wt + k * kAw + r, &bits, 4);
      }
  }
}
// The quantizer's codes of A straight into the AVX2 kernel's widened tiles (widen_rows' layout),
// for quantize_a on the avx2 tier: the codes are not copied into P.a first and widened from there
// (a copy and a pass over A saved). Source rows r0 … r1−1 (row stride ld). rows_are_i: each is a
// row of A (K codes); full tiles among them go through 8 × 8 transposes as in widen_rows, the rows
// of a tile the batch shares with another batch one element at a time. Else each is one k of
// every row of A (M codes, a weight gradient's dYᵀ): 6 consecutive codes are one k of a tile, one
// 8-float store. Lanes 6 and 7, and rows past M in the last tile, are left as they are (the kernel
// reads lanes 0 … mr−1 only); padding k are zeroed by zero_aw_padding.
__attribute__((target("avx2"))) void place_aw(float* __restrict aw, const numerics_detail::PackGeometry& G,
                                              bool rows_are_i, int64_t r0, int64_t r1, const uint16_t* src,
                                              int64_t ld) {
  const int64_t lda = G.lda();
  if (!rows_are_i) {
    // Tile by tile, so each tile's k are written in order (one run of (r1 − r0) · 32 bytes).
    int64_t at[64];  // where k = r0 + kk goes in the tile
    SNIP_ASSERT(r1 - r0 <= 64);
    for (int64_t k = r0; k < r1; ++k) at[k - r0] = ((k / G.kc) * G.kcp + k % G.kc) * kAw;
    int64_t t = 0;
    for (; t * kTileRowsMax + 8 <= G.M; ++t) {  // the 8-code loads stay within the rows
      float* w = aw + t * lda * kAw;
      const uint16_t* s = src + t * kTileRowsMax;
      for (int64_t kk = 0; kk < r1 - r0; ++kk) _mm256_storeu_ps(w + at[kk], widen8(s + kk * ld));
    }
    for (; t * kTileRowsMax < G.M; ++t)
      for (int64_t kk = 0; kk < r1 - r0; ++kk)
        for (int r = 0; r < kTileRowsMax && t * kTileRowsMax + r < G.M; ++r)
          aw[t * lda * kAw + at[kk] + r] = bf16_value(src[kk * ld + t * kTileRowsMax + r]);
    return;
  }
  const int64_t t_first = (r0 + kTileRowsMax - 1) / kTileRowsMax, t_end = r1 / kTileRowsMax;  // whole tiles
  for (int64_t t = t_first; t < t_end; ++t) {
    float* wt = aw + t * lda * kAw;
    const uint16_t* rows = src + (t * kTileRowsMax - r0) * ld;
    for (int64_t c = 0; c < G.nch; ++c) {
      const int64_t len = G.chunk_len(c);
      const uint16_t* sc = rows + c * G.kc;
      float* wc = wt + c * G.kcp * kAw;
      int64_t k = 0;
      for (; k + 8 <= len; k += 8) {
        __m256 v[8];
        for (int r = 0; r < kTileRowsMax; ++r) v[r] = widen8(sc + r * ld + k);
        v[6] = v[7] = _mm256_setzero_ps();
        store_transposed8x8(wc + k * kAw, v);
      }
      for (; k < len; ++k)
        for (int r = 0; r < kTileRowsMax; ++r) wc[k * kAw + r] = bf16_value(sc[r * ld + k]);
    }
  }
  // Rows of tiles this batch shares with the next or the previous one (or the last, short tile).
  auto one_row = [&](int64_t m) {
    const uint16_t* sr = src + (m - r0) * ld;
    float* w = aw + (m / kTileRowsMax) * lda * kAw + m % kTileRowsMax;
    for (int64_t c = 0; c < G.nch; ++c) {
      const uint16_t* sc = sr + c * G.kc;
      float* wc = w + c * G.kcp * kAw;
      for (int64_t k = 0, len = G.chunk_len(c); k < len; ++k) wc[k * kAw] = bf16_value(sc[k]);
    }
  };
  const int64_t whole0 = std::min(r1, t_first * kTileRowsMax), whole1 = std::max(whole0, t_end * kTileRowsMax);
  for (int64_t m = r0; m < whole0; ++m) one_row(m);
  for (int64_t m = whole1; m < r1; ++m) one_row(m);
}
// The AVX-512 FMA kernel's widened A ([M][lda], widen_bits' layout) from the quantizer's codes,
// as place_aw does for the AVX2 kernel's: whole rows (rows_are_i) chunk by chunk, or through
// place_transposed_a's 8 × 8 transposes.
void place_aw_fma(float* __restrict aw, const numerics_detail::PackGeometry& G, bool rows_are_i, int64_t r0, int64_t r1,
                  const uint16_t* src, int64_t ld) {
  if (!rows_are_i) {
    numerics_detail::place_transposed_a(aw, G, r0, r1, src, ld, 0);
    return;
  }
  const int64_t lda = G.lda();
  for (int64_t m = r0; m < r1; ++m)
    for (int64_t c = 0; c < G.nch; ++c)
      widen_bits(aw + m * lda + c * G.kcp, src + (m - r0) * ld + c * G.kc, G.chunk_len(c));
}
// The padding k of every chunk of odd length in the widened A (for_avx2: the AVX2 kernel's tiles,
// else [M][lda]) as zeros: the kernel multiplies them by B's zero padding, and 0 · (left-over
// memory) could be a NaN.
void zero_aw_padding(float* aw, const numerics_detail::PackGeometry& G, bool for_avx2) {
  const int64_t lda = G.lda(), tiles = (G.M + kTileRowsMax - 1) / kTileRowsMax;
  for (int64_t c = 0; c < G.nch; ++c)
    for (int64_t k = G.chunk_len(c); k < G.kcp; ++k) {
      if (for_avx2)
        for (int64_t t = 0; t < tiles; ++t) std::memset(aw + (t * lda + c * G.kcp + k) * kAw, 0, kAw * sizeof(float));
      else
        for (int64_t m = 0; m < G.M; ++m) aw[m * lda + c * G.kcp + k] = 0.0f;
    }
}
// B's k pairs q0 … q1−1 of all panels ([panel][chunk][k pair] in order, per_panel of them per
// panel). for_avx2: the AVX2 kernel's layout, each panel as 4 strips of 16 columns, each strip
// [chunk][k pair][odd, even][16]: its 16-column passes then read B in order, not 64 bytes of
// every 512 (the AVX-512 kernel, which uses all 64 columns of a pair at once, keeps
// [chunk][k pair][odd, even][64]).
__attribute__((target("avx2"))) void widen_pairs(float* __restrict bw, const uint16_t* __restrict b, int64_t q0,
                                                 int64_t q1, int64_t per_panel, bool for_avx2) {
  const __m256i high = _mm256_set1_epi32(int32_t(0xFFFF0000u));
  for (int64_t q = q0; q < q1; ++q) {
    const uint16_t* bq = b + q * 2 * kNR;  // 64 columns' (even, odd) pairs: 32 bits each
    const int64_t p = q / per_panel, i = q % per_panel;
    for (int jb = 0; jb < kNR / 16; ++jb) {
      float* w = for_avx2 ? bw + p * per_panel * 2 * kNR + jb * per_panel * 32 + i * 32 : bw + q * 2 * kNR + jb * 16;
      const int64_t even_at = for_avx2 ? 16 : kNR;
      for (int h = 0; h < 16; h += 8) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq + 2 * (jb * 16 + h)));
        _mm256_storeu_ps(w + h, _mm256_castsi256_ps(_mm256_and_si256(x, high)));
        _mm256_storeu_ps(w + even_at + h, _mm256_castsi256_ps(_mm256_slli_epi32(x, 16)));
      }
    }
  }
}
// for_avx2: A and B in the AVX2 kernel's layouts (widen_rows, widen_pairs), else the AVX-512 one's.
// a_ready: A is already in aw, in the kernel's layout (written by quantize_a's sink).
void widen_operands(const Packed& P, std::vector<float>& aw, std::vector<float>& bw, int nchunks, bool for_avx2,
                    bool a_ready) {
  const int64_t lda = P.lda(), pairs = P.npanel * P.nch * (P.kcp / 2);
  grow(bw, pairs * 2 * kNR);
  if (!a_ready && for_avx2) {
    const int64_t tiles = (P.M + kTileRowsMax - 1) / kTileRowsMax;
    grow(aw, tiles * kAw * lda);
    detail::parallel_chunks(nchunks, tiles, 8, [&](int, int64_t t0, int64_t t1) {
      widen_rows(aw.data(), P.a.data(), lda, t0 * kTileRowsMax, t1 * kTileRowsMax, P.M);
    });
  } else if (!a_ready) {
    grow(aw, P.M * lda);
    detail::parallel_chunks(nchunks, P.M, 64, [&](int, int64_t m0, int64_t m1) {
      widen_bits(aw.data() + m0 * lda, P.a.data() + m0 * lda, (m1 - m0) * lda);
    });
  }
  detail::parallel_chunks(nchunks, pairs, 256, [&](int, int64_t q0, int64_t q1) {
    widen_pairs(bw.data(), P.b.data(), q0, q1, P.nch * (P.kcp / 2), for_avx2);
  });
}

// vdpbf16ps's two fmas on the widened operands (widen_operands): the IEEE kernel for CPUs
// without AVX512_BF16 and for operands where vdpbf16ps's flushing could change a result. Per k
// pair, B's 4 odd vectors meet each row's odd A element, then its 4 even vectors the even one
// (24 accumulators, 4 B vectors, a broadcast: within the 32 registers).
#define SNIP_FMA_TARGET __attribute__((target("avx512f,avx512bw,avx512vl")))
template <int MR>
SNIP_FMA_TARGET void tile_fma(float* ct, const TileArgs& t) {
  const __m512 zero = _mm512_setzero_ps();
  const int64_t kq = t.kcp / 2;
  if (t.ks.c0 == 0 && t.ks.g0 == 0) numerics_detail::prefetch_tile_for_write(ct, t.ldo, MR);
  for (int64_t c = t.ks.c0; c < t.ks.c1; ++c) {
    const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 1) / 2, qb = t.ks.begin(c), qe = t.ks.end(c, nq);
    const float* bq = t.bw + c * kq * kNR * 2 + qb * 2 * kNR;
    const float* ap = t.aw + c * t.kcp + qb * 2;
    SNIP_ROWS(SNIP_DECL)
    for (int64_t q = qb; q < qe; ++q, ap += 2, bq += 2 * kNR) {
      for (int half = 1; half >= 0; --half) {  // the odd elements, then the even ones
        const float* bh = bq + (1 - half) * kNR;
        const __m512 b0 = _mm512_loadu_ps(bh), b1 = _mm512_loadu_ps(bh + 16), b2 = _mm512_loadu_ps(bh + 32),
                     b3 = _mm512_loadu_ps(bh + 48);
#define SNIP_ROW(r)                                         \
  if constexpr (MR > r) {                                   \
    const __m512 av = _mm512_set1_ps(ap[r * t.lda + half]); \
    acc##r##0 = _mm512_fmadd_ps(av, b0, acc##r##0);         \
    acc##r##1 = _mm512_fmadd_ps(av, b1, acc##r##1);         \
    acc##r##2 = _mm512_fmadd_ps(av, b2, acc##r##2);         \
    acc##r##3 = _mm512_fmadd_ps(av, b3, acc##r##3);         \
  }
        SNIP_ROWS(SNIP_ROW)
#undef SNIP_ROW
        asm volatile("" ::: "memory");  // the even vectors load after the odd ones are used
      }
    }
    if (qe < nq) {
      SNIP_ROWS(SNIP_KEEP)
      continue;
    }
    const float* sb = t.sb + c * kNR;
    const __m512 sb0 = _mm512_loadu_ps(sb), sb1 = _mm512_loadu_ps(sb + 16), sb2 = _mm512_loadu_ps(sb + 32),
                 sb3 = _mm512_loadu_ps(sb + 48);
    SNIP_ROWS(SNIP_SCALE)
  }
}
#undef SNIP_DECL
#undef SNIP_KEEP
#undef SNIP_SCALE
#undef SNIP_SCALE1
#undef SNIP_ROWS
#undef SNIP_DPBF16

// AVX2 kernel (x86-64-v3): 256-bit FMAs in vdpbf16ps's order, as tile_fma, on the widened
// operands. 16 columns at a time: per k pair, B's odd elements (2 vectors) meet each row's odd A
// element, then its even elements the even one: 12 accumulators, 2 B vectors and one broadcast,
// within AVX2's 16 registers.
#define SNIP_AVX2_TARGET __attribute__((target("avx2,fma")))
#define SNIP_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
// acc0 += a·b0, acc1 += a·b1 with a broadcast from memory, as one asm block with its own scratch
// register: with the intrinsics GCC 12 ran out of AVX2's 16 registers (12 sums, 2 B vectors and
// a broadcast) and shuffled them with register copies, a quarter of the kernel's instructions.
#define SNIP_BCAST_FMA2(acc0, acc1, a, b0, b1)                                                           \
  {                                                                                                      \
    __m256 scratch;                                                                                      \
    asm("vbroadcastss %[av], %[t]\n\tvfmadd231ps %[bv0], %[t], %[s0]\n\tvfmadd231ps %[bv1], %[t], %[s1]" \
        : [s0] "+x"(acc0), [s1] "+x"(acc1), [t] "=&x"(scratch)                                           \
        : [av] "m"(a), [bv0] "x"(b0), [bv1] "x"(b1));                                                    \
  }
// How far ahead (floats: 32 k pairs, 2 KB) the kernel prefetches its A tile. A slice's first
// pass (strip 0 of 4) reads it from L2 or L3, and on the larger GEMMs (widened A of several MB)
// the broadcasts then waited on it: the prefetch took 10-15% off a T4096 wgrad or dgrad GEMM
// with N = 688 (bench/numerics, RESULTS.md).
constexpr int kAPrefetch = 32 * 2 * kAw;
template <int MR>
SNIP_AVX2_TARGET void tile_avx2(float* ct, const TileArgs& t) {
  const __m256 zero = _mm256_setzero_ps();
  const int64_t kq = t.kcp / 2;
  if (t.ks.c0 == 0 && t.ks.g0 == 0) numerics_detail::prefetch_tile_for_write(ct, t.ldo, MR);
  for (int jb = 0; jb < 4; ++jb) {
    for (int64_t c = t.ks.c0; c < t.ks.c1; ++c) {
      const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 1) / 2, qb = t.ks.begin(c), qe = t.ks.end(c, nq);
      const float* bq = t.bw + jb * t.nch * kq * 32 + (c * kq + qb) * 32;  // widen_pairs' AVX2 layout
      const float* ap = t.aw + (c * t.kcp + qb * 2) * kAw;
#define SNIP_DECL(r)                                         \
  __m256 acc##r##0 = zero, acc##r##1 = zero;                 \
  if (MR > r && qb > 0)                                      \
    acc##r##0 = _mm256_loadu_ps(t.part + r * kNR + jb * 16), \
    acc##r##1 = _mm256_loadu_ps(t.part + r * kNR + jb * 16 + 8);
      SNIP_ROWS(SNIP_DECL)
#undef SNIP_DECL
      for (int64_t q = qb; q < qe; ++q, ap += 2 * kAw, bq += 32) {
        _mm_prefetch(reinterpret_cast<const char*>(ap + kAPrefetch), _MM_HINT_T0);
        {
          const __m256 b0 = _mm256_loadu_ps(bq), b1 = _mm256_loadu_ps(bq + 8);
#define SNIP_ROW(r) \
  if constexpr (MR > r) SNIP_BCAST_FMA2(acc##r##0, acc##r##1, ap[kAw + r], b0, b1)
          SNIP_ROWS(SNIP_ROW)
#undef SNIP_ROW
        }
        // The even elements are loaded after the odd ones are used: 4 live B vectors would
        // leave too few registers for the accumulators.
        asm volatile("" ::: "memory");
        {
          const __m256 b0 = _mm256_loadu_ps(bq + 16), b1 = _mm256_loadu_ps(bq + 24);
#define SNIP_ROW(r) \
  if constexpr (MR > r) SNIP_BCAST_FMA2(acc##r##0, acc##r##1, ap[r], b0, b1)
          SNIP_ROWS(SNIP_ROW)
#undef SNIP_ROW
        }
      }
      if (qe < nq) {  // the chunk goes on in the next step
#define SNIP_KEEP(r)                                         \
  if constexpr (MR > r)                                      \
    _mm256_storeu_ps(t.part + r * kNR + jb * 16, acc##r##0), \
        _mm256_storeu_ps(t.part + r * kNR + jb * 16 + 8, acc##r##1);
        SNIP_ROWS(SNIP_KEEP)
#undef SNIP_KEEP
        continue;
      }
      const float* sb = t.sb + c * kNR + jb * 16;
      const __m256 sb0 = _mm256_loadu_ps(sb), sb1 = _mm256_loadu_ps(sb + 8);
#define SNIP_SCALE(r)                                                                   \
  if constexpr (MR > r) {                                                               \
    const __m256 sar = _mm256_set1_ps(t.sa[r * t.nch + c]);                             \
    float* o = ct + r * t.ldo + jb * 16;                                                \
    const __m256 t0 = _mm256_mul_ps(acc##r##0, _mm256_mul_ps(sar, sb0));                \
    const __m256 t1 = _mm256_mul_ps(acc##r##1, _mm256_mul_ps(sar, sb1));                \
    _mm256_storeu_ps(o, _mm256_add_ps(c == 0 ? zero : _mm256_loadu_ps(o), t0));         \
    _mm256_storeu_ps(o + 8, _mm256_add_ps(c == 0 ? zero : _mm256_loadu_ps(o + 8), t1)); \
  }
      SNIP_ROWS(SNIP_SCALE)
#undef SNIP_SCALE
    }
  }
}
#undef SNIP_ROWS
#undef SNIP_BCAST_FMA2

void tile_avx2_any(float* ct, const TileArgs& t, int mr) {
  numerics_detail::with_tile_rows(mr, [&](auto rows) { tile_avx2<decltype(rows)::value>(ct, t); });
}
#pragma GCC diagnostic pop

void tile_dpbf16_any(float* ct, const TileArgs& t, int mr) {
  numerics_detail::with_tile_rows(mr, [&](auto rows) { tile_dpbf16<decltype(rows)::value>(ct, t); });
}
void tile_fma_any(float* ct, const TileArgs& t, int mr) {
  numerics_detail::with_tile_rows(mr, [&](auto rows) { tile_fma<decltype(rows)::value>(ct, t); });
}

#else
void tile_dpbf16_any(float*, const TileArgs&, int) {
  SNIP_ASSERT_MSG(false, "no AVX512-BF16 kernel on this CPU");
}
void tile_fma_any(float*, const TileArgs&, int) {
  SNIP_ASSERT_MSG(false, "no AVX-512 kernel on this CPU");
}
void tile_avx2_any(float*, const TileArgs&, int) {
  SNIP_ASSERT_MSG(false, "no AVX2 kernel on this CPU");
}
void widen_operands(const Packed&, std::vector<float>&, std::vector<float>&, int, bool, bool) {
  SNIP_ASSERT_MSG(false, "no FMA kernel on this CPU");
}
void place_aw(float*, const numerics_detail::PackGeometry&, bool, int64_t, int64_t, const uint16_t*, int64_t) {
  SNIP_ASSERT_MSG(false, "no AVX2 kernel on this CPU");
}
void place_aw_fma(float*, const numerics_detail::PackGeometry&, bool, int64_t, int64_t, const uint16_t*, int64_t) {
  SNIP_ASSERT_MSG(false, "no AVX-512 kernel on this CPU");
}
void zero_aw_padding(float*, const numerics_detail::PackGeometry&, bool) {
  SNIP_ASSERT_MSG(false, "no FMA kernel on this CPU");
}
#endif

Bf16Kernel choose_kernel(const ElemRange& ra, const ElemRange& rb) {
  const IsaTier tier = isa_tier();
  if (tier >= IsaTier::avx512bf16 && qgemm_bf16_dpbf16_safe(ra.emin, rb.emin, ra.subnormal || rb.subnormal))
    return Bf16Kernel::dpbf16;
  if (tier >= IsaTier::avx512) return Bf16Kernel::fma;
  if (tier >= IsaTier::avx2) return Bf16Kernel::avx2;
  return Bf16Kernel::scalar;
}

}  // namespace

bool qgemm_bf16_dpbf16_safe(int ea_min, int eb_min, bool any_subnormal) {
  return !any_subnormal && ea_min + eb_min >= 142;
}

bool qgemm_bf16_products_exact(int ea_min, int ea_max, int eb_min, int eb_max) {
  if (ea_min == 255 || eb_min == 255) return ea_max < 255 && eb_max < 255;  // an all-zero operand
  return ea_min + eb_min >= 119 && ea_max + eb_max <= 380;
}

Bf16Kernel qgemm_bf16_last_kernel() {
  return g_last_kernel;
}

Bf16Operand bf16_operand(const uint16_t* bits, const float* values, const float* scales, int64_t rows, int64_t cols,
                         const QuantSpec& spec, bool reduce_along_cols) {
  const numerics_detail::ViewGeometry v = numerics_detail::view_geometry(rows, cols, spec, reduce_along_cols);
  Bf16Operand o;
  o.bits = bits, o.values = values, o.scales = scales;
  o.rs = v.rs, o.cs = v.cs;
  o.scale_rs = v.scale_rs, o.scale_cs = v.scale_cs;
  o.block_i = v.block_i, o.block_k = v.block_k;
  return o;
}

int64_t qgemm_bf16_chunk(const Bf16Operand& A, const Bf16Operand& B, int64_t K) {
  // Unscaled operands have no blocks along K; the whole of K is one chunk for them.
  return numerics_detail::nested_chunk(K, K, A.scales ? A.block_k : 0, B.scales ? B.block_k : 0);
}

struct Bf16Gemm::Impl : numerics_detail::GemmBuffers<Packed> {
  std::vector<float> aw, bw;  // the FMA kernels' widened operands (widen_operands)
  bool a_in_aw = false;       // quantize_a wrote A into aw (in aw_avx2's layout), not into P.a
  bool aw_avx2 = false;       // aw holds the AVX2 kernel's layout (else the AVX-512 FMA kernel's)
};

namespace {
// Whether quantize_a writes A straight into a widened layout, and whose (*for_avx2: the AVX2
// kernel's, else the AVX-512 FMA kernel's): on the tiers whose kernel does not depend on what
// packing learns about the operands, avx2 (the AVX2 kernel) and avx512, avx512vnni (FMA). With
// a BF16 unit the range decides between vdpbf16ps and FMA, so A goes into P.a there.
bool a_widened_by_sink(bool* for_avx2) {
  const IsaTier t = isa_tier();
  *for_avx2 = t < IsaTier::avx512;
  return t >= IsaTier::avx2 && t < IsaTier::avx512bf16;
}

class ASinkW final : public RangeSink {
 public:
  ASinkW(Packed& P, float* aw, bool for_avx2, bool rows_are_i)
      : RangeSink(P, rows_are_i), aw_(aw), for_avx2_(for_avx2) {}
  void place(int64_t r0, int64_t r1, const void* codes, int64_t ld) override {
    const uint16_t* src = static_cast<const uint16_t*>(codes);
    note(src, (r1 - r0) * ld, P_.ra);
    if (for_avx2_)
      place_aw(aw_, P_, rows_are_i_, r0, r1, src, ld);
    else
      place_aw_fma(aw_, P_, rows_are_i_, r0, r1, src, ld);
  }

 private:
  float* const aw_;
  const bool for_avx2_;
};
}  // namespace

Bf16Gemm::Bf16Gemm() : impl_(new Impl) {}
Bf16Gemm::~Bf16Gemm() {
  delete impl_;
}

Bf16Gemm& bf16_gemm_workspace() {
  thread_local Bf16Gemm g;
  return g;
}

void Bf16Gemm::prepare(int64_t M, int64_t N, int64_t K, const Bf16Operand& A, const Bf16Operand& B) {
  Packed& P = impl_->P;
  numerics_detail::prepare_packed(P, M, N, K, qgemm_bf16_chunk(A, B, K),
                                  "qgemm_bf16: the operands' scale blocks along K do not nest");
  impl_->a_in_aw = false;
  P.ra = P.rb = ElemRange{};
}

void Bf16Gemm::pack_a(const Bf16Operand& A) {
  Packed& P = impl_->P;
  impl_->a_in_aw = false;
  const int nchunks = detail::chunks_for_threads(quant_threads());
  bool rows_are_i = true;
  P.ra = dense_bits(A, P.M, P.K, &rows_are_i) ? pack_a_dense(P, A, rows_are_i, nchunks) : ::snip::pack_a(P, A, nchunks);
}

void Bf16Gemm::pack_b(const Bf16Operand& B) {
  Packed& P = impl_->P;
  const int nchunks = detail::chunks_for_threads(quant_threads());
  bool rows_are_i = true;
  P.rb = dense_bits(B, P.N, P.K, &rows_are_i) ? pack_b_dense(P, B, rows_are_i, nchunks) : ::snip::pack_b(P, B, nchunks);
}

namespace {
// The operand's block scales as quantize_codes_into writes them (none for BF16).
float* scales_for(std::vector<float>& v, int64_t rows, int64_t cols, const QuantSpec& spec) {
  if (spec.format == ElemFormat::bf16) return nullptr;
  grow(v, e2m1_scale_count(rows, cols, spec));
  return v.data();
}
}  // namespace

void Bf16Gemm::quantize_a(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                          const char* tensor_name, bool reduce_along_cols) {
  Packed& P = impl_->P;
  float* scales = scales_for(impl_->scales_a, rows, cols, spec);
  P.ra = ElemRange{};
  impl_->a_in_aw = a_widened_by_sink(&impl_->aw_avx2);
  const Bf16Operand view = bf16_operand(nullptr, nullptr, scales, rows, cols, spec, reduce_along_cols);
  if (impl_->a_in_aw) {
    std::vector<float>& aw = impl_->aw;
    grow(aw, impl_->aw_avx2 ? (P.M + kTileRowsMax - 1) / kTileRowsMax * kAw * P.lda() : P.M * P.lda());
    ASinkW sink(P, aw.data(), impl_->aw_avx2, reduce_along_cols);
    numerics_detail::quantize_codes_into(sink, true, scales, x, rows, cols, spec, key, tensor_name);
    zero_aw_padding(aw.data(), P, impl_->aw_avx2);
    numerics_detail::finish_a(P, view, false);
    return;
  }
  ASink16 sink(P, reduce_along_cols);
  numerics_detail::quantize_codes_into(sink, true, scales, x, rows, cols, spec, key, tensor_name);
  numerics_detail::finish_a(P, view);
}

void Bf16Gemm::quantize_b(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                          const char* tensor_name, bool reduce_along_cols) {
  Packed& P = impl_->P;
  float* scales = scales_for(impl_->scales_b, rows, cols, spec);
  P.rb = ElemRange{};
  numerics_detail::zero_b_padding(P);
  BSink16 sink(P, reduce_along_cols);
  numerics_detail::quantize_codes_into(sink, true, scales, x, rows, cols, spec, key, tensor_name);
  numerics_detail::set_b_scales(P, bf16_operand(nullptr, nullptr, scales, rows, cols, spec, reduce_along_cols), 0,
                                P.npanel);
}

std::string Bf16Gemm::packing_difference(const Bf16Gemm& other) const {
  const Packed &P = impl_->P, &Q = other.impl_->P;
  // A's elements as BF16 bits, from P.a or from the widened layout quantize_a wrote.
  auto a_bits = [](const Impl& g, int64_t m, int64_t at) -> uint16_t {
    if (!g.a_in_aw) return g.P.a[size_t(m * g.P.lda() + at)];
    const float w = g.aw_avx2 ? g.aw[size_t(((m / kTileRowsMax) * g.P.lda() + at) * kAw + m % kTileRowsMax)]
                              : g.aw[size_t(m * g.P.lda() + at)];
    return uint16_t(fbits(w) >> 16);
  };
  return numerics_detail::packing_difference(P, Q, [&]() -> std::string {
    if (P.ra.emin != Q.ra.emin || P.ra.subnormal != Q.ra.subnormal || P.ra.inexact != Q.ra.inexact)
      return "A's element range differs";
    if (P.rb.emin != Q.rb.emin || P.rb.subnormal != Q.rb.subnormal || P.rb.inexact != Q.rb.inexact)
      return "B's element range differs";
    for (int64_t m = 0; m < P.M; ++m)
      for (int64_t at = 0; at < P.lda(); ++at)
        if (a_bits(*impl_, m, at) != a_bits(*other.impl_, m, at))
          return "packed A differs at " + std::to_string(m * P.lda() + at);
    return {};
  });
}

bool Bf16Gemm::run(float* C, int64_t ldc) {
  const Packed& P = impl_->P;
  if (P.ra.inexact || P.rb.inexact) return false;
  const Bf16Kernel kernel = choose_kernel(P.ra, P.rb);
  const bool exact =
      qgemm_bf16_products_exact(P.ra.subnormal ? 1 : P.ra.emin, P.ra.emax, P.rb.subnormal ? 1 : P.rb.emin, P.rb.emax);
  g_last_kernel = kernel;
  const int64_t lda = P.lda();
  const bool widened = kernel == Bf16Kernel::fma || kernel == Bf16Kernel::avx2;
  SNIP_ASSERT_MSG(!impl_->a_in_aw || kernel == (impl_->aw_avx2 ? Bf16Kernel::avx2 : Bf16Kernel::fma),
                  "qgemm_bf16: A was quantized into another kernel's layout (the tier changed in between)");
  if (widened)
    widen_operands(P, impl_->aw, impl_->bw, detail::chunks_for_threads(quant_threads()), kernel == Bf16Kernel::avx2,
                   impl_->a_in_aw);
  numerics_detail::run_packed(
      P, C, ldc, kernel != Bf16Kernel::scalar,
      [&](float* ct, const numerics_detail::TileBase<Bf16Elems>& base, int64_t m0, int64_t p, int mr) {
        const TileArgs t{base,
                         !widened                     ? nullptr
                         : kernel == Bf16Kernel::avx2 ? impl_->aw.data() + (m0 / kTileRowsMax) * kAw * lda  // m0: 6·n
                                                      : impl_->aw.data() + m0 * lda,
                         widened ? impl_->bw.data() + p * P.nch * P.kcp * kNR : nullptr};
        switch (kernel) {
          case Bf16Kernel::dpbf16:
            tile_dpbf16_any(ct, t, mr);
            break;
          case Bf16Kernel::fma:
            tile_fma_any(ct, t, mr);
            break;
          case Bf16Kernel::avx2:
            tile_avx2_any(ct, t, mr);
            break;
          case Bf16Kernel::scalar:
            tile_scalar(ct, t, mr, exact);
            break;
        }
      });
  return true;
}

bool qgemm_bf16(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const Bf16Operand& A, const Bf16Operand& B) {
  return numerics_detail::empty_product(C, ldc, M, N, K) ||
         numerics_detail::packed_product(bf16_gemm_workspace(), C, ldc, M, N, K, A, B);
}

}  // namespace snip
