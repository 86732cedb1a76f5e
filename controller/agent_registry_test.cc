#include "controller/agent_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fake_clock.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "controller/testing/failing_store.h"

namespace crest::controller {
namespace {

crest::v1::RegisterAgentRequest Req(const std::string& name) {
  crest::v1::RegisterAgentRequest r;
  r.set_node_name(name);
  r.set_advertise_address("127.0.0.1:7001");
  (*r.mutable_labels())["model"] = "LLaMa3-8B";
  return r;
}

TEST(AgentRegistry, MissedHeartbeatsMarkLostAndAHeartbeatRevives) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(
      &clock, {.heartbeat_interval = absl::Seconds(2), .missed_heartbeats = 3, .time_scales = {}});
  int changes = 0;
  registry.SetOnChange([&] { ++changes; });
  CREST_EXPECT_OK(registry.Register(Req("a")));
  EXPECT_TRUE(registry.IsReady("a"));
  EXPECT_EQ(registry.Get("a")->labels().at("model"), "LLaMa3-8B");
  clock.Advance(absl::Seconds(5));
  EXPECT_TRUE(registry.CheckLiveness().empty());  // 5 s < 3 x 2 s
  EXPECT_TRUE(registry.Heartbeat("a"));
  clock.Advance(absl::Seconds(6) + absl::Milliseconds(1));
  EXPECT_THAT(registry.CheckLiveness(), ::testing::ElementsAre("a"));
  EXPECT_FALSE(registry.IsReady("a"));
  EXPECT_EQ(registry.Get("a")->state(), crest::v1::AGENT_LOST);
  EXPECT_TRUE(registry.CheckLiveness().empty());  // reported once
  EXPECT_TRUE(registry.Heartbeat("a"));
  EXPECT_TRUE(registry.IsReady("a"));
  EXPECT_GE(changes, 3);
}

TEST(AgentRegistry, EveryLossIsReportedOnceEvenWhenHealedAtOnce) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(
      &clock, {.heartbeat_interval = absl::Seconds(2), .missed_heartbeats = 3, .time_scales = {}});
  std::vector<std::string> lost;
  registry.SetOnLost([&](const std::string& node) { lost.push_back(node); });
  CREST_EXPECT_OK(registry.Register(Req("a")));
  CREST_EXPECT_OK(registry.Register(Req("b")));
  clock.Advance(absl::Seconds(5));
  registry.CheckLiveness();
  EXPECT_TRUE(lost.empty());  // 5 s < 3 x 2 s
  EXPECT_TRUE(registry.Heartbeat("a"));
  clock.Advance(absl::Seconds(2));
  registry.CheckLiveness();  // b silent for 7 s
  EXPECT_THAT(lost, ::testing::ElementsAre("b"));
  // Heard from at once: the loss was real all the same and stays counted.
  EXPECT_TRUE(registry.Heartbeat("b"));
  registry.MarkLost("a", "unreachable");
  registry.MarkLost("a", "unreachable again");  // already lost: not a new loss
  registry.CheckLiveness();
  EXPECT_THAT(lost, ::testing::ElementsAre("b", "a"));
  EXPECT_TRUE(registry.Heartbeat("a"));
  registry.MarkLost("a", "unreachable once more");
  EXPECT_THAT(lost, ::testing::ElementsAre("b", "a", "a"));
}

TEST(AgentRegistry, UnknownHeartbeatAsksForRegistration) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  EXPECT_FALSE(registry.Heartbeat("ghost"));
  EXPECT_FALSE(registry.Get("ghost").has_value());
}

