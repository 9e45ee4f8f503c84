// Tests of the safetensors reader/writer: round trips, bytes laid out exactly as Hugging Face's
// writer lays them out (the Python package is not on this machine, so the test builds them by
// hand from the spec), dtype conversions, and every malformed input a user could hand us.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include "snip/atomic_file.h"
#include "snip/error.h"
#include "snip/safetensors.h"
#include "temp_dir.h"

namespace {

namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return tmp_.file(name); }
  snip_test::TempDir tmp_{"io"};
  const fs::path dir_ = tmp_.path;
};

// A file as the spec defines it: u64 LE header length, the header, then the data bytes.
std::string make_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

std::string u16_bytes(std::initializer_list<uint16_t> values) {
  std::string out;
  for (uint16_t v : values) out.append(reinterpret_cast<const char*>(&v), 2);
  return out;
}

// Expects parse() to throw snip::Error whose message contains every fragment.
void expect_error(const std::string& bytes, std::initializer_list<std::string> fragments) {
  try {
    snip::SafetensorsFile::parse(bytes, "model.safetensors");
    ADD_FAILURE() << "no error; expected one containing '" << *fragments.begin() << "'";
  } catch (const snip::Error& e) {
    const std::string msg = e.what();
    for (const auto& f : fragments)
      EXPECT_NE(msg.find(f), std::string::npos) << "message: " << msg << "\nmissing: " << f;
    EXPECT_NE(msg.find("model.safetensors"), std::string::npos) << "message does not name the file: " << msg;
  }
}

const std::string kValidHeader = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
const std::string kValidData = f32_bytes({1.0f, 2.0f});

TEST_F(SafetensorsTest, RoundTripKeepsNamesShapesValuesAndMetadata) {
  std::vector<float> w(3 * 5), b(7), s(1);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i)) * 1e3f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = -float(i) / 3.0f;
  s[0] = std::nextafter(1.0f, 2.0f);
  const std::vector<snip::TensorRef> tensors = {
      {"model.layers.0.mlp.up_proj.weight", {3, 5}, w.data()},
      {"model.norm.weight", {7}, b.data()},
      {"scalar", {}, s.data()},
      {"empty", {0, 4}, nullptr},
  };
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"step", "42"}};
  snip::write_safetensors(path("m.safetensors"), tensors, meta);

  const auto f = snip::SafetensorsFile::open(path("m.safetensors"));
  EXPECT_EQ(f.names().size(), 4u);
  EXPECT_EQ(f.metadata(), meta);
  EXPECT_EQ(f.shape("scalar"), std::vector<int64_t>{});
  EXPECT_EQ(f.shape("empty"), (std::vector<int64_t>{0, 4}));
  std::vector<float> w2(w.size()), b2(b.size()), s2(1);
  f.read_f32("model.layers.0.mlp.up_proj.weight", w2.data(), {3, 5});
  f.read_f32("model.norm.weight", b2.data(), {7});
  f.read_f32("scalar", s2.data(), {});
  f.read_f32("empty", nullptr, {0, 4});
  EXPECT_EQ(0, std::memcmp(w.data(), w2.data(), w.size() * 4));
  EXPECT_EQ(0, std::memcmp(b.data(), b2.data(), b.size() * 4));
  EXPECT_EQ(s2[0], s[0]);
}

