// Block-scaled E2M1 GEMM on exact int32 block sums (snip/qgemm.h, docs/FORMATS.md section 6.4).
//
// Packing. A (M, K) becomes unsigned bytes a + 12 ∈ [0, 24], row-major, each K chunk padded to a
// multiple of 4 bytes; B (N, K) becomes signed panels of 64 columns, [panel][chunk][K/4][64][4]
// bytes, so one 64-byte load is 16 columns × 4 consecutive k, the layout of vpdpbusd's operand.
// Since Σ (a+12)·b = Σ a·b + 12·Σ b, each (panel, chunk) also stores −12·Σ_k b per column,
// which the int32 accumulators start from. Padding has b = 0 and contributes nothing.
//
// Kernel. A 6 × 64 output tile keeps 24 int32 accumulators (6 rows × 4 vectors of 16 columns) in
// registers for one chunk: per 4 k, 4 loads of B, 6 broadcasts of A, 24 vpdpbusd. At the end of
// the chunk each accumulator is converted and scaled into the FP32 tile in memory:
// tile = tile + float(S)·fl(sa·sb'), sb' = sb·0.25 (the codes are 2q). The scalar kernel does the
// same integer sums and the same three FP32 operations per chunk, so both give the same bits.
#include "snip/qgemm.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "code_sink.h"
#include "packed_gemm.h"
#include "parallel.h"
#include "qgemm_common.h"
#include "snip/error.h"
#include "snip/isa.h"
#include "snip/thread_pool.h"

namespace snip {

namespace {

constexpr int kNR = numerics_detail::kPanel;
constexpr int kOffset = 12;          // A's unsigned offset: 2q + 12 ∈ [0, 24]
constexpr int64_t kMaxChunk = 4096;  // 4096 · 144 < 2^24: a chunk sum converts to FP32 exactly

QGemmMode mode_from_env() {
  return parse_qgemm_mode(std::getenv("SNIP_QGEMM"));
}

std::atomic<int> g_mode{-1};

using numerics_detail::grow;

// The element type of packed_gemm.h's skeleton: A as unsigned bytes 2q + 12, B as the int8 codes
// 2q in quads of k, int32 sums, B's scales times 0.25 (the codes are 2q).
struct E2M1Codes {
  using ACode = uint8_t;
  using BCode = int8_t;
  using Sum = int32_t;
  static constexpr int kGroup = 4;
  static constexpr int kAOffset = kOffset;
  static float b_scale(float s) { return s * 0.25f; }
};

// Everything the kernels read, packed once per GEMM, and per (panel, chunk) −12·Σ_chunk b per
// column ([npanel][nch][64]).
struct Packed : numerics_detail::PackedOperands<E2M1Codes> {
  numerics_detail::AlignedVector<int32_t> corr;
};

// A (M, K) as unsigned bytes a + 12. When the reduction runs down the source's rows (code_cs !=
// 1: wgrad's dY), 64 rows of A are 64 adjacent bytes of each source row, so those are read
// row by row (a strided byte gather per element re-read each cache line 64 times).
void pack_a(Packed& P, const E2M1Operand& A, int nchunks) {
  const int64_t lda = P.nch * P.kcp;
  if (A.code_cs == 1) {
    detail::parallel_chunks(nchunks, P.M, 64, [&](int, int64_t m0, int64_t m1) {
      for (int64_t m = m0; m < m1; ++m) {
        for (int64_t c = 0; c < P.nch; ++c) {
          const int64_t len = P.chunk_len(c);
          uint8_t* d = P.a.data() + m * lda + c * P.kcp;
          const int8_t* src = A.code2 + m * A.code_rs + c * P.kc;
          for (int64_t t = 0; t < len; ++t) d[t] = uint8_t(src[t] + kOffset);
        }
      }
      numerics_detail::finish_a_rows(P, A, m0, m1);
    });
    return;
  }
  // 64×64 tiles through a local buffer: writing 64 rows of A straight from one source row hit
  // 64 lines lda bytes apart, the same L1 set when lda is a multiple of 4 KiB.
  // A dense transposed source (A's rows adjacent in each source row) goes through the quantizer
  // sink's placement and its 16 × 16 byte transposes.
  const int64_t groups = (P.M + 63) / 64;
  detail::parallel_chunks(nchunks, groups, 1, [&](int, int64_t g0, int64_t g1) {
    uint8_t tile[64][64];
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t m0 = g * 64, mn = std::min<int64_t>(64, P.M - m0);
      for (int64_t kb = 0; kb < P.K; kb += 64) {
        const int64_t kn = std::min<int64_t>(64, P.K - kb);
        if (A.code_rs == 1) {
          numerics_detail::place_transposed_a(P.a.data(), P, kb, kb + kn, m0, m0 + mn, A.code2 + kb * A.code_cs + m0,
                                              A.code_cs, kOffset);
          continue;
        }
        for (int64_t kk = 0; kk < kn; ++kk) {
          const int8_t* src = A.code2 + (kb + kk) * A.code_cs + m0 * A.code_rs;
          for (int64_t mm = 0; mm < mn; ++mm) tile[mm][kk] = uint8_t(src[mm * A.code_rs] + kOffset);
        }
        numerics_detail::store_a_tile(P, tile, m0, mn, kb, kn);
      }
      numerics_detail::finish_a_rows(P, A, m0, m0 + mn);
    }
  });
}

// B (N, K) into 64-column panels with −12·Σb per column and chunk. When the reduction runs
// down the source's rows (dgrad's W, wgrad's X), a panel's 64 columns are 64 adjacent bytes of
// each source row: read row by row, as in pack_a.
void pack_b(Packed& P, const E2M1Operand& B, int nchunks) {
  const int64_t kq = P.kcp / 4;
  detail::parallel_chunks(nchunks, P.npanel, 1, [&](int, int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t ncols = std::min<int64_t>(kNR, P.N - p * kNR);
      for (int64_t c = 0; c < P.nch; ++c) {
        const int64_t k0 = c * P.kc, len = P.chunk_len(c);
        int8_t* dst = P.b.data() + (p * P.nch + c) * kq * kNR * 4;
        int32_t* corr = P.corr.data() + (p * P.nch + c) * kNR;
        std::memset(dst, 0, size_t(kq * kNR * 4));
        int32_t sum[kNR] = {};
        if (B.code_cs == 1) {
          for (int j = 0; j < ncols; ++j) {
            const int8_t* src = B.code2 + (p * kNR + j) * B.code_rs + k0;
            for (int64_t t = 0; t < len; ++t) {
              dst[(t / 4) * kNR * 4 + j * 4 + (t % 4)] = src[t];
              sum[j] += src[t];
            }
          }
        } else {
          for (int64_t t = 0; t < len; ++t) {
            const int8_t* src = B.code2 + (k0 + t) * B.code_cs + p * kNR * B.code_rs;
            int8_t* d = dst + (t / 4) * kNR * 4 + (t % 4);
            for (int j = 0; j < ncols; ++j) {
              d[j * 4] = src[j * B.code_rs];
              sum[j] += src[j * B.code_rs];
            }
          }
        }
        for (int j = 0; j < kNR; ++j) corr[j] = -kOffset * sum[j];
      }
    }
    numerics_detail::set_b_scales(P, B, p0, p1);
  });
}

