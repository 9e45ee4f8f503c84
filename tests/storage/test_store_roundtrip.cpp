// Round trips of every stored entity through a real SQLite file (runs, checkpoints,
// metrics, curves, statistics rounds, plans, plan timeline, validation results), the
// RunRecorder's batching, and transactions.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <limits>
#include <map>
#include <memory>
#include <thread>

#include "snip/curve.h"
#include "snip/error.h"
#include "snip/run_recorder.h"
#include "snip/store_export.h"
#include "store_test_util.h"

using namespace snip;
using namespace snip_test;

namespace {

// Test oracle for downsampled curves, written independently of snip::downsample_min_max:
// for every bucket b, scan all points and keep the first minimum and first maximum.
std::vector<CurvePoint> min_max_oracle(const std::vector<CurvePoint>& pts, int max_points) {
  if (pts.size() <= size_t(max_points)) return pts;
  const int64_t nb = max_points / 2, lo = pts.front().step, span = pts.back().step - lo + 1;
  std::vector<CurvePoint> out;
  for (int64_t b = 0; b < nb; ++b) {
    std::optional<size_t> mn, mx;
    for (size_t i = 0; i < pts.size(); ++i) {
      if ((pts[i].step - lo) * nb / span != b) continue;
      if (!mn || pts[i].value < pts[*mn].value) mn = i;
      if (!mx || pts[i].value > pts[*mx].value) mx = i;
    }
    if (!mn) continue;
    if (*mn == *mx) {
      out.push_back(pts[*mn]);
    } else {
      out.push_back(pts[std::min(*mn, *mx)]);
      out.push_back(pts[std::max(*mn, *mx)]);
    }
  }
  return out;
}

}  // namespace

TEST(StoreRuns, CreateReadUpdateRoundTrip) {
  TempDir dir;
  Store store(dir.file("w.db"));
  EXPECT_EQ(store.schema_version(), Store::kSchemaVersion);
  const RunSpec spec = tiny_spec("baseline");
  const int64_t id = store.create_run(spec);
  RunInfo r = store.run(id);
  EXPECT_EQ(r.spec.name, spec.name);
  EXPECT_EQ(r.spec.dims.hidden, spec.dims.hidden);
  EXPECT_EQ(r.spec.dims.intermediate, spec.dims.intermediate);
  EXPECT_EQ(r.spec.dims.num_layers, spec.dims.num_layers);
  EXPECT_EQ(r.spec.dims.num_heads, spec.dims.num_heads);
  EXPECT_EQ(r.spec.dims.num_kv_heads, spec.dims.num_kv_heads);
  EXPECT_EQ(r.spec.model_config, spec.model_config);
  EXPECT_EQ(r.spec.train_config, spec.train_config);
  EXPECT_EQ(r.spec.data_source, spec.data_source);
  EXPECT_EQ(r.spec.seed, spec.seed);
  EXPECT_EQ(r.spec.method, spec.method);
  EXPECT_EQ(r.spec.notes, spec.notes);
  EXPECT_EQ(r.status, RunStatus::running);
  EXPECT_EQ(r.owner_pid, int64_t(getpid()));
  EXPECT_EQ(r.last_step, -1);
  EXPECT_FALSE(r.ended_ms.has_value());

  // Branch from a checkpoint of the first run, starting from a stored plan.
  const int64_t plan_id = store.add_plan(sample_plan(spec.dims));
  store.add_checkpoint(id, 100, "/ckpt/run1/step100.safetensors");
  store.add_checkpoint(id, 50, "/ckpt/run1/step50.safetensors");
  RunSpec child = tiny_spec("branch");
  child.parent_run_id = id;
  child.parent_step = 100;
  child.plan_id = plan_id;
  const int64_t child_id = store.create_run(child);
  const RunInfo c = store.run(child_id);
  EXPECT_EQ(c.spec.parent_run_id, id);
  EXPECT_EQ(c.spec.parent_step, 100);
  EXPECT_EQ(c.spec.plan_id, plan_id);

  r = store.run(id);
  ASSERT_EQ(r.checkpoints.size(), 2u);
  EXPECT_EQ(r.checkpoints[0].step, 50);
  EXPECT_EQ(r.checkpoints[1].path, "/ckpt/run1/step100.safetensors");

  store.set_run_notes(id, "notes changed");
  store.set_run_name(id, "renamed");
  store.set_run_status(id, RunStatus::failed, "loss is NaN at step 120 (layer model.layers.1.mlp.down_proj)");
  r = store.run(id);
  EXPECT_EQ(r.spec.notes, "notes changed");
  EXPECT_EQ(r.spec.name, "renamed");
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.status_message.find("NaN"), std::string::npos);
  EXPECT_TRUE(r.ended_ms.has_value());

  const auto all = store.runs();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].id, child_id);  // newest first

  EXPECT_THROW(store.run(999), Error);
  EXPECT_FALSE(store.find_run(999).has_value());
  RunSpec orphan = tiny_spec("orphan");
  orphan.parent_run_id = 999;
  EXPECT_THROW(store.create_run(orphan), Error);
}

