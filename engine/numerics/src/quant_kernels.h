// The quantizer's element-rounding kernels, shared by the portable kernels (quantizer.cpp, GCC
// target_clones of one C++ loop) and the hand-vectorized AVX-512 kernels (quant_avx512.cpp).
// Both compute, element by element, the same IEEE operations in the same order (quantizer.cpp's
// file comment), so they give the same bits; the portable kernels are the oracle the tests
// compare the vector kernels with (tests/numerics/test_quant_kernels.cpp).
#pragma once
#include <cstdint>

#include "snip/quant.h"

namespace snip::detail {

struct RowParams {
  int mbits = 0;
  uint32_t emin_biased = 0;  // emin + 127: FP32 biased exponent of the smallest normal
  float max = 0;
  uint32_t k0 = 0, k1 = 0;  // stochastic-rounding key (see sr_bits)
  int32_t code_offset = 0;  // added to each E2M1 code 2q (CodeKernel, TileCodeKernel)
};

// y[c] for c < n from x[c] and the block scale(s): in_s/out_s one per column (vec) or one
// (in_s[0], out_s[0]); i0 is the tensor index of x[0] (the stochastic-rounding hash's input).
// RowKernel: the dequantized value; CodeKernel: the E2M1 code 2q; Bf16CodeKernel: BF16 bits.
using RowKernel = void (*)(float*, const float*, const float*, const float*, int64_t, const RowParams&, uint64_t);
using CodeKernel = void (*)(int8_t*, const float*, const float*, int64_t, const RowParams&, uint64_t);
using Bf16CodeKernel = void (*)(uint16_t*, const float*, const float*, int64_t, const RowParams&, uint64_t);

// The portable kernels (quantizer.cpp).
RowKernel pick_row_kernel(bool divide, bool vec, Rounding r);
CodeKernel pick_code_kernel(bool divide, bool vec, Rounding r);
Bf16CodeKernel pick_bf16_code_kernel(bool divide, bool vec, Rounding r);

// The AVX-512 kernels (quant_avx512.cpp), or null when this build or this CPU has none. The
// E2M1 code kernels under RNE look the codes up in a table (AVX512-VBMI) unless `table` is
// false or the CPU lacks VBMI: the same codes by fewer instructions.
RowKernel avx512_row_kernel(bool divide, bool vec, Rounding r);
CodeKernel avx512_code_kernel(bool divide, bool vec, Rounding r, bool table = true);
Bf16CodeKernel avx512_bf16_code_kernel(bool divide, bool vec, Rounding r);

// Whole rows of 1 × bc tiles (bc a multiple of 16) in one call, for the row-tile recipes
// (1×16 NVFP4, 1×32 MX, 1×128 snip): tile_amax_bits writes max |x| (as FP32 bits) of each tile
// of x[0, n) to amax[n / bc rounded up]; the tile kernels then round x[0, n) with tile g's
// scales in_t[g] (and out_t[g]), element for element the per-tile kernels above.
using TileAmaxKernel = void (*)(uint32_t*, const float*, int64_t, int64_t);
using TileRowKernel = void (*)(float*, const float*, const float*, const float*, int64_t, int64_t, const RowParams&,
                               uint64_t);
using TileCodeKernel = void (*)(int8_t*, const float*, const float*, int64_t, int64_t, const RowParams&, uint64_t);
using TileBf16Kernel = void (*)(uint16_t*, const float*, const float*, int64_t, int64_t, const RowParams&, uint64_t);
// Null when this build or this CPU has no AVX-512.
TileAmaxKernel avx512_tile_amax_kernel();
TileRowKernel avx512_tile_row_kernel(bool divide, Rounding r);
TileCodeKernel avx512_tile_code_kernel(bool divide, Rounding r, bool table = true);
TileBf16Kernel avx512_tile_bf16_kernel(bool divide, Rounding r);

// Strips of a band of rows (br × bc blocks or br × 1 column tiles, quantized a strip of whole
// blocks at a time while it is in cache): max |x| (as FP32 bits) over `rows` rows (stride ld
// floats) of w columns, per column (bc == 1: amax[w]) or per bc-wide block (bc a multiple of 16:
// amax[w / bc rounded up]). Null when this build or this CPU has no AVX-512.
using StripAmaxKernel = void (*)(uint32_t*, const float*, int64_t, int64_t, int64_t, int64_t);
StripAmaxKernel avx512_strip_amax_kernel();

// Whether the quantizer runs the AVX-512 kernels: the instruction-set tier (snip/isa.h) is
// avx512 or above (SNIP_ISA=portable or avx2, or SNIP_QGEMM=scalar, force the portable kernels).
bool use_avx512_quant_kernels();

}  // namespace snip::detail
