#include "sim/curve_replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim/scheduler.h"

namespace crest::sim {
namespace {

using ::testing::HasSubstr;

crest::ThroughputCurve Curve() {
  auto c = crest::ParseCurve(R"({"name": "t", "source": "test", "range": [300, 700],
    "avg_input_tokens": 186, "avg_output_tokens": 346, "max_output_len": 512,
    "points": [{"maxBatchSize": 300, "GenerateSpeed": 1000, "preemptions": 0},
               {"maxBatchSize": 500, "GenerateSpeed": 2000, "preemptions": 0},
               {"maxBatchSize": 700, "GenerateSpeed": 1500, "preemptions": 800},
               {"maxBatchSize": 900, "GenerateSpeed": 1200}]})",
                             "t.json");
  EXPECT_TRUE(c.ok()) << c.status();
  return *c;
}

SimConfig At(int b) {
  SimConfig config;
  config.max_batch_size = b;
  config.max_prefill_batch_size = b / 2;
  return config;
}

TEST(CurveReplay, AFullBatchGeneratesTheCurvesSpeedAndItsCounterOverAGsm8kRun) {
  for (int b : {300, 400, 600}) {
    const CurveReplay r = PlanCurveReplay(Curve(), At(b));
    ASSERT_FALSE(r.infeasible.has_value());
    // b - 1 clients keep b - 1 sequences decoding: b - 1 tokens a step.
    const double step_seconds = r.seconds_per_token * (b - 1);
    EXPECT_NEAR((b - 1) / step_seconds, *Curve().SpeedAt(b), 1e-9) << b;
    ASSERT_TRUE(r.preemptions_per_token.has_value());
    EXPECT_NEAR(*r.preemptions_per_token * 1319 * 346, *Curve().PreemptionsAt(b), 1e-6) << b;
    // Every sequence fits at its longest: the scheduler never preempts.
    EXPECT_GE(r.scheduler_blocks, static_cast<int64_t>(b) * ((8192 + 512) / 128));
  }
}

TEST(CurveReplay, NoCounterWhereTheFileHasNoneAndNoStartOutsideItsPoints) {
  EXPECT_FALSE(PlanCurveReplay(Curve(), At(800)).preemptions_per_token);  // 900 has none
  const CurveReplay outside = PlanCurveReplay(Curve(), At(901));
  ASSERT_TRUE(outside.infeasible.has_value());
  EXPECT_THAT(*outside.infeasible, HasSubstr("maxBatchSize 901 is outside the points of curve t"));
  EXPECT_TRUE(PlanCurveReplay(Curve(), At(299)).infeasible.has_value());
}

}  // namespace
}  // namespace crest::sim
