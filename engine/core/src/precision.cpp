// Names and parsing of precisions, GEMM roles and operand roles.
#include "snip/precision.h"

#include "snip/error.h"

namespace snip {

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32:
      return "fp32";
    case Precision::bf16:
      return "bf16";
    case Precision::fp8:
      return "fp8";
    case Precision::fp4:
      return "fp4";
  }
  return "?";
}

const char* gemm_name(Gemm g) {
  switch (g) {
    case Gemm::fprop:
      return "fprop";
    case Gemm::dgrad:
      return "dgrad";
    case Gemm::wgrad:
      return "wgrad";
  }
  return "?";
}

const char* operand_name(Operand o) {
  switch (o) {
    case Operand::activation:
      return "activation";
    case Operand::weight:
      return "weight";
    case Operand::gradient:
      return "gradient";
  }
  return "?";
}

Precision parse_precision(std::string_view s) {
  for (Precision p : {Precision::fp32, Precision::bf16, Precision::fp8, Precision::fp4})
    if (s == precision_name(p)) return p;
  throw Error("unknown precision '" + std::string(s) + "' (expected one of fp32, bf16, fp8, fp4)");
}

Gemm parse_gemm(std::string_view s) {
  for (Gemm g : kAllGemms)
    if (s == gemm_name(g)) return g;
  throw Error("unknown GEMM role '" + std::string(s) + "' (expected one of fprop, dgrad, wgrad)");
}

Operand parse_operand(std::string_view s) {
  for (Operand o : {Operand::activation, Operand::weight, Operand::gradient})
    if (s == operand_name(o)) return o;
  throw Error("unknown operand role '" + std::string(s) + "' (expected activation, weight or gradient)");
}

}  // namespace snip
