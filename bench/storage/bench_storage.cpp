// Store throughput: per-step metric inserts (batched transactions vs the reference of one
// commit per row) and drawing a 100k-step curve (downsampled to 2,000 points vs the
// reference full load). Every measured path is first checked against its reference; the
// ratios are printed after the benchmarks. Targets: ≥ 200k rows/s batched,
// ≤ 50 ms per downsampled curve.
//
//   bench_storage [--db-dir DIR] [google-benchmark flags]   (DIR: where the test database lives)
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "snip/curve.h"
#include "snip/store.h"

namespace {

std::string g_dir;  // directory for the benchmark databases
const char* const kDbFiles[] = {"insert_batched.db", "insert_single.db", "curve.db"};

constexpr int64_t kCurveSteps = 100000;
constexpr int kCurvePoints = 2000;
constexpr int kBatchRows = 1000;
constexpr double kInsertRows = 100000;  // rows per iteration of the batched benchmark
constexpr double kSingleRows = 5000;    // rows per iteration of the one-commit-per-row reference

snip::MetricRow row_for_step(int64_t s) {
  snip::MetricRow r;
  r.step = s;
  r.train_loss = 4.0 / std::sqrt(1.0 + double(s)) + 0.05 * std::sin(double(s) * 0.01);
  if (s % 100 == 0) r.val_loss = r.train_loss + 0.1;
  r.lr = 3e-4;
  r.grad_norm = 1.0 + 0.1 * std::cos(double(s));
  r.tokens_per_s = 20000.0;
  r.fp4_fraction = 0.75;
  return r;
}

snip::RunSpec spec(const char* name) {
  snip::RunSpec s;
  s.name = name;
  s.dims = {256, 688, 4, 8, 4};
  s.method = "snip";
  return s;
}

std::string fresh_db(const std::string& name) {
  const std::string path = g_dir + "/" + name;
  for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path + suffix);
  return path;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "bench_storage: check failed: %s\n", what);
    std::exit(1);
  }
}

