// libFuzzer target: snip::plan_from_json (snip-plan/1 files) on arbitrary text; an accepted plan
// must survive a round trip through plan_to_json and resolve against the tiny model's layers.
#include <cstdint>
#include <string>
#include <vector>

#include "snip/error.h"
#include "snip/plan.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    snip::Plan p = snip::plan_from_json(text, "fuzz.plan.json");
    snip::Plan q = snip::plan_from_json(snip::plan_to_json(p), "roundtrip");
    (void)q;
    snip::ModelDims dims;
    dims.hidden = 64;
    dims.intermediate = 172;
    dims.num_layers = 2;
    dims.num_heads = 4;
    dims.num_kv_heads = 4;
    std::vector<std::string> warnings;
    (void)snip::resolve_plan(p, dims, &warnings);
  } catch (const snip::Error&) {
  }
  return 0;
}
