// The Compare view's report model: load from the store, then rows, grids, curves, error bars and
// notes (compare_report.h).
#include "compare_report.h"

#include <QDateTime>
#include <QObject>
#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "snip/compare_summary.h"
#include "snip/layers.h"
#include "snip/plan.h"
#include "snip/store_export.h"

namespace snip::ui {

namespace {

// The mean of one loss over an arm's finished replicates (NaN when none finished).
double finished_mean(const snip::CompareRowRecord& r, double snip::CompareReplicateRecord::*loss) {
  double sum = 0;
  int n = 0;
  for (const snip::CompareReplicateRecord& x : r.replicates)
    if (x.finished && std::isfinite(x.*loss)) sum += x.*loss, ++n;
  return n > 0 ? sum / n : std::nan("");
}

constexpr int kRunCurvePoints = 2000;  // a stored run's curve, downsampled by the store

QString tr(const char* text) {
  return QObject::tr(text);
}

int num_blocks_of(const snip::Plan& plan) {
  int blocks = 0;
  for (const auto& [name, lp] : plan.layers)
    if (auto id = snip::parse_layer_module_name(name)) blocks = std::max(blocks, id->block + 1);
  return blocks;
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// FNV-1a 64: the same on every machine and launch (qHash is seeded per process).
uint64_t stable_hash(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

QString signed4(double v) {
  return std::isfinite(v) ? QString::asprintf("%+.4f", v) : QStringLiteral("—");
}

// The row's verdict cell against SNIP, with the same-plan note.
void set_arm_verdict(ReportRow& row, const snip::CompareRowRecord& r, const snip::GapStats& train, bool is_snip,
                     int replicates) {
  if (r.control) {
    row.verdict = tr("control (noise floor)");
  } else if (is_snip) {
    row.verdict = tr("SNIP reference");
    row.verdict_colour = QColor(31, 119, 180);
  } else if (train.verdict) {
    row.verdict = *train.verdict == snip::Verdict::incomplete
                      ? tr("incomplete · %1 of %2 replicates finished").arg(train.finished).arg(train.asked)
                      : verdict_text(*train.verdict, replicates);
    row.verdict_colour = verdict_colour(*train.verdict);
  }
  if (!r.same_plan_as.empty()) row.verdict += tr(" · same plan as %1").arg(QString::fromStdString(r.same_plan_as));
}

// The plain-language lines of one compare experiment.
QStringList compare_notes(const snip::CompareRecord& c, const std::vector<snip::ArmStatistics>& stats,
                          size_t snip_row) {
  QStringList notes;
  const int k = stats.empty() ? 0 : stats.front().train.asked;
  const QString snip_name = QString::fromStdString(c.rows[snip_row].method).toHtmlEscaped();
  notes << tr("<b>Compare #%1</b>: %2 steps per arm from step %3%4, ρ %5, recipe %6; %7 per arm, paired by "
              "replicate; ± is the 95% Student-t half-width; verdicts compare each arm's train loss with %8.")
               .arg(c.id)
               .arg(c.steps)
               .arg(c.start_step)
               .arg(c.run_id ? tr(" of run #%1").arg(*c.run_id) : QString())
               .arg(c.budget, 0, 'f', 2)
               .arg(QString::fromStdString(c.recipe).toHtmlEscaped())
               .arg(k == 1 ? tr("1 replicate") : tr("%1 replicates").arg(k))
               .arg(snip_name);
  int finished = 0, asked = 0;
  for (size_t i = 0; i < stats.size(); ++i)
    if (c.rows[i].same_plan_as.empty()) finished += stats[i].train.finished, asked += stats[i].train.asked;
  if (finished < asked)
    notes << tr("<b>Incomplete</b> (%1): %2 of %3 trainings finished. The table shows what finished; an arm whose "
                "replicates (or its references') have not all finished has no verdict, and no conclusion is drawn "
                "from it.")
                 .arg(QString::fromLatin1(snip::run_status_name(c.status)))
                 .arg(finished)
                 .arg(asked);
  if (k < 2)
    notes << tr(
        "No interval (1 replicate): every verdict is “indistinguishable”; run the compare with 3 or more "
        "replicates to tell plans apart.");
  if (const auto fp4 = snip::find_uniform_fp4_row(c.rows); fp4 && snip::precision_does_not_matter(stats[*fp4])) {
    QString sentence = QString::fromUtf8(snip::kPrecisionDoesNotMatter);
    sentence[0] = sentence[0].toUpper();
    notes << tr("<b>%1</b> (uniform FP4's gap to BF16: train %2, val %3).")
                 .arg(sentence.toHtmlEscaped(), mean_pm(stats[*fp4].train.gap), mean_pm(stats[*fp4].val.gap));
  }
  if (const auto regret = snip::oracle_regret(c.rows, stats, snip_row))
    notes << tr("Regret of %1 to the oracle (its gap minus the oracle's, paired): train %2, val %3.")
                 .arg(snip_name, mean_pm(regret->train), mean_pm(regret->val));
  if (c.replicates <= 1 && c.noise_floor_train > 0)  // compares stored before replicates existed
    notes << tr("Noise floor of the perturbed-weights controls: train %1, val %2.")
                 .arg(c.noise_floor_train, 0, 'f', 4)
                 .arg(c.noise_floor_val, 0, 'f', 4);
  return notes;
}

// Stage 2a: the checked plans as grids and rows; the first is the one the others are compared to.
void add_plans(const CompareSources& s, CompareModel& m) {
  std::vector<snip::LinearPrecision> first;
  for (size_t i = 0; i < s.plans.size(); ++i) {
    const snip::PlanRecord& rec = s.plans[i];
    GridSpec g;
    g.blocks = num_blocks_of(rec.plan);
    g.per_layer = snip::resolve_plan_lenient(rec.plan, g.blocks);
    g.title = tr("#%1 %2 (ρ %3)")
                  .arg(rec.id)
                  .arg(QString::fromStdString(rec.plan.method))
                  .arg(rec.plan.achieved_fp4_fraction, 0, 'f', 3);
    ReportRow row;
    row.source = tr("plan #%1").arg(rec.id);
    row.method = QString::fromStdString(rec.plan.method);
    row.budget = rec.plan.budget;
    row.achieved = rec.plan.achieved_fp4_fraction;
    if (rec.solve.predicted_delta_loss) row.predicted = *rec.solve.predicted_delta_loss;
    if (i == 0) {
      first = g.per_layer;
      row.verdict = s.plans.size() > 1 ? tr("the plans below are compared with this one") : QString();
    } else if (first.size() == g.per_layer.size()) {
      g.compare_to_first = true;
      size_t differ = 0;
      for (size_t l = 0; l < first.size(); ++l) differ += !(first[l] == g.per_layer[l]);
      row.verdict = tr("%1 layers differ from plan #%2").arg(differ).arg(s.plans.front().id);
    } else {
      row.verdict = tr("not comparable: plan #%1 has other layers").arg(s.plans.front().id);
    }
    m.grids.push_back(std::move(g));
    m.rows.push_back(row);
  }
}

// Stage 2b: runs: mean train loss over the last steps, the last validation loss, gaps to a checked
// uniform-BF16 run (no replicates: no interval).
void add_runs(const CompareSources& s, CompareModel& m) {
  const RunSource* bf16 = nullptr;
  for (const RunSource& r : s.runs)
    if (r.info.spec.method == "uniform-bf16") bf16 = &r;
  auto train_of = [](const RunSource& r) {
    double sum = 0;
    for (const auto& x : r.last_rows) sum += x.train_loss;
    return r.last_rows.empty() ? NAN : sum / double(r.last_rows.size());
  };
  std::set<std::string> used;
  for (const RunSource& r : s.runs) {
    ReportRow row;
    const std::string& method = r.info.spec.method;
    // Two checked runs of one method must not share a colour: the second keys on its id.
    row.colour = method_colour(used.insert(method).second ? method : method + "#" + std::to_string(r.info.id));
    row.source = tr("run #%1 %2").arg(r.info.id).arg(QString::fromStdString(snip::printable_text(r.info.spec.name)));
    row.method = QString::fromStdString(method);
    row.achieved = r.last_rows.empty() ? NAN : r.last_rows.back().fp4_fraction;
    row.train = train_of(r);
    row.train_window = int(r.last_rows.size());
    row.val = r.last_val.value_or(NAN);
    if (bf16) {
      row.gap_train = snip::mean_ci95({row.train - train_of(*bf16)});
      row.gap_val = snip::mean_ci95({row.val - bf16->last_val.value_or(NAN)});
    } else {
      row.verdict = tr("check a uniform-bf16 run for gaps");
    }
    row.tooltip = tr("%1 · %2 · %3 steps")
                      .arg(QString::fromStdString(snip::printable_text(r.info.spec.name)),
                           QString::fromLatin1(snip::run_status_name(r.info.status)))
                      .arg(r.info.last_step);
    std::vector<QPointF> points;
    for (const auto& p : r.train_curve) points.emplace_back(double(p.step), p.value);
    m.curves.push_back(
        Curve{QStringLiteral("run #%1 %2").arg(r.info.id).arg(row.method), std::move(points), row.colour, {}});
    m.rows.push_back(row);
  }
}

// Stage 2c: one compare experiment: every arm with its statistics, curve, replicates and error bar.
void add_compare(const snip::CompareRecord& c, bool prefix_bars, CompareModel& m) {
  if (c.rows.empty()) return;
  const size_t bf16_row = snip::find_bf16_row(c.rows), snip_row = snip::find_snip_row(c.rows, c.options);
  const std::vector<snip::ArmStatistics> stats = snip::compare_row_statistics(c.rows, bf16_row, snip_row);
  m.notes << compare_notes(c, stats, snip_row);
  const int k = stats.front().train.asked;
  const int window = int(std::min<int64_t>(c.steps, std::max<int64_t>(1, c.last_window)));
  for (size_t i = 0; i < c.rows.size(); ++i) {
    const snip::CompareRowRecord& r = c.rows[i];
    const snip::ArmStatistics& st = stats[i];
    ReportRow row;
    row.colour = method_colour(r.method);
    row.source = tr("compare #%1").arg(c.id);
    row.method = QString::fromStdString(r.method);
    // A uniform arm has no budget: its FP4 fraction is fixed by its precision.
    if (!starts_with(r.method, "uniform-")) row.budget = c.budget;
    row.achieved = r.achieved_fraction;
    row.plan_id = r.plan_id;
    // An unfinished compare stores no arm means yet: the mean of the finished replicates'.
    row.train = std::isfinite(r.train_loss_last) ? r.train_loss_last
                                                 : finished_mean(r, &snip::CompareReplicateRecord::train_loss_last);
    row.train_window = window;
    const double val_bf16 = std::isfinite(r.val_loss_bf16)
                                ? r.val_loss_bf16
                                : finished_mean(r, &snip::CompareReplicateRecord::val_loss_bf16);
    row.val = std::isfinite(r.val_loss_plan) ? r.val_loss_plan
                                             : finished_mean(r, &snip::CompareReplicateRecord::val_loss_plan);
    row.gap_train = st.train.gap;
    row.gap_val = st.val.gap;
    row.diff_vs_snip = st.train.diff_vs_snip;
    set_arm_verdict(row, r, st.train, i == snip_row, k);
    row.tooltip = tr("%1: train loss %2 (mean of the last %3 steps), budget ρ %4")
                      .arg(row.method, QString::number(row.train, 'f', 4), QString::number(window),
                           std::isfinite(row.budget) ? QString::number(row.budget, 'f', 3) : tr("none (uniform)")) +
                  tr("; validation loss under the plan %1, in BF16 %2 (gap %3)%4; validation vs SNIP %5 → %6")
                      .arg(QString::number(row.val, 'f', 4), QString::number(val_bf16, 'f', 4),
                           signed4(row.val - val_bf16), r.plan_id ? tr(" · plan #%1").arg(*r.plan_id) : QString(),
                           st.val.diff_vs_snip ? mean_pm(*st.val.diff_vs_snip) : tr("reference"),
                           st.val.verdict ? verdict_text(*st.val.verdict, k) : tr("reference"));
    m.rows.push_back(row);
    if (!r.control)
      m.gap_bars.push_back(GapBar{prefix_bars ? tr("#%1 %2").arg(c.id).arg(row.method) : row.method, row.colour,
                                  st.train.gap, st.val.gap, i == snip_row, st.train.finished, st.train.asked});
    if (!r.same_plan_as.empty()) continue;  // the same curve is drawn once
    // An unfinished compare's arm has no mean curve yet: the mean of its finished replicates'.
    std::vector<double> mean_curve = r.train_curve;
    if (mean_curve.empty()) {
      int n = 0;
      for (const snip::CompareReplicateRecord& x : r.replicates) {
        if (!x.finished || x.train_curve.empty()) continue;
        if (mean_curve.empty()) mean_curve.assign(x.train_curve.size(), 0.0);
        if (x.train_curve.size() != mean_curve.size()) continue;
        for (size_t s = 0; s < mean_curve.size(); ++s) mean_curve[s] += x.train_curve[s];
        ++n;
      }
      for (double& v : mean_curve) v /= std::max(n, 1);
    }
    if (mean_curve.empty()) continue;  // nothing finished: nothing to draw
    auto to_points = [&](const std::vector<double>& losses) {
      std::vector<QPointF> points;
      points.reserve(losses.size());
      for (size_t s = 0; s < losses.size(); ++s) points.emplace_back(double(c.start_step + int64_t(s) + 1), losses[s]);
      return points;
    };
    Curve curve{tr("#%1 %2").arg(c.id).arg(row.method), to_points(mean_curve), row.colour, {}};
    for (const snip::CompareReplicateRecord& x : r.replicates)
      if (!x.train_curve.empty()) curve.replicates.push_back(to_points(x.train_curve));
    m.curves.push_back(std::move(curve));
  }
}

QString train_header(const std::vector<ReportRow>& rows) {
  std::set<int> windows;
  for (const ReportRow& r : rows)
    if (r.train_window > 0) windows.insert(r.train_window);
  if (windows.size() == 1) return tr("Train\n(last %1)").arg(*windows.begin());
  return tr("Train\n(last steps)");
}

}  // namespace

QColor method_colour(const std::string& method) {
  static const std::map<std::string, QColor> kFixed = {
      {"uniform-bf16", QColor(90, 90, 90)},   {"uniform-fp8", QColor(255, 127, 14)},
      {"uniform-fp4", QColor(214, 39, 40)},   {"snip λ=0.1", QColor(31, 119, 180)},
      {"snip", QColor(31, 119, 180)},         {"oracle", QColor(44, 160, 44)},
      {"hawq", QColor(148, 103, 189)},        {"min-err", QColor(140, 86, 75)},
      {"min-rel-err", QColor(227, 119, 194)}, {"e-layer-type", QColor(188, 189, 34)},
      {"e-layer-id", QColor(23, 190, 207)},   {"uniform-fp32", QColor(40, 40, 40)}};
  if (auto it = kFixed.find(method); it != kFixed.end()) return it->second;
  const uint64_t h = stable_hash(method);
  if (starts_with(method, "snip"))  // SNIP's other λ: blues
    return QColor::fromHsv(195 + int(h % 40), 170 + int((h >> 8) % 60), 120 + int((h >> 16) % 90));
  if (starts_with(method, "random"))  // random baselines: muted, one hue each
    return QColor::fromHsv(int(h % 360), 70, 150);
  return QColor::fromHsvF(std::fmod(0.07 + 0.381966 * double(h % 1000), 1.0), 0.75, 0.8);
}

CompareSources load_compare_sources(const snip::Store& store, const std::vector<int64_t>& plan_ids,
                                    const std::vector<int64_t>& run_ids, const std::vector<int64_t>& compare_ids) {
  CompareSources s;
  for (int64_t id : plan_ids) s.plans.push_back(store.plan(id));
  for (int64_t id : run_ids) {
    RunSource r;
    r.info = store.run(id);
    r.last_rows = store.metrics(id, std::max<int64_t>(0, r.info.last_step - kRunTrainWindow + 1));
    const auto val = store.curve(id, snip::Metric::val_loss, 4);
    if (!val.empty()) r.last_val = val.back().value;
    r.train_curve = store.curve(id, snip::Metric::train_loss, kRunCurvePoints);
    s.runs.push_back(std::move(r));
  }
  for (int64_t id : compare_ids) s.compares.push_back(store.compare(id));
  return s;
}

CompareModel build_compare_model(const CompareSources& sources) {
  CompareModel m;
  add_plans(sources, m);
  add_runs(sources, m);
  for (const snip::CompareRecord& c : sources.compares) {
    // A compare whose rows cannot be paired (e.g. an arm with fewer replicates, written by hand or
    // by another tool) is named in the notes; the other checked items are still shown.
    try {
      add_compare(c, sources.compares.size() > 1, m);
    } catch (const std::exception& e) {
      m.notes
          << tr("<b>Compare #%1</b> cannot be shown: %2").arg(c.id).arg(QString::fromUtf8(e.what()).toHtmlEscaped());
    }
  }
  m.train_header = train_header(m.rows);
  return m;
}

QString verdict_text(snip::Verdict v, int replicates) {
  const QString name = QString::fromLatin1(snip::verdict_name(v));
  return replicates < 2 ? name + tr(" · no interval (1 replicate)") : name;
}

QColor verdict_colour(snip::Verdict v) {
  switch (v) {
    case snip::Verdict::better:
      return QColor(30, 140, 60);
    case snip::Verdict::worse:
      return QColor(200, 60, 40);
    case snip::Verdict::indistinguishable:
      return QColor(120, 120, 120);
    case snip::Verdict::incomplete:
      return QColor(160, 130, 40);
  }
  return {};
}

QString mean_pm(const snip::Interval& iv) {
  if (!iv.has_data() || !std::isfinite(iv.mean)) return QStringLiteral("—");
  return iv.has_interval() && std::isfinite(iv.ci95) ? QString::asprintf("%+.4f ± %.4f", iv.mean, iv.ci95)
                                                     : QString::asprintf("%+.4f", iv.mean);
}

QString plan_label(const snip::PlanRecord& p, const std::vector<snip::StatsRoundInfo>& rounds) {
  QString origin;
  const nlohmann::json& o = p.solve.options;
  std::optional<int64_t> round_step;
  if (p.solve.stats_round_id)
    for (const auto& r : rounds)
      if (r.id == *p.solve.stats_round_id) round_step = r.step;
  if (o.is_object() && o.value("compare", false)) {
    origin = tr("compare arm");
  } else if (p.solve.run_id) {
    origin =
        round_step ? tr("run #%1, step %2").arg(*p.solve.run_id).arg(*round_step) : tr("run #%1").arg(*p.solve.run_id);
  } else if (p.solve.stats_round_id) {
    origin = round_step ? tr("saved, round #%1 (step %2)").arg(*p.solve.stats_round_id).arg(*round_step)
                        : tr("saved, round #%1").arg(*p.solve.stats_round_id);
  } else {
    origin = tr("imported");
  }
  const QString when = QDateTime::fromMSecsSinceEpoch(p.created_ms).toString(QStringLiteral("MM-dd hh:mm"));
  return tr("#%1 %2 · ρ %3 → %4 · %5 · %6")
      .arg(p.id)
      .arg(QString::fromStdString(p.plan.method))
      .arg(p.plan.budget, 0, 'f', 2)
      .arg(p.plan.achieved_fp4_fraction, 0, 'f', 3)
      .arg(origin, when);
}

}  // namespace snip::ui
