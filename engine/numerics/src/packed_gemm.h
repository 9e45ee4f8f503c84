// The packed-GEMM skeleton the E2M1 GEMM (qgemm.cpp) and the BF16-element GEMM (qgemm_bf16.cpp)
// share, over the element type: the packed operands and their buffers, the A placement of the
// quantizer's sinks, B's zero padding, the row and column scales that finish a packing, the
// tile arguments every kernel reads, the preparation, the comparison of two packings and the
// driver over panels, row groups and K steps. The kernels and the format's own packing stay in
// the format's file. A format is a traits struct:
//   ACode, BCode  A's and B's stored element (A: code + kAOffset; B: the code)
//   Sum           a chunk's unscaled sums between K steps (int32 or FP32)
//   kGroup        the kernel's k group (4 int8 codes or 2 BF16 elements)
//   kAOffset      added to each of A's codes; A's padding k hold it (a zero code)
//   b_scale(s)    B's stored column scale for block scale s
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "code_sink.h"
#include "parallel.h"
#include "qgemm_common.h"
#include "snip/error.h"
#include "snip/quant.h"

namespace snip::numerics_detail {

template <class V>
void grow(V& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
}

// Everything the kernels read, packed once per GEMM: A [M][nch·kcp] row-major by chunks, its
// scales [M][nch], B's panels [npanel][nch][kcp/G][64][G] and their column scales
// [npanel][nch][64] (0 for padding columns).
template <class F>
struct PackedOperands : PackGeometry {
  AlignedVector<typename F::ACode> a;
  std::vector<float> sa;
  AlignedVector<typename F::BCode> b;
  std::vector<float> sb;
};

// The block scale of an operand view's element (i, k); 1 when the view has no scales.
template <class Op>
inline float block_scale(const Op& o, int64_t i, int64_t k) {
  return o.scales ? o.scales[(i / o.block_i) * o.scale_rs + (k / o.block_k) * o.scale_cs] : 1.0f;
}

// Per chunk c, the K term of block_scale's index (its first k's block along K).
template <class F, class Op>
std::vector<int64_t> chunk_scale_offsets(const PackedOperands<F>& P, const Op& o) {
  std::vector<int64_t> at(size_t(P.nch));
  for (int64_t c = 0; c < P.nch; ++c) at[size_t(c)] = (c * P.kc / o.block_k) * o.scale_cs;
  return at;
}

// After A's codes are placed (rows m0 … m1−1): the row scales and, with pad, the offset in each
// chunk's padding.
template <class F, class Op>
void finish_a_rows(PackedOperands<F>& P, const Op& A, int64_t m0, int64_t m1, bool pad = true) {
  const int64_t lda = P.lda();
  const std::vector<int64_t> k_at = chunk_scale_offsets(P, A);
  for (int64_t m = m0; m < m1; ++m) {
    const int64_t row_at = (m / A.block_i) * A.scale_rs;
    for (int64_t c = 0; c < P.nch; ++c) {
      P.sa[size_t(m * P.nch + c)] = A.scales ? A.scales[row_at + k_at[size_t(c)]] : 1.0f;
      if (!pad) continue;
      typename F::ACode* d = P.a.data() + m * lda + c * P.kcp;
      for (int64_t t = P.chunk_len(c); t < P.kcp; ++t) d[t] = typename F::ACode(F::kAOffset);
    }
  }
}
template <class F, class Op>
void finish_a(PackedOperands<F>& P, const Op& A, bool pad = true) {
  finish_a_rows(P, A, 0, P.M, pad);
}

// B's column scales for panels p0 … p1−1 (F::b_scale of the block scale; 0 for padding columns).
template <class F, class Op>
void set_b_scales(PackedOperands<F>& P, const Op& B, int64_t p0, int64_t p1) {
  const std::vector<int64_t> k_at = chunk_scale_offsets(P, B);
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t ncols = std::min<int64_t>(kPanel, P.N - p * kPanel);
    int64_t col_at[kPanel];  // block_scale's index terms, divided once per column and per chunk
    for (int j = 0; j < ncols; ++j) col_at[j] = ((p * kPanel + j) / B.block_i) * B.scale_rs;
    for (int64_t c = 0; c < P.nch; ++c) {
      float* sb = P.sb.data() + (p * P.nch + c) * kPanel;
      for (int j = 0; j < kPanel; ++j)
        sb[j] = j >= ncols ? 0.0f : F::b_scale(B.scales ? B.scales[col_at[j] + k_at[size_t(c)]] : 1.0f);
    }
  }
}