// The GUI polls change_counter() and re-reads only when it moved: it must move on a commit by
// another connection and on one through this connection, and stay put otherwise.
TEST(StoreChangeCounter, MovesOnEveryCommitAndOnlyThen) {
  TempDir dir;
  Store viewer(dir.file("w.db"));
  const uint64_t c0 = viewer.change_counter();
  EXPECT_EQ(viewer.change_counter(), c0) << "nothing was written";
  (void)viewer.runs();
  EXPECT_EQ(viewer.change_counter(), c0) << "reads are not changes";
  Store writer(dir.file("w.db"));
  const int64_t id = writer.create_run(tiny_spec("other connection"));
  const uint64_t c1 = viewer.change_counter();
  EXPECT_NE(c1, c0) << "a commit by another connection";
  EXPECT_EQ(viewer.change_counter(), c1);
  writer.set_run_notes(id, "second commit");
  const uint64_t c2 = viewer.change_counter();
  EXPECT_NE(c2, c1);
  viewer.set_run_name(id, "renamed here");
  EXPECT_NE(viewer.change_counter(), c2) << "a commit through this connection";
}

TEST(StoreRuns, StatusNamesParseBack) {
  for (RunStatus s : {RunStatus::running, RunStatus::finished, RunStatus::failed, RunStatus::interrupted})
    EXPECT_EQ(parse_run_status(run_status_name(s)), s);
  EXPECT_THROW(parse_run_status("done"), Error);
  for (Metric m : {Metric::train_loss, Metric::val_loss, Metric::lr, Metric::grad_norm, Metric::tokens_per_s,
                   Metric::fp4_fraction, Metric::bf16_gap})
    EXPECT_EQ(parse_metric(metric_name(m)), m);
  EXPECT_THROW(parse_metric("loss"), Error);
}

TEST(StoreRuns, DeleteCascadesToMetricsAndKeepsPlans) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  std::vector<MetricRow> rows;
  for (int s = 0; s < 20; ++s) rows.push_back(row_for_step(s));
  store.append_metrics(id, rows);
  PlanSolveInfo solve;
  solve.run_id = id;
  const int64_t plan_id = store.add_plan(sample_plan(tiny_dims()), solve);
  store.delete_run(id);
  EXPECT_FALSE(store.find_run(id).has_value());
  EXPECT_TRUE(store.metrics(id).empty());
  EXPECT_FALSE(store.plan(plan_id).solve.run_id.has_value());  // the plan survives, detached
}

TEST(StoreMetrics, RowsRoundTripIncludingNullsAndNaN) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  std::vector<MetricRow> rows;
  for (int s = 0; s < 1000; ++s) rows.push_back(row_for_step(s));
  rows[17].train_loss = std::numeric_limits<double>::quiet_NaN();  // a diverged step stays visible
  rows[18].train_loss = std::numeric_limits<double>::infinity();
  store.append_metrics(id, std::span(rows).subspan(0, 600));
  store.append_metrics(id, std::span(rows).subspan(600));
  const auto back = store.metrics(id);
  ASSERT_EQ(back.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i == 17) {
      EXPECT_TRUE(std::isnan(back[i].train_loss));
      continue;
    }
    EXPECT_EQ(back[i], rows[i]) << "step " << i;
  }
  const RunInfo r = store.run(id);
  EXPECT_EQ(r.last_step, 999);
  EXPECT_EQ(r.metric_rows, 1000);

  // A step range.
  const auto mid = store.metrics(id, 100, 199);
  ASSERT_EQ(mid.size(), 100u);
  EXPECT_EQ(mid.front().step, 100);
  EXPECT_EQ(mid.back().step, 199);

  // Re-recording steps (resume after a checkpoint) replaces rows instead of duplicating them.
  std::vector<MetricRow> again;
  for (int s = 990; s < 1010; ++s) {
    MetricRow m = row_for_step(s);
    m.train_loss = 42.0;
    again.push_back(m);
  }
  store.append_metrics(id, again);
  const RunInfo r2 = store.run(id);
  EXPECT_EQ(r2.metric_rows, 1010);
  EXPECT_EQ(r2.last_step, 1009);
  EXPECT_EQ(store.metrics(id, 995, 995).at(0).train_loss, 42.0);

  EXPECT_THROW(store.append_metrics(12345, rows), Error);  // unknown run
}

