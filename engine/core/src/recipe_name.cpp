#include "snip/recipe_name.h"

#include <charconv>

#include "snip/error.h"

namespace snip {

namespace {

[[noreturn]] void bad_recipe(std::string_view name, const std::string& why) {
  throw Error("unknown scaling recipe '" + std::string(name) + "'" + (why.empty() ? "" : " (" + why + ")") +
              ": use one of " + recipe_name_forms());
}

// Splits "a:b:c" into at most three parts; more parts are an error.
int split_colons(std::string_view s, std::string_view parts[3]) {
  int n = 0;
  while (true) {
    const size_t c = s.find(':');
    if (n == 3) return 4;
    parts[n++] = s.substr(0, c);
    if (c == std::string_view::npos) return n;
    s.remove_prefix(c + 1);
  }
}

// The block length of "block:<N>" or "block:row" (0).
int parse_block(std::string_view name, std::string_view v) {
  if (v == "row") return 0;
  int n = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    bad_recipe(name, "the block length must be a whole number of elements or 'row', not '" + std::string(v) + "'");
  if (n < kMinRecipeBlock || n > kMaxRecipeBlock)
    bad_recipe(name, "the block length must be between " + std::to_string(kMinRecipeBlock) + " and " +
                         std::to_string(kMaxRecipeBlock) + " elements; use block:row for whole rows");
  return n;
}

}  // namespace

const char* recipe_name_forms() {
  return "snip, mx, nvfp4, tensor, block:N (FP32 scale per 1xN block along the reduction, 2 <= N <= 4096), "
         "block:row, channel (per-channel weights, per-tensor activations and gradients); block, channel and "
         "tensor take ':sr' for stochastic rounding of FP4 gradients";
}

RecipeName parse_recipe_name(std::string_view name) {
  std::string_view p[3];
  const int n = split_colons(name, p);
  if (n > 3) bad_recipe(name, "too many ':' parts");
  RecipeName r;
  const std::string_view head = p[0];
  // The optional last part: the gradient rounding of the parameterised family.
  auto rounding_suffix = [&](int at) {
    if (n <= at) return;
    if (p[at] == "sr")
      r.gradient_sr = true;
    else if (p[at] != "rne")
      bad_recipe(name, "the last part must be 'sr' (stochastic rounding of FP4 gradients) or 'rne', not '" +
                           std::string(p[at]) + "'");
    if (n > at + 1) bad_recipe(name, "too many ':' parts");
  };
  if (head == "snip" || head == "mx" || head == "nvfp4") {
    if (n > 1)
      bad_recipe(name, "the named recipe '" + std::string(head) +
                           "' has its own rounding rule and takes no options; for a custom block length use block:N");
    r.kind = head == "snip" ? RecipeName::Kind::snip : head == "mx" ? RecipeName::Kind::mx : RecipeName::Kind::nvfp4;
    r.canonical = std::string(head);
    return r;
  }
  if (head == "tensor" || head == "channel") {
    r.kind = head == "tensor" ? RecipeName::Kind::tensor : RecipeName::Kind::channel;
    rounding_suffix(1);
    r.canonical = std::string(head) + (r.gradient_sr ? ":sr" : "");
    return r;
  }
  if (head == "block") {
    if (n < 2) bad_recipe(name, "block needs a length: block:32 or block:row");
    r.kind = RecipeName::Kind::block;
    r.block = parse_block(name, p[1]);
    rounding_suffix(2);
    r.canonical =
        "block:" + (r.block == 0 ? std::string("row") : std::to_string(r.block)) + (r.gradient_sr ? ":sr" : "");
    return r;
  }
  bad_recipe(name, "");
}

}  // namespace snip
