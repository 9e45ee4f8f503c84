// The GUI never drops the SQLite locks of the database it has open. POSIX record locks belong
// to the process: any open and close of the database file by this process (a file dialog that
// sniffs each listed file's type, a raw read of a file picked by mistake, a second connection
// made by reopening the same file) releases them, and another process that then closes its
// connection deletes the WAL under the GUI. /proc/locks shows what the kernel holds for us.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QAbstractFileIconProvider>
#include <QFileInfo>
#include <QProcess>
#include <QTemporaryDir>
#include <fstream>
#include <string>

#include "file_dialogs.h"
#include "main_window.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "stored_run.h"
#include "test_window.h"
#include "workbench.h"

using namespace snip::ui;

namespace {

// How many POSIX locks this process holds on `path`'s inode.
int locks_held_on(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1;
  const std::string pid = " " + std::to_string(::getpid()) + " ";
  const std::string ino = ":" + std::to_string(st.st_ino) + " ";
  std::ifstream in("/proc/locks");
  int n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find("POSIX") != std::string::npos && line.find(pid) != std::string::npos &&
        line.find(ino) != std::string::npos)
      ++n;
  return n;
}

void make_store(const QString& path) {
  snip_test::stored_finished_run(path);
}

class DatabaseLocks : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(dir_.isValid());
    db_ = dir_.filePath("workbench.db");
    make_store(db_);
    window_ = snip_test::open_test_window(db_);
    ASSERT_NE(window_->workbench()->store(), nullptr);
    window_->workbench()->store()->runs();  // a read: the connection holds its shared lock
    ASSERT_GT(locks_held_on(db_.toStdString()), 0) << "no lock to keep: cannot test (is /proc/locks readable?)";
  }
  QTemporaryDir dir_;
  QString db_;
  std::unique_ptr<MainWindow> window_;
};

TEST_F(DatabaseLocks, TheFileDialogsNameFilesWithoutOpeningThem) {
  const QFileInfo info(db_);
  // What Qt's own provider does (the control: it opens the file, and the locks are gone) ...
  {
    QTemporaryDir other;
    const QString db2 = other.filePath("other.db");
    make_store(db2);
    snip::Store held(db2.toStdString());
    held.runs();
    ASSERT_GT(locks_held_on(db2.toStdString()), 0);
    QAbstractFileIconProvider qt;
    (void)qt.icon(QFileInfo(db2));
    (void)qt.type(QFileInfo(db2));
    EXPECT_EQ(locks_held_on(db2.toStdString()), 0) << "Qt's provider no longer opens files: the control is moot";
  }
  // ... and what every dialog of the GUI uses.
  const int before = locks_held_on(db_.toStdString());
  (void)plain_icon_provider()->icon(info);
  EXPECT_EQ(plain_icon_provider()->type(info), QStringLiteral("db file"));
  EXPECT_EQ(locks_held_on(db_.toStdString()), before);
}

TEST_F(DatabaseLocks, ReopeningTheOpenDatabaseOrImportingItKeepsTheLocks) {
  const int before = locks_held_on(db_.toStdString());
  snip::Store* store = window_->workbench()->store();
  // File › Open or New database on the file already open: nothing is reopened.
  EXPECT_TRUE(window_->workbench()->open_database(db_));
  EXPECT_EQ(window_->workbench()->store(), store);
  EXPECT_TRUE(window_->workbench()->open_database(dir_.path() + "/./workbench.db"));
  EXPECT_EQ(window_->workbench()->store(), store);
  // File › Import statistics with the database picked by mistake: refused unopened.
  EXPECT_FALSE(window_->workbench()->import_statistics_or_costs(db_));
  EXPECT_EQ(locks_held_on(db_.toStdString()), before);
  // A second process reads and closes: the GUI's WAL and index are still there, and so are its runs.
  QProcess other;
  other.start(QStringLiteral(SNIP_EXE), {QStringLiteral("runs"), QStringLiteral("--db"), db_});
  ASSERT_TRUE(other.waitForFinished(60000));
  EXPECT_EQ(other.exitCode(), 0) << other.readAllStandardError().toStdString();
  EXPECT_TRUE(QFileInfo::exists(db_ + "-wal"));
  EXPECT_TRUE(QFileInfo::exists(db_ + "-shm"));
  EXPECT_EQ(window_->workbench()->store()->runs().size(), 1u);
}

}  // namespace
