// oneDNN 2.6 matmuls timed beside our GEMMs in bench_numerics (built only when CMake finds
// oneDNN, `libdnnl-dev`; nothing else in the project links it). Each benchmark checks its result
// against cblas_sgemm of the same operands before timing, and records in its label which oneDNN
// kernel ran and whether the result has the same bits with 1 and with 2 threads.
#pragma once
#include <benchmark/benchmark.h>

#include <cstdint>

#include "snip/qlinear.h"

namespace snip_bench {

// The element types of a oneDNN matmul: f32 × f32 → f32; bf16 × bf16 → f32 (FP32 accumulation);
// u8 × s8 → s32 (exact integer sums, the VNNI path).
enum class DnnlKind { f32, bf16, int8 };
const char* dnnl_kind_name(DnnlKind k);

// One GEMM of a linear layer laid out as bench_numerics' BM_sgemm lays it out (fprop: X(T,K)·W(N,K)ᵀ,
// dgrad: dY(T,N)·W(N,K), wgrad: dY(T,N)ᵀ·X(T,K)). `from_f32` false: the operands are already in
// the matmul's element type and the weights in the layout oneDNN prefers (reordered once before
// timing: the kernel alone, oneDNN's best case); true: every iteration starts from the FP32
// operands in their natural layouts and reorders (converts) both, as a training step would.
void BM_dnnl_matmul(benchmark::State& st, DnnlKind kind, snip::Gemm g, int64_t T, int64_t K, int64_t N, bool from_f32);

// The honest oneDNN emulation of block scales along K: Y(M,N) = Σ_kb sa[i,kb]·sw[j/128,kb]·P_kb[i,j]
// with P_kb the exact u8×s8 → s32 product of K block kb (`kblock` long), as one oneDNN int8 matmul
// per K block followed by an FP32 pass (OpenMP) that scales it and adds it to the blocks before,
// in a fixed order (oneDNN 2.6 has scales per output column or per tensor, none per K block, and
// its fast kernels take no per-row multiplier). Weights pre-packed per block before timing;
// operands are integer codes (kernel only, the counterpart of bench_numerics' e2m1_kernel_only).
void BM_dnnl_int8_kblocks(benchmark::State& st, int64_t M, int64_t K, int64_t N, int64_t kblock);

}  // namespace snip_bench
