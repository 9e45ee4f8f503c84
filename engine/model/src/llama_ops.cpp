// Forward and backward of the Llama ops other than the linear layers (see llama_ops.h for
// the math). Rows are independent, so each op parallelizes over rows with OpenMP; reductions
// over rows (norm weight gradients) run in a fixed order so results do not depend on threads.
#include "snip/llama_ops.h"

#include <cblas.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <type_traits>
#include <vector>

#include "fast_math.h"
#include "gemm.h"
#include "snip/blas_threads.h"
#include "snip/error.h"
#include "snip/parallel.h"
#include "snip/thread_pool.h"

namespace snip::ops {

template <class R>
void embedding_forward(R* out, const int32_t* tokens, const R* wte, int64_t BT, int C) {
  for (int64_t bt = 0; bt < BT; ++bt) std::memcpy(out + bt * C, wte + int64_t(tokens[bt]) * C, sizeof(R) * C);
}
template <class R>
void embedding_backward(R* dwte, const R* dout, const int32_t* tokens, int64_t BT, int C) {
  for (int64_t bt = 0; bt < BT; ++bt) {
    R* row = dwte + int64_t(tokens[bt]) * C;
    const R* d = dout + bt * C;
    for (int c = 0; c < C; ++c) row[c] += d[c];
  }
}

template <class R>
void rmsnorm_forward(R* y, R* rstd, const R* x, const R* w, int64_t BT, int C, double eps) {
  parallel_for(BT, BT * C, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = int64_t(lo); bt < int64_t(hi); ++bt) {
      const R* xr = x + bt * C;
      R* yr = y + bt * C;
      R ss = 0;
      for (int c = 0; c < C; ++c) ss += xr[c] * xr[c];
      const R r = R(1) / std::sqrt(ss / R(C) + R(eps));
      rstd[bt] = r;
      for (int c = 0; c < C; ++c) yr[c] = xr[c] * r * w[c];
    }
  });
}

template <class R>
void rmsnorm_backward(R* dx, R* dw, const R* dy, const R* x, const R* w, const R* rstd, int64_t BT, int C,
                      bool accumulate) {
  parallel_for(BT, BT * C, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = int64_t(lo); bt < int64_t(hi); ++bt) {
      const R* xr = x + bt * C;
      const R* dyr = dy + bt * C;
      R* dxr = dx + bt * C;
      const R r = rstd[bt];
      R dot = 0;  // Σ_i dy_i·w_i·x_i
      for (int c = 0; c < C; ++c) dot += dyr[c] * w[c] * xr[c];
      const R k = r * r * r * dot / R(C);
      if (accumulate) {
        for (int c = 0; c < C; ++c) dxr[c] += r * w[c] * dyr[c] - k * xr[c];
      } else {
        for (int c = 0; c < C; ++c) dxr[c] = r * w[c] * dyr[c] - k * xr[c];
      }
    }
  });
  if (dw) {  // serial over rows: a fixed summation order
    for (int64_t bt = 0; bt < BT; ++bt) {
      const R* xr = x + bt * C;
      const R* dyr = dy + bt * C;
      const R r = rstd[bt];
      for (int c = 0; c < C; ++c) dw[c] += dyr[c] * xr[c] * r;
    }
  }
}

template <class R>
void rope_table(R* cos_t, R* sin_t, int T, int HD, double theta) {
  const int h = HD / 2;
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < h; ++i) {
      const double inv_freq = 1.0 / std::pow(theta, double(2 * i) / double(HD));
      const double a = double(t) * inv_freq;
      cos_t[t * h + i] = R(std::cos(a));
      sin_t[t * h + i] = R(std::sin(a));
    }
}

// Each head's pairs (x[i], x[i + h]) rotated by position t's angles, or by their negatives when
// kInverse: the rotation is orthogonal, so the backward pass is the inverse rotation of dy.
template <bool kInverse, class R>
void rope_rotate(R* y, const R* x, const R* cos_t, const R* sin_t, int B, int T, int H, int HD) {
  const int h = HD / 2;
  parallel_for(int64_t(B) * T, int64_t(B) * T * H * HD, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = int64_t(lo); bt < int64_t(hi); ++bt) {
      const int t = int(bt % T);
      const R* cs = cos_t + int64_t(t) * h;
      const R* sn = sin_t + int64_t(t) * h;
      for (int head = 0; head < H; ++head) {
        const R* xr = x + (bt * H + head) * HD;
        R* yr = y + (bt * H + head) * HD;
        for (int i = 0; i < h; ++i) {
          const R a = xr[i], b = xr[i + h], s = kInverse ? -sn[i] : sn[i];
          yr[i] = a * cs[i] - b * s;
          yr[i + h] = b * cs[i] + a * s;
        }
      }
    }
  });
}