TEST_F(SafetensorsTest, WriterPadsHeaderWithSpacesToEightBytes) {
  const float x[3] = {1, 2, 3};
  snip::write_safetensors(path("p.safetensors"), {{"abc", {3}, x}});
  const std::string bytes = snip::read_file(path("p.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12);
  const std::string header = bytes.substr(8, n);
  const size_t last = header.find_last_not_of(' ');
  EXPECT_EQ(header[last], '}');
  EXPECT_EQ(header.find("\"dtype\":\"F32\""), header.find("\"dtype\"")) << header;
  EXPECT_EQ(0, std::memcmp(bytes.data() + 8 + n, x, 12));
  // Nothing but the file itself is left in the folder (the temp file was renamed).
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// Bytes exactly as Hugging Face's serializer writes them: compact JSON, __metadata__ first,
// padded with spaces to 8 bytes, F32 + BF16 + F16 tensors tiling the data section.
TEST_F(SafetensorsTest, ReadsHuggingFaceLayoutWithBf16AndF16) {
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,1],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[8,14]},"c":{"dtype":"F16","shape":[5],"data_offsets":[14,24]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string data = f32_bytes({0.5f, -7.25f}) + u16_bytes({0x3F80, 0xC020, 0x4049}) +  // 1, -2.5, 3.140625
                           u16_bytes({0x3C00, 0x0001, 0x7BFF, 0xFC00, 0x8400});  // 1, 2^-24, 65504, -inf, -2^-14
  snip::write_file_atomic(path("hf.safetensors"), make_file(header, data));
  const auto f = snip::SafetensorsFile::open(path("hf.safetensors"));
  EXPECT_EQ(f.metadata().at("format"), "pt");
  float a[2], b[3], c[5];
  f.read_f32("a", a, {2, 1});
  f.read_f32("b", b, {3});
  f.read_f32("c", c, {5});
  EXPECT_EQ(a[0], 0.5f);
  EXPECT_EQ(a[1], -7.25f);
  EXPECT_EQ(b[0], 1.0f);
  EXPECT_EQ(b[1], -2.5f);
  EXPECT_EQ(b[2], 3.140625f);
  EXPECT_EQ(c[0], 1.0f);
  EXPECT_EQ(c[1], std::ldexp(1.0f, -24));
  EXPECT_EQ(c[2], 65504.0f);
  EXPECT_TRUE(std::isinf(c[3]) && c[3] < 0);
  EXPECT_EQ(c[4], -std::ldexp(1.0f, -14));
}

// Every one of the 65536 half-precision values converts exactly (GCC's _Float16 is the oracle).
TEST_F(SafetensorsTest, F16ConversionIsExactForAllValues) {
  const std::string header = R"({"h":{"dtype":"F16","shape":[65536],"data_offsets":[0,131072]}})";
  std::string data(131072, '\0');
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = uint16_t(i);
    std::memcpy(data.data() + 2 * i, &h, 2);
  }
  const auto f = snip::SafetensorsFile::parse(make_file(header, data), "h.safetensors");
  std::vector<float> out(65536);
  f.read_f32("h", out.data(), {65536});
  for (uint32_t i = 0; i < 65536; ++i) {
    const float expected = static_cast<float>(std::bit_cast<_Float16>(uint16_t(i)));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(out[i])) << std::hex << i;
    } else {
      ASSERT_EQ(std::bit_cast<uint32_t>(out[i]), std::bit_cast<uint32_t>(expected)) << "half bits 0x" << std::hex << i;
    }
  }
}

TEST_F(SafetensorsTest, WrongShapeSaysWhatWasExpected) {
  std::vector<float> w(256 * 64);
  snip::write_safetensors(path("model.safetensors"), {{"model.layers.3.mlp.up_proj.weight", {256, 64}, w.data()}});
  const auto f = snip::SafetensorsFile::open(path("model.safetensors"));
  try {
    f.read_f32("model.layers.3.mlp.up_proj.weight", w.data(), {688, 256});
    FAIL() << "no error";
  } catch (const snip::Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("model.safetensors: tensor model.layers.3.mlp.up_proj.weight has shape (256, 64), "
                                   "expected (688, 256) — was it saved with another config?"),
        std::string::npos)
        << e.what();
  }
  EXPECT_THROW(f.read_f32("model.layers.4.mlp.up_proj.weight", w.data(), {256, 64}), snip::Error);
  EXPECT_THROW(f.shape("nope"), snip::Error);
  EXPECT_FALSE(f.has("nope"));
  EXPECT_TRUE(f.has("model.layers.3.mlp.up_proj.weight"));
}

TEST_F(SafetensorsTest, ValidMinimalFileParses) {
  // Guards the fixtures below: the same bytes minus the one defect are accepted.
  const auto f = snip::SafetensorsFile::parse(make_file(kValidHeader, kValidData), "model.safetensors");
  float a[2];
  f.read_f32("a", a, {2});
  EXPECT_EQ(a[1], 2.0f);
}

TEST_F(SafetensorsTest, TruncatedHeaderIsAnError) {
  expect_error("", {"too short"});
  expect_error(std::string("\x10\x00\x00", 3), {"too short"});
  const std::string full = make_file(kValidHeader, kValidData);
  expect_error(full.substr(0, 8 + kValidHeader.size() / 2), {"truncated header"});
  expect_error(make_file(kValidHeader, "").substr(0, 20), {"truncated header"});
  std::string huge(8, '\0');
  const uint64_t n = uint64_t(1) << 40;
  std::memcpy(huge.data(), &n, 8);
  expect_error(huge + "{}", {"100 MB"});
}

TEST_F(SafetensorsTest, EveryTruncationOfAValidFileIsAnError) {
  const std::string full = make_file(kValidHeader, kValidData);
  for (size_t len = 0; len < full.size(); ++len)
    EXPECT_THROW(snip::SafetensorsFile::parse(full.substr(0, len), "model.safetensors"), snip::Error) << len;
}

