// What the E2M1 GEMM (qgemm.cpp) and the BF16-element GEMM (qgemm_bf16.cpp) share: the operand
// view of a stored matrix, the K chunk both operands' blocks allow, the packed layout's
// geometry, the transposed placement of A's codes, and the task loop over 64-column panels ×
// 48-row groups that runs a register-tile kernel and copies each tile out.
#pragma once
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "float_bits.h"
#include "snip/error.h"
#include "snip/quant.h"
#include "snip/thread_pool.h"

namespace snip::numerics_detail {

inline constexpr int kPanel = 64;    // columns of B per panel
inline constexpr int kTileRows = 6;  // rows per register tile
inline constexpr int kRowsPerTask = 8 * kTileRows;

// Cache-line-aligned storage for packed operands: a 64-byte row of a panel (or a 64-byte load of
// A) then touches one line, not two (large std::vector buffers start 16 bytes into a page).
template <class T>
struct LineAligned {
  using value_type = T;
  LineAligned() = default;
  template <class U>
  LineAligned(const LineAligned<U>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(64))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(64)); }
  template <class U>
  bool operator==(const LineAligned<U>&) const {
    return true;
  }
};
template <class T>
using AlignedVector = std::vector<T, LineAligned<T>>;

// Strides of a stored (rows, cols) matrix quantized with `spec` as a logical (i, k) operand:
// element (i, k) at i·rs + k·cs, its block's scale at (i / block_i)·scale_rs + (k / block_k)·scale_cs.
struct ViewGeometry {
  int64_t rs = 0, cs = 1, scale_rs = 0, scale_cs = 0, block_i = 1, block_k = 1;
};
inline ViewGeometry view_geometry(int64_t rows, int64_t cols, const QuantSpec& spec, bool reduce_along_cols) {
  const int64_t br = spec.block_rows <= 0 ? rows : std::min<int64_t>(spec.block_rows, rows);
  const int64_t bc = spec.block_cols <= 0 ? cols : std::min<int64_t>(spec.block_cols, cols);
  const int64_t nbc = bc > 0 ? (cols + bc - 1) / bc : 0;
  ViewGeometry v;
  if (reduce_along_cols) {  // (i, k) = (row, col)
    v.rs = cols, v.cs = 1;
    v.block_i = std::max<int64_t>(br, 1), v.block_k = std::max<int64_t>(bc, 1);
    v.scale_rs = nbc, v.scale_cs = 1;
  } else {  // (i, k) = (col, row)
    v.rs = 1, v.cs = cols;
    v.block_i = std::max<int64_t>(bc, 1), v.block_k = std::max<int64_t>(br, 1);
    v.scale_rs = 1, v.scale_cs = nbc;
  }
  return v;
}

// The K chunk: at most max_chunk, inside one block of each operand that is blocked along K
// (a_block_k / b_block_k; 0 or >= K: one block), or 0 when the blocks do not nest.
inline int64_t nested_chunk(int64_t K, int64_t max_chunk, int64_t a_block_k, int64_t b_block_k) {
  if (K <= 0) return 1;
  const bool a_whole = a_block_k <= 0 || a_block_k >= K, b_whole = b_block_k <= 0 || b_block_k >= K;
  int64_t kc = std::min(K, max_chunk);
  if (!a_whole) kc = std::min(kc, a_block_k);
  if (!b_whole) kc = std::min(kc, b_block_k);
  if (!a_whole && a_block_k % kc != 0) return 0;
  if (!b_whole && b_block_k % kc != 0) return 0;
  return kc;
}

// The packed layout's geometry: K in nch chunks of kc, each padded to kcp (a multiple of the
// kernel's k group), N in npanel panels of 64 columns.
struct PackGeometry {
  int64_t M = 0, N = 0, K = 0;
  int64_t kc = 0, kcp = 0, nch = 0, npanel = 0;
  void set(int64_t m, int64_t n, int64_t k, int64_t chunk, int64_t kgroup) {
    M = m, N = n, K = k, kc = chunk, kcp = (chunk + kgroup - 1) / kgroup * kgroup;
    nch = (K + kc - 1) / kc, npanel = (N + kPanel - 1) / kPanel;
  }
  int64_t chunk_len(int64_t c) const { return std::min(kc, K - c * kc); }
  int64_t lda() const { return nch * kcp; }
  bool same_shape(const PackGeometry& o) const { return M == o.M && N == o.N && K == o.K && kc == o.kc; }
};

