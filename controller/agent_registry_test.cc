#include "controller/agent_registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/fake_clock.h"

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
  AgentRegistry registry(&clock, {absl::Seconds(2), 3});
  int changes = 0;
  registry.SetOnChange([&] { ++changes; });
  registry.Register(Req("a"));
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

TEST(AgentRegistry, UnknownHeartbeatAsksForRegistration) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {});
  EXPECT_FALSE(registry.Heartbeat("ghost"));
  EXPECT_FALSE(registry.Get("ghost").has_value());
}

TEST(AgentRegistry, StaticAgentsAreLostUntilSeen) {
  crest::testing::FakeClock clock;
  AgentRegistry registry(&clock, {absl::Seconds(1), 3});
  registry.AddStatic("s", "127.0.0.1:9");
  EXPECT_FALSE(registry.IsReady("s"));
  EXPECT_TRUE(registry.Get("s")->static_());
  std::map<std::string, std::string> labels = {{"npu", "910B3"}};
  registry.MarkSeen("s", &labels);
  EXPECT_TRUE(registry.IsReady("s"));
  EXPECT_EQ(registry.Get("s")->labels().at("npu"), "910B3");
  registry.MarkLost("s", "unreachable");
  EXPECT_FALSE(registry.IsReady("s"));
  registry.SetRunningTrial("s", "c1-t1");
  EXPECT_EQ(registry.Get("s")->running_trial(), "c1-t1");
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

}  // namespace
}  // namespace crest::controller
