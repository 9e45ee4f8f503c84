// MainWindow's screenshot mode (--screenshot-dir): every view, and each page of a view with
// pages, rendered at the window's size to <dir>/<view>[-<page>].png.
#include <QCoreApplication>
#include <QDir>
#include <QTabWidget>

#include "curve_chart.h"
#include "export_file.h"
#include "main_window.h"
#include "snip/error.h"

namespace snip::ui {

QStringList MainWindow::render_screenshots(const QString& dir) {
  if (!QDir().mkpath(dir)) throw snip::Error("cannot create the screenshot folder " + dir.toStdString());
  QStringList written;
  const int previous = tabs_->currentIndex();
  const QStringList names = view_names();
  for (int i = 0; i < names.size(); ++i) {
    tabs_->setCurrentIndex(i);
    QCoreApplication::processEvents();
    // Charts redraw on timers; draw them now so the image shows the data.
    for (CurveChart* c : tabs_->widget(i)->findChildren<CurveChart*>()) c->redraw_now();
    QCoreApplication::processEvents();
    // A view with pages of its own (the Monitor's curves and gradient noise): <view>.png is its
    // first page, <view>-<page>.png each other page, whichever page the user left open.
    const QList<QTabWidget*> page_sets = tabs_->widget(i)->findChildren<QTabWidget*>();
    std::vector<int> shown;
    for (QTabWidget* pages : page_sets) {
      shown.push_back(pages->currentIndex());
      pages->setCurrentIndex(0);
    }
    QCoreApplication::processEvents();
    const QString path = QDir(dir).filePath(names[i] + QStringLiteral(".png"));
    write_png_file(grab(), path);
    written << path;
    for (int k = 0; k < page_sets.size(); ++k) {
      QTabWidget* pages = page_sets[k];
      for (int page = 1; page < pages->count(); ++page) {
        if (pages->widget(page)->objectName().isEmpty()) continue;
        pages->setCurrentIndex(page);
        QCoreApplication::processEvents();
        const QString page_path = QDir(dir).filePath(names[i] + QLatin1Char('-') + pages->widget(page)->objectName() +
                                                     QStringLiteral(".png"));
        write_png_file(grab(), page_path);
        written << page_path;
      }
      pages->setCurrentIndex(shown[size_t(k)]);
    }
  }
  tabs_->setCurrentIndex(previous);
  return written;
}

}  // namespace snip::ui
