// The quantizer's hand-over to a GEMM's packing: instead of a row-major code array, the
// quantizer's workers give each batch of finished rows (still in cache) to a sink, which places
// the codes in the layout the GEMM's kernel reads. The codes are the same ones
// quantize_e2m1_code2 / quantize_bf16_codes write (same rounding, same stochastic-rounding
// bits: the kernels and their element indices are unchanged), only their destination differs.
#pragma once
#include <cstdint>

#include "snip/quant.h"

namespace snip::numerics_detail {

class RowCodeSink {
 public:
  // Rows [r0, r1) of the source are done: their codes, row-major with row stride `ld`
  // elements, are at `codes` (int8 E2M1 codes 2q, or uint16 BF16 bits). Called from the
  // quantizer's workers, concurrently for disjoint row ranges.
  virtual void place(int64_t r0, int64_t r1, const void* codes, int64_t ld) = 0;

  // E2M1 codes only: when every source row's codes may go straight to their final place, the
  // destination of row 0, the row stride `ld` (bytes) and an `offset` added to each code 2q
  // (stored as the byte 2q + offset); the quantizer then writes there and never calls place().
  // Null (the default): rows come through place().
  virtual uint8_t* direct_rows(int64_t& ld, int& offset) {
    (void)ld, (void)offset;
    return nullptr;
  }

  // E2M1 codes of bands only (br × bc blocks, br × 1 column tiles, at least two bands): whether
  // the sink takes the codes a strip of whole blocks at a time, w source columns wide, instead
  // of through place(). Then the quantizer (its AVX-512 path) calls place_block for every strip
  // of every band, and never place(): rows [r0, r1) are one whole band, columns [c0, c1) with c0
  // a multiple of w and c1 = min(c0 + w, cols) (w = cols: the whole band at once); the codes
  // (2q, no offset) row-major with row stride ld bytes, valid only during the call. Called
  // concurrently for different bands.
  virtual bool takes_blocks(int64_t w) const {
    (void)w;
    return false;
  }
  virtual void place_block(int64_t r0, int64_t r1, int64_t c0, int64_t c1, const int8_t* codes, int64_t ld) {
    (void)r0, (void)r1, (void)c0, (void)c1, (void)codes, (void)ld;
  }

 protected:
  ~RowCodeSink() = default;
};

// quantize_e2m1_code2 (bf16 false) or quantize_bf16_codes (bf16 true) with the codes handed to
// `sink` instead of written row-major; the block scales go to `scales` as there. With bf16 true
// the spec may also be the unscaled bf16 format: the codes are then the BF16 bits of
// fake_quantize's output (round to nearest even), and `scales` is not written.
void quantize_codes_into(RowCodeSink& sink, bool bf16, float* scales, const float* x, int64_t rows, int64_t cols,
                         const QuantSpec& spec, const RngKey& key, const char* tensor_name);

}  // namespace snip::numerics_detail
