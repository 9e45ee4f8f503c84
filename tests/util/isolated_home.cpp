// Linked into every test executable (tests/CMakeLists.txt): before main() runs, the process
// gets a fresh HOME-like tree of its own, so no test (nor a `snip` it starts, which inherits
// the environment) can read or write the user's workbench database, QSettings or caches,
// whoever starts the test: `ctest`, scripts/test.sh, or the binary run by hand.
//
//   XDG_DATA_HOME   -> <tmp>/data     (the default database: snip::default_database_path())
//   XDG_CONFIG_HOME -> <tmp>/config   (QSettings)
//   XDG_CACHE_HOME  -> <tmp>/cache
//
// The tree is removed at exit. SNIP_TEST_KEEP_HOME=1 keeps it (and prints where) for debugging.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace {

class IsolatedHome {
 public:
  IsolatedHome() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/snip-test-home-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) {
      std::perror("tests: cannot create a temporary home (mkdtemp)");
      std::_Exit(2);  // never fall back to the user's own folders
    }
    root_ = pattern;
    for (const char* sub : {"data", "config", "cache"}) std::filesystem::create_directory(root_ + "/" + sub);
    ::setenv("XDG_DATA_HOME", (root_ + "/data").c_str(), 1);
    ::setenv("XDG_CONFIG_HOME", (root_ + "/config").c_str(), 1);
    ::setenv("XDG_CACHE_HOME", (root_ + "/cache").c_str(), 1);
    owner_ = ::getpid();
  }
  ~IsolatedHome() {
    if (::getpid() != owner_) return;  // a forked child must not remove its parent's tree
    if (const char* keep = std::getenv("SNIP_TEST_KEEP_HOME"); keep && std::string(keep) == "1") {
      std::fprintf(stderr, "tests: kept the temporary home %s\n", root_.c_str());
      return;
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

 private:
  std::string root_;
  pid_t owner_ = 0;
};

// Constructed before main() (and before gtest's main), destroyed after it returns.
const IsolatedHome isolated_home;

}  // namespace
