// Quantized linear-layer GEMMs (METHOD.md sections 1-2): recipes choose each operand's
// QuantSpec along the GEMM's reduction dimension; operands are fake-quantized from the FP32
// tensors into a thread-local workspace, multiplied with cblas_sgemm (transposes are passed
// to BLAS, never materialized), and the output is optionally rounded to BF16.
#include "snip/qlinear.h"

#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "float_bits.h"
#include "snip/blas_threads.h"
#include "snip/elem_format.h"
#include "snip/error.h"
#include "snip/hadamard.h"
#include "snip/isa.h"
#include "snip/parallel.h"
#include "snip/qgemm.h"

namespace snip {

// OpenBLAS's workers set up before main() in every program that runs a quantized GEMM
// (snip/blas_threads.h).
namespace {
const std::string g_blas_setup = blas_thread_setup();
}  // namespace

// ---------------------------------------------------------------------------------------------
namespace {

struct Workspace {
  std::vector<float> a, b, c;
};
Workspace& workspace() {
  thread_local Workspace w;
  return w;
}
float* reserve(std::vector<float>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}

std::string operand_label(const QLinearContext& ctx, Gemm g, const char* symbol, Operand op) {
  return std::string(ctx.layer_name ? ctx.layer_name : "linear") + ": " + gemm_name(g) + " operand " + symbol + " (" +
         operand_name(op) + ", step " + std::to_string(ctx.step) + ")";
}

void check_finite(const float* x, int64_t n, const std::string& label) {
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i]))
      throw Error(label + ": non-finite value " + std::to_string(x[i]) + " at flat index " + std::to_string(i) +
                  "; it cannot be quantized (training diverged? lower the learning rate or check the input data)");
}

// The operand as the GEMM consumes it: `src` itself for fp32, else its fake-quantized copy in buf.
const float* quantized_operand(std::vector<float>& buf, const float* src, int64_t rows, int64_t cols, Precision p,
                               Gemm g, Operand op, const char* symbol, const QLinearContext& ctx) {
  const QuantSpec spec = ctx.recipe->spec(p, g, op);
  const std::string label = operand_label(ctx, g, symbol, op);
  if (spec.format == ElemFormat::fp32) {
    check_finite(src, rows * cols, label);
    return src;
  }
  float* dst = reserve(buf, rows * cols);
  fake_quantize(dst, src, rows, cols, spec, qlinear_rng_key(ctx, g, op), label.c_str());
  return dst;
}

bool uses_hadamard(Precision p, Gemm g, const QLinearContext& ctx) {
  return g == Gemm::wgrad && p == Precision::fp4 && ctx.recipe->options().hadamard_wgrad;
}

// One operand of a GEMM: `src` (rows, cols) in role op (symbol: its name in messages), reduced
// along its columns or down its rows.
struct Side {
  const float* src;
  int64_t rows, cols;
  Operand op;
  const char* symbol;
  bool reduce_along_cols;
};

bool rounds_output(Precision p, const QLinearContext& ctx) {
  return ctx.recipe->options().bf16_output && p != Precision::fp32;
}

void round_output_bf16(float* y, int64_t rows, int64_t cols, Gemm g, const QLinearContext& ctx) {
  QuantSpec bf;
  bf.format = ElemFormat::bf16;
  const std::string label = std::string(ctx.layer_name ? ctx.layer_name : "linear") + ": " + gemm_name(g) +
                            " output (step " + std::to_string(ctx.step) + ")";
  fake_quantize(y, y, rows, cols, bf, RngKey{}, label.c_str());
}

void check_context(const QLinearContext& ctx, int64_t T, int64_t K, int64_t N) {
  SNIP_ASSERT_MSG(ctx.recipe != nullptr, "QLinearContext.recipe must be set");
  SNIP_ASSERT(T >= 0 && K >= 0 && N >= 0);
  SNIP_ASSERT_MSG(T <= INT32_MAX && K <= INT32_MAX && N <= INT32_MAX, "GEMM dimension exceeds BLAS int");
}

}  // namespace

RngKey qlinear_rng_key(const QLinearContext& ctx, Gemm g, Operand op) {
  return RngKey{ctx.seed, ctx.step, ctx.layer, uint32_t(int(g) * 4 + int(op))};
}

