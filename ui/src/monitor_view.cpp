// MonitorView: training curves of the live run (from LiveMetrics) or a stored run (from the store).
#include "monitor_view.h"

#include <QComboBox>
#include <QFileInfo>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QTabWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <map>

#include "heatmap_widget.h"
#include "snip/grad_noise.h"
#include "snip/stats_keys.h"
#include "snip/store_export.h"
#include "workbench.h"

namespace snip::ui {

namespace {
constexpr int kLiveRefreshMs = 100;
constexpr int kStoreCurvePoints = 2000;
constexpr int kLiveNoiseRefreshMs = 2000;
std::vector<QPointF> to_points(const std::vector<snip::CurvePoint>& curve) {
  std::vector<QPointF> out;
  out.reserve(curve.size());
  for (const snip::CurvePoint& p : curve) out.emplace_back(double(p.step), p.value);
  return out;
}
}  // namespace

MonitorView::MonitorView(Workbench* workbench, std::shared_ptr<LiveMetrics> live, QWidget* parent)
    : QWidget(parent), workbench_(workbench), live_(std::move(live)) {
  run_combo_ = new QComboBox(this);
  run_combo_->setMinimumContentsLength(40);
  summary_ = new QLabel(this);
  loss_ = new CurveChart(tr("Loss"), tr("cross-entropy (nats)"), this);
  lr_ = new CurveChart(tr("Learning rate"), tr("lr"), this);
  grad_norm_ = new CurveChart(tr("Gradient norm"), tr("‖g‖ (before clipping)"), this);
  fp4_ = new CurveChart(tr("Achieved FP4 FLOP fraction"), tr("ρ"), this);
  bf16_gap_ = new CurveChart(tr("Loss gap to a BF16 probe"), tr("L − L_bf16"), this);
  for (CurveChart* c : {lr_, fp4_}) {
    c->set_smoothing(0.0);
    c->set_smoothing_visible(false);
  }
  noise_ = new HeatmapWidget(this);
  noise_->setToolTip({});
  noise_precision_ = new QComboBox(this);
  noise_precision_->addItem(tr("FP4"), QStringLiteral("fp4"));
  noise_precision_->addItem(tr("FP8"), QStringLiteral("fp8"));
  noise_summary_ = new QLabel(this);
  noise_summary_->setWordWrap(true);
  auto* noise_head = new QHBoxLayout();
  auto* noise_title = new QLabel(tr("<b>Gradient noise ratio</b> ‖∇W‖ / ‖∇W<sub>q</sub> − ∇W‖ per layer and "
                                    "statistics round (below √3 the precision's noise rivals the gradient)"),
                                 this);
  noise_title->setWordWrap(true);
  noise_head->addWidget(noise_title, 3);
  noise_head->addWidget(new QLabel(tr("Precision:"), this));
  noise_head->addWidget(noise_precision_);
  noise_head->addWidget(noise_summary_, 2);
  auto* noise_box = new QVBoxLayout();
  noise_box->addLayout(noise_head);
  noise_box->addWidget(noise_, 1);

  auto* top = new QHBoxLayout();
  top->addWidget(new QLabel(tr("Run:"), this));
  top->addWidget(run_combo_, 1);
  top->addWidget(summary_, 2);
  auto* grid = new QGridLayout();
  grid->addWidget(loss_, 0, 0, 1, 2);
  grid->addWidget(grad_norm_, 0, 2);
  grid->addWidget(lr_, 1, 0);
  grid->addWidget(fp4_, 1, 1);
  grid->addWidget(bf16_gap_, 1, 2);
  grid->setRowStretch(0, 3);
  grid->setRowStretch(1, 2);
  grid->setColumnStretch(0, 1);
  grid->setColumnStretch(1, 1);
  grid->setColumnStretch(2, 1);
  // Two pages, each with the whole height: the curves, and the gradient noise heatmap.
  pages_ = new QTabWidget(this);
  pages_->setDocumentMode(true);
  auto* curves_page = new QWidget(pages_);
  curves_page->setObjectName(QStringLiteral("curves"));
  curves_page->setLayout(grid);
  auto* noise_page = new QWidget(pages_);
  noise_page->setObjectName(QStringLiteral("noise"));
  noise_page->setLayout(noise_box);
  pages_->addTab(curves_page, tr("Curves"));
  pages_->addTab(noise_page, tr("Gradient noise"));
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(top);
  layout->addWidget(pages_, 1);

  connect(noise_precision_, &QComboBox::currentIndexChanged, this, &MonitorView::reload_noise);
  connect(run_combo_, &QComboBox::activated, this, [this](int i) { show_run(run_combo_->itemData(i).toLongLong()); });
  live_timer_.setInterval(kLiveRefreshMs);
  connect(&live_timer_, &QTimer::timeout, this, &MonitorView::poll_live);
  live_timer_.start();
  connect(workbench_, &Workbench::database_changed, this, &MonitorView::forget_run);
  connect(workbench_, &Workbench::data_changed, this, &MonitorView::refresh_runs);
  refresh_runs();
}

bool MonitorView::live_run_is_here() const {
  if (!live_ || live_->run_id() == 0 || live_->ended()) return false;
  const QString here = QFileInfo(workbench_->database_path()).canonicalFilePath();
  return !here.isEmpty() && here == QFileInfo(QString::fromStdString(live_->database())).canonicalFilePath();
}

void MonitorView::forget_run() {
  // Another database: the shown run's id means another run (or none) there, and the live
  // buffer's run (if any) is the other database's.
  if (live_) adopted_generation_ = live_->generation();
  run_id_ = 0;
  live_mode_ = false;
  live_taken_ = 0;
  run_combo_->clear();
  summary_->clear();
  set_empty_curves();
}

void MonitorView::refresh_runs() {
  snip::Store* store = workbench_->store();
  if (!store) return;
  std::vector<snip::RunInfo> runs;
  try {
    runs = store->runs();
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Reading runs failed: %1").arg(error_text(e)));
    return;
  }
  {
    const QSignalBlocker block(run_combo_);
    run_combo_->clear();
    run_names_.clear();
    for (const snip::RunInfo& r : runs) {
      run_names_[qlonglong(r.id)] = QString::fromStdString(snip::printable_text(r.spec.name));
      // Steps count from 1: a run whose last step is 5000 trained 5000 steps.
      run_combo_->addItem(tr("#%1 %2 · %3 · %4 steps")
                              .arg(r.id)
                              .arg(run_names_[qlonglong(r.id)])
                              .arg(QString::fromLatin1(snip::run_status_name(r.status)))
                              .arg(std::max<int64_t>(0, r.last_step)),
                          qlonglong(r.id));
    }
  }
  // A live run that ended (finished, stopped or failed) is shown from the store from now on,
  // labelled with its status, not "live".
  for (const snip::RunInfo& r : runs)
    if (live_mode_ && r.id == run_id_ && r.status != snip::RunStatus::running) live_mode_ = false;
  if (run_id_ == 0 && !runs.empty()) {
    show_run(runs.front().id);
    return;
  }
  run_combo_->setCurrentIndex(std::max(0, run_combo_->findData(qlonglong(run_id_))));
  if (!live_mode_ && run_id_ != 0) reload_from_store();  // another process may have added steps
}

void MonitorView::show_run(int64_t run_id) {
  run_id_ = run_id;
  run_combo_->setCurrentIndex(std::max(0, run_combo_->findData(qlonglong(run_id))));
  live_mode_ = run_id != 0 && live_run_is_here() && live_->run_id() == run_id;
  live_taken_ = 0;
  set_empty_curves();
  if (live_mode_)
    poll_live();
  else
    reload_from_store();
}

void MonitorView::reload_from_store() {
  snip::Store* store = workbench_->store();
  if (!store || run_id_ == 0) return;
  try {
    loss_->set_curves(
        {Curve{tr("train"), to_points(store->curve(run_id_, snip::Metric::train_loss, kStoreCurvePoints)), {}},
         Curve{tr("validation"), to_points(store->curve(run_id_, snip::Metric::val_loss, kStoreCurvePoints)), {}}});
    lr_->set_curves({Curve{tr("lr"), to_points(store->curve(run_id_, snip::Metric::lr, kStoreCurvePoints)), {}}});
    grad_norm_->set_curves(
        {Curve{tr("grad norm"), to_points(store->curve(run_id_, snip::Metric::grad_norm, kStoreCurvePoints)), {}}});
    fp4_->set_curves(
        {Curve{tr("ρ achieved"), to_points(store->curve(run_id_, snip::Metric::fp4_fraction, kStoreCurvePoints)), {}}});
    bf16_gap_->set_curves(
        {Curve{tr("gap"), to_points(store->curve(run_id_, snip::Metric::bf16_gap, kStoreCurvePoints)), {}}});
    const snip::RunInfo run = store->run(run_id_);
    QStringList parts = {QString::fromLatin1(snip::run_status_name(run.status)),
                         QString::fromStdString(run.spec.method.empty() ? "—" : run.spec.method),
                         tr("recipe %1").arg(QString::fromStdString(run.spec.recipe))};
    if (!run.spec.data_source.empty()) parts << QString::fromStdString(run.spec.data_source);
    if (!run.status_message.empty()) parts << QString::fromStdString(run.status_message);
    summary_->setText(parts.join(QStringLiteral(" · ")));
    reload_noise();
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Reading run #%1 failed: %2").arg(run_id_).arg(error_text(e)));
  }
}

void MonitorView::poll_live() {
  if (!live_) return;
  if (!live_mode_) {
    // A run started in this window (in this database) becomes the shown run once, as soon as
    // its first step arrives. A run the user then leaves for another is not forced back.
    if (live_->generation() != adopted_generation_ && live_->size() > 0 && live_run_is_here()) {
      adopted_generation_ = live_->generation();
      refresh_runs();
      show_run(live_->run_id());
    }
    return;
  }
  int64_t run_id = 0;
  const bool ended = live_->ended();  // read first: every row appended before it is taken below
  std::vector<snip::MetricRow> rows = live_->take_from(live_taken_, &run_id);
  if (run_id != run_id_) {
    live_mode_ = false;
    return;
  }
  if (rows.empty()) {
    if (ended) {  // the run is over: shown from the store, with its final status
      live_mode_ = false;
      refresh_runs();
      reload_from_store();
    }
    return;
  }
  live_taken_ += rows.size();
  // The live run's statistics rounds are in the store as soon as they are taken.
  if (!noise_clock_.isValid() || noise_clock_.elapsed() >= kLiveNoiseRefreshMs) reload_noise();
  std::vector<QPointF> train, val, lr, grad_norm, fp4, gap;
  for (const snip::MetricRow& m : rows) {
    const double s = double(m.step);
    train.emplace_back(s, m.train_loss);
    if (m.val_loss) val.emplace_back(s, *m.val_loss);
    lr.emplace_back(s, m.lr);
    grad_norm.emplace_back(s, m.grad_norm);
    fp4.emplace_back(s, m.fp4_fraction);
    if (m.bf16_gap) gap.emplace_back(s, *m.bf16_gap);
  }
  loss_->append_points({train, val});
  lr_->append_points({lr});
  grad_norm_->append_points({grad_norm});
  fp4_->append_points({fp4});
  bf16_gap_->append_points({gap});
  const snip::MetricRow& last = rows.back();
  // The run list follows the live step, not the store's last refresh.
  if (const int i = run_combo_->findData(qlonglong(run_id_)); i >= 0)
    run_combo_->setItemText(i, tr("#%1 %2 · %3 · %4 steps")
                                   .arg(run_id_)
                                   .arg(run_names_.value(qlonglong(run_id_)))
                                   .arg(QStringLiteral("running"))
                                   .arg(last.step));
  // The one throughput figure of a training run (the status bar shows steps only).
  summary_->setText(tr("training · step %1 · loss %2 · %3 tokens/s")
                        .arg(last.step)
                        .arg(last.train_loss, 0, 'f', 4)
                        .arg(last.tokens_per_s, 0, 'f', 0));
}

QString MonitorView::summary_text() const {
  return summary_->text();
}

void MonitorView::set_empty_curves() {
  loss_->set_curves({Curve{tr("train"), {}, {}}, Curve{tr("validation"), {}, {}}});
  lr_->set_curves({Curve{tr("lr"), {}, {}}});
  grad_norm_->set_curves({Curve{tr("grad norm"), {}, {}}});
  fp4_->set_curves({Curve{tr("ρ achieved"), {}, {}}});
  bf16_gap_->set_curves({Curve{tr("gap"), {}, {}}});
  noise_->set_data({});
  noise_->set_placeholder(tr("No statistics rounds shown yet"));
  noise_summary_->clear();
}

void MonitorView::reload_noise() {
  noise_clock_.start();
  snip::Store* store = workbench_->store();
  if (!store || run_id_ == 0) return;
  const QString precision = noise_precision_->currentData().toString();
  std::vector<snip::StatsValuePoint> points;
  try {
    points = store->stats_value_series(run_id_, snip::keys::kPrecGradNoiseRatio);
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error,
                       tr("Reading the statistics rounds of run #%1 failed: %2").arg(run_id_).arg(error_text(e)));
    return;
  }
  // Columns: the rounds in step order; rows: the layers in index order.
  std::vector<int64_t> rounds;
  int layers = 0;
  std::map<int, QString> names;
  for (const snip::StatsValuePoint& p : points) {
    if (p.precision != precision.toStdString()) continue;
    if (rounds.empty() || rounds.back() != p.round_id) rounds.push_back(p.round_id);
    layers = std::max(layers, p.position + 1);
    names[p.position] = QString::fromStdString(p.layer);
  }
  HeatmapData data;
  if (rounds.empty()) {
    noise_->set_data(data);
    const size_t stored = store->stats_rounds(run_id_).size();
    noise_summary_->clear();
    noise_->set_placeholder(
        stored == 0 ? tr("Run #%1 has no statistics rounds: its precision plan was fixed. Adaptive SNIP (Run view, "
                         "Precision: adaptive) measures the ratio at every round.")
                          .arg(run_id_)
                    : tr("The %1 statistics rounds of run #%2 were taken before the gradient noise ratio was "
                         "recorded.")
                          .arg(stored)
                          .arg(run_id_));
    return;
  }
  data.rows = layers;
  data.cols = int(rounds.size());
  data.values.assign(size_t(data.rows * data.cols), std::nan(""));
  data.row_labels = layer_short_labels(layers);
  data.value_name = tr("%1 gradient noise ratio").arg(noise_precision_->currentText());
  data.log_colour = true;
  data.contour = snip::kNoiseRatioThreshold;
  data.contour_label = QStringLiteral("√3");
  std::vector<int64_t> steps(rounds.size());
  for (const snip::StatsValuePoint& p : points) {
    if (p.precision != precision.toStdString()) continue;
    const int col = int(std::find(rounds.begin(), rounds.end(), p.round_id) - rounds.begin());
    steps[size_t(col)] = p.step;
    data.values[size_t(p.position * data.cols + col)] = p.value;
  }
  for (int64_t s : steps) data.col_labels << tr("step %1").arg(s);
  int below = 0, last_layers = 0;
  for (int r = 0; r < data.rows; ++r) {
    const double v = data.values[size_t(r * data.cols + data.cols - 1)];
    if (!std::isfinite(v)) continue;
    ++last_layers;
    if (v < snip::kNoiseRatioThreshold) ++below;
  }
  const int cols = data.cols;
  noise_->set_detail_provider(
      [names, cols](int cell) { return names.count(cell / cols) ? names.at(cell / cols) : QString(); });
  noise_->set_data(std::move(data));
  noise_summary_->setText(tr("Step %1: %2 of %3 layers below √3 in %4.")
                              .arg(steps.back())
                              .arg(below)
                              .arg(last_layers)
                              .arg(noise_precision_->currentText()));
}

}  // namespace snip::ui
