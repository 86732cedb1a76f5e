// The clock jumping forward and back under a running campaign (the clock
// seam: a FakeClock under the controller's registry and campaign manager,
// fake agents). Forward past the heartbeat timeout: every silent agent counts
// as lost, its trial is interrupted and re-run when it is heard from again.
// Back: an agent that then goes silent is still found lost (its silence is
// counted from the jump), so a dead node is never hidden.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"
#include "controller/testing/manager_fixture.h"

namespace crest::controller::testing {
namespace {

using ::testing::ElementsAre;

class ClockJump : public ManagerFixture {};

// Each (point, repeat) ok at most once, and no trial left running.
void ExpectNothingCountedTwice(const std::vector<crest::v1::Trial>& trials) {
  std::map<int64_t, int> ok;
  for (const auto& t : trials) {
    EXPECT_NE(t.status(), crest::v1::TRIAL_RUNNING) << t.id();
    if (t.status() == crest::v1::TRIAL_OK) ++ok[t.parameters().max_batch_size()];
  }
  for (const auto& [point, n] : ok) EXPECT_EQ(n, 1) << point;
}

TEST_F(ClockJump, ForwardPastTheHeartbeatTimeoutInterruptsAndReRunsOnce) {
  auto a = AddAgent("a");
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: forward
models: [{name: m, nodes: [a]}]
search: {strategy: practice, range: [100, 200], initial: 100}
host: {governor: performance}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));
  clock_.Advance(absl::Hours(1));
  manager_->Poke();
  EXPECT_TRUE(WaitFor(c->id(), [&](const crest::v1::Campaign&) {
    auto t = Trials(c->id());
    return !t.empty() && t[0].status() == crest::v1::TRIAL_INTERRUPTED;
  }));
  a->HoldBenchmarks(false);
  EXPECT_TRUE(registry_->Heartbeat("a"));
  manager_->Poke();
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  EXPECT_THAT(Summary(trials),
              ElementsAre("100:TRIAL_INTERRUPTED@a", "100:TRIAL_OK@a", "200:TRIAL_OK@a"));
  ExpectNothingCountedTwice(trials);
  EXPECT_EQ(a->tunings_restored(), 1);
}

TEST_F(ClockJump, BackDoesNotHideAnAgentThatThenFallsSilent) {
  auto a = AddAgent("a");
  auto b = AddAgent("b");
  a->SetCurve(PracticeCurve);
  b->SetCurve(PracticeCurve);
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: back\nmodels: [{name: m, nodes: [a, b]}]\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));
  // The clock goes back an hour; then a falls silent while b heartbeats.
  clock_.Advance(-absl::Hours(1));
  EXPECT_TRUE(registry_->CheckLiveness().empty());
  clock_.Advance(absl::Seconds(7));
  EXPECT_TRUE(registry_->Heartbeat("b"));
  manager_->Poke();
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  EXPECT_THAT(Summary(trials), ElementsAre("435:TRIAL_INTERRUPTED@a", "435:TRIAL_OK@b",
                                           "500:TRIAL_OK@b", "600:TRIAL_OK@b"));
  ExpectNothingCountedTwice(trials);
}

}  // namespace
}  // namespace crest::controller::testing
