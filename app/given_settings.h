// The settings a `--resume` command line gives again: each command lists its table of
// (option, JSON pointer of the stored value, value asked for) once, and only the rows whose
// option the user typed are checked against the stored settings (snip::check_given_settings).
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "snip/recorded_training.h"

namespace snip::cli {

// The rows of `table` whose option was given on the command line.
inline std::vector<GivenSetting> given_settings(std::vector<GivenSetting> table,
                                                const std::function<bool(const std::string&)>& given) {
  std::erase_if(table, [&](const GivenSetting& g) { return !given(g.option); });
  return table;
}

}  // namespace snip::cli
