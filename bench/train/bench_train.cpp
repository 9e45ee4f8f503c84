// Training-step throughput of the `small` preset (FP32, BF16, all-FP8, all-FP4 plans) and peak
// memory vs the theoretical parameters + gradients + AdamW + activations, with a PyTorch 1.13
// reference of the same model, batch and sequence length run in the same process tree
// (bench/train/torch_reference.py). Before timing, the float step is checked against the
// double-precision reference path on the same weights and batch.
//
// Run: build/bench/train/bench_train [--benchmark_min_time=...]   (env SNIP_BENCH_PRESET, _B, _T, TORCH_THREADS;
// SNIP_BENCH_PAIRS=N adds N interleaved fp32/fp4 step pairs, for a machine shared with other jobs)
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "snip/atomic_file.h"
#include "snip/llama.h"
#include "snip/optimizer.h"
#include "snip/plan.h"
#include "snip/qlinear.h"

namespace {

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}
const std::string kPreset = env_or("SNIP_BENCH_PRESET", "small");
const int kB = std::atoi(env_or("SNIP_BENCH_B", "8").c_str());
const int kT = std::atoi(env_or("SNIP_BENCH_T", "256").c_str());

std::map<std::string, double> g_tokens_per_s;  // precision -> measured
std::map<std::string, double> g_cpu_s;         // precision -> process CPU seconds per step (all threads)

double process_cpu_seconds() {
  struct rusage ru {};
  getrusage(RUSAGE_SELF, &ru);
  return double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// One full optimizer step: zero grads, forward, backward, clip, AdamW.
struct StepRig {
  snip::ModelConfig cfg = snip::preset_config(kPreset);
  snip::Llama model{cfg, kB, kT};
  snip::AdamW<float> opt{model.num_params(), snip::AdamWConfig{}};
  std::vector<int32_t> in, tgt;
  explicit StepRig(snip::Precision p) {
    model.init_weights(1);
    model.set_recipe(snip::Recipe::named("snip"));
    model.set_precisions(
        std::vector<snip::LinearPrecision>(size_t(7 * cfg.num_hidden_layers), snip::LinearPrecision::uniform(p)));
    std::mt19937_64 rng(2);
    in.resize(size_t(kB) * kT), tgt.resize(in.size());
    for (size_t i = 0; i < in.size(); ++i) in[i] = int32_t(rng() % 256), tgt[i] = int32_t(rng() % 256);
  }
  double step(int64_t s) {
    model.set_quant_key(1, uint64_t(s));
    model.zero_grads();
    const double loss = model.forward(in.data(), tgt.data());
    model.backward();
    snip::clip_grad_global_norm(model.grad_data(), model.num_params(), 1.0);
    opt.step(model.param_data(), model.grad_data(), model.param_tensors(), 1e-3);
    return loss;
  }
};

void BM_TrainStep(benchmark::State& state) {
  const auto p = snip::Precision(state.range(0));
  StepRig rig(p);
  rig.step(0);  // warm-up (page faults, OpenBLAS buffers)
  int64_t s = 1;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) benchmark::DoNotOptimize(rig.step(s++));
  // Process CPU time per step (both threads): on a loaded shared machine wall time mostly
  // measures the scheduler; CPU time measures the work.
  state.counters["cpu_s_per_step"] = (process_cpu_seconds() - cpu0) / double(state.iterations());
  const double tokens = double(state.iterations()) * kB * kT;
  state.counters["tokens_per_s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(snip::precision_name(p)) + " " + kPreset + " B=" + std::to_string(kB) +
                 " T=" + std::to_string(kT));
}
BENCHMARK(BM_TrainStep)
    ->Arg(int(snip::Precision::fp32))
    ->Arg(int(snip::Precision::bf16))
    ->Arg(int(snip::Precision::fp8))
    ->Arg(int(snip::Precision::fp4))
    ->Unit(benchmark::kMillisecond)
    ->MinTime(3.0)
    ->UseRealTime();

// Interleaved fp32 / fp4 steps (SNIP_BENCH_PAIRS=N): each pair runs one fp32 step then one
// fp4 step, and the median of the N per-pair time ratios is printed. On a machine shared
// with other jobs the load drifts over the seconds a BM_TrainStep run takes; within a pair
// both steps see nearly the same load, so the median ratio is far steadier than the ratio of
// two separate benchmark runs.
void run_interleaved_pairs(int pairs) {
  StepRig a(snip::Precision::fp32), b(snip::Precision::fp4);
  a.step(0), b.step(0);
  using clock = std::chrono::steady_clock;
  std::vector<double> wall, cpu;
  for (int i = 1; i <= pairs; ++i) {
    const auto t0 = clock::now();
    const double c0 = process_cpu_seconds();
    a.step(i);
    const auto t1 = clock::now();
    const double c1 = process_cpu_seconds();
    b.step(i);
    const auto t2 = clock::now();
    const double c2 = process_cpu_seconds();
    wall.push_back(std::chrono::duration<double>(t2 - t1).count() / std::chrono::duration<double>(t1 - t0).count());
    cpu.push_back((c2 - c1) / (c1 - c0));
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "interleaved %d fp32/fp4 step pairs: fp4/fp32 step time median %.3f (wall), %.3f (process CPU) "
      "(target <= 1.25)\n",
      pairs, median(wall), median(cpu));
}

