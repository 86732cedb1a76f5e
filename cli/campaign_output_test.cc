#include "cli/campaign_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cli/campaign_requests.h"

#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::cli {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StartsWith;

crest::v1::Campaign RunningCampaign(const std::string& activity) {
  crest::v1::Campaign c;
  c.set_id("c1");
  c.mutable_spec()->set_name("demo");
  c.set_state(crest::v1::CAMPAIGN_RUNNING);
  auto* m = c.add_models();
  m->set_model("LLaMa3-8B");
  m->set_trials_done(2);
  m->set_trials_planned(10);
  m->set_range_lo(362);
  m->set_range_hi(1088);
  m->set_activity(activity);
  return c;
}

TEST(WatchView, PlainLinesOnlyForRealChanges) {
  WatchView view(false);
  std::string first = view.Update(RunningCampaign("running 435 on node-1 (10/1319 requests)"), 0);
  EXPECT_THAT(first, StartsWith("campaign c1: running\n"));
  EXPECT_THAT(first, HasSubstr("  LLaMa3-8B        trials 2/10  best -  range [362, 1088]"));
  // Only the request counts moved: nothing to print.
  EXPECT_EQ(view.Update(RunningCampaign("running 435 on node-1 (200/1319 requests)"), 0), "");
  // The point changed: a new line, and no repeated state line.
  std::string next = view.Update(RunningCampaign("running 500 on node-1 (1/1319 requests)"), 0);
  EXPECT_THAT(next, StartsWith("  LLaMa3-8B "));
  EXPECT_THAT(next, HasSubstr("running 500"));
  crest::v1::Campaign done = RunningCampaign("running 500 on node-1 (1/1319 requests)");
  done.set_state(crest::v1::CAMPAIGN_FAILED);
  done.set_reason("node-1 lost");
  EXPECT_EQ(view.Update(done, 0), "campaign c1: failed - node-1 lost\n");
  EXPECT_EQ(view.End(done), "");  // the state line said it
}

TEST(WatchView, TerminalFramesRedrawInPlaceWithinTheWidth) {
  WatchView view(true);
  std::string first = view.Update(RunningCampaign(std::string(200, 'x')), 40);
  EXPECT_THAT(first, StartsWith("\x1b[2Kcampaign c1 (demo): running\n"));
  for (size_t start = 0, end; (end = first.find('\n', start)) != std::string::npos;
       start = end + 1) {
    std::string line = first.substr(start, end - start);
    ASSERT_THAT(line, StartsWith("\x1b[2K"));
    EXPECT_LT(line.size() - 4, 40u) << line;  // never wraps a 40-column terminal
  }
  // The second frame moves the cursor up over the first one's two lines.
  EXPECT_THAT(view.Update(RunningCampaign("y"), 80), StartsWith("\x1b[2A\x1b[2K"));
  crest::v1::Campaign done = RunningCampaign("y");
  done.set_state(crest::v1::CAMPAIGN_CANCELLED);
  done.set_reason("cancelled by the operator");
  EXPECT_EQ(view.End(done), "  cancelled by the operator\n");
}

TEST(CampaignText, ProgressBarAndCancelling) {
  crest::v1::ModelProgress m;
  EXPECT_EQ(ProgressBar(m, 4), "[----]");
  m.set_trials_planned(10);
  m.set_trials_done(5);
  EXPECT_EQ(ProgressBar(m, 20), "[##########----------]");
  m.set_trials_done(15);  // planned is an estimate: never past full
  EXPECT_EQ(ProgressBar(m, 4), "[####]");
  m.set_trials_done(1);
  m.set_done(true);
  EXPECT_EQ(ProgressBar(m, 4), "[####]");
  EXPECT_EQ(FitLine("abcdef", 4), "abc");
  EXPECT_EQ(FitLine("abc", 4), "abc");

  crest::v1::Campaign c = RunningCampaign("a");
  c.set_cancel_requested(true);
  EXPECT_THAT(CampaignText(c), StartsWith("campaign c1 (demo): running (cancelling)\n"));
  c.set_state(crest::v1::CAMPAIGN_CANCELLED);
  EXPECT_EQ(CancelText(c), "campaign c1 already ended: cancelled\n");
}

