// The name tables: every name parses back to its value, and an unknown name is refused with every
// accepted name listed.
#include <gtest/gtest.h>

#include "snip/names.h"
#include "snip/precision.h"
#include "snip/text.h"

namespace {

enum class Colour { red, green, blue };
constexpr std::array<snip::Named<Colour>, 3> kColours{
    {{Colour::red, "red"}, {Colour::green, "green"}, {Colour::blue, "blue"}}};

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const snip::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Names, EveryNameParsesBackToItsValueAndAnUnknownNameListsThemAll) {
  for (const auto& n : kColours) {
    EXPECT_STREQ(snip::name_of(kColours, n.value), n.name);
    EXPECT_EQ(snip::parse_name(kColours, n.name, "colour"), n.value);
  }
  EXPECT_EQ(snip::names_of(kColours, " | "), "red | green | blue");
  EXPECT_FALSE(snip::find_name(kColours, "Red").has_value());  // names are exact
  EXPECT_EQ(error_of([] { snip::parse_name(kColours, "mauve", "colour"); }),
            "unknown colour 'mauve' (expected one of: red, green, blue)");
  EXPECT_EQ(error_of([] { snip::parse_name(kColours, "", "colour", "pick a primary"); }),
            "unknown colour '' (expected one of: red, green, blue): pick a primary");
}

TEST(Names, PrecisionsGemmsAndOperandsRoundTripThroughTheirNames) {
  for (auto p : {snip::Precision::fp32, snip::Precision::bf16, snip::Precision::fp8, snip::Precision::fp4})
    EXPECT_EQ(snip::parse_precision(snip::precision_name(p)), p);
  for (auto g : snip::kAllGemms) EXPECT_EQ(snip::parse_gemm(snip::gemm_name(g)), g);
  for (auto o : {snip::Operand::activation, snip::Operand::weight, snip::Operand::gradient})
    EXPECT_EQ(snip::parse_operand(snip::operand_name(o)), o);
  EXPECT_EQ(error_of([] { snip::parse_precision("fp6"); }),
            "unknown precision 'fp6' (expected one of: fp32, bf16, fp8, fp4)");
}

TEST(Text, TrimFormatAndDurationsAreOneSpelling) {
  EXPECT_EQ(snip::trim(" \t a b \r\n"), "a b");
  EXPECT_EQ(snip::trim(" \t\r\n"), "");
  EXPECT_EQ(snip::format_g(1e-05), "1e-05");
  EXPECT_EQ(snip::format_g(0.75), "0.75");
  EXPECT_EQ(snip::format_fixed(0.5, 4), "0.5000");
  EXPECT_EQ(snip::format_duration_ms(12345), "12.3s");
  EXPECT_EQ(snip::format_duration_ms(125000), "2m 05s");
  EXPECT_EQ(snip::format_duration_ms(3723000), "1h 02m 03s");
  EXPECT_EQ(snip::format_duration_ms(-5), "0.0s");
}

}  // namespace