void qlinear_quantize_operand(float* out, const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                              const QLinearContext& ctx, QuantStats* stats) {
  SNIP_ASSERT_MSG(ctx.recipe != nullptr, "QLinearContext.recipe must be set");
  const char* symbol = op == Operand::weight ? "W" : op == Operand::gradient ? "dY" : "X";
  const std::string label = operand_label(ctx, g, symbol, op);
  const float* x = src;
  if (uses_hadamard(p, g, ctx)) {
    SNIP_ASSERT_MSG(out != src, "qlinear_quantize_operand: out must not alias src with the Hadamard option");
    std::copy(src, src + rows * cols, out);
    hadamard16_rows(out, rows, cols);
    x = out;
  }
  fake_quantize(out, x, rows, cols, ctx.recipe->spec(p, g, op), qlinear_rng_key(ctx, g, op), label.c_str(), stats);
}

// ---------------------------------------------------------------------------------------------
// FP4 on exact integer block sums (snip/qgemm.h): both operands quantized straight to E2M1
// codes and block scales, no dequantized FP32 copy.
namespace {

struct Code2Buffers {
  std::vector<int8_t> a, b;
  std::vector<float> sa, sb;
};
Code2Buffers& code2_buffers() {
  thread_local Code2Buffers w;
  return w;
}

// An FP4 operand as codes: the side quantized with the recipe's spec for (g, s.op).
E2M1Operand code2_operand(std::vector<int8_t>& codes, std::vector<float>& scales, const Side& s, Gemm g,
                          const QLinearContext& ctx) {
  const QuantSpec spec = ctx.recipe->spec(Precision::fp4, g, s.op);
  if (int64_t(codes.size()) < s.rows * s.cols) codes.resize(size_t(s.rows * s.cols));
  const int64_t ns = e2m1_scale_count(s.rows, s.cols, spec);
  if (int64_t(scales.size()) < ns) scales.resize(size_t(ns));
  const std::string label = operand_label(ctx, g, s.symbol, s.op);
  quantize_e2m1_code2(codes.data(), scales.data(), s.src, s.rows, s.cols, spec, qlinear_rng_key(ctx, g, s.op),
                      label.c_str());
  return e2m1_operand(codes.data(), scales.data(), s.rows, s.cols, spec, s.reduce_along_cols);
}

// C(M,N) = A·Bᵀ on the integer E2M1 GEMM for GEMM g: both operands quantized straight into
// the packed layout its kernels read (E2M1Gemm). Empty shapes take the codes-then-pack path,
// which handles them (and still checks a non-empty operand for non-finite values).
void fp4_gemm(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const Side& a, const Side& b, Gemm g,
              const QLinearContext& ctx) {
  if (M == 0 || N == 0 || K == 0) {
    Code2Buffers& cb = code2_buffers();
    const E2M1Operand A = code2_operand(cb.a, cb.sa, a, g, ctx), B = code2_operand(cb.b, cb.sb, b, g, ctx);
    qgemm_e2m1(C, ldc, M, N, K, A, B);
    return;
  }
  const QuantSpec sa = ctx.recipe->spec(Precision::fp4, g, a.op), sb = ctx.recipe->spec(Precision::fp4, g, b.op);
  E2M1Gemm& gemm = e2m1_gemm_workspace();
  gemm.prepare(M, N, K, e2m1_operand(nullptr, nullptr, a.rows, a.cols, sa, a.reduce_along_cols),
               e2m1_operand(nullptr, nullptr, b.rows, b.cols, sb, b.reduce_along_cols));
  gemm.quantize_a(a.src, a.rows, a.cols, sa, qlinear_rng_key(ctx, g, a.op),
                  operand_label(ctx, g, a.symbol, a.op).c_str(), a.reduce_along_cols);
  gemm.quantize_b(b.src, b.rows, b.cols, sb, qlinear_rng_key(ctx, g, b.op),
                  operand_label(ctx, g, b.symbol, b.op).c_str(), b.reduce_along_cols);
  gemm.run(C, ldc);
}

// Whether a GEMM at precision p runs on the integer E2M1 path: FP4, unless SNIP_QGEMM=sgemm
// (or set_qgemm_mode) asks for the dequantize-then-sgemm path, or the operands' blocks along
// the reduction dimension do not nest (no recipe has that today).
bool int_path(Precision p) {
  return p == Precision::fp4 && qgemm_mode() != QGemmMode::sgemm;
}

// The view-only spec check: the chunk length the two operands' FP4 blocks allow along the
// reduction.
bool blocks_nest(const Side& a, const Side& b, int64_t K, Gemm g, const QLinearContext& ctx) {
  const E2M1Operand va =
      e2m1_operand(nullptr, nullptr, a.rows, a.cols, ctx.recipe->spec(Precision::fp4, g, a.op), a.reduce_along_cols);
  const E2M1Operand vb =
      e2m1_operand(nullptr, nullptr, b.rows, b.cols, ctx.recipe->spec(Precision::fp4, g, b.op), b.reduce_along_cols);
  return qgemm_e2m1_chunk(va, vb, K) > 0;
}

// FP8 and BF16 on the BF16-element GEMM (snip/qgemm.h): FP8 operands with FP32 block scales
// (snip, tensor) as BF16 codes and scales; E8M0-scaled FP8 operands (mx, nvfp4) and BF16
// operands as their fake-quantized FP32 values, which are BF16 values (a power-of-two scale
// times an FP8 value), so the scale is folded into the element exactly.
struct Bf16Side {
  std::vector<uint16_t> bits;
  std::vector<float> values, scales;
};
struct Bf16Buffers {
  Bf16Side a, b;
};
Bf16Buffers& bf16_buffers() {
  thread_local Bf16Buffers w;
  return w;
}

bool bf16_path(Precision p) {
  return (p == Precision::fp8 || p == Precision::bf16) && qgemm_mode() != QGemmMode::sgemm;
}

Bf16Operand bf16_side(Bf16Side& buf, const Side& s, Precision p, Gemm g, const QLinearContext& ctx) {
  const QuantSpec spec = ctx.recipe->spec(p, g, s.op);
  const std::string label = operand_label(ctx, g, s.symbol, s.op);
  const RngKey key = qlinear_rng_key(ctx, g, s.op);
  if (spec.scale == ScaleKind::fp32) {
    if (int64_t(buf.bits.size()) < s.rows * s.cols) buf.bits.resize(size_t(s.rows * s.cols));
    const int64_t ns = e2m1_scale_count(s.rows, s.cols, spec);
    if (int64_t(buf.scales.size()) < ns) buf.scales.resize(size_t(ns));
    quantize_bf16_codes(buf.bits.data(), buf.scales.data(), s.src, s.rows, s.cols, spec, key, label.c_str());
    return bf16_operand(buf.bits.data(), nullptr, buf.scales.data(), s.rows, s.cols, spec, s.reduce_along_cols);
  }
  float* v = reserve(buf.values, s.rows * s.cols);
  fake_quantize(v, s.src, s.rows, s.cols, spec, key, label.c_str());
  return bf16_operand(nullptr, v, nullptr, s.rows, s.cols, spec, s.reduce_along_cols);
}

// Whether an operand quantizes straight into the packed layout: BF16, and FP8 with FP32 block
// scales (codes and scales); E8M0-scaled FP8 goes through its folded FP32 values.
bool packs_directly(const QuantSpec& spec) {
  return spec.format == ElemFormat::bf16 || spec.scale == ScaleKind::fp32;
}

// One side of the BF16-element GEMM into `gemm`: quantized straight into the packed layout, or
// (E8M0-scaled FP8) fake-quantized to values and packed.
void bf16_pack_side(Bf16Gemm& gemm, bool as_a, Bf16Side& buf, const Side& s, Precision p, Gemm g,
                    const QLinearContext& ctx) {
  const QuantSpec spec = ctx.recipe->spec(p, g, s.op);
  if (packs_directly(spec)) {
    const std::string label = operand_label(ctx, g, s.symbol, s.op);
    const RngKey key = qlinear_rng_key(ctx, g, s.op);
    if (as_a)
      gemm.quantize_a(s.src, s.rows, s.cols, spec, key, label.c_str(), s.reduce_along_cols);
    else
      gemm.quantize_b(s.src, s.rows, s.cols, spec, key, label.c_str(), s.reduce_along_cols);
    return;
  }
  const Bf16Operand o = bf16_side(buf, s, p, g, ctx);
  if (as_a)
    gemm.pack_a(o);
  else
    gemm.pack_b(o);
}

// The operand's view for the GEMM's layout (pointers unused; a non-null scales marks it scaled).
Bf16Operand bf16_view(const Side& s, Precision p, Gemm g, const QLinearContext& ctx) {
  static const float kMarker = 1.0f;
  const QuantSpec spec = ctx.recipe->spec(p, g, s.op);
  const bool scaled = spec.format != ElemFormat::bf16 && spec.scale == ScaleKind::fp32;
  return bf16_operand(nullptr, nullptr, scaled ? &kMarker : nullptr, s.rows, s.cols, spec, s.reduce_along_cols);
}

// C(M,N) = A·Bᵀ on the BF16-element GEMM for GEMM g at precision p; false when it does not
// apply (the caller then runs the dequantize-then-sgemm path): the blocks do not nest, or an
// E8M0-scaled FP8 value is an FP32 subnormal that BF16 cannot hold.
bool try_bf16_gemm(float* C, int64_t ldc, int64_t M, int64_t N, int64_t K, const Side& a, const Side& b, Precision p,
                   Gemm g, const QLinearContext& ctx) {
  if (!bf16_path(p)) return false;
  Bf16Buffers& bb = bf16_buffers();
  if (M == 0 || N == 0 || K == 0) {
    const Bf16Operand A = bf16_side(bb.a, a, p, g, ctx), B = bf16_side(bb.b, b, p, g, ctx);
    if (qgemm_bf16_chunk(A, B, K) <= 0) return false;
    return qgemm_bf16(C, ldc, M, N, K, A, B);
  }
  const Bf16Operand va = bf16_view(a, p, g, ctx), vb = bf16_view(b, p, g, ctx);
  if (qgemm_bf16_chunk(va, vb, K) <= 0) return false;
  Bf16Gemm& gemm = bf16_gemm_workspace();
  gemm.prepare(M, N, K, va, vb);
  bf16_pack_side(gemm, true, bb.a, a, p, g, ctx);
  bf16_pack_side(gemm, false, bb.b, b, p, g, ctx);
  return gemm.run(C, ldc);
}

// C(M,N) = A·Bᵀ for GEMM g at precision p on the packed GEMM the precision chooses: FP4 on the
// integer E2M1 GEMM (unless the blocks do not nest), FP8 and BF16 on the BF16-element GEMM;
// false when neither applies (the caller then runs the dequantize-then-sgemm path).
bool packed_gemm(float* C, int64_t M, int64_t N, int64_t K, const Side& a, const Side& b, Precision p, Gemm g,
                 const QLinearContext& ctx) {
  if (int_path(p) && blocks_nest(a, b, K, g, ctx)) {
    fp4_gemm(C, N, M, N, K, a, b, g, ctx);
    return true;
  }
  return try_bf16_gemm(C, N, M, N, K, a, b, p, g, ctx);
}

// sgemm(Aq, Bq) on the operands fake-quantized to FP32 (the dequantize-then-sgemm path).
template <class Sgemm>
void sgemm_fake_quantized(const Side& a, const Side& b, Precision p, Gemm g, const QLinearContext& ctx, Sgemm&& sgemm) {
  Workspace& ws = workspace();
  sgemm(quantized_operand(ws.a, a.src, a.rows, a.cols, p, g, a.op, a.symbol, ctx),
        quantized_operand(ws.b, b.src, b.rows, b.cols, p, g, b.op, b.symbol, ctx));
}

// C(M,N) = A·Bᵀ as packed_gemm, else as sgemm_fake_quantized; then the output rounding.
template <class Sgemm>
void quantized_gemm(float* C, int64_t M, int64_t N, int64_t K, const Side& a, const Side& b, Precision p, Gemm g,
                    const QLinearContext& ctx, Sgemm&& sgemm) {
  if (!packed_gemm(C, M, N, K, a, b, p, g, ctx)) sgemm_fake_quantized(a, b, p, g, ctx, sgemm);
  if (rounds_output(p, ctx)) round_output_bf16(C, M, N, g, ctx);
}

}  // namespace

