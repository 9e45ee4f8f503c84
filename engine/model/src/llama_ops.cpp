// Forward and backward of the Llama ops other than the linear layers (see llama_ops.h for
// the math). Rows are independent, so each op parallelizes over rows with OpenMP; reductions
// over rows (norm weight gradients) run in a fixed order so results do not depend on threads.
#include "snip/llama_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "snip/error.h"
#include "snip/parallel.h"

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

template <class R>
void rope_forward(R* y, const R* x, const R* cos_t, const R* sin_t, int B, int T, int H, int HD) {
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
          const R a = xr[i], b = xr[i + h];
          yr[i] = a * cs[i] - b * sn[i];
          yr[i + h] = b * cs[i] + a * sn[i];
        }
      }
    }
  });
}

template <class R>
void rope_backward(R* dx, const R* dy, const R* cos_t, const R* sin_t, int B, int T, int H, int HD) {
  const int h = HD / 2;
  parallel_for(int64_t(B) * T, int64_t(B) * T * H * HD, [&](int64_t lo, int64_t hi) {
    for (int64_t bt = int64_t(lo); bt < int64_t(hi); ++bt) {
      const int t = int(bt % T);
      const R* cs = cos_t + int64_t(t) * h;
      const R* sn = sin_t + int64_t(t) * h;
      for (int head = 0; head < H; ++head) {
        const R* dyr = dy + (bt * H + head) * HD;
        R* dxr = dx + (bt * H + head) * HD;
        for (int i = 0; i < h; ++i) {
          const R a = dyr[i], b = dyr[i + h];
          dxr[i] = a * cs[i] + b * sn[i];
          dxr[i + h] = b * cs[i] - a * sn[i];
        }
      }
    }
  });
}

template <class R>
void attention_forward_ref(R* out, R* probs, const R* q, const R* k, const R* v, int B, int T, int NH, int KVH,
                           int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;  // row strides
  parallel_for(B * NH, int64_t(B) * NH * T * T * HD, [&](int64_t lo, int64_t hi) {
    for (int bh = int(lo); bh < int(hi); ++bh) {
      const int b = bh / NH, h = bh % NH, kh = h / rep;
      R* P = probs + int64_t(bh) * T * T;  // (T, T) for this (b, h)
      for (int t = 0; t < T; ++t) {
        const R* qt = q + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
        R* pt = P + int64_t(t) * T;
        R mx = -INFINITY;
        for (int u = 0; u <= t; ++u) {
          const R* ku = k + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
          R s = 0;
          for (int d = 0; d < HD; ++d) s += qt[d] * ku[d];
          s *= scale;
          pt[u] = s;
          mx = std::max(mx, s);
        }
        R sum = 0;
        for (int u = 0; u <= t; ++u) {
          pt[u] = std::exp(pt[u] - mx);
          sum += pt[u];
        }
        const R inv = R(1) / sum;
        for (int u = 0; u <= t; ++u) pt[u] *= inv;
        for (int u = t + 1; u < T; ++u) pt[u] = 0;
        R* ot = out + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
        for (int d = 0; d < HD; ++d) ot[d] = 0;
        for (int u = 0; u <= t; ++u) {
          const R* vu = v + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
          const R p = pt[u];
          for (int d = 0; d < HD; ++d) ot[d] += p * vu[d];
        }
      }
    }
  });
}

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
      std::vector<R> dS(T);
      for (int t = 0; t < T; ++t) {
        R* dkt = dk + (int64_t(b) * T + t) * ks + int64_t(kh) * HD;
        R* dvt = dv + (int64_t(b) * T + t) * ks + int64_t(kh) * HD;
        for (int d = 0; d < HD; ++d) dkt[d] = dvt[d] = 0;
      }
      for (int h = kh * rep; h < (kh + 1) * rep; ++h) {
        const R* P = probs + (int64_t(b) * NH + h) * T * T;
        for (int t = 0; t < T; ++t) {
          const R* pt = P + int64_t(t) * T;
          const R* dot = dout + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
          const R* qt = q + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
          R* dqt = dq + (int64_t(b) * T + t) * qs + int64_t(h) * HD;
          // dP[u] = dout_t·v_u ; dv_u += P[t,u]·dout_t
          R rowsum = 0;
          for (int u = 0; u <= t; ++u) {
            const R* vu = v + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            R* dvu = dv + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            R dp = 0;
            for (int d = 0; d < HD; ++d) dp += dot[d] * vu[d];
            const R p = pt[u];
            for (int d = 0; d < HD; ++d) dvu[d] += p * dot[d];
            dS[u] = dp;
            rowsum += p * dp;
          }
          for (int d = 0; d < HD; ++d) dqt[d] = 0;
          for (int u = 0; u <= t; ++u) {
            const R ds = pt[u] * (dS[u] - rowsum) * scale;
            const R* ku = k + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            R* dku = dk + (int64_t(b) * T + u) * ks + int64_t(kh) * HD;
            for (int d = 0; d < HD; ++d) {
              dqt[d] += ds * ku[d];
              dku[d] += ds * qt[d];
            }
          }
        }
      }
    }
  });
}