TEST(StoreMetrics, CurveMatchesIndependentMinMaxOracle) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  std::vector<MetricRow> rows;
  for (int s = 0; s < 5003; ++s) {
    MetricRow m = row_for_step(s);
    if (s == 3001) m.train_loss = 50.0;  // a spike must survive downsampling
    rows.push_back(m);
  }
  store.append_metrics(id, rows);
  for (Metric metric : {Metric::train_loss, Metric::val_loss, Metric::bf16_gap, Metric::grad_norm}) {
    std::vector<CurvePoint> full;
    for (const auto& r : rows) {
      std::optional<double> v;
      switch (metric) {
        case Metric::train_loss:
          v = r.train_loss;
          break;
        case Metric::val_loss:
          v = r.val_loss;
          break;
        case Metric::bf16_gap:
          v = r.bf16_gap;
          break;
        default:
          v = r.grad_norm;
          break;
      }
      if (v) full.push_back({r.step, *v});
    }
    for (int max_points : {2, 7, 100, 400, 20000}) {
      const auto got = store.curve(id, metric, max_points);
      EXPECT_EQ(got, min_max_oracle(full, max_points)) << metric_name(metric) << " max_points " << max_points;
      EXPECT_LE(got.size(), size_t(max_points));
    }
  }
  const auto c = store.curve(id, Metric::train_loss, 200);
  bool spike = false;
  for (const auto& p : c) spike |= p.step == 3001 && p.value == 50.0;
  EXPECT_TRUE(spike);
  // A sub-range.
  const auto sub = store.curve(id, Metric::train_loss, 1000, 100, 299);
  ASSERT_EQ(sub.size(), 200u);
  EXPECT_EQ(sub.front().step, 100);
  EXPECT_THROW(store.curve(id, Metric::train_loss, 1), Error);
}

TEST(StoreMetrics, CurvesFromOneScanEqualSingleCurves) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  std::vector<MetricRow> rows;
  for (int s = 0; s < 3000; ++s) rows.push_back(row_for_step(s));
  store.append_metrics(id, rows);
  const std::vector<Metric> all = {Metric::train_loss,   Metric::val_loss,     Metric::lr,      Metric::grad_norm,
                                   Metric::tokens_per_s, Metric::fp4_fraction, Metric::bf16_gap};
  for (int max_points : {2, 300, 5000}) {
    const auto got = store.curves(id, all, max_points, 10, 2900);
    ASSERT_EQ(got.size(), all.size());
    for (Metric m : all)
      EXPECT_EQ(got.at(m), store.curve(id, m, max_points, 10, 2900)) << metric_name(m) << " " << max_points;
  }
  EXPECT_TRUE(store.curves(id, {}, 100).empty());
}

TEST(StoreStats, RoundTripIsLossless) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t run_id = store.create_run(tiny_spec());
  StatsRound round = sample_round(tiny_dims(), 1200);
  round.globals["nan_is_kept"] = std::numeric_limits<double>::quiet_NaN();
  round.layers[3].scalars["denormal"] = 4.9406564584124654e-324;
  round.layers[5].vectors["nan_vec"] = {1.0f, std::numeric_limits<float>::quiet_NaN(), -0.0f};
  const int64_t rid = store.add_stats_round(round, run_id);
  StatsRound back = store.stats_round(rid);
  // NaN != NaN, so compare it apart and then the rest exactly.
  EXPECT_TRUE(std::isnan(back.globals.at("nan_is_kept")));
  back.globals.erase("nan_is_kept");
  round.globals.erase("nan_is_kept");
  const auto nan_vec = back.layers[5].vectors.at("nan_vec");
  ASSERT_EQ(nan_vec.size(), 3u);
  EXPECT_TRUE(std::isnan(nan_vec[1]));
  EXPECT_TRUE(std::signbit(nan_vec[2]));
  back.layers[5].vectors.erase("nan_vec");
  round.layers[5].vectors.erase("nan_vec");
  EXPECT_EQ(back, round);

  // Through snip-stats/1 as well (the import path).
  const StatsRound from_json = stats_from_json(stats_to_json(sample_round(tiny_dims(3), 7)), "test");
  EXPECT_EQ(store.stats_round(store.add_stats_round(from_json)), from_json);

  const auto infos = store.stats_rounds(run_id);
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].id, rid);
  EXPECT_EQ(infos[0].step, 1200);
  EXPECT_EQ(infos[0].num_layers, 14);
  EXPECT_EQ(store.stats_rounds().size(), 2u);
  EXPECT_THROW(store.stats_round(999), Error);
}

