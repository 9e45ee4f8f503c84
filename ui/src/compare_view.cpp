// CompareView: plans side by side with differences, overlaid loss curves, a comparison table.
#include "compare_view.h"

#include <QCoreApplication>
#include <QDoubleSpinBox>
#include <QFileInfo>
#include <QGroupBox>
#include <QPlainTextEdit>
#include <QProcess>
#include <QProgressBar>
#include <QPushButton>
#include <QRegularExpression>
#include <QSpinBox>
#include <QStandardPaths>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QListWidget>
#include <QScrollArea>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>
#include <set>

#include "curve_chart.h"
#include "plan_grid.h"
#include "plan_view.h"
#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/layers.h"
#include "workbench.h"

namespace snip::ui {

namespace {
constexpr int kLastSteps = 50;  // METHOD.md 6: mean train loss over the last 50 steps
int num_blocks_of(const snip::Plan& plan) {
  int blocks = 0;
  for (const auto& [name, lp] : plan.layers)
    if (auto id = snip::parse_layer_module_name(name)) blocks = std::max(blocks, id->block + 1);
  return blocks;
}
QString num(double v, int prec = 4) { return std::isfinite(v) ? QString::number(v, 'f', prec) : QStringLiteral("—"); }
}  // namespace

CompareView::CompareView(Workbench* workbench, QWidget* parent) : QWidget(parent), workbench_(workbench) {
  plan_list_ = new QListWidget(this);
  run_list_ = new QListWidget(this);
  auto* pick = new QWidget(this);
  auto* pick_layout = new QVBoxLayout(pick);
  pick_layout->setContentsMargins(0, 0, 0, 0);
  pick_layout->addWidget(new QLabel(tr("Plans (first checked = reference):"), pick));
  pick_layout->addWidget(plan_list_, 1);
  pick_layout->addWidget(new QLabel(tr("Runs:"), pick));
  pick_layout->addWidget(run_list_, 1);
  // Compare experiment (METHOD.md 6): continue the checked run's newest checkpoint under every
  // method's plan, in the background via the `snip compare` tool, with progress.
  auto* experiment = new QGroupBox(tr("Compare experiment (snip compare)"), pick);
  auto* ex_layout = new QVBoxLayout(experiment);
  auto* ex_row = new QHBoxLayout();
  experiment_budget_ = new QDoubleSpinBox(experiment);
  experiment_budget_->setRange(0.0, 1.0);
  experiment_budget_->setSingleStep(0.05);
  experiment_budget_->setValue(0.75);
  experiment_budget_->setToolTip(tr("FP4 FLOP fraction ρ of every plan"));
  experiment_steps_ = new QSpinBox(experiment);
  experiment_steps_->setRange(1, 1000000);
  experiment_steps_->setValue(200);
  experiment_steps_->setToolTip(tr("Training steps per plan"));
  ex_row->addWidget(new QLabel(tr("ρ"), experiment));
  ex_row->addWidget(experiment_budget_);
  ex_row->addWidget(new QLabel(tr("steps"), experiment));
  ex_row->addWidget(experiment_steps_);
  ex_layout->addLayout(ex_row);
  experiment_button_ = new QPushButton(tr("Run on the checked run's checkpoint"), experiment);
  experiment_progress_ = new QProgressBar(experiment);
  experiment_progress_->setRange(0, 1);
  experiment_progress_->setValue(0);
  experiment_output_ = new QPlainTextEdit(experiment);
  experiment_output_->setReadOnly(true);
  experiment_output_->setMaximumHeight(90);
  experiment_output_->setPlaceholderText(tr("The result table appears here"));
  ex_layout->addWidget(experiment_button_);
  ex_layout->addWidget(experiment_progress_);
  ex_layout->addWidget(experiment_output_);
  pick_layout->addWidget(experiment);
  connect(experiment_button_, &QPushButton::clicked, this, &CompareView::launch_compare_experiment);
  pick->setMinimumWidth(260);
  pick->setMaximumWidth(340);

  grids_host_ = new QWidget(this);
  grids_layout_ = new QHBoxLayout(grids_host_);
  grids_layout_->setContentsMargins(0, 0, 0, 0);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(grids_host_);
  scroll->setWidgetResizable(true);
  loss_ = new CurveChart(tr("Train loss of the selected runs"), tr("cross-entropy (nats)"), this);
  table_ = new QTableWidget(this);
  table_->setColumnCount(9);
  table_->setHorizontalHeaderLabels({tr("Kind"), tr("Name"), tr("Method"), tr("Budget ρ"), tr("Achieved ρ"),
                                     tr("Predicted ΔL"), tr("Train loss (last 50)"), tr("Val loss"), tr("Gap to BF16")});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setSectionResizeMode(1, QHeaderView::Interactive);  // names can be long: elide
  table_->setColumnWidth(1, 150);
  table_->setTextElideMode(Qt::ElideRight);
  table_->setWordWrap(false);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->setVisible(false);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);

