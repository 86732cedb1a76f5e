// search.prior through the campaign manager: the fit at creation, the
// prediction once the range is known, the warm-started search, and the
// refusals. The fits run on the shipped profiles and GSM8K (build/share).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/paths.h"
#include "common/testing/status_matchers.h"
#include "controller/campaign_io/fit_workload.h"
#include "controller/campaign_manager.h"
#include "controller/search/warm_start.h"
#include "controller/testing/manager_fixture.h"
#include "sim/profile.h"
#include "sim/profile_fit.h"

namespace crest::controller {
namespace {

using crest::controller::testing::ManagerFixture;
using crest::controller::testing::PracticeCurve;
using crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// GenerateSpeed of the shipped LLaMA3-8B profile, noise-free, for the
// campaigns' workload (2000 GSM8K requests, MaxOutputLen 512, npuBlockNum
// 2176 as the fake agent reports): a daemon the fit can learn.
class ProfileCurve {
 public:
  ProfileCurve() {
    absl::StatusOr<std::string> share = ShareDir();
    EXPECT_TRUE(share.ok()) << share.status();
    profile_ = sim::FindProfile(*share + "/profiles", "llama3-8b-910b", "");
    EXPECT_TRUE(profile_.ok()) << profile_.status();
    WorkloadShape shape;
    shape.request_count = 2000;
    shape.dataset = *share + "/datasets/gsm8k";
    workload_ = FitWorkloadOf(*profile_, shape);
    EXPECT_TRUE(workload_.ok()) << workload_.status();
    workload_->npu_block_num = 2176;
  }
  double operator()(int64_t b) {
    absl::MutexLock lock(&mu_);
    auto it = speed_.find(b);
    if (it != speed_.end()) return it->second;
    auto p = sim::Predict(*profile_, *workload_, sim::PracticePoint(static_cast<int>(b)));
    return speed_[b] = p.ok() ? p->generate_speed : 0;
  }

