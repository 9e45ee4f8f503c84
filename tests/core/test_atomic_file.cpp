// Atomic writes: the previous file survives a failed write; no temp file is left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "snip/atomic_file.h"
#include "snip/error.h"

using namespace snip;
namespace fs = std::filesystem;

TEST(AtomicFile, ReplacesContentAndFailsCleanlyInReadOnlyDir) {
  fs::path dir = fs::temp_directory_path() / ("snip_atomic_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "a.txt").string();
  write_file_atomic(path, std::string_view("first"));
  write_file_atomic(path, std::string_view("second"));
  EXPECT_EQ(read_file(path), "second");
  if (::geteuid() != 0) {  // root ignores directory permissions
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(write_file_atomic(path, std::string_view("third")), Error);
    fs::permissions(dir, fs::perms::owner_all);
    EXPECT_EQ(read_file(path), "second");
  }
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator{}), 1);
  EXPECT_THROW(read_file((dir / "missing").string()), Error);
  EXPECT_THROW(read_file(dir.string()), Error);  // a directory is not a file (read used to return "")
  fs::remove_all(dir);
}