// Float step vs the double reference path on the tiny preset: same weights, same batch.
bool check_against_reference() {
  const auto cfg = snip::preset_config("tiny");
  snip::Llama mf(cfg, 2, 32);
  snip::LlamaRef md(cfg, 2, 32);
  mf.init_weights(3);
  for (int64_t i = 0; i < mf.num_params(); ++i) md.param_data()[i] = mf.param_data()[i];
  std::vector<int32_t> in(64), tgt(64);
  std::mt19937_64 rng(4);
  for (int i = 0; i < 64; ++i) in[size_t(i)] = int32_t(rng() % 256), tgt[size_t(i)] = int32_t(rng() % 256);
  mf.zero_grads(), md.zero_grads();
  const double lf = mf.forward(in.data(), tgt.data()), ld = md.forward(in.data(), tgt.data());
  mf.backward(), md.backward();
  double num = 0, den = 0;
  for (int64_t i = 0; i < mf.num_params(); ++i) {
    const double d = double(mf.grad_data()[i]) - md.grad_data()[i];
    num += d * d, den += md.grad_data()[i] * md.grad_data()[i];
  }
  const double rel = std::sqrt(num / den);
  std::printf("check: float step vs double reference: |dloss| = %.2e, grad rel L2 = %.2e\n", std::fabs(lf - ld), rel);
  return std::fabs(lf - ld) < 1e-5 && rel < 1e-4;
}

}  // namespace

int main(int argc, char** argv) {
  if (!check_against_reference()) {
    std::fprintf(stderr, "bench_train: the float path disagrees with the reference; not timing\n");
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  // collect tokens/s per precision through a custom reporter wrapper: simplest is to re-read counters
  class Capture : public benchmark::ConsoleReporter {
   public:
    void ReportRuns(const std::vector<Run>& runs) override {
      for (const auto& r : runs) {
        const std::string p = r.report_label.substr(0, r.report_label.find(' '));
        auto it = r.counters.find("tokens_per_s");
        if (it != r.counters.end()) g_tokens_per_s[p] = it->second;
        auto c = r.counters.find("cpu_s_per_step");
        if (c != r.counters.end()) g_cpu_s[p] = c->second;
      }
      ConsoleReporter::ReportRuns(runs);
    }
  } reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);

  // Peak memory: this process's max RSS after the largest rig vs the theoretical minimum.
  {
    StepRig rig(snip::Precision::fp32);
    rig.step(0);
    const auto cfg = rig.cfg;
    const int64_t P = rig.model.num_params(), BT = int64_t(kB) * kT, C = cfg.hidden_size, F = cfg.intermediate_size;
    const int64_t L = cfg.num_hidden_layers, NH = cfg.num_attention_heads, HD = cfg.head_dim();
    const int64_t KD = int64_t(cfg.num_key_value_heads) * HD, V = cfg.vocab_size;
    // What backward needs per block: R, ln1, q, k, v, probs, att, M, ln2, gate, up, h (+ final norm, logits, probs)
    const int64_t acts =
        L * (BT * (4 * C + NH * HD * 2 + 2 * KD + 3 * F) + int64_t(kB) * NH * kT * kT) + BT * (C + 2 * V);
    const double theory = 4.0 * double(4 * P + acts);
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);
    const double peak = double(ru.ru_maxrss) * 1024.0;
    const auto mu = rig.model.memory_use();
    std::printf(
        "memory: peak RSS %.1f MB; theoretical params+grads+AdamW+activations %.1f MB; ratio %.2f "
        "(arenas: params %.1f, grads %.1f, activations %.1f, backward buffers %.1f MB)\n",
        peak / 1e6, theory / 1e6, peak / theory, mu.params / 1e6, mu.grads / 1e6, mu.activations / 1e6,
        mu.backward / 1e6);
  }

  // After the peak-memory figure: the pairs hold two more rigs.
  if (const int pairs = std::atoi(env_or("SNIP_BENCH_PAIRS", "0").c_str()); pairs > 0) run_interleaved_pairs(pairs);

  // PyTorch reference, same model/batch/seq len.
  const std::string cfg_path = "/tmp/snip_bench_train_config.json";
  snip::write_config_file(cfg_path, snip::preset_config(kPreset));
  const std::string script = std::string(SNIP_BENCH_DIR) + "/torch_reference.py";
  const std::string cmd = "/usr/bin/python3 " + script + " --config " + cfg_path + " --batch-size " +
                          std::to_string(kB) + " --seq-len " + std::to_string(kT) + " --threads " +
                          env_or("TORCH_THREADS", "1") + " 2>/dev/null";
  std::string out;
  if (FILE* f = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (fgets(buf, sizeof buf, f)) out += buf;
    pclose(f);
  }
  try {
    const auto j = nlohmann::json::parse(out);
    const double torch_tps = j["tokens_per_s"];
    std::printf("torch %s (%d intra-op threads): %.0f tokens/s\n", j["torch"].get<std::string>().c_str(),
                j["threads"].get<int>(), torch_tps);
    for (const auto& [p, tps] : g_tokens_per_s)
      std::printf("ratio %s: ours %.0f tokens/s = %.2fx torch fp32 (target fp32 >= 1.5x)\n", p.c_str(), tps,
                  tps / torch_tps);
    const double torch_cpu = j["cpu_s"];
    std::printf("torch CPU seconds per step: %.3f\n", torch_cpu);
    for (const auto& [p, c] : g_cpu_s)
      std::printf("cpu %s: ours %.3f CPU s/step; torch / ours CPU = %.2fx; fp4/fp32 CPU = %.2f\n", p.c_str(), c,
                  torch_cpu / c, g_cpu_s.count("fp32") ? c / g_cpu_s["fp32"] : 0.0);
    if (g_tokens_per_s.count("fp32") && g_tokens_per_s.count("fp4"))
      std::printf("ratio fp4 step time / fp32 step time = %.2f (target <= 1.25)\n",
                  g_tokens_per_s["fp32"] / g_tokens_per_s["fp4"]);
  } catch (const std::exception&) {
    std::printf("torch reference unavailable (needs /usr/bin/python3 with torch): %s\n", out.c_str());
  }
  return 0;
}