// Before B's codes are placed: zeros where no code goes (columns past N in the last panel,
// k past a chunk's end up to its padded length).
template <class F>
void zero_b_padding(PackedOperands<F>& P) {
  constexpr int G = F::kGroup;
  constexpr size_t bytes = sizeof(typename F::BCode);
  const int64_t kq = P.kcp / G, block = kq * kPanel * G;
  if (P.N % kPanel != 0) std::memset(P.b.data() + (P.npanel - 1) * P.nch * block, 0, size_t(P.nch * block) * bytes);
  for (int64_t c = 0; c < P.nch; ++c) {
    const int64_t len = P.chunk_len(c), used = (len / G) * kPanel * G;
    if (len == P.kcp) continue;
    for (int64_t p = 0; p < P.npanel; ++p)
      std::memset(P.b.data() + (p * P.nch + c) * block + used, 0, size_t(block - used) * bytes);
  }
}

// Source rows r0 … r1−1 of A's codes (row stride ld; A's rows when rows_are_i, else A's k) into
// the packed A as code + F::kAOffset; padding stays as it was (finish_a).
template <class F, class Src>
void place_a(PackedOperands<F>& P, bool rows_are_i, int64_t r0, int64_t r1, const Src* src, int64_t ld) {
  if (!rows_are_i) {
    place_transposed_a(P.a.data(), P, r0, r1, src, ld, F::kAOffset);
    return;
  }
  const int64_t lda = P.lda();
  for (int64_t m = r0; m < r1; ++m)
    for (int64_t c = 0; c < P.nch; ++c) {
      const int64_t len = P.chunk_len(c);
      typename F::ACode* d = P.a.data() + m * lda + c * P.kcp;
      const Src* s = src + (m - r0) * ld + c * P.kc;
      if constexpr (F::kAOffset == 0 && sizeof(Src) == sizeof(*d))
        std::memcpy(d, s, size_t(len) * sizeof(Src));
      else
        for (int64_t t = 0; t < len; ++t) d[t] = typename F::ACode(s[t] + F::kAOffset);
    }
}

// A tile of A's elements, tile[mm][kk] = element (m0 + mm, kb + kk) for mm < mn, kk < kn, into
// the packed A: the strided packers gather 64 × 64 tiles, then write each row of A in runs.
template <class F>
void store_a_tile(PackedOperands<F>& P, const typename F::ACode (&tile)[64][64], int64_t m0, int64_t mn, int64_t kb,
                  int64_t kn) {
  const int64_t lda = P.lda();
  int64_t at[64];  // where k = kb + kk goes in a row of A (one division per k, not per element)
  for (int64_t kk = 0; kk < kn; ++kk) at[kk] = ((kb + kk) / P.kc) * P.kcp + (kb + kk) % P.kc;
  for (int64_t mm = 0; mm < mn; ++mm) {
    typename F::ACode* row = P.a.data() + (m0 + mm) * lda;
    for (int64_t kk = 0; kk < kn; ++kk) row[at[kk]] = tile[mm][kk];
  }
}

// What a quantizer sink (code_sink.h) into a packing holds: the packing and whether source rows
// are the operand's i (reduction along the source's columns) or its k.
template <class Packed>
class PackedSink : public RowCodeSink {
 protected:
  PackedSink(Packed& P, bool rows_are_i) : P_(P), rows_are_i_(rows_are_i) {}
  ~PackedSink() = default;

  Packed& P_;
  const bool rows_are_i_;
};

// The buffers of a staged GEMM (E2M1Gemm::Impl, Bf16Gemm::Impl): the packing and quantize_a /
// quantize_b's block scales.
template <class Packed>
struct GemmBuffers {
  Packed P;
  std::vector<float> scales_a, scales_b;
};