TEST(StorePlans, PlanAndSolveInfoRoundTrip) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t run_id = store.create_run(tiny_spec());
  const int64_t round_id = store.add_stats_round(sample_round(tiny_dims(), 50), run_id);
  const Plan plan = sample_plan(tiny_dims());
  PlanSolveInfo solve;
  solve.run_id = run_id;
  solve.stats_round_id = round_id;
  solve.options = {{"lambda", 0.1},
                   {"ties", {"qkv", "gate_up"}},
                   {"pins", {{"model.layers.0.self_attn.q_proj", "fp8"}}},
                   {"per_role", false}};
  solve.objective = 0.123456789012345;
  solve.predicted_delta_loss = 1.5e-4;
  solve.predicted_delta_weight = 2.5e-3;
  solve.solver_status = "optimal";
  solve.solve_time_s = 0.0042;
  solve.mip_gap = 0.0;
  const int64_t pid = store.add_plan(plan, solve);
  const PlanRecord back = store.plan(pid);
  EXPECT_EQ(back.id, pid);
  EXPECT_EQ(back.plan, plan);
  EXPECT_EQ(back.solve, solve);
  EXPECT_GT(back.created_ms, 0);

  // Defaults (no solver information) stay absent, not zero.
  const int64_t bare = store.add_plan(uniform_plan(tiny_dims(), Precision::fp4));
  const PlanRecord b = store.plan(bare);
  EXPECT_FALSE(b.solve.objective.has_value());
  EXPECT_FALSE(b.solve.run_id.has_value());
  EXPECT_EQ(b.plan, uniform_plan(tiny_dims(), Precision::fp4));

  EXPECT_EQ(store.plans(run_id).size(), 1u);
  EXPECT_EQ(store.plans().size(), 2u);
  // Resolution against the run's model.
  std::vector<std::string> warnings;
  const auto resolved = store.resolve_plan_for_run(pid, run_id, &warnings);
  ASSERT_EQ(resolved.size(), 14u);
  EXPECT_EQ(resolved[0], (LinearPrecision{Precision::fp8, Precision::fp4, Precision::fp8}));
  EXPECT_EQ(resolved[6], LinearPrecision::uniform(Precision::fp4));
  EXPECT_TRUE(warnings.empty());

  PlanSolveInfo bad;
  bad.stats_round_id = 999;
  EXPECT_THROW(store.add_plan(plan, bad), Error);
  EXPECT_THROW(store.plan(999), Error);
}

TEST(StorePlans, TimelineOpensAndClosesEntries) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t run_id = store.create_run(tiny_spec());
  const int64_t p1 = store.add_plan(uniform_plan(tiny_dims(), Precision::fp8));
  const int64_t p2 = store.add_plan(sample_plan(tiny_dims()));
  store.set_plan_in_effect(run_id, p1, 0);
  store.set_plan_in_effect(run_id, p2, 50);
  store.set_plan_in_effect(run_id, p1, 100);
  store.end_plan_timeline(run_id, 149);
  const std::vector<PlanTimelineEntry> want = {{p1, 0, 49}, {p2, 50, 99}, {p1, 100, 149}};
  EXPECT_EQ(store.plan_timeline(run_id), want);
  EXPECT_THROW(store.set_plan_in_effect(run_id, 999, 150), Error);
  EXPECT_EQ(store.plan_timeline(run_id), want);  // the failed call changed nothing
}