// "" when the first n elements of x and y have the same bytes, else where they first differ.
template <class V>
std::string first_difference(const V& x, const V& y, int64_t n, const char* what) {
  for (int64_t i = 0; i < n; ++i)
    if (std::memcmp(&x[size_t(i)], &y[size_t(i)], sizeof(x[0])) != 0)
      return std::string(what) + " differs at " + std::to_string(i);
  return {};
}

// d[r·ldd + c] = s[c·lds + r] + offset (mod 256) for a 16 × 16 block of bytes: four rounds
// of interleaving rows i and i + 8 transpose it (a perfect-shuffle network).
template <class Dst>
inline void transpose16x16_bytes(Dst* d, int64_t ldd, const uint8_t* s, int64_t lds, uint8_t offset) {
#if defined(__SSE2__)
  __m128i x[16], y[16];
  const __m128i off = _mm_set1_epi8(char(offset));
  for (int i = 0; i < 16; ++i) x[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * lds));
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      y[2 * i] = _mm_unpacklo_epi8(x[i], x[i + 8]);
      y[2 * i + 1] = _mm_unpackhi_epi8(x[i], x[i + 8]);
    }
    for (int i = 0; i < 16; ++i) x[i] = y[i];
  }
  for (int i = 0; i < 16; ++i) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i * ldd), _mm_add_epi8(x[i], off));
#else
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 16; ++c) d[r * ldd + c] = Dst(uint8_t(s[c * lds + r] + offset));
#endif
}

// d[r·ldd + c] = s[c·lds + r] for an 8 × 8 block of 16-bit elements (BF16 codes): three rounds
// of interleaving, 16-, 32- and 64-bit.
inline void transpose8x8_u16(uint16_t* d, int64_t ldd, const uint16_t* s, int64_t lds) {
#if defined(__SSE2__)
  __m128i x[8];
  for (int i = 0; i < 8; ++i) x[i] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * lds));
  __m128i t[8], u[8];
  for (int i = 0; i < 4; ++i) {
    t[2 * i] = _mm_unpacklo_epi16(x[2 * i], x[2 * i + 1]);  // rows 2i, 2i+1: columns 0-3 interleaved
    t[2 * i + 1] = _mm_unpackhi_epi16(x[2 * i], x[2 * i + 1]);
  }
  for (int h = 0; h < 2; ++h)  // rows 0-3 (h = 0) and 4-7: pairs of columns
    for (int j = 0; j < 2; ++j) {
      u[4 * h + 2 * j] = _mm_unpacklo_epi32(t[4 * h + j], t[4 * h + j + 2]);
      u[4 * h + 2 * j + 1] = _mm_unpackhi_epi32(t[4 * h + j], t[4 * h + j + 2]);
    }
  for (int c = 0; c < 4; ++c) {  // u[c] holds columns 2c, 2c+1 of rows 0-3, u[c + 4] of rows 4-7
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * c) * ldd), _mm_unpacklo_epi64(u[c], u[c + 4]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + (2 * c + 1) * ldd), _mm_unpackhi_epi64(u[c], u[c + 4]));
  }
#else
  for (int r = 0; r < 8; ++r)
    for (int c = 0; c < 8; ++c) d[r * ldd + c] = s[c * lds + r];
#endif
}