TEST_F(SafetensorsTest, OutOfRangeOffsetsAreAnError) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", f32_bytes({1})),
               {"tensor a", "run past the data section"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", kValidData),
               {"run past the data section"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", kValidData), {"end before"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-1,7]}})", kValidData), {"non-negative"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", kValidData), {"data_offsets"});
}

TEST_F(SafetensorsTest, SizeShapeMismatchOverlapsAndHolesAreErrors) {
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", kValidData + f32_bytes({3})),
               {"shape (3)", "needs 12 bytes"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         kValidData),
               {"overlap"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", kValidData),
               {"belong to no tensor"});
  expect_error(make_file(kValidHeader, kValidData + "xx"), {"cover only 8"});
}

TEST_F(SafetensorsTest, BadShapesAndDtypesAreErrors) {
  expect_error(make_file(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", kValidData), {"dtype I64"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", kValidData), {"negative"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", kValidData), {"non-integer"});
  expect_error(
      make_file(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", kValidData),
      {"overflows"});
  expect_error(make_file(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", kValidData), {"shape"});
  expect_error(make_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", kValidData), {"dtype"});
  expect_error(make_file(R"({"a":[1,2]})", kValidData), {"not a JSON object"});
}

TEST_F(SafetensorsTest, BadJsonDuplicatesAndMetadataAreErrors) {
  expect_error(make_file(R"({"a":{"dtype":"F32",)", kValidData), {"not valid JSON"});
  expect_error(make_file(R"([1,2,3])", ""), {"JSON object"});
  expect_error(make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         kValidData),
               {"'a' twice"});
  expect_error(
      make_file(R"({"__metadata__":{"k":1},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kValidData),
      {"__metadata__"});
}

// Random corruption never crashes, and what the user sees is either the file's tensors or an
// error that names the file first ("fuzz: ...") and then what is wrong with it.
TEST_F(SafetensorsTest, RandomByteFlipsGiveTheTensorsOrAnErrorNamingTheFile) {
  std::vector<float> w(12, 0.25f);
  snip::write_safetensors(path("r.safetensors"), {{"w", {3, 4}, w.data()}, {"v", {2}, w.data()}}, {{"k", "v"}});
  const std::string good = snip::read_file(path("r.safetensors"));
  std::mt19937 rng(1234);
  int errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bad = good;
    const int flips = 1 + int(rng() % 3);
    for (int k = 0; k < flips; ++k) bad[rng() % bad.size()] = char(rng());
    try {
      const auto f = snip::SafetensorsFile::parse(bad, "fuzz");
      for (const auto& name : f.names()) {
        std::vector<int64_t> shape = f.shape(name);
        int64_t n = 1;
        for (auto d : shape) n *= d;
        std::vector<float> out(static_cast<size_t>(n));
        f.read_f32(name, out.data(), shape);
      }
    } catch (const snip::Error& e) {
      ++errors;
      const std::string message = e.what();
      EXPECT_EQ(message.rfind("fuzz", 0), 0u) << "trial " << trial << ": " << message;
      EXPECT_GT(message.size(), std::string("fuzz: ").size() + 10) << "trial " << trial << ": " << message;
    }
  }
  EXPECT_GT(errors, 0);  // the fuzzer did reach the validation paths
}

TEST_F(SafetensorsTest, WriterRejectsBadTensorsAndUnwritablePaths) {
  const float x[2] = {1, 2};
  EXPECT_THROW(snip::write_safetensors(path("a.safetensors"), {{"x", {2}, x}, {"x", {2}, x}}), snip::Error);
  EXPECT_THROW(snip::write_safetensors(path("a.safetensors"), {{"x", {-2}, x}}), snip::Error);
  EXPECT_THROW(snip::write_safetensors(path("a.safetensors"), {{"x", {2}, nullptr}}), snip::Error);
  EXPECT_THROW(snip::write_safetensors(path("a.safetensors"), {{"__metadata__", {2}, x}}), snip::Error);
  EXPECT_THROW(snip::write_safetensors(path("no/such/dir/a.safetensors"), {{"x", {2}, x}}), snip::Error);
  EXPECT_FALSE(fs::exists(path("a.safetensors")));
}

TEST_F(SafetensorsTest, FailedWriteLeavesPreviousFileIntact) {
  const float x[2] = {1, 2};
  snip::write_safetensors(path("keep.safetensors"), {{"x", {2}, x}});
  const std::string before = snip::read_file(path("keep.safetensors"));
  EXPECT_THROW(snip::write_safetensors(path("keep.safetensors"), {{"x", {2}, x}, {"y", {-1}, x}}), snip::Error);
  EXPECT_EQ(snip::read_file(path("keep.safetensors")), before);
}

TEST_F(SafetensorsTest, OpenRefusesAFolder) {
  try {
    snip::SafetensorsFile::open(dir_.string());
    FAIL() << "no error";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a folder"), std::string::npos) << e.what();
  }
}

TEST_F(SafetensorsTest, OpenNamesMissingFile) {
  try {
    snip::SafetensorsFile::open(path("missing.safetensors"));
    FAIL() << "no error";
  } catch (const snip::Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.safetensors"), std::string::npos) << e.what();
  }
}

}  // namespace