// Y(T,N) = Q(X)(T,K) · Q(W)(N,K)ᵀ
void qlinear_fprop(float* Y, const float* X, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                   const QLinearContext& ctx) {
  check_context(ctx, T, K, N);
  const Side x{X, T, K, Operand::activation, "X", true}, w{W, N, K, Operand::weight, "W", true};
  quantized_gemm(Y, T, N, K, x, w, p, Gemm::fprop, ctx, [&](const float* Xq, const float* Wq) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1.0f, Xq, int(K), Wq, int(K), 0.0f, Y,
                int(N));
  });
}

// dX(T,K) = Q(dY)(T,N) · Q(W)(N,K)
void qlinear_dgrad(float* dX, const float* dY, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                   const QLinearContext& ctx) {
  check_context(ctx, T, K, N);
  // dX[t,k] = Σ_n dY[t,n]·W[n,k]: A = dY reduced along its columns, B(k,n) = W[n,k] down its rows.
  const Side dy{dY, T, N, Operand::gradient, "dY", true}, w{W, N, K, Operand::weight, "W", false};
  quantized_gemm(dX, T, K, N, dy, w, p, Gemm::dgrad, ctx, [&](const float* dYq, const float* Wq) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(K), int(N), 1.0f, dYq, int(N), Wq, int(K), 0.0f,
                dX, int(K));
  });
}

