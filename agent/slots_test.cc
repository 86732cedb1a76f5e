#include "agent/slots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "common/testing/status_matchers.h"

namespace crest::agent {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<uint32_t> Range(uint32_t from, uint32_t to) {  // [from, to)
  std::vector<uint32_t> out(to - from);
  std::iota(out.begin(), out.end(), from);
  return out;
}

// `nodes` NUMA nodes of `per_node` CPUs each, all online.
Topology Host(uint32_t nodes, uint32_t per_node) {
  Topology t;
  t.cpu_count = nodes * per_node;
  t.online_cpus = Range(0, t.cpu_count);
  for (uint32_t n = 0; n < nodes; ++n)
    t.numa_nodes.push_back({n, Range(n * per_node, (n + 1) * per_node)});
  return t;
}

std::vector<HostNpu> Npus(uint32_t count, uint32_t per_node = 0) {
  std::vector<HostNpu> out;
  for (uint32_t i = 0; i < count; ++i) {
    HostNpu n{i, std::nullopt};
    if (per_node > 0) n.numa_node = i / per_node;
    out.push_back(n);
  }
  return out;
}

SlotsSpec Count(uint32_t n) {
  SlotsSpec s;
  s.count = n;
  return s;
}

absl::StatusOr<SlotsSpec> Parse(const std::string& yaml) {
  return ParseSlotsSpec(YAML::Load(yaml), "slots");
}

TEST(SlotsSpecTest, ReadsACountAutoOrAListOfNpuGroups) {
  auto four = Parse("4");
  ASSERT_THAT(four, IsOk());
  EXPECT_EQ(four->kind, SlotsSpec::Kind::kCount);
  EXPECT_EQ(four->count, 4u);
  auto automatic = Parse("auto");
  ASSERT_THAT(automatic, IsOk());
  EXPECT_EQ(automatic->kind, SlotsSpec::Kind::kAuto);
  auto list = Parse("[{npus: [0, 1]}, {npus: [4]}]");
  ASSERT_THAT(list, IsOk());
  EXPECT_EQ(list->kind, SlotsSpec::Kind::kList);
  EXPECT_THAT(list->npus, ElementsAre(ElementsAre(0, 1), ElementsAre(4)));
}

TEST(SlotsSpecTest, AnythingElseIsRefusedNamingWhereAndWhat) {
  for (const char* bad : {"0", "-1", "65", "many", "[]", "{npus: [0]}"}) {
    EXPECT_THAT(Parse(bad),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("slots: expected a count in [1, 64]"), HasSubstr("auto"))))
        << bad;
  }
  EXPECT_THAT(Parse("[{npus: [0]}, {cards: [1]}]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slots[1]: expected {npus: [ids...]}")));
  EXPECT_THAT(Parse("[{npus: [0, x]}]"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slots[0].npus[1]: expected an NPU id in [0, 63], got \"x\"")));
}

TEST(SlotPlanTest, TheDefaultIsOneSlotOnTheFirstCards) {
  auto plan = PlanSlots(SlotsSpec{}, Npus(8), 2, Host(1, 4));
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->slots.size(), 1u);
  EXPECT_THAT(plan->slots[0].npus, ElementsAre(0, 1));
}

// The practice's 8-node server: odd nodes 1/3/5/7 for the daemons, even
// nodes for the clients, whole nodes when the slots divide them.
TEST(SlotPlanTest, EnoughOddNodesGiveEachSlotItsShareOfThem) {
  auto plan = PlanSlots(Count(4), Npus(8), 2, Host(8, 24));
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->cpu_rule, "odd-numa");
  ASSERT_EQ(plan->slots.size(), 4u);
  EXPECT_THAT(plan->slots[0].npus, ElementsAre(0, 1));
  EXPECT_THAT(plan->slots[3].npus, ElementsAre(6, 7));
  EXPECT_EQ(plan->slots[0].cpus, Range(24, 48));    // node 1
  EXPECT_EQ(plan->slots[3].cpus, Range(168, 192));  // node 7
  EXPECT_EQ(plan->client_cpus.size(), 4u * 24);
  EXPECT_EQ(plan->client_cpus.front(), 0u);
}