template <class R>
void rope_forward(R* y, const R* x, const R* cos_t, const R* sin_t, int B, int T, int H, int HD) {
  rope_rotate<false>(y, x, cos_t, sin_t, B, T, H, HD);
}

template <class R>
void rope_backward(R* dx, const R* dy, const R* cos_t, const R* sin_t, int B, int T, int H, int HD) {
  rope_rotate<true>(dx, dy, cos_t, sin_t, B, T, H, HD);
}

// ---- the attention reference: the math of llama_ops.h written out on whole (T, T) matrices ----
//
// Eigen::Map views over the (B, T, H, HD) buffers, one (T, HD) matrix per head (row stride H·HD),
// no copies. The reference computes the full square and masks it, where the fast path below skips
// the masked blocks; the two share no code, so each is the other's check.

namespace {
template <class R>
using RowMatrix = Eigen::Matrix<R, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class R>
using ConstView = Eigen::Map<const RowMatrix<R>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class R>
using View = Eigen::Map<RowMatrix<R>, Eigen::Unaligned, Eigen::OuterStride<>>;

// The (rows, cols) matrix at p whose rows are `stride` elements apart.
template <class R>
ConstView<R> view(const R* p, int rows, int cols, int64_t stride) {
  return ConstView<R>(p, rows, cols, Eigen::OuterStride<>(stride));
}
template <class R>
View<R> view(R* p, int rows, int cols, int64_t stride) {
  return View<R>(p, rows, cols, Eigen::OuterStride<>(stride));
}
}  // namespace

// Per (b, h): P = causal_softmax(Q·Kᵀ/sqrt(HD)) row by row, O = P·V (P is zero above the diagonal).
template <class R>
void attention_forward_ref(R* out, R* probs, const R* q, const R* k, const R* v, int B, int T, int NH, int KVH,
                           int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;  // row strides
  parallel_for(B * NH, int64_t(B) * NH * T * T * HD, [&](int64_t lo, int64_t hi) {
    for (int bh = int(lo); bh < int(hi); ++bh) {
      const int b = bh / NH, h = bh % NH, kh = h / rep;
      const auto Q = view(q + int64_t(b) * T * qs + int64_t(h) * HD, T, HD, qs);
      const auto K = view(k + int64_t(b) * T * ks + int64_t(kh) * HD, T, HD, ks);
      const auto V = view(v + int64_t(b) * T * ks + int64_t(kh) * HD, T, HD, ks);
      auto P = view(probs + int64_t(bh) * T * T, T, T, T);
      auto O = view(out + int64_t(b) * T * qs + int64_t(h) * HD, T, HD, qs);
      P.noalias() = scale * Q * K.transpose();
      for (int t = 0; t < T; ++t) {
        auto s = P.row(t).head(t + 1).array();  // the scores query t may see
        s = (s - s.maxCoeff()).exp();
        s /= s.sum();
        P.row(t).tail(T - t - 1).setZero();
      }
      O.noalias() = P * V;
    }
  });
}