// Batched: kBatchRows rows per transaction (what RunRecorder does with flush_rows = 1000).
void BM_InsertBatched(benchmark::State& state) {
  const int64_t rows_per_iter = state.range(0);
  std::vector<snip::MetricRow> rows;
  for (int64_t s = 0; s < rows_per_iter; ++s) rows.push_back(row_for_step(s));
  snip::Store store(fresh_db("insert_batched.db"));
  {  // check: what goes in comes back out
    const int64_t id = store.create_run(spec("check"));
    store.append_metrics(id, std::span(rows).subspan(0, 5000));
    check(store.metrics(id) == std::vector<snip::MetricRow>(rows.begin(), rows.begin() + 5000), "batched round trip");
  }
  int64_t total = 0;
  for (auto _ : state) {
    const int64_t id = store.create_run(spec("batched"));
    for (int64_t i = 0; i < rows_per_iter; i += kBatchRows)
      store.append_metrics(
          id, std::span(rows).subspan(size_t(i), size_t(std::min<int64_t>(kBatchRows, rows_per_iter - i))));
    total += rows_per_iter;
  }
  state.counters["rows_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
}

// Reference: one transaction (one commit) per row.
void BM_InsertOneCommitPerRow(benchmark::State& state) {
  const int64_t rows_per_iter = state.range(0);
  std::vector<snip::MetricRow> rows;
  for (int64_t s = 0; s < rows_per_iter; ++s) rows.push_back(row_for_step(s));
  snip::Store store(fresh_db("insert_single.db"));
  int64_t total = 0;
  for (auto _ : state) {
    const int64_t id = store.create_run(spec("single"));
    for (const auto& r : rows) store.append_metrics(id, std::span(&r, 1));
    total += rows_per_iter;
  }
  state.counters["rows_per_s"] = benchmark::Counter(double(total), benchmark::Counter::kIsRate);
}

struct CurveDb {
  std::string path;
  int64_t run_id = 0;
};

const CurveDb& curve_db() {
  static const CurveDb db = [] {
    CurveDb d;
    d.path = fresh_db("curve.db");
    snip::Store store(d.path);
    // Other runs in the same file, as in a real workbench database.
    for (int other = 0; other < 2; ++other) {
      const int64_t id = store.create_run(spec("other"));
      std::vector<snip::MetricRow> rows;
      for (int64_t s = 0; s < kCurveSteps; ++s) rows.push_back(row_for_step(s));
      store.append_metrics(id, rows);
      if (other == 0) d.run_id = id;
    }
    return d;
  }();
  return db;
}

void BM_CurveDownsampled(benchmark::State& state) {
  const CurveDb& db = curve_db();
  snip::Store store(db.path);
  {  // check against the reference: downsampling the fully loaded curve
    std::vector<snip::CurvePoint> full;
    for (const auto& r : store.metrics(db.run_id)) full.push_back({r.step, r.train_loss});
    check(full.size() == size_t(kCurveSteps), "curve rows");
    const auto got = store.curve(db.run_id, snip::Metric::train_loss, kCurvePoints);
    check(got == snip::downsample_min_max(full, kCurvePoints), "downsampled curve equals the reference");
    check(got.size() <= size_t(kCurvePoints) && got.size() > size_t(kCurvePoints) / 2, "curve size");
  }
  for (auto _ : state) {
    auto c = store.curve(db.run_id, snip::Metric::train_loss, kCurvePoints);
    benchmark::DoNotOptimize(c.data());
  }
}

// A monitor view's refresh: six curves of one run, in one scan (Store::curves) ...
const std::vector<snip::Metric> kMonitorMetrics = {snip::Metric::train_loss,   snip::Metric::val_loss,
                                                   snip::Metric::lr,           snip::Metric::grad_norm,
                                                   snip::Metric::fp4_fraction, snip::Metric::bf16_gap};

void BM_SixCurvesOneScan(benchmark::State& state) {
  const CurveDb& db = curve_db();
  snip::Store store(db.path);
  const auto got = store.curves(db.run_id, kMonitorMetrics, kCurvePoints);
  for (snip::Metric m : kMonitorMetrics)
    check(got.at(m) == store.curve(db.run_id, m, kCurvePoints), "curves() equals curve() per metric");
  for (auto _ : state) {
    auto c = store.curves(db.run_id, kMonitorMetrics, kCurvePoints);
    benchmark::DoNotOptimize(c.size());
  }
}

// ... against six separate curve() calls (the reference).
void BM_SixCurvesSeparately(benchmark::State& state) {
  const CurveDb& db = curve_db();
  snip::Store store(db.path);
  for (auto _ : state)
    for (snip::Metric m : kMonitorMetrics) {
      auto c = store.curve(db.run_id, m, kCurvePoints);
      benchmark::DoNotOptimize(c.data());
    }
}

// Reference: loading every row of the run (what a plot without downsampling would do).
void BM_CurveFullLoad(benchmark::State& state) {
  const CurveDb& db = curve_db();
  snip::Store store(db.path);
  for (auto _ : state) {
    auto rows = store.metrics(db.run_id);
    benchmark::DoNotOptimize(rows.data());
  }
}

// The writers' open (StoreOptions::check_integrity: SQLite's quick_check over every page)
// against the plain open, alternated in each iteration on the 200k-row curve database: what
// `snip train`, `compare`, `collect` and `import` pay once at start-up to refuse a damaged file.
void BM_OpenWithIntegrityCheck(benchmark::State& state) {
  using clock = std::chrono::steady_clock;
  const CurveDb& db = curve_db();
  const double mb = double(std::filesystem::file_size(db.path)) / 1e6;
  std::vector<double> extra_ms;
  for (auto _ : state) {
    const auto t0 = clock::now();
    { snip::Store plain(db.path); }
    const auto t1 = clock::now();
    { snip::Store checked(db.path, {.check_integrity = true}); }
    const auto t2 = clock::now();
    const double plain_s = std::chrono::duration<double>(t1 - t0).count();
    const double checked_s = std::chrono::duration<double>(t2 - t1).count();
    state.SetIterationTime(checked_s);
    extra_ms.push_back(1e3 * (checked_s - plain_s));
  }
  std::sort(extra_ms.begin(), extra_ms.end());
  const double median = extra_ms[extra_ms.size() / 2];
  state.counters["db_MB"] = mb;
  state.counters["extra_ms_median"] = median;
  state.counters["extra_ms_per_MB"] = median / mb;
}

BENCHMARK(BM_InsertBatched)->Arg(int64_t(kInsertRows))->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(2.0);
BENCHMARK(BM_InsertOneCommitPerRow)
    ->Arg(int64_t(kSingleRows))
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->MinTime(2.0);
BENCHMARK(BM_CurveDownsampled)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CurveFullLoad)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_OpenWithIntegrityCheck)->Unit(benchmark::kMillisecond)->UseManualTime();
BENCHMARK(BM_SixCurvesOneScan)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SixCurvesSeparately)->Unit(benchmark::kMillisecond)->UseRealTime();