TEST(AgentRegistry, StaticAgentsAreLostUntilSeen) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(
      &clock, {.heartbeat_interval = absl::Seconds(1), .missed_heartbeats = 3, .time_scales = {}});
  registry.AddStatic("s", "127.0.0.1:9");
  EXPECT_FALSE(registry.IsReady("s"));
  EXPECT_TRUE(registry.Get("s")->static_());
  crest::v1::NodeInfo info;
  (*info.mutable_labels())["npu"] = "910B3";
  auto* limit = info.add_benchmark_limits();
  limit->set_key("concurrency");
  limit->set_max(500);
  registry.MarkSeen("s", &info);
  EXPECT_TRUE(registry.IsReady("s"));
  EXPECT_EQ(registry.Get("s")->labels().at("npu"), "910B3");
  // What the probe read is what the limits check at submission sees.
  ASSERT_EQ(registry.Get("s")->benchmark_limits_size(), 1);
  EXPECT_EQ(registry.Get("s")->benchmark_limits(0).max(), 500);
  registry.MarkLost("s", "unreachable");
  EXPECT_FALSE(registry.IsReady("s"));
  registry.SetRunningTrial("s", 0, "c1-t1");
  EXPECT_EQ(registry.Get("s")->running_trial(), "c1-t1");
  // Each slot's trial, in slot order; one ending leaves the others.
  registry.SetRunningTrial("s", 2, "c1-t3");
  registry.SetRunningTrial("s", 1, "c1-t2");
  EXPECT_EQ(registry.Get("s")->running_trial(), "c1-t1,c1-t2,c1-t3");
  registry.SetRunningTrial("s", 0, "");
  EXPECT_EQ(registry.Get("s")->running_trial(), "c1-t2,c1-t3");
}

TEST(AgentRegistry, RestoredAgentsMustBeHeardFromAgain) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  crest::v1::AgentInfo old;
  old.set_node_name("r");
  old.set_address("127.0.0.1:5");
  old.set_state(crest::v1::AGENT_READY);
  registry.Restore({old});
  EXPECT_FALSE(registry.IsReady("r"));
  EXPECT_TRUE(registry.Heartbeat("r"));
  EXPECT_TRUE(registry.IsReady("r"));
}

TEST(AgentRegistry, ARegistrationCountsOnlyOnceRecorded) {
  crest::testing::TempDir dir;
  auto store = Store::Open(dir.path());
  CREST_ASSERT_OK(store);
  testing::FailingStore failing(store->get(), /*fail_at=*/1);
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {}, &failing);
  EXPECT_THAT(
      registry.Register(Req("a")),
      crest::testing::StatusIs(absl::StatusCode::kUnavailable,
                               ::testing::HasSubstr("could not record the registration of a")));
  EXPECT_FALSE(registry.Get("a").has_value());  // the agent registers again
  CREST_EXPECT_OK(registry.Register(Req("a")));
  EXPECT_TRUE(registry.IsReady("a"));
  auto snap = (*store)->Load();
  CREST_ASSERT_OK(snap);
  ASSERT_EQ(snap->agents.size(), 1u);
  EXPECT_EQ(snap->agents[0].node_name(), "a");
  EXPECT_EQ(snap->agents[0].address(), "127.0.0.1:7001");
  EXPECT_EQ(snap->agents[0].labels().at("model"), "LLaMa3-8B");
}

TEST(AgentRegistry, RegistrationCarriesTheAgentsLimitsAndAReRegistrationReplacesThem) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  crest::v1::RegisterAgentRequest req = Req("a");
  auto* limit = req.add_parameter_limits();
  limit->set_key("maxBatchSize");
  limit->set_min(1);
  limit->set_max(2048);
  req.add_benchmark_limits()->set_key("concurrency");
  CREST_EXPECT_OK(registry.Register(req));
  ASSERT_EQ(registry.Get("a")->parameter_limits_size(), 1);
  EXPECT_EQ(registry.Get("a")->parameter_limits(0).max(), 2048);
  EXPECT_EQ(registry.Get("a")->benchmark_limits(0).key(), "concurrency");
  CREST_EXPECT_OK(registry.Register(Req("a")));  // an agent that publishes none
  EXPECT_EQ(registry.Get("a")->parameter_limits_size(), 0);
  EXPECT_EQ(registry.Get("a")->benchmark_limits_size(), 0);
}

TEST(AgentRegistry, ARegistrationNeverReplacesAStaticAgent) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  registry.AddStatic("node-1", "10.0.0.1:7001");
  EXPECT_THAT(registry.Register(Req("node-1")),
              crest::testing::StatusIs(
                  absl::StatusCode::kFailedPrecondition,
                  "node node-1 is a static agent of this controller (--agents "
                  "node-1=10.0.0.1:7001): a registration may not replace it; start the agent "
                  "without --controller"));
  EXPECT_EQ(registry.Get("node-1")->address(), "10.0.0.1:7001");
  EXPECT_TRUE(registry.Get("node-1")->static_());
  EXPECT_FALSE(registry.IsReady("node-1"));
}

