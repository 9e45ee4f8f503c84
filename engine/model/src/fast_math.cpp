// See fast_math.h. This file is compiled with -ffp-contract=off (engine/model/CMakeLists.txt):
// no clone may fuse a*b+c, so every clone gives the same bits.
#include "fast_math.h"

#include <bit>
#include <cmath>

#include "snip/target_clones.h"

namespace snip::ops::fast {
namespace {

// Cephes expf: x = n·ln2 + r, |r| ≤ ln2/2, exp(r) ≈ 1 + r + r²·P(r), exp(x) = 2ⁿ·exp(r).
// Branch-free (selects only) so that loops over it vectorize.
[[gnu::always_inline]] inline float exp_approx(float x) {
  constexpr float kHi = 88.3762626647949f;   // ln(FLT_MAX) rounded down
  constexpr float kLo = -87.3365447505531f;  // ln(FLT_MIN): 2ⁿ stays a normal number
  float xc = x > kHi ? kHi : x;              // NaN compares false and passes through
  xc = xc < kLo ? kLo : xc;
  // n = round(x / ln 2): adding 1.5·2²³ leaves round(x·log2 e) in the low mantissa bits.
  const float t = xc * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;  // ln 2 = C1 + C2, C1 exact in 9 bits
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = p * (r * r) + r + 1.0f;
  const int32_t ni = std::bit_cast<int32_t>(t) - 0x4B400000;  // n as an integer, in [-126, 127]
  const float scale = std::bit_cast<float>((ni + 127) << 23);
  float e = y * scale;
  e = x < kLo ? 0.0f : e;
  e = x > kHi ? INFINITY : e;
  return e;
}

}  // namespace

SNIP_TARGET_CLONES void exp_shifted(float* y, const float* x, int64_t n, float shift) {
  for (int64_t i = 0; i < n; ++i) y[i] = exp_approx(x[i] - shift);
}

SNIP_TARGET_CLONES void silu_mul(float* __restrict h, const float* __restrict g, const float* __restrict u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + exp_approx(-g[i]));
    h[i] = g[i] * s * u[i];
  }
}

SNIP_TARGET_CLONES void silu_mul_backward(float* __restrict dg, float* __restrict du, const float* __restrict dh,
                                          const float* __restrict g, const float* __restrict u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float s = 1.0f / (1.0f + exp_approx(-g[i]));
    const float silu = g[i] * s;
    du[i] = dh[i] * silu;
    dg[i] = dh[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
  }
}

}  // namespace snip::ops::fast