  auto* bottom = new QSplitter(Qt::Horizontal, this);
  bottom->addWidget(loss_);
  bottom->addWidget(table_);
  bottom->setStretchFactor(0, 1);
  bottom->setStretchFactor(1, 1);
  auto* right = new QSplitter(Qt::Vertical, this);
  right->addWidget(scroll);
  right->addWidget(bottom);
  right->setStretchFactor(0, 1);
  right->setStretchFactor(1, 1);
  right->setSizes({380, 340});
  right->setChildrenCollapsible(false);
  bottom->setSizes({420, 520});
  bottom->setChildrenCollapsible(false);
  scroll->setMinimumHeight(220);
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(pick);
  layout->addWidget(right, 1);

  connect(plan_list_, &QListWidget::itemChanged, this, &CompareView::rebuild);
  connect(run_list_, &QListWidget::itemChanged, this, &CompareView::rebuild);
  connect(workbench_, &Workbench::data_changed, this, &CompareView::refresh_lists);
  refresh_lists();
}

void CompareView::refresh_lists() {
  snip::Store* store = workbench_->store();
  if (!store) return;
  std::set<qlonglong> checked_plans, checked_runs;
  for (int i = 0; i < plan_list_->count(); ++i)
    if (plan_list_->item(i)->checkState() == Qt::Checked) checked_plans.insert(plan_list_->item(i)->data(Qt::UserRole).toLongLong());
  for (int i = 0; i < run_list_->count(); ++i)
    if (run_list_->item(i)->checkState() == Qt::Checked) checked_runs.insert(run_list_->item(i)->data(Qt::UserRole).toLongLong());
  try {
    const QSignalBlocker b1(plan_list_), b2(run_list_);
    plan_list_->clear();
    for (const snip::PlanRecord& p : store->plans()) {
      auto* item = new QListWidgetItem(tr("#%1 %2 · ρ≥%3 → %4").arg(p.id).arg(QString::fromStdString(p.plan.method))
                                           .arg(p.plan.budget, 0, 'f', 2).arg(p.plan.achieved_fp4_fraction, 0, 'f', 3),
                                       plan_list_);
      item->setData(Qt::UserRole, qlonglong(p.id));
      item->setToolTip(item->text());
      item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
      item->setCheckState(checked_plans.count(p.id) ? Qt::Checked : Qt::Unchecked);
    }
    run_list_->clear();
    for (const snip::RunInfo& r : store->runs()) {
      auto* item = new QListWidgetItem(tr("#%1 %2 (%3)").arg(r.id).arg(QString::fromStdString(r.spec.name))
                                           .arg(QString::fromLatin1(snip::run_status_name(r.status))),
                                       run_list_);
      item->setData(Qt::UserRole, qlonglong(r.id));
      item->setToolTip(item->text());
      item->setFlags(item->flags() | Qt::ItemIsUserCheckable);
      item->setCheckState(checked_runs.count(r.id) ? Qt::Checked : Qt::Unchecked);
    }
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Reading plans and runs failed: %1").arg(error_text(e)));
  }
  rebuild();
}

void CompareView::select(const std::vector<int64_t>& plan_ids, const std::vector<int64_t>& run_ids) {
  const QSignalBlocker b1(plan_list_), b2(run_list_);
  const std::set<int64_t> plans(plan_ids.begin(), plan_ids.end()), runs(run_ids.begin(), run_ids.end());
  for (int i = 0; i < plan_list_->count(); ++i)
    plan_list_->item(i)->setCheckState(plans.count(plan_list_->item(i)->data(Qt::UserRole).toLongLong()) ? Qt::Checked : Qt::Unchecked);
  for (int i = 0; i < run_list_->count(); ++i)
    run_list_->item(i)->setCheckState(runs.count(run_list_->item(i)->data(Qt::UserRole).toLongLong()) ? Qt::Checked : Qt::Unchecked);
  rebuild();
}

