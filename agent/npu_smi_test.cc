#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "agent/node_agent.h"

namespace crest::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

// The shape of an Atlas 800I A2 (8 x 910B3), trimmed to three cards.
constexpr char kInfo[] =
    R"(+------------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc3                 Version: 23.0.rc3                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.5        45                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3379 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 96.1        44                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          41234/ 65536         |
+===========================+===============+====================================================+
| 2     910B3               | Warning       | 91.0        46                0    / 0             |
| 0                         | 0000:81:00.0  | 0           0    / 0          3380 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 1       0                 | 2961213       | mindieservice_d          | 37855                   |
+===========================+===============+====================================================+
)";

TEST(NpuSmiTest, InfoListsEachCardOnceWithItsHealthAndHbm) {
  std::vector<crest::v1::NpuDevice> npus = ParseNpuSmiInfo(kInfo);
  ASSERT_EQ(npus.size(), 3u);
  EXPECT_EQ(npus[0].id(), 0u);
  EXPECT_EQ(npus[0].name(), "910B3");
  EXPECT_EQ(npus[0].health(), "OK");
  EXPECT_EQ(npus[0].hbm_used_mib(), 3379u);
  EXPECT_EQ(npus[0].hbm_total_mib(), 65536u);
  EXPECT_EQ(npus[1].hbm_used_mib(), 41234u);
  EXPECT_EQ(npus[2].health(), "Warning");
}

TEST(NpuSmiTest, TopoGivesEachCardsCpuAffinity) {
  const std::string topo =
      "\t   NPU0       NPU1       NPU2       NPU3       CPU Affinity\n"
      "NPU0       X          HCCS       HCCS       HCCS       144-167\n"
      "NPU1       HCCS       X          HCCS       HCCS       144-167\n"
      "NPU2       HCCS       HCCS       X          HCCS       0-63,128-191\n"
      "NPU3       HCCS       HCCS       HCCS       X          NA\n"
      "\n"
      "Legend:\n"
      "\n"
      "  X    = Self\n"
      "  HCCS = Connection traversing HCCS.\n";
  auto affinity = ParseNpuSmiTopo(topo);
  ASSERT_EQ(affinity.size(), 3u) << "NPU3's unknown affinity is left out";
  EXPECT_EQ(affinity[0].front(), 144u);
  EXPECT_EQ(affinity[0].size(), 24u);
  EXPECT_EQ(affinity[2].size(), 128u);
  EXPECT_THAT(ParseNpuSmiTopo("npu-smi: command not supported\n"), IsEmpty());
}

}  // namespace
}  // namespace crest::agent
