// The GUI never drops the SQLite locks of the database it has open. POSIX record locks belong
// to the process: any open and close of the database file by this process (a file dialog that
// sniffs each listed file's type, a raw read of a file picked by mistake, a second connection
// made by reopening the same file) releases them, and another process that then closes its
// connection deletes the WAL under the GUI. /proc/locks shows what the kernel holds for us.
#include <gtest/gtest.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QAbstractButton>
#include <QAbstractFileIconProvider>
#include <QAction>
#include <QApplication>
#include <QDir>
#include <QFileInfo>
#include <QFileSystemModel>
#include <QMenu>
#include <QMenuBar>
#include <QProcess>
#include <QTemporaryDir>
#include <QTimer>
#include <fstream>
#include <set>
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
  // `snip runs` in a second process reads and closes the database: with the GUI's locks held,
  // its WAL and index stay, and the GUI still reads its runs.
  void another_process_leaves_the_wal() {
    QProcess other;
    other.start(QStringLiteral(SNIP_EXE), {QStringLiteral("runs"), QStringLiteral("--db"), db_});
    ASSERT_TRUE(other.waitForFinished(60000));
    EXPECT_EQ(other.exitCode(), 0) << other.readAllStandardError().toStdString();
    EXPECT_TRUE(QFileInfo::exists(db_ + "-wal"));
    EXPECT_TRUE(QFileInfo::exists(db_ + "-shm"));
    EXPECT_EQ(window_->workbench()->store()->runs().size(), 1u);
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
  another_process_leaves_the_wal();
}

// Every file this process opens in `dir` (inotify IN_OPEN on the folder), by name.
class OpensIn {
 public:
  explicit OpensIn(const QString& dir) : fd_(inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {
    if (fd_ >= 0) inotify_add_watch(fd_, dir.toLocal8Bit().constData(), IN_OPEN);
  }
  ~OpensIn() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }
  std::set<std::string> names() {
    std::set<std::string> out;
    alignas(inotify_event) char buf[65536];
    for (ssize_t n; (n = ::read(fd_, buf, sizeof buf)) > 0;)
      for (char* p = buf; p < buf + n;) {
        const auto* e = reinterpret_cast<const inotify_event*>(p);
        if (e->len > 0) out.insert(e->name);
        p += sizeof(inotify_event) + e->len;
      }
    return out;
  }

 private:
  int fd_;
};

// Shows every dialog the GUI's file choosers open until its folder is listed and drawn, then
// cancels it; counts them.
class CancelEveryDialog {
 public:
  CancelEveryDialog() {
    set_dialog_observer([this](QFileDialog& dialog) {
      ++shown_;
      auto* model = dialog.findChild<QFileSystemModel*>();
      ASSERT_NE(model, nullptr);
      const QString folder = dialog.directory().absolutePath();
      // directoryLoaded comes through the event loop, which runs only once the dialog does.
      QObject::connect(model, &QFileSystemModel::directoryLoaded, &dialog, [&dialog, folder](const QString& path) {
        if (QDir(path).absolutePath() != folder) return;
        QTimer::singleShot(0, &dialog, [&dialog] {
          (void)dialog.grab();  // every column drawn: icons and types asked for
          dialog.reject();
        });
      });
      QTimer::singleShot(60000, &dialog, [this, &dialog] {
        ++timed_out_;
        dialog.reject();
      });
    });
  }
  ~CancelEveryDialog() { set_dialog_observer({}); }
  int shown() const { return shown_; }
  int timed_out() const { return timed_out_; }

 private:
  int shown_ = 0;
  int timed_out_ = 0;
};

}  // namespace

// Every file dialog of the GUI shown and cancelled: none opens the database or its WAL and
// index (a close() of any of them drops the locks), and a second process that reads and closes
// the database afterwards leaves the GUI's WAL in place.
TEST_F(DatabaseLocks, EveryFileDialogShownAndCancelledLeavesTheDatabaseUnopened) {
  const QString cwd = QDir::currentPath();
  QDir::setCurrent(dir_.path());  // dialogs without a folder of their own list this one
  OpensIn opens(dir_.path());
  ASSERT_TRUE(opens.ok());
  CancelEveryDialog cancel;
  int expected = 0;
  for (QAction* menu : window_->menuBar()->actions())
    for (QAction* a : menu->menu()->actions())
      if (a->text().endsWith(QChar(0x2026)) && !a->text().contains(QStringLiteral("Quick start"))) {
        const int before = cancel.shown();
        a->trigger();
        EXPECT_EQ(cancel.shown(), before + 1) << a->text().toStdString() << " showed no file dialog";
        ++expected;
      }
  for (QAbstractButton* b : window_->findChildren<QAbstractButton*>())
    if (b->text() == QStringLiteral("Browse…") || b->text() == QStringLiteral("Export CSV…")) {
      const int before = cancel.shown();
      b->click();
      EXPECT_EQ(cancel.shown(), before + 1) << b->text().toStdString() << " showed no file dialog";
      ++expected;
    }
  QDir::setCurrent(cwd);
  EXPECT_GE(expected, 14);
  EXPECT_EQ(cancel.timed_out(), 0);
  const auto opened = opens.names();
  for (const char* name : {"workbench.db", "workbench.db-wal", "workbench.db-shm"})
    EXPECT_EQ(opened.count(name), 0u) << name << " was opened by a dialog";
  EXPECT_GT(locks_held_on(db_.toStdString()), 0);
  another_process_leaves_the_wal();
}

// An export dialog starts in the folder of the last file chosen, not the working directory.
TEST(FileDialogs, AnExportDialogStartsInTheFolderOfTheLastFileChosen) {
  QTemporaryDir chosen;
  const QString target = chosen.filePath(QStringLiteral("table.csv"));
  QString second_start;
  int shown = 0;
  set_dialog_observer([&](QFileDialog& dialog) {
    if (shown++ == 0) {
      QTimer::singleShot(0, &dialog, [&dialog, target] {
        dialog.selectFile(target);
        static_cast<QDialog&>(dialog).accept();  // QFileDialog::accept, as the Save button
      });
    } else {
      second_start = dialog.directory().absolutePath();
      QTimer::singleShot(0, &dialog, [&dialog] { dialog.reject(); });
    }
  });
  EXPECT_EQ(
      save_file_name(nullptr, QStringLiteral("Export"), QStringLiteral("compare.csv"), QStringLiteral("CSV (*.csv)")),
      target);
  EXPECT_TRUE(save_file_name(nullptr, QStringLiteral("Export"), QStringLiteral("plan.json"), {}).isEmpty());
  set_dialog_observer({});
  EXPECT_EQ(shown, 2);
  EXPECT_EQ(second_start, QDir(chosen.path()).absolutePath());
}