// dW(N,K) (+)= Q(dY)(T,N)ᵀ · Q(X)(T,K). With nvfp4's Hadamard option both operands are first
// rotated along T by the orthogonal block-diagonal M = H16·D/4, which cancels: (M·dY)ᵀ(M·X) = dYᵀX.
// Accumulating, the GEMM's own output is rounded (when the recipe says so) and the sum stays FP32.
void qlinear_wgrad(float* dW, const float* dY, const float* X, int64_t T, int64_t K, int64_t N, Precision p,
                   const QLinearContext& ctx, bool accumulate) {
  check_context(ctx, T, K, N);
  std::vector<float> rot_dy, rot_x;
  Side dy{dY, T, N, Operand::gradient, "dY", false}, x{X, T, K, Operand::activation, "X", false};
  if (uses_hadamard(p, Gemm::wgrad, ctx)) {
    rot_dy.assign(dY, dY + T * N);
    rot_x.assign(X, X + T * K);
    hadamard16_rows(rot_dy.data(), T, N);
    hadamard16_rows(rot_x.data(), T, K);
    dy.src = rot_dy.data();
    x.src = rot_x.data();
  }
  // dW[n,k] = Σ_t dY[t,n]·X[t,k]: both operands reduced down their rows (along T).
  auto sgemm = [&](float* out, float beta) {
    return [&, out, beta](const float* dYq, const float* Xq) {
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(K), int(T), 1.0f, dYq, int(N), Xq, int(K), beta,
                  out, int(K));
    };
  };
  if (!accumulate) {
    quantized_gemm(dW, N, K, T, dy, x, p, Gemm::wgrad, ctx, sgemm(dW, 0.0f));
    return;
  }
  float* tmp = reserve(workspace().c, N * K);
  const bool round = rounds_output(p, ctx);
  if (!packed_gemm(tmp, N, K, T, dy, x, p, Gemm::wgrad, ctx)) {
    if (!round) {  // cblas_sgemm adds the product to dW itself
      sgemm_fake_quantized(dy, x, p, Gemm::wgrad, ctx, sgemm(dW, 1.0f));
      return;
    }
    sgemm_fake_quantized(dy, x, p, Gemm::wgrad, ctx, sgemm(tmp, 0.0f));
  }
  if (round) round_output_bf16(tmp, N, K, Gemm::wgrad, ctx);
  for (int64_t i = 0; i < N * K; ++i) dW[i] += tmp[i];
}

