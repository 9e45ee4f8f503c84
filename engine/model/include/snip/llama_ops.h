// The non-linear-layer ops of a Llama block, forward and backward side by side (llm.c style):
// embedding, RMSNorm, rotary embeddings (HF rotate-half), causal grouped-query attention,
// SwiGLU, residual add and mean cross-entropy. Templated on the scalar type: `float` is the
// training path, `double` the reference path used for finite-difference gradient checks.
//
// Shape legend (docs/ARCHITECTURE.md): B batch, T sequence, C model dim, NH heads, KVH kv heads,
// HD head dim, F ffn dim, V vocab, L layers; BT = B·T rows. Row-major everywhere.
// Backward functions ACCUMULATE (+=) into parameter gradients; for input gradients the
// `accumulate` flag says whether dx is overwritten or added to (residual streams add).
#pragma once
#include <cstdint>

namespace snip::ops {

// out[bt,:] = wte[tokens[bt],:]
template <class R>
void embedding_forward(R* out, const int32_t* tokens, const R* wte, int64_t BT, int C);
// dwte[tokens[bt],:] += dout[bt,:]
template <class R>
void embedding_backward(R* dwte, const R* dout, const int32_t* tokens, int64_t BT, int C);

// RMSNorm: y = x · rstd · w,  rstd = 1/sqrt(mean(x²) + eps).   x, y: (BT, C), w: (C), rstd: (BT)
template <class R>
void rmsnorm_forward(R* y, R* rstd, const R* x, const R* w, int64_t BT, int C, double eps);
// dx_j (+)= rstd·w_j·dy_j − rstd³/C · x_j · Σ_i dy_i·w_i·x_i ;  dw_i += Σ_bt dy_i·x_i·rstd  (dw may be null)
template <class R>
void rmsnorm_backward(R* dx, R* dw, const R* dy, const R* x, const R* w, const R* rstd, int64_t BT, int C,
                      bool accumulate);

// Rotary table for positions 0..T-1: cos/sin (T, HD/2), angle = t · theta^(−2i/HD).
template <class R>
void rope_table(R* cos, R* sin, int T, int HD, double theta);
// HF rotate-half on every head of x (B, T, H, HD): with h = HD/2, for i < h
//   y[i] = x[i]·cos − x[i+h]·sin,   y[i+h] = x[i+h]·cos + x[i]·sin.  y may alias x.
template <class R>
void rope_forward(R* y, const R* x, const R* cos, const R* sin, int B, int T, int H, int HD);
// The transpose rotation: dx[i] = dy[i]·cos + dy[i+h]·sin,  dx[i+h] = dy[i+h]·cos − dy[i]·sin.  dx may alias dy.
template <class R>
void rope_backward(R* dx, const R* dy, const R* cos, const R* sin, int B, int T, int H, int HD);

// Causal attention with GQA (query head h reads kv head h / (NH/KVH), HF repeat_kv):
//   P = softmax(Q·Kᵀ/sqrt(HD) + causal mask),  out = P·V.
// q, out: (B, T, NH, HD); k, v: (B, T, KVH, HD); probs: (B, NH, T, T) (upper triangle zero).
template <class R>
void attention_forward(R* out, R* probs, const R* q, const R* k, const R* v, int B, int T, int NH, int KVH, int HD);
// dP = dout·Vᵀ, dS = P ⊙ (dP − rowsum(P ⊙ dP)), dq = dS·K/sqrt(HD), dk = dSᵀ·Q/sqrt(HD), dv = Pᵀ·dout.
// dq, dk, dv are overwritten.
template <class R>
void attention_backward(R* dq, R* dk, R* dv, const R* dout, const R* probs, const R* q, const R* k, const R* v, int B,
                        int T, int NH, int KVH, int HD);
// Reference twins of the two above (the blocked GEMM fast path's test oracle): the same math on
// whole masked (T, T) matrices with Eigen, sharing no code with the fast path.
template <class R>
void attention_forward_ref(R* out, R* probs, const R* q, const R* k, const R* v, int B, int T, int NH, int KVH, int HD);
template <class R>
void attention_backward_ref(R* dq, R* dk, R* dv, const R* dout, const R* probs, const R* q, const R* k, const R* v,
                            int B, int T, int NH, int KVH, int HD);

// SwiGLU: h = silu(g) · u,  silu(g) = g·σ(g).   g, u, h: (BT, F)
template <class R>
void swiglu_forward(R* h, const R* g, const R* u, int64_t n);
// du = dh·silu(g),  dg = dh·u·σ(g)·(1 + g·(1−σ(g))). Overwrites dg, du.
template <class R>
void swiglu_backward(R* dg, R* du, const R* dh, const R* g, const R* u, int64_t n);

// out = a + b  (n elements)
template <class R>
void residual_forward(R* out, const R* a, const R* b, int64_t n);

// Mean cross-entropy over BT rows: loss = mean_bt (logsumexp(logits[bt]) − logits[bt, targets[bt]]).
// probs (BT, V) receives softmax(logits); losses (BT) the per-row losses. Returns the mean in double.
// A target outside [0, V) is a programmer error (loaders validate ids).
template <class R>
double crossentropy_forward(R* probs, R* losses, const R* logits, const int32_t* targets, int64_t BT, int V);
// dlogits = (probs − onehot(targets)) · scale   (scale = dL/dmean / BT for the mean). Overwrites.
template <class R>
void crossentropy_backward(R* dlogits, const R* probs, const int32_t* targets, int64_t BT, int V, double scale);

}  // namespace snip::ops