// Fixes the layout for C(M,N) = A·Bᵀ over K in chunks of kc (0: the blocks do not nest, which
// fails with the message not_nested) and grows the buffers to it.
template <class F>
void prepare_packed(PackedOperands<F>& P, int64_t M, int64_t N, int64_t K, int64_t kc, const char* not_nested) {
  SNIP_ASSERT(M > 0 && N > 0 && K > 0);
  SNIP_ASSERT_MSG(kc > 0, not_nested);
  P.set(M, N, K, kc, F::kGroup);
  grow(P.a, M * P.lda());
  grow(P.sa, M * P.nch);
  grow(P.b, P.npanel * P.nch * P.kcp * kPanel);
  grow(P.sb, P.npanel * P.nch * kPanel);
}

// "" when P and Q hold the same layout and bytes, else the first difference; a_difference()
// compares A's elements (the format's, as A may be held elsewhere).
template <class F, class ADifference>
std::string packing_difference(const PackedOperands<F>& P, const PackedOperands<F>& Q, ADifference&& a_difference) {
  if (!P.same_shape(Q)) return "different geometry (M, N, K or chunk length)";
  std::string d = a_difference();
  if (d.empty()) d = first_difference(P.sa, Q.sa, P.M * P.nch, "A scales");
  if (d.empty()) d = first_difference(P.b, Q.b, P.npanel * P.nch * P.kcp * kPanel, "packed B");
  if (d.empty()) d = first_difference(P.sb, Q.sb, P.npanel * P.nch * kPanel, "B scales");
  return d;
}

// The arguments every kernel reads for one 64-column panel × mr-row tile; a format's TileArgs
// adds its own.
template <class F>
struct TileBase {
  const typename F::ACode* a;  // row 0 of the tile in P.a
  int64_t lda;
  const float* sa;             // row 0 of the tile in P.sa ([row][chunk])
  const typename F::BCode* b;  // the panel
  const float* sb;
  int64_t nch, kcp, kc, K;
  int64_t ldo;            // the output tile's row stride
  KStep ks;               // the chunks (and k groups) of this call
  typename F::Sum* part;  // a chunk's unscaled sums between steps ([row][64])
};

// C (row stride ldc) = the product of the packed operands: run_tiles over the shared pool, each
// tile handed to tile(ct, base, m0, p, mr) with its TileBase (stepped: K in steps; the portable
// kernels take the whole of K at once).
template <class F, class Tile>
void run_packed(const PackedOperands<F>& P, float* C, int64_t ldc, bool stepped, Tile&& tile) {
  const int64_t lda = P.lda();
  run_tiles(P, C, ldc, quant_threads(), F::kGroup, stepped,
            [&](float* ct, int64_t ldo, int64_t m0, int64_t p, int mr, const KStep& ks, uint32_t* part) {
              const TileBase<F> base{P.a.data() + m0 * lda,
                                     lda,
                                     P.sa.data() + m0 * P.nch,
                                     P.b.data() + p * P.nch * P.kcp * kPanel,
                                     P.sb.data() + p * P.nch * kPanel,
                                     P.nch,
                                     P.kcp,
                                     P.kc,
                                     P.K,
                                     ldo,
                                     ks,
                                     reinterpret_cast<typename F::Sum*>(part)};
              tile(ct, base, m0, p, mr);
            });
}

// The whole GEMM of qgemm_e2m1 and qgemm_bf16 when it is empty: nothing to do for M or N = 0,
// zeros for K = 0; false when there is a product to compute.
inline bool empty_product(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K) {
  SNIP_ASSERT(M >= 0 && N >= 0 && K >= 0 && ldc >= N);
  if (M == 0 || N == 0) return true;
  if (K != 0) return false;
  for (int64_t m = 0; m < M; ++m) std::fill(C + m * ldc, C + m * ldc + N, 0.0f);
  return true;
}
// The whole GEMM on a staged GEMM g (E2M1Gemm, Bf16Gemm): prepare, pack both operands, run
// (g.run's result).
template <class Gemm, class Op>
decltype(auto) packed_product(Gemm& g, float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const Op& A,
                              const Op& B) {
  g.prepare(M, N, K, A, B);
  g.pack_a(A);
  g.pack_b(B);
  return g.run(C, ldc);
}

}  // namespace snip::numerics_detail
