// See text.h.
#include "snip/text.h"

#include <cstdio>

namespace snip {

std::string trim(std::string_view s) {
  constexpr std::string_view ws = " \t\r\n";
  const size_t begin = s.find_first_not_of(ws);
  if (begin == std::string_view::npos) return {};
  return std::string(s.substr(begin, s.find_last_not_of(ws) - begin + 1));
}

std::string format_g(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string format_fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string format_duration_ms(int64_t ms) {
  char buf[48];
  if (ms < 0) ms = 0;
  const int64_t s = ms / 1000;
  if (s < 60)
    std::snprintf(buf, sizeof buf, "%.1fs", double(ms) / 1000.0);
  else if (s < 3600)
    std::snprintf(buf, sizeof buf, "%lldm %02llds", (long long)(s / 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lldh %02lldm %02llds", (long long)(s / 3600), (long long)(s / 60 % 60),
                  (long long)(s % 60));
  return buf;
}

}  // namespace snip
