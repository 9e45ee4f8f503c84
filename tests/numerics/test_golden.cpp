// Golden vectors from an independent numpy implementation of FORMATS.md
// (tests/numerics/data/make_golden.py: grid search with ties to the even code, float32 scale
// arithmetic in FORMATS.md's order): fake_quantize must reproduce them bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "snip/quant.h"

#ifndef SNIP_NUMERICS_GOLDEN_DIR
#error "SNIP_NUMERICS_GOLDEN_DIR must point at tests/numerics/data"
#endif

namespace snip {
namespace {

std::vector<float> read_f32(const std::string& name) {
  std::ifstream f(std::string(SNIP_NUMERICS_GOLDEN_DIR) + "/" + name, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

TEST(Golden, NumpyReferenceBitForBit) {
  std::ifstream mf(std::string(SNIP_NUMERICS_GOLDEN_DIR) + "/manifest.json");
  ASSERT_TRUE(mf.good()) << "missing tests/numerics/data/manifest.json (run make_golden.py)";
  const nlohmann::json m = nlohmann::json::parse(mf);
  const int64_t rows = m.at("rows"), cols = m.at("cols");
  const std::vector<float> x = read_f32(m.at("input"));
  ASSERT_EQ(int64_t(x.size()), rows * cols);
  int checked = 0;
  for (const auto& [name, c] : m.at("cases").items()) {
    SCOPED_TRACE(name);
    QuantSpec spec;
    spec.format = parse_elem_format(c.at("format").get<std::string>());
    const std::string scale = c.at("scale");
    spec.scale = scale == "fp32"    ? ScaleKind::fp32
                 : scale == "e8m0"  ? ScaleKind::e8m0
                 : scale == "nvfp4" ? ScaleKind::nvfp4
                                    : ScaleKind::none;
    if (c.contains("mode")) spec.e8m0_mode = parse_e8m0_mode(c.at("mode").get<std::string>());
    spec.block_rows = c.at("block_rows");
    spec.block_cols = c.at("block_cols");
    const std::vector<float> want = read_f32("golden_" + name + ".f32");
    ASSERT_EQ(want.size(), x.size());
    std::vector<float> got(x.size());
    fake_quantize(got.data(), x.data(), rows, cols, spec, {}, name.c_str());
    int64_t differ = 0, first = -1;
    for (size_t i = 0; i < x.size(); ++i)
      if (std::memcmp(&got[i], &want[i], 4) != 0) {
        if (first < 0) first = int64_t(i);
        ++differ;
      }
    EXPECT_EQ(differ, 0) << "first at " << first << ": x=" << x[size_t(first < 0 ? 0 : first)]
                         << " got=" << got[size_t(first < 0 ? 0 : first)]
                         << " want=" << want[size_t(first < 0 ? 0 : first)];
    ++checked;
  }
  EXPECT_GE(checked, 10);
}

}  // namespace
}  // namespace snip