// ---- attention as GEMMs per (batch, head): the fast path (the scalar loops above are its reference) ----

namespace {
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda, const float* B,
          int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}
void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const double* A, int64_t lda,
          const double* B, int64_t ldb, double beta, double* C, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
              ldb, beta, C, ldc);
}
// The softmax rows between two GEMMs run on the calling thread: waking pool workers right after
// an OpenBLAS call makes them fight OpenBLAS's still-spinning threads for the cores.
template <class F>
void run_rows(int64_t n, const F& fn) {
  fn(0, n);
}

}  // namespace

// Per (b, h): S = scale·Q_h·K_hᵀ (T×T, one GEMM; the masked upper triangle is computed and
// discarded, still far cheaper than scalar loops), causal softmax by rows, O_h = P·V_h.
template <class R>
void attention_forward(R* out, R* probs, const R* q, const R* k, const R* v, int B, int T, int NH, int KVH, int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int kh = h / rep;
      const R* Q = q + int64_t(b) * T * qs + int64_t(h) * HD;  // (T, HD), row stride qs
      const R* K = k + int64_t(b) * T * ks + int64_t(kh) * HD;
      const R* V = v + int64_t(b) * T * ks + int64_t(kh) * HD;
      R* P = probs + (int64_t(b) * NH + h) * T * T;
      gemm(false, true, T, T, HD, scale, Q, qs, K, ks, R(0), P, T);
      run_rows(T, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          R* pt = P + t * T;
          R mx = -INFINITY;
          for (int64_t u = 0; u <= t; ++u) mx = std::max(mx, pt[u]);
          R sum = 0;
          for (int64_t u = 0; u <= t; ++u) {
            pt[u] = std::exp(pt[u] - mx);
            sum += pt[u];
          }
          const R inv = R(1) / sum;
          for (int64_t u = 0; u <= t; ++u) pt[u] *= inv;
          for (int64_t u = t + 1; u < T; ++u) pt[u] = 0;
        }
      });
      gemm(false, false, T, HD, T, R(1), P, T, V, ks, R(0), out + int64_t(b) * T * qs + int64_t(h) * HD, qs);
    }
}

// Per (b, h): dP = dO·Vᵀ, dV += Pᵀ·dO, dS = P∘(dP − rowsum(P∘dP))·scale, dQ = dS·K, dK += dSᵀ·Q.
template <class R>
void attention_backward(R* dq, R* dk, R* dv, const R* dout, const R* probs, const R* q, const R* k, const R* v, int B,
                        int T, int NH, int KVH, int HD) {
  const int rep = NH / KVH;
  const R scale = R(1) / std::sqrt(R(HD));
  const int64_t qs = int64_t(NH) * HD, ks = int64_t(KVH) * HD;
  std::fill(dk, dk + int64_t(B) * T * ks, R(0));
  std::fill(dv, dv + int64_t(B) * T * ks, R(0));
  std::vector<R> dP(size_t(T) * T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      const int kh = h / rep;
      const int64_t qo = int64_t(b) * T * qs + int64_t(h) * HD, ko = int64_t(b) * T * ks + int64_t(kh) * HD;
      const R* P = probs + (int64_t(b) * NH + h) * T * T;
      gemm(false, true, T, T, HD, R(1), dout + qo, qs, v + ko, ks, R(0), dP.data(), T);
      gemm(true, false, T, HD, T, R(1), P, T, dout + qo, qs, R(1), dv + ko, ks);
      run_rows(T, [&](int64_t lo, int64_t hi) {
        for (int64_t t = lo; t < hi; ++t) {
          const R* pt = P + t * T;
          R* d = dP.data() + t * T;
          R rowsum = 0;
          for (int64_t u = 0; u <= t; ++u) rowsum += pt[u] * d[u];
          for (int64_t u = 0; u <= t; ++u) d[u] = pt[u] * (d[u] - rowsum) * scale;
          for (int64_t u = t + 1; u < T; ++u) d[u] = 0;
        }
      });
      gemm(false, false, T, HD, T, R(1), dP.data(), T, k + ko, ks, R(0), dq + qo, qs);
      gemm(true, false, T, HD, T, R(1), dP.data(), T, q + qo, qs, R(1), dk + ko, ks);
    }
}

template <class R>
void swiglu_forward(R* h, const R* g, const R* u, int64_t n) {
  parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = int64_t(lo); i < int64_t(hi); ++i) {
      const R s = R(1) / (R(1) + std::exp(-g[i]));
      h[i] = g[i] * s * u[i];
    }
  });
}
template <class R>
void swiglu_backward(R* dg, R* du, const R* dh, const R* g, const R* u, int64_t n) {
  parallel_for(n, n, [&](int64_t lo, int64_t hi) {
    for (int64_t i = int64_t(lo); i < int64_t(hi); ++i) {
      const R s = R(1) / (R(1) + std::exp(-g[i]));
      const R silu = g[i] * s;
      du[i] = dh[i] * silu;
      dg[i] = dh[i] * u[i] * s * (R(1) + g[i] * (R(1) - s));
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