void CompareView::rebuild() {
  snip::Store* store = workbench_->store();
  for (PlanGrid* g : grids_) delete g;
  grids_.clear();
  delete hint_;
  hint_ = nullptr;
  table_->setRowCount(0);
  if (!store) return;
  std::vector<int64_t> plan_ids, run_ids;
  // Plans in list order, reversed so the oldest checked plan is the reference.
  for (int i = plan_list_->count() - 1; i >= 0; --i)
    if (plan_list_->item(i)->checkState() == Qt::Checked) plan_ids.push_back(plan_list_->item(i)->data(Qt::UserRole).toLongLong());
  for (int i = run_list_->count() - 1; i >= 0; --i)
    if (run_list_->item(i)->checkState() == Qt::Checked) run_ids.push_back(run_list_->item(i)->data(Qt::UserRole).toLongLong());
  auto add_row = [this](const QStringList& cells) {
    const int row = table_->rowCount();
    table_->insertRow(row);
    for (int c = 0; c < cells.size(); ++c) {
      auto* item = new QTableWidgetItem(cells[c]);
      item->setToolTip(cells[c]);
      table_->setItem(row, c, item);
    }
  };
  try {
    std::vector<snip::LinearPrecision> reference;
    for (size_t i = 0; i < plan_ids.size(); ++i) {
      const snip::PlanRecord rec = store->plan(plan_ids[i]);
      const int blocks = num_blocks_of(rec.plan);
      auto* grid = new PlanGrid(grids_host_);
      grid->setMinimumWidth(260);
      std::vector<snip::LinearPrecision> per_layer = plan_per_layer(rec.plan, blocks);
      grid->set_plan(blocks, per_layer, tr("#%1 %2 (ρ %3)").arg(rec.id).arg(QString::fromStdString(rec.plan.method))
                                            .arg(rec.plan.achieved_fp4_fraction, 0, 'f', 3));
      if (i == 0)
        reference = per_layer;
      else if (reference.size() == per_layer.size())
        grid->set_reference(reference);
      grids_layout_->addWidget(grid);
      grids_.push_back(grid);
      add_row({tr("plan"), QStringLiteral("#%1").arg(rec.id), QString::fromStdString(rec.plan.method),
               num(rec.plan.budget, 3), num(rec.plan.achieved_fp4_fraction, 4),
               rec.solve.predicted_delta_loss ? QString::number(*rec.solve.predicted_delta_loss, 'g', 4) : QString(),
               QString(), QString(), i > 0 ? tr("%1 cells differ").arg(grid->differing_layers().size()) : tr("reference")});
    }
    // Runs: mean train loss over the last 50 steps, last validation loss, gap to a BF16 run if one is selected.
    struct RunSummary {
      snip::RunInfo info;
      double train = NAN, val = NAN, fp4 = NAN;
      std::vector<QPointF> curve;
    };
    std::vector<RunSummary> runs;
    for (int64_t id : run_ids) {
      RunSummary s;
      s.info = store->run(id);
      const auto rows = store->metrics(id, std::max<int64_t>(0, s.info.last_step - kLastSteps + 1));
      double sum = 0;
      for (const auto& m : rows) sum += m.train_loss;
      if (!rows.empty()) {
        s.train = sum / double(rows.size());
        s.fp4 = rows.back().fp4_fraction;
      }
      const auto val = store->curve(id, snip::Metric::val_loss, 4);
      if (!val.empty()) s.val = val.back().value;
      for (const auto& p : store->curve(id, snip::Metric::train_loss, 2000)) s.curve.emplace_back(double(p.step), p.value);
      runs.push_back(std::move(s));
    }
    double bf16_train = NAN;
    for (const RunSummary& s : runs)
      if (s.info.spec.method == "uniform-bf16") bf16_train = s.train;
    std::vector<Curve> curves;
    for (const RunSummary& s : runs) {
      add_row({tr("run"), QStringLiteral("#%1 %2").arg(s.info.id).arg(QString::fromStdString(s.info.spec.name)),
               QString::fromStdString(s.info.spec.method), QString(), num(s.fp4, 4), QString(), num(s.train), num(s.val),
               std::isfinite(bf16_train) ? QString::asprintf("%+.4f", s.train - bf16_train) : tr("no BF16 run selected")});
      curves.push_back(Curve{QStringLiteral("#%1 %2").arg(s.info.id).arg(QString::fromStdString(s.info.spec.method)), s.curve, {}});
    }
    loss_->set_curves(std::move(curves));
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Comparison failed: %1").arg(error_text(e)));
  }
  if (grids_.empty()) {
    hint_ = new PlanGrid(grids_host_);  // draws "No plan"
    grids_layout_->addWidget(hint_);
  }
}

