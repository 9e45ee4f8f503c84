// PlanView: interactive re-solving of the SNIP ILP and the baselines, with tradeoff curves.
#include "plan_view.h"

#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSlider>
#include <QSpinBox>
#include <QSplitter>
#include <QVBoxLayout>
#include <QtCharts/QChart>
#include <QtCharts/QLegend>
#include <QtConcurrent/QtConcurrent>
#include <cmath>

#include "curve_chart.h"
#include "plan_grid.h"
#include "snip/atomic_file.h"
#include "snip/defaults.h"
#include "snip/error.h"
#include "snip/grad_noise.h"
#include "snip/layers.h"
#include "workbench.h"

namespace snip::ui {

namespace {
QString fmt(double v, int digits = 4) {
  return std::isfinite(v) ? QString::number(v, 'g', digits) : QStringLiteral("—");
}
}  // namespace

PlanView::PlanView(Workbench* workbench, QWidget* parent) : QWidget(parent), workbench_(workbench) {
  QGroupBox* controls = make_request_box();
  QSplitter* splitter = make_grid_and_chart();
  auto* layout = new QHBoxLayout(this);
  layout->addWidget(controls);
  layout->addWidget(splitter, 1);
  connect_signals();
  rebuild_input();
}

// The "Plan request" box: the source, budget, method, λ, options, pins and the result.
QGroupBox* PlanView::make_request_box() {
  auto* controls = new QGroupBox(tr("Plan request"), this);
  auto* form = new QFormLayout(controls);
  source_label_ = new QLabel(controls);
  source_label_->setWordWrap(true);
  form->addRow(tr("Costs from:"), source_label_);

  budget_slider_ = new QSlider(Qt::Horizontal, controls);
  budget_slider_->setRange(0, 1000);  // 0.1 % steps
  budget_slider_->setValue(int(1000 * snip::defaults::kBudget));
  budget_slider_->setToolTip(tr("Efficiency target ρ: the fraction of the linear-layer FLOPs that must run in FP4"));
  budget_spin_ = new QDoubleSpinBox(controls);
  budget_spin_->setRange(0.0, 100.0);
  budget_spin_->setDecimals(1);
  budget_spin_->setSuffix(QStringLiteral(" %"));
  budget_spin_->setValue(100.0 * snip::defaults::kBudget);
  auto* budget_row = new QHBoxLayout();
  budget_row->addWidget(budget_slider_, 1);
  budget_row->addWidget(budget_spin_);
  form->addRow(tr("FP4 FLOPs ≥"), budget_row);

  method_combo_ = new QComboBox(controls);
  for (snip::Method m : snip::kAllMethods) method_combo_->addItem(QString::fromLatin1(snip::method_name(m)));
  method_combo_->setToolTip(
      tr("snip: ILP on Q = ΔL̂ + λ·ΔŴ; min-err/min-rel-err: ILP on quantization error; "
         "e-layer-type/e-layer-id/random/uniform: rule-based baselines (METHOD.md 8)"));
  form->addRow(tr("Method:"), method_combo_);

  lambda_spin_ = new QDoubleSpinBox(controls);
  lambda_spin_->setRange(0.0, 10.0);
  lambda_spin_->setSingleStep(0.05);
  lambda_spin_->setDecimals(2);
  lambda_spin_->setValue(snip::defaults::kLambda);
  lambda_spin_->setToolTip(
      tr("λ weighs the backward weight divergence ΔŴ against the forward loss divergence ΔL̂. "
         "λ = 1 is not neutral: it let ΔW push forward-critical layers into FP4 in the prototype."));
  form->addRow(tr("λ (ΔW weight):"), lambda_spin_);

  ties_check_ = new QCheckBox(tr("Tie q/k/v and gate/up (fused kernels)"), controls);
  per_role_check_ = new QCheckBox(tr("Per GEMM role (fprop vs dgrad+wgrad)"), controls);
  bf16_check_ = new QCheckBox(tr("Allow BF16 (≤ 10 % of FLOPs)"), controls);
  form->addRow(ties_check_);
  form->addRow(per_role_check_);
  form->addRow(bf16_check_);
  add_pipeline_rows(controls, form);
  seed_spin_ = new QSpinBox(controls);
  seed_spin_->setRange(1, 1000000);
  form->addRow(tr("Seed (random):"), seed_spin_);
  clear_pins_button_ = new QPushButton(tr("Clear pins"), controls);
  clear_pins_button_->setToolTip(tr("Click a cell of the plan grid to pin that layer: FP8 → FP4 → unpinned"));
  form->addRow(clear_pins_button_);

  result_label_ = new QLabel(controls);
  result_label_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  result_label_->setWordWrap(true);
  notes_label_ = new QLabel(controls);
  notes_label_->setWordWrap(true);
  validation_label_ = new QLabel(controls);
  validation_label_->setWordWrap(true);
  form->addRow(result_label_);
  form->addRow(notes_label_);
  form->addRow(validation_label_);
  controls->setMinimumWidth(290);
  controls->setMaximumWidth(420);
  return controls;
}

// Pipeline stages with a budget each, or Megatron's pipeline layout (a plan the same on every
// chunk, snip solve --pipeline-parallel P --virtual-stages V): the two exclude each other.
void PlanView::add_pipeline_rows(QGroupBox* controls, QFormLayout* form) {
  stages_spin_ = new QSpinBox(controls);
  stages_spin_->setRange(1, 64);
  stages_spin_->setToolTip(tr("Pipeline stages: each stage of contiguous blocks meets the budget on its own FLOPs"));
  form->addRow(tr("Pipeline stages:"), stages_spin_);
  // Megatron-LM numbers every pipeline chunk's blocks from 0: a plan it can express is the same on
  // every chunk (snip solve --pipeline-parallel P --virtual-stages V).
  pipeline_spin_ = new QSpinBox(controls);
  pipeline_spin_->setRange(1, 64);
  pipeline_spin_->setToolTip(
      tr("Megatron-LM's --pipeline-model-parallel-size: every stage numbers its blocks from 0, so the plan is "
         "solved the same on every stage, and its Megatron export is written for that layout"));
  virtual_spin_ = new QSpinBox(controls);
  virtual_spin_->setRange(1, 64);
  virtual_spin_->setPrefix(QStringLiteral("× "));
  virtual_spin_->setToolTip(tr("Megatron-LM's --num-virtual-stages-per-pipeline-rank (model chunks per stage)"));
  auto* pipeline_row = new QHBoxLayout();
  pipeline_row->addWidget(pipeline_spin_, 1);
  pipeline_row->addWidget(virtual_spin_, 1);
  form->addRow(tr("Megatron pipeline:"), pipeline_row);
}

// The plan grid beside the budget-vs-quality chart.
QSplitter* PlanView::make_grid_and_chart() {
  grid_ = new PlanGrid(this);
  tradeoff_ = new CurveChart(tr("Budget vs predicted quality"), tr("predicted Σ Q (SNIP costs)"), this);
  tradeoff_->set_x_label(tr("FP4 FLOP fraction ρ"));
  tradeoff_->set_smoothing(0.0);
  tradeoff_->set_smoothing_visible(false);

  auto* splitter = new QSplitter(Qt::Horizontal, this);
  splitter->addWidget(grid_);
  splitter->addWidget(tradeoff_);
  splitter->setStretchFactor(0, 1);
  splitter->setStretchFactor(1, 1);
  splitter->setSizes({480, 480});  // half and half; the grid's size hint alone would starve the chart
  splitter->setChildrenCollapsible(false);
  tradeoff_->setMinimumWidth(320);
  // Six methods in one row below the plot were elided at 1024 px ("e-lay…" twice): one per line
  // beside the plot, names whole, also in exported images.
  QFont legend_font = tradeoff_->chart()->legend()->font();
  legend_font.setPointSizeF(legend_font.pointSizeF() * 0.85);
  tradeoff_->chart()->legend()->setFont(legend_font);
  tradeoff_->chart()->legend()->setAlignment(Qt::AlignRight);
  return splitter;
}

void PlanView::connect_signals() {
  connect(budget_slider_, &QSlider::valueChanged, this, [this](int v) {
    const QSignalBlocker block(budget_spin_);
    budget_spin_->setValue(v / 10.0);
    resolve();
  });
  connect(budget_spin_, &QDoubleSpinBox::valueChanged, this, [this](double v) {
    const int slider = int(std::lround(v * 10.0));
    if (budget_slider_->value() != slider) {
      const QSignalBlocker block(budget_slider_);
      budget_slider_->setValue(slider);
    }
    resolve();
  });
  connect(method_combo_, &QComboBox::currentIndexChanged, this, [this] { resolve(); });
  connect(lambda_spin_, &QDoubleSpinBox::valueChanged, this, [this] { rebuild_input(); });
  for (QCheckBox* c : {ties_check_, per_role_check_, bf16_check_})
    connect(c, &QCheckBox::toggled, this, [this] {
      resolve();
      start_sweep();
    });
  // A pipeline layout gives every stage the same plan (each stage meets the budget when the whole
  // does), so per-stage budgets and the layout exclude each other; virtual stages need P ≥ 2.
  auto sync_pipeline = [this] {
    const bool layout = pipeline_spin_->value() > 1;
    stages_spin_->setEnabled(!layout);
    pipeline_spin_->setEnabled(stages_spin_->value() == 1);
    virtual_spin_->setEnabled(layout);
    if (!layout && virtual_spin_->value() != 1) {
      const QSignalBlocker block(virtual_spin_);
      virtual_spin_->setValue(1);
    }
  };
  sync_pipeline();
  for (QSpinBox* spin : {stages_spin_, pipeline_spin_, virtual_spin_})
    connect(spin, &QSpinBox::valueChanged, this, [this, sync_pipeline] {
      sync_pipeline();
      resolve();
      start_sweep();
    });
  connect(seed_spin_, &QSpinBox::valueChanged, this, [this] { resolve(); });
  connect(clear_pins_button_, &QPushButton::clicked, this, [this] {
    pins_.clear();
    resolve();
    start_sweep();
  });
  connect(grid_, &PlanGrid::layer_clicked, this, &PlanView::cycle_pin);
  connect(&solve_watcher_, &QFutureWatcher<SolveOutcome>::finished, this, &PlanView::solve_finished);
  connect(&sweep_watcher_, &QFutureWatcher<std::vector<snip::SweepPoint>>::finished, this, &PlanView::sweep_finished);
  connect(workbench_, &Workbench::planning_source_changed, this, &PlanView::rebuild_input);
  // Pins belong to the database's model; another database starts unpinned.
  connect(workbench_, &Workbench::database_changed, this, [this] {
    if (pins_.empty()) return;
    pins_.clear();
    resolve();
    start_sweep();
  });
  connect(workbench_, &Workbench::data_changed, this, &PlanView::refresh_validation);
}

snip::PlanRequest PlanView::request() const {
  snip::PlanRequest r;
  r.budget = budget_spin_->value() / 100.0;
  r.ties = ties_check_->isChecked();
  r.per_role = per_role_check_->isChecked();
  r.allow_bf16 = bf16_check_->isChecked();
  r.stages = stages_spin_->value();
  r.pipeline = {pipeline_spin_->value(), virtual_spin_->value()};
  r.seed = uint64_t(seed_spin_->value());
  r.pins = pins_;
  return r;
}

void PlanView::rebuild_input() {
  const PlanningSource& src = workbench_->planning_source();
  source_label_->setText(src.empty() ? tr("<i>nothing yet — select a statistics round or import costs</i>")
                                     : src.label);
  input_.reset();
  num_blocks_ = src.num_blocks();
  if (!src.empty()) {
    try {
      snip::EstimatorOptions options;
      options.lambda = lambda_spin_->value();
      input_ = std::make_shared<const snip::PlannerInput>(workbench_->planner_input(options));
    } catch (const std::exception& e) {
      workbench_->report(MessageLevel::error, tr("Cannot plan from %1: %2").arg(src.label, error_text(e)));
    }
  }
  // λ only matters to SNIP's costs; the combo lists every method, the solve says which lack costs.
  lambda_spin_->setEnabled(!src.round ? false : true);
  find_noisy_layers();
  resolve();
  start_sweep();
  refresh_validation();
}

void PlanView::find_noisy_layers() {
  noisy_layers_.clear();
  std::map<int, QString> flags;
  const PlanningSource& src = workbench_->planning_source();
  if (src.round) {
    for (size_t i : snip::layers_below_noise_threshold(*src.round)) {
      const snip::LayerStats& layer = src.round->layers[i];
      const auto id = snip::parse_layer_module_name(layer.name);
      const auto ratio = snip::grad_noise_ratio(layer, snip::Precision::fp4);
      if (!id || !ratio) continue;
      noisy_layers_[id->index()] = *ratio;
      flags[id->index()] = tr("FP4 gradient noise ratio %1 < √3 at step %2: FP4's noise rivals this layer's gradient")
                               .arg(*ratio, 0, 'f', 2)
                               .arg(src.round->step);
    }
  }
  grid_->set_flags(std::move(flags), tr("FP4 noise ratio < √3"));
}

void PlanView::resolve() {
  request_clock_.start();
  request_clock_valid_ = true;
  ++generation_;
  if (solve_running_) {
    solve_dirty_ = true;  // the running solve's result is stale; solve again when it returns
    return;
  }
  start_solve();
}

QString PlanView::notes_text() const {
  return notes_label_->text();
}

void PlanView::start_solve() {
  solve_dirty_ = false;
  if (!input_) {  // nothing of an earlier source stays: its plan, its notes (a new, empty database)
    current_.reset();
    grid_->set_plan(0, {});
    result_label_->setText(tr("No plan: no costs to plan from."));
    notes_label_->clear();
    return;
  }
  const snip::Method method = snip::kAllMethods[size_t(std::max(0, method_combo_->currentIndex()))];
  const snip::PlanRequest req = request();
  std::shared_ptr<const snip::PlannerInput> input = input_;
  const int generation = generation_;
  solve_running_ = true;
  solve_watcher_.setFuture(QtConcurrent::run([input, method, req, generation] {
    SolveOutcome out;
    out.generation = generation;
    try {
      out.result = snip::make_plan(*input, method, req);
    } catch (const std::exception& e) {
      out.error = error_text(e);
    }
    return out;
  }));
}

void PlanView::solve_finished() {
  solve_running_ = false;
  const SolveOutcome out = solve_watcher_.result();
  if (solve_dirty_) {  // a newer request arrived meanwhile: show nothing stale, solve it now
    start_solve();
    return;
  }
  if (out.result) {
    last_error_.clear();
    show_result(*out.result);
  } else {
    last_error_ = out.error;
    result_label_->setText(QStringLiteral("<span style='color:#d03030'><b>%1</b></span> %2")
                               .arg(tr("No plan:"), out.error.toHtmlEscaped()));
    notes_label_->clear();
    emit solve_failed(out.error);
  }
}

void PlanView::show_result(const snip::PlanResult& r) {
  current_ = r;
  std::map<int, snip::Precision> pin_cells;
  for (const auto& [name, p] : pins_)
    if (auto id = snip::parse_layer_module_name(name)) pin_cells[id->index()] = p;
  grid_->set_pins(std::move(pin_cells));
  grid_->set_plan(num_blocks_, snip::resolve_plan_lenient(r.plan, num_blocks_),
                  tr("%1 plan at ρ ≥ %2 %").arg(QString::fromStdString(r.method)).arg(r.budget * 100.0, 0, 'f', 1));
  grid_->repaint();  // drawn now: the latency below includes the redraw
  result_label_->setText(
      tr("<b>%1</b> · achieved FP4 fraction <b>%2 %</b> (target %3 %)<br>objective %4 · predicted ΣQ %5<br>"
         "predicted ΔL %6 · ΔW %7 · gap %8 · %9 ms")
          .arg(QString::fromStdString(r.status))
          .arg(r.achieved_fraction * 100.0, 0, 'f', 2)
          .arg(r.budget * 100.0, 0, 'f', 1)
          .arg(fmt(r.objective), fmt(r.predicted_q), fmt(r.predicted_dl), fmt(r.predicted_dw), fmt(r.mip_gap, 2))
          .arg(r.solve_ms, 0, 'f', 1));
  QStringList notes;
  for (const std::string& n : r.notes) notes << QString::fromStdString(n).toHtmlEscaped();
  if (!r.meets_budget()) notes << tr("<b>does not meet the budget</b>");
  if (!noisy_layers_.empty()) {
    const std::vector<snip::LinearPrecision> layers = snip::resolve_plan_lenient(r.plan, num_blocks_);
    int in_fp4 = 0;
    for (const auto& [l, ratio] : noisy_layers_)
      if (l < int(layers.size()) &&
          (layers[size_t(l)].fprop == snip::Precision::fp4 || layers[size_t(l)].dgrad == snip::Precision::fp4 ||
           layers[size_t(l)].wgrad == snip::Precision::fp4))
        ++in_fp4;
    notes << tr("⚠ %n layer(s) below √3 in FP4 (METHOD.md 10); this plan runs %1 of them in FP4 "
                "(pin them to FP8, or train adaptively with the Run view's noise floor at 1.732)",
                "", int(noisy_layers_.size()))
                 .arg(in_fp4);
  }
  notes_label_->setText(notes.join(QStringLiteral("<br>")));
  tradeoff_->set_marker_x(r.budget);
  if (request_clock_valid_) last_latency_ms_ = request_clock_.nsecsElapsed() / 1e6;
  request_clock_valid_ = false;
  emit plan_shown();
}

void PlanView::set_pin(const std::string& layer, std::optional<snip::Precision> p) {
  if (p)
    pins_[layer] = *p;
  else
    pins_.erase(layer);
  resolve();
  start_sweep();
}

void PlanView::cycle_pin(int layer) {
  const std::string name = snip::layer_module_name(layer / snip::kLayersPerBlock,
                                                   snip::kAllLayerTypes[size_t(layer % snip::kLayersPerBlock)]);
  auto it = pins_.find(name);
  std::optional<snip::Precision> next = snip::Precision::fp8;
  if (it != pins_.end()) next = it->second == snip::Precision::fp8 ? std::optional(snip::Precision::fp4) : std::nullopt;
  set_pin(name, next);
}

void PlanView::start_sweep() {
  if (!input_) {
    tradeoff_->set_curves({});
    return;
  }
  if (sweep_watcher_.isRunning()) {
    sweep_dirty_ = true;
    return;
  }
  sweep_dirty_ = false;
  snip::SweepOptions options;
  for (int i = 0; i <= 20; ++i) options.budgets.push_back(i / 20.0);
  options.methods = {snip::Method::snip, snip::Method::e_layer_type, snip::Method::e_layer_id, snip::Method::random};
  if (input_->min_err) options.methods.insert(options.methods.begin() + 1, snip::Method::min_err);
  if (input_->min_rel_err) options.methods.insert(options.methods.begin() + 2, snip::Method::min_rel_err);
  options.random_seeds = 3;
  options.request = request();
  options.request.mip_gap = 1e-4;  // curves, not proofs
  std::shared_ptr<const snip::PlannerInput> input = input_;
  sweep_watcher_.setFuture(QtConcurrent::run([input, options] {
    try {
      return snip::run_sweep(*input, options);
    } catch (const std::exception&) {
      return std::vector<snip::SweepPoint>{};
    }
  }));
}

void PlanView::sweep_finished() {
  if (sweep_dirty_) {
    start_sweep();
    return;
  }
  const std::vector<snip::SweepPoint> points = sweep_watcher_.result();
  // One curve per method; `random` is the mean over its seeds at each budget.
  std::vector<Curve> curves;
  std::map<std::string, std::map<double, std::pair<double, int>>> by_method;
  std::vector<std::string> order;
  for (const snip::SweepPoint& p : points) {
    if (!p.ok || !std::isfinite(p.result.predicted_q)) continue;
    if (!by_method.count(p.method)) order.push_back(p.method);
    auto& acc = by_method[p.method][p.budget];
    acc.first += p.result.predicted_q;
    acc.second += 1;
  }
  for (const std::string& m : order) {
    Curve c;
    c.name = QString::fromStdString(m == "random" ? "random×3" : m);  // mean over 3 seeds
    for (const auto& [budget, acc] : by_method[m]) c.points.emplace_back(budget, acc.first / acc.second);
    curves.push_back(std::move(c));
  }
  tradeoff_->set_curves(std::move(curves));
  emit sweep_shown();
}

void PlanView::refresh_validation() {
  snip::Store* store = workbench_->store();
  const PlanningSource& src = workbench_->planning_source();
  if (!store || !src.round_id) {
    validation_label_->clear();
    return;
  }
  try {
    QStringList lines;
    for (const snip::ValidationResult& v : store->validations()) {
      if (v.stats_round_id != src.round_id) continue;
      for (const auto& [key, value] : v.summary)
        if (QString::fromStdString(key).contains(QStringLiteral("spearman"), Qt::CaseInsensitive))
          lines << QStringLiteral("%1 = %2").arg(QString::fromStdString(key)).arg(value, 0, 'f', 3);
      break;
    }
    validation_label_->setText(lines.isEmpty() ? tr("<i>No validation measured for these statistics.</i>")
                                               : tr("<b>Measured validation</b> (Spearman):<br>") + lines.join("<br>"));
  } catch (const std::exception& e) {
    validation_label_->setText(error_text(e).toHtmlEscaped());
  }
}

void PlanView::export_plan_json(const QString& path) {
  if (!current_) throw snip::Error("no plan to export: choose a budget that has a plan first");
  snip::write_plan_file(path.toStdString(), current_->plan);
}

std::vector<std::string> PlanView::export_plan_for(snip::PlanStack stack, const QString& path) {
  if (!current_) throw snip::Error("no plan to export: choose a budget that has a plan first");
  std::vector<std::string> warnings;
  const std::string text = snip::export_plan(current_->plan, stack, &warnings);
  snip::write_file_atomic(path.toStdString(), text);
  return warnings;
}

void PlanView::export_plan_csv(const QString& path) {
  if (!current_) throw snip::Error("no plan to export: choose a budget that has a plan first");
  std::string csv = "layer,fprop,dgrad,wgrad\n";
  for (const auto& [name, lp] : current_->plan.layers)
    csv += name + "," + snip::precision_name(lp.fprop) + "," + snip::precision_name(lp.dgrad) + "," +
           snip::precision_name(lp.wgrad) + "\n";
  snip::write_file_atomic(path.toStdString(), csv);
}

int64_t PlanView::save_plan_to_store() {
  if (!current_) throw snip::Error("no plan to save: choose a budget that has a plan first");
  snip::Store* store = workbench_->store();
  if (!store) throw snip::Error("no database is open");
  snip::PlanSolveInfo info;
  info.stats_round_id = workbench_->planning_source().round_id;
  info.options = {{"lambda", lambda_spin_->value()},
                  {"ties", ties_check_->isChecked()},
                  {"per_role", per_role_check_->isChecked()},
                  {"allow_bf16", bf16_check_->isChecked()},
                  {"stages", stages_spin_->value()},
                  {"pipeline", snip::pipeline_layout_json({pipeline_spin_->value(), virtual_spin_->value()})}};
  for (const auto& [name, p] : pins_) info.options["pins"][name] = snip::precision_name(p);
  if (std::isfinite(current_->objective)) info.objective = current_->objective;
  if (std::isfinite(current_->predicted_dl)) info.predicted_delta_loss = current_->predicted_dl;
  if (std::isfinite(current_->predicted_dw)) info.predicted_delta_weight = current_->predicted_dw;
  info.solver_status = current_->status;
  info.solve_time_s = current_->solve_ms / 1000.0;
  if (std::isfinite(current_->mip_gap)) info.mip_gap = current_->mip_gap;
  const int64_t id = store->add_plan(current_->plan, info);
  emit workbench_->data_changed();
  return id;
}

}  // namespace snip::ui