// Per kv head, over the query heads sharing it: dP = dO·Vᵀ, dS = P ⊙ (dP − rowsum(P ⊙ dP))/sqrt(HD),
// dQ = dS·K, dK += dSᵀ·Q, dV += Pᵀ·dO. The zeros of P above the diagonal keep dS causal.
template <class R>
void attention_backward_ref(R* dq, R* dk, R* dv, const R* dout, const R* probs, const R* q, const R* k, const R* v,
                            int B, int T, int NH, int KVH, int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  // One task per (b, kv head): the query heads sharing a kv head all add into the same dk, dv.
  parallel_for(B * KVH, int64_t(B) * NH * T * T * HD, [&](int64_t lo, int64_t hi) {
    for (int bk = int(lo); bk < int(hi); ++bk) {
      const int b = bk / KVH, kh = bk % KVH;
      const int64_t ko = int64_t(b) * T * ks + int64_t(kh) * HD;
      const auto K = view(k + ko, T, HD, ks), V = view(v + ko, T, HD, ks);
      auto dK = view(dk + ko, T, HD, ks), dV = view(dv + ko, T, HD, ks);
      dK.setZero();
      dV.setZero();
      for (int h = kh * rep; h < (kh + 1) * rep; ++h) {
        const int64_t qo = int64_t(b) * T * qs + int64_t(h) * HD;
        const auto Q = view(q + qo, T, HD, qs), dO = view(dout + qo, T, HD, qs);
        const auto P = view(probs + (int64_t(b) * NH + h) * T * T, T, T, T);
        auto dQ = view(dq + qo, T, HD, qs);
        const RowMatrix<R> dP = dO * V.transpose();
        const Eigen::Array<R, Eigen::Dynamic, 1> rowsum = (P.array() * dP.array()).rowwise().sum();
        const RowMatrix<R> dS = scale * (P.array() * (dP.array().colwise() - rowsum)).matrix();
        dV.noalias() += P.transpose() * dO;
        dQ.noalias() = dS * K;
        dK.noalias() += dS.transpose() * Q;
      }
    }
  });
}

// ---- attention as GEMMs per (batch, head): the fast path (the scalar loops above are its reference) ----
//
// The work is split into one task per (batch, kv head) group on the shared pool (the heads of a
// group accumulate into the same dK/dV, so they stay in one task, in order), and OpenBLAS runs
// single-threaded inside each task. Each task's result is fixed whichever thread runs it. (Split
// across OpenBLAS's threads instead, the ~2,300 small per-head GEMMs of a step would each end in a
// barrier, which on a loaded machine waits for a descheduled partner: bench/train/RESULTS.md.)
//
// Causal blocking: query rows go in blocks of kAttnRows; the block [r0, r1) only needs keys
// [0, r1), so S = Q·Kᵀ, O = P·V and the four backward GEMMs skip the masked upper triangle
// (at T = 256 they do 10/16 of the full square's work).

namespace {
constexpr int kAttnRows = 64;

// p[u] = exp(p[u] − mx) for u < n: vectorized for float (fast_math.h), std::exp for the double path.
void exp_shifted(float* p, int64_t n, float mx) {
  fast::exp_shifted(p, p, n, mx);
}
void exp_shifted(double* p, int64_t n, double mx) {
  for (int64_t u = 0; u < n; ++u) p[u] = std::exp(p[u] - mx);
}

// Runs task(b, kh) for every (batch, kv head) group: on the pool with single-threaded BLAS when
// the pool has several threads, else in order on this thread with BLAS's own threading.
template <class F>
void for_each_group(int B, int KVH, const F& task) {
  const int n = B * KVH;
  if (pool_threads() < 2 || n < 2) {
    for (int i = 0; i < n; ++i) task(i / KVH, i % KVH);
    return;
  }
  // OpenBLAS single-threaded while any attention loop runs on the pool (nested and concurrent
  // loops counted; snip/blas_threads.h).
  BlasSingleThreaded single;
  pool_run(n, [&](int i) { task(i / KVH, i % KVH); });
}

}  // namespace