TEST(StoreValidation, RoundTrip) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t run_id = store.create_run(tiny_spec());
  ValidationResult v;
  v.run_id = run_id;
  v.step = 200;
  v.options = {{"batches", 8}, {"mode", "upstream"}};
  v.summary = {{"spearman_dl_fp4", 0.82}, {"spearman_dw_fp4", 0.97}, {"spearman_q_diff", 0.61}};
  for (const auto& info : linear_layers(tiny_dims()))
    for (const char* p : {"fp8", "fp4"})
      v.entries.push_back({info.name, p, {{"dl_pred", 1e-5 * info.index}, {"dl_true", 2e-5 * info.index}}});
  v.entries.push_back({"model.layers.0.mlp.up_proj", "fp4", {}});  // no values: still an entry
  const int64_t id = store.add_validation(v);
  const ValidationResult back = store.validation(id);
  EXPECT_EQ(back.run_id, v.run_id);
  EXPECT_EQ(back.step, v.step);
  EXPECT_EQ(back.options, v.options);
  EXPECT_EQ(back.summary, v.summary);
  EXPECT_EQ(back.entries, v.entries);
  ASSERT_EQ(store.validations(run_id).size(), 1u);
  EXPECT_TRUE(store.validations(run_id)[0].entries.empty());  // listing is light
  EXPECT_THROW(store.validation(999), Error);
}

TEST(StoreTransaction, RollsBackEverythingOnException) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  try {
    Store::Transaction txn(store);
    store.append_metrics(id, std::vector<MetricRow>{row_for_step(0), row_for_step(1)});
    store.add_checkpoint(id, 1, "/ckpt/1");
    throw std::runtime_error("trainer failed mid-step");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(store.metrics(id).empty());
  EXPECT_TRUE(store.checkpoints(id).empty());
  EXPECT_EQ(store.run(id).last_step, -1);
  {
    Store::Transaction txn(store);
    store.append_metrics(id, std::vector<MetricRow>{row_for_step(0)});
    txn.commit();
  }
  EXPECT_EQ(store.metrics(id).size(), 1u);
}

TEST(RunRecorder, FlushesEveryNRowsAndOnFinish) {
  TempDir dir;
  Store store(dir.file("w.db"));
  Store reader(dir.file("w.db"));  // a second connection sees only flushed rows
  const int64_t id = store.create_run(tiny_spec());
  RunRecorder rec(store, id, {.flush_rows = 10, .flush_ms = 1000000});
  for (int s = 0; s < 25; ++s) rec.record(row_for_step(s));
  EXPECT_EQ(rec.rows_written(), 20);
  EXPECT_EQ(rec.rows_buffered(), 5u);
  EXPECT_EQ(reader.metrics(id).size(), 20u);
  rec.add_checkpoint(24, "/ckpt/24");  // flushes first: the checkpoint never precedes its steps
  EXPECT_EQ(reader.metrics(id).size(), 25u);
  rec.finish();
  const RunInfo r = reader.run(id);
  EXPECT_EQ(r.status, RunStatus::finished);
  EXPECT_EQ(r.metric_rows, 25);
  EXPECT_EQ(r.checkpoints.size(), 1u);
}

TEST(RunRecorder, FlushesWhenOldestRowIsDue) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  auto t = std::chrono::steady_clock::time_point{};  // the recorder's clock, advanced by hand
  RunRecorder rec(store, id, {.flush_rows = 1000, .flush_ms = 20, .clock = [&t] { return t; }});
  rec.record(row_for_step(0));
  t += std::chrono::milliseconds(19);
  rec.record(row_for_step(1));
  EXPECT_EQ(rec.rows_written(), 0);  // the oldest row is 19 ms old: not yet due
  t += std::chrono::milliseconds(1);
  rec.record(row_for_step(2));
  EXPECT_EQ(rec.rows_written(), 3);
  rec.fail("diverged");
  EXPECT_EQ(store.run(id).status, RunStatus::failed);
  EXPECT_EQ(store.run(id).status_message, "diverged");
}

TEST(RunRecorder, DestroyedUnfinishedMarksInterruptedAndKeepsRows) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  {
    RunRecorder rec(store, id, {.flush_rows = 100, .flush_ms = 1000000});
    for (int s = 0; s < 7; ++s) rec.record(row_for_step(s));
  }
  const RunInfo r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::interrupted);
  EXPECT_EQ(r.metric_rows, 7);
  EXPECT_THROW(RunRecorder(store, 999), Error);
}

