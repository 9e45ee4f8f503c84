// One table per enum of names people type: its values and their names, in order. The name of a
// value, the value of a name, and the error that lists every name all read that one table.
//
//   inline constexpr std::array<Named<Rounding>, 3> kRoundingNames{{{Rounding::rne, "rne"}, ...}};
//   const char* rounding_name(Rounding r) { return name_of(kRoundingNames, r); }
//   Rounding parse_rounding(std::string_view s) { return parse_name(kRoundingNames, s, "rounding"); }
#pragma once
#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "snip/error.h"

namespace snip {

template <class E>
struct Named {
  E value;
  const char* name;
};

template <class E, std::size_t N>
constexpr const char* name_of(const std::array<Named<E>, N>& table, E value) {
  for (const auto& n : table)
    if (n.value == value) return n.name;
  return "?";
}

template <class E, std::size_t N>
constexpr std::optional<E> find_name(const std::array<Named<E>, N>& table, std::string_view name) {
  for (const auto& n : table)
    if (name == n.name) return n.value;
  return std::nullopt;
}

// "a, b, c" (or joined by `separator`).
template <class E, std::size_t N>
std::string names_of(const std::array<Named<E>, N>& table, std::string_view separator = ", ") {
  std::string out;
  for (const auto& n : table) {
    if (!out.empty()) out += separator;
    out += n.name;
  }
  return out;
}

// The value named `name`; otherwise throws
// "unknown <what> '<name>' (expected one of: a, b, c)", then ": <hint>" when a hint is given.
template <class E, std::size_t N>
E parse_name(const std::array<Named<E>, N>& table, std::string_view name, std::string_view what,
             std::string_view hint = {}) {
  if (auto v = find_name(table, name)) return *v;
  std::string msg =
      "unknown " + std::string(what) + " '" + std::string(name) + "' (expected one of: " + names_of(table) + ")";
  if (!hint.empty()) msg += ": " + std::string(hint);
  throw Error(msg);
}

}  // namespace snip
