// test_gui's main: the offscreen Qt platform and private config/data directories are set
// before the QApplication exists, so tests never touch the user's settings or database.
#include <gtest/gtest.h>

#include <QApplication>
#include <QSettings>
#include <QTemporaryDir>

namespace {
// Each test starts from the defaults: settings one test's window saved (the run form, window
// state) must not shape the next test's window.
class FreshSettings : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo&) override { QSettings().clear(); }
};
}  // namespace

int main(int argc, char** argv) {
  // offscreen unless SNIP_TEST_QPA names another platform (xcb under Xvfb: the real X path).
  qputenv("QT_QPA_PLATFORM", qEnvironmentVariable("SNIP_TEST_QPA", QStringLiteral("offscreen")).toUtf8());
  QTemporaryDir home;
  qputenv("XDG_CONFIG_HOME", (home.path() + "/config").toUtf8());
  qputenv("XDG_DATA_HOME", (home.path() + "/data").toUtf8());
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("snip-workbench-test"));
  QApplication::setApplicationName(QStringLiteral("snip-workbench-test"));
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new FreshSettings);
  return RUN_ALL_TESTS();
}
