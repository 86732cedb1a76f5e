#include "controller/trial_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fake_clock.h"
#include "controller/campaign_io/spec_limits.h"
#include "controller/search/trial_outcomes.h"
#include "controller/testing/fake_agent_client.h"

namespace crest::controller {
namespace {

using ::testing::ElementsAre;

// A runner over fake agent "a", registered and ready.
class TrialRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    crest::v1::RegisterAgentRequest r;
    r.set_node_name("a");
    r.set_advertise_address("127.0.0.1:1");
    ASSERT_TRUE(registry_.Register(r).ok());
  }

  crest::v1::Trial RunAt(int64_t point, bool tune_host = false) {
    crest::v1::Trial t;
    t.set_id("c1-t1");
    t.set_campaign_id("c1");
    t.set_model("m");
    t.set_node("a");
    *t.mutable_parameters() = SearchParametersAt(spec_, point);
    TrialRunner runner(agent_, "a", 0, &registry_, absl::Seconds(1), &stop_);
    return runner.Run(spec_, t, tune_host, nullptr);
  }

  crest::testing::FakeClock clock_;
  AgentRegistry registry_{&clock_, {}};
  std::shared_ptr<testing::FakeAgent> agent_ = std::make_shared<testing::FakeAgent>("a");
  crest::v1::CampaignSpec spec_;
  JobStop stop_;
};

TEST_F(TrialRunnerTest, TranslatesTheTrialIntoTheAgentContract) {
  spec_.mutable_host()->set_thp("always");
  spec_.mutable_client()->set_request_count(10);
  crest::v1::Trial t = RunAt(500, /*tune_host=*/true);
  EXPECT_EQ(t.status(), crest::v1::TRIAL_OK);
  EXPECT_EQ(t.reason(), "");
  EXPECT_EQ(t.npu_block_num(), 2176);
  EXPECT_DOUBLE_EQ(t.result().generate_speed(), 500);
  EXPECT_EQ(agent_->tunings_applied(), 1);
  ASSERT_EQ(agent_->starts().size(), 1u);
  const crest::v1::StartDaemonRequest start = agent_->starts()[0];
  std::vector<std::string> overrides;
  for (const auto& o : start.overrides())
    overrides.push_back(absl::StrCat(o.key(), "=", o.int_value()));
  EXPECT_THAT(overrides, ElementsAre("maxBatchSize=500", "maxPrefillBatchSize=250"));
  EXPECT_TRUE(start.replace_running());
  ASSERT_EQ(agent_->benchmarks().size(), 1u);
  EXPECT_EQ(agent_->benchmarks()[0].concurrency(), 499u);
  EXPECT_EQ(agent_->benchmarks()[0].model_name(), "m");
  EXPECT_EQ(agent_->benchmarks()[0].request_count(), 10u);
  EXPECT_EQ(agent_->daemons_running(), 0);  // stopped after the benchmark
}

// The scale comes from the controller's --sim-time-scale, never from the
// agent's own label: a label would let an agent multiply its results.
TEST(TrialRunnerTimeScaleTest, TheOperatorsScaleNotTheAgentsLabel) {
  crest::testing::FakeClock clock;
  RegistryOptions options;
  options.time_scales.per_node["a"] = 50;
  AgentRegistry registry(&clock, options);
  crest::v1::RegisterAgentRequest r;
  r.set_node_name("a");
  r.set_advertise_address("127.0.0.1:1");
  (*r.mutable_labels())["sim-time-scale"] = "0.001";
  ASSERT_TRUE(registry.Register(r).ok());
  auto agent = std::make_shared<testing::FakeAgent>("a");
  crest::v1::CampaignSpec spec;
  crest::v1::Trial t;
  t.set_id("c1-t1");
  t.set_campaign_id("c1");
  t.set_model("m");
  t.set_node("a");
  *t.mutable_parameters() = SearchParametersAt(spec, 500);
  JobStop stop;
  TrialRunner runner(agent, "a", 0, &registry, absl::Seconds(1), &stop);
  crest::v1::Trial done = runner.Run(spec, t, false, nullptr);
  ASSERT_EQ(done.status(), crest::v1::TRIAL_OK) << done.reason();
  EXPECT_DOUBLE_EQ(done.result().generate_speed(), 500.0 / 50);
}

TEST_F(TrialRunnerTest, OutOfMemoryIsInfeasible) {
  agent_->SetOomAbove(400);
  crest::v1::Trial t = RunAt(500);
  EXPECT_EQ(t.status(), crest::v1::TRIAL_INFEASIBLE);
  EXPECT_EQ(t.reason(),
            "daemon did not start (DAEMON_FAILURE_OUT_OF_MEMORY): out of memory allocating the KV "
            "cache");
  EXPECT_TRUE(agent_->benchmarks().empty());
}

TEST_F(TrialRunnerTest, ADaemonThatDiesDuringTheBenchmarkFailsTheTrialWhateverSucceeded) {
  spec_.mutable_client()->set_request_count(10);
  agent_->SetDaemonDiesDuringBenchmarks(true);
  crest::v1::Trial t = RunAt(500);
  EXPECT_EQ(t.status(), crest::v1::TRIAL_FAILED);
  EXPECT_EQ(t.reason(),
            "the daemon died during the benchmark: the daemon (pid 1001) exited (code 134) (10 "
            "requests had succeeded)");
  // The figures are kept in the record, for the operator; the trial is not ok.
  EXPECT_DOUBLE_EQ(t.result().generate_speed(), 500);
}

TEST_F(TrialRunnerTest, AnUnreachableNodeIsLostAndItsTrialInterrupted) {
  agent_->SetUnreachable(true);
  crest::v1::Trial t = RunAt(500);
  EXPECT_EQ(t.status(), crest::v1::TRIAL_INTERRUPTED);
  EXPECT_EQ(t.reason(), "node a unreachable: fake agent a is unreachable");
  EXPECT_FALSE(registry_.IsReady("a"));
}

TEST_F(TrialRunnerTest, TheStopReasonDecidesTheOutcome) {
  stop_.Stop(StopReason::kCampaignCancelled);
  crest::v1::Trial t = RunAt(500);
  EXPECT_EQ(t.status(), crest::v1::TRIAL_CANCELLED);
  EXPECT_EQ(t.reason(), "campaign cancelled");
  EXPECT_EQ(agent_->daemons_running(), 0);
  stop_.Stop(StopReason::kShutdown);  // the latest reason wins
  t = RunAt(500);
  EXPECT_EQ(t.status(), crest::v1::TRIAL_INTERRUPTED);
  EXPECT_EQ(t.reason(), "controller shut down while the trial ran");
  EXPECT_TRUE(registry_.IsReady("a"));
  EXPECT_EQ(agent_->daemons_running(), 0);
}

TEST_F(TrialRunnerTest, TheProbeReadsNpuBlockNumAndStopsTheDaemon) {
  agent_->SetBlockNum(4096);
  TrialRunner runner(agent_, "a", 0, &registry_, absl::Seconds(1), &stop_);
  ProbeResult probe = runner.Probe(spec_);
  EXPECT_EQ(probe.npu_block_num, 4096);
  EXPECT_FALSE(probe.daemon_failed);
  ASSERT_EQ(agent_->starts().size(), 1u);
  EXPECT_EQ(agent_->starts()[0].overrides_size(), 0);
  EXPECT_EQ(agent_->daemons_running(), 0);
}

}  // namespace
}  // namespace crest::controller