// Codes of source rows k = r0 … r1−1 (at most 64; row stride ld, A's i along the row) into
// A's rows i0 … i1−1 (stride G.lda(); src points at column i0) as code + offset, through
// 64 × 64 tiles so each row of A is written in runs rather than a byte or element per cache line.
// Row float: A widened to FP32 (BF16 codes, offset 0: each code's bits << 16).
template <class Row, class Src>
void place_transposed_a(Row* a, const PackGeometry& G, int64_t r0, int64_t r1, int64_t i0, int64_t i1, const Src* src,
                        int64_t ld, int offset) {
  using Dst = std::conditional_t<std::is_floating_point_v<Row>, uint16_t, Row>;  // the tile's codes
  static_assert(!std::is_floating_point_v<Row> || sizeof(Src) == 2, "only BF16 codes are widened");
  const int64_t kn = r1 - r0, lda = G.lda();
  SNIP_ASSERT(kn <= 64);
  int64_t at[64];  // where k = r0 + kk goes in a row of A
  bool contiguous = true;
  for (int64_t kk = 0; kk < kn; ++kk) {
    const int64_t k = r0 + kk;
    at[kk] = (k / G.kc) * G.kcp + k % G.kc;
    contiguous = contiguous && at[kk] == at[0] + kk;
  }
  Dst tile[64][64];
  a += i0 * lda;
  for (int64_t m0 = 0; m0 < i1 - i0; m0 += 64) {
    const int64_t mn = std::min<int64_t>(64, i1 - i0 - m0);
    int64_t kk0 = 0;
    if constexpr (sizeof(Dst) == 1 && sizeof(Src) == 1) {
      if (mn == 64)
        for (; kk0 + 16 <= kn; kk0 += 16)
          for (int64_t mm = 0; mm < 64; mm += 16)
            transpose16x16_bytes(&tile[mm][kk0], 64, reinterpret_cast<const uint8_t*>(src + kk0 * ld + m0 + mm), ld,
                                 uint8_t(offset));
    }
    if constexpr (sizeof(Dst) == 2 && sizeof(Src) == 2) {
      if (offset == 0) {
        const int64_t mfull = mn & ~int64_t(7);
        for (; kk0 + 8 <= kn; kk0 += 8) {
          const Src* s = src + kk0 * ld + m0;
          for (int64_t mm = 0; mm < mfull; mm += 8)
            transpose8x8_u16(reinterpret_cast<uint16_t*>(&tile[mm][kk0]), 64, reinterpret_cast<const uint16_t*>(s + mm),
                             ld);
          for (int64_t mm = mfull; mm < mn; ++mm)
            for (int64_t kk = 0; kk < 8; ++kk) tile[mm][kk0 + kk] = Dst(s[kk * ld + mm]);
        }
      }
    }
    for (int64_t kk = kk0; kk < kn; ++kk) {
      const Src* s = src + kk * ld + m0;
      for (int64_t mm = 0; mm < mn; ++mm) tile[mm][kk] = Dst(s[mm] + offset);
    }
    for (int64_t mm = 0; mm < mn; ++mm) {
      Row* row = a + (m0 + mm) * lda;
      if constexpr (std::is_floating_point_v<Row>) {
        if (contiguous) {  // one run: a loop the compiler vectorizes
          float* __restrict d = row + at[0];
          for (int64_t kk = 0; kk < kn; ++kk) d[kk] = ffrom(uint32_t(tile[mm][kk]) << 16);
        } else {
          for (int64_t kk = 0; kk < kn; ++kk) row[at[kk]] = ffrom(uint32_t(tile[mm][kk]) << 16);
        }
      } else if (contiguous) {
        std::memcpy(row + at[0], tile[mm], size_t(kn) * sizeof(Dst));
      } else {
        for (int64_t kk = 0; kk < kn; ++kk) row[at[kk]] = tile[mm][kk];
      }
    }
  }
}

// The same for all of A's rows (source columns 0 … G.M−1).
template <class Row, class Src>
void place_transposed_a(Row* a, const PackGeometry& G, int64_t r0, int64_t r1, const Src* src, int64_t ld, int offset) {
  place_transposed_a(a, G, r0, r1, 0, G.M, src, ld, offset);
}