// ---- Quantizing straight into the packed layout ---------------------------------------------
// The quantizer hands over batches of at most 64 finished source rows (code_sink.h); these
// place them where pack_a / pack_b would put them. Padding (A: the offset 12, B: zeros) and the
// per-row/column scales are written outside the sinks, B's column sums after all codes are in.

// A's codes. Source rows are A's rows (reduction along the source's columns) or A's k (down
// its rows: wgrad's dY), then 64 × 64 tiles are transposed through a local buffer.
class ASink final : public numerics_detail::PackedSink<Packed> {
 public:
  ASink(Packed& P, bool rows_are_i) : PackedSink(P, rows_are_i) {}
  void place(int64_t r0, int64_t r1, const void* codes, int64_t ld) override {
    numerics_detail::place_a(P_, rows_are_i_, r0, r1, static_cast<const int8_t*>(codes), ld);
  }
  // A's rows are the source rows, contiguous when the chunks need no padding.
  uint8_t* direct_rows(int64_t& ld, int& offset) override {
    if (!rows_are_i_ || P_.kcp != P_.kc) return nullptr;
    ld = P_.lda(), offset = kOffset;
    return P_.a.data();
  }
  // Transposed (wgrad's dY): a band's strip is k = r0 … r1−1 of A's rows c0 … c1−1, moved in
  // 64-k slices through the 16 × 16 byte transposes while it is in L1.
  // With VNNI (AVX-512BW), place_a_k_rows does it with whole-line stores instead.
  bool takes_blocks(int64_t) const override { return !rows_are_i_; }
  void place_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) override;

 private:
  // 64 k at a time through place_transposed_a's 16 × 16 byte transposes.
  void place_block_portable(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) {
    for (int64_t k = r0; k < r1; k += 64)
      numerics_detail::place_transposed_a(P_.a.data(), P_, k, std::min(r1, k + 64), c0, c1, codes + (k - r0) * ld, ld,
                                          kOffset);
  }
};

// Four source rows of 16 codes each (k = 4q … 4q+3 of 16 columns) as the 64 bytes of the
// panel layout: column j's four k adjacent.
inline void interleave4x16(int8_t* d, const int8_t* s0, const int8_t* s1, const int8_t* s2, const int8_t* s3) {
#if defined(__SSE2__)
  const __m128i r0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s0));
  const __m128i r1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s1));
  const __m128i r2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s2));
  const __m128i r3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s3));
  const __m128i lo01 = _mm_unpacklo_epi8(r0, r1), hi01 = _mm_unpackhi_epi8(r0, r1);
  const __m128i lo23 = _mm_unpacklo_epi8(r2, r3), hi23 = _mm_unpackhi_epi8(r2, r3);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d), _mm_unpacklo_epi16(lo01, lo23));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 16), _mm_unpackhi_epi16(lo01, lo23));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 32), _mm_unpacklo_epi16(hi01, hi23));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(d + 48), _mm_unpackhi_epi16(hi01, hi23));
#else
  for (int j = 0; j < 16; ++j) {
    d[4 * j] = s0[j], d[4 * j + 1] = s1[j], d[4 * j + 2] = s2[j], d[4 * j + 3] = s3[j];
  }
#endif
}

// B's codes into the 64-column panels. Source rows are B's columns n (reduction along the
// source's columns: fprop's W) or B's k (down its rows: dgrad's W, wgrad's X); in the latter
// case four k of one quad are interleaved at once where the batch holds all four.
class BSink final : public numerics_detail::PackedSink<Packed> {
 public:
  BSink(Packed& P, bool rows_are_i) : PackedSink(P, rows_are_i) {}
  // Batches of whole source rows. When those are B's columns and the CPU has VNNI, they go
  // through place_b_columns (16 columns at a time, with their column sums) like strips do.
  void place(int64_t r0, int64_t r1, const void* codes, int64_t ld) override {
    if (rows_are_i_ && vector_placement()) {
      place_block(r0, r1, 0, P_.K, static_cast<const int8_t*>(codes), ld);
      return;
    }
    numerics_detail::place_b<4, 16>(P_.b.data(), P_, r0, r1, static_cast<const int8_t*>(codes), ld, rows_are_i_,
                                    [](int8_t* d, const int8_t* s, int64_t ld4, int64_t w) {
                                      for (int64_t j = 0; j < w; j += 16)
                                        interleave4x16(d + 4 * j, s + j, s + ld4 + j, s + 2 * ld4 + j, s + 3 * ld4 + j);
                                    });
  }
  // Strips of whole blocks, placed with their column sums (place_b_columns, place_b_k_rows) on
  // CPUs with VNNI: any strip when source rows are B's columns (a band's strip covers whole K
  // chunks), strips of whole panels (or the whole width, the last panel cut by N) when they are
  // B's k (a band covers whole chunks).
  bool takes_blocks(int64_t w) const override {
    return vector_placement() && (rows_are_i_ || w % kNR == 0 || w >= P_.N);
  }
  void place_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) override;
  // Whether the codes came through place_block, so the column sums are in place already.
  bool sums_done() const { return blocks_.load(std::memory_order_relaxed); }

 private:
  static bool vector_placement() { return isa_at_least(IsaTier::avx512vnni); }

  std::atomic<bool> blocks_{false};
};

