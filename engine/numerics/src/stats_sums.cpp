// The statistics rounds' AVX-512 double sums (snip/stats_sums.h; docs/METHOD.md 4.4). Hand-written
// kernels: kept whole, one loop each. -ffp-contract=off (CMakeLists.txt): a fused a*b+c would
// change bits against the scalar terms.
#include "snip/stats_sums.h"

#include <immintrin.h>

#include "snip/isa.h"

namespace snip::stats_sums {
namespace {
bool g_vector_sums_off = false;  // set_vector_sums(false): the scalar terms only
}  // namespace

bool vector_sums() {
#if defined(__x86_64__)
  return isa_at_least(IsaTier::avx512) && !g_vector_sums_off;
#else
  return false;
#endif
}

void set_vector_sums(bool on) {
  g_vector_sums_off = !on;
}

#if defined(__x86_64__)
// (GCC 12's _mm512_cvtps_pd starts from _mm512_undefined_pd(), which -Wmaybe-uninitialized
// reports once per inlined call; the value is never read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#define SNIP_V8 __attribute__((target("avx512f,avx512dq")))
namespace {
using V = __m512d;
SNIP_V8 inline V ld8(const float* p) {
  return _mm512_cvtps_pd(_mm256_loadu_ps(p));
}
SNIP_V8 inline V mul(V a, V b) {
  return _mm512_mul_pd(a, b);
}
SNIP_V8 inline V add(V a, V b) {
  return _mm512_add_pd(a, b);
}
SNIP_V8 inline V sub(V a, V b) {
  return _mm512_sub_pd(a, b);
}
template <int NS>
SNIP_V8 inline void store_lanes(Lanes<NS>& L, const V* acc) {
  for (int k = 0; k < NS; ++k) _mm512_storeu_pd(L.s[k], acc[k]);
}

}  // namespace

// Σ a², Σ b² (b may be null: Σ a² only) over the whole vectors; returns the elements done.
SNIP_V8 int64_t v8_sq2(Lanes<2>& L, const float* a, const float* b, int64_t n) {
  V acc[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  const int64_t n8 = n / 8 * 8;
  for (int64_t e = 0; e < n8; e += 8) {
    const V x = ld8(a + e);
    acc[0] = add(acc[0], mul(x, x));
    if (b) {
      const V y = ld8(b + e);
      acc[1] = add(acc[1], mul(y, y));
    }
  }
  store_lanes<2>(L, acc);
  return n8;
}

// record_output_errors' three sums: Y (Σd², Σ dY·d), dX (Σd², and δdX = dxq − dX in FP32),
// dW (Σd², Σ d²·w).
SNIP_V8 int64_t v8_err_y(Lanes<2>& L, const float* yq, const float* y, const float* dy, int64_t n) {
  V acc[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  const int64_t n8 = n / 8 * 8;
  for (int64_t e = 0; e < n8; e += 8) {
    const V d = sub(ld8(yq + e), ld8(y + e));
    acc[0] = add(acc[0], mul(d, d));
    acc[1] = add(acc[1], mul(ld8(dy + e), d));
  }
  store_lanes<2>(L, acc);
  return n8;
}
SNIP_V8 int64_t v8_err_dx(Lanes<1>& L, const float* dxq, const float* dx, float* ddx, int64_t n) {
  V acc[1] = {_mm512_setzero_pd()};
  const int64_t n8 = n / 8 * 8;
  for (int64_t e = 0; e < n8; e += 8) {
    const __m256 q = _mm256_loadu_ps(dxq + e), r = _mm256_loadu_ps(dx + e);
    const V d = sub(_mm512_cvtps_pd(q), _mm512_cvtps_pd(r));
    acc[0] = add(acc[0], mul(d, d));
    _mm256_storeu_ps(ddx + e, _mm256_sub_ps(q, r));
  }
  store_lanes<1>(L, acc);
  return n8;
}
SNIP_V8 int64_t v8_err_dw(Lanes<2>& L, const float* dwq, const float* dw, const double* w, int64_t n) {
  V acc[2] = {_mm512_setzero_pd(), _mm512_setzero_pd()};
  const int64_t n8 = n / 8 * 8;
  for (int64_t e = 0; e < n8; e += 8) {
    const V d = sub(ld8(dwq + e), ld8(dw + e));
    const V d2 = mul(d, d);
    acc[0] = add(acc[0], d2);
    acc[1] = add(acc[1], mul(d2, _mm512_loadu_pd(w + e)));
  }
  store_lanes<2>(L, acc);
  return n8;
}

// g[c] += a[r·n + c]² for every row r in order, columns c < n / 8 · 8 (each column its own
// chain, as in the scalar loop); returns the columns done.
SNIP_V8 int64_t v8_col_sq(double* g, const float* a, int64_t rows, int64_t n) {
  const int64_t n8 = n / 8 * 8;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n8; c += 8) {
      const V x = ld8(a + r * n + c);
      _mm512_storeu_pd(g + c, add(_mm512_loadu_pd(g + c), mul(x, x)));
    }
  return n8;
}

// record_adam_factors over whole rows of K (a multiple of 8) elements: w_ij into w and the
// five sums (m², v², w, γ_i·x_j·w, update²).
SNIP_V8 int64_t v8_adam(Lanes<5>& L, const PreviewConsts& c, const float* m0, const float* v0, const float* W,
                        const float* dW, const double* gam, const double* xcol, double* w, int64_t N, int64_t K) {
  V acc[5];
  for (V& a : acc) a = _mm512_setzero_pd();
  const V clip = _mm512_set1_pd(c.clip), b1 = _mm512_set1_pd(c.beta1), omb1 = _mm512_set1_pd(c.om_beta1),
          b2 = _mm512_set1_pd(c.beta2), omb2 = _mm512_set1_pd(c.om_beta2), bc2 = _mm512_set1_pd(c.bc2),
          eps = _mm512_set1_pd(c.eps), lr_wd = _mm512_set1_pd(c.lr_wd), lr_bc1 = _mm512_set1_pd(c.lr_bc1),
          one = _mm512_set1_pd(1.0), zero = _mm512_setzero_pd();
  for (int64_t i = 0; i < N; ++i) {
    const V g_i = _mm512_set1_pd(gam[i]);
    for (int64_t j = 0; j < K; j += 8) {
      const int64_t e = i * K + j;
      const V m = ld8(m0 + e), v = ld8(v0 + e);
      const V gs = mul(clip, ld8(dW + e));
      const V m1 = add(mul(b1, m), mul(omb1, gs));
      const V v1 = add(mul(b2, v), mul(mul(omb2, gs), gs));
      const V denom = add(_mm512_sqrt_pd(_mm512_div_pd(v1, bc2)), eps);
      const V decay = c.decay ? mul(lr_wd, ld8(W + e)) : zero;
      const V update = add(decay, _mm512_div_pd(mul(lr_bc1, m1), denom));
      const V we = _mm512_div_pd(one, mul(denom, denom));
      _mm512_storeu_pd(w + e, we);
      acc[0] = add(acc[0], mul(m, m));
      acc[1] = add(acc[1], mul(v, v));
      acc[2] = add(acc[2], we);
      acc[3] = add(acc[3], mul(mul(g_i, _mm512_loadu_pd(xcol + j)), we));
      acc[4] = add(acc[4], mul(update, update));
    }
  }
  store_lanes<5>(L, acc);
  return N * K;
}
#undef SNIP_V8
#pragma GCC diagnostic pop
#else
int64_t v8_sq2(Lanes<2>&, const float*, const float*, int64_t) {
  return 0;
}
int64_t v8_err_y(Lanes<2>&, const float*, const float*, const float*, int64_t) {
  return 0;
}
int64_t v8_err_dx(Lanes<1>&, const float*, const float*, float*, int64_t) {
  return 0;
}
int64_t v8_err_dw(Lanes<2>&, const float*, const float*, const double*, int64_t) {
  return 0;
}
int64_t v8_col_sq(double*, const float*, int64_t, int64_t) {
  return 0;
}
int64_t v8_adam(Lanes<5>&, const PreviewConsts&, const float*, const float*, const float*, const float*, const double*,
                const double*, double*, int64_t, int64_t) {
  return 0;
}
#endif

}  // namespace snip::stats_sums
