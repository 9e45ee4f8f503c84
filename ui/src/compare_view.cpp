// CompareView: plans side by side with differences, overlaid loss curves, one sortable comparison
// table of plans, runs and stored compare experiments, and compare experiments in the background.
#include "compare_view.h"

#include <QCheckBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIcon>
#include <QLabel>
#include <QListWidget>
#include <QPixmap>
#include <QProgressBar>
#include <QPushButton>
#include <QScrollArea>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <algorithm>
#include <cmath>
#include <set>

#include "curve_chart.h"
#include "plan_grid.h"
#include "plan_view.h"
#include "snip/atomic_file.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/layers.h"
#include "workbench.h"

namespace snip::ui {

namespace {
constexpr int kLastSteps = 50;         // METHOD.md 6: mean train loss over the last 50 steps
constexpr int kRunCurvePoints = 2000;  // a stored run's curve, downsampled by the store

int num_blocks_of(const snip::Plan& plan) {
  int blocks = 0;
  for (const auto& [name, lp] : plan.layers)
    if (auto id = snip::parse_layer_module_name(name)) blocks = std::max(blocks, id->block + 1);
  return blocks;
}
QString num(double v, int prec = 4) {
  return std::isfinite(v) ? QString::number(v, 'f', prec) : QStringLiteral("—");
}
QString signed_num(double v) {
  return std::isfinite(v) ? QString::asprintf("%+.4f", v) : QStringLiteral("—");
}

// A cell that sorts by its number (Qt::UserRole) when it has one; unknown values (NaN) sort last.
class TableItem : public QTableWidgetItem {
 public:
  explicit TableItem(const QString& text) : QTableWidgetItem(text) {}
  TableItem(const QString& text, double value) : QTableWidgetItem(text) {
    setData(Qt::UserRole, value);
    setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
  }
  bool operator<(const QTableWidgetItem& other) const override {
    const QVariant a = data(Qt::UserRole), b = other.data(Qt::UserRole);
    if (!a.isValid() || !b.isValid()) return QTableWidgetItem::operator<(other);
    const double x = a.toDouble(), y = b.toDouble();
    if (std::isnan(x)) return false;
    if (std::isnan(y)) return true;
    return x < y;
  }
};

// Distinct line colours: Tableau's ten, then hues a golden angle apart (a compare experiment has
// 15+ arms); the table's Method cell shows the colour of the row's curve, so it is the legend.
QColor curve_colour(size_t i) {
  static const QColor kTableau[] = {
      QColor(31, 119, 180), QColor(255, 127, 14),  QColor(44, 160, 44),   QColor(214, 39, 40),  QColor(148, 103, 189),
      QColor(140, 86, 75),  QColor(227, 119, 194), QColor(127, 127, 127), QColor(188, 189, 34), QColor(23, 190, 207)};
  if (i < 10) return kTableau[i];
  return QColor::fromHsvF(std::fmod(0.07 + 0.381966 * double(i), 1.0), 0.75, 0.8);
}
QIcon swatch(const QColor& colour) {
  QPixmap pixmap(12, 12);
  pixmap.fill(colour);
  return QIcon(pixmap);
}
constexpr size_t kMaxLegendCurves = 6;  // more: the table's colour swatches are the legend

// One table row before it becomes cells.
struct Row {
  QColor colour;  // of the row's curve, if it has one
  QString source, method;
  double budget = NAN, achieved = NAN, train = NAN, val = NAN, gap_train = NAN, gap_val = NAN, predicted = NAN;
  QString vs_snip, tooltip;
};

QString compare_label(const snip::CompareRecord& c) {
  return QObject::tr("#%1 ρ %2 · %3 steps from step %4%5 · %6 arms")
      .arg(c.id)
      .arg(c.budget, 0, 'f', 2)
      .arg(c.steps)
      .arg(c.start_step)
      .arg(c.run_id ? QObject::tr(" of run #%1").arg(*c.run_id) : QString())
      .arg(c.row_count ? c.row_count : qint64(c.rows.size()));
}

// A compare still training, cancelled (Resume continues it) or failed says so in the list.
QString compare_status_suffix(const snip::CompareRecord& c) {
  return c.status == snip::RunStatus::finished ? QString()
                                               : QStringLiteral(" · ") + QString::fromLatin1(run_status_name(c.status));
}
}  // namespace

CompareView::CompareView(Workbench* workbench, QWidget* parent) : QWidget(parent), workbench_(workbench) {
  plan_list_ = new QListWidget(this);
  run_list_ = new QListWidget(this);
  compare_list_ = new QListWidget(this);
  auto* pick = new QWidget(this);
  auto* pick_layout = new QVBoxLayout(pick);
  pick_layout->setContentsMargins(0, 0, 0, 0);
  pick_layout->addWidget(new QLabel(tr("Plans (first checked = reference):"), pick));
  pick_layout->addWidget(plan_list_, 1);
  pick_layout->addWidget(new QLabel(tr("Runs:"), pick));
  pick_layout->addWidget(run_list_, 1);
  pick_layout->addWidget(new QLabel(tr("Compare experiments:"), pick));
  pick_layout->addWidget(compare_list_, 1);
  // Compare experiment (METHOD.md 6): continue the checked run's newest checkpoint under every
  // method's plan, K paired replicates each, on the worker thread through the library, with
  // progress and Cancel (the compare stays interrupted) and Resume.
  auto* experiment = new QGroupBox(tr("New compare experiment"), pick);
  auto* ex_layout = new QVBoxLayout(experiment);
  auto* ex_row = new QHBoxLayout();
  experiment_budget_ = new QDoubleSpinBox(experiment);
  experiment_budget_->setRange(0.0, 1.0);
  experiment_budget_->setSingleStep(0.05);
  experiment_budget_->setValue(snip::defaults::kBudget);
  experiment_budget_->setToolTip(tr("FP4 FLOP fraction ρ of every plan"));
  experiment_steps_ = new QSpinBox(experiment);
  experiment_steps_->setRange(1, 1000000);
  experiment_steps_->setValue(200);
  experiment_steps_->setToolTip(tr("Training steps per plan (each arm continues the same checkpoint)"));
  ex_row->addWidget(new QLabel(tr("ρ"), experiment));
  ex_row->addWidget(experiment_budget_);
  ex_row->addWidget(new QLabel(tr("steps"), experiment));
  ex_row->addWidget(experiment_steps_);
  ex_layout->addLayout(ex_row);
  auto* ex_row2 = new QHBoxLayout();
  experiment_replicates_ = new QSpinBox(experiment);
  experiment_replicates_->setRange(1, 100);
  experiment_replicates_->setValue(snip::CompareOptions{}.replicates);
  experiment_replicates_->setToolTip(
      tr("Trainings per arm (K), paired by replicate: K ≥ 2 gives 95% intervals and verdicts against SNIP"));
  experiment_oracle_ = new QCheckBox(tr("oracle arm"), experiment);
  experiment_oracle_->setToolTip(
      tr("Add an arm planned by the same ILP on the measured per-layer loss damage, and SNIP's regret to it"));
  ex_row2->addWidget(new QLabel(tr("replicates"), experiment));
  ex_row2->addWidget(experiment_replicates_);
  ex_row2->addWidget(experiment_oracle_);
  ex_layout->addLayout(ex_row2);
  auto* button_row = new QHBoxLayout();
  experiment_button_ = new QPushButton(tr("Run from the checked run"), experiment);
  experiment_button_->setToolTip(
      tr("Continues the newest checkpoint of the checked run under SNIP and every baseline plan at budget ρ, "
         "each K times; every finished training is stored at once"));
  resume_button_ = new QPushButton(tr("Resume"), experiment);
  resume_button_->setToolTip(
      tr("Continues the checked compare experiment that was cancelled or interrupted: only the trainings it "
         "has not stored are run"));
  cancel_button_ = new QPushButton(tr("Cancel"), experiment);
  cancel_button_->setEnabled(false);
  cancel_button_->setToolTip(tr("Stops after the current step; the finished trainings are kept for Resume"));
  button_row->addWidget(experiment_button_, 1);
  button_row->addWidget(resume_button_);
  button_row->addWidget(cancel_button_);
  ex_layout->addLayout(button_row);
  experiment_progress_ = new QProgressBar(experiment);
  experiment_progress_->setRange(0, 1);
  experiment_progress_->setValue(0);
  experiment_progress_->setFormat(tr("idle"));
  experiment_status_ = new QLabel(experiment);
  experiment_status_->setWordWrap(true);
  experiment_status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  ex_layout->addWidget(experiment_progress_);
  ex_layout->addWidget(experiment_status_);
  pick_layout->addWidget(experiment);
  connect(experiment_button_, &QPushButton::clicked, this, &CompareView::launch_compare_experiment);
  connect(resume_button_, &QPushButton::clicked, this, &CompareView::resume_compare_experiment);
  connect(cancel_button_, &QPushButton::clicked, this, &CompareView::cancel_compare_experiment);
  experiment_thread_ = new QThread(this);
  experiment_worker_ = new CompareWorker();
  experiment_worker_->moveToThread(experiment_thread_);
  connect(experiment_thread_, &QThread::finished, experiment_worker_, &QObject::deleteLater);
  connect(this, &CompareView::start_worker, experiment_worker_, &CompareWorker::run, Qt::QueuedConnection);
  connect(experiment_worker_, &CompareWorker::started, this, [this](qint64 id) {
    experiment_status_->setText(tr("Compare experiment #%1: every finished training is stored").arg(id));
    emit workbench_->data_changed();
  });
  connect(experiment_worker_, &CompareWorker::progress, this, [this](int done, int total, const QString& what) {
    if (total <= 0) {  // the oracle's measurement: busy
      experiment_progress_->setRange(0, 0);
      experiment_progress_->setFormat(what);
      return;
    }
    experiment_progress_->setRange(0, total);
    experiment_progress_->setValue(done);
    experiment_progress_->setFormat(tr("%v/%m trainings"));
    experiment_status_->setText(tr("Trained: %1").arg(what));
  });
  connect(experiment_worker_, &CompareWorker::ended, this, &CompareView::experiment_ended);
  experiment_thread_->start();
  pick->setMinimumWidth(230);
  pick->setMaximumWidth(330);

  grids_host_ = new QWidget(this);
  grids_layout_ = new QHBoxLayout(grids_host_);
  grids_layout_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(grids_host_);
  scroll->setWidgetResizable(true);
  loss_ = new CurveChart(tr("Train loss"), tr("cross-entropy (nats)"), this);

  table_ = new QTableWidget(this);
  table_->setColumnCount(num_columns);
  const QStringList headers = {tr("Source"),   tr("Method"),    tr("Budget ρ"), tr("Achieved ρ"), tr("Train (last 50)"),
                               tr("Val loss"), tr("Gap train"), tr("Gap val"),  tr("vs SNIP"),    tr("Pred. ΔL")};
  const QStringList header_tips = {
      tr("Stored plan, run or compare experiment the row comes from"),
      tr("Planning method (compare arms: SNIP at λ, the baselines, uniform precisions, noise-floor controls)"),
      tr("Requested FP4 FLOP fraction ρ"),
      tr("FP4 FLOP fraction the plan achieves (runs: of the plan in effect at the last step)"),
      tr("Mean train loss over the last 50 steps (compare arms: over the experiment's window)"),
      tr("Validation loss (compare arms: after the LR cooldown, forward under the plan; runs: the last one)"),
      tr("Train loss minus uniform BF16's (compare arms: the experiment's BF16 arm; runs: a checked uniform-bf16 run)"),
      tr("Validation loss minus uniform BF16's"),
      tr("Compare arms: whether the train-loss gap differs from SNIP's (λ = 0.1) by more than the noise floor measured "
         "by the perturbed-weights controls. Plans: cells that differ from the reference plan"),
      tr("The planner's predicted loss increase ΔL of a stored plan")};
  table_->setHorizontalHeaderLabels(headers);
  for (int c = 0; c < num_columns; ++c) table_->horizontalHeaderItem(c)->setToolTip(header_tips[c]);
  // Every column within the view's width (at 1024 px "vs SNIP" and "Pred. ΔL" were scrolled off):
  // long cells elide, their tooltips hold the whole text.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table_->horizontalHeader()->setMinimumSectionSize(40);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSortIndicatorShown(true);
  table_->setTextElideMode(Qt::ElideRight);
  table_->setWordWrap(false);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  table_note_ = new QLabel(this);
  table_note_->setWordWrap(true);
  table_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* export_button = new QPushButton(tr("Export CSV…"), this);
  export_button->setToolTip(tr("The table as CSV, in the order shown, numbers at full precision"));
  connect(export_button, &QPushButton::clicked, this, [this] {
    const QString path =
        QFileDialog::getSaveFileName(this, tr("Export table"), QStringLiteral("compare.csv"), tr("CSV (*.csv)"));
    if (path.isEmpty()) return;
    try {
      export_table_csv(path);
      workbench_->report(MessageLevel::info, tr("Wrote %1").arg(path));
    } catch (const std::exception& e) {
      workbench_->report(MessageLevel::error, tr("Exporting the table failed: %1").arg(error_text(e)));
    }
  });
  auto* table_box = new QWidget(this);
  auto* table_layout = new QVBoxLayout(table_box);
  table_layout->setContentsMargins(0, 0, 0, 0);
  auto* table_top = new QHBoxLayout();
  table_top->addWidget(table_note_, 1);
  table_top->addWidget(export_button, 0, Qt::AlignTop);
  table_layout->addLayout(table_top);
  table_layout->addWidget(table_, 1);

  // Grids beside the chart on top, the table across the whole width below (ten columns).
  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(scroll);
  top->addWidget(loss_);
  top->setStretchFactor(0, 3);
  top->setStretchFactor(1, 2);
  top->setSizes({560, 380});
  top->setChildrenCollapsible(false);
  auto* right = new QSplitter(Qt::Vertical, this);
  right->addWidget(top);
  right->addWidget(table_box);
  right->setStretchFactor(0, 1);
  right->setStretchFactor(1, 1);
  right->setSizes({360, 360});
  right->setChildrenCollapsible(false);
  scroll->setMinimumHeight(200);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(pick);
  layout->addWidget(right, 1);

  for (QListWidget* list : {plan_list_, run_list_, compare_list_})
    connect(list, &QListWidget::itemChanged, this, &CompareView::rebuild);
  connect(workbench_, &Workbench::data_changed, this, &CompareView::on_data_changed);
  refresh_lists();
}

CompareView::~CompareView() {
  // A running compare stops after its current step and stays interrupted (resumable).
  experiment_worker_->disconnect(this);  // no "ended" handling while the view goes away
  experiment_worker_->request_stop();
  experiment_thread_->quit();
  experiment_thread_->wait();
}

void CompareView::on_data_changed() {
  // Hidden: refresh when shown. Runs, plans and experiments change every poll during training.
  if (!isVisible()) {
    stale_ = true;
    return;
  }
  refresh_lists();
}

void CompareView::showEvent(QShowEvent* event) {
  QWidget::showEvent(event);
  if (stale_) refresh_lists();
}

std::vector<int64_t> CompareView::checked(QListWidget* list) const {
  // Lists show newest first; the oldest checked item comes first (the reference plan).
  std::vector<int64_t> ids;
  for (int i = list->count() - 1; i >= 0; --i)
    if (list->item(i)->checkState() == Qt::Checked) ids.push_back(list->item(i)->data(Qt::UserRole).toLongLong());
  return ids;
}

void CompareView::refresh_lists() {
  stale_ = false;
  snip::Store* store = workbench_->store();
  const auto plans_checked = checked(plan_list_), runs_checked = checked(run_list_),
             compares_checked = checked(compare_list_);
  const std::set<int64_t> checked_plans(plans_checked.begin(), plans_checked.end()),
      checked_runs(runs_checked.begin(), runs_checked.end()),
      checked_compares(compares_checked.begin(), compares_checked.end());
  const QSignalBlocker b1(plan_list_), b2(run_list_), b3(compare_list_);
  plan_list_->clear();
  run_list_->clear();
  compare_list_->clear();
  run_state_.clear();
  auto add_item = [](QListWidget* list, const QString& text, int64_t id, bool on) {
    auto* item = new QListWidgetItem(text, list);
    item->setData(Qt::UserRole, qlonglong(id));
    item->setToolTip(text);
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
    item->setCheckState(on ? Qt::Checked : Qt::Unchecked);
  };
  if (store) {
    try {
      for (const snip::PlanRecord& p : store->plans())
        add_item(plan_list_,
                 tr("#%1 %2 · ρ≥%3 → %4")
                     .arg(p.id)
                     .arg(QString::fromStdString(p.plan.method))
                     .arg(p.plan.budget, 0, 'f', 2)
                     .arg(p.plan.achieved_fp4_fraction, 0, 'f', 3),
                 p.id, checked_plans.count(p.id));
      for (const snip::RunInfo& r : store->runs()) {
        add_item(run_list_,
                 tr("#%1 %2 (%3)")
                     .arg(r.id)
                     .arg(QString::fromStdString(r.spec.name))
                     .arg(QString::fromLatin1(snip::run_status_name(r.status))),
                 r.id, checked_runs.count(r.id));
        run_state_[r.id] = QStringLiteral("%1:%2").arg(int(r.status)).arg(r.last_step);
      }
      for (const snip::CompareRecord& c : store->list_compares())
        add_item(compare_list_, compare_label(c) + compare_status_suffix(c), c.id, checked_compares.count(c.id));
    } catch (const std::exception& e) {
      workbench_->report(MessageLevel::error,
                         tr("Reading plans, runs and compare experiments failed: %1").arg(error_text(e)));
    }
  }
  // Rebuild only when what the table and chart show may have changed.
  QString from;
  for (int64_t id : checked(plan_list_)) from += QStringLiteral("p%1,").arg(id);
  for (int64_t id : checked(run_list_)) from += QStringLiteral("r%1=%2,").arg(id).arg(run_state_[id]);
  for (int64_t id : checked(compare_list_)) from += QStringLiteral("c%1,").arg(id);
  if (from != built_from_ || !store) rebuild();
}

void CompareView::select(const std::vector<int64_t>& plan_ids, const std::vector<int64_t>& run_ids,
                         const std::vector<int64_t>& compare_ids) {
  if (stale_) refresh_lists();  // the lists must hold what was stored while the view was hidden
  const QSignalBlocker b1(plan_list_), b2(run_list_), b3(compare_list_);
  auto check = [](QListWidget* list, const std::vector<int64_t>& ids) {
    const std::set<int64_t> on(ids.begin(), ids.end());
    for (int i = 0; i < list->count(); ++i)
      list->item(i)->setCheckState(on.count(list->item(i)->data(Qt::UserRole).toLongLong()) ? Qt::Checked
                                                                                            : Qt::Unchecked);
  };
  check(plan_list_, plan_ids);
  check(run_list_, run_ids);
  check(compare_list_, compare_ids);
  rebuild();
}

void CompareView::rebuild() {
  snip::Store* store = workbench_->store();
  for (PlanGrid* g : grids_) delete g;
  grids_.clear();
  delete hint_;
  hint_ = nullptr;
  const bool sorting = table_->isSortingEnabled();
  table_->setSortingEnabled(false);  // rows go in report order; the user's sort is applied after
  table_->setRowCount(0);
  table_note_->clear();
  const std::vector<int64_t> plan_ids = checked(plan_list_), run_ids = checked(run_list_),
                             compare_ids = checked(compare_list_);
  built_from_.clear();
  for (int64_t id : plan_ids) built_from_ += QStringLiteral("p%1,").arg(id);
  for (int64_t id : run_ids) built_from_ += QStringLiteral("r%1=%2,").arg(id).arg(run_state_[id]);
  for (int64_t id : compare_ids) built_from_ += QStringLiteral("c%1,").arg(id);
  std::vector<Row> rows;
  std::vector<Curve> curves;
  QStringList notes;
  try {
    if (!store) throw snip::Error("no database is open (File › Open database…)");
    std::vector<snip::LinearPrecision> reference;
    for (size_t i = 0; i < plan_ids.size(); ++i) {
      const snip::PlanRecord rec = store->plan(plan_ids[i]);
      const int blocks = num_blocks_of(rec.plan);
      auto* grid = new PlanGrid(grids_host_);
      grid->setMinimumWidth(260);
      std::vector<snip::LinearPrecision> per_layer = plan_per_layer(rec.plan, blocks);
      grid->set_plan(blocks, per_layer,
                     tr("#%1 %2 (ρ %3)")
                         .arg(rec.id)
                         .arg(QString::fromStdString(rec.plan.method))
                         .arg(rec.plan.achieved_fp4_fraction, 0, 'f', 3));
      if (i == 0)
        reference = per_layer;
      else if (reference.size() == per_layer.size())
        grid->set_reference(reference);
      grids_layout_->addWidget(grid);
      grids_.push_back(grid);
      Row row;
      row.source = tr("plan #%1").arg(rec.id);
      row.method = QString::fromStdString(rec.plan.method);
      row.budget = rec.plan.budget;
      row.achieved = rec.plan.achieved_fp4_fraction;
      if (rec.solve.predicted_delta_loss) row.predicted = *rec.solve.predicted_delta_loss;
      row.vs_snip = i > 0 ? tr("%1 cells differ").arg(grid->differing_layers().size()) : tr("reference plan");
      rows.push_back(row);
    }
    // Runs: mean train loss over the last 50 steps, last validation loss, gaps to a checked BF16 run.
    struct RunSummary {
      snip::RunInfo info;
      double train = NAN, val = NAN, fp4 = NAN;
    };
    std::vector<RunSummary> runs;
    for (int64_t id : run_ids) {
      RunSummary s;
      s.info = store->run(id);
      const auto metrics = store->metrics(id, std::max<int64_t>(0, s.info.last_step - kLastSteps + 1));
      double sum = 0;
      for (const auto& m : metrics) sum += m.train_loss;
      if (!metrics.empty()) {
        s.train = sum / double(metrics.size());
        s.fp4 = metrics.back().fp4_fraction;
      }
      const auto val = store->curve(id, snip::Metric::val_loss, 4);
      if (!val.empty()) s.val = val.back().value;
      std::vector<QPointF> points;
      for (const auto& p : store->curve(id, snip::Metric::train_loss, kRunCurvePoints))
        points.emplace_back(double(p.step), p.value);
      curves.push_back(
          Curve{QStringLiteral("run #%1 %2").arg(s.info.id).arg(QString::fromStdString(s.info.spec.method)),
                std::move(points), curve_colour(curves.size())});
      runs.push_back(std::move(s));
    }
    const RunSummary* bf16 = nullptr;
    for (const RunSummary& s : runs)
      if (s.info.spec.method == "uniform-bf16") bf16 = &s;
    for (size_t k = 0; k < runs.size(); ++k) {
      const RunSummary& s = runs[k];
      Row row;
      row.colour = curve_colour(k);
      row.source = tr("run #%1 %2").arg(s.info.id).arg(QString::fromStdString(s.info.spec.name));
      row.method = QString::fromStdString(s.info.spec.method);
      row.achieved = s.fp4;
      row.train = s.train;
      row.val = s.val;
      if (bf16) {
        row.gap_train = s.train - bf16->train;
        row.gap_val = s.val - bf16->val;
      }
      row.vs_snip = bf16 ? QString() : tr("check a uniform-bf16 run for gaps");
      row.tooltip =
          tr("%1 · %2 · %3 steps")
              .arg(QString::fromStdString(s.info.spec.name), QString::fromLatin1(snip::run_status_name(s.info.status)))
              .arg(s.info.last_step);
      rows.push_back(row);
    }
    // Compare experiments: every arm, as stored by `snip compare`.
    for (int64_t id : compare_ids) {
      const snip::CompareRecord c = store->compare(id);
      notes << tr("<b>Compare #%1</b>: %2 steps per arm from step %3%4, ρ %5, recipe %6; noise floor train %7, "
                  "val %8 (gaps closer to SNIP's than this are “within noise”).")
                   .arg(c.id)
                   .arg(c.steps)
                   .arg(c.start_step)
                   .arg(c.run_id ? tr(" of run #%1").arg(*c.run_id) : QString())
                   .arg(c.budget, 0, 'f', 2)
                   .arg(QString::fromStdString(c.recipe).toHtmlEscaped())
                   .arg(c.noise_floor_train, 0, 'f', 4)
                   .arg(c.noise_floor_val, 0, 'f', 4);
      std::map<std::string, QColor> colour_of;  // method -> its curve's colour (duplicates share it)
      for (const snip::CompareRowRecord& r : c.rows) {
        Row row;
        row.source = tr("compare #%1").arg(c.id);
        row.method = QString::fromStdString(r.method);
        row.budget = c.budget;
        row.achieved = r.achieved_fraction;
        row.train = r.train_loss_last;
        row.val = r.val_loss_plan;
        row.gap_train = r.gap_train;
        row.gap_val = r.gap_val_plan;
        const bool snip_reference = !r.control && r.lambda && std::abs(*r.lambda - 0.1) < 1e-12;
        row.vs_snip = r.control                    ? tr("control (noise floor)")
                      : snip_reference             ? tr("SNIP reference")
                      : r.method == "uniform-bf16" ? tr("BF16 reference")
                      : r.differs_from_snip        ? tr("differs")
                                                   : tr("within noise");
        if (!r.same_plan_as.empty())
          row.vs_snip += tr(" · same plan as %1").arg(QString::fromStdString(r.same_plan_as));
        row.tooltip = tr("%1: val loss in BF16 %2 (gap %3)%4")
                          .arg(row.method, num(r.val_loss_bf16), signed_num(r.gap_val_bf16),
                               r.plan_id ? tr(" · plan #%1").arg(*r.plan_id) : QString());
        if (!r.same_plan_as.empty() || r.train_curve.empty()) {  // the same curve is drawn once
          if (colour_of.count(r.same_plan_as)) row.colour = colour_of.at(r.same_plan_as);
          rows.push_back(row);
          continue;
        }
        std::vector<QPointF> points;
        points.reserve(r.train_curve.size());
        for (size_t k = 0; k < r.train_curve.size(); ++k)
          points.emplace_back(double(c.start_step + int64_t(k) + 1), r.train_curve[k]);
        row.colour = colour_of[r.method] = curve_colour(curves.size());
        curves.push_back(Curve{tr("#%1 %2").arg(c.id).arg(row.method), std::move(points), row.colour});
        rows.push_back(row);
      }
    }
  } catch (const std::exception& e) {
    if (store) workbench_->report(MessageLevel::error, tr("Comparison failed: %1").arg(error_text(e)));
    notes << error_text(e).toHtmlEscaped();
  }
  table_->setRowCount(int(rows.size()));
  for (int r = 0; r < int(rows.size()); ++r) {
    const Row& row = rows[size_t(r)];
    auto set = [&](int col, QTableWidgetItem* item) {
      item->setToolTip(row.tooltip.isEmpty() ? item->text() : item->text() + QStringLiteral("\n") + row.tooltip);
      table_->setItem(r, col, item);
    };
    set(col_source, new TableItem(row.source));
    auto* method = new TableItem(row.method);
    if (row.colour.isValid()) method->setIcon(swatch(row.colour));
    set(col_method, method);
    set(col_budget, new TableItem(num(row.budget, 3), row.budget));
    set(col_achieved, new TableItem(num(row.achieved, 4), row.achieved));
    set(col_train, new TableItem(num(row.train), row.train));
    set(col_val, new TableItem(num(row.val), row.val));
    set(col_gap_train, new TableItem(signed_num(row.gap_train), row.gap_train));
    set(col_gap_val, new TableItem(signed_num(row.gap_val), row.gap_val));
    auto* vs = new TableItem(row.vs_snip);
    if (row.vs_snip.startsWith(tr("differs"))) vs->setForeground(QColor(200, 60, 40));
    set(col_vs_snip, vs);
    set(col_predicted, new TableItem(std::isfinite(row.predicted) ? QString::number(row.predicted, 'g', 4) : QString(),
                                     row.predicted));
  }
  table_->resizeColumnsToContents();
  table_->setColumnWidth(col_source, std::min(table_->columnWidth(col_source), 140));
  table_->setColumnWidth(col_method, std::min(table_->columnWidth(col_method), 190));
  // Report order until the user sorts (a sort indicator of -1 sorts nothing); a chosen sort stays.
  if (!sorting) table_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  table_->setSortingEnabled(true);
  table_note_->setText(notes.join(QStringLiteral("<br>")));
  table_note_->setVisible(!notes.isEmpty());
  loss_->chart()->legend()->setVisible(curves.size() <= kMaxLegendCurves);
  loss_->set_curves(std::move(curves));
  if (grids_.empty()) {
    hint_ = new PlanGrid(grids_host_);  // draws "No plan"
    grids_layout_->addWidget(hint_);
  }
}

void CompareView::export_table_csv(const QString& path) const {
  auto field = [](QString cell) {
    if (cell.contains(',') || cell.contains('"') || cell.contains('\n'))
      cell = '"' + cell.replace('"', QStringLiteral("\"\"")) + '"';
    return cell.toStdString();
  };
  std::string csv;
  for (int c = 0; c < table_->columnCount(); ++c) {
    if (c) csv += ',';
    csv += field(table_->horizontalHeaderItem(c)->text());
  }
  csv += "\n";
  for (int r = 0; r < table_->rowCount(); ++r) {  // the visual order: sorting moves the rows
    for (int c = 0; c < table_->columnCount(); ++c) {
      const QTableWidgetItem* item = table_->item(r, c);
      QString cell;
      if (item) {
        const QVariant v = item->data(Qt::UserRole);
        cell = v.isValid() ? (std::isfinite(v.toDouble()) ? QString::number(v.toDouble(), 'g', 9) : QString())
                           : item->text();
      }
      if (c) csv += ',';
      csv += field(cell);
    }
    csv += "\n";
  }
  snip::write_file_atomic(path.toStdString(), csv);
}

bool CompareView::experiment_running() const {
  return experiment_in_flight_;
}

bool CompareView::wait_for_experiment(int timeout_ms) {
  QElapsedTimer t;
  t.start();
  while (experiment_running() && t.elapsed() < timeout_ms) QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
  QCoreApplication::processEvents();
  return !experiment_running();
}

void CompareView::cancel_compare_experiment() {
  if (!experiment_running()) return;
  experiment_worker_->request_stop();  // after the current step; the finished trainings stay stored
  experiment_status_->setText(tr("Cancelling after the current step…"));
}

void CompareView::launch_compare_experiment() {
  if (experiment_running()) {
    workbench_->report(MessageLevel::warning, tr("A compare experiment is already running"));
    return;
  }
  snip::Store* store = workbench_->store();
  try {
    if (!store) throw snip::Error("no database is open: use File › Open database…");
    // The newest checkpoint that still exists among the checked runs (newest run first).
    std::optional<snip::Checkpoint> checkpoint;
    QStringList missing;
    for (int i = 0; i < run_list_->count() && !checkpoint; ++i) {
      if (run_list_->item(i)->checkState() != Qt::Checked) continue;
      const int64_t run_id = run_list_->item(i)->data(Qt::UserRole).toLongLong();
      const auto cps = store->checkpoints(run_id);
      for (auto it = cps.rbegin(); it != cps.rend() && !checkpoint; ++it) {
        if (QFileInfo(QString::fromStdString(it->path)).isDir())
          checkpoint = *it;
        else
          missing << tr("run #%1's %2").arg(run_id).arg(QString::fromStdString(it->path));
      }
    }
    if (!checkpoint && !missing.isEmpty())
      throw snip::Error(
          QStringLiteral("the checkpoint directory of %1 no longer exists (deleted or moved); check a run whose "
                         "checkpoint is still on disk, or train or resume the run again to save one")
              .arg(missing.join(QStringLiteral(", ")))
              .toStdString());
    if (!checkpoint)
      throw snip::Error("check a run that has a checkpoint (runs save one when they finish or are stopped)");
    experiment_status_->setText(
        tr("From %1 (step %2)").arg(QString::fromStdString(checkpoint->path)).arg(checkpoint->step));
    start_experiment(QString::fromStdString(checkpoint->path), 0);
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Cannot start the compare experiment: %1").arg(error_text(e)));
  }
}

void CompareView::resume_compare_experiment() {
  if (experiment_running()) {
    workbench_->report(MessageLevel::warning, tr("A compare experiment is already running"));
    return;
  }
  snip::Store* store = workbench_->store();
  try {
    if (!store) throw snip::Error("no database is open: use File › Open database…");
    std::optional<int64_t> id;
    for (int64_t c : checked(compare_list_))
      if (store->compare(c).status != snip::RunStatus::finished) id = c;
    if (!id) throw snip::Error("check a compare experiment that was cancelled or interrupted to resume it");
    experiment_status_->setText(tr("Resuming compare experiment #%1").arg(*id));
    start_experiment(QString(), qint64(*id));
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Cannot resume the compare experiment: %1").arg(error_text(e)));
  }
}

void CompareView::start_experiment(const QString& checkpoint, qint64 resume_id) {
  CompareRequest request;
  request.db_path = workbench_->database_path();
  request.checkpoint = checkpoint;
  request.resume_id = resume_id;
  request.options.budget = experiment_budget_->value();
  request.options.steps = experiment_steps_->value();
  request.options.replicates = experiment_replicates_->value();
  request.options.oracle = experiment_oracle_->isChecked();
  request.options.jobs = snip::default_compare_jobs();
  request.stop_after_trainings = stop_after_trainings_;
  experiment_worker_->prepare();
  experiment_in_flight_ = true;
  experiment_button_->setEnabled(false);
  resume_button_->setEnabled(false);
  cancel_button_->setEnabled(true);
  experiment_progress_->setRange(0, 0);  // busy until the first training ends
  experiment_progress_->setFormat(tr("collecting statistics…"));
  emit start_worker(request);
}

void CompareView::experiment_ended(qint64 compare_id, const QString& status, const QString& message) {
  experiment_in_flight_ = false;
  experiment_button_->setEnabled(true);
  resume_button_->setEnabled(true);
  cancel_button_->setEnabled(false);
  experiment_progress_->setRange(0, 1);
  const bool finished = status == QLatin1String("finished");
  experiment_progress_->setValue(finished ? 1 : 0);
  refresh_lists();
  if (finished) {
    experiment_progress_->setFormat(tr("done"));
    experiment_status_->setText(tr("Stored as compare experiment #%1").arg(compare_id));
    workbench_->report(MessageLevel::info,
                       tr("Compare experiment #%1 finished; its table is shown in the Compare view").arg(compare_id));
    // Show the new experiment with the run it started from.
    std::vector<int64_t> compares = checked(compare_list_), runs = checked(run_list_);
    if (std::find(compares.begin(), compares.end(), int64_t(compare_id)) == compares.end())
      compares.push_back(compare_id);
    select(checked(plan_list_), runs, compares);
  } else if (status == QLatin1String("interrupted")) {
    rebuild();  // a checked compare shows the trainings stored so far
    experiment_progress_->setFormat(tr("cancelled"));
    experiment_status_->setText(message);
    workbench_->report(MessageLevel::warning, tr("Compare experiment cancelled: %1").arg(message));
  } else {
    experiment_progress_->setFormat(tr("failed"));
    experiment_status_->setText(message);
    workbench_->report(
        MessageLevel::error,
        tr("Compare experiment failed: %1").arg(message.isEmpty() ? tr("no message") : message.right(500)));
  }
  emit experiment_finished(finished ? compare_id : 0);
  emit workbench_->data_changed();
}

}  // namespace snip::ui
