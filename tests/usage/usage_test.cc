// Every shipped binary, run as a real process: --help prints real usage and
// exits 0; an unknown flag is one line naming it, exit 2, even when required
// flags are missing too.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "common/testing/test_paths.h"
#include "loadgen/mindie_adapter.h"

namespace crest {
namespace {

using ::crest::loadgen::ProcessResult;
using ::crest::testing::IsOk;
using ::testing::HasSubstr;
using ::testing::StartsWith;

ProcessResult RunBinary(const std::string& binary, const std::string& flag) {
  loadgen::SubprocessRunner runner;
  absl::StatusOr<ProcessResult> r = runner.Run({testing::BinDir() + "/" + binary, flag}, {});
  EXPECT_THAT(r, IsOk());
  return r.ok() ? *r : ProcessResult{-1, ""};
}

class UsageTest : public ::testing::TestWithParam<const char*> {};

TEST_P(UsageTest, UnknownFlagIsOneLineNamingItAndExitsTwo) {
  ProcessResult r = RunBinary(GetParam(), "--bogus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.output, StartsWith(std::string(GetParam()) + ": "));
  EXPECT_THAT(r.output, HasSubstr("--bogus"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST_P(UsageTest, HelpPrintsUsageAndExitsZero) {
  ProcessResult r = RunBinary(GetParam(), "--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("Usage:"));
  EXPECT_THAT(r.output, HasSubstr("--help"));
  EXPECT_GT(std::count(r.output.begin(), r.output.end(), '\n'), 5) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Binaries, UsageTest,
                         ::testing::Values("crest-controller", "crest-agent", "crest",
                                           "crest-bench", "mindie-sim", "npu-smi-sim"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace crest
