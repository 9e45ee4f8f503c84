// Cost of one SNIP statistics round (clean BF16 pass, 3 backward-noise and 3 forward-noise
// passes, per-layer quantized GEMMs for fp8 and fp4, local residual maps) relative to one
// training step of the same batch, on the `small` preset (6 blocks, C 256, F 688) at 4×128
// tokens. The reference (a Trainer step, BF16 plan, and an FP4 step) is measured in the same
// run; counter x_step = round time / BF16 step time. BM_StatsRoundExactDw: the same round with
// the exact ΔW mode (validation only). Before timing, the round is checked: it
// must leave weights and AdamW state bit-identical and give finite SNIP costs for every layer.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>

#include "snip/planner.h"
#include "snip/stats_round.h"
#include "snip/trainer.h"

namespace {

snip::TrainConfig bench_config(const std::string& precision) {
  snip::TrainConfig c;
  c.model = snip::preset_config("small");
  c.batch_size = 4, c.seq_len = 128, c.steps = 100000;
  c.schedule.total = 100000, c.schedule.warmup = 5;
  c.eval_every = 0;
  c.precision = precision;
  return c;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// Process CPU time (all threads): on a loaded machine the ratio of CPU times is far steadier than
// the wall-time ratio (x_step_cpu; the work a round costs, not how it spreads over the cores).
double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
}

std::unique_ptr<snip::Trainer> g_trainer;  // shared, warmed up by a few steps
double g_step_ms = 0, g_fp4_step_ms = 0, g_step_cpu_ms = 0;

bool check_round() {
  snip::Trainer& t = *g_trainer;
  const int64_t n = t.model().num_params();
  std::vector<float> p(t.model().param_data(), t.model().param_data() + n), m(t.optimizer().m(), t.optimizer().m() + n);
  const snip::StatsRound r = snip::collect_stats_round(t);
  bool ok = std::memcmp(p.data(), t.model().param_data(), sizeof(float) * size_t(n)) == 0 &&
            std::memcmp(m.data(), t.optimizer().m(), sizeof(float) * size_t(n)) == 0;
  const snip::PlannerInput in = snip::planner_input_from_stats(r);
  for (const auto& l : in.snip.layers)
    ok = ok && std::isfinite(l.total_cost(snip::Precision::fp4)) && std::isfinite(l.total_cost(snip::Precision::fp8));
  std::printf("check: round leaves weights/AdamW unchanged and gives finite costs for %zu layers: %s\n",
              in.snip.layers.size(), ok ? "OK" : "FAILED");
  return ok;
}

double best_step_ms(snip::Trainer& t, int reps, double* best_cpu = nullptr) {
  double best = 1e300, bc = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    t.step();
    best = std::min(best, ms_since(t0));
    bc = std::min(bc, cpu_ms() - c0);
  }
  if (best_cpu) *best_cpu = bc;
  return best;
}

void BM_TrainStepBf16(benchmark::State& state) {
  for (auto _ : state) g_trainer->step();
}
BENCHMARK(BM_TrainStepBf16)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_StatsRound(benchmark::State& state) {
  double total = 0, best_cpu = 1e300;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cpu_ms();
    benchmark::DoNotOptimize(snip::collect_stats_round(*g_trainer));
    total += ms_since(t0);
    best_cpu = std::min(best_cpu, cpu_ms() - c0);
  }
  const double ms = total / double(state.iterations());
  state.counters["x_step_cpu"] = best_cpu / g_step_cpu_ms;  // best-of CPU time, round / BF16 step
  state.counters["round_ms"] = ms;
  state.counters["step_bf16_ms"] = g_step_ms;
  state.counters["step_fp4_ms"] = g_fp4_step_ms;
  state.counters["x_step"] = ms / g_step_ms;  // rounds cost this many BF16 training steps
  state.counters["x_step_fp4"] = ms / g_fp4_step_ms;
}
BENCHMARK(BM_StatsRound)->Unit(benchmark::kMillisecond)->Iterations(3);

// The same round with the exact ΔW mode (METHOD.md 5.2, validation only): one extra FP32
// backward per layer and precision seeded with the real dgrad error.
void BM_StatsRoundExactDw(benchmark::State& state) {
  snip::StatsRoundOptions o;
  o.exact_weight_divergence = true;
  double total = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    benchmark::DoNotOptimize(snip::collect_stats_round(*g_trainer, o));
    total += ms_since(t0);
  }
  const double ms = total / double(state.iterations());
  state.counters["round_ms"] = ms;
  state.counters["x_step"] = ms / g_step_ms;
}
BENCHMARK(BM_StatsRoundExactDw)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  g_trainer = std::make_unique<snip::Trainer>(bench_config("bf16"));
  for (int i = 0; i < 3; ++i) g_trainer->step();
  if (!check_round()) return 1;
  g_step_ms = best_step_ms(*g_trainer, 3, &g_step_cpu_ms);
  {
    snip::Trainer fp4(bench_config("fp4"));
    fp4.step();
    g_fp4_step_ms = best_step_ms(fp4, 3);
  }
  std::printf("reference: BF16 step %.1f ms (CPU %.1f ms), FP4 step %.1f ms (best of 3)\n", g_step_ms, g_step_cpu_ms,
              g_fp4_step_ms);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
