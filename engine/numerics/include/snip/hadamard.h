// The 16×16 random Hadamard transform of FORMATS.md (nvfp4 wgrad option): M = H16·D/4 with
// H16 the Sylvester Hadamard matrix and D = diag(s) a fixed random ±1 sign vector. M is
// orthogonal (M·Mᵀ = H16·H16ᵀ/16 = I), so rotating both wgrad operands along the token
// dimension T leaves dW = dYᵀ·X unchanged while spreading outliers across 16 tokens.
#pragma once
#include <array>
#include <cstdint>

namespace snip {

// The fixed sign vector s (entries ±1).
const std::array<float, 16>& hadamard16_signs();

// In place: every full group of 16 consecutive rows of the (rows, cols) row-major matrix a is
// replaced by M·group; a final partial group (rows % 16 rows) is left as is (identity).
void hadamard16_rows(float* a, int64_t rows, int64_t cols);
// Scalar twin: explicit 16×16 matrix product in double, rounded to FP32 at the end.
void hadamard16_rows_ref(float* a, int64_t rows, int64_t cols);

}  // namespace snip
