// End to end: a campaign replayed from a curve file. mindie-sim serves the
// file (--curve: its GenerateSpeed by step-time scaling, its preemption
// counter, its npuBlockNum) through a real agent and controller; the knee
// search finds the file's peak; and `crest campaign report --format curve`
// writes the campaign back as a curve file that reads as the same shape.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

#include "common/curve_file.h"
#include "common/file_util.h"
#include "tests/e2e/campaign_fixture.h"

namespace crest::e2e {
namespace {

using ::testing::HasSubstr;

// npuBlockNum 480 with GSM8K's prompts and MaxOutputLen 64: the auto range
// [160, 240], the knee guessed at 195. The peak at the knee, 200: rising as
// 600 b / (b + 100), then preemptions and a fall of 30% over 40 sequences.
constexpr int64_t kPeak = 200;
double Speed(int64_t b) {
  const double rise = 600.0 * static_cast<double>(std::min(b, kPeak)) /
                      static_cast<double>(std::min(b, kPeak) + 100);
  return b <= kPeak ? rise : rise * (1 - 0.3 * static_cast<double>(b - kPeak) / 40);
}

std::string CurveFile() {
  crest::ThroughputCurve c;
  c.name = "replay-e2e";
  c.source = "synthetic, tests/e2e/curve_replay_e2e_test.cc";
  c.npu_block_num = 480;
  c.avg_input_tokens = 186;
  c.avg_output_tokens = 64;
  c.max_output_len = 64;
  c.noise_cv = 0.005;
  for (int64_t b = 160; b <= 240; b += 4) {
    c.points.push_back({b, Speed(b), b <= kPeak ? 0 : 5 * (b - kPeak)});
  }
  return crest::CurveJson(c);
}

using CurveReplayE2e = CampaignFixture;

TEST_F(CurveReplayE2e, ACampaignOnAReplayedCurveFindsItsPeakAndWritesItBack) {
  const std::string curve_path = dir_.File("curve.json");
  ASSERT_TRUE(WriteFileAtomically(curve_path, CurveFile()).ok());
  std::string controller = StartController(dir_.File("ctl"));
  AgentOptions options;
  options.controller = controller;
  options.sim_args = {"--curve", curve_path};
  // Slower than the suite's usual 200: a step of 200 sequences then takes
  // about 5 ms of real time, which a busy machine's scheduling delays move
  // by less than the tolerance below.
  options.time_scale = 100;
  StartAgentWith("node-1", "LLaMa3-8B", options);
  ASSERT_TRUE(controller_->WaitForLine("agent node-1 registered", kStartup).ok());
  std::string id = Submit(R"(name: replay
models: [{name: LLaMa3-8B}]
search: {strategy: knee, max_trials: 14}
client: {request_count: 300, max_output_len: 64}
)");
  CommandResult watch = Watch(id);
  ASSERT_EQ(watch.code, 0) << watch.output;

  nlohmann::json report = Report(id);
  const auto& model = Model(report, "LLaMa3-8B");
  ASSERT_FALSE(model["best"].is_null()) << model.dump(2);
  // The file's block count, its counter, its peak.
  for (const auto& t : model["trials"]) {
    if (t["status"] != "ok") continue;
    EXPECT_EQ(t["npuBlockNum"], 480) << t.dump();
    const int64_t b = t["maxBatchSize"];
    if (b <= kPeak) {
      EXPECT_EQ(t["preemptions"], 0) << t.dump();
    }
    if (b >= kPeak + 4) {
      EXPECT_GT(t["preemptions"].get<int64_t>(), 0) << t.dump();
    }
  }
  const int64_t best = model["best"]["maxBatchSize"];
  EXPECT_GE(Speed(best), 0.98 * Speed(kPeak)) << model.dump(2);
  EXPECT_THAT(model["best"]["basis"].get<std::string>(), ::testing::AnyOf("knee", "knee-fit"));

  // The campaign as a curve file: the measured points, the same shape.
  const std::string written = dir_.File("written.json");
  CommandResult curve = Cli({"campaign", "report", id, "--format", "curve", "-o", written});
  ASSERT_EQ(curve.code, 0) << curve.output;
  absl::StatusOr<crest::ThroughputCurve> back = crest::ReadCurveFile(written);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->name, "replay-LLaMa3-8B");
  EXPECT_THAT(back->source, HasSubstr(absl::StrCat("crest campaign report ", id)));
  EXPECT_EQ(back->npu_block_num, 480);
  ASSERT_GE(back->points.size(), 3u);
  // Figures as the benchmark measured them, relative to the best point as
  // the file has them: within 8% (real time on a machine that runs other
  // tests beside this one stretches the larger batches' runs most).
  const auto top = std::max_element(back->points.begin(), back->points.end(),
                                    [](const crest::CurvePoint& a, const crest::CurvePoint& b) {
                                      return a.generate_speed < b.generate_speed;
                                    });
  for (const crest::CurvePoint& p : back->points) {
    const double measured = p.generate_speed / top->generate_speed;
    const double file = Speed(p.max_batch_size) / Speed(top->max_batch_size);
    EXPECT_NEAR(measured, file, 0.08) << "at " << p.max_batch_size;
    ASSERT_TRUE(p.preemptions.has_value()) << p.max_batch_size;
    EXPECT_EQ(*p.preemptions == 0, p.max_batch_size <= kPeak) << p.max_batch_size;
  }
}

}  // namespace
}  // namespace crest::e2e
