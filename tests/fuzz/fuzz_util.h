// Shared helpers of the libFuzzer targets: parsers that only read files get the fuzz input
// through a per-process temporary file.
#pragma once
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace snip_fuzz {

// Writes `size` bytes to a file unique to this process (libFuzzer may run several jobs) and
// returns its path. Aborts if the file cannot be written: that is a broken fuzz setup, not a finding.
inline std::string write_temp(const uint8_t* data, size_t size, const char* suffix) {
  std::string path = "/tmp/snip_fuzz_" + std::to_string(getpid()) + suffix;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) __builtin_trap();
  if (size && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
  return path;
}

}  // namespace snip_fuzz
