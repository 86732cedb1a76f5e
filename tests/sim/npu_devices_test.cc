// Several mindie-sim processes on one simulated host (sim/npu_host.h): a
// card serves one process, the kernel frees a dead process's cards, and
// npu-smi-sim shows each card's use in the table the agent parses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <csignal>

#include "absl/strings/str_cat.h"

#include "agent/npu_smi.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"
#include "sim/testing/sim_process.h"

namespace crest::sim {
namespace {

using ::crest::testing::TempDir;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::SimProcess;
using testing::TestConfig;

const std::vector<std::string> kFast = {"--startup-seconds", "0", "--seed", "1", "--noise-cv", "0"};

json OnDevices(const std::string& ids, int world_size) {
  json config = TestConfig();
  config["BackendConfig"]["npuDeviceIds"] = json::parse(ids);
  config["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["worldSize"] = world_size;
  return config;
}

std::unique_ptr<SimProcess> Start(const TempDir& dir, const json& config,
                                  const std::map<std::string, std::string>& env) {
  auto p = SimProcess::Start(dir.path(), config, kFast, env);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? std::move(*p) : nullptr;
}

absl::StatusOr<CommandOutput> NpuSmi(const std::map<std::string, std::string>& env) {
  SpawnOptions smi;
  smi.argv = {testing::BinDir() + "/npu-smi-sim", "info"};
  smi.env = env;
  return RunCommand(smi, absl::Seconds(10));
}

TEST(NpuDevicesTest, ACardServesOneSimulatorAndIsFreedWhenItDies) {
  TempDir host;
  TempDir a_dir;
  TempDir b_dir;
  TempDir c_dir;
  const std::map<std::string, std::string> env = {{"MINDIE_SIM_NPU_DIR", host.path()}};

  auto a = Start(a_dir, OnDevices("[[0]]", 1), env);
  ASSERT_NE(a, nullptr);
  ASSERT_TRUE(a->WaitReady(15)) << a->Output();

  auto b = Start(b_dir, OnDevices("[[1,0]]", 2), env);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->WaitExit(15), 1) << b->Output();
  EXPECT_THAT(b->Output(), HasSubstr(absl::StrCat("NPU 0 is in use by process ", a->pid())));
  EXPECT_THAT(b->Output(), Not(HasSubstr("Daemon start success!")));

  auto c = Start(c_dir, OnDevices("[[1,2]]", 2), env);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->WaitReady(15)) << c->Output() << "\n(the refused start left NPU 1 held)";

  auto table = NpuSmi(env);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->exit.code, 0) << table->output;
  EXPECT_THAT(table->output, HasSubstr(absl::StrCat(a->pid())));
  EXPECT_THAT(table->output, HasSubstr(absl::StrCat(c->pid())));
  auto parsed = agent::ParseNpuSmiInfo(table->output);
  ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << table->output;
  std::vector<crest::v1::NpuDevice> npus = agent::ToNpuDevices(*parsed);
  ASSERT_EQ(npus.size(), 8u) << table->output;
  for (const crest::v1::NpuDevice& d : npus) {
    EXPECT_EQ(d.name(), "910B3");
    EXPECT_EQ(d.hbm_total_mib(), 65536u);
    // LLaMa3-8B at npuMemSize 17: 15 GiB of weights, 3 of runtime, 17 of cache
    // on one card; on two, half the weights each.
    if (d.id() == 0) {
      EXPECT_GT(d.hbm_used_mib(), 34u * 1024);
    } else if (d.id() <= 2) {
      EXPECT_GT(d.hbm_used_mib(), 26u * 1024) << d.id();
      EXPECT_LT(d.hbm_used_mib(), npus[0].hbm_used_mib()) << d.id();
    } else {
      EXPECT_EQ(d.hbm_used_mib(), 0u) << d.id();
    }
  }

  a->Signal(SIGKILL);
  ASSERT_TRUE(a->WaitExit(10).has_value());
  TempDir d_dir;
  auto d = Start(d_dir, OnDevices("[[0]]", 1), env);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->WaitReady(15)) << d->Output();
}

