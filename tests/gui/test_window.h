// The GUI tests' main window: on the test's own database, closing without a confirmation
// dialog, at the size the layout tests expect, shown (so layouts and charts really run).
#pragma once
#include <QSize>
#include <QString>
#include <QWidget>
#include <memory>
#include <stdexcept>
#include <string>

#include "main_window.h"
#include "run_view.h"
#include "snip/run_settings.h"

namespace snip_test {

inline std::unique_ptr<snip::ui::MainWindow> open_test_window(const QString& db, QSize size = {1280, 800}) {
  auto w = std::make_unique<snip::ui::MainWindow>(db);
  w->set_close_confirmation([] { return true; });
  w->resize(size);
  w->show();
  return w;
}

// The Run form changed as `edit` changes its settings (RunView's form values; no widget).
template <class Edit>
void edit_run_form(snip::ui::RunView* rv, Edit&& edit) {
  snip::RunSettings s = rv->run_settings();
  edit(s);
  rv->set_run_settings(s);
}

// The control named `name` in `parent`, for a test acting on it as a user does (clicking, typing,
// focusing, where it sits); throws (failing the test) when there is none.
template <class W>
W* control(const QWidget* parent, const char* name) {
  W* w = parent->findChild<W*>(QString::fromLatin1(name));
  if (!w) throw std::runtime_error(std::string("no control named ") + name);
  return w;
}

}  // namespace snip_test
