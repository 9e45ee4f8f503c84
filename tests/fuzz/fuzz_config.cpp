// libFuzzer target: the config.json reader (JSON text -> snip::ModelConfig with validation),
// then the derived quantities a valid config feeds into (dims, parameter count).
// read_config_file wraps JSON syntax errors into snip::Error, so every bad file must end there.
#include <cstdint>
#include <string>

#include "fuzz_util.h"
#include "snip/error.h"
#include "snip/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string path = snip_fuzz::write_temp(data, size, "_config.json");
  try {
    snip::ModelConfig c = snip::read_config_file(path);
    (void)c.dims();
    (void)c.num_parameters();
  } catch (const snip::Error&) {
  }
  return 0;
}
