// SensitivityView: divergence heatmaps from stored or imported statistics rounds.
#include "sensitivity_view.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSlider>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "heatmap_widget.h"
#include "snip/layers.h"
#include "snip/plan.h"
#include "workbench.h"

namespace snip::ui {

namespace {
constexpr int kPrecFp8 = 0, kPrecFp4 = 1, kPrecDiff = 2;  // precision combo entries
QStringList layer_type_labels() {
  QStringList out;
  for (snip::LayerType t : snip::kAllLayerTypes) out << QString::fromLatin1(snip::layer_type_short_name(t));
  return out;
}
}  // namespace

SensitivityView::SensitivityView(Workbench* workbench, QWidget* parent) : QWidget(parent), workbench_(workbench) {
  round_combo_ = new QComboBox(this);
  round_combo_->setMinimumContentsLength(20);
  round_combo_->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  metric_combo_ = new QComboBox(this);
  metric_combo_->addItem(tr("ΔL loss divergence"), int(SensitivityMetric::dl));
  metric_combo_->addItem(tr("ΔW weight divergence"), int(SensitivityMetric::dw));
  metric_combo_->addItem(tr("Q = ΔL̂ + λ·ΔŴ"), int(SensitivityMetric::q));
  metric_combo_->addItem(tr("Absolute quantization error"), int(SensitivityMetric::min_err));
  metric_combo_->addItem(tr("Relative quantization error"), int(SensitivityMetric::min_rel_err));
  precision_combo_ = new QComboBox(this);
  precision_combo_->addItems({tr("FP8"), tr("FP4"), tr("FP4 − FP8")});
  precision_combo_->setCurrentIndex(kPrecFp4);
  scale_combo_ = new QComboBox(this);
  scale_combo_->addItems({tr("Log colour"), tr("Linear colour")});
  mode_combo_ = new QComboBox(this);
  mode_combo_->addItems({tr("Blocks × layer type"), tr("Layer × step (rounds of the run)"),
                         tr("Plan timeline (FP4 share per layer × step range)")});
  // Sized by a short minimum, not by their longest entry: the row must fit a 1024 px window.
  for (QComboBox* c : {metric_combo_, mode_combo_}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(14);
  }
  step_slider_ = new QSlider(Qt::Horizontal, this);
  step_slider_->setToolTip(tr("Move through the statistics rounds of this run"));
  step_label_ = new QLabel(this);
  info_label_ = new QLabel(this);
  info_label_->setWordWrap(true);
  heatmap_ = new HeatmapWidget(this);

  auto* row1 = new QHBoxLayout();
  row1->addWidget(new QLabel(tr("Statistics:"), this));
  row1->addWidget(round_combo_, 2);
  row1->addWidget(new QLabel(tr("Show:"), this));
  row1->addWidget(metric_combo_, 1);
  row1->addWidget(precision_combo_);
  row1->addWidget(scale_combo_);
  row1->addWidget(mode_combo_);
  auto* row2 = new QHBoxLayout();
  row2->addWidget(new QLabel(tr("Round step:"), this));
  row2->addWidget(step_slider_, 1);
  row2->addWidget(step_label_);
  auto* layout = new QVBoxLayout(this);
  layout->addLayout(row1);
  layout->addLayout(row2);
  layout->addWidget(info_label_);
  layout->addWidget(heatmap_, 1);

  connect(round_combo_, &QComboBox::activated, this, [this](int index) {
    const qlonglong id = round_combo_->itemData(index).toLongLong();
    if (id > 0) workbench_->use_stats_round(id);  // the Plan view plans from what is inspected here
  });
  for (QComboBox* c : {metric_combo_, precision_combo_, mode_combo_, scale_combo_})
    connect(c, &QComboBox::currentIndexChanged, this, &SensitivityView::redraw);
  connect(step_slider_, &QSlider::valueChanged, this, [this](int i) {
    if (i < 0 || i >= int(run_rounds_.size())) return;
    const PlanningSource& src = workbench_->planning_source();
    if (!src.round_id || *src.round_id != run_rounds_[size_t(i)].id)
      workbench_->use_stats_round(run_rounds_[size_t(i)].id);
  });
  connect(heatmap_, &HeatmapWidget::cell_clicked, this, [this](int cell) {
    if (mode_combo_->currentIndex() == 0)
      emit layer_clicked(cell);  // cell index == layer index (7 columns)
    else
      emit layer_clicked(cell % heatmap_->data().cols);
  });
  heatmap_->set_detail_provider([this](int cell) {
    return detail(mode_combo_->currentIndex() == 0 ? cell : cell % std::max(1, heatmap_->data().cols));
  });
  connect(workbench_, &Workbench::data_changed, this, &SensitivityView::refresh_rounds);
  connect(workbench_, &Workbench::planning_source_changed, this, &SensitivityView::refresh_rounds);
  refresh_rounds();
}

void SensitivityView::set_lambda(double lambda) {
  lambda_ = lambda;
  redraw();
}

void SensitivityView::refresh_rounds() {
  snip::Store* store = workbench_->store();
  rounds_.clear();
  try {
    if (store) rounds_ = store->stats_rounds();
  } catch (const std::exception& e) {
    workbench_->report(MessageLevel::error, tr("Reading statistics rounds failed: %1").arg(error_text(e)));
  }
  const PlanningSource& src = workbench_->planning_source();
  {
    const QSignalBlocker block(round_combo_);
    round_combo_->clear();
    if (src.costs) round_combo_->addItem(src.label, qlonglong(-1));
    for (const snip::StatsRoundInfo& r : rounds_) {
      const QString run = r.run_id ? tr("run %1").arg(*r.run_id) : tr("imported");
      round_combo_->addItem(tr("round #%1 · %2 · step %3 · %4 layers").arg(r.id).arg(run).arg(r.step).arg(r.num_layers),
                            qlonglong(r.id));
    }
    // The combo shows what is drawn: the source's round, or nothing (never a round that is not shown).
    if (src.round_id)
      round_combo_->setCurrentIndex(std::max(0, round_combo_->findData(qlonglong(*src.round_id))));
    else if (!src.costs)
      round_combo_->setCurrentIndex(-1);
  }
  // Rounds of the same run (or the same import) in step order, for the step slider.
  run_rounds_.clear();
  std::optional<int64_t> run_id;
  for (const auto& r : rounds_)
    if (src.round_id && r.id == *src.round_id) run_id = r.run_id;
  if (src.round_id) {
    for (const auto& r : rounds_)
      if (r.run_id == run_id && (run_id || r.id == *src.round_id)) run_rounds_.push_back(r);
    std::sort(run_rounds_.begin(), run_rounds_.end(), [](auto& a, auto& b) { return a.step < b.step; });
  }
  {
    const QSignalBlocker block(step_slider_);
    step_slider_->setRange(0, std::max(0, int(run_rounds_.size()) - 1));
    for (size_t i = 0; i < run_rounds_.size(); ++i)
      if (src.round_id && run_rounds_[i].id == *src.round_id) step_slider_->setValue(int(i));
    step_slider_->setEnabled(run_rounds_.size() > 1);
  }
  redraw();
}

double SensitivityView::value_of(const snip::LayerEstimate& e) const {
  const auto metric = SensitivityMetric(metric_combo_->currentData().toInt());
  auto pick = [&](const snip::PerPrecision& v) {
    const double fp8 = v[int(snip::Precision::fp8)], fp4 = v[int(snip::Precision::fp4)];
    switch (precision_combo_->currentIndex()) {
      case kPrecFp8:
        return fp8;
      case kPrecFp4:
        return fp4;
      default:
        return fp4 - fp8;
    }
  };
  switch (metric) {
    case SensitivityMetric::dl:
      return pick(e.dl);
    case SensitivityMetric::dw:
      return pick(e.dw);
    case SensitivityMetric::q:
      return pick(e.q);
    case SensitivityMetric::min_err:
      return pick(e.min_err);
    case SensitivityMetric::min_rel_err:
      return pick(e.min_rel_err);
  }
  return std::nan("");
}

QString SensitivityView::detail(int layer) const {
  if (!estimates_ || layer < 0 || layer >= int(estimates_->layers.size())) return {};
  const snip::LayerEstimate& e = estimates_->layers[size_t(layer)];
  auto row = [](const char* name, const snip::PerPrecision& v) {
    return QStringLiteral("<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td></tr>")
        .arg(QString::fromUtf8(name))
        .arg(v[int(snip::Precision::fp8)], 0, 'g', 4)
        .arg(v[int(snip::Precision::fp4)], 0, 'g', 4);
  };
  return QStringLiteral("%1<br>K=%2 N=%3<table><tr><th></th><th>FP8</th><th>FP4</th></tr>%4%5%6%7%8%9</table>")
      .arg(QString::fromStdString(e.name))
      .arg(e.in_features)
      .arg(e.out_features)
      .arg(row("ΔL", e.dl), row("ΔW", e.dw), row("Q", e.q), row("abs err", e.min_err), row("rel err", e.min_rel_err),
           row("‖δY‖²", e.dy_err_sq));
}

void SensitivityView::redraw() {
  const PlanningSource& src = workbench_->planning_source();
  const bool diff = precision_combo_->currentIndex() == kPrecDiff;
  HeatmapData data;
  // FP4 − FP8 is signed by construction: a diverging scale around 0 (log or linear magnitude as
  // the menu says); the widget also turns diverging for any other data holding negative values.
  data.log_colour = scale_combo_->currentIndex() == 0;
  data.diverging = diff;
  data.col_labels = layer_type_labels();
  estimates_.reset();
  step_label_->setText(run_rounds_.empty() ? tr("—")
                                           : tr("step %1 (%2 of %3)")
                                                 .arg(run_rounds_[size_t(step_slider_->value())].step)
                                                 .arg(step_slider_->value() + 1)
                                                 .arg(run_rounds_.size()));
  try {
    if (mode_combo_->currentIndex() == 2) {
      fill_plan_timeline(data, src);
    } else if (src.round) {
      fill_estimates(data, src);
    } else if (src.costs) {
      fill_costs(data, src, diff);
    } else {
      info_label_->setText(
          tr("No statistics yet: run training with SNIP (adaptive) or `snip collect`, or import a "
             "statistics/costs file (File › Import statistics/costs)."));
    }
  } catch (const std::exception& e) {
    info_label_->setText(tr("<span style='color:#d03030'>%1</span>").arg(error_text(e).toHtmlEscaped()));
    data = HeatmapData{};
  }
  heatmap_->set_data(std::move(data));
}

void SensitivityView::fill_plan_timeline(HeatmapData& data, const PlanningSource& src) {
  // The plan timeline of the round's run: one row per plan in effect, 1 = all GEMMs FP4.
  std::optional<int64_t> run_id;
  for (const auto& r : rounds_)
    if (src.round_id && r.id == *src.round_id) run_id = r.run_id;
  snip::Store* store = workbench_->store();
  const int blocks = src.num_blocks();
  data.value_name = tr("FP4 share of the layer's GEMMs");
  data.log_colour = false;
  data.cols = blocks * snip::kLayersPerBlock;
  data.col_labels = layer_short_labels(data.cols);
  if (run_id && store) {
    for (const snip::PlanTimelineEntry& e : store->plan_timeline(*run_id)) {
      const std::vector<snip::LinearPrecision> layers = snip::resolve_plan_lenient(store->plan(e.plan_id).plan, blocks);
      for (const snip::LinearPrecision& lp : layers)
        data.values.push_back(((lp.fprop == snip::Precision::fp4) + (lp.dgrad == snip::Precision::fp4) +
                               (lp.wgrad == snip::Precision::fp4)) /
                              3.0);
      data.row_labels << (e.last_step ? tr("steps %1–%2").arg(e.first_step).arg(*e.last_step)
                                      : tr("steps %1–").arg(e.first_step));
      ++data.rows;
    }
  }
  info_label_->setText(run_id ? tr("Plan timeline of run %1: which layers ran in FP4 over which steps.").arg(*run_id)
                              : tr("The plan timeline needs a statistics round that belongs to a run."));
  if (data.rows == 0) data = HeatmapData{};
}

void SensitivityView::fill_estimates(HeatmapData& data, const PlanningSource& src) {
  snip::EstimatorOptions options;
  options.lambda = lambda_;
  estimates_ = snip::estimate_divergences(*src.round, options);
  data.value_name = metric_combo_->currentText() + QStringLiteral(" (") + precision_combo_->currentText() + ")";
  info_label_->setText(
      tr("%1 · %2 tokens · curvature c = %3 · λ = %4 (Q only). Click a cell to pin that layer in "
         "the Plan view.")
          .arg(src.label)
          .arg(src.round->tokens)
          .arg(src.round->globals.count("curvature") ? src.round->globals.at("curvature") : NAN, 0, 'g', 4)
          .arg(lambda_));
  if (mode_combo_->currentIndex() == 0) {
    data.rows = src.num_blocks();
    data.cols = snip::kLayersPerBlock;
    data.values.assign(size_t(data.rows * data.cols), std::nan(""));
    for (const snip::LayerEstimate& e : estimates_->layers) {
      const int index = e.block * snip::kLayersPerBlock + int(e.type);
      if (index < int(data.values.size())) data.values[size_t(index)] = value_of(e);
    }
    for (int b = 0; b < data.rows; ++b) data.row_labels << tr("block %1").arg(b);
    return;
  }
  // Layer × step: one row per round of the run, one column per layer.
  const int layers = src.num_blocks() * snip::kLayersPerBlock;
  data.cols = layers;
  data.col_labels = layer_short_labels(layers);
  std::vector<snip::StatsRoundInfo> rows = run_rounds_;
  if (rows.empty() && src.round_id) {
    snip::StatsRoundInfo only;
    only.id = *src.round_id;
    rows.push_back(only);
  }
  data.rows = int(rows.size());
  data.values.assign(size_t(data.rows * data.cols), std::nan(""));
  for (int r = 0; r < data.rows; ++r) {
    const snip::StatsRound round = workbench_->store()->stats_round(rows[size_t(r)].id);
    const snip::Estimates est = snip::estimate_divergences(round, options);
    for (const snip::LayerEstimate& e : est.layers) {
      const int index = e.block * snip::kLayersPerBlock + int(e.type);
      if (index < layers) data.values[size_t(r * layers + index)] = value_of(e);
    }
    data.row_labels << tr("step %1").arg(round.step);
  }
}

void SensitivityView::fill_costs(HeatmapData& data, const PlanningSource& src, bool diff) {
  // Imported costs carry one number per layer and precision: show that.
  data.value_name = tr("imported cost (%1)").arg(precision_combo_->currentText());
  info_label_->setText(
      tr("%1: imported costs have no ΔL/ΔW breakdown; the heatmap shows the cost column.").arg(src.label));
  data.rows = src.num_blocks();
  data.cols = snip::kLayersPerBlock;
  data.values.assign(size_t(data.rows * data.cols), std::nan(""));
  for (const snip::CostLayer& l : src.costs->layers) {
    const double fp8 = l.total_cost(snip::Precision::fp8), fp4 = l.total_cost(snip::Precision::fp4);
    const double v = precision_combo_->currentIndex() == kPrecFp8 ? fp8 : diff ? fp4 - fp8 : fp4;
    const int index = l.block * snip::kLayersPerBlock + int(l.type);
    if (index < int(data.values.size())) data.values[size_t(index)] = v;
  }
  for (int b = 0; b < data.rows; ++b) data.row_labels << tr("block %1").arg(b);
}

}  // namespace snip::ui
