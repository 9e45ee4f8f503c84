// The GUI tests' one event-driven wait: processes Qt events until `done()` holds or the timeout
// (a ceiling for a broken build, not a duration the test relies on) passes; returns done().
#pragma once
#include <QCoreApplication>
#include <QElapsedTimer>
#include <functional>

namespace snip_test {

inline bool wait_for(const std::function<bool()>& done, int timeout_ms = 30000) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < timeout_ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 20);
  return done();
}

}  // namespace snip_test
