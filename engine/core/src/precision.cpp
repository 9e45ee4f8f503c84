// Names and parsing of precisions, GEMM roles and operand roles.
#include "snip/precision.h"

#include "snip/names.h"

namespace snip {

namespace {

constexpr std::array<Named<Precision>, 4> kPrecisionNames{
    {{Precision::fp32, "fp32"}, {Precision::bf16, "bf16"}, {Precision::fp8, "fp8"}, {Precision::fp4, "fp4"}}};
constexpr std::array<Named<Gemm>, 3> kGemmNames{
    {{Gemm::fprop, "fprop"}, {Gemm::dgrad, "dgrad"}, {Gemm::wgrad, "wgrad"}}};
constexpr std::array<Named<Operand>, 3> kOperandNames{
    {{Operand::activation, "activation"}, {Operand::weight, "weight"}, {Operand::gradient, "gradient"}}};

}  // namespace

const char* precision_name(Precision p) {
  return name_of(kPrecisionNames, p);
}

const char* gemm_name(Gemm g) {
  return name_of(kGemmNames, g);
}

const char* operand_name(Operand o) {
  return name_of(kOperandNames, o);
}

Precision parse_precision(std::string_view s) {
  return parse_name(kPrecisionNames, s, "precision");
}

Gemm parse_gemm(std::string_view s) {
  return parse_name(kGemmNames, s, "GEMM role");
}

Operand parse_operand(std::string_view s) {
  return parse_name(kOperandNames, s, "operand role");
}

}  // namespace snip