// After B's codes are placed: the column scales, and −12·Σb per column and chunk (unless the
// placement summed them already).
void finish_b(Packed& P, const E2M1Operand& B, int nchunks, bool sums_done) {
  const int64_t kq = P.kcp / 4;
  detail::parallel_chunks(nchunks, P.npanel, 1, [&](int, int64_t p0, int64_t p1) {
    numerics_detail::set_b_scales(P, B, p0, p1);
    if (sums_done) return;
    for (int64_t p = p0; p < p1; ++p) {
      for (int64_t c = 0; c < P.nch; ++c) {
        const int8_t* d = P.b.data() + (p * P.nch + c) * kq * kNR * 4;
        int32_t sum[kNR] = {};
        for (int64_t q = 0; q < kq; ++q, d += kNR * 4)
          for (int j = 0; j < kNR; ++j) sum[j] += d[4 * j] + d[4 * j + 1] + d[4 * j + 2] + d[4 * j + 3];
        int32_t* corr = P.corr.data() + (p * P.nch + c) * kNR;
        for (int j = 0; j < kNR; ++j) corr[j] = -kOffset * sum[j];
      }
    }
  });
}

// The arguments of one 64-column panel × mr-row tile: the panel's column sums besides the rest.
struct TileArgs : numerics_detail::TileBase<E2M1Codes> {
  const int32_t* corr;
};

// Portable kernel: the same int32 sums and FP32 operations as the VNNI kernel, the 64 columns
// of a row side by side so the compiler vectorizes them (integer sums in any order are exact).
// B's chunk is widened to int16 once per tile ([quad][k of the quad][64]); a quad's four
// products sum to at most 4·288 = 1,152 in magnitude, so int16 lanes hold kPortableQuads = 28
// quads (32,256 < 2^15, FORMATS.md 6.4) before they are added to the int32 sums.
constexpr int64_t kPortableQuads = 28;
void tile_scalar(float* ct, const TileArgs& t, int mr) {
  SNIP_ASSERT(t.ks.c0 == 0 && t.ks.c1 == t.nch && t.ks.g0 == 0 && t.ks.g1 < 0);  // one step: the whole of K
  for (int r = 0; r < mr; ++r) std::fill(ct + r * t.ldo, ct + r * t.ldo + kNR, 0.0f);
  const int64_t kq = t.kcp / 4;
  thread_local std::vector<int16_t> bw;
  if (int64_t(bw.size()) < kq * 4 * kNR) bw.resize(size_t(kq * 4 * kNR));
  for (int64_t c = 0; c < t.nch; ++c) {
    const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 3) / 4;
    const int8_t* bc = t.b + c * kq * kNR * 4;
    for (int64_t q = 0; q < nq; ++q)
      for (int u = 0; u < 4; ++u) {
        int16_t* w = bw.data() + (4 * q + u) * kNR;
        const int8_t* bq = bc + q * kNR * 4 + u;
        for (int j = 0; j < kNR; ++j) w[j] = bq[4 * j];
      }
    for (int r = 0; r < mr; ++r) {
      const uint8_t* ar = t.a + r * t.lda + c * t.kcp;
      const float sar = t.sa[r * t.nch + c];
      int32_t s[kNR];
      for (int j = 0; j < kNR; ++j) s[j] = t.corr[c * kNR + j];
      for (int64_t q0 = 0; q0 < nq; q0 += kPortableQuads) {
        int16_t h[kNR] = {};
        for (int64_t q = q0; q < std::min(nq, q0 + kPortableQuads); ++q) {
          const int16_t a0 = ar[4 * q], a1 = ar[4 * q + 1], a2 = ar[4 * q + 2], a3 = ar[4 * q + 3];
          const int16_t* w = bw.data() + 4 * q * kNR;
          for (int j = 0; j < kNR; ++j)
            h[j] = int16_t(h[j] + a0 * w[j] + a1 * w[kNR + j] + a2 * w[2 * kNR + j] + a3 * w[3 * kNR + j]);
        }
        for (int j = 0; j < kNR; ++j) s[j] += h[j];
      }
      float* o = ct + r * t.ldo;
      for (int j = 0; j < kNR; ++j) {
        const float p = sar * t.sb[c * kNR + j];
        const float term = float(s[j]) * p;
        o[j] = o[j] + term;
      }
    }
  }
}

#if defined(__x86_64__)
#define SNIP_VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

