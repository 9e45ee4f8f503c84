// MainWindow's File › Export entries: the plan (JSON, CSV, Megatron-LM, Transformer Engine,
// torchao), the chart (PNG, SVG), the metrics and the comparison table (CSV).
#include <QDir>
#include <QPainter>
#include <QTabWidget>

#include "compare_view.h"
#include "curve_chart.h"
#include "export_file.h"
#include "file_dialogs.h"
#include "heatmap_widget.h"
#include "main_window.h"
#include "monitor_view.h"
#include "plan_view.h"
#include "sensitivity_view.h"
#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/store.h"

namespace snip::ui {

void MainWindow::ask_and_export(ExportKind kind) {
  const QString view = view_names().value(tabs_->currentIndex());
  QString name, filter;
  switch (kind) {
    case ExportKind::plan_json:
      name = QStringLiteral("plan.json"), filter = tr("Plans (*.json)");
      break;
    case ExportKind::plan_csv:
      name = QStringLiteral("plan.csv"), filter = tr("CSV (*.csv)");
      break;
    case ExportKind::plan_megatron:
      name = QStringLiteral("snip-precision.yaml"), filter = tr("Megatron-LM precision config (*.yaml *.yml)");
      break;
    case ExportKind::plan_te:
      name = QStringLiteral("plan.te.json"), filter = tr("Transformer Engine module map (*.json)");
      break;
    case ExportKind::plan_torchao:
      name = QStringLiteral("plan.torchao.json"), filter = tr("torchao module lists (*.json)");
      break;
    case ExportKind::chart_png:
      name = view + QStringLiteral(".png"), filter = tr("PNG (*.png)");
      break;
    case ExportKind::chart_svg:
      name = view + QStringLiteral(".svg"), filter = tr("SVG (*.svg)");
      break;
    case ExportKind::compare_csv:
      name = QStringLiteral("compare.csv"), filter = tr("CSV (*.csv)");
      break;
    case ExportKind::metrics_csv:
      if (monitor_view_->shown_run() == 0 || !workbench_->store()) {
        show_message(MessageLevel::warning, tr("Choose a run in the Monitor view first"));
        return;
      }
      name = QStringLiteral("run-%1.csv").arg(monitor_view_->shown_run()), filter = tr("CSV (*.csv)");
      break;
  }
  const QString path = snip::ui::save_file_name(this, tr("Export"), name, filter);
  if (!path.isEmpty()) export_to(kind, path);
}

bool MainWindow::export_to(ExportKind kind, const QString& path) {
  QString what;
  try {
    switch (kind) {
      case ExportKind::plan_json:
        what = tr("the plan"), plan_view_->export_plan_json(path);
        break;
      case ExportKind::plan_csv:
        what = tr("the plan"), plan_view_->export_plan_csv(path);
        break;
      case ExportKind::plan_megatron:
      case ExportKind::plan_te:
      case ExportKind::plan_torchao: {
        what = tr("the plan");
        const snip::PlanStack stack = kind == ExportKind::plan_megatron ? snip::PlanStack::megatron
                                      : kind == ExportKind::plan_te     ? snip::PlanStack::te
                                                                        : snip::PlanStack::torchao;
        const std::vector<std::string> warnings = plan_view_->export_plan_for(stack, path);
        if (!warnings.empty()) {
          show_message(MessageLevel::warning,
                       tr("Exported the plan to %1; %2")
                           .arg(QDir::toNativeSeparators(path), QString::fromStdString(warnings.front())));
          return true;
        }
        break;
      }
      case ExportKind::chart_png:
        what = tr("the chart"), export_chart(false, path);
        break;
      case ExportKind::chart_svg:
        what = tr("the chart"), export_chart(true, path);
        break;
      case ExportKind::metrics_csv:
        what = tr("the metrics"), export_metrics_csv(path);
        break;
      case ExportKind::compare_csv:
        what = tr("the comparison table"), compare_view_->export_table_csv(path);
        break;
    }
  } catch (const std::exception& e) {
    show_message(MessageLevel::error, tr("Exporting %1 failed: %2").arg(what, error_text(e)));
    return false;
  }
  show_message(MessageLevel::info, tr("Exported %1 to %2").arg(what, QDir::toNativeSeparators(path)));
  return true;
}

void MainWindow::export_chart(bool svg, const QString& path) {
  const QString view = view_names().value(tabs_->currentIndex());
  CurveChart* chart = nullptr;
  if (view == QLatin1String("monitor")) chart = monitor_view_->loss_chart();
  if (view == QLatin1String("plan")) chart = plan_view_->tradeoff_chart();
  if (view == QLatin1String("compare")) chart = compare_view_->loss_chart();
  if (chart) {
    svg ? chart->export_svg(path) : chart->export_png(path);
    return;
  }
  QWidget* w = view == QLatin1String("sensitivity") ? static_cast<QWidget*>(sensitivity_view_->heatmap())
                                                    : tabs_->currentWidget();
  if (svg)
    write_svg_file(
        w->size(), view, [&](QPainter& painter) { w->render(&painter); }, path);
  else
    write_png_file(w->grab(), path);
}

void MainWindow::export_metrics_csv(const QString& path) {
  const int64_t run_id = monitor_view_->shown_run();
  if (run_id == 0 || !workbench_->store()) throw snip::Error("no run is shown: choose a run in the Monitor view first");
  std::string csv = "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,fp4_fraction,bf16_gap\n";
  auto opt = [](const std::optional<double>& v) {
    return v ? QString::number(*v, 'g', 9).toStdString() : std::string();
  };
  for (const snip::MetricRow& m : workbench_->store()->metrics(run_id))
    csv += std::to_string(m.step) + "," + QString::number(m.train_loss, 'g', 9).toStdString() + "," + opt(m.val_loss) +
           "," + QString::number(m.lr, 'g', 9).toStdString() + "," +
           QString::number(m.grad_norm, 'g', 9).toStdString() + "," +
           QString::number(m.tokens_per_s, 'g', 9).toStdString() + "," +
           QString::number(m.fp4_fraction, 'g', 9).toStdString() + "," + opt(m.bf16_gap) + "\n";
  snip::write_file_atomic(path.toStdString(), csv);
}

}  // namespace snip::ui