TEST(CampaignJson, TheFieldsScriptsRead) {
  crest::v1::Campaign c = RunningCampaign("a");
  auto* best = c.mutable_models(0)->mutable_best();
  best->mutable_parameters()->set_max_batch_size(435);
  best->set_generate_speed(1234.5);
  nlohmann::json j = CampaignJson(c);
  EXPECT_EQ(j["id"], "c1");
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["models"][0]["best"]["maxBatchSize"], 435);
  EXPECT_EQ(j["models"][0]["range"], nlohmann::json::array({362, 1088}));
  EXPECT_TRUE(CampaignJson(RunningCampaign("a"))["models"][0]["best"].is_null());
}

TEST(SubmitJson, WarningsOnlyWhenThereAreSome) {
  crest::v1::Campaign created;
  created.set_id("c3");
  EXPECT_EQ(SubmitJson(created), "{\"id\":\"c3\"}\n");
  created.add_warnings("few requests per client");
  EXPECT_EQ(SubmitJson(created), "{\"id\":\"c3\",\"warnings\":[\"few requests per client\"]}\n");
}

TEST(Report, PracticeAnswersAndFormats) {
  crest::v1::CampaignReport practice;
  auto* a = practice.add_models();
  a->set_model("a");
  a->mutable_best()->mutable_parameters()->set_max_batch_size(500);
  practice.add_models()->set_model("no-best");
  auto* zero = practice.add_models();
  zero->set_model("zero");
  zero->mutable_best()->mutable_parameters()->set_max_batch_size(0);
  EXPECT_EQ(PracticeAnswers(practice), (std::map<std::string, int64_t>{{"a", 500}}));

  controller::HtmlReportInput input;
  input.report.set_id("c1");
  EXPECT_EQ(nlohmann::json::parse(RenderReport("json", input))["id"], "c1");
  EXPECT_THAT(RenderReport("csv", input), StartsWith("campaign,model,trial,node,status"));
  EXPECT_THAT(RenderReport("html", input), HasSubstr("<html"));
}

TEST(ReportFlags, PracticeNeedsHtml) {
  EXPECT_THAT(CheckReportFlags("html", "c2"), IsOk());
  EXPECT_THAT(CheckReportFlags("json", ""), IsOk());
  EXPECT_THAT(CheckReportFlags("json", "c2"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--practice c2: marks the practice's answer on the HTML report's curves; "
                       "it needs --format html, not json"));
  EXPECT_THAT(CheckReportFlags("curve", "", "LLaMa3-8B"), IsOk());
  EXPECT_THAT(CheckReportFlags("table", "", "LLaMa3-8B"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "--model LLaMa3-8B: picks the model whose curve file --format curve "
                       "writes; it needs --format curve, not table (which shows every model)"));
}

TEST(LoadCampaignSpec, DefaultsFilledOrEveryProblemWithTheFileAndLine) {
  crest::testing::TempDir dir;
  const std::string good = dir.File("good.yaml");
  ASSERT_THAT(WriteFileAtomically(good, "name: x\nmodels: [{name: LLaMa3-8B}]\n"), IsOk());
  auto spec = LoadCampaignSpec(good);
  ASSERT_THAT(spec, IsOk());
  EXPECT_EQ(spec->name(), "x");
  EXPECT_EQ(spec->search().strategy(), "knee");

  const std::string bad = dir.File("bad.yaml");
  ASSERT_THAT(WriteFileAtomically(bad, "name: x\nmodels: [{name: m}]\nsearch: {strategy: stp}\n"),
              IsOk());
  EXPECT_THAT(LoadCampaignSpec(bad),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("bad.yaml:3: search.strategy: unknown strategy 'stp'")));
  EXPECT_THAT(LoadCampaignSpec(bad),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("did you mean 'step'?")));

  auto missing = LoadCampaignSpec(dir.File("missing.yaml"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              StartsWith("-f " + dir.File("missing.yaml") + ": "));
}

}  // namespace
}  // namespace crest::cli
