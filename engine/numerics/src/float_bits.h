// An FP32 value's IEEE-754 bits and back (the quantizer and the BF16 GEMM read and build
// values bit by bit).
#pragma once
#include <bit>
#include <cstdint>

namespace snip::numerics_detail {

inline uint32_t fbits(float f) {
  return std::bit_cast<uint32_t>(f);
}
inline float ffrom(uint32_t u) {
  return std::bit_cast<float>(u);
}

}  // namespace snip::numerics_detail
