// CampaignManager after the search (campaign_jobs.cc, after_search.h): the
// calibration runs at the chosen point and the rate search on one daemon.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"

#include "controller/campaign_manager.h"
#include "controller/testing/manager_fixture.h"

namespace crest::controller {
namespace {

using crest::controller::testing::ManagerFixture;
using crest::controller::testing::PracticeCurve;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ManagerAfterSearchTest : public ManagerFixture {};

// The select-batch overrides of daemon start `start`, as text.
std::map<std::string, std::string> Overrides(const crest::v1::StartDaemonRequest& start) {
  std::map<std::string, std::string> overrides;
  for (const auto& o : start.overrides()) {
    overrides[o.key()] =
        o.has_bool_value() ? (o.bool_value() ? "true" : "false") : absl::StrCat(o.int_value());
  }
  return overrides;
}

TEST_F(ManagerAfterSearchTest, CalibrationAtTheChosenPointIsKeptWhenThroughputHolds) {
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(
      Spec("name: cal\nmodels: [{name: m}]\nsearch: {strategy: practice}\ncalibrate: true\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  // The ladder without select batch, then the chosen 500 again with it, from
  // the latencies measured there.
  EXPECT_THAT(Summary(trials),
              ElementsAre("435:TRIAL_OK@a", "500:TRIAL_OK@a", "600:TRIAL_OK@a", "500:TRIAL_OK@a"));
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(trials[i].parameters().support_select_batch());
  const auto& cal = trials[3];
  EXPECT_TRUE(cal.calibration());
  EXPECT_TRUE(cal.parameters().support_select_batch());
  EXPECT_DOUBLE_EQ(cal.parameters().prefill_time_ms_per_req(), 120);  // round(120.4)
  EXPECT_DOUBLE_EQ(cal.parameters().decode_time_ms_per_req(), 46);    // round(45.6)
  auto overrides = Overrides(a->starts().back());
  EXPECT_EQ(overrides["maxBatchSize"], "500");
  EXPECT_EQ(overrides["supportSelectBatch"], "true");
  EXPECT_EQ(overrides["prefillTimeMsPerReq"], "120");
  EXPECT_EQ(overrides["decodeTimeMsPerReq"], "46");
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  const auto& m = report->models(0);
  EXPECT_EQ(m.calibration().outcome(), "kept");
  EXPECT_DOUBLE_EQ(m.calibration().generate_speed_before(), 2980.3);
  EXPECT_DOUBLE_EQ(m.calibration().generate_speed_after(), 2980.3);
  EXPECT_TRUE(m.best().parameters().support_select_batch());
  EXPECT_DOUBLE_EQ(m.best().parameters().prefill_time_ms_per_req(), 120);
  EXPECT_EQ(m.best().parameters().max_batch_size(), 500);
  auto view = manager_->Get(c->id());
  EXPECT_THAT(view->models(0).activity(), HasSubstr("calibration kept"));
}

TEST_F(ManagerAfterSearchTest, CalibrationIsDroppedWhenThroughputFallsBeyondTheBand) {
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  a->SetSelectBatchFactor(0.9);  // 10% down: beyond 2 x 2% x sqrt(2) = 5.7%
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(
      Spec("name: cal\nmodels: [{name: m}]\nsearch: {strategy: practice}\ncalibrate: true\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  const auto& m = report->models(0);
  EXPECT_EQ(m.calibration().outcome(), "dropped");
  EXPECT_DOUBLE_EQ(m.calibration().generate_speed_after(), 2980.3 * 0.9);
  EXPECT_THAT(m.calibration().reason(), HasSubstr("fell 10.0%"));
  // The recommendation stays without select batch, at the search's figure.
  EXPECT_FALSE(m.best().parameters().support_select_batch());
  EXPECT_DOUBLE_EQ(m.best().generate_speed(), 2980.3);
}

TEST_F(ManagerAfterSearchTest, CalibratedTimesAreKeptInMindiesRange) {
  auto a = AddAgent("a");
  a->SetLatencies(1401.4, 0.2);  // first tokens queued for over a second; a sub-ms decode
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(
      Spec("name: cal\nmodels: [{name: m}]\nsearch: {strategy: practice, range: [100, 200], "
           "initial: 100}\ncalibrate: true\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  ASSERT_EQ(trials.size(), 3u);
  const auto& cal = trials.back();
  EXPECT_TRUE(cal.calibration());
  EXPECT_EQ(cal.status(), crest::v1::TRIAL_OK);
  EXPECT_DOUBLE_EQ(cal.parameters().prefill_time_ms_per_req(), 1000);
  EXPECT_DOUBLE_EQ(cal.parameters().decode_time_ms_per_req(), 1);
}

TEST_F(ManagerAfterSearchTest, TextModeSkipsTheCalibrationAndSaysSo) {
  auto a = AddAgent("a");
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(
      Spec("name: cal\nmodels: [{name: m}]\nsearch: {strategy: practice, range: [100, 200], "
           "initial: 100}\nclient: {task_kind: text}\ncalibrate: true\n"));
  CREST_ASSERT_OK(c);
  EXPECT_THAT(c->warnings(), ::testing::Contains(HasSubstr("calibration will be skipped")));
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  for (const auto& t : Trials(c->id())) EXPECT_FALSE(t.calibration());
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  EXPECT_EQ(report->models(0).calibration().outcome(), "skipped");
  EXPECT_THAT(report->models(0).calibration().reason(), HasSubstr("task_kind text"));
  EXPECT_FALSE(report->models(0).best().parameters().support_select_batch());
}

TEST_F(ManagerAfterSearchTest, RateSearchReusesOneDaemonAtTheChosenPoint) {
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  a->SetTokensPerRequest(100);  // a rate-mode run gives min(curve, rate x 100)
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: rates
models: [{name: m}]
search: {strategy: practice}
rate_search: {start: 10, factor: 2}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  // 1000, 2000, 2980.3 (capped by the server), 2980.3 again: no rise, the end.
  ASSERT_EQ(trials.size(), 7u);
  std::set<int32_t> pids;
  for (size_t i = 3; i < trials.size(); ++i) {
    EXPECT_TRUE(trials[i].rate_search());
    EXPECT_EQ(trials[i].parameters().max_batch_size(), 500);
    EXPECT_EQ(trials[i].parameters().concurrency(), 1000u);
    EXPECT_EQ(trials[i].repeat(), i - 3);
    pids.insert(trials[i].result().daemon_pid());
  }
  EXPECT_EQ(pids.size(), 1u);  // one daemon served every rate
  // Probe, three search points, one start for the whole rate search.
  EXPECT_EQ(a->starts().size(), 5u);
  auto benchmarks = a->benchmarks();
  ASSERT_EQ(benchmarks.size(), 7u);
  EXPECT_DOUBLE_EQ(benchmarks[3].request_rate(), 10);
  EXPECT_DOUBLE_EQ(benchmarks[6].request_rate(), 80);
  EXPECT_EQ(a->daemons_running(), 0);  // stopped after the last rate
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  const auto& r = report->models(0).rate_search();
  EXPECT_TRUE(r.done());
  EXPECT_DOUBLE_EQ(r.best_rate(), 40);
  ASSERT_EQ(r.points_size(), 4);
  EXPECT_FALSE(r.points(0).rises());
  EXPECT_TRUE(r.points(2).rises());
  EXPECT_FALSE(r.points(3).rises());
  EXPECT_THAT(r.reason(), HasSubstr("stopped rising at 80"));
  // The search's answer is unchanged by the rate runs.
  EXPECT_EQ(report->models(0).best().parameters().max_batch_size(), 500);
  EXPECT_DOUBLE_EQ(report->models(0).best().generate_speed(), 2980.3);
}

TEST_F(ManagerAfterSearchTest, RateModeUsesConcurrency1000AndTheRate) {
  auto a = AddAgent("a");
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: rate
models: [{name: m}]
search: {range: [100, 200], initial: 100}
client: {mode: rate, request_rate: 7.5}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  ASSERT_EQ(a->benchmarks().size(), 2u);
  EXPECT_EQ(a->benchmarks()[0].concurrency(), 1000u);
  EXPECT_DOUBLE_EQ(a->benchmarks()[0].request_rate(), 7.5);
  EXPECT_EQ(a->starts().size(), 2u);   // explicit range and start: no probe
  EXPECT_EQ(a->tunings_applied(), 0);  // no host section: nothing tuned
}

}  // namespace
}  // namespace crest::controller
