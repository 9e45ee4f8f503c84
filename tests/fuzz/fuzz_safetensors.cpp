// libFuzzer target: snip::SafetensorsFile::parse on arbitrary bytes, then reading every tensor
// it accepted (the reads must stay inside the validated offsets). snip::Error is the expected
// answer to bad input; anything else (a crash, a sanitizer report, another exception) is a bug.
#include <cstdint>
#include <string>
#include <vector>

#include "snip/error.h"
#include "snip/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = snip::SafetensorsFile::parse(std::string(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
    for (const auto& name : f.names()) {
      auto shape = f.shape(name);
      int64_t n = 1;
      for (int64_t d : shape) n *= d;
      if (n < 0 || n > (int64_t(1) << 20)) continue;  // parse already checked sizes against the file
      std::vector<float> out(size_t(n) + 1);
      f.read_f32(name, out.data(), shape);
    }
  } catch (const snip::Error&) {
  }
  return 0;
}
