#include "controller/campaign_io/batch_fill.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "controller/campaign_io/spec_parser.h"

namespace crest::controller {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

ParsedSpec FillParse(const std::string& search_and_client) {
  return ParseAndValidateCampaignSpec("name: fill\nmodels: [{name: LLaMa3-8B}]\n" +
                                      search_and_client);
}

crest::v1::CampaignSpec FillSpec(const std::string& search_and_client) {
  ParsedSpec parsed = FillParse(search_and_client);
  EXPECT_THAT(parsed.problems, IsEmpty()) << FormatProblems(parsed.problems);
  return parsed.spec;
}

TEST(SpecFill, RequestsPerRun) {
  EXPECT_EQ(RequestsPerRun(FillSpec("client: {request_count: 600}\n").client()), 600);
  EXPECT_EQ(RequestsPerRun(FillSpec("client: {}\n").client()), 1319);  // GSM8K once
  // crest-bench repeats the dataset past its end: the count is what is sent.
  EXPECT_EQ(RequestsPerRun(FillSpec("client: {request_count: 5000}\n").client()), 5000);
  EXPECT_EQ(RequestsPerRun(FillSpec("client: {dataset: {type: jsonl, path: mine}}\n").client()),
            std::nullopt);
  EXPECT_EQ(LargestFillablePoint(FillSpec("client: {request_count: 600}\n")), 601);
  EXPECT_EQ(
      LargestFillablePoint(FillSpec("client: {mode: rate, request_rate: 5, request_count: 10}\n")),
      std::nullopt);
}

TEST(SpecFill, AnExplicitRangeTheRequestsCannotFillIsRefusedWithTheReason) {
  ParsedSpec parsed = FillParse(
      "search: {range: [100, 1000]}\n"
      "client: {request_count: 600, max_output_len: 256}\n");
  ASSERT_EQ(parsed.problems.size(), 1u) << FormatProblems(parsed.problems);
  EXPECT_EQ(parsed.problems[0].path, "search.range");
  EXPECT_EQ(parsed.problems[0].line, 3);
  EXPECT_THAT(parsed.problems[0].message,
              AllOf(HasSubstr("model LLaMa3-8B"), HasSubstr("range [100, 1000]"),
                    HasSubstr("Concurrency 999"), HasSubstr("request_count 600"),
                    HasSubstr("can never fill above maxBatchSize 601"),
                    HasSubstr("lower the range to at most 601"),
                    HasSubstr("raise client.request_count to at least 999")));
  // Exactly fillable: Concurrency 600 for 600 requests.
  EXPECT_THAT(FillParse("search: {range: [100, 601]}\nclient: {request_count: 600}\n").problems,
              IsEmpty());
  // Without a request count, the dataset's size counts.
  EXPECT_THAT(FillParse("search: {range: [100, 2000]}\n").problems[0].message,
              HasSubstr("the GSM8K dataset's 1319 requests (no request_count) sends 1319"));
}

TEST(SpecFill, ThePracticeRunIsAllowedAndTheFewRequestsPerClientSaid) {
  // GSM8K, 1319 requests at Concurrency 1000.
  crest::v1::CampaignSpec spec = FillSpec("search: {range: [435, 1001], initial: 435}\n");
  EXPECT_THAT(CheckBatchCanFill(spec), IsEmpty());
  EXPECT_THAT(SpecWarnings(spec),
              ElementsAre(AllOf(HasSubstr("1319 requests per run for up to 1000 clients"),
                                HasSubstr("1.32 per client at maxBatchSize 1001"))));
  // Two per client or more: nothing to say.
  EXPECT_THAT(SpecWarnings(FillSpec("search: {range: [100, 500]}\nclient: {request_count: 998}\n")),
              IsEmpty());
}

TEST(SpecFill, AnAutoRangeIsCappedAndSaidOnlyForAChosenCount) {
  EXPECT_THAT(SpecWarnings(FillSpec("client: {request_count: 600}\n")),
              ElementsAre(HasSubstr("the auto range of model LLaMa3-8B stops at maxBatchSize 601 "
                                    "(request_count 600 cannot fill a larger batch)")));
  EXPECT_THAT(CheckBatchCanFill(FillSpec("client: {request_count: 600}\n")), IsEmpty());
  EXPECT_THAT(SpecWarnings(FillSpec("client: {}\n")), IsEmpty());
}

TEST(SpecFill, RateModeAndUnknownDatasetsAreNotChecked) {
  EXPECT_THAT(FillParse("search: {range: [100, 1000]}\n"
                        "client: {mode: rate, request_rate: 5, request_count: 10}\n")
                  .problems,
              IsEmpty());
  EXPECT_THAT(FillParse("search: {range: [100, 1000]}\n"
                        "client: {dataset: {type: jsonl, path: mine}}\n")
                  .problems,
              IsEmpty());
}

TEST(SpecFill, CalibrationInTextModeIsAllowedButSaidToBeSkipped) {
  crest::v1::CampaignSpec text = FillSpec("client: {task_kind: text}\ncalibrate: true\n");
  EXPECT_THAT(SpecWarnings(text), ElementsAre(AllOf(HasSubstr("calibrate: client.task_kind text"),
                                                    HasSubstr("calibration will be skipped"))));
  EXPECT_THAT(SpecWarnings(FillSpec("client: {task_kind: stream}\ncalibrate: true\n")), IsEmpty());
  EXPECT_THAT(SpecWarnings(FillSpec("client: {task_kind: text}\n")), IsEmpty());
}

}  // namespace
}  // namespace crest::controller