 private:
  absl::StatusOr<sim::Profile> profile_;
  absl::StatusOr<sim::FitWorkload> workload_;
  absl::Mutex mu_;
  std::map<int64_t, double> speed_;
};

class PriorTest : public ManagerFixture {
 protected:
  // A finished practice campaign of LLaMa3-8B (a model the shipped profiles
  // know) on agent `a`, to learn from, whose daemon follows `curve`; the
  // fake's fixed latencies reported, or none (GenerateSpeed alone).
  std::string FinishedCampaign(std::function<double(int64_t)> curve, bool fixed_latencies = false) {
    auto a = AddAgent("a", "LLaMa3-8B");
    a->SetCurve(std::move(curve));
    if (!fixed_latencies) a->SetLatencies(0, 0);
    EXPECT_TRUE(manager_->Start().ok());
    auto c = manager_->Create(Spec(R"(name: first
models: [{name: LLaMa3-8B}]
client: {request_count: 2000}
)"));
    EXPECT_TRUE(c.ok()) << c.status();
    EXPECT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
    return c->id();
  }
};

TEST_F(PriorTest, ASecondCampaignStartsAtThePredictedPeakAndConfirmsItsBracket) {
  auto truth = std::make_shared<ProfileCurve>();
  const std::string first = FinishedCampaign([truth](int64_t b) { return (*truth)(b); });
  auto c = manager_->Create(Spec(absl::StrCat(R"(name: second
models: [{name: LLaMa3-8B}]
search: {strategy: knee, prior: )",
                                              first, R"(}
client: {request_count: 2000}
)")));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto view = manager_->Get(c->id());
  CREST_ASSERT_OK(view);
  const int64_t peak = view->models(0).prior_peak();
  // Inside the range the probe's npuBlockNum 2176 gives.
  EXPECT_GE(peak, view->models(0).range_lo());
  EXPECT_LE(peak, view->models(0).range_hi());
  EXPECT_THAT(view->models(0).prior_source(),
              StartsWith(absl::StrCat("campaign ", first, "'s fit (llama3-8b")));
  // The first round is the prediction and its neighbours, nothing else.
  std::vector<crest::v1::Trial> trials = Trials(c->id(), "LLaMa3-8B");
  ASSERT_GE(trials.size(), 3u);
  const std::set<int64_t> first_round = {trials[0].parameters().max_batch_size(),
                                         trials[1].parameters().max_batch_size(),
                                         trials[2].parameters().max_batch_size()};
  const int64_t half = std::llround(static_cast<double>(peak) * kWarmBracket);
  EXPECT_EQ(first_round, (std::set<int64_t>{peak - half, peak, peak + half}));
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  EXPECT_EQ(report->models(0).strategy(), "warm-start");
  // The predicted curve, for the report to draw beside the measured one.
  ASSERT_GE(report->models(0).predicted_size(), 10);
  EXPECT_EQ(report->models(0).predicted_source(), view->models(0).prior_source());
  double predicted_best = 0;
  int64_t predicted_at = 0;
  for (const auto& p : report->models(0).predicted()) {
    if (p.generate_speed() > predicted_best) {
      predicted_best = p.generate_speed();
      predicted_at = p.max_batch_size();
    }
  }
  EXPECT_EQ(predicted_at, peak);
  EXPECT_THAT(report->models(0).best().basis(), StartsWith("prior"));
  EXPECT_THAT(report->models(0).best().basis_reason(), HasSubstr(absl::StrCat("campaign ", first)));

  // A restarted controller rebuilds the same search from the store alone.
  CloseManager();
  OpenManager();
  CREST_ASSERT_OK(manager_->Start());
  auto again = manager_->Report(c->id());
  CREST_ASSERT_OK(again);
  EXPECT_EQ(again->models(0).strategy(), "warm-start");
  EXPECT_EQ(again->models(0).best().parameters().max_batch_size(),
            report->models(0).best().parameters().max_batch_size());
  EXPECT_EQ(manager_->Get(c->id())->models(0).prior_peak(), peak);
}

TEST_F(PriorTest, APriorThatIsUnknownUnfinishedOrUnfittableIsRefusedAndNothingIsCreated) {
  auto unknown = manager_->Create(Spec(R"(name: x
models: [{name: LLaMa3-8B}]
search: {strategy: knee, prior: c7}
)"));
  EXPECT_THAT(unknown, StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("search.prior: no campaign 'c7' to learn from")));
  // Not started: c1 stays pending.
  AddAgent("a", "LLaMa3-8B");
  auto pending = manager_->Create(Spec(R"(name: pending
models: [{name: LLaMa3-8B}]
)"));
  CREST_ASSERT_OK(pending);
  auto early = manager_->Create(Spec(R"(name: x
models: [{name: LLaMa3-8B}]
search: {strategy: knee, prior: c1}
)"));
  EXPECT_THAT(early, StatusIs(absl::StatusCode::kFailedPrecondition,
                              HasSubstr("campaign c1 has not ended")));
  EXPECT_EQ(manager_->List().size(), 1u);
}

TEST_F(PriorTest, AModelThePriorNeverRanStartsColdWithAWarning) {
  auto truth = std::make_shared<ProfileCurve>();
  const std::string first = FinishedCampaign([truth](int64_t b) { return (*truth)(b); });
  AddAgent("b", "llama3-70b");
  auto none = manager_->Create(Spec(absl::StrCat(R"(name: other
models: [{name: llama3-70b}]
search: {strategy: knee, prior: )",
                                                 first, "}\n")));
  EXPECT_THAT(none,
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr(absl::StrCat("campaign ", first,
                                              " cannot warm-start any model (llama3-70b: "))));
  auto both = manager_->Create(Spec(absl::StrCat(R"(name: both
models: [{name: LLaMa3-8B}, {name: llama3-70b}]
search: {strategy: knee, prior: )",
                                                 first, "}\n")));
  CREST_ASSERT_OK(both);
  ASSERT_EQ(both->warnings_size(), 1) << both->DebugString();
  EXPECT_THAT(both->warnings(0),
              HasSubstr(absl::StrCat("search.prior ", first, " cannot warm-start llama3-70b: ")));
  EXPECT_THAT(both->warnings(0), HasSubstr("its search starts cold"));
}

TEST_F(PriorTest, RunsTheModelDoesNotFollowAreNotStartedFrom) {
  // The practice's three figures with the same first-token and decode time
  // at every batch size: no step-time model makes those.
  const std::string first = FinishedCampaign(PracticeCurve, /*fixed_latencies=*/true);
  auto c = manager_->Create(Spec(absl::StrCat(R"(name: second
models: [{name: LLaMa3-8B}]
search: {strategy: knee, prior: )",
                                              first, "}\n")));
  EXPECT_THAT(c, StatusIs(absl::StatusCode::kInvalidArgument,
                          AllOf(HasSubstr("LLaMa3-8B: the fit of llama3-8b-910b to its 3 points"),
                                HasSubstr("leave-one-out, above 25%"))));
}

}  // namespace
}  // namespace crest::controller
