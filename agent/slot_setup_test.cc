#include "agent/slot_setup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "nlohmann/json.hpp"

#include "agent/npu_smi.h"
#include "common/file_util.h"
#include "common/status.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "common/testing/test_paths.h"

namespace crest::agent {
namespace {

using ::crest::testing::TempDir;
using ::testing::IsEmpty;

constexpr char kConfigJson[] = R"({
  "ServerConfig": {"port": 1025, "managementPort": 1026, "metricsPort": 1027},
  "BackendConfig": {"npuDeviceIds": [[0]],
                    "ModelDeployConfig": {"ModelConfig": [{"worldSize": 1}]}}
})";

// Two slots of one card each on a config.json at <dir>/conf/config.json.
absl::StatusOr<std::vector<SlotRuntime>> TwoSlots(const TempDir& dir, bool builtin_sim) {
  CREST_RETURN_IF_ERROR(MakeDirectories(dir.File("conf")));
  CREST_RETURN_IF_ERROR(WriteFileAtomically(dir.File("conf/config.json"), kConfigJson));
  AgentConfig config;
  config.config_json = dir.File("conf/config.json");
  config.use_builtin_sim = builtin_sim;
  config.slots = SlotsSpec{SlotsSpec::Kind::kCount, 2, {}};
  SlotPlan plan;
  plan.slots = {{0, {0}, {}}, {1, {1}, {}}};
  return PrepareSlots(config, plan, dir.File("state"));
}

std::vector<int> Ports(const SlotRuntime& slot) {
  return {slot.port, slot.management_port, slot.metrics_port};
}

std::vector<int> Held(const SlotRuntime& slot) {
  std::vector<int> out;
  for (const PortReservation& r : slot.reserved) out.push_back(r.port());
  return out;
}

// mindie-sim's listener binds with SO_REUSEADDR beside a held port, so the
// slots' ports stay held until the slot ends: another agent starting on the
// host cannot pick them while a daemon is down. A real daemon's are only
// picked: its bind might not share them.
TEST(PrepareSlotsTest, TheBuiltInSimulatorsPortsAreHeldARealDaemonsOnlyPicked) {
  TempDir sim_dir;
  auto sim = TwoSlots(sim_dir, /*builtin_sim=*/true);
  CREST_ASSERT_OK(sim.status());
  ASSERT_EQ(sim->size(), 2u);
  for (const SlotRuntime& slot : *sim) {
    EXPECT_EQ(Held(slot), Ports(slot)) << "slot " << slot.layout.index;
  }
  auto written = ReadFileToString((*sim)[1].config.config_json);
  CREST_ASSERT_OK(written.status());
  auto json = nlohmann::json::parse(*written);
  EXPECT_EQ(json["ServerConfig"]["port"], (*sim)[1].port);
  EXPECT_EQ(json["ServerConfig"]["metricsPort"], (*sim)[1].metrics_port);

  TempDir real_dir;
  auto real = TwoSlots(real_dir, /*builtin_sim=*/false);
  CREST_ASSERT_OK(real.status());
  for (const SlotRuntime& slot : *real) {
    EXPECT_THAT(slot.reserved, IsEmpty());
    EXPECT_THAT(Ports(slot), ::testing::Each(::testing::Gt(0)));
  }
}

// A 300I Duo host (cards 1, 2, 4, 5, two chips each) through npu-smi, the
// plan and the working copies: npuDeviceIds are the chips' device ids.
TEST(PrepareSlotsTest, EachSlotsNpuDeviceIdsAreTheDeviceIdsOfItsChips) {
  auto text = ReadFileToString(crest::testing::SourceDir() +
                               "/tests/data/real/npu-smi/"
                               "300i-duo-310p3-4card-npu-smi-25.0.rc1.b033-critical.txt");
  CREST_ASSERT_OK(text.status());
  auto info = ParseNpuSmiInfo(*text);
  CREST_ASSERT_OK(info.status());
  std::vector<HostNpu> npus;
  for (const NpuChip& c : info->chips)
    npus.push_back({c.device_id, std::nullopt, c.card_id, c.chip_id});
  Topology host;
  host.cpu_count = 8;
  host.online_cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  host.numa_nodes = {{0, {0, 1, 2, 3, 4, 5, 6, 7}}};
  SlotsSpec automatic;
  automatic.kind = SlotsSpec::Kind::kAuto;
  auto plan = PlanSlots(automatic, npus, 2, host);
  CREST_ASSERT_OK(plan.status());

  TempDir dir;
  CREST_ASSERT_OK(MakeDirectories(dir.File("conf")));
  CREST_ASSERT_OK(WriteFileAtomically(dir.File("conf/config.json"), kConfigJson));
  AgentConfig config;
  config.config_json = dir.File("conf/config.json");
  config.slots = automatic;
  auto slots = PrepareSlots(config, *plan, dir.File("state"));
  CREST_ASSERT_OK(slots.status());
  ASSERT_EQ(slots->size(), 4u);
  const std::vector<std::string> expected = {"[[0,1]]", "[[2,3]]", "[[4,5]]", "[[6,7]]"};
  for (size_t i = 0; i < slots->size(); ++i) {
    auto written = ReadFileToString((*slots)[i].config.config_json);
    CREST_ASSERT_OK(written.status());
    auto json = nlohmann::json::parse(*written);
    EXPECT_EQ(json["BackendConfig"]["npuDeviceIds"].dump(), expected[i]) << "slot " << i;
    EXPECT_EQ(json["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["worldSize"], 2);
  }
}

}  // namespace
}  // namespace crest::agent