TEST(NpuDevicesTest, ACardTheHostDoesNotHaveIsAConfigurationError) {
  TempDir dir;
  auto p = Start(dir, OnDevices("[[3]]", 1), {{"MINDIE_SIM_NPU_COUNT", "2"}});
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->WaitExit(15), 2) << p->Output();
  EXPECT_THAT(p->Output(), HasSubstr("NPU 3 does not exist: the host has 2 NPUs (0..1)"));
}

// Each card layout npu-smi-sim prints reads back, through the agent's
// parser, to the device ids the simulators claimed, with the card and chip
// ids and the memory kind of the real tables (tests/data/real/npu-smi).
TEST(NpuDevicesTest, EveryLayoutReadsBackToTheClaimedDeviceIds) {
  struct Layout {
    std::string name;
    std::string chip;
    uint32_t chips_per_card;
    uint32_t first_card;
    crest::v1::NpuMemoryKind memory;
  };
  for (const Layout& layout :
       std::vector<Layout>{{"910b", "910B3", 1, 0, crest::v1::NPU_MEMORY_HBM},
                           {"310p-duo", "310P3", 2, 1, crest::v1::NPU_MEMORY_DDR},
                           {"a3", "Ascend910", 2, 0, crest::v1::NPU_MEMORY_HBM}}) {
    SCOPED_TRACE(layout.name);
    TempDir host;
    TempDir sim_dir;
    const std::map<std::string, std::string> env = {{"MINDIE_SIM_NPU_DIR", host.path()},
                                                    {"MINDIE_SIM_NPU_LAYOUT", layout.name}};
    auto sim = Start(sim_dir, OnDevices("[[2,3]]", 2), env);
    ASSERT_NE(sim, nullptr);
    ASSERT_TRUE(sim->WaitReady(15)) << sim->Output();
    auto table = NpuSmi(env);
    ASSERT_TRUE(table.ok()) << table.status();
    ASSERT_EQ(table->exit.code, 0) << table->output;
    auto parsed = agent::ParseNpuSmiInfo(table->output);
    ASSERT_TRUE(parsed.ok()) << parsed.status() << "\n" << table->output;
    std::vector<crest::v1::NpuDevice> npus = agent::ToNpuDevices(*parsed);
    ASSERT_EQ(npus.size(), 8u) << table->output;
    for (uint32_t i = 0; i < npus.size(); ++i) {
      const crest::v1::NpuDevice& d = npus[i];
      EXPECT_EQ(d.id(), i) << table->output;
      EXPECT_EQ(d.card_id(), layout.first_card + i / layout.chips_per_card) << i;
      EXPECT_EQ(d.chip_id(), i % layout.chips_per_card) << i;
      EXPECT_EQ(d.name(), layout.chip);
      EXPECT_EQ(d.memory_kind(), layout.memory);
      EXPECT_EQ(d.memory_total_mib(), 65536u);
      if (i == 2 || i == 3) {
        EXPECT_GT(d.memory_used_mib(), 0u) << i;
      } else {
        EXPECT_EQ(d.memory_used_mib(), 0u) << i;
      }
    }
    // The same table with the flag, not the environment.
    SpawnOptions flagged;
    flagged.argv = {testing::BinDir() + "/npu-smi-sim", "--layout", layout.name, "info"};
    flagged.env = {{"MINDIE_SIM_NPU_DIR", host.path()}};
    auto again = RunCommand(flagged, absl::Seconds(10));
    ASSERT_TRUE(again.ok()) << again.status();
    EXPECT_EQ(again->output, table->output);
  }
  SpawnOptions bad;
  bad.argv = {testing::BinDir() + "/npu-smi-sim", "--layout", "910c", "info"};
  auto refused = RunCommand(bad, absl::Seconds(10));
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_NE(refused->exit.code, 0);
  EXPECT_THAT(refused->output,
              HasSubstr("\"910c\" is not a layout; expected 910b, 310p-duo or a3"));
}

TEST(NpuDevicesTest, NpuSmiWithoutAHostSaysWhatIsMissing) {
  SpawnOptions smi;
  smi.argv = {testing::BinDir() + "/npu-smi-sim", "info"};
  smi.inherit_env = false;
  auto out = RunCommand(smi, absl::Seconds(10));
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_NE(out->exit.code, 0);
  EXPECT_THAT(out->output, HasSubstr("MINDIE_SIM_NPU_DIR"));
}

}  // namespace
}  // namespace crest::sim
