// Atomic writes: the previous file survives a failed write; no temp file is left behind.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "snip/atomic_file.h"
#include "snip/error.h"
#include "temp_dir.h"

using namespace snip;
namespace fs = std::filesystem;

TEST(AtomicFile, ReplacesContentAndFailsCleanlyInReadOnlyDir) {
  const snip_test::TempDir tmp("atomic");
  const fs::path& dir = tmp.path;
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
}

namespace {
// A fresh temporary directory per test (the shared TempDir) that also counts its entries.
struct ScratchDir : snip_test::TempDir {
  const fs::path& dir = path;
  explicit ScratchDir(const std::string& name) : TempDir("atomic-" + name) {}
  size_t entries() const { return size_t(std::distance(fs::directory_iterator(dir), fs::directory_iterator{})); }
};

std::string message_of(const std::string& path) {
  try {
    write_file_atomic(path, std::string_view("new"));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

// `--out link` writes through the link, as editors and cp do: the link stays a link (also a
// relative one, and a chain), its final target gets the contents and keeps its permission bits.
// A file in a folder that does not exist is not created with its folder (a typo would make one);
// the error names the folder.
TEST(AtomicFile, AMissingFolderIsNamedInTheError) {
  const snip_test::TempDir tmp("atomic");
  const std::string path = (tmp.path / "no-such-folder" / "a.txt").string();
  try {
    write_file_atomic(path, std::string_view("x"));
    ADD_FAILURE() << "wrote into a missing folder";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the folder " + (tmp.path / "no-such-folder").string() + " does not exist"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(tmp.path / "no-such-folder"));
}

TEST(AtomicFile, WritesThroughASymlinkToItsTarget) {
  ScratchDir d("symlink");
  fs::create_directories(d / "real");
  write_file_atomic(d / "real/target.txt", std::string_view("old"));
  ::chmod((d / "real/target.txt").c_str(), 0600);
  fs::create_symlink("real/target.txt", d / "link1");
  fs::create_symlink(d / "link1", d / "link2");  // a chain: link2 -> link1 -> real/target.txt
  write_file_atomic(d / "link2", std::string_view("new contents"));
  EXPECT_TRUE(fs::is_symlink(d / "link1"));
  EXPECT_TRUE(fs::is_symlink(d / "link2"));
  EXPECT_EQ(read_file(d / "real/target.txt"), "new contents");
  struct stat st {};
  ASSERT_EQ(::stat((d / "real/target.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  // A dangling link creates its target.
  fs::create_symlink("real/created.txt", d / "dangling");
  write_file_atomic(d / "dangling", std::string_view("made"));
  EXPECT_TRUE(fs::is_symlink(d / "dangling"));
  EXPECT_EQ(read_file(d / "real/created.txt"), "made");
  // No temp file left anywhere.
  EXPECT_EQ(d.entries(), 4u);  // real, link1, link2, dangling
  EXPECT_EQ(size_t(std::distance(fs::directory_iterator(d.dir / "real"), fs::directory_iterator{})), 2u);
}

// A FIFO (like /dev/null, not a regular file), a directory, and a link to either are refused
// before any temp file is created, and they stay what they were.
TEST(AtomicFile, RefusesDirectoriesFifosAndLinksToThem) {
  ScratchDir d("special");
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  fs::create_directories(d / "folder");
  write_file_atomic(d / "folder/keep.txt", std::string_view("user data"));
  fs::create_symlink("fifo", d / "link-to-fifo");
  const std::string fifo_msg = message_of(d / "fifo");
  EXPECT_NE(fifo_msg.find("is a named pipe (FIFO)"), std::string::npos) << fifo_msg;
  EXPECT_NE(fifo_msg.find("nothing was written"), std::string::npos) << fifo_msg;
  const std::string dir_msg = message_of(d / "folder");
  EXPECT_NE(dir_msg.find("is a directory"), std::string::npos) << dir_msg;
  const std::string link_msg = message_of(d / "link-to-fifo");
  EXPECT_NE(link_msg.find("the symbolic link points to"), std::string::npos) << link_msg;
  struct stat st {};
  ASSERT_EQ(::lstat((d / "fifo").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_TRUE(fs::is_symlink(d / "link-to-fifo"));
  EXPECT_EQ(read_file(d / "folder/keep.txt"), "user data");
  EXPECT_EQ(d.entries(), 3u);  // no temp file
  EXPECT_EQ(checked_write_target(d / "missing.txt"), d / "missing.txt");
  // A link the kernel makes (/dev/stdout -> /proc/self/fd/1 -> "pipe:[…]", which readlink cannot
  // follow to a name): refused by what it opens, a pipe.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  fs::create_symlink("/proc/self/fd/" + std::to_string(p[1]), d / "stdout-like");
  try {
    checked_write_target(d / "stdout-like");
    ADD_FAILURE() << "a pipe behind a /proc link was accepted as a write target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("named pipe"), std::string::npos) << e.what();
  }
  ::close(p[0]);
  ::close(p[1]);
  fs::remove(d / "stdout-like");
  // A character device such as /dev/null (only checked: a regression must not replace the real one).
  try {
    checked_write_target("/dev/null");
    ADD_FAILURE() << "/dev/null was accepted as a write target";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("character device"), std::string::npos) << e.what();
  }
}
