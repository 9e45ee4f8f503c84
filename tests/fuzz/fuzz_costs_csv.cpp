// libFuzzer target: snip::cost_table_from_csv (imported planner costs) on arbitrary text; an
// accepted table must survive a round trip through cost_table_to_csv.
#include <cstdint>
#include <string>

#include "snip/cost_table.h"
#include "snip/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    snip::CostTable t = snip::cost_table_from_csv(text, "fuzz.costs.csv");
    (void)snip::cost_table_from_csv(snip::cost_table_to_csv(t), "roundtrip");
  } catch (const snip::Error&) {
  }
  return 0;
}
