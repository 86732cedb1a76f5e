#include "controller/campaign_io/report_runs.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

namespace crest::controller {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

json Trial(int b, double speed, const std::string& status = "ok") {
  return {{"maxBatchSize", b},        {"maxPrefillBatchSize", b / 2},
          {"concurrency", b - 1},     {"supportSelectBatch", false},
          {"prefillTimeMsPerReq", 0}, {"decodeTimeMsPerReq", 0},
          {"status", status},         {"calibration", false},
          {"rateSearch", false},      {"GenerateSpeed", speed},
          {"FirstTokenTime", 900.0},  {"DecodeTime", 60.0},
          {"npuBlockNum", 2176},      {"preemptions", 2}};
}

// A vector, not a braced json: Clang reads a braced list of one json as a
// copy of that element, GCC as an array of it.
json Report(const std::vector<json>& trials) {
  json models = json::array();
  models.push_back({{"model", "llama3-8b"}, {"trials", json(trials)}});
  return {{"id", "c-1"}, {"models", std::move(models)}};
}

TEST(RunsOfReportTest, AveragesTheTrustedRunsOfEachConfiguration) {
  json flagged = Trial(600, 1.0);
  flagged["flags"] = {"throttled"};
  json calibration = Trial(500, 1.0);
  calibration["calibration"] = true;
  absl::StatusOr<ReportRuns> runs =
      RunsOfReport(Report({Trial(500, 1000), Trial(500, 1100), Trial(600, 900),
                           Trial(700, 1, "failed"), flagged, calibration}),
                   "");
  ASSERT_TRUE(runs.ok()) << runs.status();
  EXPECT_EQ(runs->model, "llama3-8b");
  EXPECT_EQ(runs->npu_block_num, 2176);
  EXPECT_EQ(runs->trusted_runs, 3);
  EXPECT_EQ(runs->left_out_runs, 3);
  ASSERT_EQ(runs->points.size(), 2u);
  EXPECT_EQ(runs->points[0].max_batch_size, 500);
  EXPECT_EQ(runs->points[0].runs, 2);
  EXPECT_DOUBLE_EQ(runs->points[0].generate_speed, 1050);
  EXPECT_DOUBLE_EQ(runs->points[0].first_token_ms, 900);
  EXPECT_DOUBLE_EQ(runs->points[0].preemptions.value(), 2);
  EXPECT_EQ(runs->points[1].concurrency, 599);
}

TEST(RunsOfReportTest, SaysWhyAReportCannotBeFitted) {
  EXPECT_THAT(RunsOfReport(json::array(), "").status().message(),
              HasSubstr("crest campaign report --format json"));
  EXPECT_THAT(RunsOfReport(Report({Trial(500, 1, "failed")}), "").status().message(),
              HasSubstr("none of its 1 runs can be trusted"));
  absl::StatusOr<ReportRuns> other = RunsOfReport(Report({Trial(500, 1000)}), "qwen");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(other.status().message(), HasSubstr("it has: llama3-8b"));
  json missing = Trial(500, 1000);
  missing.erase("GenerateSpeed");
  EXPECT_THAT(RunsOfReport(Report({missing}), "").status().message(),
              HasSubstr("trials[0].GenerateSpeed: expected a number"));
}

}  // namespace
}  // namespace crest::controller