TEST(AgentRegistry, TheSameNodeRegistersAgainAfterARestart) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  CREST_EXPECT_OK(registry.Register(Req("node-1")));
  crest::v1::RegisterAgentRequest again = Req("node-1");
  again.set_advertise_address("127.0.0.1:7999");  // a new port after the restart
  CREST_EXPECT_OK(registry.Register(again));
  EXPECT_EQ(registry.Get("node-1")->address(), "127.0.0.1:7999");
  EXPECT_EQ(registry.List().size(), 1u);
}

TEST(AgentRegistry, HostileRegistrationsAreRefusedAndChangeNothing) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  CREST_EXPECT_OK(registry.Register(Req("node-1")));
  std::vector<std::pair<std::string, crest::v1::RegisterAgentRequest>> bad;
  auto with = [&](const std::string& what,
                  const std::function<void(crest::v1::RegisterAgentRequest*)>& f) {
    crest::v1::RegisterAgentRequest r = Req("node-1");
    r.set_advertise_address("127.0.0.1:1");
    f(&r);
    bad.emplace_back(what, r);
  };
  with("node_name", [](auto* r) { r->clear_node_name(); });
  with("node_name", [](auto* r) { r->set_node_name(std::string(2 << 20, 'n')); });
  with("node_name", [](auto* r) { r->set_node_name("../node-1"); });
  with("advertise_address", [](auto* r) { r->set_advertise_address("node-1"); });
  with("advertise_address", [](auto* r) { r->set_advertise_address("h:70000"); });
  with("advertise_address", [](auto* r) { r->set_advertise_address("h:-1"); });
  with("advertise_address",
       [](auto* r) { r->set_advertise_address(std::string(1 << 20, 'a') + ":1"); });
  with("labels", [](auto* r) {
    for (int i = 0; i < 100000; ++i) (*r->mutable_labels())[absl::StrCat("k", i)] = "v";
  });
  with("labels", [](auto* r) { (*r->mutable_labels())["k"] = std::string(1 << 20, 'v'); });
  with("labels", [](auto* r) { (*r->mutable_labels())[""] = "v"; });
  with("capabilities", [](auto* r) {
    for (int i = 0; i < 1000; ++i) r->add_capabilities("c");
  });
  with("parameter_limits", [](auto* r) {
    for (int i = 0; i < 1000; ++i) r->add_parameter_limits()->set_key("maxBatchSize");
  });
  with("parameter_limits", [](auto* r) {
    auto* l = r->add_parameter_limits();
    l->set_key("maxBatchSize");
    l->set_min(10);
    l->set_max(1);
  });
  with("benchmark_limits", [](auto* r) {
    auto* l = r->add_benchmark_limits();
    l->set_key("concurrency");
    l->set_max(std::nan(""));
  });
  for (const auto& [field, request] : bad) {
    absl::Status s = registry.Register(request);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith(field)) << s;
    EXPECT_LT(s.message().size(), 300u) << field;
  }
  ASSERT_EQ(registry.List().size(), 1u);
  EXPECT_EQ(registry.Get("node-1")->address(), "127.0.0.1:7001");
}

TEST(TimeScales, ParsedFromTheControllersFlag) {
  auto scales = ParseTimeScales("10, node-3=50");
  CREST_ASSERT_OK(scales);
  EXPECT_DOUBLE_EQ(scales->For("node-1"), 10);
  EXPECT_DOUBLE_EQ(scales->For("node-3"), 50);
  auto none = ParseTimeScales("");
  CREST_ASSERT_OK(none);
  EXPECT_DOUBLE_EQ(none->For("node-1"), 0);
  for (const char* bad :
       {"0", "-2", "fast", "node-1=", "=5", "node-1=2,node-1=3", "1,2", "nan", "1e9"}) {
    EXPECT_THAT(ParseTimeScales(bad),
                crest::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                         ::testing::StartsWith("--sim-time-scale: ")))
        << bad;
  }
}

}  // namespace
}  // namespace crest::controller
