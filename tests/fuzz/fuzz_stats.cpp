// libFuzzer target: snip::stats_from_json (an exported statistics round) on arbitrary text; an
// accepted round must survive a round trip through stats_to_json.
#include <cstdint>
#include <string>

#include "snip/error.h"
#include "snip/stats.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    snip::StatsRound r = snip::stats_from_json(text, "fuzz.stats.json");
    (void)snip::stats_from_json(snip::stats_to_json(r), "roundtrip");
  } catch (const snip::Error&) {
  }
  return 0;
}
