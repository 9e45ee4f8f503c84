// snip-workbench: the desktop workbench. `--db FILE` opens a database (default: the user's
// data directory); `--screenshot-dir DIR` renders each main view to DIR/<view>.png and exits 0,
// or exits 1 with the reason on stderr when the database cannot be opened or DIR written.
#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QTimer>
#include <cstdio>

#include "main_window.h"
#include "plan_view.h"
#include "workbench.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("snip-workbench"));
  QApplication::setApplicationName(QStringLiteral("snip-workbench"));
  QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

  QCommandLineParser parser;
  parser.setApplicationDescription(QStringLiteral("SNIP Workbench: FP8/FP4 mixed-precision training and planning"));
  parser.addHelpOption();
  parser.addVersionOption();
  QCommandLineOption db_option(QStringLiteral("db"), QStringLiteral("Experiment database (SQLite) to open."),
                               QStringLiteral("FILE"));
  QCommandLineOption shot_option(QStringLiteral("screenshot-dir"),
                                 QStringLiteral("Render each main view to DIR/<view>.png at 1280x800 and exit."),
                                 QStringLiteral("DIR"));
  parser.addOption(db_option);
  parser.addOption(shot_option);
  parser.process(app);

  snip::ui::MainWindow window(parser.value(db_option));
  if (parser.isSet(shot_option)) {
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
        for (const QString& f : window.render_screenshots(parser.value(shot_option))) std::printf("%s\n", qPrintable(f));
      } catch (const std::exception& e) {
        std::fprintf(stderr, "error: %s\n", e.what());
        status = 1;
      }
      QApplication::exit(status);
    });
    app.exec();
    return status;
  }
  window.show();
  return app.exec();
}
