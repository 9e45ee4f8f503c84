#include "snip/checked.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <set>
#include <vector>

namespace snip {

nlohmann::json parse_json_strict(const std::string& text, const std::string& source) {
  using json = nlohmann::json;
  std::vector<std::set<std::string>> keys;  // keys seen in each open object
  std::string duplicate;
  const json::parser_callback_t track = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth)
      throw Error(source + ": arrays and objects nest more than " + std::to_string(kMaxJsonDepth) +
                  " deep; no snip file nests more than a few levels, so this is not one (or it is damaged)");
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second && duplicate.empty())
      duplicate = parsed.get<std::string>();
    return true;
  };
  json j;
  try {
    j = json::parse(text, track);
  } catch (const json::exception& e) {  // parse errors and number overflow (1e999)
    throw Error(source + ": not valid JSON (" + e.what() + ")");
  }
  if (!duplicate.empty())
    throw Error(source + ": key \"" + duplicate +
                "\" appears twice in one object; JSON readers disagree on which one counts, so remove one");
  return j;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? double(pages) * double(page) : 0.0;
}

void check_fits_in_memory(double bytes, const std::string& what, const std::string& fix) {
  const double have = physical_memory_bytes();
  const bool unaddressable = !(bytes < double(std::numeric_limits<size_t>::max()) / 2);  // NaN and inf too
  if (!unaddressable && (have <= 0 || bytes <= 0.8 * have)) return;
  char need_s[64], have_s[64];
  std::snprintf(need_s, sizeof need_s, "%.3g", std::isfinite(bytes) ? bytes / 1e9 : INFINITY);
  std::snprintf(have_s, sizeof have_s, "%.0f", have / 1e9);
  throw Error(what + " needs about " + need_s + " GB but the machine has " + have_s + " GB; " + fix);
}

}  // namespace snip