// ---------------------------------------------------------------------------------------------
// Operands quantized once (QLinearOperand) and the GEMMs on them: the same quantizer calls as
// the paths above (codes and scales instead of codes quantized into the packed layout, which
// the packers document as the same bytes), the same GEMMs, the same output rounding.

namespace {
template <class T>
T* grow(std::vector<T>& v, int64_t n) {
  if (int64_t(v.size()) < n) v.resize(size_t(n));
  return v.data();
}
}  // namespace

double QLinearOperand::quantize(const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                                const QLinearContext& ctx) {
  SNIP_ASSERT_MSG(ctx.recipe != nullptr, "QLinearContext.recipe must be set");
  SNIP_ASSERT(rows >= 0 && cols >= 0);
  p_ = p, g_ = g, op_ = op, spec_ = ctx.recipe->spec(p, g, op), rows_ = rows, cols_ = cols;
  const int64_t n = rows * cols;
  const char* symbol = op == Operand::weight ? "W" : op == Operand::gradient ? "dY" : "X";
  const std::string label = operand_label(ctx, g, symbol, op);
  const RngKey key = qlinear_rng_key(ctx, g, op);
  const float* x = src;
  if (uses_hadamard(p, g, ctx)) {
    rotated_.assign(src, src + n);
    hadamard16_rows(rotated_.data(), rows, cols);
    x = rotated_.data();
  }
  if (int_path(p)) {
    form_ = Form::e2m1_codes;
    quantize_e2m1_code2(grow(code2_, n), grow(scales_, e2m1_scale_count(rows, cols, spec_)), x, rows, cols, spec_, key,
                        label.c_str());
  } else if (bf16_path(p) && spec_.format != ElemFormat::bf16 && spec_.scale == ScaleKind::fp32) {
    form_ = Form::bf16_codes;
    quantize_bf16_codes(grow(bits_, n), grow(scales_, e2m1_scale_count(rows, cols, spec_)), x, rows, cols, spec_, key,
                        label.c_str());
  } else {
    form_ = Form::values;
    fake_quantize(grow(values_, n), x, rows, cols, spec_, key, label.c_str());
  }
  return error_sq(x);
}

namespace {
// out[c] = fl(q(c) · scale of column c) over one row whose block scales are s (bc columns each)
template <class Q>
void decode_scaled(float* out, const float* s, int64_t cols, int64_t bc, Q q) {
  if (bc == 1) {
    for (int64_t c = 0; c < cols; ++c) out[c] = q(c) * s[c];
    return;
  }
  for (int64_t c0 = 0, j = 0; c0 < cols; c0 += bc, ++j) {
    const float sc = s[j];
    for (int64_t c = c0, c1 = std::min(cols, c0 + bc); c < c1; ++c) out[c] = q(c) * sc;
  }
}
}  // namespace

