// The statistics rounds' double sums (docs/METHOD.md 4.4) and their AVX-512 and AVX2 kernels.
//
// Every sum of a round runs element e of a range into partial sum e mod 8, the partials
// combined as ((s0+s1)+(s2+s3))+((s4+s5)+(s6+s7)). Eight independent chains run at the
// adder's throughput; one chain in element order waits on the adder's latency at every element
// (such chains were the largest item of the round's per-layer stage). The eight partials are
// exactly the lanes of one AVX-512 vector of doubles (of two AVX vectors on AVX2) over eight
// consecutive elements, so the vector kernels (v8_*) give the same bits as the scalar terms: each
// lane does the same IEEE operations (conversions, +, −, ×, ÷, √; never fused: -ffp-contract=off)
// on the same elements in the same order. The kernels run behind the one instruction-set
// dispatch (snip/isa.h): AVX-512 at tier avx512 and above, AVX2 at avx2, unless
// set_vector_sums(false) turned them off; each returns how many
// elements (columns for v8_col_sq) it did, 0 off x86-64, and the caller does the rest through
// its scalar terms (lane_accumulate).
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

namespace snip::stats_sums {

// The eight partial sums of NS sums.
template <int NS>
struct Lanes {
  double s[NS][8] = {};
};

// Elements e0 … n−1 (e0 a multiple of 8: what a vector kernel left) through the scalar terms:
// term(e, t) writes element e's NS terms to t; it is called once per element, in increasing e.
template <int NS, class Term>
void lane_accumulate(Lanes<NS>& L, int64_t e0, int64_t n, Term&& term) {
  double t[NS];
  for (int64_t e = e0; e < n; ++e) {
    term(e, t);
    for (int k = 0; k < NS; ++k) L.s[k][e % 8] += t[k];
  }
}

template <int NS>
std::array<double, NS> combine(const Lanes<NS>& L) {
  std::array<double, NS> out;
  for (int k = 0; k < NS; ++k) {
    const double* s = L.s[k];
    out[size_t(k)] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
  }
  return out;
}

template <int NS, class Term>
std::array<double, NS> lane_sums(int64_t n, Term&& term) {
  Lanes<NS> L;
  lane_accumulate(L, 0, n, term);
  return combine(L);
}

// Whether the v8_* kernels run: tier avx2 or above (snip/isa.h) and not turned off.
bool vector_sums();
// false: the sums run on their scalar terms only, as on a CPU without AVX2 (the kernels give
// the same bits; StatsRound.VectorSumsGiveTheScalarTermsBits compares the two). Not
// thread-safe; tests only.
void set_vector_sums(bool on);

// The AdamW preview of the next step for a run of elements (AdamW::preview's arithmetic, in
// its order): the step's constants.
struct PreviewConsts {
  double clip, beta1, om_beta1, beta2, om_beta2, bc2, eps, lr_wd, lr_bc1;
  bool decay;
};

// Σ a², Σ b² (b may be null: Σ a² only) over the whole vectors.
int64_t v8_sq2(Lanes<2>& L, const float* a, const float* b, int64_t n);
// The output errors' sums: Y (Σd², Σ dY·d), dX (Σd², and δdX = dxq − dX in FP32 into ddx),
// dW (Σd², Σ d²·w).
int64_t v8_err_y(Lanes<2>& L, const float* yq, const float* y, const float* dy, int64_t n);
int64_t v8_err_dx(Lanes<1>& L, const float* dxq, const float* dx, float* ddx, int64_t n);
int64_t v8_err_dw(Lanes<2>& L, const float* dwq, const float* dw, const double* w, int64_t n);
// g[c] += a[r·n + c]² for every row r in order, columns c < n / 8 · 8 (each column its own
// chain, as in the scalar loop); returns the columns done.
int64_t v8_col_sq(double* g, const float* a, int64_t rows, int64_t n);
// The AdamW factors over whole rows of K (a multiple of 8) elements: w_ij = 1/denom² into w and
// the five sums (m², v², w, γ_i·x_j·w, update²).
int64_t v8_adam(Lanes<5>& L, const PreviewConsts& c, const float* m0, const float* v0, const float* W, const float* dW,
                const double* gam, const double* xcol, double* w, int64_t N, int64_t K);

}  // namespace snip::stats_sums