// The accumulators are named variables and vpdpbusd is inline asm with the accumulator as an
// in/out operand: with an array and the intrinsic, GCC 12 copied and spilled the 24
// accumulators to the stack on every iteration (3× slower).
// (GCC 12's _mm512_cvtepi32_ps starts from _mm512_undefined_ps(), which -Wmaybe-uninitialized
// reports once per inlined call; the value is never read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SNIP_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define SNIP_DPBUSD(acc, a, b) asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b))
template <int MR>
SNIP_VNNI_TARGET void tile_vnni(float* ct, const TileArgs& t) {
  const __m512 zero = _mm512_setzero_ps();
  if (t.ks.c0 == 0 && t.ks.g0 == 0) numerics_detail::prefetch_tile_for_write(ct, t.ldo, MR);
  const int64_t kq = t.kcp / 4;
  for (int64_t c = t.ks.c0; c < t.ks.c1; ++c) {
    const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 3) / 4, qb = t.ks.begin(c), qe = t.ks.end(c, nq);
    const int8_t* bq = t.b + c * kq * kNR * 4 + qb * 256;
    const uint8_t* aq = t.a + c * t.kcp + qb * 4;
    // A chunk starts from its correction (−12·Σb), or goes on from the sums of the last step.
    const int32_t* from = qb == 0 ? t.corr + c * kNR : nullptr;
#define SNIP_DECL(r)                                                                                                   \
  __m512i acc##r##0, acc##r##1, acc##r##2, acc##r##3;                                                                  \
  if constexpr (MR > r) {                                                                                              \
    const int32_t* z = from ? from : t.part + r * kNR;                                                                 \
    acc##r##0 = _mm512_loadu_si512(z), acc##r##1 = _mm512_loadu_si512(z + 16), acc##r##2 = _mm512_loadu_si512(z + 32), \
    acc##r##3 = _mm512_loadu_si512(z + 48);                                                                            \
  } else {                                                                                                             \
    acc##r##0 = acc##r##1 = acc##r##2 = acc##r##3 = _mm512_setzero_si512();                                            \
  }
    SNIP_ROWS(SNIP_DECL)
#undef SNIP_DECL
    const uint8_t* ap = aq;
    for (int64_t q = qb; q < qe; ++q, ap += 4, bq += 256) {
      const __m512i b0 = _mm512_loadu_si512(bq);
      const __m512i b1 = _mm512_loadu_si512(bq + 64);
      const __m512i b2 = _mm512_loadu_si512(bq + 128);
      const __m512i b3 = _mm512_loadu_si512(bq + 192);
#define SNIP_ROW(r)                           \
  if constexpr (MR > r) {                     \
    int32_t a4;                               \
    std::memcpy(&a4, ap + r * t.lda, 4);      \
    const __m512i av = _mm512_set1_epi32(a4); \
    SNIP_DPBUSD(acc##r##0, av, b0);           \
    SNIP_DPBUSD(acc##r##1, av, b1);           \
    SNIP_DPBUSD(acc##r##2, av, b2);           \
    SNIP_DPBUSD(acc##r##3, av, b3);           \
  }
      SNIP_ROWS(SNIP_ROW)
#undef SNIP_ROW
    }
    if (qe < nq) {  // the chunk goes on in the next step
#define SNIP_KEEP(r)                                                                \
  if constexpr (MR > r) {                                                           \
    int32_t* z = t.part + r * kNR;                                                  \
    _mm512_storeu_si512(z, acc##r##0), _mm512_storeu_si512(z + 16, acc##r##1);      \
    _mm512_storeu_si512(z + 32, acc##r##2), _mm512_storeu_si512(z + 48, acc##r##3); \
  }
      SNIP_ROWS(SNIP_KEEP)
#undef SNIP_KEEP
      continue;
    }
    const float* sb = t.sb + c * kNR;
    const __m512 sb0 = _mm512_loadu_ps(sb), sb1 = _mm512_loadu_ps(sb + 16), sb2 = _mm512_loadu_ps(sb + 32),
                 sb3 = _mm512_loadu_ps(sb + 48);
#define SNIP_SCALE1(r, j)                                                                        \
  {                                                                                              \
    const __m512 term = _mm512_mul_ps(_mm512_cvtepi32_ps(acc##r##j), _mm512_mul_ps(sar, sb##j)); \
    float* o = ct + r * t.ldo + 16 * j;                                                          \
    _mm512_storeu_ps(o, _mm512_add_ps(c == 0 ? zero : _mm512_loadu_ps(o), term));                \
  }
#define SNIP_SCALE(r)                                                       \
  if constexpr (MR > r) {                                                   \
    const __m512 sar = _mm512_set1_ps(t.sa[r * t.nch + c]);                 \
    SNIP_SCALE1(r, 0) SNIP_SCALE1(r, 1) SNIP_SCALE1(r, 2) SNIP_SCALE1(r, 3) \
  }
    SNIP_ROWS(SNIP_SCALE)
#undef SNIP_SCALE
#undef SNIP_SCALE1
  }
}
#undef SNIP_ROWS
#undef SNIP_DPBUSD

// AVX2 kernel (x86-64-v3): vpmaddubsw multiplies A's unsigned bytes a + 12 ∈ [0, 24] by B's
// signed codes b ∈ [−12, 12] and adds adjacent pairs into int16 lanes: |pair| ≤ 2·24·12 = 576,
// so it never saturates. The int16 lanes then sum up to kQuadsPerWiden quads of k (at most
// 32·576 = 18,432 < 2^15, FORMATS.md 6.4) before vpmaddwd widens pairs into the int32 sums:
// the same exact integers as vpdpbusd, then the same FP32 scaling. 16 columns at a time: 6 rows
// × 2 vectors of int16 sums stay in registers, the int32 sums in a small array.
#define SNIP_AVX2_TARGET __attribute__((target("avx2,fma")))
constexpr int64_t kQuadsPerWiden = 32;
// h += maddubs(a, b) as one asm block with its own scratch register: with the intrinsics GCC 12
// computed all 12 products first and spilled half the accumulators to the stack (12 int16
// sums, 2 B vectors, a broadcast and a scratch are exactly AVX2's 16 registers).
#define SNIP_MADD_ADD(h, a, b)                                         \
  {                                                                    \
    __m256i scratch;                                                   \
    asm("vpmaddubsw %[bv], %[av], %[t]\n\tvpaddw %[t], %[acc], %[acc]" \
        : [acc] "+x"(h), [t] "=&x"(scratch)                            \
        : [av] "x"(a), [bv] "x"(b));                                   \
  }
#define SNIP_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
template <int MR>
SNIP_AVX2_TARGET void tile_avx2(float* ct, const TileArgs& t) {
  const __m256i ones = _mm256_set1_epi16(1), zero = _mm256_setzero_si256();
  const __m256 fzero = _mm256_setzero_ps();
  const int64_t kq = t.kcp / 4;
  alignas(32) int32_t s32[MR][16];
  if (t.ks.c0 == 0 && t.ks.g0 == 0) numerics_detail::prefetch_tile_for_write(ct, t.ldo, MR);
  for (int jb = 0; jb < 4; ++jb) {  // 16-column blocks of the panel
    for (int64_t c = t.ks.c0; c < t.ks.c1; ++c) {
      const int64_t nq = (std::min(t.kc, t.K - c * t.kc) + 3) / 4, qb = t.ks.begin(c), qe = t.ks.end(c, nq);
      const int8_t* bc = t.b + c * kq * kNR * 4 + jb * 64;
      const uint8_t* ac = t.a + c * t.kcp;
      // A chunk starts from its correction (−12·Σb), or goes on from the sums of the last step.
      for (int r = 0; r < MR; ++r) {
        const int32_t* z = qb == 0 ? t.corr + c * kNR + jb * 16 : t.part + r * kNR + jb * 16;
        _mm256_store_si256(reinterpret_cast<__m256i*>(s32[r]), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(z)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(s32[r] + 8),
                           _mm256_loadu_si256(reinterpret_cast<const __m256i*>(z + 8)));
      }
      for (int64_t q0 = qb; q0 < qe; q0 += kQuadsPerWiden) {
        const int64_t q1 = std::min(qe, q0 + kQuadsPerWiden);
#define SNIP_DECL(r) __m256i h##r##0 = zero, h##r##1 = zero;
        SNIP_ROWS(SNIP_DECL)
#undef SNIP_DECL
        const int8_t* bq = bc + q0 * kNR * 4;
        const uint8_t* ap = ac + 4 * q0;
        for (int64_t q = q0; q < q1; ++q, ap += 4, bq += kNR * 4) {
          const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq));
          const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq + 32));
#define SNIP_ROW(r)                           \
  if constexpr (MR > r) {                     \
    int32_t a4;                               \
    std::memcpy(&a4, ap + r * t.lda, 4);      \
    const __m256i av = _mm256_set1_epi32(a4); \
    SNIP_MADD_ADD(h##r##0, av, b0);           \
    SNIP_MADD_ADD(h##r##1, av, b1);           \
  }
          SNIP_ROWS(SNIP_ROW)
#undef SNIP_ROW
        }
#define SNIP_WIDEN(r)                                                                                        \
  if constexpr (MR > r) {                                                                                    \
    __m256i* w = reinterpret_cast<__m256i*>(s32[r]);                                                         \
    _mm256_store_si256(w, _mm256_add_epi32(_mm256_load_si256(w), _mm256_madd_epi16(h##r##0, ones)));         \
    _mm256_store_si256(w + 1, _mm256_add_epi32(_mm256_load_si256(w + 1), _mm256_madd_epi16(h##r##1, ones))); \
  }
        SNIP_ROWS(SNIP_WIDEN)
#undef SNIP_WIDEN
      }
      if (qe < nq) {  // the chunk goes on in the next step
        for (int r = 0; r < MR; ++r) std::memcpy(t.part + r * kNR + jb * 16, s32[r], sizeof(s32[r]));
        continue;
      }
      const float* sb = t.sb + c * kNR + jb * 16;
      const __m256 sb0 = _mm256_loadu_ps(sb), sb1 = _mm256_loadu_ps(sb + 8);
      for (int r = 0; r < MR; ++r) {
        const __m256 sar = _mm256_set1_ps(t.sa[r * t.nch + c]);
        float* o = ct + r * t.ldo + jb * 16;
        const __m256 t0 = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s32[r]))),
                                        _mm256_mul_ps(sar, sb0));
        const __m256 t1 =
            _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(s32[r] + 8))),
                          _mm256_mul_ps(sar, sb1));
        _mm256_storeu_ps(o, _mm256_add_ps(c == 0 ? fzero : _mm256_loadu_ps(o), t0));
        _mm256_storeu_ps(o + 8, _mm256_add_ps(c == 0 ? fzero : _mm256_loadu_ps(o + 8), t1));
      }
    }
  }
}
#undef SNIP_ROWS
#undef SNIP_MADD_ADD

void tile_avx2_any(float* ct, const TileArgs& t, int mr) {
  numerics_detail::with_tile_rows(mr, [&](auto rows) { tile_avx2<decltype(rows)::value>(ct, t); });
}
#pragma GCC diagnostic pop

// ---- B's strips with their column sums (BSink::place_block) --------------------------------
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

// r[i]'s dword j → r[j]'s dword i: 32-bit, then 64-bit interleaves within 128-bit lanes, then a
// 4 × 4 transpose of the lanes.
SNIP_VNNI_TARGET inline __attribute__((always_inline)) void transpose16x16_epi32(__m512i* r) {
  __m512i t[16], u[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; i += 4) {  // u[i + j]'s lane L: dword 4L + j of rows i … i + 3
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) {
    const __m512i a = _mm512_shuffle_i64x2(u[j], u[4 + j], 0x44), b = _mm512_shuffle_i64x2(u[j], u[4 + j], 0xEE);
    const __m512i c = _mm512_shuffle_i64x2(u[8 + j], u[12 + j], 0x44),
                  d = _mm512_shuffle_i64x2(u[8 + j], u[12 + j], 0xEE);
    r[j] = _mm512_shuffle_i64x2(a, c, 0x88);
    r[4 + j] = _mm512_shuffle_i64x2(a, c, 0xDD);
    r[8 + j] = _mm512_shuffle_i64x2(b, d, 0x88);
    r[12 + j] = _mm512_shuffle_i64x2(b, d, 0xDD);
  }
}

inline __mmask64 first_bytes(int64_t n) {
  return n >= 64 ? ~__mmask64(0) : n <= 0 ? __mmask64(0) : (__mmask64(1) << n) - 1;
}

// Source rows are B's columns n = r0 … r1−1, source columns its k = c0 … c1−1 (whole chunks).
// 16 columns (one 16-aligned group of a panel) × 64 k at a time: 16 loads of 64 codes, a dword
// transpose makes them 16 of the panel's 64-byte rows (4 k of 16 columns), and vpdpbusd against
// ones sums each column's codes on the way. A group the strip holds only part of (not 16-aligned,
// or cut by another band) goes column by column; a group cut by N has zeros past N (padding).
SNIP_VNNI_TARGET void place_b_columns(Packed& P, int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes,
                                      int64_t ld) {
  SNIP_ASSERT(c0 % P.kc == 0 && (c1 == P.K || c1 % P.kc == 0));
  const int64_t kq = P.kcp / 4, cb = c0 / P.kc, ce = (c1 + P.kc - 1) / P.kc;
  const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512(), neg_off = _mm512_set1_epi32(-kOffset);
  for (int64_t n0 = r0; n0 < r1;) {
    const int64_t p = n0 / kNR, j0 = n0 % kNR;
    const bool whole = n0 % 16 == 0 && (n0 + 16 <= r1 || r1 == P.N);
    const int nrows = whole ? int(std::min<int64_t>(16, r1 - n0)) : 1;
    for (int64_t c = cb; c < ce; ++c) {
      const int64_t len = P.chunk_len(c);
      int8_t* d = P.b.data() + (p * P.nch + c) * kq * kNR * 4 + j0 * 4;
      int32_t* corr = P.corr.data() + (p * P.nch + c) * kNR + j0;
      const int8_t* s = codes + (n0 - r0) * ld + (c * P.kc - c0);
      if (!whole) {
        int32_t sum = 0;
        for (int64_t t = 0; t < len; ++t) {
          d[(t / 4) * kNR * 4 + t % 4] = s[t];
          sum += s[t];
        }
        *corr = -kOffset * sum;
        continue;
      }
      __m512i acc = zero;
      for (int64_t q0 = 0; q0 < kq; q0 += 16) {
        const __mmask64 m = first_bytes(len - 4 * q0);
        __m512i r[16];
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i) r[i] = i < nrows ? _mm512_maskz_loadu_epi8(m, s + i * ld + 4 * q0) : zero;
        transpose16x16_epi32(r);
        const int64_t nq = std::min<int64_t>(16, kq - q0);
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
          if (i < nq) {
            _mm512_storeu_si512(d + (q0 + i) * kNR * 4, r[i]);
            acc = _mm512_dpbusd_epi32(acc, ones, r[i]);
          }
      }
      _mm512_storeu_si512(corr, _mm512_mullo_epi32(acc, neg_off));
    }
    n0 += nrows;
  }
}

// Four source rows of 64 codes (the quad's 4 k, 64 columns each) interleaved into VNNI order,
// 4 k per column as one dword: bytes, then 16-bit pairs, within 128-bit lanes, then a 4 × 4
// transpose of the lanes; g[j] holds columns 16j … 16j + 15. Rows at or past kn are zeros.
SNIP_VNNI_TARGET inline __attribute__((always_inline)) void interleave_quad(const int8_t* s, int64_t ld, int64_t t,
                                                                            int64_t kn, __mmask64 cm, __m512i* g) {
  const __m512i zero = _mm512_setzero_si512();
  const __m512i x0 = t < kn ? _mm512_maskz_loadu_epi8(cm, s + t * ld) : zero;
  const __m512i x1 = t + 1 < kn ? _mm512_maskz_loadu_epi8(cm, s + (t + 1) * ld) : zero;
  const __m512i x2 = t + 2 < kn ? _mm512_maskz_loadu_epi8(cm, s + (t + 2) * ld) : zero;
  const __m512i x3 = t + 3 < kn ? _mm512_maskz_loadu_epi8(cm, s + (t + 3) * ld) : zero;
  const __m512i lo01 = _mm512_unpacklo_epi8(x0, x1), hi01 = _mm512_unpackhi_epi8(x0, x1);
  const __m512i lo23 = _mm512_unpacklo_epi8(x2, x3), hi23 = _mm512_unpackhi_epi8(x2, x3);
  // o0 … o3's lane L: columns 16L + 0…3, 4…7, 8…11, 12…15, four k each.
  const __m512i o0 = _mm512_unpacklo_epi16(lo01, lo23), o1 = _mm512_unpackhi_epi16(lo01, lo23);
  const __m512i o2 = _mm512_unpacklo_epi16(hi01, hi23), o3 = _mm512_unpackhi_epi16(hi01, hi23);
  const __m512i a = _mm512_shuffle_i64x2(o0, o1, 0x44), b = _mm512_shuffle_i64x2(o0, o1, 0xEE);
  const __m512i e = _mm512_shuffle_i64x2(o2, o3, 0x44), f = _mm512_shuffle_i64x2(o2, o3, 0xEE);
  g[0] = _mm512_shuffle_i64x2(a, e, 0x88);
  g[1] = _mm512_shuffle_i64x2(a, e, 0xDD);
  g[2] = _mm512_shuffle_i64x2(b, f, 0x88);
  g[3] = _mm512_shuffle_i64x2(b, f, 0xDD);
}

// Source rows are B's k = r0 … r1−1 (whole chunks), source columns its n = c0 … c1−1 (whole
// panels, the last one cut by N). Per quad of k, 4 rows of 64 codes interleaved into the panel's
// 256 bytes (interleave_quad), summed per column with vpdpbusd; quads past a chunk's end and
// columns past N are zeros.
SNIP_VNNI_TARGET void place_b_k_rows(Packed& P, int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes,
                                     int64_t ld) {
  SNIP_ASSERT(c0 % kNR == 0 && r0 % P.kc == 0 && (r1 == P.K || r1 % P.kc == 0));
  const int64_t kq = P.kcp / 4;
  const __m512i ones = _mm512_set1_epi8(1), zero = _mm512_setzero_si512(), neg_off = _mm512_set1_epi32(-kOffset);
  for (int64_t n0 = c0; n0 < c1; n0 += kNR) {
    const int64_t p = n0 / kNR;
    const __mmask64 cm = first_bytes(c1 - n0);
    for (int64_t c = r0 / P.kc; c * P.kc < r1; ++c) {
      const int64_t len = P.chunk_len(c);
      int8_t* d = P.b.data() + (p * P.nch + c) * kq * kNR * 4;
      const int8_t* s = codes + (c * P.kc - r0) * ld + (n0 - c0);
      __m512i acc0 = zero, acc1 = zero, acc2 = zero, acc3 = zero;
      for (int64_t q = 0; q < kq; ++q, d += kNR * 4) {
        __m512i g[4];
        interleave_quad(s, ld, 4 * q, len, cm, g);
        for (int j = 0; j < 4; ++j) _mm512_storeu_si512(d + 64 * j, g[j]);
        acc0 = _mm512_dpbusd_epi32(acc0, ones, g[0]);
        acc1 = _mm512_dpbusd_epi32(acc1, ones, g[1]);
        acc2 = _mm512_dpbusd_epi32(acc2, ones, g[2]);
        acc3 = _mm512_dpbusd_epi32(acc3, ones, g[3]);
      }
      int32_t* corr = P.corr.data() + (p * P.nch + c) * kNR;
      _mm512_storeu_si512(corr, _mm512_mullo_epi32(acc0, neg_off));
      _mm512_storeu_si512(corr + 16, _mm512_mullo_epi32(acc1, neg_off));
      _mm512_storeu_si512(corr + 32, _mm512_mullo_epi32(acc2, neg_off));
      _mm512_storeu_si512(corr + 48, _mm512_mullo_epi32(acc3, neg_off));
    }
  }
}

// Source rows are A's k = r0 … r1−1 (whole chunks), source columns its rows m = c0 … c1−1
// (wgrad's dY). Per 64 m × 64 k: each quad of k rows interleaved into 16 m × 4 k dwords (as
// place_b_k_rows does for B's panels) in a 4 KiB scratch, then per 16 m a dword transpose gives
// each row of A its 64 k, stored (+ the offset) as one 64-byte line.
SNIP_VNNI_TARGET void place_a_k_rows(Packed& P, int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes,
                                     int64_t ld) {
  SNIP_ASSERT(r0 % P.kc == 0 && (r1 == P.K || r1 % P.kc == 0));
  const int64_t lda = P.lda();
  const __m512i off = _mm512_set1_epi8(char(kOffset));
  alignas(64) int8_t quads[16][kNR * 4];
  for (int64_t m0 = c0; m0 < c1; m0 += 64) {
    const __mmask64 cm = first_bytes(c1 - m0);
    const int64_t mn = std::min<int64_t>(64, c1 - m0);
    for (int64_t c = r0 / P.kc; c * P.kc < r1; ++c) {
      const int64_t len = P.chunk_len(c);
      for (int64_t t0 = 0; t0 < len; t0 += 64) {
        const int64_t kn = std::min<int64_t>(64, len - t0);
        const int8_t* s = codes + (c * P.kc + t0 - r0) * ld + (m0 - c0);
        for (int q = 0; q < 16; ++q) {
          __m512i v[4];
          interleave_quad(s, ld, 4 * q, kn, cm, v);
          for (int j = 0; j < 4; ++j) _mm512_store_si512(quads[q] + 64 * j, v[j]);
        }
        const __mmask64 km = first_bytes(kn);
        for (int64_t g = 0; g < 4 && 16 * g < mn; ++g) {
          __m512i r[16];
#pragma GCC unroll 16
          for (int q = 0; q < 16; ++q) r[q] = _mm512_load_si512(quads[q] + 64 * g);
          transpose16x16_epi32(r);  // r[i]: the 64 k of row m0 + 16g + i
          const int64_t rows = std::min<int64_t>(16, mn - 16 * g);
          uint8_t* d = P.a.data() + (m0 + 16 * g) * lda + c * P.kcp + t0;
#pragma GCC unroll 16
          for (int i = 0; i < 16; ++i)
            if (i < rows) _mm512_mask_storeu_epi8(d + i * lda, km, _mm512_add_epi8(r[i], off));
        }
      }
    }
  }
}
#pragma GCC diagnostic pop

void ASink::place_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) {
  if (isa_at_least(IsaTier::avx512vnni))
    place_a_k_rows(P_, r0, r1, c0, c1, codes, ld);
  else
    place_block_portable(r0, r1, c0, c1, codes, ld);
}

void tile_vnni_any(float* ct, const TileArgs& t, int mr) {
  numerics_detail::with_tile_rows(mr, [&](auto rows) { tile_vnni<decltype(rows)::value>(ct, t); });
}

void BSink::place_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) {
  blocks_.store(true, std::memory_order_relaxed);
  if (rows_are_i_)
    place_b_columns(P_, r0, r1, c0, c1, codes, ld);
  else
    place_b_k_rows(P_, r0, r1, c0, c1, codes, ld);
}
#else
void tile_vnni_any(float*, const TileArgs&, int) {
  SNIP_ASSERT_MSG(false, "no VNNI kernel on this CPU");
}
void BSink::place_block(int64_t, int64_t, int64_t, int64_t, const int8_t*, int64_t) {
  SNIP_ASSERT_MSG(false, "no VNNI placement on this CPU");
}
void ASink::place_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) {
  place_block_portable(r0, r1, c0, c1, codes, ld);
}
void tile_avx2_any(float*, const TileArgs&, int) {
  SNIP_ASSERT_MSG(false, "no AVX2 kernel on this CPU");
}
#endif

}  // namespace