TEST(StoreRuns, ClaimResumesFromCheckpointStep) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  std::vector<MetricRow> rows;
  for (int s = 0; s < 80; ++s) rows.push_back(row_for_step(s));
  store.append_metrics(id, rows);
  const int64_t p = store.add_plan(sample_plan(tiny_dims()));
  store.set_plan_in_effect(id, p, 0);
  store.set_plan_in_effect(id, p, 60);
  store.set_run_status(id, RunStatus::interrupted, "stopped");
  store.claim_run(id, 49);
  const RunInfo r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::running);
  EXPECT_EQ(r.last_step, 49);
  EXPECT_EQ(r.metric_rows, 50);
  EXPECT_FALSE(r.ended_ms.has_value());
  // The plan in effect at the checkpoint is open again; the one that started later is gone.
  const std::vector<PlanTimelineEntry> want = {{p, 0, std::nullopt}};
  EXPECT_EQ(store.plan_timeline(id), want);
}

// An adaptive run resumed from step 4 makes its rounds at steps 4 and 8 again: the copies the
// stopped trajectory stored go, with the plans made from them, unless something else uses them.
TEST(StoreRuns, ClaimDropsTheRoundsAndPlansItWillMakeAgain) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  std::map<int64_t, int64_t> round_at, plan_at;  // step -> id
  for (int64_t k : {0, 4, 8, 12}) {
    round_at[k] = store.add_stats_round(sample_round(tiny_dims(), k), id);
    PlanSolveInfo info;
    info.run_id = id;
    info.stats_round_id = round_at[k];
    plan_at[k] = store.add_plan(sample_plan(tiny_dims()), info);
    store.set_plan_in_effect(id, plan_at[k], k + 1);
  }
  PlanSolveInfo by_hand;  // a plan someone made from round 12 in the Plan view
  by_hand.stats_round_id = round_at[12];
  const int64_t kept_plan = store.add_plan(sample_plan(tiny_dims()), by_hand);
  store.set_run_status(id, RunStatus::interrupted, "stopped");

  store.claim_run(id, 4);
  std::vector<int64_t> rounds, plans;
  for (const StatsRoundInfo& r : store.stats_rounds(id)) rounds.push_back(r.id);
  for (const PlanRecord& p : store.plans()) plans.push_back(p.id);
  std::sort(rounds.begin(), rounds.end());
  std::sort(plans.begin(), plans.end());
  EXPECT_EQ(rounds, (std::vector<int64_t>{round_at[0], round_at[12]}));
  EXPECT_EQ(plans, (std::vector<int64_t>{plan_at[0], kept_plan}));
  // (closed at the checkpoint's step; RecordedTraining reopens it when the run goes on)
  const std::vector<PlanTimelineEntry> want = {{plan_at[0], 1, 4}};
  EXPECT_EQ(store.plan_timeline(id), want);
}

TEST(StoreExport, CsvAndJsonForms) {
  std::vector<MetricRow> rows = {row_for_step(0), row_for_step(1)};
  const std::string csv = metrics_to_csv(rows);
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "step,train_loss,val_loss,lr,grad_norm,tokens_per_s,fp4_fraction,bf16_gap");
  // step 1 has no validation loss and no probe: empty fields.
  const std::string line1 = csv.substr(csv.rfind('\n', csv.size() - 2) + 1);
  EXPECT_EQ(line1.rfind("1,", 0), 0u);
  EXPECT_NE(line1.find(",,"), std::string::npos);
  EXPECT_EQ(std::stod(csv.substr(csv.find('\n') + 3)), rows[0].train_loss);  // %.17g round-trips

  const std::string pcsv = plan_to_csv(sample_plan(tiny_dims()));
  EXPECT_EQ(std::count(pcsv.begin(), pcsv.end(), '\n'), 1 + 14 * 3);
  EXPECT_NE(pcsv.find("model.layers.0.self_attn.q_proj,0,dgrad,fp4\n"), std::string::npos);
  EXPECT_LT(pcsv.find("model.layers.0.mlp.down_proj"), pcsv.find("model.layers.1.self_attn.q_proj"));
}

TEST(RunRecorder, FailedFinalFlushMarksRunFailedNotFinished) {
  TempDir dir;
  Store store(dir.file("w.db"));
  const int64_t id = store.create_run(tiny_spec());
  RunRecorder rec(store, id, {.flush_rows = 100, .flush_ms = 1000000});
  rec.record(row_for_step(0));
  MetricRow bad = row_for_step(1);
  bad.step = -1;  // the store refuses the batch, so the final flush fails
  rec.record(bad);
  EXPECT_THROW(rec.finish(), Error);
  const RunInfo r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::failed);
  EXPECT_NE(r.status_message.find("could not be written"), std::string::npos) << r.status_message;
}