void QLinearOperand::decode_row(float* out, int64_t r) const {
  SNIP_ASSERT(r >= 0 && r < rows_);
  const int64_t off = r * cols_;
  if (form_ == Form::values) {
    std::copy(values_.data() + off, values_.data() + off + cols_, out);
    return;
  }
  // y = fl(q · scale) with q the element value (code2 / 2, or the BF16 bits): fake_quantize's
  // output bit for bit (snip/qgemm.h). Scales are [block row][block col].
  const int64_t br = spec_.block_rows <= 0 ? rows_ : std::min<int64_t>(spec_.block_rows, rows_);
  const int64_t bc = spec_.block_cols <= 0 ? cols_ : std::min<int64_t>(spec_.block_cols, cols_);
  const int64_t nbc = (cols_ + bc - 1) / bc;
  const float* s = scales_.data() + (r / br) * nbc;
  if (form_ == Form::e2m1_codes) {
    const int8_t* c2 = code2_.data() + off;
    decode_scaled(out, s, cols_, bc, [c2](int64_t c) { return float(c2[c]) * 0.5f; });
  } else {
    const uint16_t* b = bits_.data() + off;
    decode_scaled(out, s, cols_, bc, [b](int64_t c) { return numerics_detail::ffrom(uint32_t(b[c]) << 16); });
  }
}

namespace {

#if defined(__x86_64__)
// (GCC 12's _mm512_cvtps_pd starts from _mm512_undefined_pd(), which -Wmaybe-uninitialized
// reports once per inlined call; the value is never read.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// sum_sq_diff's whole groups of eight on AVX-512: the eight partial sums are the eight lanes of
// one vector of doubles, each lane the same IEEE operations on the same elements in the same
// order as the scalar loop, so the same bits. Returns the elements done.
__attribute__((target("avx512f"))) int64_t sum_sq_diff_v8(double* s, const float* y, const float* x, int64_t n) {
  __m512d acc = _mm512_loadu_pd(s);
  const int64_t n8 = n / 8 * 8;
  for (int64_t c = 0; c < n8; c += 8) {
    const __m512d d = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(y + c)), _mm512_cvtps_pd(_mm256_loadu_ps(x + c)));
    acc = _mm512_add_pd(acc, _mm512_mul_pd(d, d));
  }
  _mm512_storeu_pd(s, acc);
  return n8;
}
#pragma GCC diagnostic pop
#else
int64_t sum_sq_diff_v8(double*, const float*, const float*, int64_t) {
  return 0;
}
#endif

}  // namespace

double sum_sq_diff(const float* y, const float* x, int64_t n) {
  double s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int64_t c = isa_at_least(IsaTier::avx512) ? sum_sq_diff_v8(s, y, x, n) : 0; c < n; ++c) {
    const double d = double(y[c]) - double(x[c]);
    s[c % 8] += d * d;
  }
  return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

double QLinearOperand::error_sq(const float* x) const {
  std::vector<double> row_sq(size_t(rows_), 0.0);
  parallel_for(rows_, rows_ * cols_, [&](int64_t r0, int64_t r1) {
    std::vector<float> y(form_ == Form::values ? 0 : size_t(cols_));
    for (int64_t r = r0; r < r1; ++r) {
      const float* yr = values_.data() + r * cols_;
      if (form_ != Form::values) {
        decode_row(y.data(), r);
        yr = y.data();
      }
      row_sq[size_t(r)] = sum_sq_diff(yr, x + r * cols_, cols_);
    }
  });
  double s = 0;
  for (double v : row_sq) s += v;
  return s;
}

// The GEMM kernels' views of a QLinearOperand.
struct QLinearOperandAccess {
  static E2M1Operand e2m1(const QLinearOperand& o, bool reduce_along_cols) {
    return e2m1_operand(o.code2_.data(), o.scales_.data(), o.rows_, o.cols_, o.spec_, reduce_along_cols);
  }
  static Bf16Operand bf16(const QLinearOperand& o, bool reduce_along_cols) {
    if (o.form_ == QLinearOperand::Form::bf16_codes)
      return bf16_operand(o.bits_.data(), nullptr, o.scales_.data(), o.rows_, o.cols_, o.spec_, reduce_along_cols);
    return bf16_operand(nullptr, o.values_.data(), nullptr, o.rows_, o.cols_, o.spec_, reduce_along_cols);
  }
  // The FP32 values (decoded into buf for the code forms), for the dequantize-then-sgemm path.
  static const float* values(const QLinearOperand& o, std::vector<float>& buf) {
    if (o.form_ == QLinearOperand::Form::values) return o.values_.data();
    float* v = grow(buf, o.rows_ * o.cols_);
    for (int64_t r = 0; r < o.rows_; ++r) o.decode_row(v + r * o.cols_, r);
    return v;
  }
};