QGemmMode parse_qgemm_mode(const char* value) {
  if (!value || !*value) return QGemmMode::automatic;
  const std::string v(value);
  if (v == "auto") return QGemmMode::automatic;
  if (v == "scalar") return QGemmMode::scalar;
  if (v == "sgemm") return QGemmMode::sgemm;
  if (v == "fma") return QGemmMode::fma;
  throw Error("SNIP_QGEMM='" + v + "' is not a GEMM mode: use auto, fma, scalar or sgemm (or unset it)");
}

void set_qgemm_mode(QGemmMode m) {
  g_mode.store(int(m));
}

QGemmMode qgemm_mode() {
  int m = g_mode.load();
  if (m < 0) {
    const int from_env = int(mode_from_env());
    g_mode.compare_exchange_strong(m, from_env);
    m = g_mode.load();
  }
  return QGemmMode(m);
}

E2M1Operand e2m1_operand(const int8_t* code2, const float* scales, int64_t rows, int64_t cols, const QuantSpec& spec,
                         bool reduce_along_cols) {
  const numerics_detail::ViewGeometry v = numerics_detail::view_geometry(rows, cols, spec, reduce_along_cols);
  E2M1Operand o;
  o.code2 = code2, o.scales = scales;
  o.code_rs = v.rs, o.code_cs = v.cs;
  o.scale_rs = v.scale_rs, o.scale_cs = v.scale_cs;
  o.block_i = v.block_i, o.block_k = v.block_k;
  return o;
}

