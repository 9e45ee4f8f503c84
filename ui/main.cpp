// snip-workbench: the desktop workbench. `--db FILE` opens a database (default: the user's
// data directory); `--screenshot-dir DIR` renders each main view to DIR/<view>.png and exits 0,
// or exits 1 with the reason on stderr when the database cannot be opened or DIR written.
// `--help` and `--version` answer before any window system is touched, so they work without a
// display (over ssh, in scripts, in CI).
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QMessageBox>
#include <QTimer>
#include <cstdio>

#include "main_window.h"
#include "plan_view.h"
#include "snip/environment.h"
#include "workbench.h"

namespace {

struct Options {
  QCommandLineOption db{QStringLiteral("db"), QStringLiteral("Experiment database (SQLite) to open."),
                        QStringLiteral("FILE")};
  QCommandLineOption screenshots{QStringLiteral("screenshot-dir"),
                                 QStringLiteral("Render each main view to DIR/<view>.png at 1280x800 and exit."),
                                 QStringLiteral("DIR")};
};

void describe(QCommandLineParser& parser, const Options& options) {
  parser.setApplicationDescription(QStringLiteral("SNIP Workbench: FP8/FP4 mixed-precision training and planning"));
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addOption(options.db);
  parser.addOption(options.screenshots);
  parser.addPositionalArgument(QStringLiteral("database"),
                               QStringLiteral("Database to open (same as --db; what a file manager passes)."),
                               QStringLiteral("[database]"));
}

// Answers --help / --version from the raw arguments, before QApplication (which needs a display)
// exists. Returns true when it answered. Arguments it cannot parse (Qt's own -platform, -style,
// or a typo) are left to the full parse after QApplication, which reports them.
bool answer_without_display(int argc, char** argv) {
  QStringList args;
  for (int i = 0; i < argc; ++i) args << QString::fromLocal8Bit(argv[i]);
  QCommandLineParser parser;
  Options options;
  describe(parser, options);
  if (!parser.parse(args)) return false;
  if (parser.isSet(QStringLiteral("help"))) {
    // (Without a QCoreApplication Qt cannot know the program's name and writes a placeholder.)
    std::fputs(
        qPrintable(parser.helpText().replace(QStringLiteral("<executable_name>"), QStringLiteral("snip-workbench"))),
        stdout);
    return true;
  }
  if (parser.isSet(QStringLiteral("version"))) {
    std::printf("snip-workbench %s\n", SNIP_VERSION);
    return true;
  }
  return false;
}

int render_screenshots_and_exit(QApplication& app, snip::ui::MainWindow& window, const QString& dir) {
  // Screenshots of a workbench without its database would show empty views and pass for a
  // success; a script needs to know.
  if (!window.workbench()->store()) {
    const QString why = window.workbench()->last_open_error();
    std::fprintf(stderr, "snip-workbench: cannot render screenshots: %s\n",
                 qPrintable(why.isEmpty() ? QStringLiteral("no database could be opened") : why));
    return 1;
  }
  window.resize(1280, 800);
  window.show();
  int status = 0;
  // Let the planner's first solve and sweep finish before rendering.
  QTimer::singleShot(0, [&] {
    try {
      QElapsedTimer wait;
      wait.start();
      while ((window.plan_view()->solving() || wait.elapsed() < 500) && wait.elapsed() < 10000)
        QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
      for (const QString& f : window.render_screenshots(dir)) std::printf("%s\n", qPrintable(f));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      status = 1;
    }
    QApplication::exit(status);
  });
  app.exec();
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  if (answer_without_display(argc, argv)) return 0;

  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("snip-workbench"));
  QApplication::setApplicationName(QStringLiteral("snip-workbench"));
  QApplication::setApplicationVersion(QStringLiteral(SNIP_VERSION));
  QApplication::setDesktopFileName(QStringLiteral("snip-workbench"));

  QCommandLineParser parser;
  Options options;
  describe(parser, options);
  parser.process(app);

  try {
    snip::check_environment();  // a SNIP_* value the engine would ignore is an error (environment.h)
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (!parser.isSet(options.screenshots))
      QMessageBox::critical(nullptr, QStringLiteral("SNIP Workbench"), QString::fromUtf8(e.what()));
    return 1;
  }
  QString db = parser.value(options.db);
  if (db.isEmpty() && !parser.positionalArguments().isEmpty()) db = parser.positionalArguments().front();
  snip::ui::MainWindow window(db);
  if (parser.isSet(options.screenshots))
    return render_screenshots_and_exit(app, window, parser.value(options.screenshots));
  window.show();
  return app.exec();
}