// Codes of source rows r0 … r1−1 (row stride ld) into B's panels [panel][chunk][kcp/G][64][G]
// (G = the kernel's k group: 4 int8 codes or 2 BF16 elements). Source rows are B's columns
// (rows_are_i: G consecutive k of a row are one G-element store) or B's k; then where the
// batch holds all G rows of a k group, interleave(d, rows, w) writes w columns (a multiple of
// its width W) of the G rows at once, else one k at a time. Padding stays as it was.
template <int G, int W, class T, class Interleave>
void place_b(T* b, const PackGeometry& P, int64_t r0, int64_t r1, const T* src, int64_t ld, bool rows_are_i,
             Interleave&& interleave) {
  const int64_t kq = P.kcp / G, group = kPanel * G;  // elements per k group of a panel
  if (rows_are_i) {
    for (int64_t n = r0; n < r1; ++n) {
      const int64_t p = n / kPanel, j = n % kPanel;
      const T* s = src + (n - r0) * ld;
      for (int64_t c = 0; c < P.nch; ++c) {
        const int64_t len = P.chunk_len(c);
        T* d = b + (p * P.nch + c) * kq * group + j * G;
        const T* sc = s + c * P.kc;
        int64_t q = 0;
        for (; G * q + G <= len; ++q) std::memcpy(d + q * group, sc + G * q, G * sizeof(T));
        for (int64_t u = G * q; u < len; ++u) d[q * group + (u - G * q)] = sc[u];
      }
    }
    return;
  }
  const int64_t panel_stride = P.nch * kq * group;
  for (int64_t k = r0; k < r1;) {
    const int64_t c = k / P.kc, t = k % P.kc, q = t / G, u = t % G;
    const T* s = src + (k - r0) * ld;
    T* dq = b + c * kq * group + q * group;  // panel 0
    const bool whole_group = u == 0 && k + G <= r1 && t + G <= P.chunk_len(c);
    for (int64_t p = 0; p < P.npanel; ++p) {
      const int64_t n0 = p * kPanel, ncols = std::min<int64_t>(kPanel, P.N - n0);
      T* d = dq + p * panel_stride;
      if (!whole_group) {
        for (int64_t j = 0; j < ncols; ++j) d[G * j + u] = s[n0 + j];
        continue;
      }
      const int64_t wide = ncols / W * W;
      interleave(d, s + n0, ld, wide);
      for (int64_t j = wide; j < ncols; ++j)
        for (int v = 0; v < G; ++v) d[G * j + v] = s[v * ld + n0 + j];
    }
    k += whole_group ? G : 1;
  }
}

// f(std::integral_constant<int, mr>{}) for a tile of mr rows (1 … kTileRows): the kernels are
// templates on their row count, so every row count gets its own fully unrolled copy.
template <class F>
inline void with_tile_rows(int mr, F&& f) {
  switch (mr) {
    case 1:
      return f(std::integral_constant<int, 1>{});
    case 2:
      return f(std::integral_constant<int, 2>{});
    case 3:
      return f(std::integral_constant<int, 3>{});
    case 4:
      return f(std::integral_constant<int, 4>{});
    case 5:
      return f(std::integral_constant<int, 5>{});
    default:
      return f(std::integral_constant<int, kTileRows>{});
  }
}

// One step along K of a task (KSteps): chunks c0 … c1−1 whole, except that the first of them
// starts at k group g0 and, when g1 >= 0, the last ends before k group g1 (a k group: the
// kernel's unit of k, 2 elements for BF16 pairs, 4 for E2M1 quads). A kernel carries a chunk's
// unscaled sums from one step to the next in `part` ([row][64], 32 bits each): a sum then goes
// through the same operations in the same order as in one pass, so the bits do not change.
struct KStep {
  int64_t c0 = 0, c1 = 0, g0 = 0, g1 = -1;
  // The k groups [begin, end) of chunk c in this step, of the chunk's ng.
  int64_t begin(int64_t c) const { return c == c0 ? g0 : 0; }
  int64_t end(int64_t c, int64_t ng) const { return c == c1 - 1 && g1 >= 0 ? g1 : ng; }
};

// About this many k per step: B's slice of a panel (64 columns × kKStep, 16 KB of E2M1 codes or
// 64 KB of widened BF16) then stays in L1/L2 while a task's 8 tiles use it, where a tile over the
// whole of K would stream a weight-gradient GEMM's panel (K = tokens, 2,048–4,096; up to 1 MB
// widened) from L3 once per tile.
inline constexpr int64_t kKStep = 256;

