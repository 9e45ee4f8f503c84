// A fresh folder of the test's own, made by mkdtemp (so parallel test processes and repeated
// instances never share one), removed with everything in it when the test ends, even after a
// test made parts of it read-only. Shared by every test that writes files.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <stdexcept>
#include <string>

namespace snip_test {

struct TempDir {
  std::filesystem::path path;

  // <root>/snip-<tag>-XXXXXX; root defaults to the system's temporary folder.
  explicit TempDir(const std::string& tag = "test",
                   const std::filesystem::path& root = std::filesystem::temp_directory_path()) {
    std::filesystem::create_directories(root);
    std::string pattern = (root / ("snip-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr)
      throw std::runtime_error("tests: cannot create a temporary folder under " + root.string());
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(path, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      std::filesystem::permissions(it->path(), std::filesystem::perms::owner_all, std::filesystem::perm_options::add,
                                   ec);
    std::filesystem::permissions(path, std::filesystem::perms::owner_all, std::filesystem::perm_options::add, ec);
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // The path of `name` inside the folder, as the string a command line or an API takes.
  std::string file(const std::string& name) const { return (path / name).string(); }
  std::string operator/(const std::string& name) const { return file(name); }
};

}  // namespace snip_test
