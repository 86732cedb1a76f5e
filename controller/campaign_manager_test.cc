#include "controller/campaign_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <tuple>

#include "common/testing/status_matchers.h"
#include "controller/campaign_io/report.h"
#include "controller/search/trial_outcomes.h"
#include "controller/testing/manager_fixture.h"

namespace crest::controller {
namespace {

using crest::controller::testing::kWait;
using crest::controller::testing::ManagerFixture;
using crest::controller::testing::PracticeCurve;
using crest::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ManagerTest : public ManagerFixture {};

int64_t MaxBatchSizeOf(const crest::v1::StartDaemonRequest& start) {
  for (const auto& o : start.overrides()) {
    if (o.key() == "maxBatchSize") return o.int_value();
  }
  return 0;
}

TEST_F(ManagerTest, RunsThePracticeSearchEndToEnd) {
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: practice
models: [{name: m}]
client: {request_count: 2000}
host: {governor: performance, thp: always, pin: odd-numa}
)"));
  CREST_ASSERT_OK(c);
  EXPECT_EQ(c->id(), "c1");
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  EXPECT_THAT(Summary(trials), ElementsAre("435:TRIAL_OK@a", "500:TRIAL_OK@a", "600:TRIAL_OK@a"));
  // Derived rules: maxPrefillBatchSize = maxBatchSize / 2, concurrency = maxBatchSize - 1.
  EXPECT_EQ(trials[0].parameters().max_prefill_batch_size(), 217);
  EXPECT_EQ(trials[0].parameters().concurrency(), 434u);
  EXPECT_EQ(trials[0].npu_block_num(), 2176);
  auto starts = a->starts();
  ASSERT_EQ(starts.size(), 4u);              // probe + 3 trials
  EXPECT_EQ(starts[0].overrides_size(), 0);  // the probe runs the daemon's defaults
  EXPECT_EQ(starts[1].overrides(0).key(), "maxBatchSize");
  EXPECT_EQ(starts[1].overrides(0).int_value(), 435);
  EXPECT_EQ(starts[1].overrides(1).key(), "maxPrefillBatchSize");
  EXPECT_EQ(starts[1].overrides(1).int_value(), 217);
  EXPECT_EQ(starts[1].pinning().mode(), crest::v1::PINNING_ODD_NUMA);
  EXPECT_EQ(a->benchmarks()[1].concurrency(), 499u);
  EXPECT_EQ(a->benchmarks()[1].request_count(), 2000u);
  EXPECT_EQ(a->tunings_applied(), 1);  // once per node per campaign
  EXPECT_EQ(a->tunings_restored(), 1);
  EXPECT_EQ(a->daemons_running(), 0);
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  EXPECT_EQ(report->models(0).best().parameters().max_batch_size(), 500);
  EXPECT_DOUBLE_EQ(report->models(0).best().generate_speed(), 2980.3);
  auto view = manager_->Get(c->id());
  EXPECT_EQ(view->models(0).range_lo(), 362);
  EXPECT_EQ(view->models(0).range_hi(), 1088);
  EXPECT_EQ(view->models(0).npu_block_num(), 2176);
  EXPECT_TRUE(view->models(0).done());
  EXPECT_EQ(view->models(0).trials_done(), 3u);
  EXPECT_THAT(view->models(0).activity(), HasSubstr("throughput fell at maxBatchSize 600"));
  EXPECT_THAT(metrics_.Serialize(),
              HasSubstr("crest_trial_generate_speed_tokens_per_second{calibration=\"false\","
                        "campaign=\"c1\",max_batch_size=\"500\",model=\"m\",node=\"a\"} 2980.3"));
}

TEST_F(ManagerTest, OutOfMemoryIsInfeasibleAndEndsTheSearch) {
  auto a = AddAgent("a");
  a->SetOomAbove(500);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: oom\nmodels: [{name: m}]\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_THAT(Summary(Trials(c->id())),
              ElementsAre("435:TRIAL_OK@a", "500:TRIAL_OK@a", "600:TRIAL_INFEASIBLE@a"));
  EXPECT_THAT(Trials(c->id())[2].reason(), HasSubstr("OUT_OF_MEMORY"));
  EXPECT_EQ(manager_->Report(c->id())->models(0).best().parameters().max_batch_size(), 500);
}

TEST_F(ManagerTest, ADaemonThatFailsToStartOnOneNodeIsProbedOnAnother) {
  // Node a cannot start the daemon even at its defaults (maxBatchSize 200).
  auto a = AddAgent("a");
  a->SetOomAbove(100);
  auto b = AddAgent("b");
  b->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  auto c =
      manager_->Create(Spec("name: probe\nmodels: [{name: m}]\nclient: {request_count: 2000}\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  ASSERT_EQ(a->starts().size(), 1u);  // the probe, and nothing after it
  EXPECT_EQ(a->starts()[0].overrides_size(), 0);
  EXPECT_THAT(Summary(Trials(c->id())),
              ElementsAre("435:TRIAL_OK@b", "500:TRIAL_OK@b", "600:TRIAL_OK@b"));
  EXPECT_EQ(manager_->Report(c->id())->models(0).best().parameters().max_batch_size(), 500);
}

TEST_F(ManagerTest, ADaemonThatFailsToStartOnEveryNodeEndsTheModelNamingEach) {
  for (const char* n : {"a", "b"}) AddAgent(n)->SetOomAbove(100);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: probe\nmodels: [{name: m}]\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_FAILED));
  EXPECT_TRUE(Trials(c->id()).empty());
  for (const char* n : {"a", "b"}) EXPECT_EQ(connector_.agent(n)->starts().size(), 1u) << n;
  auto view = manager_->Get(c->id());
  CREST_ASSERT_OK(view);
  EXPECT_THAT(view->reason(), HasSubstr("the daemon failed to start on every node of the model"));
  EXPECT_THAT(view->reason(), HasSubstr("a: "));
  EXPECT_THAT(view->reason(), HasSubstr("b: "));
  EXPECT_THAT(view->reason(), HasSubstr("out of memory"));
}

TEST_F(ManagerTest, AnUnknownNpuBlockNumRefusesTheAutoRangeWithTheAgentsFix) {
  // The daemon starts, but its log named only a warm-up cache: another start
  // would say the same, so the model ends after one probe, with the fix.
  auto a = AddAgent("a");
  a->SetBlockNumUnknown(
      "only warm-up caches were logged; set MINDIE_LOG_LEVEL=INFO or give an explicit "
      "search.range");
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: blocks\nmodels: [{name: m}]\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_FAILED));
  EXPECT_TRUE(Trials(c->id()).empty());
  EXPECT_EQ(a->starts().size(), 1u);
  auto view = manager_->Get(c->id());
  CREST_ASSERT_OK(view);
  EXPECT_THAT(view->reason(), HasSubstr("cannot derive the maxBatchSize range: npuBlockNum "
                                        "unknown on a: only warm-up caches were logged"));
  EXPECT_THAT(view->reason(), HasSubstr("explicit search.range"));
}