// The steps along K: whole chunks grouped up to kKStep, a chunk longer than kKStep cut into
// slices of kKStep (a multiple of every k group). The whole of K as one step when !stepped.
inline std::vector<KStep> k_steps(const PackGeometry& G, int64_t kgroup, bool stepped) {
  std::vector<KStep> steps;
  if (!stepped) {
    steps.push_back({0, G.nch, 0, -1});
    return steps;
  }
  if (G.kc <= kKStep) {
    const int64_t per = std::max<int64_t>(1, kKStep / G.kc);
    for (int64_t c = 0; c < G.nch; c += per) steps.push_back({c, std::min(G.nch, c + per), 0, -1});
    return steps;
  }
  const int64_t per = kKStep / kgroup;
  for (int64_t c = 0; c < G.nch; ++c) {
    const int64_t ng = (G.chunk_len(c) + kgroup - 1) / kgroup;
    for (int64_t g = 0; g < ng; g += per) steps.push_back({c, c + 1, g, g + per >= ng ? -1 : g + per});
  }
  return steps;
}

// Asks for the output tile's lines (mr rows × 64 floats, row stride ldo) to be brought into
// cache for writing, at a tile's first step: its first stores then find them there instead of
// stalling on a miss each (the first 24 stores of the VNNI kernel into a cold C were 12% of its
// time).
inline void prefetch_tile_for_write(const float* ct, int64_t ldo, int mr) {
  for (int r = 0; r < mr; ++r)
    for (int j = 0; j < kPanel; j += 16) __builtin_prefetch(ct + r * ldo + j, 1, 3);
}

// C (row stride ldc) from register tiles: tile(out, ldo, m0, panel, mr, step, part) adds the
// step's chunks of the mr rows × 64 columns of rows m0 … m0+mr−1 and the panel's columns to out
// (row stride ldo; the first step starts it): straight into C where the panel is whole, else
// into a local tile that is copied out. One task per (panel, 48-row group) on the shared pool,
// its tiles in the inner loop and K's steps (k_steps) in the outer one; each output is computed
// by exactly one task, in the same order whatever the threads, so the result does not depend on
// them.
template <class Tile>
void run_tiles(const PackGeometry& G, float* C, int64_t ldc, int threads, int64_t kgroup, bool stepped, Tile&& tile) {
  const int64_t M = G.M, N = G.N;
  SNIP_ASSERT(ldc >= N);
  const std::vector<KStep> steps = k_steps(G, kgroup, stepped);
  const int64_t groups = (M + kRowsPerTask - 1) / kRowsPerTask;
  const int64_t ntasks = G.npanel * groups;
  SNIP_ASSERT(ntasks <= INT32_MAX);
  auto task = [&](int id) {
    const int64_t p = id / groups, g = id % groups;
    const int64_t n0 = p * kPanel, ncols = std::min<int64_t>(kPanel, N - n0);
    const int64_t r0 = g * kRowsPerTask, r1 = std::min(M, r0 + kRowsPerTask);
    alignas(64) float ct[kRowsPerTask * kPanel];
    alignas(64) uint32_t part[kRowsPerTask * kPanel];
    const bool whole = ncols == kPanel;
    for (const KStep& ks : steps)
      for (int64_t m0 = r0; m0 < r1; m0 += kTileRows) {
        const int mr = int(std::min<int64_t>(kTileRows, r1 - m0));
        uint32_t* pt = part + (m0 - r0) * kPanel;
        if (whole)
          tile(C + m0 * ldc + n0, ldc, m0, p, mr, ks, pt);
        else
          tile(ct + (m0 - r0) * kPanel, int64_t(kPanel), m0, p, mr, ks, pt);
      }
    if (!whole)
      for (int64_t m = r0; m < r1; ++m)
        std::memcpy(C + m * ldc + n0, ct + (m - r0) * kPanel, size_t(ncols) * sizeof(float));
  };
  if (threads <= 1) {
    for (int64_t i = 0; i < ntasks; ++i) task(int(i));
  } else {
    pool_run(int(ntasks), task);
  }
}

}  // namespace snip::numerics_detail
