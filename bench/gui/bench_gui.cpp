// GUI latency harness, run under QT_QPA_PLATFORM=offscreen (set here) on real widgets:
//  1. slider-to-redrawn-plan latency: the Plan view's budget slider moves, the ILP re-solves on
//     the worker pool and the grid repaints; measured from the slider change to the end of the
//     repaint (PlanView::last_latency_ms). Reference in the same run: snip::make_plan called
//     directly on the same input (the solve alone), after checking the view shows that plan.
//  2. event-loop latency while the `small` preset trains in the window with the Monitor view
//     visible: a 10 ms timer's lateness (max = the longest the UI thread was blocked).
// Statistics are synthetic test data (tests/gui/synthetic_stats.h); only timing matters here.
#include <QApplication>
#include <QElapsedTimer>
#include <QSignalSpy>
#include <QSlider>
#include <QSpinBox>
#include <QComboBox>
#include <QTemporaryDir>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <vector>

#include "main_window.h"
#include "plan_view.h"
#include "run_view.h"
#include "snip/error.h"
#include "snip/model_config.h"
#include "snip/planner.h"
#include "snip/store.h"
#include "synthetic_stats.h"

using namespace snip::ui;

namespace {

bool wait_for(const std::function<bool()>& done, int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (!done() && t.elapsed() < timeout_ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
  return done();
}

struct Summary {
  double median = 0, p90 = 0, max = 0;
};
Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  if (v.empty()) return {};
  return {v[v.size() / 2], v[std::min(v.size() - 1, v.size() * 9 / 10)], v.back()};
}

// Moves the slider through `budgets` and returns per-move latencies (ms).
int bench_slider(const char* label, const snip::ModelDims& dims, double target_ms) {
  QTemporaryDir dir;
  const QString db = dir.filePath("bench.db");
  const snip::StatsRound round = snip::test::synthetic_stats_round(dims, 4096, 100);
  {
    snip::Store store(db.toStdString());
    store.add_stats_round(round);
  }
  MainWindow w(db);
  w.set_close_confirmation([] { return true; });
  w.resize(1280, 800);
  w.show();
  w.show_view("plan");
  PlanView* pv = w.plan_view();
  QSignalSpy shown(pv, &PlanView::plan_shown);
  if (!wait_for([&] { return shown.count() >= 1 && !pv->solving(); }, 60000)) {
    std::fprintf(stderr, "%s: no first plan: %s\n", label, qPrintable(pv->last_error()));
    return 1;
  }
  // Let the background sweep finish so it does not compete with the measured solves.
  QSignalSpy swept(pv, &PlanView::sweep_shown);
  wait_for([&] { return swept.count() >= 1; }, 120000);

  // Reference: the solve alone, and a check that the view shows exactly that plan.
  const snip::PlannerInput input = snip::planner_input_from_stats(round);
  std::vector<double> view_ms, solve_ms;
  const int budgets[] = {120, 250, 333, 410, 500, 575, 640, 700, 760, 815, 870, 930, 450, 300, 680, 550};
  for (int b : budgets) {
    const int before = shown.count();
    pv->budget_slider()->setValue(b);
    if (!wait_for([&] { return shown.count() > before && !pv->solving(); }, 60000)) {
      std::fprintf(stderr, "%s: no plan at %d: %s\n", label, b, qPrintable(pv->last_error()));
      return 1;
    }
    view_ms.push_back(pv->last_latency_ms());
    snip::PlanRequest req = pv->request();
    QElapsedTimer t;
    t.start();
    const snip::PlanResult direct = snip::make_plan(input, snip::Method::snip, req);
    solve_ms.push_back(t.nsecsElapsed() / 1e6);
    if (!(direct.plan.layers == pv->current()->plan.layers)) {
      std::fprintf(stderr, "%s: the view's plan differs from make_plan's at budget %d\n", label, b);
      return 1;
    }
  }
  const Summary v = summarize(view_ms), s = summarize(solve_ms);
  std::printf("%-28s layers=%4zu  slider->redrawn plan: median %7.2f ms  p90 %7.2f  max %7.2f  (target <= %.0f ms: %s)\n",
              label, round.layers.size(), v.median, v.p90, v.max, target_ms, v.max <= target_ms ? "met" : "MISSED");
  std::printf("%-28s reference make_plan alone: median %7.2f ms  max %7.2f  -> UI overhead ratio (median) %.2fx\n", "",
              s.median, s.max, s.median > 0 ? v.median / s.median : 0.0);
  w.close();
  return 0;
}

int bench_event_loop(int seconds) {
  QTemporaryDir dir;
  MainWindow w(dir.filePath("bench.db"));
  w.set_close_confirmation([] { return true; });
  w.resize(1280, 800);
  w.show();
  RunView* rv = w.run_view();
  rv->preset_combo()->setCurrentText("small");
  rv->steps_spin()->setValue(100000);
  rv->batch_spin()->setValue(8);
  rv->seq_spin()->setValue(128);
  rv->precision_combo()->setCurrentIndex(2);  // FP4 everywhere
  w.start_training();
  if (!wait_for([&] { return w.live_metrics()->size() >= 1; }, 120000)) {
    std::fprintf(stderr, "event loop: training did not start: %s\n", qPrintable(w.message_text()));
    return 1;
  }
  w.show_view("monitor");
  // A 10 ms repeating timer: lateness = how long the UI thread was busy elsewhere.
  std::vector<double> late;
  QElapsedTimer clock;
  clock.start();
  qint64 last = clock.nsecsElapsed();
  QTimer tick;
  tick.setTimerType(Qt::PreciseTimer);
  tick.setInterval(10);
  QObject::connect(&tick, &QTimer::timeout, [&] {
    const qint64 now = clock.nsecsElapsed();
    late.push_back(std::max(0.0, (now - last) / 1e6 - 10.0));
    last = now;
  });
  tick.start();
  const size_t steps_before = w.live_metrics()->size();
  wait_for([] { return false; }, seconds * 1000);
  tick.stop();
  const size_t steps = w.live_metrics()->size() - steps_before;
  const Summary s = summarize(late);
  std::printf("event loop while training small (B=8, T=128, FP4), %d s, %zu steps, monitor visible:\n", seconds, steps);
  std::printf("  timer lateness: median %.2f ms  p90 %.2f ms  max %.2f ms over %zu ticks  (target max <= 50 ms: %s)\n",
              s.median, s.p90, s.max, late.size(), s.max <= 50.0 ? "met" : "MISSED");
  w.close();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir home;
  qputenv("XDG_CONFIG_HOME", (home.path() + "/config").toUtf8());
  qputenv("XDG_DATA_HOME", (home.path() + "/data").toUtf8());
  QApplication app(argc, argv);
  int seconds = 15;
  if (argc > 1) seconds = std::max(1, atoi(argv[1]));
  try {
    int rc = 0;
    rc |= bench_slider("small (6 blocks)", snip::preset_config("small").dims(), 100.0);
    rc |= bench_slider("70B shape (80 blocks)", snip::test::llama70b_dims(), 300.0);
    rc |= bench_event_loop(seconds);
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
