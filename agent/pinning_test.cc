#include "agent/pinning.h"

#include <sched.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/testing/fake_sysfs.h"
#include "common/cpu_list.h"
#include "common/subprocess.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::agent {
namespace {

using ::crest::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

crest::v1::PinningPolicy Policy(crest::v1::PinningMode mode, const std::string& list = "") {
  crest::v1::PinningPolicy p;
  p.set_mode(mode);
  p.set_cpu_list(list);
  return p;
}

Topology EightNodes() {
  Topology t;
  for (uint32_t n = 0; n < 8; ++n) {
    NumaNodeInfo node{n, {}};
    for (uint32_t c = 0; c < 24; ++c) node.cpus.push_back(n * 24 + c);
    t.numa_nodes.push_back(node);
  }
  for (uint32_t c = 0; c < 192; ++c) t.online_cpus.push_back(c);
  t.cpu_count = 192;
  return t;
}

TEST(PinningTest, OddNumaOnTheReferenceServer) {
  auto cpus = ResolvePinning(Policy(crest::v1::PINNING_ODD_NUMA), EightNodes());
  CREST_ASSERT_OK(cpus);
  EXPECT_EQ(FormatCpuList(*cpus), "24-47,72-95,120-143,168-191");
}

TEST(PinningTest, NoneAndUnspecifiedPinNothing) {
  EXPECT_THAT(*ResolvePinning(Policy(crest::v1::PINNING_NONE), EightNodes()), ElementsAre());
  EXPECT_THAT(*ResolvePinning(Policy(crest::v1::PINNING_MODE_UNSPECIFIED), EightNodes()),
              ElementsAre());
}

TEST(PinningTest, CpuListIsLimitedToOnlineCpus) {
  Topology t = EightNodes();
  t.online_cpus = {0, 1, 2, 3};
  auto cpus = ResolvePinning(Policy(crest::v1::PINNING_CPU_LIST, "2-5"), t);
  CREST_ASSERT_OK(cpus);
  EXPECT_THAT(*cpus, ElementsAre(2, 3));
  EXPECT_THAT(ResolvePinning(Policy(crest::v1::PINNING_CPU_LIST, "100-101"), t),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no online CPU")));
}

TEST(PinningTest, BadPoliciesAreInvalid) {
  EXPECT_THAT(ResolvePinning(Policy(crest::v1::PINNING_CPU_LIST, "3-1"), EightNodes()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pinning.cpu_list")));
  EXPECT_THAT(ResolvePinning(Policy(crest::v1::PINNING_CPU_LIST, ""), EightNodes()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("required")));
  EXPECT_THAT(ResolvePinning(Policy(crest::v1::PINNING_NONE, "1"), EightNodes()),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ResolvePinning(Policy(static_cast<crest::v1::PinningMode>(42)), EightNodes()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("pinning.mode")));
}

TEST(PinningTest, OddNumaWithoutOddNodesFails) {
  Topology t;
  t.numa_nodes = {{0, {0, 1}}};
  t.online_cpus = {0, 1};
  EXPECT_THAT(ResolvePinning(Policy(crest::v1::PINNING_ODD_NUMA), t),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no odd NUMA node")));
}

// The fake topology maps node0 -> cpu0, node1 -> cpu1 onto this machine's
// CPUs; odd-numa must put a real child on CPU 1 only.
TEST(PinningTest, RealChildIsPinnedToOddNodeAndVerified) {
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof(mine), &mine), 0);
  if (!CPU_ISSET(0, &mine) || !CPU_ISSET(1, &mine)) GTEST_SKIP() << "needs CPUs 0 and 1";
  crest::testing::TempDir dir;
  testing::WriteFakeSysfs(dir.path(), {});
  auto topology = ReadTopology(dir.path());
  CREST_ASSERT_OK(topology);
  auto cpus = ResolvePinning(Policy(crest::v1::PINNING_ODD_NUMA), *topology);
  CREST_ASSERT_OK(cpus);
  EXPECT_THAT(*cpus, ElementsAre(1));

  SpawnOptions options;
  options.argv = {"/bin/sleep", "30"};
  options.cpus = *cpus;
  auto child = Subprocess::Spawn(options);
  CREST_ASSERT_OK(child);
  CREST_EXPECT_OK(VerifyAffinity((*child)->pid(), {1}));
  EXPECT_THAT(*ReadAllowedCpus((*child)->pid()), ElementsAre(1));
  EXPECT_THAT(VerifyAffinity((*child)->pid(), {0, 1}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("expected 0-1")));
}

}  // namespace
}  // namespace crest::agent
