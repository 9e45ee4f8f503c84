// MainWindow's quick start: an adaptive SNIP run, the same run with FP4 everywhere, then both in
// the Compare view with the plans SNIP made (Training › Quick start; offered on an empty database).
#include "compare_view.h"
#include "main_window.h"
#include "run_view.h"
#include "snip/store.h"

namespace snip::ui {

// Quick start shows each new statistics round as the adaptive run makes it.
void MainWindow::connect_quick_start_signals() {
  connect(worker_, &TrainingWorker::plan_made, this, [this](qint64 run_id, qint64, qint64, double) {
    if (quick_stage_ != QuickStage::adaptive || !workbench_->store()) return;
    workbench_->poll_now();
    int64_t newest = 0;
    for (const auto& r : workbench_->store()->stats_rounds(run_id)) newest = std::max(newest, r.id);
    if (newest > 0) workbench_->use_stats_round(newest);
  });
}

void MainWindow::offer_quick_start_on_an_empty_database() {
  try {
    // A read-only database cannot take a run: its read-only notice stays.
    if (!workbench_->store() || workbench_->store()->read_only() || !workbench_->store()->runs().empty()) return;
  } catch (const std::exception&) {
    return;
  }
  show_message(MessageLevel::info,
               tr("New here? Quick start trains a small model with SNIP on the bundled corpus, then with FP4 "
                  "everywhere, and compares them: under a minute, each view filling as it goes."));
  message_hide_timer_.stop();  // an offer stays until taken or dismissed
  add_message_action(tr("Quick start"), [this] { start_quick_start(); });
}

void MainWindow::start_quick_start(const QuickStartOptions& options) {
  if (training() || quick_start_running()) {
    show_message(MessageLevel::warning, tr("A run is already training; stop it first (Ctrl+.)"));
    return;
  }
  if (!workbench_->store()) {
    show_message(MessageLevel::error, tr("No database is open: File › Open database"));
    return;
  }
  quick_options_ = options;
  quick_runs_.clear();
  quick_stage_ = QuickStage::adaptive;
  // The loop's first stage: SNIP re-plans from a statistics round every replan_every steps.
  TrainRequest r;
  try {
    snip::AdaptiveSettings a;
    a.budget = options.budget;
    a.replan_every = options.replan_every;
    a.bf16_probe_every = std::max(1, options.replan_every / 4);
    r = quick_start_request(QStringLiteral("quick start · adaptive SNIP"), "bf16", a);
  } catch (const std::exception& e) {
    quick_stage_ = QuickStage::none;
    show_message(MessageLevel::error, tr("Quick start could not start: %1").arg(error_text(e)));
    return;
  }
  r.method = QStringLiteral("snip");
  show_view(QStringLiteral("monitor"));
  show_message(MessageLevel::info, tr("Quick start 1/2: training %1 with SNIP at %2 % FP4 (re-planned every %3 steps). "
                                      "Watch the loss in Monitor; Sensitivity and Plan fill at each statistics round.")
                                       .arg(options.preset)
                                       .arg(options.budget * 100.0, 0, 'f', 0)
                                       .arg(options.replan_every));
  start_request(r);
}

TrainRequest MainWindow::quick_start_request(const QString& name, const std::string& precision,
                                             const std::optional<snip::AdaptiveSettings>& adaptive) const {
  // The form's request (database, checkpoint folder), with the quick start's own run: the user's
  // form is left as it is, and every other setting is the default `snip train` takes.
  TrainRequest r = run_view_->make_quick_request();
  snip::RunSettings s;
  s.preset = quick_options_.preset.toStdString();
  s.data.clear();  // the bundled corpus
  s.steps = quick_options_.steps;
  s.batch_size = quick_options_.batch;
  s.seq_len = quick_options_.seq_len;
  s.eval_every = std::max(1, quick_options_.steps / 8);
  s.precision = precision;
  s.adaptive = adaptive;
  r.config = snip::train_config(s);
  if (adaptive) r.adaptive = snip::adaptive_options(*adaptive);
  r.run_name = name;
  r.plan_id.reset();
  return r;
}

void MainWindow::quick_start_run_ended(qint64 run_id, const QString& status) {
  if (status != QLatin1String("finished")) {
    quick_stage_ = QuickStage::none;
    show_message(
        MessageLevel::warning,
        tr("Quick start stopped (run #%1 %2); Training › Quick start begins it again.").arg(run_id).arg(status));
    return;
  }
  quick_runs_.push_back(run_id);
  if (quick_stage_ == QuickStage::adaptive) {
    // The baseline: the same model, data, seed and steps with every GEMM in FP4.
    quick_stage_ = QuickStage::uniform_fp4;
    TrainRequest r;
    try {
      r = quick_start_request(QStringLiteral("quick start · FP4 everywhere"), "fp4", std::nullopt);
    } catch (const std::exception& e) {
      quick_stage_ = QuickStage::none;
      show_message(MessageLevel::error, tr("Quick start could not go on: %1").arg(error_text(e)));
      return;
    }
    r.method = QStringLiteral("uniform-fp4");
    show_message(MessageLevel::info, tr("Quick start 2/2: the same run with FP4 everywhere, to compare against."));
    start_request(r);
    return;
  }
  quick_stage_ = QuickStage::none;
  // Both runs and the plans SNIP made in the Compare view.
  std::vector<int64_t> plans;
  try {
    for (const snip::PlanTimelineEntry& e : workbench_->store()->plan_timeline(quick_runs_.front()))
      if (plans.size() < 2) plans.push_back(e.plan_id);
  } catch (const std::exception&) {
  }
  compare_view_->refresh_lists();
  compare_view_->select(plans, {quick_runs_.begin(), quick_runs_.end()});
  show_view(QStringLiteral("compare"));
  show_message(MessageLevel::info,
               tr("Quick start done. Compare: SNIP's run (#%1, %2 % FP4) against FP4 everywhere (#%3), with SNIP's "
                  "first plans side by side. Next: Sensitivity shows which layers FP4 hurts most; in Plan, move the "
                  "FP4 budget and the ILP re-solves; Run trains your own.")
                   .arg(quick_runs_.front())
                   .arg(quick_options_.budget * 100.0, 0, 'f', 0)
                   .arg(quick_runs_.back()));
  message_hide_timer_.stop();  // what to look at next stays until dismissed
}

}  // namespace snip::ui
