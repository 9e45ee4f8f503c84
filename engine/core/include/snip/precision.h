// The vocabulary shared by every layer of the project: GEMM precisions, GEMM roles and
// operand roles (METHOD.md section 1).
#pragma once
#include <array>
#include <string>
#include <string_view>

namespace snip {

// Precision of one GEMM: operands are fake-quantized to this, the product runs in FP32.
enum class Precision { fp32 = 0, bf16 = 1, fp8 = 2, fp4 = 3 };
inline constexpr int kNumPrecisions = 4;

// The three GEMMs of a linear layer Y = X·Wᵀ (X: T×K, W: N×K, Y: T×N).
enum class Gemm { fprop = 0, dgrad = 1, wgrad = 2 };  // Y = X·Wᵀ, dX = dY·W, dW = dYᵀ·X
inline constexpr int kNumGemms = 3;
inline constexpr std::array<Gemm, 3> kAllGemms = {Gemm::fprop, Gemm::dgrad, Gemm::wgrad};

// Operand roles (recipes choose format/scaling per role and per GEMM).
enum class Operand { activation = 0, weight = 1, gradient = 2 };

const char* precision_name(Precision p);  // "fp32" "bf16" "fp8" "fp4"
const char* gemm_name(Gemm g);            // "fprop" "dgrad" "wgrad"
const char* operand_name(Operand o);      // "activation" "weight" "gradient"

// Parse; throws snip::Error naming the accepted values.
Precision parse_precision(std::string_view s);
Gemm parse_gemm(std::string_view s);
Operand parse_operand(std::string_view s);

// Precision of each GEMM of one linear layer.
struct LinearPrecision {
  Precision fprop = Precision::bf16;
  Precision dgrad = Precision::bf16;
  Precision wgrad = Precision::bf16;

  static LinearPrecision uniform(Precision p) { return {p, p, p}; }
  Precision& operator[](Gemm g) { return g == Gemm::fprop ? fprop : g == Gemm::dgrad ? dgrad : wgrad; }
  Precision operator[](Gemm g) const { return g == Gemm::fprop ? fprop : g == Gemm::dgrad ? dgrad : wgrad; }
  bool operator==(const LinearPrecision&) const = default;
};

}  // namespace snip
