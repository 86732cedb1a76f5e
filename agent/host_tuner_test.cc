#include "agent/host_tuner.h"

#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "agent/testing/fake_sysfs.h"
#include "common/testing/status_matchers.h"
#include "common/testing/test_ca.h"

namespace crest::agent {
namespace {

using crest::v1::SETTING_SUPPORTED;
using crest::v1::SETTING_UNSUPPORTED;
using testing::ReadFakeFile;

class HostTunerTest : public ::testing::Test {
 protected:
  std::string Gov(int cpu) {
    return ReadFakeFile(
        absl::StrCat(sysfs_, "/devices/system/cpu/cpu", cpu, "/cpufreq/scaling_governor"));
  }
  std::string Thp() { return ReadFakeFile(sysfs_ + "/kernel/mm/transparent_hugepage/enabled"); }

  crest::testing::TempDir dir_;
  std::string sysfs_ = dir_.path() + "/sys";
  std::string state_ = dir_.path() + "/state";
};

TEST_F(HostTunerTest, ReadsState) {
  testing::WriteFakeSysfs(sysfs_, {});
  HostTuner tuner(sysfs_, state_, nullptr);
  crest::v1::HostState s = tuner.State();
  EXPECT_EQ(s.governor(), "powersave");
  EXPECT_EQ(s.governor_support(), SETTING_SUPPORTED);
  EXPECT_EQ(s.governor_per_cpu().size(), 2u);
  EXPECT_EQ(s.thp(), "madvise");
  EXPECT_EQ(s.thp_support(), SETTING_SUPPORTED);
  EXPECT_FALSE(s.tuned());
  EXPECT_THAT(tuner.AvailableGovernors(), ::testing::ElementsAre("performance", "powersave"));
}

TEST_F(HostTunerTest, ApplyRecordsFirstThenRestorePutsBack) {
  testing::WriteFakeSysfs(sysfs_, {});
  HostTuner tuner(sysfs_, state_, nullptr);
  auto reply = tuner.Apply("performance", "always");
  CREST_ASSERT_OK(reply);
  ASSERT_EQ(reply->results_size(), 2);
  EXPECT_EQ(reply->results(0).previous(), "powersave");
  EXPECT_EQ(reply->results(0).current(), "performance");
  EXPECT_TRUE(reply->results(0).changed());
  EXPECT_EQ(reply->results(1).previous(), "madvise");
  EXPECT_EQ(reply->results(1).current(), "always");
  EXPECT_TRUE(reply->host().tuned());
  EXPECT_EQ(Gov(0), "performance");
  EXPECT_EQ(Gov(1), "performance");
  EXPECT_EQ(Thp(), "always");
  EXPECT_TRUE(std::filesystem::exists(tuner.record_path()));

  // A second tuning keeps the record of the state before the first one.
  CREST_ASSERT_OK(tuner.Apply("powersave", "never"));
  auto restored = tuner.Restore();
  CREST_ASSERT_OK(restored);
  EXPECT_EQ(Gov(0), "powersave");
  EXPECT_EQ(Thp(), "madvise");
  EXPECT_FALSE(restored->host().tuned());
  EXPECT_FALSE(std::filesystem::exists(tuner.record_path()));
  // Nothing recorded: restore does nothing.
  auto again = tuner.Restore();
  CREST_ASSERT_OK(again);
  EXPECT_EQ(again->results_size(), 0);
}

TEST_F(HostTunerTest, RestoreFromARecordLeftByAnotherInstance) {
  testing::WriteFakeSysfs(sysfs_, {});
  {
    HostTuner tuner(sysfs_, state_, nullptr);
    CREST_ASSERT_OK(tuner.Apply("performance", ""));
  }
  HostTuner next(sysfs_, state_, nullptr);
  EXPECT_TRUE(next.HasRecord());
  CREST_ASSERT_OK(next.Restore());
  EXPECT_EQ(Gov(1), "powersave");
  EXPECT_EQ(Thp(), "always [madvise] never");  // never touched
}

TEST_F(HostTunerTest, UnsupportedSettingsAreReportedNotFailed) {
  testing::FakeSysfsSpec spec;
  spec.cpufreq = false;
  spec.thp = false;
  testing::WriteFakeSysfs(sysfs_, spec);
  HostTuner tuner(sysfs_, state_, nullptr);
  auto reply = tuner.Apply("performance", "always");
  CREST_ASSERT_OK(reply);
  ASSERT_EQ(reply->results_size(), 2);
  EXPECT_EQ(reply->results(0).support(), SETTING_UNSUPPORTED);
  EXPECT_THAT(reply->results(0).message(), ::testing::HasSubstr("no cpufreq"));
  EXPECT_FALSE(reply->results(0).changed());
  EXPECT_EQ(reply->results(1).support(), SETTING_UNSUPPORTED);
  EXPECT_THAT(reply->results(1).message(), ::testing::HasSubstr("transparent"));
  EXPECT_FALSE(reply->host().tuned());
  EXPECT_FALSE(std::filesystem::exists(tuner.record_path()));
}

TEST_F(HostTunerTest, OnlyThpSupportedStillTunesThp) {
  testing::FakeSysfsSpec spec;
  spec.cpufreq = false;
  testing::WriteFakeSysfs(sysfs_, spec);
  HostTuner tuner(sysfs_, state_, nullptr);
  auto reply = tuner.Apply("performance", "always");
  CREST_ASSERT_OK(reply);
  EXPECT_EQ(reply->results(0).support(), SETTING_UNSUPPORTED);
  EXPECT_EQ(reply->results(1).support(), SETTING_SUPPORTED);
  EXPECT_EQ(Thp(), "always");
}

TEST_F(HostTunerTest, CpupowerFallbackWhenSysfsLacksCpufreq) {
  testing::FakeSysfsSpec spec;
  spec.cpufreq = false;
  testing::WriteFakeSysfs(sysfs_, spec);
  std::string current = "powersave";
  std::vector<std::vector<std::string>> calls;
  auto runner = [&](const std::vector<std::string>& args) -> absl::StatusOr<CommandOutput> {
    calls.push_back(args);
    CommandOutput out;
    if (args.size() >= 4 && args[2] == "frequency-info" && args[3] == "-p") {
      for (int cpu = 0; cpu < 2; ++cpu) {
        absl::StrAppend(&out.output, "analyzing CPU ", cpu,
                        ":\n  current policy: frequency should be within 1 and 2.\n"
                        "                  The governor \"",
                        current, "\" may decide which speed to use\n");
      }
    } else if (args.size() >= 2 && args[1] == "-g") {
      out.output = "analyzing CPU 0:\n  available cpufreq governors: performance powersave\n";
    } else if (args.size() == 5 && args[2] == "frequency-set") {
      current = args[4];
    }
    return out;
  };
  HostTuner tuner(sysfs_, state_, runner);
  EXPECT_EQ(tuner.State().governor(), "powersave");
  EXPECT_THAT(tuner.AvailableGovernors(), ::testing::ElementsAre("performance", "powersave"));
  auto reply = tuner.Apply("performance", "");
  CREST_ASSERT_OK(reply);
  EXPECT_EQ(reply->results(0).support(), SETTING_SUPPORTED);
  EXPECT_EQ(reply->results(0).current(), "performance");
  EXPECT_EQ(current, "performance");
  CREST_ASSERT_OK(tuner.Restore());
  EXPECT_EQ(current, "powersave");
}

TEST_F(HostTunerTest, WriteFailureIsAnErrorAfterTheRecord) {
  testing::WriteFakeSysfs(sysfs_, {});
  // An attribute that reads but refuses writes (even for root).
  std::string gov = sysfs_ + "/devices/system/cpu/cpu1/cpufreq/scaling_governor";
  HostTuner tuner(sysfs_, state_, nullptr);
  std::filesystem::remove(gov);
  std::filesystem::create_symlink("/proc/version", gov);
  EXPECT_THAT(tuner.Apply("performance", ""),
              crest::testing::StatusIs(absl::StatusCode::kFailedPrecondition,
                                       ::testing::HasSubstr("scaling_governor")));
  // The record was written first, so a restore can still put CPU 0 back.
  EXPECT_TRUE(tuner.HasRecord());
}

TEST(ParseBracketedModeTest, Forms) {
  EXPECT_EQ(ParseBracketedMode("always [madvise] never"), "madvise");
  EXPECT_EQ(ParseBracketedMode("[always] madvise never\n"), "always");
  EXPECT_EQ(ParseBracketedMode("never\n"), "never");
}

}  // namespace
}  // namespace crest::agent
