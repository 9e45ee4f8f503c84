// The statistics rounds' double sums on AVX-512 and AVX2 (snip/stats_sums.h; docs/METHOD.md 4.4).
// Hand-written kernels, one loop each, written once (stats_kernels.inc) for both tiers. -ffp-contract=off
// (CMakeLists.txt): a fused a*b+c would change bits against the scalar terms.
#include "snip/stats_sums.h"

#include <immintrin.h>

#include "snip/isa.h"

namespace snip::stats_sums {
namespace {
bool g_vector_sums_off = false;  // set_vector_sums(false): the scalar terms only
}  // namespace

bool vector_sums() {
#if defined(__x86_64__)
  return isa_at_least(IsaTier::avx2) && !g_vector_sums_off;
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
namespace {
namespace avx512 {
#define SNIP_VT __attribute__((target("avx512f,avx512dq")))
using V = __m512d;
SNIP_VT inline V ld8(const float* p) {
  return _mm512_cvtps_pd(_mm256_loadu_ps(p));
}
SNIP_VT inline V ldd(const double* p) {
  return _mm512_loadu_pd(p);
}
SNIP_VT inline void st(double* p, V v) {
  _mm512_storeu_pd(p, v);
}
SNIP_VT inline V set1(double x) {
  return _mm512_set1_pd(x);
}
SNIP_VT inline V zero() {
  return _mm512_setzero_pd();
}
SNIP_VT inline V add(V a, V b) {
  return _mm512_add_pd(a, b);
}
SNIP_VT inline V sub(V a, V b) {
  return _mm512_sub_pd(a, b);
}
SNIP_VT inline V mul(V a, V b) {
  return _mm512_mul_pd(a, b);
}
SNIP_VT inline V div(V a, V b) {
  return _mm512_div_pd(a, b);
}
SNIP_VT inline V sqrt(V a) {
  return _mm512_sqrt_pd(a);
}
#include "stats_kernels.inc"
#undef SNIP_VT
}  // namespace avx512

namespace avx2 {
// Lanes 0-3 in lo, 4-7 in hi. No "fma" in the target: with it GCC may fuse a·b + c.
#define SNIP_VT __attribute__((target("avx2")))
struct V {
  __m256d lo, hi;
};
SNIP_VT inline V ld8(const float* p) {
  const __m256 f = _mm256_loadu_ps(p);
  return {_mm256_cvtps_pd(_mm256_castps256_ps128(f)), _mm256_cvtps_pd(_mm256_extractf128_ps(f, 1))};
}
SNIP_VT inline V ldd(const double* p) {
  return {_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)};
}
SNIP_VT inline void st(double* p, V v) {
  _mm256_storeu_pd(p, v.lo);
  _mm256_storeu_pd(p + 4, v.hi);
}
SNIP_VT inline V set1(double x) {
  return {_mm256_set1_pd(x), _mm256_set1_pd(x)};
}
SNIP_VT inline V zero() {
  return {_mm256_setzero_pd(), _mm256_setzero_pd()};
}
SNIP_VT inline V add(V a, V b) {
  return {_mm256_add_pd(a.lo, b.lo), _mm256_add_pd(a.hi, b.hi)};
}
SNIP_VT inline V sub(V a, V b) {
  return {_mm256_sub_pd(a.lo, b.lo), _mm256_sub_pd(a.hi, b.hi)};
}
SNIP_VT inline V mul(V a, V b) {
  return {_mm256_mul_pd(a.lo, b.lo), _mm256_mul_pd(a.hi, b.hi)};
}
SNIP_VT inline V div(V a, V b) {
  return {_mm256_div_pd(a.lo, b.lo), _mm256_div_pd(a.hi, b.hi)};
}
SNIP_VT inline V sqrt(V a) {
  return {_mm256_sqrt_pd(a.lo), _mm256_sqrt_pd(a.hi)};
}
#include "stats_kernels.inc"
#undef SNIP_VT
}  // namespace avx2

// The tier's kernel: AVX-512 from tier avx512 up, AVX2 on avx2 (callers ask vector_sums() first).
bool use_avx512() {
  return isa_at_least(IsaTier::avx512);
}
}  // namespace
#pragma GCC diagnostic pop

int64_t v8_sq2(Lanes<2>& L, const float* a, const float* b, int64_t n) {
  return use_avx512() ? avx512::k_sq2(L, a, b, n) : avx2::k_sq2(L, a, b, n);
}
int64_t v8_err_y(Lanes<2>& L, const float* yq, const float* y, const float* dy, int64_t n) {
  return use_avx512() ? avx512::k_err_y(L, yq, y, dy, n) : avx2::k_err_y(L, yq, y, dy, n);
}
int64_t v8_err_dx(Lanes<1>& L, const float* dxq, const float* dx, float* ddx, int64_t n) {
  return use_avx512() ? avx512::k_err_dx(L, dxq, dx, ddx, n) : avx2::k_err_dx(L, dxq, dx, ddx, n);
}
int64_t v8_err_dw(Lanes<2>& L, const float* dwq, const float* dw, const double* w, int64_t n) {
  return use_avx512() ? avx512::k_err_dw(L, dwq, dw, w, n) : avx2::k_err_dw(L, dwq, dw, w, n);
}
int64_t v8_col_sq(double* g, const float* a, int64_t rows, int64_t n) {
  return use_avx512() ? avx512::k_col_sq(g, a, rows, n) : avx2::k_col_sq(g, a, rows, n);
}
int64_t v8_adam(Lanes<5>& L, const PreviewConsts& c, const float* m0, const float* v0, const float* W, const float* dW,
                const double* gam, const double* xcol, double* w, int64_t N, int64_t K) {
  return use_avx512() ? avx512::k_adam(L, c, m0, v0, W, dW, gam, xcol, w, N, K)
                      : avx2::k_adam(L, c, m0, v0, W, dW, gam, xcol, w, N, K);
}
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
