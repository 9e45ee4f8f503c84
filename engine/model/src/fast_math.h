// Vectorized exp for the model's float element-wise code (attention softmax, SiLU): the
// per-element libm expf calls were ~8% of an FP32 training step. A Cephes-style expf (range
// reduction by ln 2, degree-5 polynomial, exponent by bit construction), written so GCC
// vectorizes the loops, compiled for AVX-512/AVX2/SSE2 (snip/target_clones.h) with the same bits
// in every clone. Accuracy: within 2 ulp of the true exp over the whole float range
// (tests/model/test_fast_math.cpp); x < -87.34 gives 0, x > 88.38 gives +inf, NaN stays NaN.
// The double-precision reference path keeps std::exp.
#pragma once
#include <cstdint>

namespace snip::ops::fast {

// y[i] = exp(x[i] - shift); y may alias x.
void exp_shifted(float* y, const float* x, int64_t n, float shift);

// h = silu(g) · u, silu(g) = g / (1 + exp(-g)).
void silu_mul(float* h, const float* g, const float* u, int64_t n);

// Backward of h = silu(g) · u: dg = dh · u · s · (1 + g · (1 − s)), du = dh · silu(g), s = σ(g).
void silu_mul_backward(float* dg, float* du, const float* dh, const float* g, const float* u, int64_t n);

}  // namespace snip::ops::fast
