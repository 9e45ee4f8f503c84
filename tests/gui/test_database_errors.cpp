// A database the workbench cannot use: a file that is not a database, a database whose pages are
// damaged, a directory. The window says what is wrong and how to go on, offers to open another,
// stays usable, and the file is left byte for byte as it was. `snip-workbench --screenshot-dir`
// on such a database exits non-zero with the reason on stderr instead of rendering empty views.
#include <gtest/gtest.h>

#include <QCryptographicHash>
#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QStatusBar>
#include <QTabWidget>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include "compare_view.h"
#include "main_window.h"
#include "run_view.h"
#include "snip/model_config.h"
#include "snip/store.h"
#include "stored_run.h"
#include "test_window.h"

using namespace snip::ui;

namespace {

QByteArray file_bytes(const QString& path) {
  QFile f(path);
  return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

void write_file(const QString& path, const QByteArray& bytes) {
  QFile f(path);
  ASSERT_TRUE(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
  ASSERT_EQ(f.write(bytes), bytes.size());
}

// A real store with one run and 200 metric rows.
void make_store(const QString& path) {
  snip_test::stored_finished_run(path);
}

class DatabaseErrorTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(dir_.isValid()); }
  std::unique_ptr<MainWindow> open_window(const QString& db) { return snip_test::open_test_window(db); }
  QTemporaryDir dir_;
};

TEST_F(DatabaseErrorTest, NotADatabaseShowsWhyOffersAnotherAndLeavesTheFileUntouched) {
  const QString corrupt = dir_.filePath("corrupt.db");
  QByteArray junk;
  for (int i = 0; i < 300; ++i) junk += "these are not the pages of a SQLite database\n";
  write_file(corrupt, junk);
  const QDateTime mtime = QFileInfo(corrupt).lastModified();

  auto w = open_window(corrupt);
  EXPECT_EQ(w->workbench()->store(), nullptr);
  const std::string msg = w->message_text().toStdString();
  EXPECT_NE(msg.find("corrupt.db"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a SQLite database"), std::string::npos) << msg;  // what is wrong
  EXPECT_NE(msg.find("Open database"), std::string::npos) << msg;          // how to go on
  EXPECT_NE(msg.find("left as it is"), std::string::npos) << msg;
  ASSERT_EQ(w->message_actions().size(), 2);
  EXPECT_TRUE(w->message_actions()[0]->text().contains("Open another database"));
  bool status_says_no_database = false;
  for (const QLabel* l : w->statusBar()->findChildren<QLabel*>())
    status_says_no_database |= l->text().contains("No database open");
  EXPECT_TRUE(status_says_no_database);

  // The rest of the workbench works without a database: every view shows, starting a run says
  // what is missing instead of failing somewhere deeper.
  for (const QString& view : MainWindow::view_names()) {
    w->show_view(view);
    QCoreApplication::processEvents();
  }
  w->start_training();
  EXPECT_FALSE(w->training());
  EXPECT_TRUE(w->message_text().contains("No database is open")) << w->message_text().toStdString();
  w->compare_view()->launch_compare_experiment();
  EXPECT_FALSE(w->compare_view()->experiment_running());

  // Opening another database (what the message's button leads to) brings everything back.
  const QString good = dir_.filePath("good.db");
  make_store(good);
  ASSERT_TRUE(w->workbench()->open_database(good));
  ASSERT_NE(w->workbench()->store(), nullptr);
  EXPECT_EQ(w->run_view()->listed_runs().size(), 1);
  // Choosing the corrupt file again from the File menu keeps the good database open.
  EXPECT_FALSE(w->workbench()->open_database(corrupt));
  EXPECT_EQ(w->workbench()->database_path(), good);
  EXPECT_TRUE(w->message_text().contains("Still using")) << w->message_text().toStdString();
  w->close();
  w.reset();

  // The corrupt file is exactly as it was, and SQLite left nothing beside it.
  EXPECT_EQ(file_bytes(corrupt), junk);
  EXPECT_EQ(QFileInfo(corrupt).lastModified(), mtime);
  EXPECT_FALSE(QFileInfo::exists(corrupt + "-wal"));
  EXPECT_FALSE(QFileInfo::exists(corrupt + "-journal"));
}

TEST_F(DatabaseErrorTest, DamagedPagesAreReportedAndTheWindowStaysUsable) {
  // A real store whose pages after the first (the schema) are overwritten: the header is fine,
  // the tables are not. Either the open or the first read fails; both must be reported.
  const QString damaged = dir_.filePath("damaged.db");
  make_store(damaged);
  {
    snip::Store checkpoint(damaged.toStdString());  // fold the WAL into the file
  }
  QFile::remove(damaged + "-wal");
  QFile::remove(damaged + "-shm");
  QByteArray bytes = file_bytes(damaged);
  ASSERT_GT(bytes.size(), 8192);
  const int page = 4096;
  for (int i = page; i < bytes.size(); ++i) bytes[i] = char((i * 131) & 0xff);
  write_file(damaged, bytes);

  auto w = open_window(damaged);
  w->workbench()->poll_now();
  QCoreApplication::processEvents();
  const std::string msg = w->message_text().toStdString();
  EXPECT_NE(msg.find("damaged.db"), std::string::npos) << msg;
  EXPECT_NE(msg.find("malformed"), std::string::npos) << msg;
  for (const QString& view : MainWindow::view_names()) {
    w->show_view(view);
    QCoreApplication::processEvents();
  }
  // Usable: another database opens and shows its run.
  const QString good = dir_.filePath("good.db");
  make_store(good);
  ASSERT_TRUE(w->workbench()->open_database(good));
  EXPECT_EQ(w->run_view()->listed_runs().size(), 1);
  w->close();
  w.reset();
  EXPECT_EQ(file_bytes(damaged), bytes);
}

// A database whose header and schema are fine but whose data pages are damaged was opened and
// listed; the damage showed only when a run was read. It is refused when opened, with the
// previous database kept and the reason said.
TEST_F(DatabaseErrorTest, ADatabaseWithDamagedDataPagesIsRefusedWhenOpenedAndThePreviousOneKept) {
  const QString good = dir_.filePath("good.db"), damaged = dir_.filePath("pages.db");
  make_store(good);
  snip_test::stored_finished_run(damaged, "long", 3000);
  {
    snip::Store checkpoint(damaged.toStdString());  // fold the WAL into the file
  }
  QFile::remove(damaged + "-wal");
  QFile::remove(damaged + "-shm");
  QByteArray bytes = file_bytes(damaged);
  ASSERT_GT(bytes.size(), 8 * 4096);
  for (int i = 3 * 4096; i < 4 * 4096; ++i) bytes[i] = char(0xDE ^ (i & 0xFF));
  write_file(damaged, bytes);
  auto w = open_window(good);
  ASSERT_NE(w->workbench()->store(), nullptr);
  EXPECT_FALSE(w->workbench()->open_database(damaged));
  EXPECT_EQ(QFileInfo(w->workbench()->database_path()).fileName(), QStringLiteral("good.db"));
  const std::string msg = w->message_text().toStdString();
  EXPECT_NE(msg.find("pages.db"), std::string::npos) << msg;
  EXPECT_NE(msg.find("damaged"), std::string::npos) << msg;
  EXPECT_NE(msg.find("Still using"), std::string::npos) << msg;
  EXPECT_EQ(w->run_view()->listed_runs().size(), 1);
  w->close();
  EXPECT_EQ(file_bytes(damaged), bytes);
}

// The executable, as a script runs it.
struct ProcessResult {
  int exit_code = -1;
  QString err;
};
ProcessResult run_workbench(const QStringList& args, const QString& home) {
  QProcess p;
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.insert("QT_QPA_PLATFORM", "offscreen");
  env.insert("XDG_CONFIG_HOME", home + "/config");
  env.insert("XDG_DATA_HOME", home + "/data");
  p.setProcessEnvironment(env);
  p.start(QStringLiteral(SNIP_WORKBENCH_EXE), args);
  if (!p.waitForFinished(120000)) {
    p.kill();
    p.waitForFinished();
    return {};
  }
  return {p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1, QString::fromUtf8(p.readAllStandardError())};
}

TEST_F(DatabaseErrorTest, ScreenshotModeExitsNonZeroWhenTheDatabaseCannotBeOpened) {
  const QString corrupt = dir_.filePath("corrupt.db");
  write_file(corrupt, QByteArray(4096, 'x'));
  const QString shots = dir_.filePath("shots");
  ProcessResult r = run_workbench({"--screenshot-dir", shots, "--db", corrupt}, dir_.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, -1) << "crashed or hung";
  EXPECT_TRUE(r.err.contains("corrupt.db")) << r.err.toStdString();
  EXPECT_TRUE(r.err.contains("not a SQLite database")) << r.err.toStdString();
  EXPECT_TRUE(QDir(shots).entryList({"*.png"}).isEmpty());
  EXPECT_EQ(file_bytes(corrupt), QByteArray(4096, 'x'));

  // A directory given as the database: also an error, with its reason.
  r = run_workbench({"--screenshot-dir", shots, "--db", dir_.path()}, dir_.path());
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.exit_code, -1) << "crashed or hung";
  EXPECT_TRUE(r.err.contains("is a directory")) << r.err.toStdString();

  // The same command on a good database succeeds and writes every view: the failures above are
  // about the database, not the screenshot mode.
  const QString good = dir_.filePath("good.db");
  make_store(good);
  r = run_workbench({"--screenshot-dir", shots, "--db", good}, dir_.path());
  EXPECT_EQ(r.exit_code, 0) << r.err.toStdString();
  const QStringList written = QDir(shots).entryList({"*.png"});
  for (const QString& view : MainWindow::view_names())
    EXPECT_TRUE(written.contains(view + QStringLiteral(".png"))) << view.toStdString();
  EXPECT_TRUE(written.contains(QStringLiteral("monitor-noise.png")));  // the Monitor's second page
}

}  // namespace
