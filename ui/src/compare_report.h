// The Compare view's content before it becomes widgets, in the stages CompareView::rebuild runs:
// load the checked plans, runs and compare experiments from the store (load_compare_sources),
// then turn them into a report model (build_compare_model): table rows, the plan grids, the
// loss curves with each arm's replicates, the gap error bars and the notes. The statistics
// (gaps to BF16 with 95% Student-t half-widths, paired differences to SNIP, verdicts, regret to
// the oracle, whether uniform FP4 matters at all) come from snip/compare_summary.h and
// snip/paired_stats.h, computed from the stored replicate values exactly as `snip compare` and
// `snip show --compare` compute them; nothing here re-derives them.
#pragma once
#include <QColor>
#include <QString>
#include <QStringList>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "curve_chart.h"
#include "snip/paired_stats.h"
#include "snip/precision.h"
#include "snip/store.h"

namespace snip::ui {

// The colour of a method's curve, swatch and error bar: fixed for the usual methods (BF16 grey,
// SNIP blue, uniform FP4 red, ...), otherwise derived from the name by a hash that does not
// change between launches, so an arm keeps its colour whatever else is checked.
QColor method_colour(const std::string& method);

// Stage 1: what the store holds for the checked items.
struct RunSource {
  snip::RunInfo info;
  std::vector<snip::MetricRow> last_rows;  // the last kRunTrainWindow steps
  std::optional<double> last_val;
  std::vector<snip::CurvePoint> train_curve;
};
struct CompareSources {
  std::vector<snip::PlanRecord> plans;
  std::vector<RunSource> runs;
  std::vector<snip::CompareRecord> compares;
};
inline constexpr int kRunTrainWindow = 50;  // a run's train loss: the mean over its last 50 steps
CompareSources load_compare_sources(const snip::Store& store, const std::vector<int64_t>& plan_ids,
                                    const std::vector<int64_t>& run_ids, const std::vector<int64_t>& compare_ids);

// Stage 2: the report model. One table row:
struct ReportRow {
  QColor colour;  // of the row's curve / error bar, if it has one
  QString source, method;
  double budget = NAN, achieved = NAN, train = NAN, val = NAN, predicted = NAN;
  int train_window = 0;  // steps the train loss is averaged over (0: none)
  // Gaps to BF16 and the paired difference to SNIP; an Interval with n < 2 has no half-width.
  std::optional<snip::Interval> gap_train, gap_val, diff_vs_snip;
  QString verdict;        // "better" / "worse" / "indistinguishable" / "SNIP reference" / a plan's note
  QColor verdict_colour;  // invalid: the default text colour
  QString tooltip;
  std::optional<int64_t> plan_id;  // a compare arm's stored plan (a click shows its grid)
};

// One error bar of the gap chart: an arm's train and validation gaps to BF16.
struct GapBar {
  QString label;
  QColor colour;
  snip::Interval train, val;
  bool reference = false;  // the SNIP reference (its interval is shaded across the chart)
  // Replicates of the arm that finished, of those asked: fewer than asked draws the arm dashed
  // and labelled "k/K": its interval is of what finished, not the arm's result.
  int finished = 0, asked = 0;
  bool incomplete() const { return finished < asked; }
};

// One plan grid: the plan per layer, titled, with the layers that differ from the first plan.
struct GridSpec {
  int blocks = 0;
  std::vector<snip::LinearPrecision> per_layer;
  QString title;
  bool compare_to_first = false;
};

struct CompareModel {
  std::vector<ReportRow> rows;
  std::vector<GridSpec> grids;
  std::vector<Curve> curves;  // train loss; compare arms carry their replicates (the bands)
  std::vector<GapBar> gap_bars;
  QStringList notes;  // HTML lines above the table
  // Train loss column header: "Train\n(last N)" when every row averages N steps.
  QString train_header;
};
CompareModel build_compare_model(const CompareSources& sources);

// The verdict text and colour of an arm against SNIP (K = 1: no interval, said so). Better is
// green, worse red, indistinguishable grey.
QString verdict_text(snip::Verdict v, int replicates);
QColor verdict_colour(snip::Verdict v);
// "+0.0123 ± 0.0045", or "+0.0123" without an interval.
QString mean_pm(const snip::Interval& iv);
// The label of a stored plan in the Compare view's list: id, method, budget → achieved, and where
// it came from (run and step, a compare arm, a saved plan), so plans of one run differ.
QString plan_label(const snip::PlanRecord& p, const std::vector<snip::StatsRoundInfo>& rounds);

}  // namespace snip::ui
