#include "agent/slots.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <set>

#include "agent/npu_smi.h"
#include "common/file_util.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"

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

// The chips of a real `npu-smi info` (tests/data/real/npu-smi/) as the agent
// hands them to PlanSlots: by device id, with their card and chip.
std::vector<HostNpu> HostOf(const std::string& file) {
  auto text = ReadFileToString(crest::testing::SourceDir() + "/tests/data/real/npu-smi/" + file);
  EXPECT_THAT(text, IsOk()) << file;
  if (!text.ok()) return {};
  auto info = ParseNpuSmiInfo(*text);
  EXPECT_THAT(info, IsOk()) << file;
  if (!info.ok()) return {};
  std::vector<HostNpu> out;
  for (const NpuChip& c : info->chips)
    out.push_back({c.device_id, std::nullopt, c.card_id, c.chip_id});
  return out;
}

SlotsSpec Auto() {
  SlotsSpec s;
  s.kind = SlotsSpec::Kind::kAuto;
  return s;
}

// Every chip in at most one slot, and each slot's (card, chip) places.
std::vector<std::vector<std::pair<uint32_t, uint32_t>>> PlacesOf(const SlotPlan& plan,
                                                                 const std::vector<HostNpu>& host) {
  std::set<uint32_t> used;
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> out;
  for (const SlotLayout& slot : plan.slots) {
    auto& places = out.emplace_back();
    for (uint32_t device : slot.npus) {
      EXPECT_TRUE(used.insert(device).second) << "device " << device << " in two slots";
      for (const HostNpu& n : host) {
        if (n.id == device) places.emplace_back(n.card_id, n.chip_id);
      }
    }
    EXPECT_EQ(places.size(), slot.npus.size()) << "a slot names a device npu-smi does not list";
  }
  return out;
}

using Place = std::pair<uint32_t, uint32_t>;

// A 300I Duo card (NPU 1792) has two chips, devices 0 and 1: npuDeviceIds
// take those, never the card id (which both rows of the card print).
TEST(SlotPlanOnRealHostsTest, A300IDuoGivesEachChipItsOwnSlotByDeviceId) {
  const std::vector<HostNpu> one_card = HostOf("300i-duo-310p3-1card-npu-smi-24.1.rc2-id1792.txt");
  auto plan = PlanSlots(Auto(), one_card, 1, Host(2, 4));
  ASSERT_THAT(plan, IsOk());
  ASSERT_EQ(plan->slots.size(), 2u);
  EXPECT_THAT(plan->slots[0].npus, ElementsAre(0));
  EXPECT_THAT(plan->slots[1].npus, ElementsAre(1));
  EXPECT_THAT(PlacesOf(*plan, one_card),
              ElementsAre(ElementsAre(Place(1792, 0)), ElementsAre(Place(1792, 1))));

  // Four cards (NPU 1, 2, 4, 5), worldSize 2: each slot is one card's two chips.
  const std::vector<HostNpu> four =
      HostOf("300i-duo-310p3-4card-npu-smi-25.0.rc1.b033-critical.txt");
  auto pairs = PlanSlots(Auto(), four, 2, Host(2, 8));
  ASSERT_THAT(pairs, IsOk());
  ASSERT_EQ(pairs->slots.size(), 4u);
  EXPECT_THAT(pairs->slots[2].npus, ElementsAre(4, 5));
  EXPECT_THAT(
      PlacesOf(*pairs, four),
      ElementsAre(ElementsAre(Place(1, 0), Place(1, 1)), ElementsAre(Place(2, 0), Place(2, 1)),
                  ElementsAre(Place(4, 0), Place(4, 1)), ElementsAre(Place(5, 0), Place(5, 1))));
  auto singles = PlanSlots(Auto(), four, 1, Host(2, 16));
  ASSERT_THAT(singles, IsOk());
  EXPECT_EQ(singles->slots.size(), 8u);
  PlacesOf(*singles, four);
}

TEST(SlotPlanOnRealHostsTest, A300IDuoListIsCheckedAgainstDeviceIds) {
  const std::vector<HostNpu> host = HostOf("300i-duo-310p3-1card-npu-smi-24.1.rc2-id1792.txt");
  auto spec = ParseSlotsSpec(YAML::Load("[{npus: [1]}, {npus: [0]}]"), "slots");
  ASSERT_THAT(spec, IsOk());
  auto plan = PlanSlots(*spec, host, 1, Host(2, 4));
  ASSERT_THAT(plan, IsOk()) << "a correct list of device ids is accepted";
  EXPECT_THAT(plan->slots[0].npus, ElementsAre(1));

  SlotsSpec list;
  list.kind = SlotsSpec::Kind::kList;
  list.npus = {{2}};
  EXPECT_THAT(PlanSlots(list, host, 1, Host(2, 4)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("slots[0].npus: NPU 2 is not on this host"),
                             HasSubstr("device ids 0,1: 0=NPU 1792 chip 0, 1=NPU 1792 chip 1"))));
  // The card id is not a device id.
  EXPECT_THAT(ParseSlotsSpec(YAML::Load("[{npus: [1792]}]"), "slots"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("expected an NPU id in [0, 63]"),
                             HasSubstr("npu-smi's Device or Phy-ID column"))));
}

// An A3 card (Ascend910) has two dies, Phy-ID 2k and 2k+1.
TEST(SlotPlanOnRealHostsTest, AnA3GroupsDiesByPhyId) {
  const std::vector<HostNpu> host = HostOf("a3-ascend910-8card-16chip-npu-smi-25.3.rc1.txt");
  auto cards = PlanSlots(Auto(), host, 2, Host(2, 32));
  ASSERT_THAT(cards, IsOk());
  ASSERT_EQ(cards->slots.size(), 8u);
  const auto places = PlacesOf(*cards, host);
  for (uint32_t k = 0; k < 8; ++k) {
    EXPECT_THAT(cards->slots[k].npus, ElementsAre(2 * k, 2 * k + 1));
    EXPECT_THAT(places[k], ElementsAre(Place(k, 0), Place(k, 1)));
  }
  auto dies = PlanSlots(Auto(), host, 1, Host(2, 32));
  ASSERT_THAT(dies, IsOk());
  ASSERT_EQ(dies->slots.size(), 16u);
  EXPECT_THAT(dies->slots[15].npus, ElementsAre(15));
  PlacesOf(*dies, host);

  SlotsSpec list;
  list.kind = SlotsSpec::Kind::kList;
  list.npus = {{14, 15}, {3}};
  auto listed = PlanSlots(list, host, 2, Host(2, 32));
  ASSERT_THAT(listed, IsOk());
  EXPECT_THAT(PlacesOf(*listed, host),
              ElementsAre(ElementsAre(Place(7, 0), Place(7, 1)), ElementsAre(Place(1, 1))));
}

TEST(SlotPlanOnRealHostsTest, AHostListingADeviceTwiceIsRefused) {
  // What the first-row NPU column gave before device ids: card 1792 twice.
  const std::vector<HostNpu> twice = {{1792, std::nullopt, 1792, 0}, {1792, std::nullopt, 1792, 1}};
  EXPECT_THAT(PlanSlots(Auto(), twice, 1, Host(1, 4)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("npu-smi lists device id 1792 twice")));
  EXPECT_THAT(PlanSlots(Count(1), twice, 1, Host(1, 4)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("twice")));
}

}  // namespace
}  // namespace crest::agent