void CompareView::export_table_csv(const QString& path) const {
  std::string csv;
  for (int c = 0; c < table_->columnCount(); ++c) {
    if (c) csv += ',';
    csv += table_->horizontalHeaderItem(c)->text().toStdString();
  }
  csv += "\n";
  for (int r = 0; r < table_->rowCount(); ++r) {
    for (int c = 0; c < table_->columnCount(); ++c) {
      QString cell = table_->item(r, c) ? table_->item(r, c)->text() : QString();
      if (cell.contains(',') || cell.contains('"')) cell = '"' + cell.replace('"', QStringLiteral("\"\"")) + '"';
      if (c) csv += ',';
      csv += cell.toStdString();
    }
    csv += "\n";
  }
  snip::write_file_atomic(path.toStdString(), csv);
}

QString CompareView::snip_executable() {
  const QString beside = QCoreApplication::applicationDirPath() + QStringLiteral("/snip");
  if (QFileInfo(beside).isExecutable()) return beside;
  const QString build_tree = QCoreApplication::applicationDirPath() + QStringLiteral("/../app/snip");
  if (QFileInfo(build_tree).isExecutable()) return QFileInfo(build_tree).canonicalFilePath();
  return QStandardPaths::findExecutable(QStringLiteral("snip"));
}

bool CompareView::experiment_running() const { return experiment_ && experiment_->state() != QProcess::NotRunning; }

void CompareView::launch_compare_experiment() {
  if (experiment_running()) {
    workbench_->report(MessageLevel::warning, tr("A compare experiment is already running"));
    return;
  }
  snip::Store* store = workbench_->store();
  try {
    if (!store) throw snip::Error("no database is open");
    std::optional<snip::Checkpoint> checkpoint;
    for (int i = 0; i < run_list_->count() && !checkpoint; ++i)
      if (run_list_->item(i)->checkState() == Qt::Checked) {
        const auto cps = store->checkpoints(run_list_->item(i)->data(Qt::UserRole).toLongLong());
        if (!cps.empty()) checkpoint = cps.back();
      }
    if (!checkpoint) throw snip::Error("check a run that has a checkpoint (runs save one when they finish or are stopped)");
    const QString snip = snip_executable();
    if (snip.isEmpty()) throw snip::Error("the `snip` command-line tool was not found beside snip-workbench or on PATH");
    delete experiment_;
    experiment_ = new QProcess(this);
    experiment_output_->clear();
    experiment_progress_->setRange(0, 0);  // busy until the first progress line
    connect(experiment_, &QProcess::readyReadStandardError, this, [this] {
      // Progress lines: "\r[done/total] method"
      static const QRegularExpression re(QStringLiteral("\\[(\\d+)/(\\d+)\\]\\s*([^\\r\\n]*)"));
      const QString text = QString::fromUtf8(experiment_->readAllStandardError());
      QRegularExpressionMatchIterator it = re.globalMatch(text);
      while (it.hasNext()) {
        const QRegularExpressionMatch m = it.next();
        experiment_progress_->setRange(0, m.captured(2).toInt());
        experiment_progress_->setValue(m.captured(1).toInt());
        experiment_progress_->setFormat(m.captured(3).trimmed() + QStringLiteral(" %v/%m"));
      }
      for (const QString& line : text.split(QRegularExpression(QStringLiteral("[\\r\\n]")), Qt::SkipEmptyParts))
        if (!re.match(line).hasMatch() && !line.trimmed().isEmpty()) experiment_output_->appendPlainText(line.trimmed());
    });
    connect(experiment_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
      experiment_output_->appendPlainText(QString::fromUtf8(experiment_->readAllStandardOutput()));
      experiment_progress_->setRange(0, 1);
      experiment_progress_->setValue(code == 0 && status == QProcess::NormalExit ? 1 : 0);
      if (code == 0 && status == QProcess::NormalExit)
        workbench_->report(MessageLevel::info, tr("Compare experiment finished; the table is in the Compare view"));
      else
        workbench_->report(MessageLevel::error, tr("Compare experiment failed (exit %1): %2")
                                                    .arg(code)
                                                    .arg(experiment_output_->toPlainText().right(400)));
      experiment_button_->setEnabled(true);
      emit workbench_->data_changed();
    });
    experiment_button_->setEnabled(false);
    experiment_->start(snip, {QStringLiteral("compare"), QStringLiteral("--checkpoint"), QString::fromStdString(checkpoint->path),
                              QStringLiteral("--budget"), QString::number(experiment_budget_->value()),
                              QStringLiteral("--steps"), QString::number(experiment_steps_->value())});
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Cannot start the compare experiment: %1").arg(error_text(e)));
  }
}

}  // namespace snip::ui