TEST(StoreConcurrency, WriterWaitsForBusyTimeoutThenReportsLock) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store store(path);
  const int64_t id = store.create_run(tiny_spec());
  Store other(path, {.busy_timeout_ms = 50});
  Store::Transaction lock(store);  // holds the write lock
  try {
    other.append_metrics(id, std::vector<MetricRow>{row_for_step(0)});
    FAIL() << "wrote while another connection held the write lock";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("busy timeout"), std::string::npos) << e.what();
  }
  lock.commit();
  other.append_metrics(id, std::vector<MetricRow>{row_for_step(0)});
  EXPECT_EQ(store.run(id).metric_rows, 1);
}

// Another process holding the write lock (a sqlite3 shell in BEGIN IMMEDIATE, a backup) never
// fails the recorder: the rows stay in memory, a warning is given once, and they are all
// written once the lock is free. The store's own busy counter says the lock was hit, so
// nothing depends on timing.
TEST(RunRecorder, BusyDatabaseKeepsRowsInMemoryUntilTheLockIsFree) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store holder(path);
  Store store(path, {.busy_timeout_ms = 20});
  const int64_t id = store.create_run(tiny_spec());
  std::vector<std::string> warnings;
  RunRecorder rec(store, id,
                  {.flush_rows = 4,
                   .flush_ms = 1000000,
                   .busy_retry_ms = 1,
                   .busy_retry_max_ms = 1,
                   .on_busy = [&](const std::string& m) { warnings.push_back(m); }});
  auto lock = std::make_unique<Store::Transaction>(holder);  // holds the write lock
  for (int s = 0; s < 40; ++s) rec.record(row_for_step(s));
  EXPECT_GT(rec.busy_count(), 0);
  EXPECT_EQ(rec.rows_written(), 0);
  EXPECT_EQ(rec.rows_buffered(), 40u);
  ASSERT_EQ(warnings.size(), 1u) << "warned once, not per retry";
  EXPECT_NE(warnings[0].find("is locked by another process; rows are kept in memory"), std::string::npos)
      << warnings[0];
  EXPECT_FALSE(rec.flush());  // still locked: false, nothing lost
  lock->commit();
  lock.reset();
  EXPECT_TRUE(rec.flush());  // the lock is free: everything kept is written
  EXPECT_EQ(rec.rows_written(), 40);
  for (int s = 40; s < 44; ++s) rec.record(row_for_step(s));
  rec.finish();
  EXPECT_EQ(store.run(id).status, RunStatus::finished);
  EXPECT_EQ(store.metrics(id).size(), 44u);
}

// Past max_buffered_rows, and for writes that must happen (a checkpoint, the final status), the
// recorder waits for the lock instead of failing; the holder releases it when told the writer
// hit it (on_busy), not after a delay.
TEST(RunRecorder, BoundedBufferAndCheckpointWaitForTheLockInsteadOfFailing) {
  TempDir dir;
  const std::string path = dir.file("w.db");
  Store holder(path);
  Store store(path, {.busy_timeout_ms = 20});
  const int64_t id = store.create_run(tiny_spec());
  std::promise<void> hit;
  std::atomic<int> hits{0};
  RunRecorder rec(store, id,
                  {.flush_rows = 1000,
                   .flush_ms = 1000000,
                   .max_buffered_rows = 8,
                   .busy_retry_ms = 1,
                   .busy_retry_max_ms = 2,
                   .on_busy = [&](const std::string&) {
                     if (hits++ == 0) hit.set_value();
                   }});
  Store::Transaction lock(holder);
  std::thread writer([&] {
    for (int s = 0; s < 8; ++s) rec.record(row_for_step(s));  // the 8th waits for the lock
    rec.add_checkpoint(7, "/ckpt/7");
    rec.finish();
  });
  hit.get_future().wait();  // the writer found the lock held
  lock.commit();
  writer.join();
  EXPECT_GE(rec.busy_count(), 1);
  const RunInfo r = store.run(id);
  EXPECT_EQ(r.status, RunStatus::finished);
  EXPECT_EQ(r.metric_rows, 8);
  EXPECT_EQ(r.checkpoints.size(), 1u);
}