namespace {

// An operand quantized for GEMM g in role op at precision p, or (weights) for the other GEMM
// with the same spec and no stochastic rounding: the same quantized tensor.
void check_operand(const QLinearOperand& o, Precision p, Gemm g, Operand op, const QLinearContext& ctx) {
  SNIP_ASSERT_MSG(o.precision() == p && o.operand() == op, "qlinear: operand quantized for another precision or role");
  SNIP_ASSERT_MSG(o.gemm() == g || (op == Operand::weight && o.spec() == ctx.recipe->spec(p, g, op) &&
                                    o.spec().rounding != Rounding::stochastic),
                  "qlinear: operand quantized for another GEMM");
}

// C(M,N) = A·Bᵀ for GEMM g on prequantized operands, as qlinear_* chooses its path: the
// integer E2M1 GEMM, the BF16-element GEMM, else `sgemm` on the FP32 values; then the output
// rounding.
template <class Sgemm>
void prequantized_gemm(float* C, int64_t M, int64_t N, int64_t K, const QLinearOperand& a, bool a_cols,
                       const QLinearOperand& b, bool b_cols, Gemm g, const QLinearContext& ctx, Sgemm&& sgemm) {
  using Form = QLinearOperand::Form;
  using Acc = QLinearOperandAccess;
  const Precision p = a.precision();
  bool done = false;
  if (a.form() == Form::e2m1_codes && b.form() == Form::e2m1_codes) {
    const E2M1Operand A = Acc::e2m1(a, a_cols), B = Acc::e2m1(b, b_cols);
    if (qgemm_e2m1_chunk(A, B, K) > 0) {
      qgemm_e2m1(C, N, M, N, K, A, B);
      done = true;
    }
  } else if (bf16_path(p) && a.form() != Form::e2m1_codes && b.form() != Form::e2m1_codes) {
    const Bf16Operand A = Acc::bf16(a, a_cols), B = Acc::bf16(b, b_cols);
    done = qgemm_bf16_chunk(A, B, K) > 0 && qgemm_bf16(C, N, M, N, K, A, B);
  }
  if (!done) {
    Workspace& ws = workspace();
    sgemm(Acc::values(a, ws.a), Acc::values(b, ws.b));
  }
  if (rounds_output(p, ctx)) round_output_bf16(C, M, N, g, ctx);
}

}  // namespace

void qlinear_fprop(float* Y, const QLinearOperand& X, const QLinearOperand& W, const QLinearContext& ctx) {
  const int64_t T = X.rows(), K = X.cols(), N = W.rows();
  check_context(ctx, T, K, N);
  SNIP_ASSERT(W.cols() == K);
  check_operand(X, X.precision(), Gemm::fprop, Operand::activation, ctx);
  check_operand(W, X.precision(), Gemm::fprop, Operand::weight, ctx);
  prequantized_gemm(Y, T, N, K, X, true, W, true, Gemm::fprop, ctx, [&](const float* Xq, const float* Wq) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1.0f, Xq, int(K), Wq, int(K), 0.0f, Y,
                int(N));
  });
}

void qlinear_dgrad(float* dX, const QLinearOperand& dY, const QLinearOperand& W, const QLinearContext& ctx) {
  const int64_t T = dY.rows(), N = dY.cols(), K = W.cols();
  check_context(ctx, T, K, N);
  SNIP_ASSERT(W.rows() == N);
  check_operand(dY, dY.precision(), Gemm::dgrad, Operand::gradient, ctx);
  check_operand(W, dY.precision(), Gemm::dgrad, Operand::weight, ctx);
  // dX[t,k] = Σ_n dY[t,n]·W[n,k]: A = dY reduced along its columns, B(k,n) = W[n,k] down its rows.
  prequantized_gemm(dX, T, K, N, dY, true, W, false, Gemm::dgrad, ctx, [&](const float* dYq, const float* Wq) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(T), int(K), int(N), 1.0f, dYq, int(N), Wq, int(K), 0.0f,
                dX, int(K));
  });
}

