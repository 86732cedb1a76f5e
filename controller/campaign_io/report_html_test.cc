#include "controller/campaign_io/report_html.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "controller/campaign_io/testing/sample_report.h"

namespace crest::controller {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

int Count(const std::string& text, const std::string& pattern) {
  std::regex re(pattern);
  return static_cast<int>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

std::string Render(bool with_campaign, std::map<std::string, int64_t> practice = {}) {
  crest::v1::Campaign campaign = testing::SampleCampaign();
  HtmlReportInput in;
  in.report = testing::SampleReport();
  in.campaign = with_campaign ? &campaign : nullptr;
  in.practice_max_batch_size = std::move(practice);
  return ReportToHtml(in);
}

TEST(ReportHtml, OnePointPerOkTrialAndTheCurveMarks) {
  const std::string html = Render(true);
  EXPECT_EQ(Count(html, R"(<circle class="pt[ "])"), testing::SampleOkTrials());
  EXPECT_EQ(Count(html, R"(<circle class="pt cal")"), 1);
  // Two curves, each with its peak; error bars only on the points with repeats.
  EXPECT_EQ(Count(html, "<svg "), 2);
  EXPECT_EQ(Count(html, R"(<circle class="peak")"), 2);
  EXPECT_EQ(Count(html, R"(<tr class="peak")"), 3);  // both repeats at 500, and 462
  EXPECT_THAT(html, HasSubstr("peak 500"));
  EXPECT_THAT(html, HasSubstr("peak 462"));
  EXPECT_EQ(Count(html, R"(<g class="errbar">)"), 3);
  // Shaded from the first preempting point (600) of LLaMa3-8B, from the failed one (562) of 13B.
  EXPECT_THAT(html, HasSubstr("infeasible, failed or preempting from maxBatchSize 600"));
  EXPECT_THAT(html, HasSubstr("infeasible, failed or preempting from maxBatchSize 562"));
  EXPECT_EQ(Count(html, R"(<path class="x")"), 2);
  EXPECT_THAT(html, Not(HasSubstr("practice ")));
}

TEST(ReportHtml, AnUntrustedBestIsNoRecommendationAndTheWarningsShow) {
  HtmlReportInput in;
  in.report = testing::SampleReport();
  in.report.mutable_models(0)->mutable_best()->set_untrusted(true);
  in.report.add_warnings("LLaMa3-8B: every run was flagged <client_bound>");
  const std::string html = ReportToHtml(in);
  EXPECT_THAT(
      html,
      HasSubstr(R"(<p class="warning">LLaMa3-8B: every run was flagged &lt;client_bound&gt;</p>)"));
  EXPECT_THAT(html, HasSubstr("(untrusted: every run flagged)"));
  EXPECT_EQ(Count(html, "not a recommendation"), 1);
  EXPECT_EQ(Count(html, "Chosen configuration"), 1);  // the other model's
  EXPECT_THAT(Render(true), Not(HasSubstr("class=\"warning\"")));
}

TEST(ReportHtml, DrawsAPredictedCurveBesideTheMeasuredOne) {
  EXPECT_THAT(Render(true), Not(HasSubstr(R"(class="predicted")")));
  crest::v1::Campaign campaign = testing::SampleCampaign();
  HtmlReportInput in;
  in.report = testing::SampleReport();
  in.campaign = &campaign;
  auto* m = in.report.mutable_models(0);
  for (const auto& [b, speed] : std::vector<std::pair<int64_t, double>>{
           {400, 2700}, {450, 2900}, {500, 3000}, {550, 2950}, {1200, 2100}}) {
    auto* p = m->add_predicted();
    p->set_max_batch_size(b);
    p->set_generate_speed(speed);
  }
  m->set_predicted_source("campaign c1's fit");
  const std::string html = ReportToHtml(in);
  EXPECT_EQ(
      Count(html, R"(<polyline class="predicted" points="([0-9.]+,[0-9.]+ ){4}[0-9.]+,[0-9.]+">)"),
      1);
  EXPECT_THAT(html, HasSubstr("<title>predicted by campaign c1&#39;s fit</title>"));
  EXPECT_THAT(html, HasSubstr("predicted (search.prior)"));
  // Its range widens the plot: 1200 is an x tick's neighbourhood now.
  EXPECT_THAT(html, HasSubstr(">1200<"));
}

TEST(ReportHtml, MarksThePracticesAnswerWhenKnown) {
  const std::string html = Render(true, {{"LLaMa3-8B", 435}});
  EXPECT_EQ(Count(html, R"(<line class="practice")"), 1);
  EXPECT_THAT(html, HasSubstr("practice 435"));
  EXPECT_THAT(html, HasSubstr("the practice's answer"));
}

TEST(ReportHtml, ScheduleConfigSnippetIsThePeaksSettings) {
  const std::string html = Render(true);
  EXPECT_THAT(html, HasSubstr(R"({
  &quot;ScheduleConfig&quot;: {
    &quot;maxBatchSize&quot;: 500,
    &quot;maxPrefillBatchSize&quot;: 250,
    &quot;supportSelectBatch&quot;: true,
    &quot;prefillTimeMsPerReq&quot;: 120,
    &quot;decodeTimeMsPerReq&quot;: 38
  }
})"));
}

TEST(ReportHtml, HostSettingsAndTimeline) {
  const std::string html = Render(true);
  EXPECT_THAT(html, HasSubstr("<th class=\"l\">CPU governor</th><td class=\"l\">performance"));
  EXPECT_THAT(html, HasSubstr("odd_numa"));
  EXPECT_THAT(html, HasSubstr("campaign created"));
  EXPECT_THAT(html, HasSubstr("campaign ended: succeeded"));
  EXPECT_THAT(html, HasSubstr("c7-t8 LLaMa3-8B maxBatchSize 700 on node-2: infeasible in 45.0 s"));
  const std::string without = Render(false);
  EXPECT_THAT(without, HasSubstr("Host settings: not known."));
}

TEST(ReportHtml, EscapesEveryTextAndFetchesNothing) {
  const std::string html = Render(true);
  EXPECT_THAT(html, HasSubstr("nightly &lt;tuning&gt;"));
  EXPECT_THAT(html, HasSubstr("out of memory: &lt;NPU&gt; &#39;HBM&#39; &amp; more"));
  EXPECT_THAT(html, Not(HasSubstr("<NPU>")));
  // Self-contained: no scripts, links, imports or remote URLs of any kind.
  EXPECT_THAT(html, Not(HasSubstr("<script")));
  EXPECT_THAT(html, Not(HasSubstr("<link")));
  EXPECT_THAT(html, Not(HasSubstr("@import")));
  EXPECT_THAT(html, Not(HasSubstr("url(")));
  EXPECT_THAT(html, Not(HasSubstr("src=")));
  EXPECT_THAT(html, Not(HasSubstr("http")));
}

TEST(ReportHtml, AModelWithoutTrialsSaysSo) {
  crest::v1::CampaignReport r;
  r.set_id("c1");
  r.add_models()->set_model("m");
  HtmlReportInput in;
  in.report = r;
  const std::string html = ReportToHtml(in);
  EXPECT_THAT(html, HasSubstr("No trial measured."));
  EXPECT_THAT(html, HasSubstr("<b>no result</b>"));
  EXPECT_EQ(Count(html, "<svg "), 0);
}

}  // namespace
}  // namespace crest::controller
