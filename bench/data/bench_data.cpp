// bench_data: how long the trainer waits for its data. (1) Loading + byte-tokenizing + splitting
// the bundled corpus, against the bare gzip decompression it cannot avoid. (2) SentencePiece
// encoding of the corpus line by line (Tokenizer::encode) against the reference, one
// SentencePiece call on the whole text; both must produce identical ids before anything is
// timed. Ratios are printed after the benchmarks. Target: corpus load well under 1 s.
#include <benchmark/benchmark.h>
#include <sentencepiece_processor.h>
#include <unistd.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "snip/dataset.h"
#include "snip/error.h"

namespace {

std::string g_model;  // SentencePiece model trained at start-up
std::string g_text;   // the bundled corpus

// Reference for (1): decompress the corpus and nothing else.
std::string gunzip_ref(const std::string& path) {
  gzFile gz = gzopen(path.c_str(), "rb");
  std::string out;
  std::vector<char> buf(1 << 20);
  for (int n; (n = gzread(gz, buf.data(), unsigned(buf.size()))) > 0;) out.append(buf.data(), size_t(n));
  gzclose(gz);
  return out;
}

// Reference for (2): SentencePiece on the whole text in one call.
std::vector<int32_t> sp_encode_whole_ref(const sentencepiece::SentencePieceProcessor& sp, const std::string& text) {
  std::vector<int> ids;
  if (!sp.Encode(text, &ids).ok()) throw snip::Error("reference encode failed");
  return {ids.begin(), ids.end()};
}

void BM_BundledCorpusLoad(benchmark::State& state) {
  auto byte = snip::make_byte_tokenizer();
  for (auto _ : state) benchmark::DoNotOptimize(snip::load_token_data("", *byte, 256));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(g_text.size()));
}

void BM_GunzipRef(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(gunzip_ref(snip::bundled_corpus_path()));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(g_text.size()));
}

void BM_SentencePieceEncodeLines(benchmark::State& state) {
  auto tok = snip::make_sentencepiece_tokenizer(g_model);
  for (auto _ : state) benchmark::DoNotOptimize(tok->encode(g_text));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(g_text.size()));
}

void BM_SentencePieceEncodeWholeRef(benchmark::State& state) {
  sentencepiece::SentencePieceProcessor sp;
  if (!sp.Load(g_model).ok()) state.SkipWithError("cannot load model");
  for (auto _ : state) benchmark::DoNotOptimize(sp_encode_whole_ref(sp, g_text));
  state.SetBytesProcessed(int64_t(state.iterations()) * int64_t(g_text.size()));
}

BENCHMARK(BM_BundledCorpusLoad)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_GunzipRef)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(1.0);
BENCHMARK(BM_SentencePieceEncodeLines)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);
BENCHMARK(BM_SentencePieceEncodeWholeRef)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(2);

class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const auto& r : runs) {
      seconds[r.benchmark_name()] = r.GetAdjustedRealTime() / 1e3;
      cpu_seconds[r.benchmark_name()] = r.GetAdjustedCPUTime() / 1e3;
    }
  }
  double find(const std::map<std::string, double>& m, const std::string& prefix) const {
    for (const auto& [k, v] : m)
      if (k.rfind(prefix, 0) == 0) return v;
    return NAN;
  }
  std::map<std::string, double> seconds, cpu_seconds;
};

}  // namespace

int main(int argc, char** argv) {
  const auto dir = std::filesystem::temp_directory_path() / ("snip_bench_data_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  try {
    g_text = snip::read_text_corpus("");
    // Checks before timing: the loader's tokens are the corpus bytes; line-wise encoding
    // equals whole-text encoding and decodes back to the corpus.
    auto byte = snip::make_byte_tokenizer();
    const auto data = snip::load_token_data("", *byte, 256);
    std::string joined = byte->decode(data.train) + byte->decode(data.val);
    if (joined != gunzip_ref(snip::bundled_corpus_path())) throw snip::Error("loader tokens differ from the corpus");
    g_model = (dir / "kjv1k").string();
    snip::train_sentencepiece("", 1024, g_model);
    g_model += ".model";
    auto tok = snip::make_sentencepiece_tokenizer(g_model);
    sentencepiece::SentencePieceProcessor sp;
    if (!sp.Load(g_model).ok()) throw snip::Error("cannot load " + g_model);
    const auto ids = tok->encode(g_text);
    if (ids != sp_encode_whole_ref(sp, g_text)) throw snip::Error("line-wise encoding differs from the reference");
    if (tok->decode(ids) != g_text) throw snip::Error("SentencePiece round trip is not exact");
    std::printf("checked: loader == corpus bytes; line-wise SentencePiece == whole-text (%zu ids), round trip exact\n",
                ids.size());
  } catch (const snip::Error& e) {
    std::fprintf(stderr, "bench_data: check failed: %s\n", e.what());
    std::filesystem::remove_all(dir);
    return 1;
  }

  benchmark::Initialize(&argc, argv);
  Collector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  std::filesystem::remove_all(dir);

  const double load = reporter.find(reporter.seconds, "BM_BundledCorpusLoad");
  const double gunzip = reporter.find(reporter.seconds, "BM_GunzipRef");
  const double lines = reporter.find(reporter.cpu_seconds, "BM_SentencePieceEncodeLines");
  const double whole = reporter.find(reporter.cpu_seconds, "BM_SentencePieceEncodeWholeRef");
  std::printf(
      "\nbundled corpus load (byte tokenizer, split): %.1f ms wall = %.2fx bare gunzip (%.1f ms); target < 1000 ms\n",
      load * 1e3, load / gunzip, gunzip * 1e3);
  std::printf(
      "SentencePiece encode, %.1f MB: line-wise %.0f ms CPU vs whole-text reference %.0f ms CPU: %.2fx faster\n",
      double(g_text.size()) / 1e6, lines * 1e3, whole * 1e3, whole / lines);
  return 0;
}