int64_t qgemm_e2m1_chunk(const E2M1Operand& A, const E2M1Operand& B, int64_t K) {
  return numerics_detail::nested_chunk(K, kMaxChunk, A.block_k, B.block_k);
}

struct E2M1Gemm::Impl : numerics_detail::GemmBuffers<Packed> {};

E2M1Gemm::E2M1Gemm() : impl_(new Impl) {}
E2M1Gemm::~E2M1Gemm() {
  delete impl_;
}

E2M1Gemm& e2m1_gemm_workspace() {
  thread_local E2M1Gemm g;
  return g;
}

void E2M1Gemm::prepare(int64_t M, int64_t N, int64_t K, const E2M1Operand& A, const E2M1Operand& B) {
  Packed& P = impl_->P;
  numerics_detail::prepare_packed(P, M, N, K, qgemm_e2m1_chunk(A, B, K),
                                  "qgemm_e2m1: the operands' scale blocks along K do not nest");
  grow(P.corr, P.npanel * P.nch * kNR);
}

void E2M1Gemm::pack_a(const E2M1Operand& A) {
  ::snip::pack_a(impl_->P, A, detail::chunks_for_threads(quant_threads()));
}

void E2M1Gemm::pack_b(const E2M1Operand& B) {
  ::snip::pack_b(impl_->P, B, detail::chunks_for_threads(quant_threads()));
}

