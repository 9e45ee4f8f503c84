// Helpers shared by the data tests: a per-test scratch folder and error-message checks.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>

#include "snip/error.h"
#include "temp_dir.h"

namespace snip_test {

class ScratchDirTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_.file(name); }
  TempDir tmp_{"data"};
  const std::filesystem::path dir_ = tmp_.path;
};

// Runs `fn`, expects a snip::Error whose message contains every fragment.
inline void expect_error(const std::function<void()>& fn, std::initializer_list<std::string> fragments) {
  try {
    fn();
    ADD_FAILURE() << "no error; expected one containing '" << *fragments.begin() << "'";
  } catch (const snip::Error& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
  }
}

}  // namespace snip_test
