// `snip export --run ID --to tensorboard DIR`: the event file TensorBoard reads, decoded by a
// reader that shares nothing with ours — protobuf's Python runtime on engine/io/proto's schema
// (compiled by protoc here), each record's length and data checked with python3-crc32c under
// TensorFlow's mask. Every metric row and every round's per-layer ΔL/ΔW comes back as stored.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_command.h"
#include "snip/store.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace {

constexpr const char* kPython = "/usr/bin/python3";

bool have(const std::string& probe) {
  return snip_test::run_shell(probe).status == 0;
}

const char* kReader = R"(import glob, json, struct, sys
import crc32c
sys.path.insert(0, sys.argv[1])
import tensorboard_event_pb2 as pb

def masked(b):
    c = crc32c.crc32c(b)
    return (((c >> 15) | (c << 17)) + 0xa282ead8) & 0xffffffff

files = glob.glob(sys.argv[2] + "/events.out.tfevents.*")
assert len(files) == 1, files
data = open(files[0], "rb").read()
i, out = 0, {"version": None, "scalars": []}
while i < len(data):
    header = data[i:i + 8]
    n = struct.unpack("<Q", header)[0]
    assert struct.unpack("<I", data[i + 8:i + 12])[0] == masked(header), "length crc"
    body = data[i + 12:i + 12 + n]
    assert struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0] == masked(body), "data crc"
    i += 16 + n
    e = pb.Event()
    e.ParseFromString(body)
    if e.WhichOneof("what") == "file_version":
        out["version"] = e.file_version
    for v in e.summary.value:
        out["scalars"].append([e.step, v.tag, v.simple_value])
print(json.dumps(out))
)";

TEST(TensorBoard, ARunsScalarsReadBackWithAnIndependentReader) {
  if (!have(std::string(kPython) + " -c 'import crc32c, google.protobuf' 2>/dev/null") ||
      !have("command -v protoc >/dev/null"))
    GTEST_SKIP() << "protoc, python3-protobuf or python3-crc32c is not installed (scripts/setup.sh installs them)";
  snip_test::TempDir dir("tensorboard");
  const std::string db = dir.file("runs.db"), logs = dir.file("logs");
  const auto train = snip_test::run_shell(std::string(SNIP_BIN) +
                                          " train --preset tiny --batch-size 2 --seq-len 32 --steps 6 --eval-every 3 "
                                          "--method snip --budget 0.5 --replan-every 3 --bf16-probe-every 2 --db " +
                                          db + " --out " + dir.file("ck"));
  ASSERT_EQ(train.status, 0) << train.out;
  const auto ex =
      snip_test::run_shell(std::string(SNIP_BIN) + " export --run 1 --to tensorboard --out " + logs + " --db " + db);
  ASSERT_EQ(ex.status, 0) << ex.out;
  const std::string proto_dir = fs::path(SNIP_TB_PROTO).parent_path().string();
  ASSERT_EQ(
      snip_test::run_shell("protoc -I" + proto_dir + " --python_out=" + dir.path.string() + " " + SNIP_TB_PROTO).status,
      0);
  std::ofstream(dir.file("reader.py")) << kReader;
  const auto read =
      snip_test::run_stdout(std::string(kPython) + " " + dir.file("reader.py") + " " + dir.path.string() + " " + logs);
  ASSERT_EQ(read.status, 0) << read.out;
  const nlohmann::json got = nlohmann::json::parse(read.out);
  EXPECT_EQ(got["version"], "brain.Event:2");

  snip::Store store(db);
  const std::vector<snip::MetricRow> rows = store.metrics(1);
  ASSERT_EQ(rows.size(), 6u);
  std::map<std::string, std::map<int64_t, double>> by_tag;
  for (const auto& s : got["scalars"]) by_tag[s[1].get<std::string>()][s[0].get<int64_t>()] = s[2].get<double>();
  for (const snip::MetricRow& r : rows) {
    EXPECT_EQ(by_tag["train/loss"].at(r.step), double(float(r.train_loss))) << r.step;
    EXPECT_EQ(by_tag["train/learning_rate"].at(r.step), double(float(r.lr))) << r.step;
    EXPECT_EQ(by_tag["precision/fp4_fraction"].at(r.step), double(float(r.fp4_fraction))) << r.step;
    EXPECT_EQ(by_tag["eval/loss"].count(r.step), size_t(r.val_loss.has_value())) << r.step;
    EXPECT_EQ(by_tag["precision/bf16_gap"].count(r.step), size_t(r.bf16_gap.has_value())) << r.step;
  }
  // Each statistics round: ΔL and ΔW of every layer, FP8 and FP4, at the round's step.
  const auto rounds = store.stats_rounds(1);
  ASSERT_EQ(rounds.size(), 2u);
  for (const auto& round : rounds)
    for (const char* p : {"fp8", "fp4"})
      for (const char* q : {"delta_L/", "delta_W/"}) {
        const std::string tag = std::string(q) + p + "/model.layers.1.mlp.down_proj";
        ASSERT_TRUE(by_tag.count(tag)) << tag;
        EXPECT_TRUE(by_tag[tag].count(round.step)) << tag << " at step " << round.step;
        EXPECT_TRUE(std::isfinite(by_tag[tag][round.step]));
      }
  size_t layer_tags = 0;
  for (const auto& [tag, steps] : by_tag) layer_tags += tag.rfind("delta_L/fp4/", 0) == 0;
  EXPECT_EQ(layer_tags, 14u);  // tiny: 2 blocks x 7 linear layers
}

TEST(TensorBoard, WhatCannotBeExportedSaysWhy) {
  snip_test::TempDir dir("tensorboard-bad");
  const std::string snip = SNIP_BIN;
  const auto no_out = snip_test::run_shell(snip + " export --run 1 --to tensorboard --db " + dir.file("none.db"));
  EXPECT_NE(no_out.status, 0);
  EXPECT_NE(no_out.out.find("give --out DIR"), std::string::npos) << no_out.out;
  const auto plan =
      snip_test::run_shell(snip + " export --plan 1 --to tensorboard --out x --db " + dir.file("none.db"));
  EXPECT_NE(plan.status, 0);
  EXPECT_NE(plan.out.find("give --run ID"), std::string::npos) << plan.out;
}

}  // namespace
