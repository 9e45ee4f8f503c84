// `snip quantize` end to end: the built binary (path from CMake) against the library in
// process, and its bad-input behaviour (clear message, non-zero exit, no output left behind).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run_command.h"
#include "snip/qlinear.h"
#include "snip/quant.h"
#include "temp_dir.h"

#ifndef SNIP_BINARY
#error "SNIP_BINARY must be defined to the path of the built snip executable"
#endif

namespace snip {
namespace {

namespace fs = std::filesystem;

using CliResult = snip_test::CommandResult;

CliResult run_snip(const std::string& args) {
  return snip_test::run_shell(std::string(SNIP_BINARY) + " " + args);
}

class QuantizeCli : public ::testing::Test {
 protected:
  void SetUp() override {}
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write_f32(const std::string& name, const std::vector<float>& v) const {
    std::ofstream f(path(name), std::ios::binary);
    f.write(reinterpret_cast<const char*>(v.data()), std::streamsize(v.size() * 4));
  }
  template <class T>
  std::vector<T> read(const std::string& name) const {
    std::ifstream f(path(name), std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<T> v(bytes.size() / sizeof(T));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
    return v;
  }
  snip_test::TempDir tmp_{"quantize-cli"};
  const fs::path dir_ = tmp_.path;
};

std::vector<float> sample(int n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = std::sin(0.37f * float(i)) * std::ldexp(1.0f, (i % 11) - 5);
  return v;
}

TEST_F(QuantizeCli, OutputAndCodesMatchTheLibraryBitForBit) {
  const int rows = 40, cols = 70;
  const std::vector<float> x = sample(rows * cols);
  write_f32("x.f32", x);
  struct Case {
    const char* format;
    const char* recipe;
    const char* role;
    Precision p;
    Gemm g;
    Operand op;
  };
  const Case cases[] = {{"e2m1", "snip", "activation", Precision::fp4, Gemm::fprop, Operand::activation},
                        {"e2m1", "snip", "weight", Precision::fp4, Gemm::fprop, Operand::weight},
                        {"e4m3", "mx", "weight", Precision::fp8, Gemm::fprop, Operand::weight},
                        {"e2m1", "nvfp4", "gradient", Precision::fp4, Gemm::dgrad, Operand::gradient},
                        {"e5m2", "tensor", "gradient", Precision::fp8, Gemm::dgrad, Operand::gradient}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.format) + " " + c.recipe + " " + c.role);
    QuantSpec spec = Recipe::named(c.recipe).spec(c.p, c.g, c.op);
    spec.format = parse_elem_format(c.format);
    // --seed only where the rounding is stochastic (elsewhere it is ignored, and says so)
    const std::string seed = spec.rounding == Rounding::stochastic ? " --seed 5" : "";
    const CliResult r = run_snip(std::string("quantize --format ") + c.format + " --recipe " + c.recipe + " --role " +
                                 c.role + " --shape 40x70 --in " + path("x.f32") + " --out " + path("y.f32") +
                                 " --codes " + path("c.u8") + seed + " --json");
    ASSERT_EQ(r.status, 0) << r.out;
    std::vector<float> want(x.size());
    std::vector<uint8_t> want_codes(x.size());
    QuantStats st;
    fake_quantize(want.data(), x.data(), rows, cols, spec, RngKey{5, 0, 0, 0}, "x", &st, want_codes.data());
    const std::vector<float> got = read<float>("y.f32");
    ASSERT_EQ(got.size(), want.size());
    EXPECT_EQ(std::memcmp(got.data(), want.data(), want.size() * 4), 0);
    EXPECT_EQ(read<uint8_t>("c.u8"), want_codes);
    const auto j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j.at("elements").get<int64_t>(), rows * cols);
    EXPECT_NEAR(j.at("rel_frobenius_error").get<double>(), std::sqrt(st.err_sq / st.ref_sq), 1e-12);
    EXPECT_NEAR(j.at("zero_pct").get<double>(), 100.0 * double(st.zeros) / double(rows * cols), 1e-9);
    EXPECT_EQ(j.at("block_rows").get<int>(), spec.block_rows);
  }
}

TEST_F(QuantizeCli, WrongFileSizeFailsWithoutOutput) {
  write_f32("x.f32", sample(12));
  const CliResult r = run_snip("quantize --format e4m3 --shape 3x5 --in " + path("x.f32") + " --out " + path("y.f32"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("48 bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--shape"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(path("y.f32")));
}

TEST_F(QuantizeCli, UnknownFormatRecipeShapeFail) {
  write_f32("x.f32", sample(12));
  for (const std::string args :
       {"--format e3m4 --shape 3x4", "--format e4m3 --recipe mxfp --shape 3x4", "--format e4m3 --shape 3by4",
        "--format e4m3 --shape 0x12", "--format e4m3 --shape 3x4 --scale-mode up",
        "--format e4m3 --shape 3x4 --role bias"}) {
    const CliResult r = run_snip("quantize " + args + " --in " + path("x.f32") + " --out " + path("y.f32"));
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.out.find("error"), std::string::npos) << args << ": " << r.out;
    EXPECT_FALSE(fs::exists(path("y.f32"))) << args;
  }
}

TEST_F(QuantizeCli, NaNInputNamesTheElementAndLeavesNoOutput) {
  std::vector<float> x = sample(12);
  x[7] = std::nanf("");
  write_f32("x.f32", x);
  const CliResult r = run_snip("quantize --format e2m1 --shape 3x4 --in " + path("x.f32") + " --out " + path("y.f32") +
                               " --codes " + path("c.u8"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("(1, 3)"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(path("y.f32")));
  EXPECT_FALSE(fs::exists(path("c.u8")));
  // No temp files of the atomic writer left in the directory either.
  int files = 0;
  for (auto& e : fs::directory_iterator(dir_)) files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 1);
}

TEST_F(QuantizeCli, MissingInputAndBf16CodesFail) {
  CliResult r = run_snip("quantize --format e4m3 --shape 3x4 --in " + path("missing.f32") + " --out " + path("y.f32"));
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("missing.f32"), std::string::npos) << r.out;
  write_f32("x.f32", sample(12));
  r = run_snip("quantize --format bf16 --shape 3x4 --in " + path("x.f32") + " --out " + path("y.f32") + " --codes " +
               path("c.u8"));
  EXPECT_NE(r.status, 0);
  EXPECT_FALSE(fs::exists(path("y.f32")));
}

}  // namespace
}  // namespace snip
