#include "sim/npu_host.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>

#include "absl/strings/str_cat.h"

#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::sim {
namespace {

using ::crest::testing::IsOk;
using ::crest::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;

auto Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

NpuUse Use(uint64_t used) {
  NpuUse use;
  use.chip = "910B3";
  use.hbm_used_mib = used;
  use.hbm_total_mib = 65536;
  return use;
}

TEST(NpuHostTest, TheDirectoryComesFromTheVariableElseFromTheInstall) {
  auto from_var = NpuHostFromEnv("/opt/mindie", Env({{"MINDIE_SIM_NPU_DIR", "/run/host-a"}}));
  ASSERT_THAT(from_var, IsOk());
  EXPECT_EQ(from_var->dir, "/run/host-a");
  EXPECT_EQ(from_var->device_count, 8);

  auto from_install = NpuHostFromEnv("/opt/mindie", Env({{"MINDIE_SIM_NPU_COUNT", "16"}}));
  ASSERT_THAT(from_install, IsOk());
  EXPECT_EQ(from_install->dir, "/opt/mindie/run/npu");
  EXPECT_EQ(from_install->device_count, 16);

  EXPECT_THAT(NpuHostFromEnv("", Env({})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MINDIE_SIM_NPU_DIR")));
  for (const char* bad : {"0", "65", "eight"}) {
    EXPECT_THAT(NpuHostFromEnv("/opt/mindie", Env({{"MINDIE_SIM_NPU_COUNT", bad}})),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr("MINDIE_SIM_NPU_COUNT"), HasSubstr(bad))))
        << bad;
  }
}

TEST(NpuHostTest, AHeldDeviceIsRefusedNamingItsHolderAndFreedWithTheClaim) {
  crest::testing::TempDir dir;
  NpuHost host{dir.path(), 4};
  {
    auto first = NpuClaim::Acquire(host, {0, 1}, Use(30000));
    ASSERT_THAT(first, IsOk());
    // flock locks belong to an open file: a second claim in this process
    // meets the first as another process would.
    EXPECT_THAT(NpuClaim::Acquire(host, {1}, Use(100)),
                StatusIs(absl::StatusCode::kFailedPrecondition,
                         AllOf(HasSubstr("NPU 1 is in use by process"),
                               HasSubstr(absl::StrCat(::getpid())), HasSubstr("mindie-sim"))));
    EXPECT_THAT(NpuClaim::Acquire(host, {2, 3}, Use(100)), IsOk());  // released at once
  }
  EXPECT_THAT(NpuClaim::Acquire(host, {1}, Use(100)), IsOk());
}

TEST(NpuHostTest, AClaimTakesEveryDeviceOrNone) {
  crest::testing::TempDir dir;
  NpuHost host{dir.path(), 4};
  auto holder = NpuClaim::Acquire(host, {3}, Use(100));
  ASSERT_THAT(holder, IsOk());
  EXPECT_THAT(NpuClaim::Acquire(host, {2, 3}, Use(100)),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("NPU 3")));
  std::vector<NpuState> states = ReadNpuHost(host);
  ASSERT_EQ(states.size(), 4u);
  EXPECT_FALSE(states[2].holder_pid.has_value()) << "the failed claim left NPU 2 held";
  EXPECT_THAT(NpuClaim::Acquire(host, {2}, Use(100)), IsOk());
}

TEST(NpuHostTest, DevicesTheHostDoesNotHaveAreInvalid) {
  crest::testing::TempDir dir;
  NpuHost host{dir.path(), 2};
  EXPECT_THAT(NpuClaim::Acquire(host, {0, 2}, Use(100)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("NPU 2 does not exist"), HasSubstr("2 NPUs (0..1)"))));
  EXPECT_FALSE(ReadNpuHost(host)[0].holder_pid.has_value());
}

TEST(NpuHostTest, TheHostShowsEachDevicesUseAndHolder) {
  crest::testing::TempDir dir;
  NpuHost host{dir.path(), 3};
  auto claim = NpuClaim::Acquire(host, {1}, Use(41234));
  ASSERT_THAT(claim, IsOk());
  std::vector<NpuState> states = ReadNpuHost(host);
  ASSERT_EQ(states.size(), 3u);
  EXPECT_FALSE(states[0].holder_pid.has_value());
  EXPECT_EQ(states[0].hbm_used_mib, 0u);
  EXPECT_EQ(states[0].hbm_total_mib, 65536u);
  ASSERT_TRUE(states[1].holder_pid.has_value());
  EXPECT_EQ(*states[1].holder_pid, ::getpid());
  EXPECT_EQ(states[1].hbm_used_mib, 41234u);
  EXPECT_EQ(states[1].process_name, "mindie-sim");

  const std::string table = FormatNpuSmiInfo(states);
  EXPECT_THAT(table, HasSubstr("41234 / 65536"));
  EXPECT_THAT(table, HasSubstr("No running processes found in NPU 0"));
  EXPECT_THAT(table, HasSubstr(absl::StrCat(::getpid())));

  *claim = std::move(*NpuClaim::Acquire(host, {2}, Use(7)));  // the move releases NPU 1
  states = ReadNpuHost(host);
  EXPECT_FALSE(states[1].holder_pid.has_value());
  EXPECT_EQ(states[1].hbm_used_mib, 0u) << "a released device keeps no stale use";
  EXPECT_EQ(states[2].hbm_used_mib, 7u);
}

TEST(NpuHostTest, TheCardsSpreadEvenlyOverTheNumaNodes) {
  NpuHost host;
  host.device_count = 4;
  Topology topology;
  topology.online_cpus = {0, 1, 2, 3, 4, 5, 6, 7};
  topology.numa_nodes = {{0, {0, 1, 2, 3}}, {1, {4, 5, 6, 7}}};
  const std::string topo = FormatNpuSmiTopo(host, topology);
  EXPECT_THAT(topo, HasSubstr("CPU Affinity\n"));
  EXPECT_THAT(topo, ::testing::MatchesRegex(
                        "(.|\n)*NPU1 +HCCS +X +HCCS +HCCS +0-3\n(.|\n)*NPU2 +HCCS +HCCS +X +HCCS "
                        "+4-7\n(.|\n)*"));
}

}  // namespace
}  // namespace crest::sim