void E2M1Gemm::quantize_a(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                          const char* tensor_name, bool reduce_along_cols) {
  Packed& P = impl_->P;
  grow(impl_->scales_a, e2m1_scale_count(rows, cols, spec));
  ASink sink(P, reduce_along_cols);
  numerics_detail::quantize_codes_into(sink, false, impl_->scales_a.data(), x, rows, cols, spec, key, tensor_name);
  numerics_detail::finish_a(P, e2m1_operand(nullptr, impl_->scales_a.data(), rows, cols, spec, reduce_along_cols));
}

void E2M1Gemm::quantize_b(const float* x, int64_t rows, int64_t cols, const QuantSpec& spec, const RngKey& key,
                          const char* tensor_name, bool reduce_along_cols) {
  Packed& P = impl_->P;
  grow(impl_->scales_b, e2m1_scale_count(rows, cols, spec));
  numerics_detail::zero_b_padding(P);
  BSink sink(P, reduce_along_cols);
  numerics_detail::quantize_codes_into(sink, false, impl_->scales_b.data(), x, rows, cols, spec, key, tensor_name);
  finish_b(P, e2m1_operand(nullptr, impl_->scales_b.data(), rows, cols, spec, reduce_along_cols),
           detail::chunks_for_threads(quant_threads()), sink.sums_done());
}

