// 16×16 random Hadamard transform along rows (see hadamard.h): fast Walsh–Hadamard butterflies
// on whole rows (vectorized along columns), and the explicit-matrix scalar twin.
#include "snip/hadamard.h"

#include <cstddef>
#include <vector>

namespace snip {

const std::array<float, 16>& hadamard16_signs() {
  // Fixed once (drawn from a fair coin); changing it changes every nvfp4+RHT result.
  static const std::array<float, 16> s = {1, -1, -1, 1, 1, 1, -1, 1, -1, 1, 1, -1, -1, -1, 1, -1};
  return s;
}

// Butterflies: after the stages h = 1, 2, 4, 8 row i holds Σ_j H16[i][j]·(s_j·a_j) with
// H16[i][j] = (-1)^popcount(i & j); the 1/4 is an exact power-of-two scaling.
void hadamard16_rows(float* a, int64_t rows, int64_t cols) {
  const auto& s = hadamard16_signs();
  for (int64_t t0 = 0; t0 + 16 <= rows; t0 += 16) {
    float* g = a + t0 * cols;
    for (int i = 0; i < 16; ++i)
      if (s[std::size_t(i)] < 0)
        for (int64_t c = 0; c < cols; ++c) g[i * cols + c] = -g[i * cols + c];
    for (int h = 1; h < 16; h <<= 1) {
      for (int i = 0; i < 16; ++i) {
        if (i & h) continue;
        float* __restrict u = g + i * cols;
        float* __restrict v = g + (i + h) * cols;
        for (int64_t c = 0; c < cols; ++c) {
          const float x = u[c], y = v[c];
          u[c] = x + y;
          v[c] = x - y;
        }
      }
    }
    for (int64_t c = 0; c < 16 * cols; ++c) g[c] *= 0.25f;
  }
}

void hadamard16_rows_ref(float* a, int64_t rows, int64_t cols) {
  const auto& s = hadamard16_signs();
  std::vector<double> col(16);
  for (int64_t t0 = 0; t0 + 16 <= rows; t0 += 16) {
    for (int64_t c = 0; c < cols; ++c) {
      for (int j = 0; j < 16; ++j) col[std::size_t(j)] = a[(t0 + j) * cols + c];
      for (int i = 0; i < 16; ++i) {
        double acc = 0;
        for (int j = 0; j < 16; ++j)
          acc += ((__builtin_popcount(unsigned(i & j)) & 1) ? -1.0 : 1.0) * s[std::size_t(j)] * col[std::size_t(j)];
        a[(t0 + i) * cols + c] = float(acc * 0.25);
      }
    }
  }
}

}  // namespace snip