void qlinear_wgrad(float* dW, const QLinearOperand& dY, const QLinearOperand& X, const QLinearContext& ctx) {
  const int64_t T = dY.rows(), N = dY.cols(), K = X.cols();
  check_context(ctx, T, K, N);
  SNIP_ASSERT(X.rows() == T);
  check_operand(dY, dY.precision(), Gemm::wgrad, Operand::gradient, ctx);
  check_operand(X, dY.precision(), Gemm::wgrad, Operand::activation, ctx);
  // dW[n,k] = Σ_t dY[t,n]·X[t,k]: both operands reduced down their rows (along T); with the
  // Hadamard option both were rotated when quantized, and the rotation cancels.
  prequantized_gemm(dW, N, K, T, dY, false, X, false, Gemm::wgrad, ctx, [&](const float* dYq, const float* Xq) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(N), int(K), int(T), 1.0f, dYq, int(N), Xq, int(K), 0.0f,
                dW, int(K));
  });
}

// ---------------------------------------------------------------------------------------------
// Scalar twins.
namespace {

// The operand as the reference GEMM consumes it (reference quantizer, reference rotation).
std::vector<float> quantized_operand_ref(const float* src, int64_t rows, int64_t cols, Precision p, Gemm g, Operand op,
                                         const char* symbol, const QLinearContext& ctx) {
  std::vector<float> x(src, src + rows * cols);
  if (uses_hadamard(p, g, ctx)) hadamard16_rows_ref(x.data(), rows, cols);
  const std::string label = operand_label(ctx, g, symbol, op);
  fake_quantize_ref(x.data(), x.data(), rows, cols, ctx.recipe->spec(p, g, op), qlinear_rng_key(ctx, g, op),
                    label.c_str());
  return x;
}

// C(M,N) = Σ_k A[i,k]·B[k,j] in double, with A and B addressed through (row, col) strides so
// one loop serves the three transposition patterns.
void gemm_ref(float* C, const float* A, int64_t a_rs, int64_t a_cs, const float* B, int64_t b_rs, int64_t b_cs,
              int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += double(A[i * a_rs + k * a_cs]) * double(B[k * b_rs + j * b_cs]);
      C[i * N + j] = float(acc);
    }
}

void round_output_ref(float* y, int64_t n, Precision p, const QLinearContext& ctx) {
  if (!rounds_output(p, ctx)) return;
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_round(y[i]);
}

}  // namespace

void qlinear_fprop_ref(float* Y, const float* X, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                       const QLinearContext& ctx) {
  check_context(ctx, T, K, N);
  const auto Xq = quantized_operand_ref(X, T, K, p, Gemm::fprop, Operand::activation, "X", ctx);  // (T,K)
  const auto Wq = quantized_operand_ref(W, N, K, p, Gemm::fprop, Operand::weight, "W", ctx);      // (N,K)
  gemm_ref(Y, Xq.data(), K, 1, Wq.data(), 1, K, T, N, K);  // Y[t,n] = Σ_k X[t,k]·W[n,k]
  round_output_ref(Y, T * N, p, ctx);
}

void qlinear_dgrad_ref(float* dX, const float* dY, const float* W, int64_t T, int64_t K, int64_t N, Precision p,
                       const QLinearContext& ctx) {
  check_context(ctx, T, K, N);
  const auto dYq = quantized_operand_ref(dY, T, N, p, Gemm::dgrad, Operand::gradient, "dY", ctx);  // (T,N)
  const auto Wq = quantized_operand_ref(W, N, K, p, Gemm::dgrad, Operand::weight, "W", ctx);       // (N,K)
  gemm_ref(dX, dYq.data(), N, 1, Wq.data(), K, 1, T, K, N);  // dX[t,k] = Σ_n dY[t,n]·W[n,k]
  round_output_ref(dX, T * K, p, ctx);
}

void qlinear_wgrad_ref(float* dW, const float* dY, const float* X, int64_t T, int64_t K, int64_t N, Precision p,
                       const QLinearContext& ctx, bool accumulate) {
  check_context(ctx, T, K, N);
  const auto dYq = quantized_operand_ref(dY, T, N, p, Gemm::wgrad, Operand::gradient, "dY", ctx);  // (T,N)
  const auto Xq = quantized_operand_ref(X, T, K, p, Gemm::wgrad, Operand::activation, "X", ctx);   // (T,K)
  std::vector<float> prod(size_t(N * K));
  gemm_ref(prod.data(), dYq.data(), 1, N, Xq.data(), K, 1, N, K, T);  // dW[n,k] = Σ_t dY[t,n]·X[t,k]
  round_output_ref(prod.data(), N * K, p, ctx);
  for (int64_t i = 0; i < N * K; ++i) dW[i] = accumulate ? dW[i] + prod[size_t(i)] : prod[size_t(i)];
}

}  // namespace snip