TEST(SlotPlanTest, MoreSlotsThanOddNodesFollowTheNpusOwnNodes) {
  // 8 NPUs, 2 per node on a 4-node host; 8 slots of one card.
  auto plan = PlanSlots(Count(8), Npus(8, 2), 1, Host(4, 8));
  ASSERT_THAT(plan, IsOk());
  // Every node hosts slots: no node is left for the clients, so the
  // affinity rule cannot keep them apart and the CPUs are split evenly.
  EXPECT_EQ(plan->cpu_rule, "even-split");

  auto half = PlanSlots(Count(4), Npus(8, 2), 1, Host(4, 8));
  ASSERT_THAT(half, IsOk());
  EXPECT_EQ(half->cpu_rule, "npu-affinity");
  EXPECT_EQ(half->slots[0].cpus, Range(0, 4));  // NPU 0 on node 0, shared with NPU 1's slot
  EXPECT_EQ(half->slots[1].cpus, Range(4, 8));
  EXPECT_EQ(half->slots[2].cpus, Range(8, 12));
  EXPECT_EQ(half->client_cpus, Range(16, 32));  // nodes 2 and 3
}

TEST(SlotPlanTest, OneNodeIsSplitEvenlyWithTheLastShareForTheClients) {
  auto plan = PlanSlots(Count(4), Npus(8), 1, Host(1, 10));
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->cpu_rule, "even-split");
  EXPECT_THAT(plan->slots[0].cpus, ElementsAre(0, 1));
  EXPECT_THAT(plan->slots[3].cpus, ElementsAre(6, 7));
  EXPECT_THAT(plan->client_cpus, ElementsAre(8, 9));
  // Daemons and clients never share a CPU.
  std::vector<uint32_t> all = plan->client_cpus;
  for (const SlotLayout& s : plan->slots) all.insert(all.end(), s.cpus.begin(), s.cpus.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

TEST(SlotPlanTest, TooFewCpusLeaveEverythingUnpinnedAndSaySo) {
  auto plan = PlanSlots(Count(4), Npus(8), 1, Host(1, 2));
  ASSERT_THAT(plan, IsOk());
  EXPECT_EQ(plan->cpu_rule, "unpinned");
  EXPECT_THAT(plan->cpu_note, HasSubstr("2 online CPUs cannot give 4 daemons"));
  for (const SlotLayout& s : plan->slots) EXPECT_THAT(s.cpus, IsEmpty());
  EXPECT_THAT(plan->client_cpus, IsEmpty());
}

TEST(SlotPlanTest, AutoGroupsTheListedNpusByWorldSize) {
  SlotsSpec automatic;
  automatic.kind = SlotsSpec::Kind::kAuto;
  auto plan = PlanSlots(automatic, Npus(8), 3, Host(1, 16));
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->slots.size(), 2u);  // 8 / 3: two groups, two cards left over
  EXPECT_THAT(plan->slots[1].npus, ElementsAre(3, 4, 5));

  EXPECT_THAT(PlanSlots(automatic, {}, 1, Host(1, 4)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("npu-smi listed none")));
  EXPECT_THAT(PlanSlots(automatic, Npus(2), 4, Host(1, 4)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("2 NPUs, fewer than the model's worldSize 4")));
}

TEST(SlotPlanTest, ACountTheHostCannotHoldIsRefused) {
  EXPECT_THAT(PlanSlots(Count(5), Npus(8), 2, Host(1, 16)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("5 slots of worldSize 2 need 10 NPUs, and the host has 8")));
  // Without npu-smi the cards are counted from 0.
  auto blind = PlanSlots(Count(3), {}, 2, Host(1, 16));
  ASSERT_THAT(blind, IsOk());
  EXPECT_THAT(blind->slots[2].npus, ElementsAre(4, 5));
}

TEST(SlotPlanTest, AListMustNameCardsOfThisHostOnceEach) {
  SlotsSpec list;
  list.kind = SlotsSpec::Kind::kList;
  list.npus = {{0, 1}, {1, 2}};
  EXPECT_THAT(PlanSlots(list, Npus(8), 2, Host(1, 8)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slots[1].npus: NPU 1 is already in slots[0]")));
  list.npus = {{0}, {9}};
  EXPECT_THAT(PlanSlots(list, Npus(8), 1, Host(1, 8)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("slots[1].npus: NPU 9 is not on this host")));
  list.npus = {{6, 7}, {0}};
  auto plan = PlanSlots(list, Npus(8), 1, Host(1, 9));
  ASSERT_THAT(plan, IsOk());
  EXPECT_THAT(plan->slots[0].npus, ElementsAre(6, 7));
  EXPECT_THAT(plan->slots[1].npus, ElementsAre(0));
}

}  // namespace
}  // namespace crest::agent