std::string E2M1Gemm::packing_difference(const E2M1Gemm& other) const {
  using numerics_detail::first_difference;
  const Packed &P = impl_->P, &Q = other.impl_->P;
  std::string d =
      numerics_detail::packing_difference(P, Q, [&] { return first_difference(P.a, Q.a, P.M * P.lda(), "packed A"); });
  if (d.empty()) d = first_difference(P.corr, Q.corr, P.npanel * P.nch * kNR, "B column sums");
  return d;
}

void E2M1Gemm::run(float* C, int64_t ldc) {
  const Packed& P = impl_->P;
  const IsaTier tier = isa_tier();
  numerics_detail::run_packed(
      P, C, ldc, tier >= IsaTier::avx2,
      [&](float* ct, const numerics_detail::TileBase<E2M1Codes>& base, int64_t, int64_t p, int mr) {
        const TileArgs t{base, P.corr.data() + p * P.nch * kNR};
        if (tier >= IsaTier::avx512vnni)
          tile_vnni_any(ct, t, mr);
        else if (tier >= IsaTier::avx2)
          tile_avx2_any(ct, t, mr);
        else
          tile_scalar(ct, t, mr);
      });
}

void qgemm_e2m1(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const E2M1Operand& A, const E2M1Operand& B) {
  if (!numerics_detail::empty_product(C, ldc, M, N, K))
    numerics_detail::packed_product(e2m1_gemm_workspace(), C, ldc, M, N, K, A, B);
}

}  // namespace snip
