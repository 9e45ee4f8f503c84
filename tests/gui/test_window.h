// The GUI tests' main window: on the test's own database, closing without a confirmation
// dialog, at the size the layout tests expect, shown (so layouts and charts really run).
#pragma once
#include <QSize>
#include <QString>
#include <memory>

#include "main_window.h"

namespace snip_test {

inline std::unique_ptr<snip::ui::MainWindow> open_test_window(const QString& db, QSize size = {1280, 800}) {
  auto w = std::make_unique<snip::ui::MainWindow>(db);
  w->set_close_confirmation([] { return true; });
  w->resize(size);
  w->show();
  return w;
}

}  // namespace snip_test
