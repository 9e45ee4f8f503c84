// The words of the tests that drive the real `snip` binary (SNIP_BIN, defined by
// snip_test_uses_snip): the `tiny` training options, a shell command as a user's terminal runs it,
// quoting, and reading a file back.
#pragma once
#include <fstream>
#include <iterator>
#include <string>

#include "run_command.h"

namespace snip_test {

inline const std::string kSnip = SNIP_BIN;
inline const std::string kTiny = " --preset tiny --batch-size 2 --seq-len 32 --eval-every 0 ";

inline CommandResult sh(const std::string& command) {
  return run_shell(command);
}

// `s` in single quotes, for a shell command line (the tests' paths hold no single quote).
inline std::string q(const std::string& s) {
  return "'" + s + "'";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace snip_test