TEST_F(ManagerTest, AnExplicitRangeNeedsNoNpuBlockNum) {
  auto a = AddAgent("a");
  a->SetBlockNumUnknown("only warm-up caches were logged");
  a->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(
      Spec("name: range\nmodels: [{name: m}]\nsearch: {range: [362, 1088], initial: 435}\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_EQ(a->starts().size(), 3u);  // the three trials, no probe
  EXPECT_EQ(manager_->Report(c->id())->models(0).best().parameters().max_batch_size(), 500);
}

TEST_F(ManagerTest, ModelsRunInParallelOnTheirOwnNodes) {
  for (const char* n : {"a1", "a2"}) AddAgent(n, "A")->SetCurve(PracticeCurve);
  AddAgent("b1", "B")->SetCurve([](int64_t b) { return b <= 600 ? 1.0 * b : 10.0; });
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: two
models:
  - {name: A, nodes: [a1, a2], parallel: 2}
  - {name: B, selector: {model: B}}
search: {repeats: 2}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  std::set<std::string> nodes_a;
  for (const auto& t : Trials(c->id(), "A")) nodes_a.insert(t.node());
  EXPECT_THAT(nodes_a, ElementsAre("a1", "a2"));
  for (const auto& t : Trials(c->id(), "B")) EXPECT_EQ(t.node(), "b1");
  // B: 435, 500, 600 rise, 700 falls; two repeats each.
  EXPECT_EQ(Trials(c->id(), "B").size(), 8u);
  auto report = manager_->Report(c->id());
  EXPECT_EQ(report->models(0).best().parameters().max_batch_size(), 500);
  EXPECT_EQ(report->models(1).best().parameters().max_batch_size(), 600);
}

TEST_F(ManagerTest, AFleetSearchesOnOneNodeAndConfirmsTheAnswerOnEveryOther) {
  // Four nodes of one label; d is 10% slower.
  for (const char* n : {"a", "b", "c"}) AddAgent(n)->SetCurve(PracticeCurve);
  AddAgent("d")->SetCurve([](int64_t b) { return 0.9 * PracticeCurve(b); });
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: fleet
models: [{name: m, parallel: 1, fleet: true}]
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  std::vector<std::string> searched, confirmed;
  for (const auto& t : Trials(c->id())) {
    if (t.confirmation()) {
      EXPECT_EQ(t.parameters().max_batch_size(), 500) << t.DebugString();
      confirmed.push_back(t.node());
    } else {
      searched.push_back(absl::StrCat(t.parameters().max_batch_size(), "@", t.node()));
    }
  }
  // The practice's ladder on one node, then one run on each other node.
  EXPECT_THAT(searched, ElementsAre("435@a", "500@a", "600@a"));
  EXPECT_THAT(confirmed, ::testing::UnorderedElementsAre("b", "c", "d"));
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  const auto& m = report->models(0);
  EXPECT_EQ(m.best().parameters().max_batch_size(), 500);
  EXPECT_DOUBLE_EQ(m.best().generate_speed(), 2980.3);  // the search's figure, not the fleet's
  ASSERT_EQ(m.fleet_size(), 4);
  EXPECT_EQ(m.fleet(0).node(), "a");
  EXPECT_TRUE(m.fleet(0).searched());
  std::map<std::string, double> ratio;
  for (const auto& f : m.fleet()) ratio[f.node()] = f.ratio();
  EXPECT_DOUBLE_EQ(ratio["b"], 1.0);
  EXPECT_NEAR(ratio["d"], 0.9, 1e-9);
  EXPECT_THAT(manager_->Get(c->id())->models(0).activity(),
              HasSubstr("fleet: the final configuration confirmed on 3 more nodes"));
  EXPECT_THAT(ReportToTable(*report), HasSubstr("(confirmed)"));
}

TEST_F(ManagerTest, ParallelCountsTheSlotsOfOneNode) {
  auto a = AddAgent("a", "m", /*slots=*/4);
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: slots
models: [{name: m, parallel: 4}]
search: {strategy: grid, range: [100, 800], step: 100}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 4));
  EXPECT_EQ(a->daemons_running(), 4);
  a->HoldBenchmarks(false);
  a->ReleaseBenchmarks();
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  std::set<uint32_t> slots;
  for (const auto& t : Trials(c->id())) {
    slots.insert(t.slot());
    // The first round's four ran side by side, each with three neighbours.
    if (t.parameters().max_batch_size() <= 400) {
      EXPECT_EQ(t.neighbours(), 3u) << t.id();
    }
  }
  EXPECT_THAT(slots, ElementsAre(0, 1, 2, 3));
  EXPECT_EQ(Trials(c->id()).size(), 8u);
}

