// Integers that come from outside (command line, JSON files, file headers, the database):
// overflow-checked arithmetic for sizes computed from them, range-checked reads of JSON
// integers (nlohmann's get<uint64_t>() turns -1 into 2^64-1 and get<int>() truncates), and the
// one size check that turns "this would not fit in memory" into a snip::Error before the
// allocation instead of std::bad_alloc after it.
#pragma once
#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "snip/error.h"

namespace snip {

// a·b, or nullopt-like false when it overflows T (signed or unsigned).
template <class T>
bool checked_mul(T a, T b, T* out) {
  return !__builtin_mul_overflow(a, b, out);
}

// a·b, or snip::Error "<what> overflows (a × b)" when it does not fit in T.
template <class T>
T mul_or_throw(T a, T b, const std::string& what) {
  T r{};
  if (!checked_mul(a, b, &r))
    throw Error(what + " is too large: " + std::to_string(a) + " × " + std::to_string(b) + " overflows a " +
                std::to_string(sizeof(T) * 8) + "-bit integer");
  return r;
}

// A JSON integer that must fit T and lie in [lo, hi]; `what` names the field for the message
// (e.g. "ck/trainer_state.json: data.epoch").
template <class T>
T json_integer(const nlohmann::json& v, const std::string& what, T lo = std::numeric_limits<T>::lowest(),
               T hi = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T>);
  if (!v.is_number_integer()) throw Error(what + " must be an integer, got " + v.dump());
  bool in_range;
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    in_range = u <= uint64_t(std::numeric_limits<T>::max()) && T(u) >= lo && T(u) <= hi;
  } else {
    const int64_t s = v.get<int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      in_range = s >= 0 && uint64_t(s) <= uint64_t(std::numeric_limits<T>::max()) && T(s) >= lo && T(s) <= hi;
    } else {
      in_range = s >= int64_t(std::numeric_limits<T>::lowest()) && s <= int64_t(std::numeric_limits<T>::max()) &&
                 T(s) >= lo && T(s) <= hi;
    }
  }
  if (!in_range) {
    const std::string lo_s = std::to_string(lo);
    const std::string hi_s = hi == std::numeric_limits<T>::max() ? "" : " and ≤ " + std::to_string(hi);
    throw Error(what + " is " + v.dump() + "; it must be an integer ≥ " + lo_s + hi_s);
  }
  return v.get<T>();
}

// How deep arrays and objects may nest in a JSON document read from outside. Every format of
// ours nests at most 6 deep; nlohmann's copy, comparison and dump recurse, so an unbounded depth
// (80,000 brackets) would overflow the stack in whatever touches the document next.
inline constexpr int kMaxJsonDepth = 64;

// Parses a JSON document from outside: the one reader of JSON that did not come from this
// process. nlohmann keeps the last of two equal keys in an object silently; here a repeated key
// is an error naming it, as is invalid JSON and nesting deeper than kMaxJsonDepth (each a
// snip::Error starting with `source`).
nlohmann::json parse_json_strict(const std::string& text, const std::string& source);

// Refuses an allocation of `bytes` that cannot fit: more than 80% of the machine's physical
// memory (or more than size_t can address). `what` says what would be allocated and `fix` how to
// make it smaller; the message reads "<what> needs about N GB but the machine has M GB; <fix>".
void check_fits_in_memory(double bytes, const std::string& what, const std::string& fix);

// The machine's physical memory in bytes (0 when unknown).
double physical_memory_bytes();

}  // namespace snip
