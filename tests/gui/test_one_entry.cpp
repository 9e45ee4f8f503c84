// Both fronts start a run through the one training session (snip/training_session.h): the same
// run asked of `snip train` and of the GUI's training worker is stored the same way — its
// settings, every metric row (less the wall-clock speed), the plan timeline with each plan's
// layers, and the final checkpoint's weights and optimizer state byte for byte. An adaptive SNIP
// run with a statistics round every 3 steps and a BF16 probe every 2 exercises every part.
#include <gtest/gtest.h>

#include <QTemporaryDir>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include "live_metrics.h"
#include "run_command.h"
#include "snip/model_config.h"
#include "snip/recorded_training.h"
#include "snip/store.h"
#include "training_worker.h"

using namespace snip::ui;

namespace {

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// The run's stored settings without what names where it was made (paths, the run's name).
nlohmann::json run_settings(const snip::RunInfo& run) {
  nlohmann::json j = run.spec.train_config;
  j.erase("checkpoint_dir");
  return nlohmann::json{{"train_config", j},        {"model", run.spec.model_config}, {"recipe", run.spec.recipe},
                        {"seed", run.spec.seed},    {"method", run.spec.method},      {"data", run.spec.data_source},
                        {"status", int(run.status)}};
}

TEST(OneEntryPoint, TheCliAndTheGuiWorkerStoreTheSameRun) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const std::string root = dir.path().toStdString();

  // The GUI: the worker's request, as the Run view's form makes it with these values.
  TrainRequest r;
  r.config.model = snip::preset_config("tiny");
  r.config.steps = 7;
  r.config.batch_size = 2;
  r.config.seq_len = 32;
  r.config.eval_every = 3;
  r.config.seed = 11;
  r.config.precision = "bf16";  // until the first plan, made before step 1
  snip::AdaptiveOptions a;
  a.method = snip::Method::snip;
  a.request.budget = 0.5;
  a.replan_every = 3;
  a.bf16_probe_every = 2;
  r.adaptive = a;
  r.method = "snip";
  r.run_name = "gui";
  r.db_path = QString::fromStdString(root + "/gui.db");
  r.checkpoint_root = QString::fromStdString(snip::checkpoint_root_of_database(root + "/gui.db"));
  TrainingWorker worker(std::make_shared<LiveMetrics>());
  QString status, message;
  QObject::connect(&worker, &TrainingWorker::run_ended,
                   [&](qint64, const QString& s, const QString& m, const QString&) { status = s, message = m; });
  worker.prepare(false);
  worker.run(r);
  ASSERT_EQ(status, "finished") << message.toStdString();

  // The CLI: the same run from its options (everything else at the shared defaults).
  const std::string out = root + "/cli-ck";
  const auto cli = snip_test::run_shell(std::string(SNIP_EXE) +
                                        " train --preset tiny --steps 7 --batch-size 2 --seq-len 32 --eval-every 3 "
                                        "--seed 11 --method snip --budget 0.5 --replan-every 3 --bf16-probe-every 2 "
                                        "--name cli --db " +
                                        root + "/cli.db --out " + out);
  ASSERT_EQ(cli.status, 0) << cli.out;

  snip::Store gui(root + "/gui.db"), cmd(root + "/cli.db");
  const snip::RunInfo g = gui.runs().at(0), c = cmd.runs().at(0);
  EXPECT_EQ(run_settings(g), run_settings(c)) << run_settings(g).dump(1) << "\n" << run_settings(c).dump(1);

  auto rows_g = gui.metrics(g.id), rows_c = cmd.metrics(c.id);
  ASSERT_EQ(rows_g.size(), 7u);
  ASSERT_EQ(rows_g.size(), rows_c.size());
  int probed = 0;
  for (size_t i = 0; i < rows_g.size(); ++i) {
    rows_g[i].tokens_per_s = rows_c[i].tokens_per_s = 0;  // wall-clock speed
    EXPECT_EQ(rows_g[i], rows_c[i]) << "step " << rows_g[i].step;
    probed += rows_g[i].bf16_gap.has_value();
  }
  EXPECT_EQ(probed, 4);  // steps 1, 3, 5, 7

  const auto timeline_g = gui.plan_timeline(g.id), timeline_c = cmd.plan_timeline(c.id);
  ASSERT_EQ(timeline_g.size(), 3u);  // before steps 1, 4 and 7
  ASSERT_EQ(timeline_g.size(), timeline_c.size());
  for (size_t i = 0; i < timeline_g.size(); ++i) {
    EXPECT_EQ(timeline_g[i].first_step, timeline_c[i].first_step);
    EXPECT_EQ(timeline_g[i].last_step, timeline_c[i].last_step);
    EXPECT_EQ(snip::plan_to_json(gui.plan(timeline_g[i].plan_id).plan),
              snip::plan_to_json(cmd.plan(timeline_c[i].plan_id).plan))
        << "plan " << i;
  }

  const auto checkpoints_g = gui.checkpoints(g.id), checkpoints_c = cmd.checkpoints(c.id);
  ASSERT_FALSE(checkpoints_g.empty());
  ASSERT_FALSE(checkpoints_c.empty());
  EXPECT_EQ(checkpoints_g.back().step, 7);
  EXPECT_EQ(checkpoints_c.back().step, 7);
  for (const char* file : {"model.safetensors", "optimizer.safetensors"})
    EXPECT_TRUE(file_bytes(checkpoints_g.back().path + "/" + file) ==
                file_bytes(checkpoints_c.back().path + "/" + file))
        << file << " differs";
}

}  // namespace

// The run and its checkpoint folder are one step: a folder that cannot be used leaves nothing in
// the database (the GUI used to record the run, then fail it).
TEST(OneEntryPoint, ARunWhoseCheckpointFolderCannotBeUsedRecordsNothing) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const std::string root = dir.path().toStdString();
  std::ofstream(root + "/a-file") << "not a folder\n";
  TrainRequest r;
  r.config.model = snip::preset_config("tiny");
  r.config.steps = 2;
  r.config.batch_size = 2;
  r.config.seq_len = 32;
  r.run_name = "nowhere to save";
  r.db_path = QString::fromStdString(root + "/gui.db");
  r.checkpoint_root = QString::fromStdString(root + "/a-file/checkpoints");  // below a file
  TrainingWorker worker(std::make_shared<LiveMetrics>());
  QString status, message;
  QObject::connect(&worker, &TrainingWorker::run_ended,
                   [&](qint64, const QString& s, const QString& m, const QString&) { status = s, message = m; });
  worker.prepare(false);
  worker.run(r);
  EXPECT_EQ(status, "failed");
  EXPECT_FALSE(message.isEmpty());
  snip::Store store(root + "/gui.db");
  EXPECT_TRUE(store.runs().empty()) << "a run that could not start was recorded";
}