// Per head and row block [r0, r1): S = scale·Q[r0:r1]·K[0:r1]ᵀ, causal softmax by rows (the
// stored row is zero beyond t), O[r0:r1] = P[r0:r1, 0:r1]·V[0:r1].
template <class R>
void attention_forward(R* out, R* probs, const R* q, const R* k, const R* v, int B, int T, int NH, int KVH, int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  for_each_group(B, KVH, [&](int b, int kh) {
    const R* K = k + int64_t(b) * T * ks + int64_t(kh) * HD;  // (T, HD), row stride ks
    const R* V = v + int64_t(b) * T * ks + int64_t(kh) * HD;
    for (int h = kh * rep; h < (kh + 1) * rep; ++h) {
      const R* Q = q + int64_t(b) * T * qs + int64_t(h) * HD;  // (T, HD), row stride qs
      R* O = out + int64_t(b) * T * qs + int64_t(h) * HD;
      R* P = probs + (int64_t(b) * NH + h) * T * T;
      for (int r0 = 0; r0 < T; r0 += kAttnRows) {
        const int r1 = std::min(T, r0 + kAttnRows);
        gemm(false, true, r1 - r0, r1, HD, scale, Q + int64_t(r0) * qs, qs, K, ks, R(0), P + int64_t(r0) * T, T);
        for (int64_t t = r0; t < r1; ++t) {
          R* pt = P + t * T;
          R mx = -INFINITY;
          for (int64_t u = 0; u <= t; ++u) mx = std::max(mx, pt[u]);
          exp_shifted(pt, t + 1, mx);
          R sum = 0;
          for (int64_t u = 0; u <= t; ++u) sum += pt[u];
          const R inv = R(1) / sum;
          for (int64_t u = 0; u <= t; ++u) pt[u] *= inv;
          std::fill(pt + t + 1, pt + T, R(0));
        }
        gemm(false, false, r1 - r0, HD, r1, R(1), P + int64_t(r0) * T, T, V, ks, R(0), O + int64_t(r0) * qs, qs);
      }
    }
  });
}

// Per head and row block [r0, r1): dP = dO·Vᵀ, dV[0:r1] += Pᵀ·dO, dS = P∘(dP − rowsum(P∘dP))·scale,
// dQ[r0:r1] = dS·K[0:r1], dK[0:r1] += dSᵀ·Q[r0:r1].
template <class R>
void attention_backward(R* dq, R* dk, R* dv, const R* dout, const R* probs, const R* q, const R* k, const R* v, int B,
                        int T, int NH, int KVH, int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  for_each_group(B, KVH, [&](int b, int kh) {
    const int64_t ko = int64_t(b) * T * ks + int64_t(kh) * HD;
    for (int64_t t = 0; t < T; ++t) {
      std::fill(dk + ko + t * ks, dk + ko + t * ks + HD, R(0));
      std::fill(dv + ko + t * ks, dv + ko + t * ks + HD, R(0));
    }
    thread_local std::vector<R> scratch;
    if (scratch.size() < size_t(kAttnRows) * T) scratch.resize(size_t(kAttnRows) * T);
    R* dP = scratch.data();
    for (int h = kh * rep; h < (kh + 1) * rep; ++h) {
      const int64_t qo = int64_t(b) * T * qs + int64_t(h) * HD;
      const R* P = probs + (int64_t(b) * NH + h) * T * T;
      for (int r0 = 0; r0 < T; r0 += kAttnRows) {
        const int r1 = std::min(T, r0 + kAttnRows), rows = r1 - r0;
        const R* Pb = P + int64_t(r0) * T;
        const R* dOb = dout + qo + int64_t(r0) * qs;
        gemm(false, true, rows, r1, HD, R(1), dOb, qs, v + ko, ks, R(0), dP, r1);
        gemm(true, false, r1, HD, rows, R(1), Pb, T, dOb, qs, R(1), dv + ko, ks);
        for (int64_t i = 0; i < rows; ++i) {
          const int64_t t = r0 + i;
          const R* pt = Pb + i * T;
          R* d = dP + i * r1;
          R rowsum = 0;
          for (int64_t u = 0; u <= t; ++u) rowsum += pt[u] * d[u];
          for (int64_t u = 0; u <= t; ++u) d[u] = pt[u] * (d[u] - rowsum) * scale;
          std::fill(d + t + 1, d + r1, R(0));
        }
        gemm(false, false, rows, HD, r1, R(1), dP, r1, k + ko, ks, R(0), dq + qo + int64_t(r0) * qs, qs);
        gemm(true, false, r1, HD, rows, R(1), dP, r1, q + qo + int64_t(r0) * qs, qs, R(1), dk + ko, ks);
      }
    }
  });
}

