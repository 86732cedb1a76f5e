#include "common/curve_file.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

namespace crest {
namespace {

using ::crest::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kThreePoints[] = R"({"name": "t", "source": "test",
  "range": [100, 300], "noise_cv": 0.01,
  "points": [{"maxBatchSize": 100, "GenerateSpeed": 1000, "preemptions": 0},
             {"maxBatchSize": 200, "GenerateSpeed": 2000, "preemptions": 10},
             {"maxBatchSize": 300, "GenerateSpeed": 1500}]})";

TEST(ThroughputCurve, IsLinearBetweenPointsAndInfeasibleOutside) {
  auto c = ParseCurve(kThreePoints, "t.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_DOUBLE_EQ(*c->SpeedAt(150), 1500);
  EXPECT_DOUBLE_EQ(*c->SpeedAt(200), 2000);
  EXPECT_DOUBLE_EQ(*c->SpeedAt(250), 1750);
  EXPECT_DOUBLE_EQ(*c->SpeedAt(300), 1500);
  EXPECT_FALSE(c->SpeedAt(99).has_value());
  EXPECT_FALSE(c->SpeedAt(301).has_value());
  EXPECT_DOUBLE_EQ(c->noise_cv, 0.01);
}

TEST(ThroughputCurve, ACounterIsInterpolatedOnlyWhereBothEndsPublishIt) {
  auto c = ParseCurve(kThreePoints, "t.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->PreemptionsAt(100), 0);  // a counter that says 0
  EXPECT_EQ(c->PreemptionsAt(150), 5);
  EXPECT_EQ(c->PreemptionsAt(200), 10);
  EXPECT_FALSE(c->PreemptionsAt(250).has_value());  // 300 publishes none
  EXPECT_FALSE(c->PreemptionsAt(300).has_value());
}

TEST(ThroughputCurve, PeakWithinARangeMayBeItsEnd) {
  auto c = ParseCurve(kThreePoints, "t.json");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->PeakWithin(100, 300)->first, 200);
  EXPECT_EQ(c->PeakWithin(100, 180)->first, 180);
  EXPECT_DOUBLE_EQ(c->PeakWithin(100, 180)->second, 1800);
  EXPECT_EQ(c->PeakWithin(250, 400)->first, 250);
  EXPECT_FALSE(c->PeakWithin(301, 400).has_value());
}

TEST(ThroughputCurve, WritesWhatItReads) {
  auto c = ParseCurve(kThreePoints, "t.json");
  ASSERT_TRUE(c.ok()) << c.status();
  c->npu_block_num = 2176;
  c->avg_input_tokens = 186;
  c->avg_output_tokens = 346;
  c->max_output_len = 512;
  auto again = ParseCurve(CurveJson(*c), "written");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << CurveJson(*c);
  EXPECT_EQ(again->name, "t");
  EXPECT_EQ(again->npu_block_num, 2176);
  EXPECT_EQ(again->range, c->range);
  ASSERT_EQ(again->points.size(), 3u);
  EXPECT_EQ(again->points[1].preemptions, 10);
  EXPECT_FALSE(again->points[2].preemptions.has_value());
  EXPECT_DOUBLE_EQ(again->points[2].generate_speed, 1500);
}

TEST(ThroughputCurve, BadInputNamesTheFieldAndWhatWasExpected) {
  const std::pair<const char*, const char*> cases[] = {
      {"[1]", "not a JSON object"},
      {R"({"source": "s", "range": [1, 2], "points": [{"maxBatchSize": 1, "GenerateSpeed": 1}]})",
       "name must be a non-empty string"},
      {R"({"name": "n", "points": [{"maxBatchSize": 1, "GenerateSpeed": 1}]})",
       "give range [lo, hi] or npuBlockNum"},
      {R"({"name": "n", "range": [5, 2], "points": [{"maxBatchSize": 1, "GenerateSpeed": 1}]})",
       "range must be [lo, hi]"},
      {R"({"name": "n", "range": [1, 2], "points": []})", "points must be a non-empty array"},
      {R"({"name": "n", "range": [1, 2], "points": [{"maxBatchSize": 0, "GenerateSpeed": 1}]})",
       "points[0]: maxBatchSize must be an integer >= 1, got 0"},
      {R"({"name": "n", "range": [1, 2], "points": [{"maxBatchSize": 2, "GenerateSpeed": 1},
          {"maxBatchSize": 2, "GenerateSpeed": 1}]})",
       "points[1]: maxBatchSize 2 must be above the previous point's 2"},
      {R"({"name": "n", "range": [1, 2], "points": [{"maxBatchSize": 1, "GenerateSpeed": "x"}]})",
       "GenerateSpeed must be a number >= 0"},
      {R"({"name": "n", "range": [1, 2], "points": [{"maxBatchSize": 1}]})",
       "points[0]: GenerateSpeed is missing"},
      {R"({"name": "n", "range": [1, 2], "points": [{"maxBatchSize": 1, "GenerateSpeed": 1,
          "preemptions": -1}]})",
       "preemptions must be an integer >= 0, got -1"},
      {R"({"name": "n", "npuBlockNum": 2176, "points": [{"maxBatchSize": 1, "GenerateSpeed": 1}]})",
       "avg_input_tokens is missing"},
      {R"({"name": "n", "range": [1, 2], "noise_cv": 2, "points": [{"maxBatchSize": 1,
          "GenerateSpeed": 1}]})",
       "noise_cv must be a number from 0 to 0.5"},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_THAT(ParseCurve(text, "c.json"),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         ::testing::AllOf(HasSubstr("c.json"), HasSubstr(expected))))
        << text;
  }
  EXPECT_THAT(ReadCurveFile("/nonexistent/c.json"), StatusIs(absl::StatusCode::kNotFound));
}

// Every curve of the zoo (bench/search/curves/) is a valid file with its
// source named.
TEST(ThroughputCurve, TheShippedZooParses) {
  const auto dir = std::filesystem::path(testing::SourceDir()) / "bench/search/curves";
  size_t n = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().extension() != ".json") continue;
    auto c = ReadCurveFile(e.path().string());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->name, e.path().stem().string());
    EXPECT_FALSE(c->source.empty()) << c->name;
    EXPECT_FALSE(c->rationale.empty()) << c->name;
    ++n;
  }
  EXPECT_GE(n, 10u);
}

}  // namespace
}  // namespace crest