// An exclusive model's daemon starts only on a node where nothing runs, and
// nothing starts beside it: here a shared campaign fills the node's four
// slots first, and the exclusive one (points from 1000 up, so the fake's
// record tells them apart) waits for all four to end, though each that ends
// frees a slot.
TEST_F(ManagerTest, AnExclusiveModelHasItsNodeAlone) {
  auto a = AddAgent("a", "m", /*slots=*/4);
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto shared = manager_->Create(Spec(R"(name: shared
models: [{name: m, parallel: 4}]
search: {strategy: grid, range: [100, 400], step: 100}
)"));
  CREST_ASSERT_OK(shared);
  ASSERT_TRUE(WaitHeld(*a, 4));
  auto alone = manager_->Create(Spec(R"(name: alone
models: [{name: m, parallel: 4, exclusive: true}]
search: {strategy: grid, range: [1000, 1300], step: 100}
)"));
  CREST_ASSERT_OK(alone);
  for (int ended = 1; ended <= 3; ++ended) {
    a->ReleaseOneBenchmark();
    ASSERT_TRUE(WaitFor(shared->id(), [&](const crest::v1::Campaign&) {
      int done = 0;
      for (const auto& t : Trials(shared->id())) done += t.status() == crest::v1::TRIAL_OK;
      return done == ended;
    }));
  }
  a->HoldBenchmarks(false);
  a->ReleaseBenchmarks();
  ASSERT_TRUE(WaitForState(shared->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  ASSERT_TRUE(WaitForState(alone->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_EQ(Trials(alone->id()).size(), 4u);
  for (const auto& t : Trials(alone->id())) EXPECT_EQ(t.neighbours(), 0u) << t.id();
  // The shared campaign's first four ran beside each other.
  for (const auto& t : Trials(shared->id())) EXPECT_GE(t.neighbours(), 1u) << t.id();
  const auto starts = a->starts();
  const auto running = a->running_at_starts();
  ASSERT_EQ(starts.size(), running.size());
  int exclusive_starts = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    const int64_t batch = MaxBatchSizeOf(starts[i]);
    if (batch >= 1000) {
      ++exclusive_starts;
      EXPECT_THAT(running[i], ::testing::IsEmpty()) << "start " << i << " at " << batch;
    } else {
      EXPECT_THAT(running[i], ::testing::Each(::testing::Lt(1000))) << "start " << i;
    }
  }
  EXPECT_EQ(exclusive_starts, 4);
}

// A busy shared campaign does not keep an exclusive model waiting until it
// ends: the exclusive model drains a node (no new job starts there), takes it
// once its jobs end, and the shared campaign goes on afterwards.
TEST_F(ManagerTest, AnExclusiveModelDrainsABusyNodeRatherThanWaitForItsCampaignsToEnd) {
  auto a = AddAgent("a", "m", /*slots=*/4);
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto shared = manager_->Create(Spec(R"(name: shared
models: [{name: m, parallel: 4}]
search: {strategy: grid, range: [10, 160], step: 10}
)"));
  CREST_ASSERT_OK(shared);
  ASSERT_TRUE(WaitHeld(*a, 4));
  auto alone = manager_->Create(Spec(R"(name: alone
models: [{name: m, exclusive: true}]
search: {strategy: grid, range: [1000, 1000], step: 100}
)"));
  CREST_ASSERT_OK(alone);
  ASSERT_TRUE(WaitFor(alone->id(), [](const crest::v1::Campaign& c) {
    return c.models(0).activity() ==
           "exclusive: waiting for node a to drain (no new job starts there meanwhile)";
  }));
  for (int ended = 1; ended <= 4; ++ended) a->ReleaseOneBenchmark();
  // Next come the exclusive model's npuBlockNum probe (at the daemon's
  // defaults) and its point, each alone on the node, before any more of the
  // shared campaign's points.
  ASSERT_TRUE(a->AwaitNthHeld(5, kWait));
  const auto starts = a->starts();
  ASSERT_EQ(starts.size(), 7u);  // the shared probe and points, then these two
  EXPECT_EQ(MaxBatchSizeOf(starts[5]), 0);
  EXPECT_EQ(MaxBatchSizeOf(starts[6]), 1000);
  EXPECT_THAT(a->running_at_starts()[5], ::testing::IsEmpty());
  EXPECT_THAT(a->running_at_starts()[6], ::testing::IsEmpty());
  a->HoldBenchmarks(false);
  a->ReleaseBenchmarks();
  ASSERT_TRUE(WaitForState(alone->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  ASSERT_TRUE(WaitForState(shared->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_EQ(Trials(shared->id()).size(), 16u);
}

TEST_F(ManagerTest, LostAgentMidTrialIsRetriedElsewhereNeverCountedTwice) {
  auto a = AddAgent("a");
  auto b = AddAgent("b");
  a->SetCurve(PracticeCurve);
  b->SetCurve(PracticeCurve);
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: lost\nmodels: [{name: m, nodes: [a, b]}]\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));  // 435 runs on a
  // a stops heartbeating (but stays reachable): b heartbeats, time passes.
  clock_.Advance(absl::Seconds(7));
  EXPECT_TRUE(registry_->Heartbeat("b"));
  manager_->Poke();
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials(c->id());
  EXPECT_THAT(Summary(trials), ElementsAre("435:TRIAL_INTERRUPTED@a", "435:TRIAL_OK@b",
                                           "500:TRIAL_OK@b", "600:TRIAL_OK@b"));
  EXPECT_THAT(trials[0].reason(), HasSubstr("node a lost"));
  EXPECT_EQ(trials[1].attempt(), 2u);
  EXPECT_EQ(manager_->Get(c->id())->models(0).trials_failed(), 1u);
}

TEST_F(ManagerTest, NodeLostMidTrialIsPutBackWhenItReturns) {
  auto a = AddAgent("a");
  auto b = AddAgent("b");
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: back
models: [{name: m, nodes: [a, b]}]
search: {range: [100, 200], initial: 100}
host: {governor: performance}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));
  a->SetUnreachable(true);  // its link is cut: the trial's daemon stays up there
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_THAT(Summary(Trials(c->id())),
              ElementsAre("100:TRIAL_INTERRUPTED@a", "100:TRIAL_OK@b", "200:TRIAL_OK@b"));
  EXPECT_THAT(manager_->Get(c->id())->reason(), HasSubstr("host settings not restored on a"));
  EXPECT_EQ(a->daemons_running(), 1);
  EXPECT_EQ(a->tunings_restored(), 0);
  EXPECT_EQ(b->tunings_restored(), 1);
  // Heard from again: its daemon is stopped (config.json put back) and the
  // ended campaign's host settings restored, once.
  a->SetUnreachable(false);
  EXPECT_TRUE(registry_->Heartbeat("a"));
  manager_->Poke();
  ASSERT_TRUE(a->AwaitPutBack(1, kWait));
  EXPECT_EQ(b->tunings_restored(), 1);
  a->HoldBenchmarks(false);
  auto second = manager_->Create(Spec(R"(name: after
models: [{name: m, nodes: [a]}]
search: {range: [100, 200], initial: 100}
)"));
  CREST_ASSERT_OK(second);
  ASSERT_TRUE(WaitForState(second->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_EQ(a->tunings_restored(), 1);  // not restored twice
}

TEST_F(ManagerTest, UnreachableAgentIsRetriedWithinTheBound) {
  auto a = AddAgent("a");
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: bound
models: [{name: m}]
search: {range: [100, 200], initial: 100}
limits: {max_retries: 1}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));
  a->SetUnreachable(true);  // the held benchmark fails with UNAVAILABLE
  ASSERT_TRUE(WaitFor(c->id(),
                      [](const crest::v1::Campaign& v) { return v.models(0).trials_done() == 1; }));
  EXPECT_FALSE(registry_->IsReady("a"));
  a->SetUnreachable(false);
  EXPECT_TRUE(registry_->Heartbeat("a"));  // back: the retry (attempt 2) runs on it
  ASSERT_TRUE(WaitHeld(*a, 1));
  a->SetUnreachable(true);
  ASSERT_TRUE(WaitFor(c->id(),
                      [](const crest::v1::Campaign& v) { return v.models(0).trials_done() == 2; }));
  a->SetUnreachable(false);
  a->HoldBenchmarks(false);
  EXPECT_TRUE(registry_->Heartbeat("a"));
  // Retries used up: the point failed, the search ended, no ok trial: failed.
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_FAILED));
  EXPECT_THAT(Summary(Trials(c->id())),
              ElementsAre("100:TRIAL_INTERRUPTED@a", "100:TRIAL_INTERRUPTED@a"));
  EXPECT_THAT(manager_->Get(c->id())->reason(), HasSubstr("interrupted 2 times"));
}

TEST_F(ManagerTest, ResumesAfterACrashWithoutRerunningFinishedTrials) {
  // What a controller killed during the 500 trial leaves behind.
  {
    crest::v1::Campaign c;
    c.set_id("c1");
    *c.mutable_spec() = Spec("name: crash\nmodels: [{name: m}]\n");
    c.set_state(crest::v1::CAMPAIGN_RUNNING);
    Batch batch;
    batch.campaigns.push_back(c);
    ModelState ms;
    ms.npu_block_num = 2176;
    batch.models.push_back({{"c1", "m"}, ms});
    for (int i = 1; i <= 2; ++i) {
      crest::v1::Trial t;
      t.set_id(absl::StrCat("c1-t", i));
      t.set_campaign_id("c1");
      t.set_model("m");
      t.set_node("a");
      t.set_attempt(1);
      t.mutable_parameters()->set_max_batch_size(i == 1 ? 435 : 500);
      t.set_status(i == 1 ? crest::v1::TRIAL_OK : crest::v1::TRIAL_RUNNING);
      t.mutable_result()->set_generate_speed(PracticeCurve(435));
      batch.trials.push_back(t);
    }
    CREST_ASSERT_OK(store_->Apply(batch));
  }
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  ASSERT_TRUE(WaitForState("c1", crest::v1::CAMPAIGN_SUCCEEDED));
  auto trials = Trials("c1");
  EXPECT_THAT(Summary(trials), ElementsAre("435:TRIAL_OK@a", "500:TRIAL_INTERRUPTED@a",
                                           "500:TRIAL_OK@a", "600:TRIAL_OK@a"));
  EXPECT_THAT(trials[1].reason(), HasSubstr("controller restarted"));
  EXPECT_EQ(trials[2].attempt(), 2u);
  EXPECT_EQ(trials[2].id(), "c1-t3");
  // 435 was not measured again, and no probe was needed.
  std::vector<int64_t> measured;
  for (const auto& s : a->starts()) measured.push_back(s.overrides(0).int_value());
  EXPECT_THAT(measured, ElementsAre(500, 600));
}

TEST_F(ManagerTest, ShutdownInterruptsAndARestartResumes) {
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: restart\nmodels: [{name: m}]\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));
  a->ReleaseBenchmarks();                  // 435 finishes
  ASSERT_TRUE(a->AwaitNthHeld(2, kWait));  // 500 runs
  CloseManager();
  a->HoldBenchmarks(false);
  OpenManager();
  AddAgent("a");
  CREST_ASSERT_OK(manager_->Start());
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_THAT(Summary(Trials(c->id())), ElementsAre("435:TRIAL_OK@a", "500:TRIAL_INTERRUPTED@a",
                                                    "500:TRIAL_OK@a", "600:TRIAL_OK@a"));
  auto id = manager_->Create(Spec("name: next\nmodels: [{name: m}]\n"));
  CREST_ASSERT_OK(id);
  EXPECT_EQ(id->id(), "c2");  // ids never repeat across restarts
}

TEST_F(ManagerTest, CancelStopsTheTrialAndRestoresHosts) {
  auto a = AddAgent("a");
  a->HoldBenchmarks(true);
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: cancel\nmodels: [{name: m}]\nhost: {thp: always}\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitHeld(*a, 1));
  auto cancelled = manager_->Cancel(c->id());
  CREST_ASSERT_OK(cancelled);
  EXPECT_TRUE(cancelled->cancel_requested());
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_CANCELLED));
  EXPECT_THAT(Summary(Trials(c->id())), ElementsAre("435:TRIAL_CANCELLED@a"));
  EXPECT_EQ(a->daemons_running(), 0);
  EXPECT_EQ(a->tunings_applied(), 1);
  EXPECT_EQ(a->tunings_restored(), 1);
  EXPECT_THAT(manager_->Cancel("nope"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(ManagerTest, SimulatedNodesReportInSimulatedTime) {
  // The controller's --sim-time-scale, not the agent's own label, scales.
  CloseManager();
  time_scales_.per_node["a"] = 10;
  OpenManager();
  auto a = connector_.Add("a");
  crest::v1::RegisterAgentRequest r;
  r.set_node_name("a");
  r.set_advertise_address("127.0.0.1:1");
  (*r.mutable_labels())["sim-time-scale"] = "1000";
  CREST_ASSERT_OK(registry_->Register(r));
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec("name: s\nmodels: [{name: m}]\nsearch: {range: [100, 100]}\n"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  EXPECT_DOUBLE_EQ(Trials(c->id())[0].result().generate_speed(), 10);  // fake: 100 tok/s
}

TEST_F(ManagerTest, RefusesABadSpecListingEveryProblem) {
  CREST_ASSERT_OK(manager_->Start());
  crest::v1::CampaignSpec spec;
  spec.mutable_client()->set_mode(crest::v1::CLIENT_MODE_RATE);
  EXPECT_THAT(manager_->Create(spec),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       ::testing::AllOf(HasSubstr("name: required"), HasSubstr("models: required"),
                                        HasSubstr("client.request_rate"))));
  EXPECT_TRUE(manager_->List().empty());
  EXPECT_THAT(manager_->Get("c1"), StatusIs(absl::StatusCode::kNotFound));
}

// Concurrency = maxBatchSize - 1 above what the agents accept: refused at
// submission with the reason, before any daemon is restarted for it.
TEST_F(ManagerTest, RefusesARangeWhoseDerivedConcurrencyNoEligibleAgentAccepts) {
  auto a = AddAgent("a");
  CREST_ASSERT_OK(manager_->Start());
  EXPECT_THAT(
      manager_->Create(Spec("name: big\nmodels: [{name: m}]\n"
                            "search: {range: [100000, 100010], initial: 100000}\n"
                            "client: {request_count: 200000}\n")),
      StatusIs(absl::StatusCode::kInvalidArgument,
               ::testing::AllOf(HasSubstr("search.range"), HasSubstr("model m"),
                                HasSubstr("concurrency 100009 (maxBatchSize 100010 - 1) is "
                                          "outside a's [1, 100000]"),
                                HasSubstr("the range can reach maxBatchSize 100001 at most"))));
  EXPECT_TRUE(manager_->List().empty());
  EXPECT_TRUE(a->starts().empty());
  // The same range within the limits is accepted.
  CREST_EXPECT_OK(
      manager_->Create(Spec("name: ok\nmodels: [{name: m}]\n"
                            "search: {range: [99990, 100001], initial: 99990}\n"
                            "client: {request_count: 200000}\n")));
}

TEST_F(ManagerTest, APointGoesOnlyToAnAgentThatAcceptsIt) {
  auto small = connector_.Add("small");
  auto big = connector_.Add("big");
  small->SetCurve(PracticeCurve);
  big->SetCurve(PracticeCurve);
  for (const std::string name : {"small", "big"}) {
    crest::v1::RegisterAgentRequest r;
    r.set_node_name(name);
    r.set_advertise_address("127.0.0.1:1");
    for (const auto& [key, min, max] : std::vector<std::tuple<std::string, double, double>>{
             {"concurrency", 1, name == "small" ? 450 : 100000},
             {"request_count", 1, 1e7},
             {"warmup_requests", 0, 1e5},
             {"max_output_len", 1, 1 << 20}}) {
      auto* l = r.add_benchmark_limits();
      l->set_key(key);
      l->set_min(min);
      l->set_max(max);
    }
    CREST_ASSERT_OK(registry_->Register(r));
  }
  CREST_ASSERT_OK(manager_->Start());
  auto c = manager_->Create(Spec(R"(name: mixed
models: [{name: m, nodes: [small, big]}]
search: {range: [400, 600], initial: 435}
client: {request_count: 1000}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  // 435 (Concurrency 434) fits the first listed node; 500 and 600 only "big".
  EXPECT_THAT(Summary(Trials(c->id())),
              ElementsAre("435:TRIAL_OK@small", "500:TRIAL_OK@big", "600:TRIAL_OK@big"));
  EXPECT_EQ(small->benchmarks().size(), 1u);
}

TEST_F(ManagerTest, FewRequestsPerClientAreSaidAndStoredAnUnfillableRangeRefused) {
  auto a = AddAgent("a");
  a->SetCurve(PracticeCurve);
  CREST_ASSERT_OK(manager_->Start());
  // The practice's GSM8K run: 1319 requests at Concurrency up to 1000.
  auto c = manager_->Create(Spec(R"(name: practice
models: [{name: m}]
search: {range: [435, 1001], initial: 435, max_trials: 1}
)"));
  CREST_ASSERT_OK(c);
  ASSERT_EQ(c->warnings_size(), 1);
  EXPECT_THAT(c->warnings(0), HasSubstr("1.32 per client at maxBatchSize 1001"));
  ASSERT_TRUE(WaitForState(c->id(), crest::v1::CAMPAIGN_SUCCEEDED));
  auto report = manager_->Report(c->id());
  CREST_ASSERT_OK(report);
  ASSERT_EQ(report->warnings_size(), 1);
  EXPECT_EQ(report->warnings(0), c->warnings(0));

  crest::v1::CampaignSpec unfillable = Spec(R"(name: new-user
models: [{name: m}]
client: {request_count: 600, max_output_len: 256}
)");
  unfillable.mutable_search()->set_range_auto(false);
  unfillable.mutable_search()->set_range_lo(100);
  unfillable.mutable_search()->set_range_hi(1000);
  EXPECT_THAT(manager_->Create(unfillable),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("can never fill above maxBatchSize 601")));
  EXPECT_EQ(manager_->List().size(), 1u);
}

}  // namespace
}  // namespace crest::controller