template <class R>
void swiglu_forward(R* h, const R* g, const R* u, int64_t n) {
  parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<R, float>) {
      fast::silu_mul(h + lo, g + lo, u + lo, hi - lo);
    } else {
      for (int64_t i = lo; i < hi; ++i) {
        const R s = R(1) / (R(1) + std::exp(-g[i]));
        h[i] = g[i] * s * u[i];
      }
    }
  });
}
template <class R>
void swiglu_backward(R* dg, R* du, const R* dh, const R* g, const R* u, int64_t n) {
  parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    if constexpr (std::is_same_v<R, float>) {
      fast::silu_mul_backward(dg + lo, du + lo, dh + lo, g + lo, u + lo, hi - lo);
    } else {
      for (int64_t i = lo; i < hi; ++i) {
        const R s = R(1) / (R(1) + std::exp(-g[i]));
        const R silu = g[i] * s;
        du[i] = dh[i] * silu;
        dg[i] = dh[i] * u[i] * s * (R(1) + g[i] * (R(1) - s));
      }
    }
  });
}

template <class R>
void residual_forward(R* out, const R* a, const R* b, int64_t n) {
  parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) out[i] = a[i] + b[i];
  });
}

template <class R>
double crossentropy_forward(R* probs, R* losses, const R* logits, const int32_t* targets, int64_t BT, int V) {
  parallel_for(BT, BT * V, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = int64_t(lo); bt < int64_t(hi); ++bt) {
      const R* z = logits + bt * V;
      R* p = probs + bt * V;
      R mx = z[0];
      for (int i = 1; i < V; ++i) mx = std::max(mx, z[i]);
      R sum = 0;
      for (int i = 0; i < V; ++i) {
        p[i] = std::exp(z[i] - mx);
        sum += p[i];
      }
      const R inv = R(1) / sum;
      for (int i = 0; i < V; ++i) p[i] *= inv;
      const int32_t tgt = targets[bt];
      SNIP_ASSERT(tgt >= 0 && tgt < V);
      losses[bt] = (mx + std::log(sum)) - z[tgt];  // logsumexp − z_target
    }
  });
  double mean = 0;  // fixed order
  for (int64_t bt = 0; bt < BT; ++bt) mean += double(losses[bt]);
  return mean / double(BT);
}

template <class R>
void crossentropy_backward(R* dlogits, const R* probs, const int32_t* targets, int64_t BT, int V, double scale) {
  const R s = R(scale);
  parallel_for(BT, BT * V, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = int64_t(lo); bt < int64_t(hi); ++bt) {
      const R* p = probs + bt * V;
      R* d = dlogits + bt * V;
      for (int i = 0; i < V; ++i) d[i] = p[i] * s;
      d[targets[bt]] -= s;
    }
  });
}

#define SNIP_INSTANTIATE_OPS(R)                                                                                        \
  template void embedding_forward<R>(R*, const int32_t*, const R*, int64_t, int);                                      \
  template void embedding_backward<R>(R*, const R*, const int32_t*, int64_t, int);                                     \
  template void rmsnorm_forward<R>(R*, R*, const R*, const R*, int64_t, int, double);                                  \
  template void rmsnorm_backward<R>(R*, R*, const R*, const R*, const R*, const R*, int64_t, int, bool);               \
  template void rope_table<R>(R*, R*, int, int, double);                                                               \
  template void rope_forward<R>(R*, const R*, const R*, const R*, int, int, int, int);                                 \
  template void rope_backward<R>(R*, const R*, const R*, const R*, int, int, int, int);                                \
  template void attention_forward<R>(R*, R*, const R*, const R*, const R*, int, int, int, int, int);                   \
  template void attention_forward_ref<R>(R*, R*, const R*, const R*, const R*, int, int, int, int, int);               \
  template void attention_backward_ref<R>(R*, R*, R*, const R*, const R*, const R*, const R*, const R*, int, int, int, \
                                          int, int);                                                                   \
  template void attention_backward<R>(R*, R*, R*, const R*, const R*, const R*, const R*, const R*, int, int, int,     \
                                      int, int);                                                                       \
  template void swiglu_forward<R>(R*, const R*, const R*, int64_t);                                                    \
  template void swiglu_backward<R>(R*, R*, const R*, const R*, const R*, int64_t);                                     \
  template void residual_forward<R>(R*, const R*, const R*, int64_t);                                                  \
  template double crossentropy_forward<R>(R*, R*, const R*, const int32_t*, int64_t, int);                             \
  template void crossentropy_backward<R>(R*, const R*, const int32_t*, int64_t, int, double);

SNIP_INSTANTIATE_OPS(float)
SNIP_INSTANTIATE_OPS(double)

}  // namespace snip::ops