// Collects per-benchmark real time per iteration and the rows/s counters for the summary.
class Collector : public benchmark::ConsoleReporter {
 public:
  Collector() : ConsoleReporter(OO_Tabular) {}  // no colour codes: the output goes into RESULTS.md
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      const std::string name = r.benchmark_name();
      seconds[name] = r.GetAdjustedRealTime() / 1e3;  // reported unit is ms
      cpu_seconds[name] = r.GetAdjustedCPUTime() / 1e3;
    }
  }
  std::map<std::string, double> seconds, cpu_seconds;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--db-dir") == 0 && i + 1 < argc) {
      g_dir = argv[++i];
      continue;
    }
    args.push_back(argv[i]);
  }
  const bool own_dir = g_dir.empty();
  if (own_dir) {
    g_dir = (std::filesystem::temp_directory_path() / ("snip_bench_storage_" + std::to_string(getpid()))).string();
  }
  std::filesystem::create_directories(g_dir);
  int n = int(args.size());
  benchmark::Initialize(&n, args.data());
  Collector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  auto find = [](const std::map<std::string, double>& m, const std::string& prefix) -> double {
    for (const auto& [k, v] : m)
      if (k.rfind(prefix, 0) == 0) return v;
    return NAN;
  };
  // Wall-clock numbers are what a user sees; CPU numbers show the cost on a busy machine
  // (the 2-core build machine is shared, so wall time includes waiting for a core).
  const double batched = kInsertRows / find(reporter.seconds, "BM_InsertBatched");
  const double batched_cpu = kInsertRows / find(reporter.cpu_seconds, "BM_InsertBatched");
  const double single = kSingleRows / find(reporter.seconds, "BM_InsertOneCommitPerRow");
  const double single_cpu = kSingleRows / find(reporter.cpu_seconds, "BM_InsertOneCommitPerRow");
  const double curve_s = find(reporter.seconds, "BM_CurveDownsampled");
  const double curve_cpu = find(reporter.cpu_seconds, "BM_CurveDownsampled");
  const double full_s = find(reporter.seconds, "BM_CurveFullLoad");
  const double full_cpu = find(reporter.cpu_seconds, "BM_CurveFullLoad");
  std::printf("\nsummary (database in %s; wall clock, CPU time in brackets)\n", g_dir.c_str());
  if (!std::isnan(batched))
    std::printf("  metric inserts, %d rows/txn:   %.0f rows/s [%.0f] (target >= 200000: %s)\n", kBatchRows, batched,
                batched_cpu, batched >= 200000 ? "met" : "MISSED");
  if (!std::isnan(batched) && !std::isnan(single))
    std::printf("  reference, one commit per row:  %.0f rows/s [%.0f] -> batched is %.1fx faster [%.1fx]\n", single,
                single_cpu, batched / single, batched_cpu / single_cpu);
  if (!std::isnan(curve_s))
    std::printf("  100k-step curve -> %d points:  %.2f ms [%.2f] (target <= 50 ms: %s)\n", kCurvePoints, curve_s * 1e3,
                curve_cpu * 1e3, curve_s * 1e3 <= 50 ? "met" : "MISSED");
  if (!std::isnan(curve_s) && !std::isnan(full_s))
    std::printf("  reference, full 100k-row load:  %.2f ms [%.2f] -> downsampled is %.2fx faster [%.2fx]\n",
                full_s * 1e3, full_cpu * 1e3, full_s / curve_s, full_cpu / curve_cpu);
  const double six_one = find(reporter.seconds, "BM_SixCurvesOneScan");
  const double six_one_cpu = find(reporter.cpu_seconds, "BM_SixCurvesOneScan");
  const double six_sep = find(reporter.seconds, "BM_SixCurvesSeparately");
  const double six_sep_cpu = find(reporter.cpu_seconds, "BM_SixCurvesSeparately");
  if (!std::isnan(six_one) && !std::isnan(six_sep))
    std::printf(
        "  six curves, one scan:           %.2f ms [%.2f] vs six curve() calls %.2f ms [%.2f] -> %.2fx [%.2fx]\n",
        six_one * 1e3, six_one_cpu * 1e3, six_sep * 1e3, six_sep_cpu * 1e3, six_sep / six_one,
        six_sep_cpu / six_one_cpu);
  // Remove only what this run created (--db-dir may name a directory with other files).
  std::error_code ec;
  for (const char* f : kDbFiles)
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(g_dir + "/" + f + suffix, ec);
  if (own_dir) std::filesystem::remove(g_dir, ec);
  return 0;
}
