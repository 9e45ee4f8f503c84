// CompareView: plans side by side with differences, overlaid loss curves with replicate bands,
// gap error bars, one sortable comparison table of plans, runs and stored compare experiments
// with intervals and verdicts, and compare experiments in the background. rebuild() runs in
// stages: load from the store → compute the report model (compare_report.cpp) → fill the grids
// and the table → fill the charts.
#include "compare_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QDateTime>
#include <QDoubleSpinBox>
#include <QElapsedTimer>
#include <QFileInfo>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QIcon>
#include <QLabel>
#include <QLineEdit>
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

#include "compare_report.h"
#include "curve_chart.h"
#include "file_dialogs.h"
#include "gap_chart.h"
#include "plan_grid.h"
#include "plan_view.h"
#include "snip/atomic_file.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/layers.h"
#include "snip/store_export.h"
#include "workbench.h"

namespace snip::ui {

namespace {

QString num(double v, int prec = 4) {
  return std::isfinite(v) ? QString::number(v, 'f', prec) : QStringLiteral("—");
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

QIcon swatch(const QColor& colour) {
  QPixmap pixmap(12, 12);
  pixmap.fill(colour);
  return QIcon(pixmap);
}
constexpr size_t kMaxLegendCurves = 6;  // more: the table's colour swatches are the legend

// A cell for an interval: "mean ± half-width" (or the mean alone), sorting by the mean.
// The half-width rides along as kHalfWidthRole (NaN without an interval) for the CSV export.
constexpr int kHalfWidthRole = Qt::UserRole + 1;
TableItem* interval_item(const std::optional<snip::Interval>& iv) {
  auto* item = iv ? new TableItem(mean_pm(*iv), iv->mean) : new TableItem(QString(), NAN);
  item->setData(kHalfWidthRole, iv && iv->has_interval() ? iv->ci95 : NAN);
  return item;
}
bool is_interval_column(int col) {
  return col == CompareView::col_gap_train || col == CompareView::col_gap_val || col == CompareView::col_vs_snip;
}

QString compare_label(const snip::CompareRecord& c) {
  return QObject::tr("#%1 ρ %2 %3 · %4 steps from step %5%6 · %7 arms × %8")
      .arg(c.id)
      .arg(c.budget, 0, 'f', 2)
      .arg(QString::fromStdString(c.recipe))
      .arg(c.steps)
      .arg(c.start_step)
      .arg(c.run_id ? QObject::tr(" of run #%1").arg(*c.run_id) : QString())
      .arg(c.row_count ? c.row_count : qint64(c.rows.size()))
      .arg(c.replicates);
}

// A compare still training, cancelled (Resume continues it) or failed says so in the list.
QString compare_status_suffix(const snip::CompareRecord& c) {
  return c.status == snip::RunStatus::finished ? QString()
                                               : QStringLiteral(" · ") + QString::fromLatin1(run_status_name(c.status));
}
}  // namespace

CompareView::CompareView(Workbench* workbench, QWidget* parent) : QWidget(parent), workbench_(workbench) {
  QWidget* pick = make_pick_panel();
  start_experiment_worker();
  pick_ = pick;  // its width follows the view's (resizeEvent)

  grids_host_ = new QWidget(this);
  grids_layout_ = new QHBoxLayout(grids_host_);
  grids_layout_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(grids_host_);
  scroll->setWidgetResizable(true);
  grids_scroll_ = scroll;
  loss_ = new CurveChart(tr("Train loss"), tr("cross-entropy (nats)"), this);
  gap_chart_ = new GapChart(this);

  QWidget* table_box = make_table_box();

  // Grids (while plans are checked), the loss curves and the gap error bars on top; the notes
  // and the table below.
  auto* top = new QSplitter(Qt::Horizontal, this);
  top->addWidget(scroll);
  top->addWidget(loss_);
  top->addWidget(gap_chart_);
  top->setStretchFactor(0, 3);
  top->setStretchFactor(1, 3);
  top->setStretchFactor(2, 2);
  top->setSizes({420, 380, 300});
  top->setChildrenCollapsible(false);
  auto* right = new QSplitter(Qt::Vertical, this);
  right->addWidget(top);
  right->addWidget(table_box);
  right->setStretchFactor(0, 1);
  right->setStretchFactor(1, 1);
  right->setSizes({360, 360});
  right->setChildrenCollapsible(false);
  scroll->setMinimumHeight(200);
  scroll->setMinimumWidth(200);
  // In a splitter, not a box layout: the word-wrapped labels of the pick panel then do not make
  // the page's scroll area size the view to its preferred height for its width (at 1024×680 the
  // table was pushed below the window, one arm in view).
  auto* outer = new QSplitter(Qt::Horizontal, this);
  outer->addWidget(pick);
  outer->addWidget(right);
  outer->setStretchFactor(1, 1);
  outer->setChildrenCollapsible(false);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(outer);

  for (QListWidget* list : {plan_list_, run_list_, compare_list_})
    connect(list, &QListWidget::itemChanged, this, &CompareView::rebuild);
  connect(workbench_, &Workbench::data_changed, this, &CompareView::on_data_changed);
  connect(table_, &QTableWidget::cellClicked, this, [this](int row, int) { show_arm_plan(row); });
  refresh_lists();
}

// The left column: plans, runs and compare experiments to check, and the experiment box.
QWidget* CompareView::make_pick_panel() {
  plan_list_ = new QListWidget(this);
  run_list_ = new QListWidget(this);
  compare_list_ = new QListWidget(this);
  auto* pick = new QWidget(this);
  auto* pick_layout = new QVBoxLayout(pick);
  pick_layout->setContentsMargins(0, 0, 0, 0);
  auto* plans_label = new QLabel(tr("Plans (the others are compared with the first checked):"), pick);
  plans_label->setWordWrap(true);
  pick_layout->addWidget(plans_label);
  plan_filter_ = new QComboBox(pick);
  plan_filter_->setObjectName(QStringLiteral("planFilter"));
  plan_filter_->setToolTip(tr("Show every stored plan, or only the plans of one compare experiment's arms"));
  plan_filter_->addItem(tr("all plans"), qlonglong(-1));
  connect(plan_filter_, &QComboBox::currentIndexChanged, this, [this] { refresh_lists(); });
  pick_layout->addWidget(plan_filter_);
  pick_layout->addWidget(plan_list_, 1);
  pick_layout->addWidget(new QLabel(tr("Runs:"), pick));
  pick_layout->addWidget(run_list_, 1);
  pick_layout->addWidget(new QLabel(tr("Compare experiments:"), pick));
  pick_layout->addWidget(compare_list_, 1);
  pick_layout->addWidget(make_experiment_box(pick));
  return pick;
}

QGroupBox* CompareView::make_experiment_box(QWidget* parent) {
  // Compare experiment (METHOD.md 6): continue the checked run's newest checkpoint under every
  // method's plan, K paired replicates each, on the worker thread through the library, with
  // progress and Cancel (the compare stays interrupted) and Resume.
  auto* experiment = new QGroupBox(tr("New compare experiment"), parent);
  auto* ex_layout = new QVBoxLayout(experiment);
  auto* ex_row = new QHBoxLayout();
  experiment_budget_ = new QDoubleSpinBox(experiment);
  experiment_budget_->setRange(0.0, 1.0);
  experiment_budget_->setSingleStep(0.05);
  experiment_budget_->setValue(snip::defaults::kBudget);
  experiment_budget_->setToolTip(tr("FP4 FLOP fraction ρ of every plan"));
  experiment_steps_ = new QSpinBox(experiment);
  experiment_steps_->setRange(1, 1000000);
  experiment_steps_->setValue(int(snip::defaults::kCompareSteps));
  experiment_steps_->setToolTip(tr("Training steps per plan (each arm continues the same checkpoint)"));
  ex_row->addWidget(new QLabel(tr("ρ"), experiment));
  ex_row->addWidget(experiment_budget_);
  ex_row->addWidget(new QLabel(tr("steps"), experiment));
  ex_row->addWidget(experiment_steps_);
  ex_layout->addLayout(ex_row);
  auto* ex_row2 = new QHBoxLayout();
  experiment_replicates_ = new QSpinBox(experiment);
  experiment_replicates_->setRange(1, 100);
  experiment_replicates_->setValue(snip::defaults::kCompareReplicates);
  experiment_replicates_->setToolTip(
      tr("Trainings per arm (K), paired by replicate: K ≥ 2 gives 95% intervals and verdicts against SNIP"));
  experiment_oracle_ = new QCheckBox(tr("oracle arm"), experiment);
  experiment_oracle_->setToolTip(
      tr("Add an arm planned by the same ILP on the measured per-layer loss damage, and SNIP's regret to it"));
  // Parallel arms, as `snip compare --jobs N`: at least 1 (the CLI's rule), default one per
  // hardware thread (the CLI's default). The upper bound only keeps the box a sensible width.
  experiment_jobs_ = new QSpinBox(experiment);
  experiment_jobs_->setRange(1, std::max(64, 4 * snip::default_compare_jobs()));
  experiment_jobs_->setValue(snip::default_compare_jobs());
  experiment_jobs_->setToolTip(
      tr("Trainings run at once (snip compare --jobs; default one per hardware thread). It changes only the "
         "speed, never the results: every training runs its GEMMs on one thread and owns its model and data, so "
         "any number of jobs gives the bits of one job (test Compare.ParallelJobsGiveTheBitsOfOneJob)"));
  ex_row2->addWidget(new QLabel(tr("replicates"), experiment));
  ex_row2->addWidget(experiment_replicates_);
  ex_row2->addWidget(new QLabel(tr("jobs"), experiment));
  ex_row2->addWidget(experiment_jobs_);
  ex_row2->addWidget(experiment_oracle_);
  ex_layout->addLayout(ex_row2);
  ex_layout->addLayout(make_executor_row(experiment));
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
  return experiment;
}

// The plan filter's choices: all plans, or one compare experiment's (the choice is kept).
void CompareView::fill_plan_filter(const std::vector<snip::CompareRecord>& compares) {
  const QSignalBlocker block(plan_filter_);
  const qlonglong current = plan_filter_->currentData().toLongLong();
  while (plan_filter_->count() > 1) plan_filter_->removeItem(1);
  for (const snip::CompareRecord& c : compares)
    plan_filter_->addItem(tr("plans of compare #%1").arg(c.id), qlonglong(c.id));
  plan_filter_->setCurrentIndex(std::max(0, plan_filter_->findData(current)));
}

// A click on a compare arm's row checks its plan, so its plan grid is shown beside the others.
void CompareView::show_arm_plan(int table_row) {
  const QTableWidgetItem* method = table_->item(table_row, col_method);
  if (!method || !method->data(Qt::UserRole + 1).isValid()) return;
  const int64_t plan = method->data(Qt::UserRole + 1).toLongLong();
  std::vector<int64_t> plans = checked(plan_list_);
  if (std::find(plans.begin(), plans.end(), plan) != plans.end()) return;
  bool listed = false;
  for (int i = 0; i < plan_list_->count(); ++i) listed |= plan_list_->item(i)->data(Qt::UserRole).toLongLong() == plan;
  if (!listed) plan_filter_->setCurrentIndex(0);  // the filter hid it: show every plan
  plans.push_back(plan);
  select(plans, checked(run_list_), checked(compare_list_));
}

// Where the trainings run: this machine (--jobs at once) or Slurm (one job array, through the
// code of `snip compare --executor slurm`), with extra sbatch arguments such as the partition.
QVBoxLayout* CompareView::make_executor_row(QWidget* experiment) {
  auto* row = new QVBoxLayout();
  experiment_executor_ = new QComboBox(experiment);
  experiment_executor_->setObjectName(QStringLiteral("compareExecutor"));
  experiment_executor_->addItem(tr("this machine"), QStringLiteral("local"));
  experiment_executor_->addItem(tr("Slurm"), QStringLiteral("slurm"));
  experiment_executor_->setToolTip(
      tr("Where the trainings run: here, or as one Slurm job array (snip compare --executor slurm; the "
         "checkpoint, the database's folder and snip must be on a filesystem every node sees, docs/CLUSTER.md). "
         "Either way the stored table has the same bits"));
  experiment_partition_ = new QLineEdit(experiment);
  experiment_partition_->setObjectName(QStringLiteral("comparePartition"));
  experiment_partition_->setPlaceholderText(tr("partition"));
  experiment_partition_->setToolTip(tr("The Slurm partition (sbatch --partition); empty: the cluster's default"));
  experiment_partition_->setEnabled(false);
  experiment_sbatch_ = new QLineEdit(experiment);
  experiment_sbatch_->setObjectName(QStringLiteral("compareSbatchArgs"));
  experiment_sbatch_->setPlaceholderText(tr("more sbatch arguments, e.g. --time=2:00:00"));
  experiment_sbatch_->setToolTip(tr("Extra sbatch arguments for the job array (snip compare --sbatch-args)"));
  experiment_sbatch_->setEnabled(false);
  connect(experiment_executor_, &QComboBox::currentIndexChanged, this, [this] {
    const bool slurm = experiment_executor_->currentData().toString() == QLatin1String("slurm");
    experiment_sbatch_->setEnabled(slurm);
    experiment_partition_->setEnabled(slurm);
    experiment_jobs_->setEnabled(!slurm);  // Slurm decides how many tasks run at once
  });
  // Two lines, so the box is no wider than the rows above it: where, then Slurm's arguments.
  auto* where = new QHBoxLayout();
  where->addWidget(new QLabel(tr("run on"), experiment));
  where->addWidget(experiment_executor_);
  where->addWidget(experiment_partition_, 1);
  row->addLayout(where);
  row->addWidget(experiment_sbatch_);
  return row;
}

// The Slurm tasks of a running compare: counts on the bar, each training's state in the tooltip.
void CompareView::show_slurm_status(int queued, int running, int finished, const QStringList& trainings) {
  experiment_status_->setText(
      tr("On Slurm: %1 queued, %2 running, %3 finished since the submission").arg(queued).arg(running).arg(finished));
  experiment_status_->setToolTip(trainings.join(QLatin1Char('\n')));
}

// The experiment's buttons and its worker thread: progress, the stored compare's id, the end.
void CompareView::start_experiment_worker() {
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
  connect(experiment_worker_, &CompareWorker::slurm_status, this, &CompareView::show_slurm_status);
  connect(experiment_worker_, &CompareWorker::slurm_submitted, this, [this](qint64 job, const QString& dir) {
    experiment_status_->setText(tr("Submitted Slurm job array %1; its tasks write into %2").arg(job).arg(dir));
  });
  connect(experiment_worker_, &CompareWorker::ended, this, &CompareView::experiment_ended);
  experiment_thread_->start();
}

// The comparison table with its column tips, the note above it and "Export CSV…".
QWidget* CompareView::make_table_box() {
  table_ = new QTableWidget(this);
  table_->setColumnCount(num_columns);
  const QStringList headers = {tr("Source"),    tr("Method"),    tr("Budget\nρ"), tr("Achieved\nρ"),
                               tr("Train"),     tr("Val\nloss"), tr("Gap train"), tr("Gap val"),
                               tr("Δ vs SNIP"), tr("Verdict"),   tr("Pred.\nΔL")};
  const QStringList header_tips = {
      tr("Stored plan, run or compare experiment the row comes from"),
      tr("Planning method (compare arms: SNIP at λ, the baselines, uniform precisions, the oracle)"),
      tr("Requested FP4 FLOP fraction ρ (uniform arms have none: their precision fixes it)"),
      tr("FP4 FLOP fraction the plan achieves (runs: of the plan in effect at the last step)"),
      tr("Mean train loss over the last steps: compare arms over the experiment's stored window (at most its "
         "length), runs over their last 50 steps; the header names the window when all rows share it"),
      tr("Validation loss (compare arms: after the LR cooldown, forward under the plan; runs: the last one)"),
      tr("Train loss minus uniform BF16's, mean ± 95% Student-t half-width over the replicates paired by "
         "replicate (compare arms: the experiment's BF16 arm; runs: a checked uniform-bf16 run, no interval)"),
      tr("Validation loss minus uniform BF16's, mean ± 95% half-width"),
      tr("Compare arms: train loss minus the SNIP reference's, paired by replicate, mean ± 95% half-width"),
      tr("Compare arms against the SNIP reference: worse (the Δ vs SNIP interval lies above 0), better (below 0) or "
         "indistinguishable (it contains 0; always so with 1 replicate). Plans: how the plan differs from the first "
         "checked plan"),
      tr("The planner's predicted loss increase ΔL of a stored plan")};
  table_->setHorizontalHeaderLabels(headers);
  for (int c = 0; c < num_columns; ++c) table_->horizontalHeaderItem(c)->setToolTip(header_tips[c]);
  // Every column within the table's width (at 1024 px "vs SNIP" and "Pred. ΔL" were scrolled off):
  // fit_columns() sizes them on every rebuild and resize.
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->horizontalHeader()->setMinimumSectionSize(36);
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->horizontalHeader()->setSortIndicatorShown(true);
  table_->horizontalHeader()->setTextElideMode(Qt::ElideRight);
  table_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  table_->setTextElideMode(Qt::ElideRight);
  table_->setWordWrap(false);
  table_->verticalHeader()->setVisible(false);
  table_->verticalHeader()->setDefaultSectionSize(table_->fontMetrics().height() + 6);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setAlternatingRowColors(true);
  table_->viewport()->installEventFilter(this);  // its Resize comes after the table laid it out
  // Four arms' verdicts in view whatever the window's height (at 1024×680 the charts above took
  // all but one row): the splitter shrinks the charts first.
  table_->setMinimumHeight(2 * table_->fontMetrics().lineSpacing() + 12 +
                           4 * table_->verticalHeader()->defaultSectionSize() + 2 * table_->frameWidth());
  table_note_ = new QLabel(this);
  table_note_->setWordWrap(true);
  table_note_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* export_button = new QPushButton(tr("Export CSV…"), this);
  export_button->setToolTip(tr("The table as CSV, in the order shown, numbers at full precision"));
  connect(export_button, &QPushButton::clicked, this, [this] {
    const QString path =
        snip::ui::save_file_name(this, tr("Export table"), QStringLiteral("compare.csv"), tr("CSV (*.csv)"));
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
  return table_box;
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
  compare_state_.clear();
  auto add_item = [](QListWidget* list, const QString& text, int64_t id, bool on) {
    auto* item = new QListWidgetItem(text, list);
    item->setData(Qt::UserRole, qlonglong(id));
    item->setToolTip(text);
    item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
    item->setCheckState(on ? Qt::Checked : Qt::Unchecked);
  };
  if (store) {
    try {
      const std::vector<snip::StatsRoundInfo> rounds = store->stats_rounds();
      const std::vector<snip::CompareRecord> compares = store->list_compares();
      fill_plan_filter(compares);
      std::optional<std::set<int64_t>> shown;  // the filter's compare's arms' plans
      if (const qlonglong only = plan_filter_->currentData().toLongLong(); only > 0) {
        shown.emplace();
        for (const snip::CompareRowRecord& row : store->compare(only).rows)
          if (row.plan_id) shown->insert(*row.plan_id);
      }
      for (const snip::PlanRecord& p : store->plans())
        if (!shown || shown->count(p.id)) add_item(plan_list_, plan_label(p, rounds), p.id, checked_plans.count(p.id));
      for (const snip::RunInfo& r : store->runs()) {
        add_item(run_list_,
                 tr("#%1 %2 (%3)")
                     .arg(r.id)
                     .arg(QString::fromStdString(snip::printable_text(r.spec.name)))
                     .arg(QString::fromLatin1(snip::run_status_name(r.status))),
                 r.id, checked_runs.count(r.id));
        run_state_[r.id] = QStringLiteral("%1:%2").arg(int(r.status)).arg(r.last_step);
      }
      for (const snip::CompareRecord& c : compares) {
        add_item(compare_list_, compare_label(c) + compare_status_suffix(c), c.id, checked_compares.count(c.id));
        // A running compare's table changes with every training it stores: part of what is shown.
        compare_state_[c.id] = QStringLiteral("%1:%2").arg(int(c.status)).arg(c.stored_trainings);
      }
    } catch (const std::exception& e) {
      workbench_->report(MessageLevel::error,
                         tr("Reading plans, runs and compare experiments failed: %1").arg(error_text(e)));
    }
  }
  // Rebuild only when what the table and chart show may have changed.
  if (selection_key() != built_from_ || !store) rebuild();
}

QString CompareView::selection_key() const {
  QString key;
  for (int64_t id : checked(plan_list_)) key += QStringLiteral("p%1,").arg(id);
  for (int64_t id : checked(run_list_)) {
    const auto it = run_state_.find(id);
    key += QStringLiteral("r%1=%2,").arg(id).arg(it == run_state_.end() ? QString() : it->second);
  }
  for (int64_t id : checked(compare_list_)) {
    const auto it = compare_state_.find(id);
    key += QStringLiteral("c%1=%2,").arg(id).arg(it == compare_state_.end() ? QString() : it->second);
  }
  return key;
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
  built_from_ = selection_key();
  CompareModel model;
  snip::Store* store = workbench_->store();
  try {
    if (!store) throw snip::Error("no database is open (File › Open database…)");
    const CompareSources sources =
        load_compare_sources(*store, checked(plan_list_), checked(run_list_), checked(compare_list_));
    model = build_compare_model(sources);
  } catch (const std::exception& e) {
    if (store) workbench_->report(MessageLevel::error, tr("Comparison failed: %1").arg(error_text(e)));
    model = CompareModel{};
    model.notes << error_text(e).toHtmlEscaped();
  }
  fill_grids(model);
  fill_table(model);
  fill_charts(model);
}

QString CompareView::notes_text() const {
  return table_note_->text();
}

void CompareView::fill_grids(const CompareModel& model) {
  for (PlanGrid* g : grids_) delete g;
  grids_.clear();
  delete hint_;
  hint_ = nullptr;
  for (const GridSpec& spec : model.grids) {
    auto* grid = new PlanGrid(grids_host_);
    grid->setMinimumWidth(260);
    grid->set_plan(spec.blocks, spec.per_layer, spec.title);
    if (spec.compare_to_first) grid->set_reference(model.grids.front().per_layer);
    grids_layout_->addWidget(grid);
    grids_.push_back(grid);
  }
  if (grids_.empty()) {
    hint_ = new PlanGrid(grids_host_);  // draws "No plan"
    grids_layout_->addWidget(hint_);
  }
  // Without plans the grids' pane gives its width to the charts (unless nothing is checked at all).
  grids_scroll_->setVisible(!grids_.empty() || (model.curves.empty() && model.gap_bars.empty()));
}

void CompareView::fill_table(const CompareModel& model) {
  const bool sorting = table_->isSortingEnabled();
  table_->setSortingEnabled(false);  // rows go in report order; the user's sort is applied after
  table_->setRowCount(0);
  table_->horizontalHeaderItem(col_train)->setText(model.train_header);
  table_->setRowCount(int(model.rows.size()));
  for (int r = 0; r < int(model.rows.size()); ++r) {
    const ReportRow& row = model.rows[size_t(r)];
    auto set = [&](int col, QTableWidgetItem* item, const QString& tip = QString()) {
      QString text = item->text();
      if (!tip.isEmpty()) text += QStringLiteral("\n") + tip;
      if (!row.tooltip.isEmpty()) text += QStringLiteral("\n") + row.tooltip;
      item->setToolTip(text);
      table_->setItem(r, col, item);
    };
    auto interval_tip = [](const std::optional<snip::Interval>& iv) {
      if (!iv) return QString();
      return iv->has_interval() ? tr("95% Student-t half-width over %1 paired replicates").arg(iv->n)
                                : tr("no interval (1 replicate)");
    };
    set(col_source, new TableItem(row.source));
    auto* method = new TableItem(row.method);
    if (row.plan_id) method->setData(Qt::UserRole + 1, qlonglong(*row.plan_id));
    if (row.colour.isValid()) method->setIcon(swatch(row.colour));
    set(col_method, method);
    set(col_budget, new TableItem(num(row.budget, 3), row.budget),
        std::isfinite(row.budget) ? QString() : tr("no budget (a uniform precision, or not a plan)"));
    set(col_achieved, new TableItem(num(row.achieved, 4), row.achieved));
    set(col_train, new TableItem(num(row.train), row.train),
        row.train_window > 0 ? tr("mean over the last %1 steps").arg(row.train_window) : QString());
    set(col_val, new TableItem(num(row.val), row.val));
    set(col_gap_train, interval_item(row.gap_train), interval_tip(row.gap_train));
    set(col_gap_val, interval_item(row.gap_val), interval_tip(row.gap_val));
    set(col_vs_snip, interval_item(row.diff_vs_snip), interval_tip(row.diff_vs_snip));
    auto* verdict = new TableItem(row.verdict);
    if (row.verdict_colour.isValid()) verdict->setForeground(row.verdict_colour);
    set(col_verdict, verdict);
    set(col_predicted, new TableItem(std::isfinite(row.predicted) ? QString::number(row.predicted, 'g', 4) : QString(),
                                     row.predicted));
  }
  // A column with nothing in it (Pred. ΔL without plans, Δ vs SNIP without compares) or the same
  // source on every row (named in the notes) takes no width.
  std::set<QString> sources;
  for (const ReportRow& row : model.rows) sources.insert(row.source);
  for (int c = 0; c < num_columns; ++c) {
    bool empty = true;
    for (int r = 0; r < table_->rowCount() && empty; ++r) empty = table_->item(r, c)->text().isEmpty();
    table_->setColumnHidden(c, (empty && !model.rows.empty()) || (c == col_source && sources.size() == 1));
  }
  unused_columns_.clear();
  for (int c = 0; c < num_columns; ++c)
    if (table_->isColumnHidden(c)) unused_columns_.insert(c);
  table_->resizeColumnsToContents();
  header_widths_.assign(size_t(num_columns), 0);
  content_widths_.assign(size_t(num_columns), 0);
  const QFontMetrics fm(table_->font());
  for (int c = 0; c < num_columns; ++c) {
    header_widths_[size_t(c)] = table_->columnWidth(c);
    int cells = 36;
    for (int r = 0; r < table_->rowCount(); ++r) {
      const QTableWidgetItem* item = table_->item(r, c);
      cells = std::max(cells, fm.horizontalAdvance(item->text()) + 20 + (item->icon().isNull() ? 0 : 22));
    }
    content_widths_[size_t(c)] = std::min(header_widths_[size_t(c)], cells);
  }
  fit_columns();
  // Report order until the user sorts (a sort indicator of -1 sorts nothing); a chosen sort stays.
  if (!sorting) table_->horizontalHeader()->setSortIndicator(-1, Qt::AscendingOrder);
  table_->setSortingEnabled(true);
  table_note_->setText(model.notes.join(QStringLiteral("<br>")));
  table_note_->setVisible(!model.notes.isEmpty());
}

void CompareView::fit_columns() {
  if (header_widths_.size() != size_t(num_columns)) return;
  const int available = table_->viewport()->width();
  std::vector<int> w = header_widths_;
  for (int c : unused_columns_) w[size_t(c)] = 0;
  auto total = [&] {
    int t = 0;
    for (int x : w) t += x;
    return t;
  };
  // Too wide: first the headers wider than their numbers elide (their tooltips say them), then
  // the text columns give way down to a readable minimum, then every column shrinks in
  // proportion (long cells elide; their tooltips hold the whole text).
  for (int c = 0; c < num_columns && total() > available; ++c)
    if (c != col_method && c != col_verdict && c != col_source && w[size_t(c)] > 0)
      w[size_t(c)] = std::max(content_widths_[size_t(c)], w[size_t(c)] - (total() - available));
  if (w[size_t(col_source)] > 0 && total() > available)
    w[size_t(col_source)] = std::max(70, w[size_t(col_source)] - (total() - available));
  // Still too wide (1024 px with the lists beside the table): the columns the gaps are computed
  // from give their place to the intervals and verdicts; every cell's tooltip keeps the row's
  // losses and budget, and the CSV export keeps every column.
  for (int c : {int(col_budget), int(col_val), int(col_train), int(col_achieved)})
    if (total() > available) w[size_t(c)] = 0;
  const std::pair<int, int> elastic[] = {{col_verdict, 84}, {col_method, 100}};
  for (const auto& [col, min_width] : elastic) {
    const int excess = total() - available;
    if (excess <= 0) break;
    if (w[size_t(col)] > 0) w[size_t(col)] = std::max(std::min(w[size_t(col)], min_width), w[size_t(col)] - excess);
  }
  if (total() > available && total() > 0) {
    const double scale = double(available) / double(total());
    for (int& x : w)
      if (x > 0) x = std::max(36, int(x * scale));
  } else if (total() < available) {
    w[size_t(col_verdict)] += available - total();  // the spare width to the longest texts
  }
  for (int c = 0; c < num_columns; ++c) {
    table_->setColumnHidden(c, w[size_t(c)] == 0);
    if (w[size_t(c)] > 0) table_->setColumnWidth(c, w[size_t(c)]);
  }
}

void CompareView::resizeEvent(QResizeEvent* event) {
  // The lists take a fifth of the width (200–330 px): at 1024 px the table keeps room for its
  // intervals, at 1280 the lists show more of their labels.
  // Never narrower than its own buttons need.
  pick_->setFixedWidth(std::max(pick_->minimumSizeHint().width(), std::clamp(width() / 5, 200, 330)));
  QWidget::resizeEvent(event);
}

bool CompareView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == table_->viewport() && event->type() == QEvent::Resize) fit_columns();
  return QWidget::eventFilter(watched, event);
}

void CompareView::fill_charts(CompareModel& model) {
  // The table's swatches and the gap chart's labels name the arms; a legend of many arms (or of
  // "#id method" names elided to "#1 …") would only take the plot's height.
  loss_->chart()->legend()->setVisible(model.curves.size() <= kMaxLegendCurves && model.gap_bars.empty());
  loss_->set_curves(std::move(model.curves));
  gap_chart_->set_bars(model.gap_bars);
  gap_chart_->setVisible(!model.gap_bars.empty());
}

void CompareView::export_table_csv(const QString& path) const {
  auto field = [](QString cell) {
    if (cell.contains(',') || cell.contains('"') || cell.contains('\n'))
      cell = '"' + cell.replace('"', QStringLiteral("\"\"")) + '"';
    return cell.toStdString();
  };
  std::string csv;
  // An interval column exports its mean and, in the column after it, its 95% half-width.
  for (int c = 0; c < table_->columnCount(); ++c) {
    if (c) csv += ',';
    // Headers wrap onto two lines in the view; one line in the file.
    const QString name = table_->horizontalHeaderItem(c)->text().replace('\n', ' ');
    csv += field(name);
    if (is_interval_column(c)) csv += ',' + field(name + QStringLiteral(" ±95%"));
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
      if (is_interval_column(c)) {
        const double hw = item ? item->data(kHalfWidthRole).toDouble() : NAN;
        csv += ',' + (std::isfinite(hw) ? QString::number(hw, 'g', 9).toStdString() : std::string());
      }
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
    workbench_->report(MessageLevel::error, tr("Cannot start the compare experiment: %1").arg(error_text(e)),
                       MessageSubject::compare);
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
    workbench_->report(MessageLevel::error, tr("Cannot resume the compare experiment: %1").arg(error_text(e)),
                       MessageSubject::compare);
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
  request.options.jobs = experiment_jobs_->value();  // a resume uses it too (never stored: speed only)
  request.on_slurm = experiment_executor_->currentData().toString() == QLatin1String("slurm");
  request.sbatch_args = experiment_sbatch_->text().trimmed();
  if (const QString partition = experiment_partition_->text().trimmed(); !partition.isEmpty())
    request.sbatch_args = QStringLiteral("--partition=%1 %2").arg(partition, request.sbatch_args).trimmed();
  request.stop_after_trainings = stop_after_trainings_;
  experiment_worker_->prepare();
  workbench_->settle(MessageSubject::compare);  // what the last attempt said no longer holds
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
                       tr("Compare experiment #%1 finished; its table is shown in the Compare view").arg(compare_id),
                       MessageSubject::compare);
    // Show the new experiment with the run it started from.
    std::vector<int64_t> compares = checked(compare_list_), runs = checked(run_list_);
    if (std::find(compares.begin(), compares.end(), int64_t(compare_id)) == compares.end())
      compares.push_back(compare_id);
    select(checked(plan_list_), runs, compares);
  } else if (status == QLatin1String("interrupted")) {
    rebuild();  // a checked compare shows the trainings stored so far
    experiment_progress_->setFormat(tr("cancelled"));
    experiment_status_->setText(message);
    workbench_->report(MessageLevel::warning, tr("Compare experiment cancelled: %1").arg(message),
                       MessageSubject::compare);
  } else {
    experiment_progress_->setFormat(tr("failed"));
    experiment_status_->setText(message);
    workbench_->report(
        MessageLevel::error,
        tr("Compare experiment failed: %1").arg(message.isEmpty() ? tr("no message") : message.right(500)),
        MessageSubject::compare);
  }
  emit experiment_finished(finished ? compare_id : 0);
  emit workbench_->data_changed();
}

}  // namespace snip::ui
