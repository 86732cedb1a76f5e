// common/topology.h against the agent's fake sysfs trees (agent/testing): it lives
// beside them, with the agent that reads the topology most.
#include "common/topology.h"

#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/testing/fake_sysfs.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::agent {
namespace {

using ::testing::ElementsAre;

TEST(TopologyTest, ReadsNodesAndOnlineCpus) {
  crest::testing::TempDir dir;
  testing::FakeSysfsSpec spec;
  spec.numa_nodes = {{0, 1}, {2, 3}, {4, 5}, {6, 7}};
  spec.online = "0-5,7";
  testing::WriteFakeSysfs(dir.path(), spec);
  auto t = ReadTopology(dir.path());
  CREST_ASSERT_OK(t);
  EXPECT_EQ(t->cpu_count, 8u);
  EXPECT_THAT(t->online_cpus, ElementsAre(0, 1, 2, 3, 4, 5, 7));
  ASSERT_EQ(t->numa_nodes.size(), 4u);
  EXPECT_EQ(t->numa_nodes[3].id, 3u);
  EXPECT_THAT(t->numa_nodes[3].cpus, ElementsAre(6, 7));
  // Odd nodes 1 and 3, CPU 6 offline.
  EXPECT_THAT(t->OddNumaCpus(), ElementsAre(2, 3, 7));
  EXPECT_THAT(t->OnlineCpusExcept({2, 3, 7}), ElementsAre(0, 1, 4, 5));
}

TEST(TopologyTest, NoNumaDirectoryGivesOneNode) {
  crest::testing::TempDir dir;
  testing::FakeSysfsSpec spec;
  spec.numa_nodes = {{0, 1, 2}};
  testing::WriteFakeSysfs(dir.path(), spec);
  std::filesystem::remove_all(dir.path() + "/devices/system/node");
  auto t = ReadTopology(dir.path());
  CREST_ASSERT_OK(t);
  ASSERT_EQ(t->numa_nodes.size(), 1u);
  EXPECT_THAT(t->numa_nodes[0].cpus, ElementsAre(0, 1, 2));
  EXPECT_TRUE(t->OddNumaCpus().empty());
}

TEST(TopologyTest, MissingSysfsIsAnError) {
  crest::testing::TempDir dir;
  EXPECT_THAT(ReadTopology(dir.path() + "/nothing"),
              crest::testing::StatusIs(absl::StatusCode::kNotFound));
}

TEST(TopologyTest, GarbageCpuListNamesTheFile) {
  crest::testing::TempDir dir;
  testing::WriteFakeSysfs(dir.path(), {});
  std::ofstream(dir.path() + "/devices/system/node/node1/cpulist") << "1-x\n";
  EXPECT_THAT(ReadTopology(dir.path()),
              crest::testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                       ::testing::HasSubstr("node1/cpulist")));
}

}  // namespace
}  // namespace crest::agent
